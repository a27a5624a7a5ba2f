//! The disk cache all sessions share: project pages by name
//! (`pages/<project>.json`) and files by content (`blobs/sha256/<2 hex>/<hex>`),
//! written through temporary files in `tmp/` and renamed into place.

use std::collections::HashMap;
use std::io::Write;
use std::path::PathBuf;
use std::sync::{Arc, Weak};

use tempfile::TempPath;
use tokio::sync::OwnedMutexGuard;

use crate::error::PackagesError;
use crate::name;
use crate::page::Page;

pub(crate) struct Cache {
    root: PathBuf,
    pages: PathBuf,
    blobs: PathBuf,
    tmp: PathBuf,
    locks: parking_lot::Mutex<HashMap<String, Weak<tokio::sync::Mutex<()>>>>,
}

impl Cache {
    /// Opens the cache at `root`, making its directories if missing.
    pub fn open(root: PathBuf) -> Result<Self, PackagesError> {
        let cache = Self {
            pages: root.join("pages"),
            blobs: root.join("blobs").join("sha256"),
            tmp: root.join("tmp"),
            locks: parking_lot::Mutex::new(HashMap::new()),
            root,
        };
        for dir in [&cache.pages, &cache.blobs, &cache.tmp] {
            std::fs::create_dir_all(dir).map_err(|source| PackagesError::Cache {
                path: dir.clone(),
                source,
            })?;
        }
        Ok(cache)
    }

    pub fn root(&self) -> &std::path::Path {
        &self.root
    }

    fn page_path(&self, project: &str) -> PathBuf {
        self.pages.join(format!("{project}.json"))
    }

    /// The cached page of `project` (a valid normalised name), at any age.
    pub async fn read_page(&self, project: &str) -> Option<Page> {
        let path = self.page_path(project);
        let bytes = match tokio::fs::read(&path).await {
            Ok(bytes) => bytes,
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => return None,
            Err(err) => {
                tracing::warn!(%err, path = %path.display(), "a cached package page could not be read");
                return None;
            }
        };
        match serde_json::from_slice(&bytes) {
            Ok(page) => Some(page),
            Err(err) => {
                tracing::warn!(%err, path = %path.display(), "a cached package page does not parse");
                None
            }
        }
    }

    /// Stores `page` as `project`'s, replacing the old one at once.
    pub async fn write_page(&self, project: &str, page: &Page) -> std::io::Result<()> {
        let bytes = serde_json::to_vec(page).map_err(std::io::Error::other)?;
        let (tmp, path) = (self.tmp.clone(), self.page_path(project));
        tokio::task::spawn_blocking(move || {
            let mut file = tempfile::NamedTempFile::new_in(tmp)?;
            file.write_all(&bytes)?;
            file.persist(path).map_err(|err| err.error)?;
            Ok(())
        })
        .await
        .map_err(std::io::Error::other)?
    }

    /// Where the file with this sha256 (64 lowercase hex) is kept.
    pub fn blob_path(&self, sha256: &str) -> PathBuf {
        self.blobs
            .join(sha256.get(..2).unwrap_or("00"))
            .join(sha256)
    }

    pub fn has_blob(&self, sha256: &str) -> bool {
        self.blob_path(sha256).is_file()
    }

    /// A new temporary file in the cache's own filesystem (so that it can be
    /// renamed into place), deleted when its path is dropped.
    pub fn temp_file(&self) -> std::io::Result<(tokio::fs::File, TempPath)> {
        let (file, path) = tempfile::NamedTempFile::new_in(&self.tmp)?.into_parts();
        Ok((tokio::fs::File::from_std(file), path))
    }

    /// Moves a finished download into place as the blob `sha256`.
    pub fn keep_blob(&self, temp: TempPath, sha256: &str) -> std::io::Result<PathBuf> {
        let path = self.blob_path(sha256);
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        temp.persist(&path).map_err(|err| err.error)?;
        Ok(path)
    }

    /// Projects with a cached page, sorted.
    pub fn projects(&self) -> Vec<String> {
        let Ok(entries) = std::fs::read_dir(&self.pages) else {
            return Vec::new();
        };
        let mut projects: Vec<String> = entries
            .filter_map(|entry| {
                let file = entry.ok()?.file_name().into_string().ok()?;
                let project = file.strip_suffix(".json")?;
                (name::is_project_name(project) && name::normalize(project) == project)
                    .then(|| project.to_string())
            })
            .collect();
        projects.sort();
        projects
    }

    /// Waits for the lock on `key` (a page or a blob): one fetch of each at a time.
    pub async fn lock(&self, key: String) -> OwnedMutexGuard<()> {
        let lock = {
            let mut locks = self.locks.lock();
            if locks.len() > 256 {
                locks.retain(|_, lock| lock.strong_count() > 0);
            }
            match locks.get(&key).and_then(Weak::upgrade) {
                Some(lock) => lock,
                None => {
                    let lock = Arc::new(tokio::sync::Mutex::new(()));
                    locks.insert(key, Arc::downgrade(&lock));
                    lock
                }
            }
        };
        lock.lock_owned().await
    }
}
