//! A jail's own network namespace, made by the server, with runcell's
//! package index listening on its loopback.
//!
//! Without the index, bubblewrap makes each jail's network namespace
//! (`--unshare-all`): loopback only. With it, the server makes the
//! namespace first, on a thread of its own: it brings `lo` up, binds a
//! listener on `127.0.0.1:`[`JAIL_PORT`] there, and keeps that listener.
//! The jail's first process joins the namespace before it execs bubblewrap
//! (`--share-net` then keeps it). So the jail still reaches nothing but its
//! own loopback, where the only thing it finds is the index, served by the
//! server for that jail's session alone: no route, no forwarder process in
//! the jail, and no socket of the host's bound into it. The namespace
//! belongs to the host's user namespace: the jail has no capability over it.
//!
//! The namespace lives while the jail's processes or the listener do; the
//! [`JailNet`] closes the listener when it is dropped.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::Arc;

use runcell_packages::{Account, JAIL_PORT, PackageIndex};

use super::{JailPackages, JailSandbox, PACKAGES_PREFIX, PYTHON_ENV};
use crate::SandboxError;

/// What a jail is given to reach the index: its own network, served for
/// one account, and the environment that points pip at it and puts what
/// it installed on Python's path.
pub(crate) struct PackageNet {
    pub net: JailNet,
    pub env: Vec<(String, String)>,
}

impl JailSandbox {
    /// The index's network for a jail whose installs count to `account`;
    /// `None` when jails have no index.
    pub(crate) fn package_net(
        &self,
        account: &Arc<Account>,
    ) -> Result<Option<PackageNet>, SandboxError> {
        let Some(JailPackages(index)) = &self.config.packages else {
            return Ok(None);
        };
        let site = self.ready()?.site.clone();
        let net = JailNet::open(index, account)?;
        let mut env = index.jail_env();
        env.extend([
            ("PIP_PREFIX".to_string(), PACKAGES_PREFIX.to_string()),
            ("PYTHONPATH".to_string(), site),
            (
                "PATH".to_string(),
                format!("{PACKAGES_PREFIX}/bin:{PYTHON_ENV}/bin:/usr/local/bin:/usr/bin:/bin"),
            ),
        ]);
        Ok(Some(PackageNet { net, env }))
    }

    /// Where installed packages are imported from, when jails have an index.
    pub(crate) fn packages_site(&self) -> Option<&str> {
        self.config.packages.as_ref()?;
        self.ready.as_ref().ok().map(|ready| ready.site.as_str())
    }
}

/// The listener of one jail's namespace, served while this lives.
pub(crate) struct JailNet {
    namespace: OwnedFd,
    serving: tokio::task::JoinHandle<()>,
}

impl JailNet {
    /// Makes a namespace and serves `index` on its loopback for `account`.
    /// Called on the runtime or one of its blocking threads.
    pub fn open(index: &Arc<PackageIndex>, account: &Arc<Account>) -> Result<Self, SandboxError> {
        let (namespace, listener) = std::thread::spawn(new_namespace)
            .join()
            .map_err(|_| SandboxError::Internal("making a jail's network failed".into()))?
            .map_err(|e| SandboxError::Internal(format!("cannot make a jail's network: {e}")))?;
        let runtime = tokio::runtime::Handle::try_current()
            .map_err(|e| SandboxError::Internal(format!("no runtime to serve the index: {e}")))?;
        let listener = {
            let _entered = runtime.enter();
            listener
                .set_nonblocking(true)
                .and_then(|()| tokio::net::TcpListener::from_std(listener))
                .map_err(|e| SandboxError::Internal(format!("the index's listener: {e}")))?
        };
        let serving = runtime.spawn(index.clone().serve(listener, account.clone()));
        Ok(Self { namespace, serving })
    }

    /// The namespace, for the jail's first process to join.
    pub fn namespace(&self) -> RawFd {
        self.namespace.as_raw_fd()
    }
}

impl Drop for JailNet {
    fn drop(&mut self) {
        self.serving.abort();
    }
}

impl std::fmt::Debug for JailNet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JailNet")
            .field("namespace", &self.namespace)
            .finish_non_exhaustive()
    }
}

/// On a thread of its own (a namespace is a thread's; this one ends right
/// after): a new network namespace with `lo` up and a listener on it.
#[allow(unsafe_code)]
fn new_namespace() -> std::io::Result<(OwnedFd, std::net::TcpListener)> {
    let check = |result: libc::c_int| {
        if result < 0 {
            Err(std::io::Error::last_os_error())
        } else {
            Ok(result)
        }
    };
    // SAFETY: plain system calls on values made here; the descriptors they
    // return are owned at once.
    let namespace = unsafe {
        check(libc::unshare(libc::CLONE_NEWNET))?;
        let fd = check(libc::open(
            c"/proc/thread-self/ns/net".as_ptr(),
            libc::O_RDONLY | libc::O_CLOEXEC,
        ))?;
        OwnedFd::from_raw_fd(fd)
    };
    loopback_up()?;
    let listener = std::net::TcpListener::bind((std::net::Ipv4Addr::LOCALHOST, JAIL_PORT))?;
    Ok((namespace, listener))
}

/// Sets `IFF_UP` on `lo` in the calling thread's namespace.
#[allow(unsafe_code)]
fn loopback_up() -> std::io::Result<()> {
    // SAFETY: a socket owned at once; `ifreq` is plain data, zeroed, with
    // its name set within its bounds.
    unsafe {
        let fd = libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0);
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        let socket = OwnedFd::from_raw_fd(fd);
        let mut request: libc::ifreq = std::mem::zeroed();
        for (to, from) in request.ifr_name.iter_mut().zip(b"lo\0") {
            *to = *from as libc::c_char;
        }
        if libc::ioctl(socket.as_raw_fd(), libc::SIOCGIFFLAGS, &mut request) < 0 {
            return Err(std::io::Error::last_os_error());
        }
        request.ifr_ifru.ifru_flags |= libc::IFF_UP as libc::c_short;
        if libc::ioctl(socket.as_raw_fd(), libc::SIOCSIFFLAGS, &request) < 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_new_namespace_has_its_own_loopback_with_the_listener() {
        if !super::super::running_as_root() {
            return;
        }
        let (namespace, listener) = std::thread::spawn(new_namespace).join().unwrap().unwrap();
        assert_eq!(
            listener.local_addr().unwrap(),
            std::net::SocketAddr::from((std::net::Ipv4Addr::LOCALHOST, JAIL_PORT))
        );
        // Each namespace has its own loopback: a second one binds the same
        // port.
        let (_other, again) = std::thread::spawn(new_namespace).join().unwrap().unwrap();
        assert_eq!(again.local_addr().unwrap().port(), JAIL_PORT);
        // A thread that joins the namespace reaches the listener there.
        let fd = namespace.as_raw_fd();
        let reached = std::thread::spawn(move || {
            // SAFETY: setns on a namespace descriptor that outlives the call.
            #[allow(unsafe_code)]
            let joined = unsafe { libc::setns(fd, libc::CLONE_NEWNET) };
            assert_eq!(joined, 0);
            std::net::TcpStream::connect(("127.0.0.1", JAIL_PORT)).is_ok()
        })
        .join()
        .unwrap();
        assert!(reached);
        assert!(listener.accept().is_ok());
    }
}
