//! Share links: making, moving on and revoking one, what it offers, and
//! forking the session it shows.

use std::sync::Arc;

use super::remote::Call;
use super::{NotebookError, Notebooks};
use crate::clock::now_ms;
use crate::sandbox::files::FileEntry;
use crate::session::{OwnerId, SessionChannel, ShareToken};
use crate::store::ShareRecord;

impl Notebooks {
    /// The session's link (made, or moved on to include what happened
    /// since), with a copy of the session's files if `files`.
    ///
    /// The steps go in this order: what is queued is stored first, so the
    /// link shows what the owner sees; the copy of the files is made (or
    /// dropped) before the link says whether it has one.
    pub async fn share(
        &self,
        channel: &SessionChannel,
        files: bool,
    ) -> Result<ShareRecord, NotebookError> {
        if let Some(holder) = channel.remote_holder() {
            self.holder_does(&holder, channel, Call::Share { files })
                .await?;
            return self
                .store()
                .share_of(channel.id())
                .await?
                .ok_or_else(|| NotebookError::not_found(&channel.id().to_string()));
        }
        self.hub.flush().await;
        self.kernels().share_files(channel.id(), files).await?;
        let link = self
            .store()
            .share(channel.id(), channel.settled_seq(), files, now_ms())
            .await?;
        tracing::info!(session = %channel.id(), upto = link.upto_seq, files, "session shared");
        Ok(link)
    }

    /// Revokes the session's link (it is "not found" from now on), then
    /// drops the copy of the files it offered.
    pub async fn unshare(&self, channel: &SessionChannel) -> Result<(), NotebookError> {
        if let Some(holder) = channel.remote_holder() {
            return self.holder_does(&holder, channel, Call::Unshare).await;
        }
        self.store().revoke_shares(channel.id()).await?;
        self.kernels().share_files(channel.id(), false).await?;
        Ok(())
    }

    /// A new session of `owner`'s holding the cells the link `token` shows
    /// (cut short cells closed, the kernel marked as a fork's), and the
    /// files it offers, if it offers them.
    pub async fn fork(
        &self,
        owner: OwnerId,
        token: &ShareToken,
    ) -> Result<Arc<SessionChannel>, NotebookError> {
        let link = self
            .store()
            .shared(token)
            .await?
            .ok_or(NotebookError::LinkGone)?;
        let (record, events) = self
            .hub
            .link_events(&link)
            .await?
            .ok_or(NotebookError::LinkGone)?;
        let channel = self.hub.fork(owner, &record.title, token, events).await?;
        if link.files {
            self.kernels()
                .fork_files(link.session_id, channel.id())
                .await?;
        }
        tracing::info!(from = ?token, to = %channel.id(), files = link.files, "session forked");
        Ok(channel)
    }

    /// The live link behind `token`, if it offers files.
    async fn files_link(&self, token: &ShareToken) -> Option<ShareRecord> {
        match self.store().shared(token).await {
            Ok(Some(link)) if link.files => Some(link),
            Ok(_) => None,
            Err(err) => {
                tracing::warn!(%err, "a share link could not be read");
                None
            }
        }
    }

    /// The files the link `token` offers, as they were when shared; none
    /// when it offers none or is gone.
    pub async fn shared_files(&self, token: &ShareToken) -> Vec<FileEntry> {
        match self.files_link(token).await {
            Some(link) => self.kernels().shared_files(link.session_id).await,
            None => Vec::new(),
        }
    }

    /// A file the link `token` offers, as it was when shared.
    pub async fn read_shared_file(
        &self,
        token: &ShareToken,
        path: &str,
    ) -> Result<(FileEntry, Vec<u8>), NotebookError> {
        let link = self
            .files_link(token)
            .await
            .ok_or(NotebookError::NoSharedFiles)?;
        Ok(self
            .kernels()
            .read_shared_file(link.session_id, path)
            .await?)
    }
}
