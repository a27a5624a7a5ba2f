//! The ports the server functions call (server only). The server crate
//! implements each trait and provides it as context, behind an `Arc`; the
//! `Arc*` aliases name the type that travels in context.

use std::sync::Arc;

use super::{FileItem, LoadError, ModelChoices, SessionSummary, ShareLinkLog};
use crate::protocol::{SandboxKind, SessionEvent};

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

impl From<LogError> for LoadError {
    fn from(err: LogError) -> Self {
        match err {
            LogError::InvalidId => Self::InvalidId,
            LogError::NotFound => Self::NotFound,
            LogError::Unavailable => Self::Unavailable,
        }
    }
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
    async fn sessions(&self, viewer: &str) -> Result<Vec<SessionSummary>, LogError>;
    /// What a share link shows; `NotFound` for a revoked or unknown link.
    async fn shared(&self, token: &str) -> Result<ShareLinkLog, LogError>;
}

/// The session logs port, as it travels in Leptos context.
pub type ArcSessionLogs = Arc<dyn SessionLogs>;

/// The models on offer, as last read from the backend.
pub trait ModelCatalog: Send + Sync + 'static {
    fn choices(&self) -> ModelChoices;
}

/// The model catalog port, as it travels in Leptos context.
pub type ArcModelCatalog = Arc<dyn ModelCatalog>;

/// Where a notebook's code may run.
pub trait SandboxChoices: Send + Sync + 'static {
    /// The backends a notebook may pick, the default first.
    fn backends(&self) -> Vec<SandboxKind>;
    /// The backend the session's programs run on now.
    fn chosen(&self, session_id: &str) -> Option<SandboxKind>;
    /// Where pages load Pyodide from, when `browser` is on offer.
    fn pyodide_url(&self) -> Option<String>;
}

/// The sandbox choices port, as it travels in Leptos context.
pub type ArcSandboxChoices = Arc<dyn SandboxChoices>;

/// The files share links offer.
#[async_trait::async_trait]
pub trait ShareLinkFiles: Send + Sync + 'static {
    /// What the link `token` offers (nothing, unless its owner shared
    /// the session's files with it).
    async fn files(&self, token: &str) -> Vec<FileItem>;
}

/// The share link files port, as it travels in Leptos context.
pub type ArcShareLinkFiles = Arc<dyn ShareLinkFiles>;

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
