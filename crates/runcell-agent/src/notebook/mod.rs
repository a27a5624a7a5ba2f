//! The notebook service: everything a person or a program does to a
//! notebook session, whichever way they reach it. The page's WebSocket, the
//! NDJSON routes under `/api/sessions`, the page's forms and the Leptos
//! server functions (through the page ports the server crate answers) parse what
//! they are sent, call one method here and map its result; none of them
//! reaches the hub, the store, the turn runner or the kernels itself.
//!
//! The order of the steps an action takes (the store, the live sessions,
//! the kernels' files) lives here, each with a plain Rust test
//! (`tests.rs`).

mod caps;
mod error;
mod figures;
mod files;
mod handover;
mod here;
mod history_import;
pub mod ipynb;
mod kernels;
mod pages;
pub mod remote;
mod sharing;

/// The largest notebook accepted.
pub const MAX_IMPORT_BYTES: usize = 20 * 1024 * 1024;

/// Why a notebook or a history file cannot be read.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("{0}")]
pub struct ImportError(String);

impl ImportError {
    pub fn new(what: impl Into<String>) -> Self {
        Self(what.into())
    }
}

#[cfg(test)]
mod tests;
mod turns;

use std::sync::Arc;

use tokio_util::sync::CancellationToken;

pub use error::NotebookError;
pub use figures::parse_figure_name;
pub use handover::{CODE_TTL_MS as HANDOVER_TTL_MS, Joined};
pub use kernels::{HeldKernel, HeldKernels};
pub use remote::serve_calls;
pub use turns::{AskedTurn, TurnEvents};

use crate::agent::{Kernels, TurnRunner};
use crate::session::{SessionChannel, SessionHub};
use runcell_protocol::{OwnerId, SessionId, ShareToken};
use runcell_sandbox::files::{Contents, FileEntry};
use runcell_store::{SessionRecord, ShareRecord, Store};

/// A session id as a request spells it. One that does not parse is "not
/// found", exactly like one that does not exist or is someone else's.
pub fn parse_session_id(raw: &str) -> Result<SessionId, NotebookError> {
    raw.parse().map_err(|_| NotebookError::not_found(raw))
}

/// A share link's token as a request spells it. One that does not parse
/// is a link that is gone, like a revoked one.
pub fn parse_link_token(raw: &str) -> Result<ShareToken, NotebookError> {
    raw.parse().map_err(|_| NotebookError::LinkGone)
}

/// Where a session's work is done: on this node, when it holds the
/// session ([`here::Here`]), or by the node that does, through the
/// cluster's calls ([`remote::There`]). [`Notebooks::holder`] chooses once
/// per request; each thing a page asks of a session is written once for
/// each place.
#[async_trait::async_trait]
trait Holder: Send + Sync {
    /// Checks `turn` and queues it as the session's next.
    async fn start(
        &self,
        turn: AskedTurn,
    ) -> Result<runcell_protocol::TurnId, crate::agent::TurnRefusal>;
    /// Stops the session's running turn and the turns waiting behind it
    /// (on another node, once the call reaches it).
    fn stop(&self);
    async fn select_branch(
        &self,
        turn: runcell_protocol::TurnId,
    ) -> Result<(), crate::agent::TurnRefusal>;
    async fn share(&self, files: bool) -> Result<ShareRecord, NotebookError>;
    async fn unshare(&self) -> Result<(), NotebookError>;
    async fn delete(&self) -> Result<(), NotebookError>;
    async fn list_files(&self) -> Result<Vec<FileEntry>, NotebookError>;
    async fn read_file(&self, path: &str) -> Result<(FileEntry, Vec<u8>), NotebookError>;
    async fn upload(
        &self,
        path: &str,
        bytes: Contents,
        overwrite: bool,
    ) -> Result<FileEntry, NotebookError>;
    async fn delete_file(&self, path: &str) -> Result<(), NotebookError>;
}

/// The notebook service.
pub struct Notebooks {
    hub: Arc<SessionHub>,
    runner: Arc<TurnRunner>,
    shutdown: CancellationToken,
    /// Where pages load Pyodide from, when the Browser sandbox is offered.
    pyodide_url: Option<String>,
    handovers: handover::Handovers,
    /// People's notebook caps.
    quotas: Option<Arc<dyn crate::session::quota::OwnerQuotas>>,
    /// Held while a capped owner's notebook is counted and made...
    notebook_locks: caps::OwnerLocks,
    /// ...and while their files are counted and an upload is put in.
    storage_locks: caps::OwnerLocks,
}

impl Notebooks {
    pub fn new(
        hub: Arc<SessionHub>,
        runner: Arc<TurnRunner>,
        shutdown: CancellationToken,
        pyodide_url: Option<String>,
    ) -> Self {
        Self {
            hub,
            runner,
            shutdown,
            pyodide_url,
            handovers: handover::Handovers::default(),
            quotas: None,
            notebook_locks: caps::OwnerLocks::default(),
            storage_locks: caps::OwnerLocks::default(),
        }
    }

    /// People keep at most the notebooks `quotas` allows them.
    pub fn with_quotas(mut self, quotas: Arc<dyn crate::session::quota::OwnerQuotas>) -> Self {
        self.quotas = Some(quotas);
        self
    }

    /// Where `channel`'s work is done: here, or on the node that holds it.
    fn holder<'a>(&'a self, channel: &'a Arc<SessionChannel>) -> Box<dyn Holder + 'a> {
        match channel.remote_holder() {
            Some(node) => Box::new(remote::There::new(self, node, channel.id())),
            None => Box::new(here::Here {
                notebooks: self,
                channel,
            }),
        }
    }

    fn kernels(&self) -> &Kernels {
        self.runner.agent().kernels()
    }

    fn store(&self) -> &Arc<dyn Store> {
        self.hub.store()
    }

    /// A new, empty session of `owner`'s, within the owner's rate and cap.
    pub async fn create(&self, owner: OwnerId) -> Result<Arc<SessionChannel>, NotebookError> {
        if self.shutdown.is_cancelled() {
            return Err(NotebookError::ShuttingDown);
        }
        let _room = self.notebook_room(owner).await?;
        Ok(self.hub.create(owner).await?)
    }

    /// `owner`'s session `id`. Someone else's is "not found", exactly like
    /// one that does not exist.
    pub async fn open_owned(
        &self,
        owner: OwnerId,
        id: SessionId,
    ) -> Result<Arc<SessionChannel>, NotebookError> {
        self.hub
            .open_owned(id, owner)
            .await?
            .ok_or_else(|| NotebookError::not_found(&id.to_string()))
    }

    /// `owner`'s sessions that have begun, most recent first.
    pub async fn list(&self, owner: OwnerId) -> Result<Vec<SessionRecord>, NotebookError> {
        Ok(self.store().sessions_of(owner).await?)
    }

    /// Gives the session the title `title` (cut as a question's would be);
    /// answers the title kept.
    pub async fn rename(
        &self,
        channel: &SessionChannel,
        title: &str,
    ) -> Result<String, NotebookError> {
        let title = runcell_store::title_from(title);
        if title.is_empty() {
            return Err(NotebookError::EmptyTitle);
        }
        self.store().rename_session(channel.id(), &title).await?;
        Ok(title)
    }

    /// Deletes the session: its turns stop and nothing new can start in it,
    /// its events and links go from the store, then its kernel and files.
    /// In that order: were the kernel dropped first, a turn started in the
    /// meantime would open a new one that nothing would ever close.
    pub async fn delete(&self, channel: &Arc<SessionChannel>) -> Result<(), NotebookError> {
        self.holder(channel).delete().await
    }

    /// How many sessions this server holds in memory.
    pub fn open_count(&self) -> usize {
        self.hub.len()
    }

    /// Resolves once every event published so far is stored.
    pub async fn flush(&self) {
        self.hub.flush().await;
    }
}
