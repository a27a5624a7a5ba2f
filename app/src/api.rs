//! Server functions, and the ports on the server that they call.
//!
//! The server crate provides an implementation of each port as context; the
//! functions here only parse, call the port and map the result.

use leptos::prelude::*;
use serde::{Deserialize, Serialize};

use crate::protocol::SessionEvent;

/// Everything needed to render a session's notebook.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionLog {
    pub session_id: String,
    /// The first question, or the owner's name for it; empty before any.
    pub title: String,
    pub events: Vec<SessionEvent>,
    pub models: ModelChoices,
    /// The sandbox backends on offer (`jail`, `e2b`, `browser`), the
    /// default first.
    #[serde(default)]
    pub backends: Vec<String>,
    /// The backend the session's programs run on now (what the picker
    /// shows); empty for the default.
    #[serde(default)]
    pub backend: String,
    /// Where the page loads Pyodide from, when `browser` is on offer.
    #[serde(default)]
    pub pyodide_url: Option<String>,
    /// The largest file the page may upload, in bytes (0: no limit known).
    #[serde(default)]
    pub upload_limit: u64,
    /// The live share link's path (`/s/…`), if the session is shared.
    pub share_path: Option<String>,
    /// The link offers the session's files too.
    #[serde(default)]
    pub share_files: bool,
    /// The viewer's sessions, for the sidebar, most recent first.
    pub sessions: Vec<SessionSummary>,
}

/// A session as the sidebar lists it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionSummary {
    pub id: String,
    pub title: String,
    pub updated_ms: u64,
}

/// A shared session, read-only: what its link shows.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SharedLog {
    pub token: String,
    pub title: String,
    pub events: Vec<SessionEvent>,
    /// The session's files, when the owner shared them with the link (as
    /// they were then).
    #[serde(default)]
    pub files: Vec<crate::files::FileItem>,
}

/// The models a person can pick from.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ModelChoices {
    /// `openai`, `embedded` or `scripted`.
    pub backend: String,
    /// The model used when none is picked.
    pub default_model: String,
    /// Every model the backend lists, the default among them.
    pub models: Vec<String>,
    /// Why the list could not be read, if it could not (the server is down,
    /// the model file is missing...).
    pub problem: Option<String>,
}

/// The longest title kept; longer ones are cut at a character boundary.
pub const MAX_TITLE_CHARS: usize = 80;

/// A title from a question: its first line that is not a code fence,
/// trimmed and cut to [`MAX_TITLE_CHARS`].
pub fn title_from(text: &str) -> String {
    let line = text
        .lines()
        .map(str::trim)
        .find(|line| !line.is_empty() && !line.starts_with("```"))
        .unwrap_or("");
    let mut title: String = line.chars().take(MAX_TITLE_CHARS).collect();
    if line.chars().count() > MAX_TITLE_CHARS {
        title.pop();
        title.push('…');
    }
    title
}

/// A title to show: the stored one, or a stand-in for a session that has none.
pub fn display_title(title: &str) -> &str {
    if title.trim().is_empty() {
        "Untitled session"
    } else {
        title
    }
}

#[cfg(feature = "ssr")]
pub mod ports {
    use crate::protocol::SessionEvent;

    /// Who is asking: the owner id the server put in the request's
    /// extensions (from the owner cookie, or an API key later).
    #[derive(Clone, Debug, PartialEq, Eq)]
    pub struct Viewer(pub String);

    /// Why a session cannot be read.
    #[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
    pub enum LogError {
        #[error("that is not a session id")]
        InvalidId,
        /// No such session, or not the viewer's: the two look the same.
        #[error("there is no such session, or it is not yours")]
        NotFound,
        #[error("the session store is unavailable")]
        Unavailable,
    }

    /// One of the viewer's sessions, as its page needs it.
    #[derive(Clone, Debug, PartialEq, Eq)]
    pub struct OwnedSession {
        pub title: String,
        pub events: Vec<SessionEvent>,
        pub share_path: Option<String>,
        pub share_files: bool,
    }

    /// Read access to sessions.
    #[async_trait::async_trait]
    pub trait SessionLogs: Send + Sync + 'static {
        /// A session of the viewer's.
        async fn session(&self, viewer: &str, session_id: &str) -> Result<OwnedSession, LogError>;
        /// The viewer's sessions that have begun, most recent first.
        async fn sessions(&self, viewer: &str) -> Result<Vec<super::SessionSummary>, LogError>;
        /// What a share link shows; `NotFound` for a revoked or unknown link.
        async fn shared(&self, token: &str) -> Result<super::SharedLog, LogError>;
    }

    /// How the port travels in Leptos context.
    pub type SharedSessionLogs = std::sync::Arc<dyn SessionLogs>;

    /// The models on offer, as last read from the backend.
    pub trait ModelCatalog: Send + Sync + 'static {
        fn choices(&self) -> super::ModelChoices;
    }

    pub type SharedModelCatalog = std::sync::Arc<dyn ModelCatalog>;

    /// Where a notebook's code may run.
    pub trait SandboxChoices: Send + Sync + 'static {
        /// The backends a notebook may pick (`jail`, `e2b`, `browser`), the
        /// default first.
        fn backends(&self) -> Vec<String>;
        /// The backend the session's programs run on now.
        fn chosen(&self, session_id: &str) -> Option<String>;
        /// Where pages load Pyodide from, when `browser` is on offer.
        fn pyodide_url(&self) -> Option<String>;
    }

    pub type SharedSandboxChoices = std::sync::Arc<dyn SandboxChoices>;

    /// The files share links offer.
    #[async_trait::async_trait]
    pub trait SharedFiles: Send + Sync + 'static {
        /// What the link `token` offers (nothing, unless its owner shared
        /// the session's files with it).
        async fn files(&self, token: &str) -> Vec<crate::files::FileItem>;
    }

    pub type SharedFileLists = std::sync::Arc<dyn SharedFiles>;

    /// The largest file a page may upload, in bytes.
    #[derive(Clone, Copy, Debug, Default)]
    pub struct UploadLimit(pub u64);

    /// The viewer of the request being handled (set by the server's owner
    /// middleware), or an empty id that owns nothing.
    pub fn viewer() -> String {
        leptos::prelude::use_context::<http::request::Parts>()
            .and_then(|parts| parts.extensions.get::<Viewer>().cloned())
            .map(|Viewer(id)| id)
            .unwrap_or_default()
    }

    /// Sets the response's status for a failed read.
    pub fn set_status(err: &LogError) {
        if let Some(response) = leptos::prelude::use_context::<leptos_axum::ResponseOptions>() {
            response.set_status(match err {
                LogError::InvalidId | LogError::NotFound => http::StatusCode::NOT_FOUND,
                LogError::Unavailable => http::StatusCode::SERVICE_UNAVAILABLE,
            });
        }
    }
}

/// A session's history, for the first render and for pages that load it later.
#[server(prefix = "/api", endpoint = "load_session")]
pub async fn load_session(session_id: String) -> Result<SessionLog, ServerFnError> {
    use ports::{SharedModelCatalog, SharedSandboxChoices, SharedSessionLogs, set_status, viewer};

    let logs = use_context::<SharedSessionLogs>()
        .ok_or_else(|| ServerFnError::new("the session store is not configured"))?;
    let models = use_context::<SharedModelCatalog>()
        .map(|catalog| catalog.choices())
        .unwrap_or_default();
    let sandboxes = use_context::<SharedSandboxChoices>();
    let backends = sandboxes.as_ref().map(|s| s.backends()).unwrap_or_default();
    let backend = sandboxes
        .as_ref()
        .and_then(|s| s.chosen(&session_id))
        .unwrap_or_default();
    let pyodide_url = sandboxes.as_ref().and_then(|s| s.pyodide_url());
    let upload_limit = use_context::<ports::UploadLimit>().map_or(0, |l| l.0);
    let viewer = viewer();
    let read = async {
        let session = logs.session(&viewer, &session_id).await?;
        let sessions = logs.sessions(&viewer).await?;
        Ok::<_, ports::LogError>((session, sessions))
    };
    match read.await {
        Ok((session, sessions)) => Ok(SessionLog {
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
        }),
        Err(err) => {
            set_status(&err);
            Err(ServerFnError::new(err.to_string()))
        }
    }
}

/// What a share link shows.
#[server(prefix = "/api", endpoint = "load_shared")]
pub async fn load_shared(token: String) -> Result<SharedLog, ServerFnError> {
    use ports::{SharedSessionLogs, set_status};

    let logs = use_context::<SharedSessionLogs>()
        .ok_or_else(|| ServerFnError::new("the session store is not configured"))?;
    let mut log = logs.shared(&token).await.map_err(|err| {
        set_status(&err);
        ServerFnError::new(match err {
            ports::LogError::Unavailable => err.to_string(),
            _ => "this link does not exist or was revoked".to_string(),
        })
    })?;
    if let Some(files) = use_context::<ports::SharedFileLists>() {
        log.files = files.files(&token).await;
    }
    Ok(log)
}
