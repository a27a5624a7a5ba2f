//! The local jail: each run in a fresh bubblewrap jail started as an
//! unprivileged host uid of its own (one per session or one-shot run, from a
//! range kept for runcell; `user`, 1000, inside), with namespaces (no network
//! but loopback, its own pids, a read-only system and a minimal `/etc`), a
//! seccomp filter, cgroup limits (each jail's, and a total for all of them)
//! and rlimits. If any layer is missing the jail refuses to run anything and
//! says which.
mod cgroup;
pub mod doctor;
mod etc;
mod identity;
mod kernel;
mod launch;
mod loopback;
mod oneshot;
mod outcome;
mod seccomp;
mod session;
mod shared_pages;
mod supervise;
mod wire;
mod zmtp;

use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

pub(crate) use cgroup::RunGroup;
pub use cgroup::{CgroupMode, ParentCaps, TotalCaps};
pub use etc::{JAVA_KERNEL, JSHELL_ENGINE, NODE_KERNEL, NODE_KERNEL_PATH};
pub use identity::{HostId, JAIL_UID};
use identity::{Lease, UidPool};
use launch::BWRAP;
pub use launch::program;
pub(crate) use launch::{Code, Mounts};
use oneshot::Lane;
pub(crate) use outcome::stop_error;
pub use session::shell_quote;
pub use session::{JailSession, remove_stale_sessions};

use super::{
    Capabilities, Language, Limits, RunEvent, RunOutcome, RunRequest, Sandbox, SandboxError,
    SandboxKind,
};

/// The Python environment jailed code runs with (built by scripts/setup.sh).
pub const PYTHON_ENV: &str = "/opt/runcell/python";
/// The Node packages the JavaScript/TypeScript kernel loads (sucrase),
/// installed by `scripts/setup.sh` from `scripts/sandbox-node`.
pub const NODE_ENV: &str = "/opt/runcell/node";

#[derive(Clone, Debug)]
pub struct JailConfig {
    /// The host uids (and gids of the same numbers) jails run as: one each,
    /// `uid_base..uid_base + uid_count`, never root's nor a host user's.
    pub uid_base: u32,
    pub uid_count: u32,
    /// What every jail together may use.
    pub total: TotalCaps,
    /// The largest limits a request may have.
    pub max_limits: Limits,
    /// Kernels' pages merged where they are alike (`shared_pages`).
    pub share_kernel_memory: bool,
    /// runcell's package index, served on each jail's own loopback
    /// ([`loopback`]); `None`: jails have no index (`packages.mode = off`).
    pub packages: Option<JailPackages>,
}

/// The package index jails are given.
#[derive(Clone)]
pub struct JailPackages(pub std::sync::Arc<crate::packages::PackageIndex>);

impl std::fmt::Debug for JailPackages {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("JailPackages")
            .field(&self.0.upstream())
            .finish()
    }
}

/// Where a session's `pip install` puts what it installs (pip's `--prefix`,
/// in the session's home, so that it counts against its disk), and the
/// `site-packages` under it for the sandbox's Python.
pub const PACKAGES_PREFIX: &str = "/home/user/.local";

impl Default for JailConfig {
    fn default() -> Self {
        let settings = crate::config::SandboxConfig::default();
        Self {
            uid_base: settings.uid_base,
            uid_count: settings.uid_count,
            total: TotalCaps {
                memory_bytes: cgroup::default_total_memory(),
                pids: settings.total_pids,
                cpu_millis: cgroup::default_total_cpu_millis().max(u64::from(settings.cpu_millis)),
            },
            max_limits: Limits {
                wall: super::MAX_WALL,
                ..Limits::default()
            },
            share_kernel_memory: settings.share_kernel_memory,
            packages: None,
        }
    }
}

impl JailConfig {
    /// The jail's part of the server's settings.
    pub fn from_settings(settings: &crate::config::SandboxConfig) -> Self {
        Self {
            uid_base: settings.uid_base,
            uid_count: settings.uid_count,
            total: TotalCaps {
                memory_bytes: match settings.total_memory_mib {
                    0 => cgroup::default_total_memory(),
                    mib => mib.saturating_mul(1024 * 1024),
                },
                pids: settings.total_pids,
                // Never below one run's own quota (cgroup v1 refuses that).
                cpu_millis: match settings.total_cpu_millis {
                    0 => cgroup::default_total_cpu_millis(),
                    millis => millis,
                }
                .max(u64::from(settings.cpu_millis)),
            },
            max_limits: settings.max_limits(),
            share_kernel_memory: settings.share_kernel_memory,
            packages: None,
        }
    }
}

/// What the probe found: everything a run needs.
#[derive(Debug)]
struct Ready {
    cgroups: CgroupMode,
    seccomp: Vec<u8>,
    /// The minimal `/etc` bound into every jail.
    etc: &'static std::path::Path,
    uids: UidPool,
    /// Kernels are started with their pages mergeable.
    share_pages: bool,
    /// Where installed packages are imported from in a jail
    /// (`PACKAGES_PREFIX/lib/python3.N/site-packages`).
    site: String,
}

pub struct JailSandbox {
    config: JailConfig,
    ready: Result<Ready, String>,
    /// Jails already set up and waiting for a program, by language.
    warm: parking_lot::Mutex<std::collections::HashMap<Language, Lane>>,
    /// A handle sessions keep; set once at construction.
    this: std::sync::Weak<JailSandbox>,
}

impl JailSandbox {
    /// Probes the host once; a missing layer makes every run fail with
    /// [`SandboxError::Unavailable`] naming it.
    pub fn new(config: JailConfig) -> std::sync::Arc<Self> {
        let ready = probe(&config);
        if let Err(reason) = &ready {
            tracing::warn!(%reason, "the local sandbox is unavailable: code will not run");
        }
        std::sync::Arc::new_cyclic(|this| Self {
            config,
            ready,
            warm: parking_lot::Mutex::new(std::collections::HashMap::new()),
            this: this.clone(),
        })
    }

    fn handle(&self) -> Result<std::sync::Arc<Self>, SandboxError> {
        self.this
            .upgrade()
            .ok_or_else(|| SandboxError::Internal("the sandbox is shutting down".into()))
    }

    /// Why the jail cannot run code, if it cannot.
    pub fn unavailable(&self) -> Option<&str> {
        self.ready.as_ref().err().map(String::as_str)
    }

    pub fn cgroup_mode(&self) -> Option<&CgroupMode> {
        self.ready.as_ref().ok().map(|r| &r.cgroups)
    }

    /// The host uids jails run as.
    pub fn uid_range(&self) -> Option<std::ops::Range<u32>> {
        self.ready.as_ref().ok().map(|r| r.uids.range())
    }

    /// The caps every jail together runs under, as the parent group holds
    /// them now.
    pub fn total_caps(&self) -> Option<ParentCaps> {
        self.ready
            .as_ref()
            .ok()
            .map(|r| cgroup::parent_caps(&r.cgroups))
    }

    /// A host uid for one session or run, held until the lease is dropped;
    /// drop it only once the uid's groups are empty.
    pub(crate) fn lease_uid(&self) -> Result<Lease, SandboxError> {
        self.ready()?
            .uids
            .lease()
            .map_err(|e| SandboxError::Unavailable(e.to_string()))
    }

    /// What the probe found, or why code cannot run.
    fn ready(&self) -> Result<&Ready, SandboxError> {
        self.ready
            .as_ref()
            .map_err(|reason| SandboxError::Unavailable(reason.clone()))
    }

    pub(crate) fn ready_cgroups(&self) -> Result<&CgroupMode, SandboxError> {
        self.ready().map(|r| &r.cgroups)
    }
}

fn probe(config: &JailConfig) -> Result<Ready, String> {
    if !running_as_root() {
        return Err("runcell must run as root to create cgroups and drop to the jail uid".into());
    }
    if !std::path::Path::new(BWRAP).is_file() {
        return Err(format!("{BWRAP} is missing (Debian package bubblewrap)"));
    }
    let userns = std::fs::read_to_string("/proc/sys/user/max_user_namespaces")
        .ok()
        .and_then(|s| s.trim().parse::<u64>().ok())
        .unwrap_or(0);
    if userns == 0 {
        return Err("user namespaces are disabled (user.max_user_namespaces is 0)".into());
    }
    if !std::path::Path::new("/proc/sys/kernel/seccomp/actions_avail").is_file() {
        return Err("the kernel has no seccomp filter support".into());
    }
    if !std::path::Path::new(PYTHON_ENV)
        .join("bin/python3")
        .is_file()
    {
        return Err(format!(
            "the sandbox's Python environment {PYTHON_ENV} is missing: run scripts/setup.sh"
        ));
    }
    let site = packages_site()?;
    let seccomp = seccomp::filter_bytes().map_err(|e| e.to_string())?;
    let cgroups = cgroup::detect().map_err(|e| e.to_string())?;
    cgroup::set_parent_caps(&cgroups, &config.total).map_err(|e| e.to_string())?;
    let uids = UidPool::new(config.uid_base, config.uid_count).map_err(|e| e.to_string())?;
    let etc = etc::jail_etc()?;
    let share_pages = config.share_kernel_memory
        && shared_pages::enable()
            .inspect_err(|reason| {
                tracing::warn!(%reason, "idle kernels will not share their memory");
            })
            .is_ok();
    Ok(Ready {
        cgroups,
        seccomp,
        etc,
        uids,
        share_pages,
        site,
    })
}

/// `site-packages` under [`PACKAGES_PREFIX`] for the sandbox Python's
/// version (`lib/python3.N` in its environment).
fn packages_site() -> Result<String, String> {
    let lib = std::path::Path::new(PYTHON_ENV).join("lib");
    let version = std::fs::read_dir(&lib)
        .map_err(|e| format!("{}: {e}", lib.display()))?
        .flatten()
        .map(|entry| entry.file_name().to_string_lossy().into_owned())
        .find(|name| name.starts_with("python3."))
        .ok_or_else(|| format!("no python3.N in {}", lib.display()))?;
    Ok(format!("{PACKAGES_PREFIX}/lib/{version}/site-packages"))
}

pub(crate) fn running_as_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("Uid:"))
                .map(|l| l.split_whitespace().nth(2) == Some("0"))
        })
        .unwrap_or(false)
}

/// Whether the JDK with JShell is installed (Debian's `openjdk-17-jdk-headless`,
/// which scripts/setup.sh installs): Java is offered only then.
fn java_installed() -> bool {
    static INSTALLED: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *INSTALLED.get_or_init(|| {
        std::path::Path::new(etc::JAVA).exists() && std::path::Path::new("/usr/bin/jshell").exists()
    })
}

#[async_trait::async_trait]
impl Sandbox for JailSandbox {
    fn capabilities(&self) -> Capabilities {
        Capabilities {
            backend: SandboxKind::Jail,
            languages: Language::ALL
                .into_iter()
                .filter(|language| *language != Language::Java || java_installed())
                .collect(),
            stateful: true,
            files: true,
            interrupt: true,
            one_shot: true,
            isolated_sessions: true,
            contexts: true,
        }
    }

    #[tracing::instrument(name = "run", skip_all, fields(sandbox.backend = SandboxKind::Jail.name(), language = request.language.name()))]
    async fn run(
        &self,
        request: RunRequest,
        events: Option<mpsc::Sender<RunEvent>>,
        cancel: CancellationToken,
    ) -> Result<RunOutcome, SandboxError> {
        self.run_process(&request, None, events.as_ref(), &cancel)
            .await
    }

    async fn open_session(&self) -> Result<Box<dyn super::SandboxSession>, SandboxError> {
        Ok(Box::new(
            JailSession::open(self.handle()?, self.config.max_limits.clone()).await?,
        ))
    }
}

/// A request's limits, none above the server's.
pub(crate) fn clamp(asked: &Limits, max: &Limits) -> Limits {
    Limits {
        wall: asked.wall.min(max.wall),
        memory_bytes: asked.memory_bytes.min(max.memory_bytes),
        pids: asked.pids.min(max.pids),
        cpu_millis: asked.cpu_millis.min(max.cpu_millis),
        output_bytes: asked.output_bytes.min(max.output_bytes),
        file_bytes: asked.file_bytes.min(max.file_bytes),
        disk_bytes: asked.disk_bytes.min(max.disk_bytes),
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn requests_cannot_raise_the_server_limits() {
        let max = Limits::default();
        let asked = Limits {
            wall: Duration::from_secs(10_000),
            memory_bytes: 1,
            ..Limits::default()
        };
        let limits = clamp(&asked, &max);
        assert_eq!(limits.wall, max.wall);
        assert_eq!(limits.memory_bytes, 1);
    }
}
