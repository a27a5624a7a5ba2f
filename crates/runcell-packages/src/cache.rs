//! The disk cache all sessions share: project pages by name
//! (`pages/<project>.json`) and files by content (`blobs/sha256/<2 hex>/<hex>`),
//! written through temporary files in `tmp/` and renamed into place. Files
//! and pages together stay under a size: each is touched when used, and
//! the ones used longest ago go first (they are fetched again when asked
//! for). A page being served is parsed once and shared by every request
//! for it. What a crash left in `tmp/` goes at start.

use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::time::SystemTime;

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
    /// Pages in use, parsed once: every request for one shares it.
    live: parking_lot::Mutex<HashMap<String, Weak<Page>>>,
    /// The most files and pages may take together, and what they take now.
    max_bytes: u64,
    used: AtomicU64,
    /// Held while files are removed to make room (one sweep at a time).
    sweeping: parking_lot::Mutex<()>,
}

impl Cache {
    /// Opens the cache at `root`, making its directories if missing.
    /// Opens the cache at `root`, its files at most `max_bytes` together.
    pub fn open(root: PathBuf, max_bytes: u64) -> Result<Self, PackagesError> {
        let cache = Self {
            pages: root.join("pages"),
            blobs: root.join("blobs").join("sha256"),
            tmp: root.join("tmp"),
            locks: parking_lot::Mutex::new(HashMap::new()),
            live: parking_lot::Mutex::new(HashMap::new()),
            root,
            max_bytes,
            used: AtomicU64::new(0),
            sweeping: parking_lot::Mutex::new(()),
        };
        for dir in [&cache.pages, &cache.blobs, &cache.tmp] {
            std::fs::create_dir_all(dir).map_err(|source| PackagesError::Cache {
                path: dir.clone(),
                source,
            })?;
        }
        if let Ok(entries) = std::fs::read_dir(&cache.tmp) {
            for entry in entries.flatten() {
                let _ = std::fs::remove_file(entry.path());
            }
        }
        let used = cache.entries().iter().map(|b| b.size).sum();
        cache.used.store(used, Ordering::Relaxed);
        cache.make_room(None);
        Ok(cache)
    }

    /// Every kept file and page, with its size and when it was last used.
    fn entries(&self) -> Vec<Blob> {
        let mut entries = blobs_in(&self.blobs);
        entries.extend(files_in(&self.pages));
        entries
    }

    /// Marks `path` (a blob or a page) as used now: the last to be removed.
    pub fn touch(&self, path: &Path) {
        if let Ok(file) = std::fs::File::open(path) {
            let _ = file.set_modified(SystemTime::now());
        }
    }

    /// While files and pages take more than the most, removes those used
    /// longest ago (never `keep`), down to nine tenths of it.
    fn make_room(&self, keep: Option<&Path>) {
        if self.used.load(Ordering::Relaxed) <= self.max_bytes {
            return;
        }
        let _one = self.sweeping.lock();
        let mut blobs = self.entries();
        let mut used: u64 = blobs.iter().map(|b| b.size).sum();
        blobs.sort_by_key(|b| b.modified);
        let target = self.max_bytes / 10 * 9;
        for blob in blobs {
            if used <= target {
                break;
            }
            if Some(blob.path.as_path()) == keep {
                continue;
            }
            if std::fs::remove_file(&blob.path).is_ok() {
                used = used.saturating_sub(blob.size);
                tracing::debug!(path = %blob.path.display(), "a cached package file or page removed to make room");
            }
        }
        self.used.store(used, Ordering::Relaxed);
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    fn page_path(&self, project: &str) -> PathBuf {
        self.pages.join(format!("{project}.json"))
    }

    /// The cached page of `project` (a valid normalised name), at any age:
    /// the one in use if there is one, else read from disk.
    pub async fn read_page(&self, project: &str) -> Option<Arc<Page>> {
        let path = self.page_path(project);
        if let Some(page) = self.live.lock().get(project).and_then(Weak::upgrade) {
            return Some(page);
        }
        let bytes = match tokio::fs::read(&path).await {
            Ok(bytes) => bytes,
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => return None,
            Err(err) => {
                tracing::warn!(%err, path = %path.display(), "a cached package page could not be read");
                return None;
            }
        };
        match serde_json::from_slice::<Page>(&bytes) {
            Ok(page) => {
                self.touch(&path);
                Some(self.share(project, page))
            }
            Err(err) => {
                tracing::warn!(%err, path = %path.display(), "a cached package page does not parse");
                None
            }
        }
    }

    /// `page` as `project`'s page in use (another request's copy if one
    /// got there first).
    fn share(&self, project: &str, page: Page) -> Arc<Page> {
        let mut live = self.live.lock();
        if live.len() > 256 {
            live.retain(|_, page| page.strong_count() > 0);
        }
        if let Some(page) = live.get(project).and_then(Weak::upgrade) {
            return page;
        }
        let page = Arc::new(page);
        live.insert(project.to_string(), Arc::downgrade(&page));
        page
    }

    /// Stores `page` as `project`'s, replacing the old one at once; the
    /// page now in use.
    pub async fn write_page(&self, project: &str, page: Page) -> std::io::Result<Arc<Page>> {
        let bytes = serde_json::to_vec(&page).map_err(std::io::Error::other)?;
        let size = bytes.len() as u64;
        let (tmp, path) = (self.tmp.clone(), self.page_path(project));
        let old = tokio::task::spawn_blocking(move || {
            let old = std::fs::metadata(&path).map_or(0, |m| m.len());
            let mut file = tempfile::NamedTempFile::new_in(tmp)?;
            file.write_all(&bytes)?;
            file.persist(&path).map_err(|err| err.error)?;
            Ok::<_, std::io::Error>(old)
        })
        .await
        .map_err(std::io::Error::other)??;
        self.live.lock().remove(project);
        let shared = self.share(project, page);
        self.used.fetch_add(size, Ordering::Relaxed);
        self.used
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |used| {
                Some(used.saturating_sub(old))
            })
            .ok();
        self.make_room(Some(&self.page_path(project)));
        Ok(shared)
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
        let size = std::fs::metadata(&temp)?.len();
        temp.persist(&path).map_err(|err| err.error)?;
        self.used.fetch_add(size, Ordering::Relaxed);
        self.make_room(Some(&path));
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

/// A cached file: where, how big, when last served.
struct Blob {
    path: PathBuf,
    size: u64,
    modified: SystemTime,
}

/// The files right under `dir` (the pages).
fn files_in(dir: &Path) -> Vec<Blob> {
    let Ok(files) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    files
        .flatten()
        .filter_map(|file| {
            let meta = file.metadata().ok()?;
            meta.is_file().then(|| Blob {
                path: file.path(),
                size: meta.len(),
                modified: meta.modified().unwrap_or(SystemTime::UNIX_EPOCH),
            })
        })
        .collect()
}

/// The files under `blobs` (`<2 hex>/<hex>`).
fn blobs_in(blobs: &Path) -> Vec<Blob> {
    let mut found = Vec::new();
    let Ok(dirs) = std::fs::read_dir(blobs) else {
        return found;
    };
    for dir in dirs.flatten() {
        let Ok(files) = std::fs::read_dir(dir.path()) else {
            continue;
        };
        for file in files.flatten() {
            let Ok(meta) = file.metadata() else {
                continue;
            };
            if meta.is_file() {
                found.push(Blob {
                    path: file.path(),
                    size: meta.len(),
                    modified: meta.modified().unwrap_or(SystemTime::UNIX_EPOCH),
                });
            }
        }
    }
    found
}
