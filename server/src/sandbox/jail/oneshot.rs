//! One-shot runs: a fresh jail per program (a throw-away home and uid, or a
//! session's), with jails for each language set up ahead of time.

use std::time::Instant;

use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::identity::{HostId, Lease};
use super::launch::{Code, Mounts, program};
use super::outcome::classify;
use super::supervise::supervise;
use super::{JailSandbox, RunGroup, clamp};
use crate::sandbox::{
    Language, Limits, RunEvent, RunOutcome, RunRequest, SandboxError, now_ms, validate_code,
};

/// Jails started ahead of time, per language, for one-shot runs.
const WARM_PER_LANGUAGE: usize = 2;
/// What a warm jail runs until its program arrives on standard input.
const AWAIT_PROGRAM: &str = r#"cat > "$0" || exit 125; exec "$@""#;

/// A jail set up ahead of time: it waits, inside its group at the server's
/// maximum limits, for its program on standard input.
pub(super) struct WarmJail {
    child: tokio::process::Child,
    group: RunGroup,
    marker: String,
    /// Its uid; dropped after the group.
    lease: Lease,
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
