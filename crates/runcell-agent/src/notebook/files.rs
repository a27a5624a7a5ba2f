//! A session's files in `/home/user`, for its owner: list, read, upload,
//! delete, on whichever node holds the session.

use std::sync::Arc;

use super::{NotebookError, Notebooks};
use crate::sandbox::files::{Contents, FileEntry};
use crate::session::SessionChannel;

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
        self.holder(channel).upload(path, bytes, overwrite).await
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
