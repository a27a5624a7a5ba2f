//! A session's work done on this node, which holds it: what a page asks of
//! the session, and what another node's call asks of it.

use std::sync::Arc;

use async_trait::async_trait;
use runcell_core::clock::now_ms;
use runcell_protocol::notebook::Notebook;
use runcell_protocol::{EventBody, TurnId};

use super::turns::AskedTurn;
use super::{Holder, NotebookError, Notebooks};
use crate::agent::TurnRefusal;
use crate::session::SessionChannel;
use runcell_sandbox::files::{Contents, FileEntry};
use runcell_store::ShareRecord;

/// A session this node holds.
pub(super) struct Here<'a> {
    pub(super) notebooks: &'a Notebooks,
    pub(super) channel: &'a Arc<SessionChannel>,
}

#[async_trait]
impl Holder for Here<'_> {
    async fn start(&self, turn: AskedTurn) -> Result<TurnId, TurnRefusal> {
        let request = self.notebooks.prepare(self.channel, turn)?;
        self.notebooks.runner.start(self.channel, request)
    }

    fn stop(&self) {
        self.notebooks.runner.stop(self.channel);
    }

    async fn select_branch(&self, turn: TurnId) -> Result<(), TurnRefusal> {
        let channel = self.channel;
        let Ok(_idle) = channel.turn.try_lock() else {
            return Err(TurnRefusal::Busy);
        };
        let history = Notebook::from_events(&channel.log().events_after(0));
        if history.turn(turn).is_none_or(|t| t.status.is_none()) {
            return Err(TurnRefusal::UnknownTurn(format!(
                "turn {} is no finished turn of this session",
                turn.0
            )));
        }
        channel.log().publish(EventBody::BranchSelected { turn });
        Ok(())
    }

    async fn share(&self, files: bool) -> Result<ShareRecord, NotebookError> {
        let (notebooks, id) = (self.notebooks, self.channel.id());
        notebooks.hub.flush().await;
        notebooks.kernels().share_files(id, files).await?;
        let link = notebooks
            .store()
            .share(id, self.channel.log().settled_seq(), files, now_ms())
            .await?;
        tracing::info!(session = %id, upto = link.upto_seq, files, "session shared");
        Ok(link)
    }

    async fn unshare(&self) -> Result<(), NotebookError> {
        let id = self.channel.id();
        self.notebooks.store().revoke_shares(id).await?;
        self.notebooks.kernels().share_files(id, false).await?;
        Ok(())
    }

    async fn delete(&self) -> Result<(), NotebookError> {
        let id = self.channel.id();
        self.notebooks.hub.delete(id).await?;
        self.notebooks.runner.agent().drop_kernel(id).await;
        tracing::info!(session = %id, "session deleted");
        Ok(())
    }

    async fn list_files(&self) -> Result<Vec<FileEntry>, NotebookError> {
        Ok(self
            .notebooks
            .kernels()
            .list_files(self.channel.id())
            .await?)
    }

    async fn read_file(&self, path: &str) -> Result<(FileEntry, Vec<u8>), NotebookError> {
        Ok(self
            .notebooks
            .kernels()
            .read_file(self.channel.id(), path)
            .await?)
    }

    async fn upload(
        &self,
        path: &str,
        bytes: Contents,
        overwrite: bool,
    ) -> Result<FileEntry, NotebookError> {
        Ok(self
            .notebooks
            .kernels()
            .upload(self.channel.id(), path, bytes, overwrite)
            .await?)
    }

    async fn delete_file(&self, path: &str) -> Result<(), NotebookError> {
        Ok(self
            .notebooks
            .kernels()
            .delete_file(self.channel.id(), path)
            .await?)
    }
}
