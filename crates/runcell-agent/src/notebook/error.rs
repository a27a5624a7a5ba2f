//! Why a notebook action was refused or failed.

use crate::agent::{FilesError, TurnRefusal};
use crate::session::CreateError;
use runcell_store::StoreError;

/// The one error of the notebook service; the HTTP layer maps each variant
/// to a status once (`http::error`).
#[derive(Debug, thiserror::Error)]
pub enum NotebookError {
    /// No such session, or someone else's: the two look the same, so that
    /// ids cannot be probed.
    #[error("no session `{0}`")]
    NotFound(String),
    /// A share link that does not exist or was revoked.
    #[error("this link does not exist or was revoked")]
    LinkGone,
    /// A share link that offers no files (or is gone).
    #[error("this link offers no files")]
    NoSharedFiles,
    /// A hand-over code that is unknown, spent or lapsed.
    #[error(
        "this code is unknown, used or older than 10 minutes: make a new one in the browser (Use in a terminal)"
    )]
    HandoverGone,
    #[error("the title is empty")]
    EmptyTitle,
    /// An uploaded notebook that cannot be read.
    #[error("not a notebook runcell can read: {0}")]
    BadNotebook(String),
    #[error("the server is shutting down")]
    ShuttingDown,
    /// A limit of the person's account.
    #[error("{0}")]
    OverQuota(String),
    /// A turn that was not started.
    #[error(transparent)]
    Refused(#[from] TurnRefusal),
    #[error(transparent)]
    Create(#[from] CreateError),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Files(#[from] FilesError),
    /// The node holding the session (another one) did not answer.
    #[error("{0}")]
    Unreachable(String),
    /// The node holding the session failed to do it.
    #[error(transparent)]
    Remote(#[from] super::remote::Failure),
}

impl NotebookError {
    /// "Not found", quoting at most 40 characters of what was asked for.
    pub(super) fn not_found(id: &str) -> Self {
        Self::NotFound(id.chars().take(40).collect())
    }
}
