//! The notebook service: everything a person or a program does to a
//! notebook session, whichever way they reach it. The page's WebSocket, the
//! NDJSON routes under `/api/sessions`, the page's forms and the Leptos
//! server functions (through the ports in `app::api::ports`) parse what
//! they are sent, call one method here and map its result; none of them
//! reaches the hub, the store, the turn runner or the kernels itself.
//!
//! The order of the steps an action takes (the store, the live sessions,
//! the kernels' files) lives here, each with a plain Rust test
//! (`tests.rs`).

mod error;
mod figures;
mod files;
mod handover;
mod history_import;
pub mod ipynb;
mod ports;
pub mod remote;
mod sharing;
#[cfg(test)]
mod tests;
mod turns;

use std::sync::Arc;

use tokio_util::sync::CancellationToken;

pub use error::NotebookError;
pub use figures::parse_figure_name;
pub use handover::{CODE_TTL_MS as HANDOVER_TTL_MS, Joined};
pub use remote::serve_calls;
pub use turns::{Turn, TurnEvents};

use crate::agent::{Kernels, TurnRunner};
use crate::session::{OwnerId, SessionChannel, SessionHub, SessionId, ShareToken};
use crate::store::{SessionRecord, Store};

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

/// The notebook service.
pub struct Notebooks {
    hub: Arc<SessionHub>,
    runner: Arc<TurnRunner>,
    shutdown: CancellationToken,
    /// Where pages load Pyodide from, when the Browser sandbox is offered.
    pyodide_url: Option<String>,
    handovers: handover::Handovers,
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
        }
    }

    fn kernels(&self) -> &Kernels {
        self.runner.agent().kernels()
    }

    fn store(&self) -> &Arc<dyn Store> {
        self.hub.store()
    }

    /// A new, empty session of `owner`'s, within the owner's rate.
    pub async fn create(&self, owner: OwnerId) -> Result<Arc<SessionChannel>, NotebookError> {
        if self.shutdown.is_cancelled() {
            return Err(NotebookError::ShuttingDown);
        }
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
        let title = crate::store::title_from(title);
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
    pub async fn delete(&self, channel: &SessionChannel) -> Result<(), NotebookError> {
        if let Some(holder) = channel.remote_holder() {
            self.holder_does(&holder, channel.id(), remote::Call::Delete)
                .await?;
            // Forgotten here too (the store has nothing left of it).
            self.hub.delete(channel.id()).await?;
            return Ok(());
        }
        self.hub.delete(channel.id()).await?;
        self.runner.agent().drop_kernel(channel.id()).await;
        tracing::info!(session = %channel.id(), "session deleted");
        Ok(())
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
