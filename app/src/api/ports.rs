//! The ports the server functions call (server only). The server crate
//! implements each trait and provides it as context, behind an `Arc`; the
//! `Arc*` aliases name the type that travels in context.

use std::sync::Arc;

use super::{
    FileItem, LoadError, ModelChoices, OwnerId, SessionId, SessionPage, SessionSummary,
    ShareLinkLog, ShareToken,
};
use crate::protocol::SandboxKind;

/// Who is asking: the owner id the server put in the request's
/// extensions (from the owner cookie, or an API key later).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Viewer(pub OwnerId);

/// The account menu of the request's viewer (set by the server's owner
/// middleware beside [`Viewer`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ViewerAccount(pub super::AccountMenu);

/// The request's account menu; the default (nobody, no sign-in) without one.
pub fn viewer_account() -> super::AccountMenu {
    leptos::prelude::use_context::<http::request::Parts>()
        .and_then(|parts| parts.extensions.get::<ViewerAccount>().cloned())
        .map(|ViewerAccount(menu)| menu)
        .unwrap_or_default()
}

/// Why a session cannot be read. (An id that does not parse never gets
/// this far: the server functions refuse it.)
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum LogError {
    /// No such session, or not the viewer's: the two look the same.
    #[error("there is no such session, or it is not yours")]
    NotFound,
    #[error("the session store is unavailable")]
    Unavailable,
}

impl From<LogError> for LoadError {
    fn from(err: LogError) -> Self {
        match err {
            LogError::NotFound => Self::NotFound,
            LogError::Unavailable => Self::Unavailable,
        }
    }
}

/// Read access to sessions.
#[async_trait::async_trait]
pub trait SessionPages: Send + Sync + 'static {
    /// A session of the viewer's.
    async fn session(
        &self,
        viewer: OwnerId,
        session_id: SessionId,
    ) -> Result<SessionPage, LogError>;
    /// The viewer's sessions that have begun, most recent first.
    async fn sessions(&self, viewer: OwnerId) -> Result<Vec<SessionSummary>, LogError>;
    /// What a share link shows; `NotFound` for a revoked or unknown link.
    async fn shared(&self, token: &ShareToken) -> Result<ShareLinkLog, LogError>;
}

/// The session logs port, as it travels in Leptos context.
pub type ArcSessionPages = Arc<dyn SessionPages>;

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
    fn chosen(&self, session_id: SessionId) -> Option<SandboxKind>;
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
    async fn files(&self, token: &ShareToken) -> Vec<FileItem>;
}

/// The share link files port, as it travels in Leptos context.
pub type ArcShareLinkFiles = Arc<dyn ShareLinkFiles>;

/// The largest file a page may upload, in bytes.
#[derive(Clone, Copy, Debug, Default)]
pub struct UploadLimit(pub u64);

/// The viewer of the request being handled (set by the server's owner
/// middleware); `None` without one, who owns nothing.
pub fn viewer() -> Option<OwnerId> {
    leptos::prelude::use_context::<http::request::Parts>()
        .and_then(|parts| parts.extensions.get::<Viewer>().copied())
        .map(|Viewer(id)| id)
}

/// Sets the response's status for a page whose data could not be read:
/// 404 for what is not there (or not the viewer's, or not an id at all),
/// 503 when the store is down.
pub fn set_status(err: &LoadError) {
    let status = match err {
        LoadError::InvalidId | LoadError::NotFound | LoadError::LinkNotFound => {
            http::StatusCode::NOT_FOUND
        }
        LoadError::Unavailable => http::StatusCode::SERVICE_UNAVAILABLE,
        LoadError::NotConfigured | LoadError::Unreachable(_) | LoadError::NotWithPage => return,
    };
    if let Some(response) = leptos::prelude::use_context::<leptos_axum::ResponseOptions>() {
        response.set_status(status);
    }
}
