//! `load_share_link`: what a share link (`/s/{token}`) shows.

use leptos::prelude::*;

use super::{LoadError, ShareLinkLog};

/// What a share link shows. (Its endpoint keeps the name it was published
/// under.)
#[server(prefix = "/api", endpoint = "load_shared")]
pub async fn load_share_link(token: String) -> Result<ShareLinkLog, LoadError> {
    use super::ports::{ArcSessionLogs, ArcShareLinkFiles, LogError, set_status};

    let logs = use_context::<ArcSessionLogs>().ok_or(LoadError::NotConfigured)?;
    let mut log = logs.shared(&token).await.map_err(|err| {
        set_status(&err);
        match err {
            LogError::Unavailable => LoadError::Unavailable,
            LogError::InvalidId | LogError::NotFound => LoadError::LinkNotFound,
        }
    })?;
    if let Some(files) = use_context::<ArcShareLinkFiles>() {
        log.files = files.files(&token).await;
    }
    Ok(log)
}
