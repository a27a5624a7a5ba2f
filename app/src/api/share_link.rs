//! `load_share_link`: what a share link (`/s/{token}`) shows.

use leptos::prelude::*;

use super::ShareLinkLog;

/// What a share link shows. (Its endpoint keeps the name it was published
/// under.)
#[server(prefix = "/api", endpoint = "load_shared")]
pub async fn load_share_link(token: String) -> Result<ShareLinkLog, ServerFnError> {
    use super::ports::{ArcSessionLogs, ArcShareLinkFiles, LogError, set_status};

    let logs = use_context::<ArcSessionLogs>()
        .ok_or_else(|| ServerFnError::new("the session store is not configured"))?;
    let mut log = logs.shared(&token).await.map_err(|err| {
        set_status(&err);
        ServerFnError::new(match err {
            LogError::Unavailable => err.to_string(),
            _ => "this link does not exist or was revoked".to_string(),
        })
    })?;
    if let Some(files) = use_context::<ArcShareLinkFiles>() {
        log.files = files.files(&token).await;
    }
    Ok(log)
}
