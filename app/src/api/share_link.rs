//! `load_share_link`: what a share link (`/s/{token}`) shows.

use leptos::prelude::*;

use super::{LoadError, ShareLinkLog};

/// What a share link shows. (Its endpoint keeps the name it was published
/// under.)
#[server(prefix = "/api", endpoint = "load_shared")]
pub async fn load_share_link(token: String) -> Result<ShareLinkLog, LoadError> {
    use super::ShareToken;
    use super::ports::{ArcSessionPages, ArcShareLinkFiles, LogError, set_status};

    let logs = use_context::<ArcSessionPages>().ok_or(LoadError::NotConfigured)?;
    let fail = |err: LoadError| {
        set_status(&err);
        err
    };
    // The route's token, parsed once: one that is not a token is a link
    // that does not exist.
    let token: ShareToken = token.parse().map_err(|_| fail(LoadError::LinkNotFound))?;
    let mut log = logs.shared(&token).await.map_err(|err| {
        fail(match err {
            LogError::Unavailable => LoadError::Unavailable,
            LogError::NotFound => LoadError::LinkNotFound,
        })
    })?;
    if let Some(files) = use_context::<ArcShareLinkFiles>() {
        log.files = files.files(&token).await;
    }
    Ok(log)
}
