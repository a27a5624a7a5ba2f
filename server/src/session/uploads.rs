//! The files a person uploaded into a notebook session, kept in the data
//! directory (`<data-dir>/uploads/<session>/…`) so that they outlive the
//! session's kernel: a kernel reopened after it was reaped, or after a
//! restart, gets them back. Deleting the session deletes them.
//!
//! Only the server writes here, and every path went through
//! [`confine`](crate::sandbox::files::confine) first, so no path or link
//! leads out of a session's directory.

use std::path::{Path, PathBuf};

use crate::sandbox::SandboxError;
use crate::sandbox::files::confine;
use crate::session::SessionId;

#[derive(Debug, Clone)]
pub struct Uploads {
    root: PathBuf,
}

impl Uploads {
    pub fn new(data_dir: &Path) -> Self {
        Self {
            root: data_dir.join("uploads"),
        }
    }

    fn dir(&self, session: SessionId) -> PathBuf {
        self.root.join(session.to_string())
    }

    /// Keeps `bytes` as `path` (`/home/user/…` or relative) of `session`.
    pub async fn save(
        &self,
        session: SessionId,
        path: &str,
        bytes: Vec<u8>,
    ) -> Result<(), SandboxError> {
        let relative = confine(path)?;
        let target = self.dir(session).join(&relative);
        blocking(move || {
            if let Some(parent) = target.parent() {
                std::fs::create_dir_all(parent)?;
            }
            std::fs::write(&target, bytes)
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

    /// Every file kept for `session`: its path under the home and bytes.
    pub async fn all(&self, session: SessionId) -> Result<Vec<(String, Vec<u8>)>, SandboxError> {
        let dir = self.dir(session);
        blocking(move || {
            let mut files = Vec::new();
            let mut pending = vec![dir.clone()];
            while let Some(next) = pending.pop() {
                let entries = match std::fs::read_dir(&next) {
                    Ok(entries) => entries,
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                    Err(e) => return Err(e),
                };
                for entry in entries {
                    let entry = entry?;
                    let kind = entry.file_type()?;
                    if kind.is_dir() {
                        pending.push(entry.path());
                    } else if kind.is_file() {
                        let path = entry.path();
                        let relative = path.strip_prefix(&dir).unwrap_or(&path);
                        files.push((
                            relative.to_string_lossy().into_owned(),
                            std::fs::read(&path)?,
                        ));
                    }
                }
            }
            files.sort();
            Ok(files)
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
            tracing::warn!(%err, "a deleted session's uploads could not be removed");
        }
    }
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
            _ => SandboxError::Internal(format!("the uploads store failed: {e}")),
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn uploads_are_kept_listed_removed_and_forgotten() {
        let data = tempfile::tempdir().unwrap();
        let uploads = Uploads::new(data.path());
        let session = SessionId::random();
        let other = SessionId::random();
        uploads
            .save(session, "/home/user/a.csv", b"a".to_vec())
            .await
            .unwrap();
        uploads
            .save(session, "in/b.txt", b"b".to_vec())
            .await
            .unwrap();
        uploads.save(other, "c.txt", b"c".to_vec()).await.unwrap();
        assert_eq!(
            uploads.all(session).await.unwrap(),
            vec![
                ("a.csv".to_string(), b"a".to_vec()),
                ("in/b.txt".to_string(), b"b".to_vec())
            ]
        );
        for outside in ["../x", "/etc/passwd", "a/../../x"] {
            assert!(
                uploads.save(session, outside, Vec::new()).await.is_err(),
                "{outside}"
            );
        }
        uploads.remove(session, "in").await.unwrap();
        uploads.remove(session, "missing.txt").await.unwrap();
        assert_eq!(uploads.all(session).await.unwrap().len(), 1);
        uploads.forget(session).await;
        assert!(uploads.all(session).await.unwrap().is_empty());
        assert_eq!(
            uploads.all(other).await.unwrap().len(),
            1,
            "another session's stay"
        );
    }
}
