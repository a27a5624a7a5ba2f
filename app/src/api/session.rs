//! `load_session`: a session's page.

use leptos::prelude::*;

use super::{LoadError, SessionPageData};

/// A session's history, for the first render and for pages that load it later.
#[server(prefix = "/api", endpoint = "load_session")]
pub async fn load_session(session_id: String) -> Result<SessionPageData, LoadError> {
    use super::SessionId;
    use super::ports::{
        ArcModelCatalog, ArcSandboxChoices, ArcSessionPages, LogError, UploadLimit, set_status,
        viewer, viewer_account,
    };

    let logs = use_context::<ArcSessionPages>().ok_or(LoadError::NotConfigured)?;
    let fail = |err: LoadError| {
        set_status(&err);
        err
    };
    // The route's id, parsed once: one that is not an id is a 404 page.
    let id: SessionId = session_id.parse().map_err(|_| fail(LoadError::InvalidId))?;
    let models = use_context::<ArcModelCatalog>()
        .map(|catalog| catalog.choices())
        .unwrap_or_default();
    let sandboxes = use_context::<ArcSandboxChoices>();
    let backends = sandboxes.as_ref().map(|s| s.backends()).unwrap_or_default();
    let backend = sandboxes.as_ref().and_then(|s| s.chosen(id));
    let pyodide_url = sandboxes.as_ref().and_then(|s| s.pyodide_url());
    let upload_limit = use_context::<UploadLimit>().map_or(0, |l| l.0);
    let read = async {
        // A request without a viewer owns nothing.
        let viewer = viewer().ok_or(LogError::NotFound)?;
        let session = logs.session(viewer, id).await?;
        let sessions = logs.sessions(viewer).await?;
        Ok::<_, LogError>((session, sessions))
    };
    match read.await {
        Ok((session, sessions)) => Ok(SessionPageData {
            session_id,
            title: session.title,
            events: session.events,
            models,
            backends,
            backend,
            pyodide_url,
            upload_limit,
            share_path: session.share_path,
            share_files: session.share_files,
            sessions,
            account: viewer_account(),
        }),
        Err(err) => Err(fail(err.into())),
    }
}
