//! A session's files in `/home/user`, for its owner: list, read, upload,
//! delete, on whichever node holds the session.

use std::sync::Arc;

use tokio::sync::OwnedMutexGuard;

use super::{NotebookError, Notebooks};
use crate::session::SessionChannel;
use runcell_protocol::OwnerId;
use runcell_sandbox::files::{Contents, FileEntry};

impl Notebooks {
    /// The files in the session's home (its kernel's, or the kept ones
    /// while it has none).
    pub async fn list_files(
        &self,
        channel: &Arc<SessionChannel>,
    ) -> Result<Vec<FileEntry>, NotebookError> {
        self.holder(channel).list_files().await
    }

    /// One file's entry and bytes.
    pub async fn read_file(
        &self,
        channel: &Arc<SessionChannel>,
        path: &str,
    ) -> Result<(FileEntry, Vec<u8>), NotebookError> {
        self.holder(channel).read_file(path).await
    }

    /// Puts an uploaded file into the session (kept for every kernel it
    /// will have); an existing file is replaced only when `overwrite`.
    pub async fn upload(
        &self,
        channel: &Arc<SessionChannel>,
        path: &str,
        bytes: Contents,
        overwrite: bool,
    ) -> Result<FileEntry, NotebookError> {
        let _room = self.storage_room(channel, path, bytes.len()).await?;
        self.holder(channel).upload(path, bytes, overwrite).await
    }

    /// Bytes of files `owner`'s notebooks keep (their uploads and what
    /// their code wrote), across the notebooks they have asked something in.
    pub async fn kept_bytes_of(&self, owner: OwnerId) -> Result<u64, NotebookError> {
        let mut kept = 0u64;
        for session in self.store().sessions_of(owner).await? {
            kept = kept.saturating_add(self.kernels().kept_bytes(session.id).await.unwrap_or(0));
        }
        Ok(kept)
    }

    /// Room for `size` more bytes as `path` in what the owner's account may
    /// keep across all their notebooks (for a person with a limit; each
    /// notebook's own quota is its kernel's home, checked on saving), held
    /// until the guard is dropped, after the upload: uploads at once are
    /// counted one after another.
    async fn storage_room(
        &self,
        channel: &Arc<SessionChannel>,
        path: &str,
        size: u64,
    ) -> Result<Option<OwnedMutexGuard<()>>, NotebookError> {
        let owner = channel.owner();
        let Some(cap) = self.quotas.as_ref().and_then(|q| q.storage_cap(owner)) else {
            return Ok(None);
        };
        let held = self.storage_locks.lock(owner).await;
        let mut kept = self.kept_bytes_of(owner).await?;
        let listed = self.store().sessions_of(owner).await?;
        if !listed.iter().any(|s| s.id == channel.id()) {
            // A notebook not yet asked anything is not listed; its files count.
            kept = kept.saturating_add(self.kernels().kept_bytes(channel.id()).await.unwrap_or(0));
        }
        let replaced = self.kernels().kept_file_bytes(channel.id(), path).await;
        let after = kept.saturating_sub(replaced).saturating_add(size);
        if after > cap {
            let mib = |b: u64| b as f64 / (1024.0 * 1024.0);
            return Err(NotebookError::OverQuota(format!(
                "your notebooks keep {:.1} MiB of files and your account may keep {:.0} MiB: this file ({:.1} MiB) does not fit; delete some files first",
                mib(kept),
                mib(cap),
                mib(size)
            )));
        }
        Ok(Some(held))
    }

    /// Removes a file or a directory.
    pub async fn delete_file(
        &self,
        channel: &Arc<SessionChannel>,
        path: &str,
    ) -> Result<(), NotebookError> {
        self.holder(channel).delete_file(path).await
    }
}
