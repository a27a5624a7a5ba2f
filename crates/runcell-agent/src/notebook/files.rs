//! A session's files in `/home/user`, for its owner: list, read, upload,
//! delete.

use super::remote::{Answer, Call, unexpected};
use super::{NotebookError, Notebooks};
use crate::sandbox::files::{Contents, FileEntry};
use crate::session::SessionChannel;

impl Notebooks {
    /// The files in the session's home (its kernel's, or the kept ones
    /// while it has none).
    pub async fn list_files(
        &self,
        channel: &SessionChannel,
    ) -> Result<Vec<FileEntry>, NotebookError> {
        if let Some(holder) = channel.remote_holder() {
            return match self
                .ask_holder(&holder, channel.id(), Call::ListFiles, None)
                .await?
                .0
            {
                Answer::Files(files) => Ok(files),
                other => Err(unexpected(other)),
            };
        }
        Ok(self.kernels().list_files(channel.id()).await?)
    }

    /// One file's entry and bytes.
    pub async fn read_file(
        &self,
        channel: &SessionChannel,
        path: &str,
    ) -> Result<(FileEntry, Vec<u8>), NotebookError> {
        if let Some(holder) = channel.remote_holder() {
            let call = Call::ReadFile { path: path.into() };
            return match self.ask_holder(&holder, channel.id(), call, None).await? {
                (Answer::File(entry), bytes) => Ok((entry, bytes.unwrap_or_default())),
                (other, _) => Err(unexpected(other)),
            };
        }
        Ok(self.kernels().read_file(channel.id(), path).await?)
    }

    /// Puts an uploaded file into the session (kept for every kernel it
    /// will have); an existing file is replaced only when `overwrite`.
    pub async fn upload(
        &self,
        channel: &SessionChannel,
        path: &str,
        bytes: Contents,
        overwrite: bool,
    ) -> Result<FileEntry, NotebookError> {
        if let Some(holder) = channel.remote_holder() {
            let call = Call::Upload {
                path: path.into(),
                overwrite,
            };
            // Another node's call carries its payload whole.
            let bytes = bytes.to_bytes().await.map_err(|e| {
                NotebookError::Unreachable(format!("the upload could not be read back: {e}"))
            })?;
            return match self
                .ask_holder(&holder, channel.id(), call, Some(bytes.into()))
                .await?
                .0
            {
                Answer::File(entry) => Ok(entry),
                other => Err(unexpected(other)),
            };
        }
        Ok(self
            .kernels()
            .upload(channel.id(), path, bytes, overwrite)
            .await?)
    }

    /// Removes a file or a directory.
    pub async fn delete_file(
        &self,
        channel: &SessionChannel,
        path: &str,
    ) -> Result<(), NotebookError> {
        if let Some(holder) = channel.remote_holder() {
            let call = Call::DeleteFile { path: path.into() };
            return self.holder_does(&holder, channel.id(), call).await;
        }
        Ok(self.kernels().delete_file(channel.id(), path).await?)
    }
}
