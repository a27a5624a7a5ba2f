//! The kernel's socket directory: the socket names and the connection
//! file in it, all reached beneath one directory handle, never through a
//! link the jail made.

use std::os::fd::OwnedFd;
use std::path::Path;

use rustix::fs::{AtFlags, FileType, Mode, OFlags};

/// The socket names in the ipc directory, by port number in the connection
/// file (`<ip>-<port>`, as ipykernel names ipc endpoints).
pub(super) const SHELL: &str = "k-1";
pub(super) const IOPUB: &str = "k-2";
pub(super) const CONTROL: &str = "k-4";
pub(super) const CONNECTION_FILE: &str = "connection.json";

/// The kernel's socket directory, opened once. The jail uid owns it, so
/// everything in it is reached beneath this handle, without following links.
pub(super) struct IpcDir {
    fd: OwnedFd,
}

impl IpcDir {
    pub(super) fn open(path: &Path) -> rustix::io::Result<Self> {
        let fd = rustix::fs::open(
            path,
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::empty(),
        )?;
        Ok(Self { fd })
    }

    /// Removes what an earlier kernel left (sockets, links: never followed).
    pub(super) fn clear(&self) {
        let Ok(entries) = rustix::fs::Dir::read_from(&self.fd) else {
            return;
        };
        for entry in entries.flatten() {
            let name = entry.file_name();
            if name == c"." || name == c".." {
                continue;
            }
            if rustix::fs::unlinkat(&self.fd, name, AtFlags::empty()).is_err() {
                // An empty directory the jail made; a full one stays, and
                // the kernel reports the name it cannot bind.
                let _ = rustix::fs::unlinkat(&self.fd, name, AtFlags::REMOVEDIR);
            }
        }
    }

    /// Writes the connection file as a new file (never through whatever
    /// the jail left at its name), readable by the jail uid only.
    pub(super) fn write_connection_file(
        &self,
        json: &[u8],
        uid: u32,
        gid: u32,
    ) -> std::io::Result<()> {
        use std::io::Write;
        match rustix::fs::unlinkat(&self.fd, CONNECTION_FILE, AtFlags::empty()) {
            Ok(()) | Err(rustix::io::Errno::NOENT) => {}
            Err(e) => return Err(e.into()),
        }
        let fd = rustix::fs::openat(
            &self.fd,
            CONNECTION_FILE,
            OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::RUSR,
        )?;
        rustix::fs::fchmod(&fd, Mode::RUSR)?;
        rustix::fs::fchown(
            &fd,
            Some(rustix::fs::Uid::from_raw(uid)),
            Some(rustix::fs::Gid::from_raw(gid)),
        )?;
        std::fs::File::from(fd).write_all(json)
    }

    /// Whether the kernel has bound `name`: it must then be a socket of
    /// the jail uid, not a link or anything else.
    pub(super) fn socket_ready(&self, name: &str, uid: u32) -> Result<bool, String> {
        match rustix::fs::statat(&self.fd, name, AtFlags::SYMLINK_NOFOLLOW) {
            Err(rustix::io::Errno::NOENT) => Ok(false),
            Err(e) => Err(format!("{name}: {e}")),
            Ok(stat) if FileType::from_raw_mode(stat.st_mode) != FileType::Socket => {
                Err(format!("{name} is not a socket"))
            }
            Ok(stat) if stat.st_uid != uid => {
                Err(format!("{name} belongs to uid {}, not {uid}", stat.st_uid))
            }
            Ok(_) => Ok(true),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_socket_directory_is_used_without_following_links() {
        use std::os::unix::fs::{MetadataExt, PermissionsExt};
        let dir = tempfile::tempdir().unwrap();
        let outside = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(outside.path(), "outside").unwrap();
        let uid = std::fs::metadata(dir.path()).unwrap().uid();
        let gid = std::fs::metadata(dir.path()).unwrap().gid();
        let link =
            |name: &str, to: &Path| std::os::unix::fs::symlink(to, dir.path().join(name)).unwrap();
        link(CONNECTION_FILE, outside.path());
        link("old", outside.path());
        let ipc = IpcDir::open(dir.path()).unwrap();
        ipc.write_connection_file(b"{}", uid, gid).unwrap();
        let written = std::fs::symlink_metadata(dir.path().join(CONNECTION_FILE)).unwrap();
        assert!(written.is_file());
        assert_eq!(written.permissions().mode() & 0o777, 0o400);
        assert_eq!(std::fs::read_to_string(outside.path()).unwrap(), "outside");

        let _socket = std::os::unix::net::UnixListener::bind(dir.path().join(SHELL)).unwrap();
        link(IOPUB, &dir.path().join(SHELL));
        std::fs::write(dir.path().join(CONTROL), "").unwrap();
        assert_eq!(ipc.socket_ready(SHELL, uid), Ok(true));
        assert!(
            ipc.socket_ready(SHELL, uid + 1).is_err(),
            "another uid's socket"
        );
        assert!(ipc.socket_ready(IOPUB, uid).is_err(), "a link to a socket");
        assert!(ipc.socket_ready(CONTROL, uid).is_err(), "a plain file");
        assert_eq!(ipc.socket_ready("k-9", uid), Ok(false));

        ipc.clear();
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
        assert_eq!(std::fs::read_to_string(outside.path()).unwrap(), "outside");
        // A directory handle that is itself a link is refused.
        let parent = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink(dir.path(), parent.path().join("ipc")).unwrap();
        assert!(IpcDir::open(&parent.path().join("ipc")).is_err());
    }
}
