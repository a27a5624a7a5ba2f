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

/// The session route's resource: what [`load_session`] answered, written
/// into the page by the server as serde writes it and read by the page by
/// hand ([`crate::reader::session_page_data`]), so that the bundle carries
/// no serde readers for the page's data.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SessionLoad(pub Result<SessionPageData, LoadError>);

impl std::fmt::Display for SessionLoad {
    /// `{"Ok": …}` or `{"Err": …}`, as serde writes a `Result`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let text = serde_json::to_string(&self.0).map_err(|_| std::fmt::Error)?;
        f.write_str(&text)
    }
}

impl std::str::FromStr for SessionLoad {
    type Err = crate::reader::Unreadable;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        use crate::reader::{Unreadable, session_page_data};
        let value: serde_json::Value =
            serde_json::from_str(text).map_err(|_| Unreadable("page data"))?;
        if let Some(data) = value.get("Ok") {
            return session_page_data(data).map(|d| Self(Ok(d)));
        }
        let err = value.get("Err").ok_or(Unreadable("page data"))?;
        let unit = |name: &str| match name {
            "InvalidId" => Some(LoadError::InvalidId),
            "NotFound" => Some(LoadError::NotFound),
            "LinkNotFound" => Some(LoadError::LinkNotFound),
            "Unavailable" => Some(LoadError::Unavailable),
            "NotConfigured" => Some(LoadError::NotConfigured),
            "NotWithPage" => Some(LoadError::NotWithPage),
            _ => None,
        };
        let read = match err {
            serde_json::Value::String(name) => unit(name),
            other => other
                .get("Unreachable")
                .and_then(serde_json::Value::as_str)
                .map(|detail| LoadError::Unreachable(detail.to_string())),
        };
        read.map(|e| Self(Err(e))).ok_or(Unreadable("Err"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn page() -> SessionPageData {
        SessionPageData {
            session_id: "s".into(),
            title: "t".into(),
            events: Vec::new(),
            models: Default::default(),
            backends: vec![runcell_protocol::SandboxKind::Jail],
            backend: None,
            pyodide_url: None,
            upload_limit: 7,
            share_path: None,
            share_files: false,
            sessions: Vec::new(),
            account: Default::default(),
        }
    }

    #[test]
    fn the_resource_reads_back_what_the_server_wrote() {
        let errors = [
            LoadError::InvalidId,
            LoadError::NotFound,
            LoadError::LinkNotFound,
            LoadError::Unavailable,
            LoadError::NotConfigured,
            LoadError::NotWithPage,
            LoadError::Unreachable("refused".into()),
        ];
        let loads = std::iter::once(SessionLoad(Ok(page())))
            .chain(errors.into_iter().map(|e| SessionLoad(Err(e))));
        for load in loads {
            let written = load.to_string();
            assert_eq!(
                written.parse::<SessionLoad>().as_ref(),
                Ok(&load),
                "{written}"
            );
        }
    }

    #[test]
    fn a_broken_resource_is_refused() {
        for text in [
            "",
            "[]",
            r#"{"Err": "Gone"}"#,
            r#"{"Ok": {"title": "t"}}"#,
            r#"{"Err": {"Unreachable": 3}}"#,
        ] {
            assert!(text.parse::<SessionLoad>().is_err(), "{text}");
        }
    }
}
