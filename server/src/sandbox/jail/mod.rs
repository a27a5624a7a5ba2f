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
mod seccomp;
mod session;
mod wire;
mod zmtp;

use std::io::{Seek, Write};
use std::os::fd::OwnedFd;
use std::process::Stdio;
use std::time::{Duration, Instant};

use command_fds::{CommandFdExt, FdMapping};
use tokio::io::AsyncReadExt;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

pub(crate) use cgroup::RunGroup;
pub use cgroup::{CgroupMode, TotalCaps};
pub use identity::{HostId, JAIL_UID};
use identity::{Lease, UidPool};
pub(crate) use session::shell_quote;
pub use session::{JailSession, remove_stale_sessions};

use super::{
    Capabilities, ExecError, Language, Limits, OutputBudget, OutputCollector, RunEvent, RunOutcome,
    RunRequest, Sandbox, SandboxError, limit_error, now_ms, validate_code,
};

const BWRAP: &str = "/usr/bin/bwrap";
/// The Python environment jailed code runs with (built by scripts/setup.sh).
pub const PYTHON_ENV: &str = "/opt/runcell/python";
const SETPRIV: &str = "/usr/bin/setpriv";
const PRLIMIT: &str = "/usr/bin/prlimit";
/// The descriptors bubblewrap reads the filter and the program from.
const SECCOMP_FD: i32 = 10;
const CODE_FD: i32 = 11;
/// How long the pipes may stay open after the jail's first process ended.
const DRAIN: Duration = Duration::from_secs(2);
/// Jails started ahead of time, per language, for one-shot runs.
const WARM_PER_LANGUAGE: usize = 2;
/// What a warm jail runs until its program arrives on standard input.
const AWAIT_PROGRAM: &str = r#"cat > "$0" || exit 125; exec "$@""#;
/// A host-wide backstop on processes of the jail uid, should a cgroup fail.
const NPROC_BACKSTOP: u32 = 4096;

/// Joins the run's cgroups, then becomes the rest of its arguments.
const LAUNCHER: &str =
    r#"while [ "$1" != -- ]; do echo $$ > "$1" || exit 125; shift; done; shift; exec "$@""#;

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
}

impl Default for JailConfig {
    fn default() -> Self {
        let settings = crate::config::SandboxConfig::default();
        Self {
            uid_base: settings.uid_base,
            uid_count: settings.uid_count,
            total: TotalCaps {
                memory_bytes: cgroup::default_total_memory(),
                pids: settings.total_pids,
            },
            max_limits: Limits {
                wall: super::MAX_WALL,
                ..Limits::default()
            },
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
            },
            max_limits: settings.max_limits(),
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
}

pub struct JailSandbox {
    config: JailConfig,
    ready: Result<Ready, String>,
    /// Jails already set up and waiting for a program, by language.
    warm: parking_lot::Mutex<std::collections::HashMap<Language, Vec<WarmJail>>>,
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
    /// them now: (memory bytes, pids).
    pub fn total_caps(&self) -> Option<(Option<u64>, Option<u64>)> {
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
}

fn probe(config: &JailConfig) -> Result<Ready, String> {
    if !running_as_root() {
        return Err("runcell must run as root to create cgroups and drop to the jail uid".into());
    }
    for (tool, package) in [
        (BWRAP, "bubblewrap"),
        (SETPRIV, "util-linux"),
        (PRLIMIT, "util-linux"),
    ] {
        if !std::path::Path::new(tool).is_file() {
            return Err(format!("{tool} is missing (Debian package {package})"));
        }
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
    let seccomp = seccomp::filter_bytes().map_err(|e| e.to_string())?;
    let cgroups = cgroup::detect().map_err(|e| e.to_string())?;
    cgroup::set_parent_caps(&cgroups, &config.total).map_err(|e| e.to_string())?;
    let uids = UidPool::new(config.uid_base, config.uid_count).map_err(|e| e.to_string())?;
    let etc = etc::jail_etc()?;
    Ok(Ready {
        cgroups,
        seccomp,
        etc,
        uids,
    })
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

/// A file holding `bytes`, unlinked, opened for reading from the start.
fn memory_file(bytes: &[u8]) -> std::io::Result<OwnedFd> {
    let mut file = tempfile::tempfile()?;
    file.write_all(bytes)?;
    file.rewind()?;
    Ok(file.into())
}

/// The program for each language, run in `/home/user`. C is compiled first; a
/// failed compile prints `marker` so that it cannot be mistaken for the
/// program's own failure (the program never sees the marker).
fn program(language: Language, marker: &str, dir: &str) -> (String, Vec<String>) {
    let file = |name: &str| format!("{dir}{name}");
    match language {
        Language::Python => (
            file("main.py"),
            vec![
                format!("{PYTHON_ENV}/bin/python3"),
                "-u".into(),
                file("main.py"),
            ],
        ),
        Language::Javascript => (
            file("main.js"),
            vec!["/usr/bin/node".into(), file("main.js")],
        ),
        Language::Bash => (file("main.sh"), vec!["/bin/bash".into(), file("main.sh")]),
        Language::C => {
            // A path with a slash, so that exec does not search the PATH.
            let binary = if dir.is_empty() {
                "./.main".to_string()
            } else {
                file(".main")
            };
            (
                file("main.c"),
                vec![
                    "/bin/sh".into(),
                    "-c".into(),
                    format!(
                        r#"gcc -O2 -std=gnu17 -o {binary} {dir}main.c -lm || {{ printf '\n%s\n' "$0" >&2; exit 1; }}; exec {binary}"#
                    ),
                    marker.into(),
                ],
            )
        }
    }
}

/// How a jailed program gets its code.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Code<'a> {
    /// It has none (a kernel).
    None,
    /// Copied into `Mounts::code_file` as the jail is made.
    File(&'a [u8]),
    /// Written later to the jail's standard input (a warm jail).
    Stdin,
}

/// A jail set up ahead of time: it waits, inside its group at the server's
/// maximum limits, for its program on standard input.
struct WarmJail {
    child: tokio::process::Child,
    group: RunGroup,
    marker: String,
    /// Its uid; dropped after the group.
    lease: Lease,
}

/// What a jail mounts beyond the read-only system.
#[derive(Debug, Default)]
pub(crate) struct Mounts {
    /// A host directory to use as `/home/user`; a fresh sized tmpfs if `None`.
    pub home: Option<std::path::PathBuf>,
    /// The program's file, copied from [`CODE_FD`]: a name in `/home/user`
    /// or an absolute path in the jail.
    pub code_file: Option<String>,
    /// Host directories bound read-write at the same path (kernel sockets).
    pub shared: Vec<std::path::PathBuf>,
    /// Environment variables beyond (or replacing) the defaults.
    pub env: Vec<(&'static str, &'static str)>,
}

fn bwrap_args(
    limits: &Limits,
    mounts: &Mounts,
    etc: &std::path::Path,
    command: Vec<String>,
) -> Vec<String> {
    let home = limits.home_bytes();
    let tmp = limits.disk_bytes - home;
    let mut args: Vec<String> = Vec::new();
    let mut push = |items: &[&str]| args.extend(items.iter().map(|s| (*s).to_string()));
    push(&["--ro-bind", "/usr", "/usr"]);
    push(&["--ro-bind", &etc.to_string_lossy(), "/etc"]);
    // Merged-/usr systems have /bin, /lib… as links into /usr.
    for dir in ["bin", "sbin", "lib", "lib32", "lib64", "libx32"] {
        let host = format!("/{dir}");
        match std::fs::read_link(&host) {
            Ok(target) => push(&["--symlink", &target.to_string_lossy(), &host]),
            Err(_) if std::path::Path::new(&host).is_dir() => push(&["--ro-bind", &host, &host]),
            Err(_) => {}
        }
    }
    push(&[
        "--ro-bind",
        PYTHON_ENV,
        PYTHON_ENV,
        "--proc",
        "/proc",
        "--dev",
        "/dev",
    ]);
    push(&["--size", &tmp.to_string(), "--tmpfs", "/tmp"]);
    // After the /tmp tmpfs, or it would hide binds below /tmp.
    for dir in &mounts.shared {
        let dir = dir.to_string_lossy();
        push(&["--bind", &dir, &dir]);
    }
    match &mounts.home {
        Some(host) => push(&["--bind", &host.to_string_lossy(), "/home/user"]),
        None => push(&["--size", &home.to_string(), "--tmpfs", "/home/user"]),
    }
    if let Some(file) = &mounts.code_file {
        let path = if file.starts_with('/') {
            file.clone()
        } else {
            format!("/home/user/{file}")
        };
        push(&["--file", &CODE_FD.to_string(), &path]);
    }
    push(&[
        "--chdir",
        "/home/user",
        "--unshare-all",
        "--unshare-user",
        "--disable-userns",
        "--uid",
        &JAIL_UID.to_string(),
        "--gid",
        &JAIL_UID.to_string(),
        "--die-with-parent",
        "--new-session",
        "--cap-drop",
        "ALL",
        "--hostname",
        "sandbox",
        "--clearenv",
        "--setenv",
        "PATH",
        &format!("{PYTHON_ENV}/bin:/usr/local/bin:/usr/bin:/bin"),
        "--setenv",
        "HOME",
        "/home/user",
        "--setenv",
        "LANG",
        "C.UTF-8",
        "--setenv",
        "MPLBACKEND",
        "Agg",
        "--seccomp",
        &SECCOMP_FD.to_string(),
    ]);
    for (key, value) in &mounts.env {
        push(&["--setenv", key, value]);
    }
    push(&["--"]);
    args.extend(command);
    args
}

impl JailSandbox {
    /// Starts `command` in a new jail as the host uid `user`, inside
    /// `group`, with `mounts`; `code` becomes the file `mounts.code_file`
    /// names.
    pub(crate) fn spawn_jail(
        &self,
        user: HostId,
        limits: &Limits,
        group: &RunGroup,
        mounts: &Mounts,
        command: Vec<String>,
        code: Code<'_>,
    ) -> Result<tokio::process::Child, SandboxError> {
        if user.uid == 0 || user.gid == 0 {
            return Err(SandboxError::Internal("a jail never runs as root".into()));
        }
        let ready = self.ready()?;
        let internal =
            |what: &str, e: &dyn std::fmt::Display| SandboxError::Internal(format!("{what}: {e}"));
        let mut cmd = tokio::process::Command::new("/bin/sh");
        cmd.env_clear()
            .env("PATH", "/usr/bin:/bin")
            .arg("-c")
            .arg(LAUNCHER)
            .arg("runcell-jail")
            .args(group.procs_files())
            .arg("--")
            .arg(PRLIMIT)
            .arg(format!("--fsize={0}:{0}", limits.file_bytes))
            .arg("--nofile=256:256")
            .arg("--core=0:0")
            .arg(format!("--nproc={NPROC_BACKSTOP}:{NPROC_BACKSTOP}"))
            .arg("--")
            .arg(SETPRIV)
            .arg(format!("--reuid={}", user.uid))
            .arg(format!("--regid={}", user.gid))
            .arg("--clear-groups")
            .arg("--")
            .arg(BWRAP)
            .args(bwrap_args(limits, mounts, ready.etc, command))
            .stdin(if matches!(code, Code::Stdin) {
                Stdio::piped()
            } else {
                Stdio::null()
            })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        let mut fds = vec![FdMapping {
            parent_fd: memory_file(&ready.seccomp).map_err(|e| internal("seccomp file", &e))?,
            child_fd: SECCOMP_FD,
        }];
        if let Code::File(code) = code {
            fds.push(FdMapping {
                parent_fd: memory_file(code).map_err(|e| internal("code file", &e))?,
                child_fd: CODE_FD,
            });
        }
        cmd.fd_mappings(fds)
            .map_err(|e| internal("descriptors", &e))?;
        cmd.spawn()
            .map_err(|e| internal("cannot start the jail", &e))
    }

    /// A warm jail for `language`, its group lowered to `limits`, if one is
    /// waiting and `limits` need nothing fixed at set-up (file size, disk).
    fn take_warm(&self, language: Language, limits: &Limits) -> Option<WarmJail> {
        let max = &self.config.max_limits;
        if limits.file_bytes != max.file_bytes || limits.disk_bytes != max.disk_bytes {
            return None;
        }
        let mut warm = loop {
            let mut candidate = self.warm.lock().get_mut(&language)?.pop()?;
            // One that died while waiting is of no use.
            if matches!(candidate.child.try_wait(), Ok(None)) {
                break candidate;
            }
            drop(candidate.child.start_kill());
        };
        match warm.group.apply(limits) {
            Ok(()) => Some(warm),
            Err(e) => {
                tracing::warn!(%e, "cannot set a warm jail's limits");
                let _ = warm.child.start_kill();
                None
            }
        }
    }

    /// Starts jails for `language` until enough are waiting.
    fn fill_warm(&self, language: Language) {
        let Ok(cgroups) = self.ready_cgroups() else {
            return;
        };
        loop {
            if self.warm.lock().get(&language).map_or(0, Vec::len) >= WARM_PER_LANGUAGE {
                return;
            }
            let limits = self.config.max_limits.clone();
            let lease = match self.lease_uid() {
                Ok(lease) => lease,
                Err(e) => {
                    tracing::warn!(%e, "no uid for a warm jail");
                    return;
                }
            };
            let name = format!("warm-{}", uuid::Uuid::new_v4().simple());
            let group = match RunGroup::create(cgroups, &name, &limits) {
                Ok(group) => group,
                Err(e) => {
                    tracing::warn!(%e, "cannot make a warm jail's group");
                    return;
                }
            };
            let marker = format!("runcell-compile-failed-{}", uuid::Uuid::new_v4().simple());
            let (file, command) = program(language, &marker, "");
            let mut argv = vec![
                "/bin/sh".to_string(),
                "-c".into(),
                AWAIT_PROGRAM.into(),
                file,
            ];
            argv.extend(command);
            let spawned = self.spawn_jail(
                lease.id(),
                &limits,
                &group,
                &Mounts::default(),
                argv,
                Code::Stdin,
            );
            match spawned {
                Ok(child) => self
                    .warm
                    .lock()
                    .entry(language)
                    .or_default()
                    .push(WarmJail {
                        child,
                        group,
                        marker,
                        lease,
                    }),
                Err(e) => {
                    tracing::warn!(%e, "cannot start a warm jail");
                    return;
                }
            }
        }
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

    /// Runs one program in a fresh jail; `home` is the session's home (and
    /// uid), or a throw-away tmpfs (and a uid of the run's own) when `None`.
    pub(crate) async fn run_process(
        &self,
        request: &RunRequest,
        home: Option<(&std::path::Path, HostId)>,
        events: Option<&mpsc::Sender<RunEvent>>,
        cancel: &CancellationToken,
    ) -> Result<RunOutcome, SandboxError> {
        validate_code(&request.code)?;
        let cgroups = self.ready_cgroups()?;
        let limits = clamp(&request.limits, &self.config.max_limits);
        let warm = if home.is_none() {
            self.take_warm(request.language, &limits)
        } else {
            None
        };
        let started = Instant::now();
        let (mut child, group, marker, lease) = match warm {
            Some(mut warm) => {
                let delivered = match warm.child.stdin.take() {
                    Some(mut stdin) => {
                        use tokio::io::AsyncWriteExt;
                        stdin.write_all(request.code.as_bytes()).await.is_ok()
                    }
                    None => false,
                };
                if !delivered {
                    return Err(SandboxError::Internal(
                        "a warm jail did not take its program".into(),
                    ));
                }
                (warm.child, warm.group, warm.marker, Some(warm.lease))
            }
            None => {
                // A session's runs share its uid; a one-shot run has its own.
                let (lease, user) = match home {
                    Some((_, user)) => (None, user),
                    None => {
                        let lease = self.lease_uid()?;
                        let user = lease.id();
                        (Some(lease), user)
                    }
                };
                let name = format!("run-{}", uuid::Uuid::new_v4().simple());
                let group = RunGroup::create(cgroups, &name, &limits)
                    .map_err(|e| SandboxError::Unavailable(e.to_string()))?;
                let marker = format!("runcell-compile-failed-{}", uuid::Uuid::new_v4().simple());
                // In a session's home the program goes to the jail's own
                // /tmp, so that it never overwrites nor shows among the
                // session's files.
                let dir = if home.is_some() { "/tmp/" } else { "" };
                let (file, command) = program(request.language, &marker, dir);
                let mounts = Mounts {
                    home: home.map(|(dir, _)| dir.to_path_buf()),
                    code_file: Some(file),
                    ..Mounts::default()
                };
                let child = self.spawn_jail(
                    user,
                    &limits,
                    &group,
                    &mounts,
                    command,
                    Code::File(request.code.as_bytes()),
                )?;
                (child, group, marker, lease)
            }
        };
        let supervised = supervise(&mut child, &limits, events, cancel).await;
        // Replace the warm jail once the run is over, not while it runs.
        if home.is_none()
            && let Ok(this) = self.handle()
        {
            let language = request.language;
            tokio::spawn(async move { this.fill_warm(language) });
        }
        group.kill_all();
        let outcome = classify(
            supervised,
            &group,
            &limits,
            request.language,
            &marker,
            started,
        );
        // Removing the groups can wait on the kernel for a few milliseconds;
        // the caller need not. The uid is free again once they are empty.
        tokio::task::spawn_blocking(move || {
            let empty = group.is_empty();
            drop(group);
            if let Some(lease) = lease {
                lease.give_back(empty);
            }
        });
        tracing::info!(
            duration_ms = outcome.duration_ms,
            exit_code = ?outcome.exit_code,
            error = outcome.error.as_ref().map(|e| e.name.as_str()),
            "run finished"
        );
        if let (Some(events), Some(error)) = (events, &outcome.error) {
            let _ = events
                .send(RunEvent::Error {
                    error: error.clone(),
                    ts_ms: now_ms(),
                })
                .await;
        }
        Ok(outcome)
    }
}

#[async_trait::async_trait]
impl Sandbox for JailSandbox {
    fn capabilities(&self) -> Capabilities {
        Capabilities {
            backend: "jail",
            languages: Language::ALL.to_vec(),
            stateful: true,
            files: true,
            interrupt: true,
        }
    }

    #[tracing::instrument(name = "run", skip_all, fields(sandbox.backend = "jail", language = request.language.name()))]
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

/// What supervision saw.
struct Supervised {
    stdout: String,
    stderr: String,
    status: Option<std::process::ExitStatus>,
    /// The limit (or cancel) that made the supervisor kill the jail.
    stopped_by: Option<&'static str>,
    /// What the output took of the run's budget; the error takes from it too.
    budget: OutputBudget,
}

async fn supervise(
    child: &mut tokio::process::Child,
    limits: &Limits,
    events: Option<&mpsc::Sender<RunEvent>>,
    cancel: &CancellationToken,
) -> Supervised {
    let (Some(mut stdout), Some(mut stderr)) = (child.stdout.take(), child.stderr.take()) else {
        let _ = child.start_kill();
        return Supervised {
            stdout: String::new(),
            stderr: String::new(),
            status: None,
            stopped_by: None,
            budget: OutputBudget::new(limits.output_bytes),
        };
    };
    let mut out = OutputCollector::default();
    let mut err = OutputCollector::default();
    let mut budget = OutputBudget::new(limits.output_bytes);
    let (mut out_open, mut err_open) = (true, true);
    let mut status = None;
    let mut stopped_by = None;
    let mut obuf = vec![0u8; 16 * 1024];
    let mut ebuf = vec![0u8; 16 * 1024];
    let deadline = tokio::time::sleep(limits.wall);
    tokio::pin!(deadline);
    let drain = tokio::time::sleep(Duration::MAX);
    tokio::pin!(drain);

    while out_open || err_open || status.is_none() {
        let mut chunk: Option<(bool, usize)> = None;
        tokio::select! {
            read = stdout.read(&mut obuf), if out_open => match read {
                Ok(0) | Err(_) => out_open = false,
                Ok(n) => chunk = Some((true, n)),
            },
            read = stderr.read(&mut ebuf), if err_open => match read {
                Ok(0) | Err(_) => err_open = false,
                Ok(n) => chunk = Some((false, n)),
            },
            exited = child.wait(), if status.is_none() => {
                status = exited.ok();
                drain.as_mut().reset(tokio::time::Instant::now() + DRAIN);
            }
            () = &mut deadline, if stopped_by.is_none() && status.is_none() => {
                stopped_by = Some(limit_error::TIMEOUT);
                let _ = child.start_kill();
            }
            () = cancel.cancelled(), if stopped_by.is_none() && status.is_none() => {
                stopped_by = Some(limit_error::CANCELLED);
                let _ = child.start_kill();
            }
            () = &mut drain => break,
        }
        let Some((is_stdout, n)) = chunk else {
            continue;
        };
        let (collector, bytes) = if is_stdout {
            (&mut out, &obuf[..n])
        } else {
            (&mut err, &ebuf[..n])
        };
        let text = collector.push(bytes, &mut budget);
        if !text.is_empty()
            && let Some(events) = events
        {
            let ts_ms = now_ms();
            let event = if is_stdout {
                RunEvent::Stdout { text, ts_ms }
            } else {
                RunEvent::Stderr { text, ts_ms }
            };
            let _ = events.send(event).await;
        }
        if budget.overflowed() && stopped_by.is_none() {
            stopped_by = Some(limit_error::OUTPUT);
            let _ = child.start_kill();
        }
    }
    if status.is_none() {
        let _ = child.start_kill();
        status = child.wait().await.ok();
    }
    out.finish(&mut budget);
    err.finish(&mut budget);
    Supervised {
        stdout: out.into_text(),
        stderr: err.into_text(),
        status,
        stopped_by,
        budget,
    }
}

fn classify(
    run: Supervised,
    group: &RunGroup,
    limits: &Limits,
    language: Language,
    marker: &str,
    started: Instant,
) -> RunOutcome {
    let exit_code = run.status.and_then(|s| s.code());
    let mut budget = run.budget;
    let mut stderr = run.stderr;
    let failed = exit_code != Some(0);
    let error = match stop_error(run.stopped_by, limits, &budget) {
        Some(error) => Some(error),
        _ if group.oom_killed() => Some(ExecError::new(
            limit_error::MEMORY,
            format!(
                "the run used more than {} MiB of memory",
                limits.memory_bytes / (1024 * 1024)
            ),
        )),
        _ if failed && group.pids_exhausted() => Some(ExecError::new(
            limit_error::PROCESSES,
            format!("the run tried to have more than {} processes", limits.pids),
        )),
        _ if language == Language::C && stderr.contains(marker) => {
            stderr = stderr
                .replace(&format!("\n{marker}\n"), "")
                .replace(marker, "");
            Some(ExecError {
                name: limit_error::COMPILE.into(),
                value: "the C program did not compile".into(),
                traceback: stderr.lines().map(str::to_string).collect(),
            })
        }
        _ if failed
            && (exit_code == Some(128 + libc::SIGXFSZ)
                || stderr.contains("No space left on device")
                || stderr.contains("File too large")) =>
        {
            Some(ExecError::new(
                limit_error::DISK,
                format!(
                    "the run wrote more than allowed ({} MiB a file, {} MiB in all)",
                    limits.file_bytes / (1024 * 1024),
                    limits.disk_bytes / (1024 * 1024)
                ),
            ))
        }
        _ if failed => Some(program_error(language, exit_code, &stderr)),
        _ => None,
    };
    // A traceback read from stderr repeats it: it draws from what the
    // output left, so the outcome holds no more than the budget allows.
    let error = error.map(|e| budget.take_error(e));
    RunOutcome {
        stdout: run.stdout,
        stderr,
        results: Vec::new(),
        error,
        exit_code,
        duration_ms: crate::clock::millis(started.elapsed()),
        truncated: budget.truncated(),
    }
}

/// The error for a run the supervisor stopped (a limit, or a cancel); for
/// the output limit, the run's budget says what it refused.
pub(crate) fn stop_error(
    stopped_by: Option<&'static str>,
    limits: &Limits,
    budget: &OutputBudget,
) -> Option<ExecError> {
    let value = match stopped_by? {
        limit_error::TIMEOUT => {
            format!("the run was stopped after {} s", limits.wall.as_secs_f64())
        }
        limit_error::OUTPUT => return budget.limit_error(),
        limit_error::CANCELLED => "the run was cancelled".to_string(),
        other => format!("the run was stopped: {other}"),
    };
    Some(ExecError::new(stopped_by?, value))
}

/// The program's own failure, named as its language names it where possible.
fn program_error(language: Language, exit_code: Option<i32>, stderr: &str) -> ExecError {
    if language == Language::Python
        && let Some(error) = python_error(stderr)
    {
        return error;
    }
    match exit_code {
        Some(code) if code > 128 && code < 128 + 65 => ExecError::new(
            "Signal",
            format!("the program was killed by signal {}", code - 128),
        ),
        Some(code) => ExecError::new("ExitCode", format!("the program exited with status {code}")),
        None => ExecError::new("Signal", "the program was killed"),
    }
}

/// `NameError: name 'x' is not defined` from a Python traceback.
fn python_error(stderr: &str) -> Option<ExecError> {
    let start = stderr.rfind("Traceback (most recent call last):")?;
    let traceback: Vec<String> = stderr[start..].lines().map(str::to_string).collect();
    let last = traceback
        .iter()
        .rev()
        .find(|l| !l.trim().is_empty())?
        .clone();
    let (name, value) = match last.split_once(": ") {
        Some((name, value)) => (name.trim(), value.trim()),
        None => (last.trim(), ""),
    };
    let plausible = !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '.');
    plausible.then(|| ExecError {
        name: name.rsplit('.').next().unwrap_or(name).to_string(),
        value: value.to_string(),
        traceback,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn python_errors_are_named_from_the_traceback() {
        let stderr = "Traceback (most recent call last):\n  File \"main.py\", line 1, in <module>\n    x\nNameError: name 'x' is not defined\n";
        let error = python_error(stderr).unwrap();
        assert_eq!(error.name, "NameError");
        assert_eq!(error.value, "name 'x' is not defined");
        assert_eq!(error.traceback.len(), 4);
        let error =
            python_error("Traceback (most recent call last):\nKeyboardInterrupt\n").unwrap();
        assert_eq!(error.name, "KeyboardInterrupt");
        let error = python_error(
            "Traceback (most recent call last):\nnumpy.linalg.LinAlgError: Singular matrix\n",
        )
        .unwrap();
        assert_eq!(error.name, "LinAlgError");
        assert!(python_error("just some text\n").is_none());
    }

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
