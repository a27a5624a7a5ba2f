//! A notebook session's files: its kernel's home while it has one, and the
//! kept copies that outlive every kernel (uploads, what its programs
//! wrote), plus the copies its share link offers.

use std::collections::HashMap;

use super::{Kernels, NotebookKernel, packages};
use runcell_protocol::SessionId;
use runcell_sandbox::SandboxError;
use runcell_sandbox::SandboxKind;
use runcell_sandbox::SandboxSession;
use runcell_sandbox::files::{Contents, FileEntry, FileKind, Files, HOME};
use runcell_sandbox::sessions::SandboxSessionError;

/// How deep a listing goes below the home.
const MAX_LIST_DEPTH: u32 = 8;

/// The most files a listing gives, and that are kept after a run.
const MAX_FILES: usize = 1000;

/// The most files one result cell offers.
const MAX_OFFERS: usize = 8;

fn files_of(session: &dyn SandboxSession) -> Result<&dyn Files, SandboxError> {
    session
        .files()
        .ok_or_else(|| SandboxError::NotSupported("this kernel's sandbox has no files".into()))
}

/// Images and tables: what a result cell offers when a run writes them.
fn is_offered(name: &str) -> bool {
    let extension = name.rsplit_once('.').map(|(_, e)| e.to_ascii_lowercase());
    matches!(
        extension.as_deref(),
        Some("png" | "jpg" | "jpeg" | "gif" | "webp" | "svg" | "csv" | "tsv" | "xlsx" | "json")
    )
}

/// `path` as the sandbox shows it (`/home/user/…`), or as given when it
/// cannot be confined.
fn shown_path(path: &str) -> String {
    runcell_sandbox::files::confine(path)
        .map(|relative| runcell_sandbox::files::sandbox_path(&relative))
        .unwrap_or_else(|_| path.to_string())
}

/// Whether a path is, or is inside, a dot-file.
fn is_hidden(path: &str) -> bool {
    path.split('/').any(|part| part.starts_with('.'))
}

/// Why a notebook session's file could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum FilesError {
    /// A file is there already and replacing it was not asked for.
    #[error("{0} exists already")]
    Exists(String),
    #[error(transparent)]
    Session(#[from] SandboxSessionError),
    #[error(transparent)]
    Sandbox(#[from] SandboxError),
}

impl Kernels {
    /// The files in the session's home: its kernel's, or the kept ones
    /// while it has none. Dot-files and what is not a plain file or
    /// directory are left out; at most [`MAX_FILES`].
    pub async fn list_files(&self, session: SessionId) -> Result<Vec<FileEntry>, FilesError> {
        // The page's own Python has no files to list.
        if self.chosen(session) == SandboxKind::Browser {
            return Ok(Vec::new());
        }
        let mut entries = match self.live_files(session)? {
            Some(kernel) => files_of(&*kernel)?.list(HOME, MAX_LIST_DEPTH).await?,
            None => self.uploads.list(session).await?,
        };
        // The kernel's own dot-files (`.ipython`...) are not the person's.
        entries.retain(|e| {
            !is_hidden(&e.path) && matches!(e.kind, FileKind::File | FileKind::Directory)
        });
        entries.truncate(MAX_FILES);
        Ok(entries)
    }

    pub async fn read_file(
        &self,
        session: SessionId,
        path: &str,
    ) -> Result<(FileEntry, Vec<u8>), FilesError> {
        if let Some(kernel) = self.live_files(session)? {
            let files = files_of(&*kernel)?;
            let entry = files.stat(path).await?;
            return Ok((entry, files.read(path).await?));
        }
        let entry = self.uploads.stat(session, path).await?;
        Ok((entry, self.uploads.read(session, path).await?))
    }

    /// Puts an uploaded file into the session: kept for every kernel it
    /// will have, and written into the one it has. An existing file is
    /// replaced only when `overwrite`.
    pub async fn upload(
        &self,
        session: SessionId,
        path: &str,
        bytes: Contents,
        overwrite: bool,
    ) -> Result<FileEntry, FilesError> {
        let live = self.live_files(session)?;
        let lock = self.file_lock(session);
        let _held = lock.lock().await;
        let shown = || shown_path(path);
        let Some(kernel) = live else {
            if !self
                .uploads
                .save(session, path, bytes, overwrite, None)
                .await?
            {
                return Err(FilesError::Exists(shown()));
            }
            return Ok(self.uploads.stat(session, path).await?);
        };
        let files = files_of(&*kernel)?;
        // Nothing goes into the kernel that could not be kept.
        self.uploads.check_room(session, path, bytes.len()).await?;
        let entry = if overwrite {
            files.write(path, bytes.clone()).await?
        } else {
            files
                .create(path, bytes.clone())
                .await?
                .ok_or_else(|| FilesError::Exists(shown()))?
        };
        if let Err(err) = self
            .uploads
            .save(session, path, bytes, true, entry.modified_ms)
            .await
        {
            // The kernel has it; the next run keeps it again.
            tracing::warn!(%err, "an upload is in the kernel but not kept yet");
        }
        Ok(entry)
    }

    /// Removes a file (or a directory) from the kernel's home and from
    /// what is kept, whichever has it.
    pub async fn delete_file(&self, session: SessionId, path: &str) -> Result<(), FilesError> {
        let live = self.live_files(session)?;
        let lock = self.file_lock(session);
        let _held = lock.lock().await;
        let shown = shown_path(path);
        let inside = format!("{shown}/");
        let kept = self
            .uploads
            .list(session)
            .await?
            .iter()
            .any(|e| e.path == shown || e.path.starts_with(&inside));
        if let Some(kernel) = live {
            match files_of(&*kernel)?.remove(path).await {
                Err(SandboxError::NotFound(_)) if kept => {}
                other => other?,
            }
        } else if !kept {
            return Err(SandboxError::NotFound(format!("'{shown}' does not exist")).into());
        }
        self.uploads.remove(session, path).await?;
        Ok(())
    }

    /// What a run wrote that the person may want: images and tables
    /// written or rewritten in the home since `since_ms`, a few at most.
    pub async fn written_since(&self, session: SessionId, since_ms: u64) -> Vec<FileEntry> {
        let Ok(Some(kernel)) = self.live_files(session) else {
            return Vec::new();
        };
        let Some(files) = kernel.files() else {
            return Vec::new();
        };
        let Ok(entries) = files.list(HOME, MAX_LIST_DEPTH).await else {
            return Vec::new();
        };
        entries
            .into_iter()
            .filter(|e| {
                e.kind == FileKind::File
                    && !is_hidden(&e.path)
                    && is_offered(&e.name)
                    && e.modified_ms.is_some_and(|m| m >= since_ms)
                    && !self.is_restored(session, e)
            })
            .take(MAX_OFFERS)
            .collect()
    }

    /// After a run: what the home now holds is what the session keeps (new
    /// and changed files copied, removed ones forgotten), so that it
    /// outlives this kernel. Plain files that are not dot-files, the first
    /// [`MAX_FILES`]; what does not fit the quota stays in this kernel only.
    pub(super) async fn keep_files(&self, session: SessionId, kernel: &NotebookKernel) {
        let NotebookKernel::Pooled { backend, id } = kernel else {
            return;
        };
        let Some(live) = self
            .backends
            .get(Some(*backend))
            .ok()
            .and_then(|s| s.session(id))
        else {
            return;
        };
        let Some(files) = live.files() else {
            return;
        };
        let lock = self.file_lock(session);
        let _held = lock.lock().await;
        let Ok(entries) = files.list(HOME, MAX_LIST_DEPTH).await else {
            return;
        };
        let home: HashMap<String, FileEntry> = entries
            .into_iter()
            .filter(|e| e.kind == FileKind::File && !is_hidden(&e.path))
            .take(MAX_FILES)
            .map(|e| (e.path.clone(), e))
            .collect();
        let kept = match self.uploads.list(session).await {
            Ok(kept) => kept,
            Err(err) => {
                tracing::warn!(%err, "the session's kept files could not be read");
                return;
            }
        };
        let mut kept_at = HashMap::new();
        for entry in kept {
            if home.contains_key(&entry.path) || entry.path == packages::MANIFEST {
                kept_at.insert(entry.path, (entry.size, entry.modified_ms));
            } else if let Err(err) = self.uploads.remove(session, &entry.path).await {
                tracing::warn!(%err, "a file the program removed stayed kept");
            }
        }
        for (path, entry) in home {
            let unchanged = self.is_restored(session, &entry)
                || kept_at.get(&path).is_some_and(|&(size, modified)| {
                    size == entry.size && modified >= entry.modified_ms
                });
            if unchanged {
                continue;
            }
            let saved = match files.read(&path).await {
                Ok(bytes) => {
                    self.uploads
                        .save(session, &path, bytes.into(), true, entry.modified_ms)
                        .await
                }
                Err(err) => Err(err),
            };
            if let Err(err) = saved {
                tracing::debug!(%err, path, "a file the program wrote is not kept");
            }
        }
        packages::keep(&self.uploads, session, &*live).await;
    }

    /// What the session's share link offers from now on: a copy of its
    /// files as they are (with what the live kernel holds kept first), or
    /// nothing.
    pub async fn share_files(&self, session: SessionId, include: bool) -> Result<(), FilesError> {
        if !include {
            self.shared.forget(session).await;
            return Ok(());
        }
        let known = self.kernel_of(session);
        if let Some(kernel) = known {
            self.keep_files(session, &kernel).await;
        }
        let lock = self.file_lock(session);
        let _held = lock.lock().await;
        self.uploads.copy_to(session, &self.shared, session).await?;
        Ok(())
    }

    /// The files a share link of the session offers.
    pub async fn shared_files(&self, session: SessionId) -> Vec<FileEntry> {
        self.shared.list(session).await.unwrap_or_else(|err| {
            tracing::warn!(%err, "a share's files could not be listed");
            Vec::new()
        })
    }

    pub async fn read_shared_file(
        &self,
        session: SessionId,
        path: &str,
    ) -> Result<(FileEntry, Vec<u8>), FilesError> {
        let entry = self.shared.stat(session, path).await?;
        Ok((entry, self.shared.read(session, path).await?))
    }

    /// A fork starts with the files the link it was forked from offers.
    pub async fn fork_files(&self, from: SessionId, to: SessionId) -> Result<(), FilesError> {
        let lock = self.file_lock(to);
        let _held = lock.lock().await;
        self.shared.copy_to(from, &self.uploads, to).await?;
        Ok(())
    }
}
