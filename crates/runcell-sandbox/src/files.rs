//! Files in a session's home (`/home/user`), and the confinement every path
//! goes through: `..`, other absolute paths and symlinks that lead out of the
//! home are refused. The jail's home is read through `cap-std`, which resolves
//! each path beneath the home's own directory handle, so a link made by code
//! inside the sandbox is never followed to the host's files.

use std::path::{Component, Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::SandboxError;
pub use super::contents::{Contents, SpooledFile};

/// The sandbox user's home, as code in any backend sees it.
pub const HOME: &str = "/home/user";

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(utoipa::ToSchema))]
#[serde(rename_all = "lowercase")]
pub enum FileKind {
    File,
    Directory,
    Symlink,
    /// A FIFO, socket or device that code made: never opened, since opening
    /// one can block for ever.
    Other,
}

/// A file, directory or link in a session's home.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(utoipa::ToSchema))]
pub struct FileEntry {
    /// Absolute, as code in the sandbox sees it (`/home/user/a.csv`).
    pub path: String,
    pub name: String,
    pub kind: FileKind,
    pub size: u64,
    /// Unix permission bits.
    pub mode: u32,
    pub modified_ms: Option<u64>,
    /// Where a link points (not followed).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub symlink_target: Option<String>,
}

/// What a session's files can do. Paths are absolute under `/home/user` or
/// relative to it.
#[async_trait::async_trait]
pub trait Files: Send + Sync {
    /// Writes (or replaces) a file, making its directories.
    async fn write(&self, path: &str, bytes: Contents) -> Result<FileEntry, SandboxError>;
    /// Writes a file that is not there yet; `None` (and nothing written) if
    /// one is. Backends that can should make this one atomic step.
    async fn create(&self, path: &str, bytes: Contents) -> Result<Option<FileEntry>, SandboxError> {
        match self.stat(path).await {
            Ok(_) => Ok(None),
            Err(SandboxError::NotFound(_)) => self.write(path, bytes).await.map(Some),
            Err(err) => Err(err),
        }
    }
    async fn read(&self, path: &str) -> Result<Vec<u8>, SandboxError>;
    /// The entries below a directory, `depth` levels deep (1: its children).
    async fn list(&self, path: &str, depth: u32) -> Result<Vec<FileEntry>, SandboxError>;
    async fn stat(&self, path: &str) -> Result<FileEntry, SandboxError>;
    /// Makes a directory (and its parents); `false` if it was there already.
    async fn make_dir(&self, path: &str) -> Result<bool, SandboxError>;
    /// Removes a file, or a directory with everything in it.
    async fn remove(&self, path: &str) -> Result<(), SandboxError>;
}

/// `path` relative to the home: `/home/user/a/b`, `~/a/b` and `a/b` are all
/// `a/b`; the home itself is the empty path. Anything else is refused.
pub fn confine(path: &str) -> Result<PathBuf, SandboxError> {
    if path.contains('\0') {
        return Err(SandboxError::InvalidInput("the path contains NUL".into()));
    }
    let rest = if let Some(rest) = path.strip_prefix("~") {
        rest.trim_start_matches('/')
    } else if path.starts_with('/') {
        match Path::new(path).strip_prefix(HOME) {
            Ok(rest) => rest.to_str().unwrap_or_default(),
            Err(_) => return Err(outside(path)),
        }
    } else {
        path
    };
    let mut relative = PathBuf::new();
    for component in Path::new(rest).components() {
        match component {
            Component::Normal(part) => relative.push(part),
            Component::CurDir => {}
            Component::ParentDir | Component::RootDir | Component::Prefix(_) => {
                return Err(outside(path));
            }
        }
    }
    Ok(relative)
}

fn outside(path: &str) -> SandboxError {
    SandboxError::InvalidInput(format!(
        "'{path}' is outside {HOME}: only the home directory can be reached"
    ))
}

/// The sandbox's absolute path of a confined relative one.
pub fn sandbox_path(relative: &Path) -> String {
    if relative.as_os_str().is_empty() {
        HOME.to_string()
    } else {
        format!("{HOME}/{}", relative.to_string_lossy())
    }
}

/// `-rw-r--r--`, as `ls` and envd write a mode.
pub fn permissions(kind: FileKind, mode: u32) -> String {
    let mut text = String::with_capacity(10);
    text.push(match kind {
        FileKind::Directory => 'd',
        FileKind::Symlink => 'l',
        FileKind::File => '-',
        FileKind::Other => '?',
    });
    for shift in [6u32, 3, 0] {
        let bits = (mode >> shift) & 0o7;
        text.push(if bits & 4 != 0 { 'r' } else { '-' });
        text.push(if bits & 2 != 0 { 'w' } else { '-' });
        text.push(if bits & 1 != 0 { 'x' } else { '-' });
    }
    text
}

/// The most entries one listing visits: code can make millions of files,
/// and a listing (the page's files panel, after every run) must not walk
/// them all into memory. Past it the listing stops where it got to.
pub const MAX_LISTED: usize = 10_000;

/// A host directory seen as a sandbox's home, confined with `cap-std`.
/// Files made here belong to the jail's uid, so the code can change them.
pub struct HomeDir {
    root: PathBuf,
    uid: u32,
    gid: u32,
    /// The largest file accepted.
    max_file_bytes: u64,
}

impl HomeDir {
    pub fn new(root: PathBuf, uid: u32, gid: u32, max_file_bytes: u64) -> Self {
        Self {
            root,
            uid,
            gid,
            max_file_bytes,
        }
    }

    /// Runs blocking file work off the async threads.
    async fn blocking<T: Send + 'static>(
        &self,
        path: &str,
        work: impl FnOnce(&Confined) -> Result<T, SandboxError> + Send + 'static,
    ) -> Result<T, SandboxError> {
        let relative = confine(path)?;
        let confined = Confined {
            root: self.root.clone(),
            relative,
            uid: self.uid,
            gid: self.gid,
        };
        tokio::task::spawn_blocking(move || work(&confined))
            .await
            .map_err(|e| SandboxError::Internal(format!("file work failed: {e}")))?
    }
}

/// One request's path, beneath one home.
struct Confined {
    root: PathBuf,
    relative: PathBuf,
    uid: u32,
    gid: u32,
}

impl Confined {
    fn home(&self) -> Result<cap_std::fs::Dir, SandboxError> {
        cap_std::fs::Dir::open_ambient_dir(&self.root, cap_std::ambient_authority())
            .map_err(|e| SandboxError::Unavailable(format!("the session's home is gone: {e}")))
    }

    /// The metadata of `relative` (following links inside the home), the
    /// home's own for the empty path.
    fn metadata(&self, home: &cap_std::fs::Dir) -> Result<cap_std::fs::Metadata, SandboxError> {
        if self.relative.as_os_str().is_empty() {
            home.dir_metadata()
        } else {
            home.metadata(&self.relative)
        }
        .map_err(|e| self.error(&e))
    }

    fn shown(&self) -> String {
        sandbox_path(&self.relative)
    }

    /// An I/O error as the caller should hear it.
    fn error(&self, e: &std::io::Error) -> SandboxError {
        use std::io::ErrorKind;
        let path = self.shown();
        match e.kind() {
            ErrorKind::NotFound => SandboxError::NotFound(format!("'{path}' does not exist")),
            ErrorKind::StorageFull | ErrorKind::QuotaExceeded | ErrorKind::FileTooLarge => {
                SandboxError::NoSpace(format!("not enough disk space in the session for '{path}'"))
            }
            ErrorKind::IsADirectory => {
                SandboxError::InvalidInput(format!("'{path}' is a directory"))
            }
            ErrorKind::NotADirectory => {
                SandboxError::InvalidInput(format!("a part of '{path}' is not a directory"))
            }
            ErrorKind::AlreadyExists => {
                SandboxError::InvalidInput(format!("'{path}' exists already"))
            }
            // cap-std's answer to a path (or a link) that leads out.
            ErrorKind::PermissionDenied => SandboxError::InvalidInput(format!(
                "'{path}' leads outside {HOME} (a link out of the home is not followed)"
            )),
            // Opening a socket (ENXIO), or a device the jail may not use.
            _ if matches!(
                e.raw_os_error(),
                Some(libc::ENXIO | libc::ENODEV | libc::EOPNOTSUPP)
            ) =>
            {
                SandboxError::InvalidInput(format!(
                    "'{path}' is not a regular file (a pipe, socket or device)"
                ))
            }
            _ => SandboxError::Internal(format!("'{path}': {e}")),
        }
    }

    fn entry(
        &self,
        relative: &Path,
        meta: &cap_std::fs::Metadata,
        dir: &cap_std::fs::Dir,
    ) -> FileEntry {
        use cap_std::fs::PermissionsExt;
        let kind = if meta.file_type().is_symlink() {
            FileKind::Symlink
        } else if meta.is_dir() {
            FileKind::Directory
        } else if meta.is_file() {
            FileKind::File
        } else {
            FileKind::Other
        };
        let modified_ms = meta.modified().ok().and_then(|t| {
            t.into_std()
                .duration_since(std::time::UNIX_EPOCH)
                .ok()
                .map(runcell_core::clock::millis)
        });
        let symlink_target = (kind == FileKind::Symlink)
            .then(|| dir.read_link_contents(relative).ok())
            .flatten()
            .map(|t| t.to_string_lossy().into_owned());
        FileEntry {
            path: sandbox_path(relative),
            name: relative
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_else(|| "user".into()),
            kind,
            size: meta.len(),
            mode: meta.permissions().mode() & 0o7777,
            modified_ms,
            symlink_target,
        }
    }

    /// Makes each missing directory on the way to `relative`, as the jail user.
    fn make_parents(&self, home: &cap_std::fs::Dir, relative: &Path) -> Result<(), SandboxError> {
        let mut sofar = PathBuf::new();
        for component in relative.components() {
            sofar.push(component);
            match home.create_dir(&sofar) {
                Ok(()) => {
                    // Opened for reading: a directory handle of cap-std's own
                    // (`O_PATH`) cannot change owners. Only a directory, and
                    // without waiting, whatever code swapped in meanwhile.
                    let mut options = cap_std::fs::OpenOptions::new();
                    options.read(true);
                    cap_std::fs::OpenOptionsExt::custom_flags(
                        &mut options,
                        libc::O_DIRECTORY | libc::O_NONBLOCK,
                    );
                    let dir = home
                        .open_with(&sofar, &options)
                        .map_err(|e| self.error(&e))?;
                    self.own(&dir)?;
                }
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                    if !home.metadata(&sofar).map_err(|e| self.error(&e))?.is_dir() {
                        return Err(SandboxError::InvalidInput(format!(
                            "'{}' is not a directory",
                            sandbox_path(&sofar)
                        )));
                    }
                }
                Err(e) => return Err(self.error(&e)),
            }
        }
        Ok(())
    }

    fn own(&self, handle: &impl std::os::fd::AsFd) -> Result<(), SandboxError> {
        std::os::unix::fs::fchown(handle, Some(self.uid), Some(self.gid))
            .map_err(|e| SandboxError::Internal(format!("cannot give a file to the sandbox: {e}")))
    }
}

impl HomeDir {
    /// Writes `bytes` as `path`: whole under a hidden name first, then put
    /// in place in one step, so that a full disk leaves the old file (or
    /// none) rather than half a new one. Without `replace`, an existing file
    /// is left alone (`None`), also one that code makes meanwhile.
    async fn put(
        &self,
        path: &str,
        bytes: Contents,
        replace: bool,
    ) -> Result<Option<FileEntry>, SandboxError> {
        if bytes.len() > self.max_file_bytes {
            return Err(SandboxError::NoSpace(format!(
                "the file is {} bytes; at most {} are accepted",
                bytes.len(),
                self.max_file_bytes
            )));
        }
        self.blocking(path, move |c| {
            let home = c.home()?;
            let Some(name) = c.relative.file_name() else {
                return Err(SandboxError::InvalidInput(format!(
                    "'{}' is a directory",
                    c.shown()
                )));
            };
            let parent = c.relative.parent().unwrap_or(Path::new(""));
            c.make_parents(&home, parent)?;
            let dir = if parent.as_os_str().is_empty() {
                home.try_clone().map_err(|e| c.error(&e))?
            } else {
                home.open_dir(parent).map_err(|e| c.error(&e))?
            };
            // A link where the file would go is not written through (one out
            // of the home is refused as such), nor a directory replaced.
            match dir.symlink_metadata(name) {
                Ok(meta) if meta.file_type().is_symlink() => {
                    return Err(match home.metadata(&c.relative) {
                        Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => c.error(&e),
                        _ => SandboxError::InvalidInput(format!(
                            "'{}' is a link: remove it first",
                            c.shown()
                        )),
                    });
                }
                Ok(meta) if meta.is_dir() => {
                    return Err(SandboxError::InvalidInput(format!(
                        "'{}' is a directory",
                        c.shown()
                    )));
                }
                Ok(_) if !replace => return Ok(None),
                _ => {}
            }
            let temp = format!(".runcell-upload-{:016x}", rand::random::<u64>());
            let placed = c.place(&dir, &temp, name, &bytes, replace);
            if !matches!(placed, Ok(true)) {
                let _ = dir.remove_file(&temp);
            }
            if !placed? {
                return Ok(None);
            }
            let meta = home
                .symlink_metadata(&c.relative)
                .map_err(|e| c.error(&e))?;
            Ok(Some(c.entry(&c.relative, &meta, &home)))
        })
        .await
    }
}

impl Confined {
    /// Writes `bytes` to `temp` in `dir`, then puts it at `name`: replacing
    /// what is there, or (a hard link, which never replaces) only if
    /// nothing is. `false`: something was there.
    fn place(
        &self,
        dir: &cap_std::fs::Dir,
        temp: &str,
        name: &std::ffi::OsStr,
        bytes: &Contents,
        replace: bool,
    ) -> Result<bool, SandboxError> {
        let mut options = cap_std::fs::OpenOptions::new();
        options.write(true).create_new(true);
        let mut file = dir
            .open_with(temp, &options)
            .map_err(|e| self.error(&e))?
            .into_std();
        self.own(&file)?;
        bytes.copy_into(&mut file).map_err(|e| self.error(&e))?;
        drop(file);
        if replace {
            dir.rename(temp, dir, name).map_err(|e| self.error(&e))?;
            return Ok(true);
        }
        match dir.hard_link(temp, dir, name) {
            Ok(()) => {
                dir.remove_file(temp).map_err(|e| self.error(&e))?;
                Ok(true)
            }
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(false),
            Err(e) => Err(self.error(&e)),
        }
    }
}

#[async_trait::async_trait]
impl Files for HomeDir {
    async fn write(&self, path: &str, bytes: Contents) -> Result<FileEntry, SandboxError> {
        self.put(path, bytes, true)
            .await?
            .ok_or_else(|| SandboxError::Internal("a replacing write wrote nothing".into()))
    }

    async fn create(&self, path: &str, bytes: Contents) -> Result<Option<FileEntry>, SandboxError> {
        self.put(path, bytes, false).await
    }

    async fn read(&self, path: &str) -> Result<Vec<u8>, SandboxError> {
        let max = self.max_file_bytes;
        self.blocking(path, move |c| {
            use std::io::Read;
            let home = c.home()?;
            if c.relative.as_os_str().is_empty() {
                return Err(SandboxError::InvalidInput(format!(
                    "'{}' is a directory",
                    c.shown()
                )));
            }
            // Opened without waiting (a FIFO that code made would otherwise
            // block this thread until a writer came), then judged by what was
            // opened, not by a look at the path before: code cannot swap in
            // something else between the two.
            let mut options = cap_std::fs::OpenOptions::new();
            options.read(true);
            cap_std::fs::OpenOptionsExt::custom_flags(&mut options, libc::O_NONBLOCK);
            let file = home
                .open_with(&c.relative, &options)
                .map_err(|e| c.error(&e))?;
            let meta = file.metadata().map_err(|e| c.error(&e))?;
            if meta.is_dir() {
                return Err(SandboxError::InvalidInput(format!(
                    "'{}' is a directory",
                    c.shown()
                )));
            }
            if !meta.is_file() {
                return Err(SandboxError::InvalidInput(format!(
                    "'{}' is not a regular file (a pipe, socket or device)",
                    c.shown()
                )));
            }
            if meta.len() > max {
                return Err(SandboxError::NoSpace(format!(
                    "'{}' is {} bytes; at most {max} can be read",
                    c.shown(),
                    meta.len()
                )));
            }
            let mut bytes = Vec::new();
            file.into_std()
                .take(max)
                .read_to_end(&mut bytes)
                .map_err(|e| c.error(&e))?;
            Ok(bytes)
        })
        .await
    }

    async fn list(&self, path: &str, depth: u32) -> Result<Vec<FileEntry>, SandboxError> {
        self.blocking(path, move |c| {
            let home = c.home()?;
            let meta = c.metadata(&home)?;
            if !meta.is_dir() {
                return Err(SandboxError::InvalidInput(format!(
                    "'{}' is not a directory",
                    c.shown()
                )));
            }
            let mut entries = Vec::new();
            let mut pending = vec![(c.relative.clone(), 1u32)];
            'walk: while let Some((dir, level)) = pending.pop() {
                let listing = if dir.as_os_str().is_empty() {
                    home.entries()
                } else {
                    home.read_dir(&dir)
                }
                .map_err(|e| c.error(&e))?;
                for item in listing.flatten() {
                    if entries.len() >= MAX_LISTED {
                        tracing::debug!(path = %c.shown(), "listing cut at {MAX_LISTED} entries");
                        break 'walk;
                    }
                    let relative = dir.join(item.file_name());
                    let Ok(meta) = home.symlink_metadata(&relative) else {
                        continue;
                    };
                    let entry = c.entry(&relative, &meta, &home);
                    if entry.kind == FileKind::Directory && level < depth.max(1) {
                        pending.push((relative, level + 1));
                    }
                    entries.push(entry);
                }
            }
            entries.sort_by(|a, b| a.path.cmp(&b.path));
            Ok(entries)
        })
        .await
    }

    async fn stat(&self, path: &str) -> Result<FileEntry, SandboxError> {
        self.blocking(path, move |c| {
            let home = c.home()?;
            let meta = if c.relative.as_os_str().is_empty() {
                home.dir_metadata()
            } else {
                home.symlink_metadata(&c.relative)
            }
            .map_err(|e| c.error(&e))?;
            Ok(c.entry(&c.relative, &meta, &home))
        })
        .await
    }

    async fn make_dir(&self, path: &str) -> Result<bool, SandboxError> {
        self.blocking(path, move |c| {
            let home = c.home()?;
            if home.symlink_metadata(&c.relative).is_ok() || c.relative.as_os_str().is_empty() {
                return Ok(false);
            }
            c.make_parents(&home, &c.relative)?;
            Ok(true)
        })
        .await
    }

    async fn remove(&self, path: &str) -> Result<(), SandboxError> {
        self.blocking(path, move |c| {
            if c.relative.as_os_str().is_empty() {
                return Err(SandboxError::InvalidInput(format!(
                    "{HOME} itself cannot be removed"
                )));
            }
            let home = c.home()?;
            let meta = home
                .symlink_metadata(&c.relative)
                .map_err(|e| c.error(&e))?;
            if meta.is_dir() {
                home.remove_dir_all(&c.relative)
            } else {
                home.remove_file(&c.relative)
            }
            .map_err(|e| c.error(&e))
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn paths_are_confined_to_the_home() {
        let ok = [
            ("/home/user/a.txt", "a.txt"),
            ("/home/user", ""),
            ("/home/user/", ""),
            ("a/b.csv", "a/b.csv"),
            ("./a/./b", "a/b"),
            ("~/x", "x"),
            ("", ""),
        ];
        for (path, want) in ok {
            assert_eq!(confine(path).unwrap(), PathBuf::from(want), "{path}");
        }
        for bad in [
            "/etc/passwd",
            "../x",
            "a/../../x",
            "a/..",
            "/home/user/../root",
            "/home/username/x",
            "/tmp/x",
            "a\0b",
        ] {
            assert!(
                matches!(confine(bad), Err(SandboxError::InvalidInput(_))),
                "{bad} was let through"
            );
        }
        assert_eq!(sandbox_path(Path::new("")), "/home/user");
        assert_eq!(sandbox_path(Path::new("a/b")), "/home/user/a/b");
    }

    #[test]
    fn modes_read_as_ls_writes_them() {
        assert_eq!(permissions(FileKind::File, 0o644), "-rw-r--r--");
        assert_eq!(permissions(FileKind::Directory, 0o755), "drwxr-xr-x");
        assert_eq!(permissions(FileKind::Symlink, 0o777), "lrwxrwxrwx");
    }

    fn home() -> (tempfile::TempDir, HomeDir) {
        let dir = tempfile::tempdir().unwrap();
        // Files are given to the test's own uid and gid.
        let (uid, gid) = std::fs::metadata(dir.path())
            .map(|m| {
                use std::os::unix::fs::MetadataExt;
                (m.uid(), m.gid())
            })
            .unwrap();
        let home = HomeDir::new(dir.path().to_path_buf(), uid, gid, 1024);
        (dir, home)
    }

    /// Issue 40, point 13: a home of many files is listed a bounded part.
    #[tokio::test]
    async fn a_listing_stops_at_its_bound() {
        let (dir, home) = home();
        for d in 0..11 {
            let sub = dir.path().join(format!("d{d}"));
            std::fs::create_dir(&sub).unwrap();
            for f in 0..1000 {
                std::fs::write(sub.join(format!("f{f}")), b"").unwrap();
            }
        }
        let listed = home.list("", 2).await.unwrap();
        assert_eq!(listed.len(), MAX_LISTED, "11,011 entries there");
        let top = home.list("", 1).await.unwrap();
        assert_eq!(top.len(), 11);
    }

    #[tokio::test]
    async fn files_are_written_read_listed_and_removed() {
        let (dir, home) = home();
        let entry = home
            .write("/home/user/d/a.txt", b"hello".to_vec().into())
            .await
            .unwrap();
        assert_eq!(entry.path, "/home/user/d/a.txt");
        assert_eq!(entry.kind, FileKind::File);
        assert_eq!(entry.size, 5);
        assert_eq!(home.read("d/a.txt").await.unwrap(), b"hello");
        assert!(dir.path().join("d/a.txt").is_file());
        let top = home.list("/home/user", 1).await.unwrap();
        assert_eq!(top.len(), 1);
        assert_eq!(top[0].kind, FileKind::Directory);
        let deep = home.list("", 2).await.unwrap();
        assert_eq!(deep.len(), 2, "{deep:?}");
        assert!(home.make_dir("e/f").await.unwrap());
        assert!(!home.make_dir("e/f").await.unwrap());
        assert_eq!(home.stat("e").await.unwrap().kind, FileKind::Directory);
        home.remove("d").await.unwrap();
        assert!(matches!(
            home.read("d/a.txt").await,
            Err(SandboxError::NotFound(_))
        ));
        assert!(matches!(
            home.read("e").await,
            Err(SandboxError::InvalidInput(_))
        ));
        assert!(matches!(
            home.write("big", vec![0; 2048].into()).await,
            Err(SandboxError::NoSpace(_))
        ));
        assert!(matches!(
            home.remove("/home/user").await,
            Err(SandboxError::InvalidInput(_))
        ));
    }

    #[tokio::test]
    async fn links_out_of_the_home_are_not_followed() {
        let (dir, home) = home();
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("secret"), "host secret").unwrap();
        std::os::unix::fs::symlink(outside.path().join("secret"), dir.path().join("abs")).unwrap();
        std::os::unix::fs::symlink("../../../../../../../etc/hostname", dir.path().join("rel"))
            .unwrap();
        std::os::unix::fs::symlink(outside.path(), dir.path().join("dirlink")).unwrap();
        for path in ["abs", "rel", "dirlink/secret"] {
            assert!(
                matches!(
                    home.read(path).await,
                    Err(SandboxError::InvalidInput(_) | SandboxError::NotFound(_))
                ),
                "{path} was read"
            );
        }
        for path in ["abs", "dirlink/new"] {
            assert!(
                home.write(path, b"x".to_vec().into()).await.is_err(),
                "{path} was written"
            );
        }
        assert_eq!(
            std::fs::read_to_string(outside.path().join("secret")).unwrap(),
            "host secret"
        );
        assert!(!outside.path().join("new").exists());
        // The links themselves are listed, not followed.
        let entries = home.list("", 1).await.unwrap();
        assert!(
            entries.iter().all(|e| e.kind == FileKind::Symlink),
            "{entries:?}"
        );
        assert!(home.list("dirlink", 1).await.is_err());
        // A link that stays inside works.
        std::fs::write(dir.path().join("real.txt"), "inside").unwrap();
        std::os::unix::fs::symlink("real.txt", dir.path().join("inner")).unwrap();
        assert_eq!(home.read("inner").await.unwrap(), b"inside");
    }

    proptest! {
        /// No path confine lets through climbs out of the home.
        #[test]
        fn confined_paths_stay_below_the_home(path in "[a-z./~]{0,12}") {
            if let Ok(relative) = confine(&path) {
                prop_assert!(relative.components().all(|c| matches!(c, Component::Normal(_))));
            }
        }
    }
}
