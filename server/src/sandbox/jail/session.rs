//! A sandbox session: a home directory that lasts between runs (a sized tmpfs
//! owned by the jail uid) and a Python kernel that keeps its variables.
//! JavaScript, Bash and C run as one jailed process each in the same home.

use std::os::unix::fs::{PermissionsExt, chown};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::JailSandbox;
use super::kernel::{Kernel, KernelState};
use crate::sandbox::{
    Language, Limits, RunEvent, RunOutcome, RunRequest, SandboxError, SandboxSession, validate_code,
};

/// Where sessions' directories live on the host. Kernel socket paths must stay
/// short (a unix socket path has at most 107 bytes).
const SESSIONS_ROOT: &str = "/tmp";
const PREFIX: &str = "rc-";
const OWNER: &str = "owner";

pub struct JailSession {
    id: String,
    root: PathBuf,
    home: PathBuf,
    ipc: PathBuf,
    jail: Arc<JailSandbox>,
    limits: Limits,
    kernel: tokio::sync::Mutex<Option<Kernel>>,
}

fn internal(what: &str, e: &dyn std::fmt::Display) -> SandboxError {
    SandboxError::Internal(format!("{what}: {e}"))
}

impl JailSession {
    /// Makes the session's directories and starts its Python kernel.
    pub async fn open(jail: Arc<JailSandbox>, limits: Limits) -> Result<Self, SandboxError> {
        jail.ready_cgroups()?;
        let short = uuid::Uuid::new_v4().simple().to_string();
        let root = Path::new(SESSIONS_ROOT).join(format!("{PREFIX}{}", &short[..12]));
        let home = root.join("home");
        let ipc = root.join("ipc");
        let (uid, gid) = (jail.config.uid, jail.config.gid);
        std::fs::create_dir(&root).map_err(|e| internal("session directory", &e))?;
        // Whose session this is: a later server removes it only once this
        // process is gone.
        std::fs::write(root.join(OWNER), std::process::id().to_string())
            .map_err(|e| internal("session directory", &e))?;
        let session = Self {
            id: uuid::Uuid::new_v4().to_string(),
            root,
            home,
            ipc,
            jail,
            limits,
            kernel: tokio::sync::Mutex::new(None),
        };
        for dir in [&session.home, &session.ipc] {
            std::fs::create_dir(dir).map_err(|e| internal("session directory", &e))?;
            chown(dir, Some(uid), Some(gid)).map_err(|e| internal("session directory", &e))?;
            std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))
                .map_err(|e| internal("session directory", &e))?;
        }
        // The home is a tmpfs of its own: the disk limit holds across runs.
        let size = session.limits.disk_bytes * 3 / 4;
        let options = format!("size={size},mode=0700,uid={uid},gid={gid},nosuid,nodev");
        let mounted = tokio::process::Command::new("/usr/bin/mount")
            .args(["-t", "tmpfs", "-o", &options, "runcell-home"])
            .arg(&session.home)
            .status()
            .await
            .map_err(|e| internal("cannot mount the session home", &e))?;
        if !mounted.success() {
            return Err(SandboxError::Unavailable(format!(
                "cannot mount a tmpfs for the session home ({mounted})"
            )));
        }
        let kernel = session.start_kernel().await?;
        *session.kernel.lock().await = Some(kernel);
        Ok(session)
    }

    async fn start_kernel(&self) -> Result<Kernel, SandboxError> {
        let name = format!("kernel-{}", uuid::Uuid::new_v4().simple());
        Kernel::start(&self.jail, &name, &self.ipc, &self.home, &self.limits).await
    }
}

/// A session dropped without `close` (a task cut short, a panic) still
/// gives back its mount and files; the kernel's processes die with its jail.
impl Drop for JailSession {
    fn drop(&mut self) {
        if self.root.exists() {
            let _ = std::process::Command::new("/usr/bin/umount")
                .arg("-l")
                .arg(&self.home)
                .status();
            let _ = std::fs::remove_dir_all(&self.root);
        }
    }
}

#[async_trait::async_trait]
impl SandboxSession for JailSession {
    fn id(&self) -> &str {
        &self.id
    }

    /// Python runs in the kernel; other languages as a jailed process in the
    /// session's home.
    async fn run(
        &self,
        request: &RunRequest,
        events: Option<&mpsc::Sender<RunEvent>>,
        cancel: &CancellationToken,
    ) -> Result<RunOutcome, SandboxError> {
        if request.language != Language::Python {
            // run_process checks the program itself.
            return self
                .jail
                .run_process(request, Some(&self.home), events, cancel)
                .await;
        }
        validate_code(&request.code)?;
        let limits = super::clamp(&request.limits, &self.limits);
        let mut slot = self.kernel.lock().await;
        let kernel = match slot.as_mut() {
            Some(kernel) => kernel,
            None => slot.insert(self.start_kernel().await?),
        };
        let (outcome, state) = kernel.execute(&request.code, &limits, events, cancel).await;
        if matches!(state, KernelState::Lost) {
            if let Some(dead) = slot.take() {
                dead.shutdown().await;
            }
            // A fresh kernel now, so that the next run does not wait for it;
            // if it cannot start, the next run tries again.
            match self.start_kernel().await {
                Ok(kernel) => *slot = Some(kernel),
                Err(e) => tracing::warn!(%e, "cannot restart the kernel"),
            }
        }
        Ok(outcome)
    }

    /// Stops everything in the session and removes its files.
    async fn close(&self) {
        if let Some(kernel) = self.kernel.lock().await.take() {
            kernel.shutdown().await;
        }
        let _ = tokio::process::Command::new("/usr/bin/umount")
            .arg(&self.home)
            .status()
            .await;
        let _ = std::fs::remove_dir_all(&self.root);
    }
}

/// Whether the session directory `root` belongs to a process that is gone.
fn orphaned(root: &Path) -> bool {
    match std::fs::read_to_string(root.join(OWNER)) {
        Ok(pid) => !Path::new("/proc").join(pid.trim()).exists(),
        // Being made right now, or not one of ours: leave it.
        Err(_) => false,
    }
}

/// Removes what sessions of servers that are gone left behind: their home
/// mounts and directories. Sessions of live servers are left alone.
pub fn remove_stale_sessions() {
    super::cgroup::remove_stale_groups();
    let prefix = format!("{SESSIONS_ROOT}/{PREFIX}");
    let mounts = std::fs::read_to_string("/proc/self/mounts").unwrap_or_default();
    for line in mounts.lines() {
        let Some(path) = line.split_whitespace().nth(1) else {
            continue;
        };
        let path = Path::new(path);
        if path.starts_with(SESSIONS_ROOT)
            && path.to_string_lossy().starts_with(&prefix)
            && path.parent().is_some_and(orphaned)
        {
            let _ = std::process::Command::new("/usr/bin/umount")
                .arg("-l")
                .arg(path)
                .status();
        }
    }
    if let Ok(entries) = std::fs::read_dir(SESSIONS_ROOT) {
        for entry in entries.flatten() {
            let path = entry.path();
            if entry.file_name().to_string_lossy().starts_with(PREFIX)
                && path.is_dir()
                && orphaned(&path)
            {
                tracing::info!(dir = %path.display(), "removing a stale sandbox session");
                let _ = std::fs::remove_dir_all(&path);
            }
        }
    }
}
