//! Who a jail runs as on the host: one uid (and a gid of the same number)
//! from a range kept for runcell, leased by one session or one run at a
//! time, so that jails never share an identity with each other or with the
//! host's own daemons (65534 "nobody" is shared by many). Inside the jail
//! every lease is the same fixed `user` ([`JAIL_UID`]).
//!
//! A lease is a lock (`flock`) on a file named after the uid in a root-only
//! directory: it holds across every `JailSandbox` in the process and across
//! processes (two servers, a test binary next to `runcell doctor`), and the
//! kernel lets go of it when a process dies, so a crash leaks nothing.

use std::fs::{File, OpenOptions};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};

/// The uid and gid jailed code has inside its jail, whatever its host uid.
pub const JAIL_UID: u32 = 1000;
/// The name the jail's `/etc/passwd` gives [`JAIL_UID`].
pub const JAIL_USER: &str = "user";
/// Where the leases' lock files live (root only).
const LEASES: &str = "/run/runcell/uids";

/// A host uid and gid.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HostId {
    pub uid: u32,
    pub gid: u32,
}

/// The range of host uids (and gids) jails run as.
#[derive(Debug)]
pub struct UidPool {
    base: u32,
    count: u32,
    dir: PathBuf,
    /// Where the next search starts, so that a uid just given back is the
    /// last to be taken again.
    next: AtomicU32,
}

#[derive(Debug, thiserror::Error)]
pub enum UidError {
    #[error("the jail uid range {0}")]
    Range(String),
    #[error("every jail uid ({count} from {base}) is in use; try again when a session closes")]
    Exhausted { base: u32, count: u32 },
    #[error("jail uid leases: {0}")]
    Io(String),
}

impl UidPool {
    /// Checks that no user or group of the host has a number in
    /// `base..base + count` and that the range stays clear of root and
    /// 65534, then prepares the leases' directory.
    pub fn new(base: u32, count: u32) -> Result<Self, UidError> {
        Self::with_dir(base, count, Path::new(LEASES))
    }

    fn with_dir(base: u32, count: u32, dir: &Path) -> Result<Self, UidError> {
        let end = check_range(base, count)?;
        for (file, what) in [("/etc/passwd", "user"), ("/etc/group", "group")] {
            let text = std::fs::read_to_string(file)
                .map_err(|e| UidError::Range(format!("cannot be checked: {file}: {e}")))?;
            if let Some(name) = taken_in(&text, base, end) {
                return Err(UidError::Range(format!(
                    "{base}..{end} is not free: the host {what} {name} is in it (set sandbox.uid_base)"
                )));
            }
        }
        make_private_dir(dir)?;
        Ok(Self {
            base,
            count,
            dir: dir.to_path_buf(),
            next: AtomicU32::new(0),
        })
    }

    pub fn range(&self) -> std::ops::Range<u32> {
        self.base..self.base + self.count
    }

    /// A uid no other session or run holds, until the lease is dropped.
    pub fn lease(&self) -> Result<Lease, UidError> {
        let start = self.next.fetch_add(1, Ordering::Relaxed);
        for step in 0..self.count {
            let uid = self.base + (start.wrapping_add(step) % self.count);
            let path = self.dir.join(uid.to_string());
            let file = OpenOptions::new()
                .create(true)
                .truncate(false)
                .write(true)
                .mode(0o600)
                .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
                .open(&path)
                .map_err(|e| UidError::Io(format!("{}: {e}", path.display())))?;
            let locked =
                rustix::fs::flock(&file, rustix::fs::FlockOperation::NonBlockingLockExclusive);
            if locked.is_ok() {
                self.next
                    .store(start.wrapping_add(step).wrapping_add(1), Ordering::Relaxed);
                return Ok(Lease {
                    id: HostId { uid, gid: uid },
                    _lock: file,
                });
            }
        }
        Err(UidError::Exhausted {
            base: self.base,
            count: self.count,
        })
    }
}

/// One uid, held until dropped. Whoever holds it drops it only once every
/// process that ran as the uid is gone (its groups killed and empty).
#[derive(Debug)]
pub struct Lease {
    id: HostId,
    _lock: File,
}

impl Lease {
    pub fn id(&self) -> HostId {
        self.id
    }

    /// Gives the uid back if nothing runs as it any more (`empty`: its
    /// groups are empty); otherwise keeps it out of use until the server
    /// stops, so that a survivor never shares its uid with a new jail.
    pub fn give_back(self, empty: bool) {
        if !empty {
            tracing::warn!(
                uid = self.id.uid,
                "processes outlived their jail: the uid is retired"
            );
            std::mem::forget(self);
        }
    }
}

/// The end of the range, if it is sound.
fn check_range(base: u32, count: u32) -> Result<u32, UidError> {
    if count == 0 {
        return Err(UidError::Range("is empty (sandbox.uid_count is 0)".into()));
    }
    let end = base
        .checked_add(count)
        .filter(|&end| end < u32::MAX - 1)
        .ok_or_else(|| UidError::Range(format!("{base} + {count} overflows")))?;
    // Below 1000 are system accounts; 65534 is nobody.
    if base < 1000 || (base..end).contains(&65534) {
        return Err(UidError::Range(format!(
            "{base}..{end} must start at 1000 or above and leave out 65534"
        )));
    }
    Ok(end)
}

/// The first entry of a passwd- or group-format file whose number is in
/// `base..end`.
fn taken_in(text: &str, base: u32, end: u32) -> Option<String> {
    text.lines().find_map(|line| {
        let mut fields = line.split(':');
        let name = fields.next()?;
        let id: u32 = fields.nth(1)?.parse().ok()?;
        (base..end).contains(&id).then(|| format!("{name} ({id})"))
    })
}

/// `dir` (and its parent) as root-owned directories only root can use;
/// refuses one that exists owned by someone else.
fn make_private_dir(dir: &Path) -> Result<(), UidError> {
    let io = |e: std::io::Error| UidError::Io(format!("{}: {e}", dir.display()));
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o755)
        .create(dir.parent().unwrap_or(dir))
        .map_err(io)?;
    match std::fs::DirBuilder::new().mode(0o700).create(dir) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(io(e)),
    }
    let meta = std::fs::symlink_metadata(dir).map_err(io)?;
    if !meta.is_dir() || meta.uid() != 0 || meta.mode() & 0o022 != 0 {
        return Err(UidError::Io(format!(
            "{} must be a directory owned by root that only root can write",
            dir.display()
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_must_be_clear_of_system_users_and_nobody() {
        assert!(check_range(600_000, 1000).is_ok());
        assert!(check_range(500, 10).is_err());
        assert!(check_range(65_000, 1000).is_err());
        assert!(check_range(600_000, 0).is_err());
        assert!(check_range(u32::MAX - 5, 10).is_err());
    }

    #[test]
    fn host_users_inside_the_range_are_found() {
        let passwd = "root:x:0:0:root:/root:/bin/bash\nbob:x:600010:600010::/home/bob:/bin/sh\n";
        assert_eq!(
            taken_in(passwd, 600_000, 601_000),
            Some("bob (600010)".into())
        );
        assert_eq!(taken_in(passwd, 700_000, 701_000), None);
        assert_eq!(taken_in("garbage\n\n", 0, 10), None);
    }

    #[test]
    fn leases_are_exclusive_until_dropped() {
        if !super::super::running_as_root() {
            eprintln!("skipped: needs root for a root-owned lease directory");
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let leases = dir.path().join("uids");
        let pool = UidPool::with_dir(700_000, 2, &leases).unwrap();
        let a = pool.lease().unwrap();
        let b = pool.lease().unwrap();
        assert_ne!(a.id(), b.id());
        assert!(matches!(pool.lease(), Err(UidError::Exhausted { .. })));
        // Another pool over the same directory (another server) sees them held.
        let other = UidPool::with_dir(700_000, 2, &leases).unwrap();
        assert!(other.lease().is_err());
        let freed = a.id();
        drop(a);
        assert_eq!(other.lease().unwrap().id(), freed);
    }
}
