//! The files kept for a notebook session in the data directory
//! (`<data-dir>/uploads/<session>/…`): what a person uploaded and, after
//! each run, what the session's programs left in `/home/user`. They outlive
//! the session's kernel: a kernel reopened after it was reaped, or after a
//! restart, gets them back, and the Files panel lists them while no kernel
//! runs. Deleting the session deletes them.
//!
//! Only the server writes here, and every path went through
//! [`confine`](runcell_sandbox::files::confine) first, so no path or link
//! leads out of a session's directory. What one session keeps is bounded
//! by a quota (the size of a kernel's home), so that a program that writes
//! and deletes cannot fill the server's disk through it.

use std::path::{Path, PathBuf};
use std::time::{Duration, UNIX_EPOCH};

use runcell_protocol::SessionId;
use runcell_sandbox::SandboxError;
use runcell_sandbox::files::{Contents, FileEntry, FileKind, confine, sandbox_path};

/// What a session keeps when no quota is given: the default home's size.
const DEFAULT_QUOTA: u64 = 192 * 1024 * 1024;

#[derive(Debug, Clone)]
pub struct Uploads {
    root: PathBuf,
    /// The most one session may keep, in bytes.
    quota: u64,
}

impl Uploads {
    pub fn new(data_dir: &Path) -> Self {
        Self {
            root: data_dir.join("uploads"),
            quota: DEFAULT_QUOTA,
        }
    }

    /// Another shelf beside this one (`<data-dir>/<name>/<session>/…`), with
    /// the same quota: the copies share links offer live there.
    pub fn sibling(&self, name: &str) -> Self {
        Self {
            root: self.root.with_file_name(name),
            quota: self.quota,
        }
    }

    /// The most one session may keep, in bytes.
    pub fn with_quota(mut self, bytes: u64) -> Self {
        self.quota = bytes;
        self
    }

    pub fn quota(&self) -> u64 {
        self.quota
    }

    fn dir(&self, session: SessionId) -> PathBuf {
        self.root.join(session.to_string())
    }

    /// Keeps `bytes` as `path` (`/home/user/…` or relative) of `session`.
    /// An existing file is replaced only when `replace` (else `false`,
    /// nothing written). `modified_ms`, when given, becomes the kept file's
    /// time. Refused when the session would keep more than its quota.
    pub async fn save(
        &self,
        session: SessionId,
        path: &str,
        bytes: Contents,
        replace: bool,
        modified_ms: Option<u64>,
    ) -> Result<bool, SandboxError> {
        let relative = confine(path)?;
        if relative.as_os_str().is_empty() {
            return Err(SandboxError::InvalidInput(format!(
                "'{}' is a directory",
                sandbox_path(&relative)
            )));
        }
        let dir = self.dir(session);
        let quota = self.quota;
        let shown = sandbox_path(&relative);
        blocking(move || {
            let target = dir.join(&relative);
            let old = match std::fs::symlink_metadata(&target) {
                Ok(meta) if meta.is_dir() => {
                    return Ok(Err(SandboxError::InvalidInput(format!(
                        "'{shown}' is a directory"
                    ))));
                }
                Ok(_) if !replace => return Ok(Ok(false)),
                Ok(meta) => meta.len(),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => 0,
                Err(e) => return Err(e),
            };
            if let Some(refused) = room(&dir, old, bytes.len(), quota, &shown)? {
                return Ok(Err(refused));
            }
            if let Some(parent) = target.parent() {
                std::fs::create_dir_all(parent)?;
            }
            // Whole under another name first, then put in place at once.
            let temp =
                target.with_file_name(format!(".runcell-keep-{:016x}", rand::random::<u64>()));
            let written = (|| {
                let file = std::fs::File::create_new(&temp)?;
                bytes.copy_into(&mut &file)?;
                if let Some(ms) = modified_ms {
                    file.set_modified(UNIX_EPOCH + Duration::from_millis(ms))?;
                }
                std::fs::rename(&temp, &target)
            })();
            if written.is_err() {
                let _ = std::fs::remove_file(&temp);
            }
            written.map(|()| Ok(true))
        })
        .await?
    }

    /// Whether `size` more bytes as `path` (replacing what is there) fit
    /// the session's quota.
    pub async fn check_room(
        &self,
        session: SessionId,
        path: &str,
        size: u64,
    ) -> Result<(), SandboxError> {
        let relative = confine(path)?;
        let dir = self.dir(session);
        let quota = self.quota;
        let shown = sandbox_path(&relative);
        blocking(move || {
            let old = std::fs::symlink_metadata(dir.join(&relative))
                .map(|m| if m.is_file() { m.len() } else { 0 })
                .unwrap_or(0);
            Ok(room(&dir, old, size, quota, &shown)?.map_or(Ok(()), Err))
        })
        .await?
    }

    /// Bytes the session keeps, in all (0 for a session that keeps none).
    pub async fn used(&self, session: SessionId) -> Result<u64, SandboxError> {
        let dir = self.dir(session);
        blocking(move || {
            if !dir.exists() {
                return Ok(0);
            }
            Ok(walk(&dir)?.iter().map(|(_, meta)| meta.len()).sum())
        })
        .await
    }

    /// Forgets `path` (a file, or a directory and what is in it).
    pub async fn remove(&self, session: SessionId, path: &str) -> Result<(), SandboxError> {
        let relative = confine(path)?;
        if relative.as_os_str().is_empty() {
            return Ok(());
        }
        let target = self.dir(session).join(&relative);
        blocking(move || match std::fs::symlink_metadata(&target) {
            Ok(meta) if meta.is_dir() => std::fs::remove_dir_all(&target),
            Ok(_) => std::fs::remove_file(&target),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(e),
        })
        .await
    }

    /// Every file kept for `session`, as the home's entries (sorted by path).
    pub async fn list(&self, session: SessionId) -> Result<Vec<FileEntry>, SandboxError> {
        let dir = self.dir(session);
        blocking(move || {
            let mut entries: Vec<FileEntry> = walk(&dir)?
                .into_iter()
                .map(|(relative, meta)| entry(&relative, &meta))
                .collect();
            entries.sort_by(|a, b| a.path.cmp(&b.path));
            Ok(entries)
        })
        .await
    }

    /// One kept file's entry.
    pub async fn stat(&self, session: SessionId, path: &str) -> Result<FileEntry, SandboxError> {
        let relative = confine(path)?;
        let target = self.dir(session).join(&relative);
        blocking(move || match std::fs::symlink_metadata(&target) {
            Ok(meta) if meta.is_file() => Ok(Ok(entry(&relative, &meta))),
            Ok(_) => Ok(Err(SandboxError::InvalidInput(format!(
                "'{}' is a directory",
                sandbox_path(&relative)
            )))),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Err(SandboxError::NotFound(
                format!("'{}' does not exist", sandbox_path(&relative)),
            ))),
            Err(e) => Err(e),
        })
        .await?
    }

    /// One kept file's bytes.
    pub async fn read(&self, session: SessionId, path: &str) -> Result<Vec<u8>, SandboxError> {
        let relative = confine(path)?;
        let target = self.dir(session).join(&relative);
        let shown = sandbox_path(&relative);
        blocking(move || match std::fs::symlink_metadata(&target) {
            Ok(meta) if meta.is_file() => std::fs::read(&target).map(Ok),
            Ok(_) => Ok(Err(SandboxError::InvalidInput(format!(
                "'{shown}' is a directory"
            )))),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Err(SandboxError::NotFound(
                format!("'{shown}' does not exist"),
            ))),
            Err(e) => Err(e),
        })
        .await?
    }

    /// Makes `to`'s files on `shelf` a copy of `from`'s here (none if it
    /// has none).
    pub async fn copy_to(
        &self,
        from: SessionId,
        shelf: &Uploads,
        to: SessionId,
    ) -> Result<(), SandboxError> {
        let source = self.dir(from);
        let target = shelf.dir(to);
        blocking(move || {
            match std::fs::remove_dir_all(&target) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e),
                _ => {}
            }
            for (relative, _) in walk(&source)? {
                let to = target.join(&relative);
                if let Some(parent) = to.parent() {
                    std::fs::create_dir_all(parent)?;
                }
                std::fs::copy(source.join(&relative), &to)?;
            }
            Ok(())
        })
        .await
    }

    /// Forgets every file of `session` (it was deleted).
    pub async fn forget(&self, session: SessionId) {
        let dir = self.dir(session);
        let result = blocking(move || match std::fs::remove_dir_all(&dir) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            other => other,
        })
        .await;
        if let Err(err) = result {
            tracing::warn!(%err, "a deleted session's files could not be removed");
        }
    }
}

/// A kept file as the home's entry.
fn entry(relative: &Path, meta: &std::fs::Metadata) -> FileEntry {
    FileEntry {
        path: sandbox_path(relative),
        name: relative
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default(),
        kind: FileKind::File,
        size: meta.len(),
        mode: 0o644,
        modified_ms: meta
            .modified()
            .ok()
            .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
            .map(runcell_core::clock::millis),
        symlink_target: None,
    }
}

/// The regular files below `dir` (not its hidden work files), with their
/// paths relative to it; none when `dir` is not there.
fn walk(dir: &Path) -> std::io::Result<Vec<(PathBuf, std::fs::Metadata)>> {
    let mut files = Vec::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(next) = pending.pop() {
        let entries = match std::fs::read_dir(&next) {
            Ok(entries) => entries,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(e),
        };
        for entry in entries {
            let entry = entry?;
            let kind = entry.file_type()?;
            let path = entry.path();
            if kind.is_dir() {
                pending.push(path);
            } else if kind.is_file()
                && !entry.file_name().to_string_lossy().starts_with(".runcell-")
            {
                let relative = path.strip_prefix(dir).unwrap_or(&path).to_path_buf();
                files.push((relative, entry.metadata()?));
            }
        }
    }
    Ok(files)
}

/// Why `size` bytes replacing `old` ones would not fit `quota` in `dir`.
fn room(
    dir: &Path,
    old: u64,
    size: u64,
    quota: u64,
    shown: &str,
) -> std::io::Result<Option<SandboxError>> {
    let used = walk(dir)?
        .iter()
        .map(|(_, meta)| meta.len())
        .sum::<u64>()
        .saturating_sub(old);
    Ok((used + size > quota).then(|| {
        SandboxError::NoSpace(format!(
            "not enough room in the session for '{shown}' ({}): its files may take {} in all, \
             and {} are taken",
            mib(size),
            mib(quota),
            mib(used)
        ))
    }))
}

fn mib(bytes: u64) -> String {
    format!("{:.1} MiB", bytes as f64 / (1024.0 * 1024.0))
}

async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> std::io::Result<T> + Send + 'static,
) -> Result<T, SandboxError> {
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|e| SandboxError::Internal(format!("file work failed: {e}")))?
        .map_err(|e| match e.kind() {
            std::io::ErrorKind::StorageFull => {
                SandboxError::NoSpace("the server's disk is full".into())
            }
            _ => SandboxError::Internal(format!("the session's kept files failed: {e}")),
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn paths(entries: &[FileEntry]) -> Vec<&str> {
        entries.iter().map(|e| e.path.as_str()).collect()
    }

    #[tokio::test]
    async fn files_are_kept_listed_read_removed_and_forgotten() {
        let data = tempfile::tempdir().unwrap();
        let uploads = Uploads::new(data.path());
        let session = SessionId::random();
        let other = SessionId::random();
        assert!(
            uploads
                .save(
                    session,
                    "/home/user/a.csv",
                    b"a".to_vec().into(),
                    false,
                    None
                )
                .await
                .unwrap()
        );
        assert!(
            uploads
                .save(
                    session,
                    "in/b.txt",
                    b"bb".to_vec().into(),
                    false,
                    Some(1_000_000)
                )
                .await
                .unwrap()
        );
        uploads
            .save(other, "c.txt", b"c".to_vec().into(), false, None)
            .await
            .unwrap();
        let listed = uploads.list(session).await.unwrap();
        assert_eq!(paths(&listed), ["/home/user/a.csv", "/home/user/in/b.txt"]);
        assert_eq!(listed[1].size, 2);
        assert_eq!(listed[1].modified_ms, Some(1_000_000));
        assert_eq!(uploads.read(session, "in/b.txt").await.unwrap(), b"bb");
        assert!(matches!(
            uploads.read(session, "nope").await,
            Err(SandboxError::NotFound(_))
        ));
        // Kept files are not replaced unless asked.
        assert!(
            !uploads
                .save(session, "a.csv", b"new".to_vec().into(), false, None)
                .await
                .unwrap()
        );
        assert_eq!(uploads.read(session, "a.csv").await.unwrap(), b"a");
        assert!(
            uploads
                .save(session, "a.csv", b"new".to_vec().into(), true, None)
                .await
                .unwrap()
        );
        assert_eq!(uploads.read(session, "a.csv").await.unwrap(), b"new");
        for outside in ["../x", "/etc/passwd", "a/../../x"] {
            assert!(
                uploads
                    .save(session, outside, Vec::new().into(), true, None)
                    .await
                    .is_err(),
                "{outside}"
            );
        }
        uploads.remove(session, "in").await.unwrap();
        uploads.remove(session, "missing.txt").await.unwrap();
        assert_eq!(uploads.list(session).await.unwrap().len(), 1);
        uploads.forget(session).await;
        assert!(uploads.list(session).await.unwrap().is_empty());
        assert_eq!(
            uploads.list(other).await.unwrap().len(),
            1,
            "another session's stay"
        );
    }

    #[tokio::test]
    async fn files_are_copied_to_another_shelf_whole() {
        let data = tempfile::tempdir().unwrap();
        let kept = Uploads::new(data.path());
        let shared = kept.sibling("shared-files");
        let (one, two) = (SessionId::random(), SessionId::random());
        kept.save(one, "a.csv", b"a".to_vec().into(), true, None)
            .await
            .unwrap();
        kept.save(one, "d/b.txt", b"b".to_vec().into(), true, None)
            .await
            .unwrap();
        shared
            .save(two, "old.txt", b"old".to_vec().into(), true, None)
            .await
            .unwrap();
        kept.copy_to(one, &shared, two).await.unwrap();
        assert_eq!(
            paths(&shared.list(two).await.unwrap()),
            ["/home/user/a.csv", "/home/user/d/b.txt"],
            "the copy replaces what was there"
        );
        assert!(data.path().join("shared-files").is_dir());
        // A copy of nothing is nothing.
        kept.copy_to(SessionId::random(), &shared, two)
            .await
            .unwrap();
        assert!(shared.list(two).await.unwrap().is_empty());
    }

    #[tokio::test]
    async fn a_session_keeps_no_more_than_its_quota() {
        let data = tempfile::tempdir().unwrap();
        let uploads = Uploads::new(data.path()).with_quota(10);
        let session = SessionId::random();
        uploads
            .save(session, "a", vec![0; 6].into(), true, None)
            .await
            .unwrap();
        let refused = uploads
            .save(session, "b", vec![0; 5].into(), true, None)
            .await;
        assert!(
            matches!(&refused, Err(SandboxError::NoSpace(m)) if m.contains("may take")),
            "{refused:?}"
        );
        // Replacing counts the old file's room as free.
        uploads
            .save(session, "a", vec![0; 10].into(), true, None)
            .await
            .unwrap();
        assert_eq!(uploads.list(session).await.unwrap().len(), 1);
        assert!(
            !data
                .path()
                .join("uploads")
                .join(session.to_string())
                .read_dir()
                .unwrap()
                .any(|e| e
                    .unwrap()
                    .file_name()
                    .to_string_lossy()
                    .starts_with(".runcell-")),
            "no work file is left behind"
        );
    }
}
