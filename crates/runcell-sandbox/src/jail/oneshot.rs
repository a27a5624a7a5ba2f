//! One-shot runs: a fresh jail per program (a throw-away home and uid, or a
//! session's), with jails for each language set up ahead of time.

use std::io::Write;
use std::os::fd::OwnedFd;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::identity::{HostId, Lease};
use super::launch::{Code, Mounts, program, started_ahead};
use super::loopback::JailNet;
use super::outcome::classify;
use super::supervise::supervise;
use super::{CgroupMode, JailSandbox, RunGroup, clamp};
use crate::packages::{Account, notices_to};
use crate::{
    Language, Limits, RunEvent, RunOutcome, RunRequest, SandboxError, now_ms, validate_code,
    validate_process,
};

/// Jails waiting per language when runs are rare...
const MIN_WARM: usize = 2;
/// ...and at most, when they come faster than jails are made.
const MAX_WARM: usize = 6;
/// A language with no run for this long goes back to [`MIN_WARM`].
const QUIET: Duration = Duration::from_secs(30);

/// A jail set up ahead of time: made, inside its group at the server's
/// maximum limits, with its program's file bound read-only from a host file
/// of its own, it waits (namespaces, mounts and ids done; for Python, its
/// seccomp filter on and its interpreter started, [`started_ahead`]; for
/// the others, no seccomp filter yet, nothing of its own run) for a byte on
/// a pipe, after its program is written to that file.
pub(super) struct WarmJail {
    child: tokio::process::Child,
    /// The host file its program file is bound from; removed with it.
    code: CodeFile,
    /// A byte down it lets the jail go on.
    release: OwnedFd,
    group: RunGroup,
    marker: String,
    /// Its network with the package index, and whose installs it counts.
    net: Option<JailNet>,
    account: Arc<Account>,
    /// Its uid; dropped after the group.
    lease: Lease,
}

/// A session's home that a one-shot program runs in: its directory, its
/// uid, and the account its installs count to.
#[derive(Clone, Copy)]
pub(crate) struct SessionHome<'a> {
    pub dir: &'a Path,
    pub user: HostId,
    pub account: &'a Arc<Account>,
}

/// The warm jails of one language, and how many to keep: more after a run
/// found none waiting, back to [`MIN_WARM`] after a quiet spell.
#[derive(Default)]
pub(super) struct Lane {
    jails: Vec<WarmJail>,
    target: usize,
    /// Jails being made for this lane right now.
    making: usize,
    last_run: Option<Instant>,
}

impl Lane {
    /// Notes a run asking for a jail, and gives one if any is waiting.
    fn take(&mut self, now: Instant) -> Option<WarmJail> {
        if self
            .last_run
            .is_none_or(|last| now.duration_since(last) > QUIET)
        {
            self.target = MIN_WARM;
        }
        self.last_run = Some(now);
        let jail = self.jails.pop();
        if jail.is_none() {
            // Runs come faster than jails are made: keep more.
            self.target = (self.target + 1).clamp(MIN_WARM, MAX_WARM);
        }
        jail
    }

    /// Whether another jail should be made now (and counts it as being made).
    fn wants_one(&mut self) -> bool {
        let wanted = self.jails.len() + self.making < self.target.max(MIN_WARM);
        if wanted {
            self.making += 1;
        }
        wanted
    }
}

/// A warm jail's program, in a host file of its own (root's, in a
/// directory of the server's that no jail mounts), bound read-only into the
/// jail; removed on drop.
struct CodeFile {
    path: PathBuf,
}

impl CodeFile {
    fn create(name: &str) -> std::io::Result<Self> {
        static DIR: OnceLock<Result<PathBuf, String>> = OnceLock::new();
        let dir = DIR
            .get_or_init(|| {
                let root = Path::new("/run/runcell");
                sweep_dead_code_dirs(root);
                let dir = root.join(format!("code-{}", std::process::id()));
                // A directory of a process that had this pid before.
                let _ = std::fs::remove_dir_all(&dir);
                std::fs::DirBuilder::new()
                    .recursive(true)
                    .mode(0o711)
                    .create(&dir)
                    .map(|()| dir)
                    .map_err(|e| e.to_string())
            })
            .as_ref()
            .map_err(|e| std::io::Error::other(e.clone()))?;
        let path = dir.join(name);
        // Readable by the jail's uid through the bind, written only by us.
        std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o644)
            .open(&path)?;
        Ok(Self { path })
    }

    fn write(&self, code: &[u8]) -> std::io::Result<()> {
        std::fs::OpenOptions::new()
            .write(true)
            .truncate(true)
            .open(&self.path)?
            .write_all(code)
    }
}

/// Removes the program directories of servers (and test processes) that
/// are gone: each leaves one, empty or with the files of jails it never used.
fn sweep_dead_code_dirs(root: &Path) {
    let Ok(entries) = std::fs::read_dir(root) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name.to_str().and_then(|n| n.strip_prefix("code-")) else {
            continue;
        };
        if pid.parse::<u32>().is_ok() && !Path::new("/proc").join(pid).exists() {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

impl Drop for CodeFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

impl JailSandbox {
    /// A warm jail for `language`, its group lowered to `limits`, if one is
    /// waiting and `limits` need nothing fixed at set-up (file size, disk).
    fn take_warm(&self, language: Language, limits: &Limits) -> Option<WarmJail> {
        let max = &self.config.max_limits;
        if limits.file_bytes != max.file_bytes || limits.disk_bytes != max.disk_bytes {
            return None;
        }
        let mut warm = loop {
            let mut candidate = self
                .warm
                .lock()
                .entry(language)
                .or_default()
                .take(Instant::now())?;
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

    /// Makes jails for `language` until its lane has what it wants, off the
    /// request path (a blocking task: making a jail forks and writes
    /// cgroup files).
    fn refill_warm(&self, language: Language) {
        let Ok(this) = self.handle() else {
            return;
        };
        drop(tokio::task::spawn_blocking(move || {
            this.fill_warm(language);
        }));
    }

    fn fill_warm(&self, language: Language) {
        let Ok(cgroups) = self.ready_cgroups() else {
            return;
        };
        while self.warm.lock().entry(language).or_default().wants_one() {
            let made = self.make_warm(cgroups, language);
            let mut lanes = self.warm.lock();
            let lane = lanes.entry(language).or_default();
            lane.making -= 1;
            match made {
                Ok(jail) => lane.jails.push(jail),
                Err(e) => {
                    tracing::warn!(%e, "cannot start a warm jail");
                    return;
                }
            }
        }
    }

    fn make_warm(
        &self,
        cgroups: &CgroupMode,
        language: Language,
    ) -> Result<WarmJail, SandboxError> {
        let limits = self.config.max_limits.clone();
        let lease = self.lease_uid()?;
        let name = format!("warm-{}", uuid::Uuid::new_v4().simple());
        let group = RunGroup::create(cgroups, &name, &limits)
            .map_err(|e| SandboxError::Unavailable(e.to_string()))?;
        let marker = format!("runcell-compile-failed-{}", uuid::Uuid::new_v4().simple());
        let (started, (file, command)) = match started_ahead(language) {
            Some(ahead) => (true, ahead),
            None => (false, program(language, &marker, "")),
        };
        let internal =
            |what: &str, e: std::io::Error| SandboxError::Internal(format!("{what}: {e}"));
        let code =
            CodeFile::create(&name).map_err(|e| internal("a warm jail's program file", e))?;
        let (reader, writer) = std::io::pipe().map_err(|e| internal("a warm jail's pipe", e))?;
        let account = Account::new(name);
        let package_net = self.package_net(&account)?;
        let mounts = Mounts {
            code_file: Some(file),
            env: package_net
                .as_ref()
                .map(|net| net.env.clone())
                .unwrap_or_default(),
            netns: package_net.as_ref().map(|net| net.net.namespace()),
            ..Mounts::default()
        };
        let child = self.spawn_jail(
            lease.id(),
            &limits,
            &group,
            &mounts,
            command,
            Code::Later {
                host_file: &code.path,
                release: reader.into(),
                started,
            },
        )?;
        Ok(WarmJail {
            child,
            code,
            release: writer.into(),
            group,
            marker,
            net: package_net.map(|net| net.net),
            account,
            lease,
        })
    }

    /// Runs one program in a fresh jail; `home` is the session's home (and
    /// uid), or a throw-away tmpfs (and a uid of the run's own) when `None`.
    pub(crate) async fn run_process(
        &self,
        request: &RunRequest,
        home: Option<SessionHome<'_>>,
        events: Option<&mpsc::Sender<RunEvent>>,
        cancel: &CancellationToken,
    ) -> Result<RunOutcome, SandboxError> {
        let mut steps = Steps::new(Instant::now());
        validate_code(&request.code)?;
        validate_process(request)?;
        let cgroups = self.ready_cgroups()?;
        let limits = clamp(&request.limits, &self.config.max_limits);
        // A warm jail was made with the default environment and directory.
        let plain = request.env.is_empty() && request.cwd.is_none();
        let warm = if home.is_none() && plain {
            self.take_warm(request.language, &limits)
        } else {
            None
        };
        let started = Instant::now();
        let RunJail {
            code_file,
            mut child,
            group,
            marker,
            lease,
            net,
            account,
        } = match warm {
            Some(warm) => hand_over(warm, &request.code, &mut steps)?,
            None => self.make_jail(request, home, cgroups, &limits, &mut steps)?,
        };
        let notices = notices_to(&account, events);
        let supervised = supervise(&mut child, &limits, events, cancel).await;
        steps.done("process");
        if home.is_none() {
            self.refill_warm(request.language);
        }
        // What the program left running dies before the run is answered (no
        // daemon outlives its run), waited for on a blocking thread, not on
        // the runtime's: usually gone within a millisecond.
        let group = tokio::task::spawn_blocking(move || {
            group.kill_all();
            group
        })
        .await
        .map_err(|e| SandboxError::Internal(format!("ending a run's processes: {e}")))?;
        // Nothing of the jail is left to reach its index.
        drop(net);
        let mut outcome = classify(
            supervised,
            &group,
            &limits,
            request.language,
            &marker,
            started,
        );
        notices.into_outcome(&mut outcome);
        steps.done("ending");
        remove_in_background(code_file, group, lease);
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

    /// Makes a jail for `request` on the request's path (no warm one was
    /// taken), its program copied in as it is made: in the session's
    /// `home` as its uid, or in a throw-away home as a uid of its own.
    fn make_jail(
        &self,
        request: &RunRequest,
        home: Option<SessionHome<'_>>,
        cgroups: &CgroupMode,
        limits: &Limits,
        steps: &mut Steps,
    ) -> Result<RunJail, SandboxError> {
        if home.is_none() {
            self.refill_warm(request.language);
        }
        // A session's runs share its uid; a one-shot run has its own.
        let (lease, user) = match home {
            Some(home) => (None, home.user),
            None => {
                let lease = self.lease_uid()?;
                let user = lease.id();
                (Some(lease), user)
            }
        };
        let name = format!("run-{}", uuid::Uuid::new_v4().simple());
        let account = match home {
            Some(home) => home.account.clone(),
            None => Account::new(name.clone()),
        };
        let package_net = self.package_net(&account)?;
        let group = RunGroup::create(cgroups, &name, limits)
            .map_err(|e| SandboxError::Unavailable(e.to_string()))?;
        let marker = format!("runcell-compile-failed-{}", uuid::Uuid::new_v4().simple());
        // In a session's home the program goes to the jail's own
        // /tmp, so that it never overwrites nor shows among the
        // session's files.
        let dir = if home.is_some() { "/tmp/" } else { "" };
        let (file, command) = program(request.language, &marker, dir);
        // The request's own variables last: they win.
        let mut env = package_net
            .as_ref()
            .map(|net| net.env.clone())
            .unwrap_or_default();
        env.extend(request.env.iter().cloned());
        let mounts = Mounts {
            home: home.map(|home| home.dir.to_path_buf()),
            code_file: Some(file),
            env,
            cwd: request.cwd.clone(),
            netns: package_net.as_ref().map(|net| net.net.namespace()),
            ..Mounts::default()
        };
        let child = self.spawn_jail(
            user,
            limits,
            &group,
            &mounts,
            command,
            Code::File(request.code.as_bytes()),
        )?;
        // The program goes in as the jail is made: no hand-over.
        steps.done("jail");
        Ok(RunJail {
            code_file: None,
            child,
            group,
            marker,
            lease,
            net: package_net.map(|net| net.net),
            account,
        })
    }
}

/// A jail with a run's program in it, started.
struct RunJail {
    /// A warm jail's program file, removed once the run is over.
    code_file: Option<CodeFile>,
    child: tokio::process::Child,
    group: RunGroup,
    marker: String,
    /// The run's own uid; `None` in a session's home.
    lease: Option<Lease>,
    net: Option<JailNet>,
    account: Arc<Account>,
}

/// Gives `warm` its program, `code`, and lets it go on.
fn hand_over(warm: WarmJail, code: &str, steps: &mut Steps) -> Result<RunJail, SandboxError> {
    steps.jail = "warm";
    steps.done("jail");
    warm.code
        .write(code.as_bytes())
        .and_then(|()| std::fs::File::from(warm.release).write_all(b"1"))
        .map_err(|e| {
            SandboxError::Internal(format!("a warm jail did not take its program: {e}"))
        })?;
    steps.done("hand_over");
    Ok(RunJail {
        code_file: Some(warm.code),
        child: warm.child,
        group: warm.group,
        marker: warm.marker,
        lease: Some(warm.lease),
        net: warm.net,
        account: warm.account,
    })
}

/// Removes a run's program file and groups off the caller's path: that can
/// wait on the kernel for a few milliseconds. The uid is free again once
/// the groups are empty.
fn remove_in_background(code_file: Option<CodeFile>, group: RunGroup, lease: Option<Lease>) {
    tokio::task::spawn_blocking(move || {
        drop(code_file);
        let empty = group.is_empty();
        drop(group);
        if let Some(lease) = lease {
            lease.give_back(empty);
        }
    });
}

/// The time each step of a run took, recorded as `runcell_run_step_seconds`
/// (`runcell bench throughput` reports them).
struct Steps {
    last: Instant,
    /// How the jail came: `warm` (made ahead) or `made` (on the request).
    jail: &'static str,
}

impl Steps {
    fn new(began: Instant) -> Self {
        Self {
            last: began,
            jail: "made",
        }
    }

    /// `step` ended now; the next one starts.
    fn done(&mut self, step: &'static str) {
        let now = Instant::now();
        runcell_core::metrics::run_step(step, self.jail, now.duration_since(self.last));
        self.last = now;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lane_keeps_more_jails_when_runs_find_none_and_fewer_after_a_quiet_spell() {
        let mut lane = Lane::default();
        let start = Instant::now();
        // Nothing waiting: each run that finds none asks for one more.
        assert!(lane.take(start).is_none());
        assert_eq!(lane.target, MIN_WARM + 1);
        for i in 1..10 {
            assert!(lane.take(start + Duration::from_millis(i)).is_none());
        }
        assert_eq!(lane.target, MAX_WARM);
        // Jails being made count towards the target.
        let mut made = 0;
        while lane.wants_one() {
            made += 1;
        }
        assert_eq!(made, MAX_WARM);
        assert_eq!(lane.making, MAX_WARM);
        // After a quiet spell, the next run starts again from the least.
        lane.making = 0;
        assert!(lane.take(start + QUIET * 2).is_none());
        assert_eq!(lane.target, MIN_WARM + 1);
    }
}
