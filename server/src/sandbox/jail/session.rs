//! A sandbox session: a home directory that lasts between runs (a sized tmpfs
//! owned by the jail uid) and a Python kernel that keeps its variables.
//! JavaScript, Bash and C run as one jailed process each in the same home.
//! More contexts can be opened: a Python context is a kernel of its own in
//! the same home; other languages' contexts run each program afresh there.

use std::collections::HashMap;
use std::os::unix::fs::{PermissionsExt, chown};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::JailSandbox;
use super::kernel::{Kernel, KernelState};
use crate::sandbox::files::{Files, HomeDir};
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
    files: HomeDir,
    contexts: parking_lot::Mutex<HashMap<String, Arc<Context>>>,
}

/// An execution context beyond the session's own kernel.
struct Context {
    language: Language,
    /// The working directory its programs start in.
    cwd: Option<String>,
    /// A Python context's kernel and the directory of its sockets.
    kernel: tokio::sync::Mutex<Option<Kernel>>,
    ipc: PathBuf,
}

/// Contexts a session may hold besides its own kernel.
const MAX_CONTEXTS: usize = 8;

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
        let files = HomeDir::new(home.clone(), uid, gid, limits.disk_bytes);
        let session = Self {
            id: uuid::Uuid::new_v4().to_string(),
            root,
            home,
            ipc,
            jail,
            limits,
            kernel: tokio::sync::Mutex::new(None),
            files,
            contexts: parking_lot::Mutex::new(HashMap::new()),
        };
        for dir in [&session.home, &session.ipc] {
            std::fs::create_dir(dir).map_err(|e| internal("session directory", &e))?;
            chown(dir, Some(uid), Some(gid)).map_err(|e| internal("session directory", &e))?;
            std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))
                .map_err(|e| internal("session directory", &e))?;
        }
        // The home is a tmpfs of its own: the disk limit holds across runs.
        let size = session.limits.home_bytes();
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
        self.start_kernel_in(&self.ipc, None).await
    }

    /// A kernel whose sockets are in `ipc`, started in `cwd` if given.
    async fn start_kernel_in(&self, ipc: &Path, cwd: Option<&str>) -> Result<Kernel, SandboxError> {
        let name = format!("kernel-{}", uuid::Uuid::new_v4().simple());
        let mut kernel = Kernel::start(&self.jail, &name, ipc, &self.home, &self.limits).await?;
        if let Some(cwd) = cwd {
            let code = format!("import os as _os; _os.chdir({cwd:?}); del _os");
            let (outcome, _) = kernel
                .execute(&code, &self.limits, None, &CancellationToken::new())
                .await;
            if let Some(error) = outcome.error {
                kernel.shutdown().await;
                return Err(SandboxError::InvalidInput(format!(
                    "cannot use {cwd} as the working directory: {}",
                    error.value
                )));
            }
        }
        Ok(kernel)
    }

    /// Runs Python in `slot`'s kernel, replacing a kernel that died.
    async fn run_in_kernel(
        &self,
        slot: &tokio::sync::Mutex<Option<Kernel>>,
        ipc: &Path,
        cwd: Option<&str>,
        request: &RunRequest,
        events: Option<&mpsc::Sender<RunEvent>>,
        cancel: &CancellationToken,
    ) -> Result<RunOutcome, SandboxError> {
        validate_code(&request.code)?;
        let limits = super::clamp(&request.limits, &self.limits);
        let mut slot = slot.lock().await;
        let kernel = match slot.as_mut() {
            Some(kernel) => kernel,
            None => slot.insert(self.start_kernel_in(ipc, cwd).await?),
        };
        let (outcome, state) = kernel.execute(&request.code, &limits, events, cancel).await;
        if matches!(state, KernelState::Lost) {
            if let Some(dead) = slot.take() {
                dead.shutdown().await;
            }
            // A fresh kernel now, so that the next run does not wait for it;
            // if it cannot start, the next run tries again.
            match self.start_kernel_in(ipc, cwd).await {
                Ok(kernel) => *slot = Some(kernel),
                Err(e) => tracing::warn!(%e, "cannot restart the kernel"),
            }
        }
        Ok(outcome)
    }

    fn context(&self, id: &str) -> Result<Arc<Context>, SandboxError> {
        self.contexts
            .lock()
            .get(id)
            .cloned()
            .ok_or_else(|| SandboxError::NotFound(format!("Context {id} not found")))
    }
}

/// A program that first moves to `cwd` (for contexts of languages without a
/// kernel).
fn in_directory(language: Language, cwd: Option<&str>, code: &str) -> String {
    match (language, cwd) {
        (Language::Bash, Some(cwd)) => format!("cd {} || exit 1\n{code}", shell_quote(cwd)),
        (Language::Javascript, Some(cwd)) => format!("process.chdir({cwd:?});{code}"),
        _ => code.to_string(),
    }
}

/// `text` as one word for the shell.
pub(crate) fn shell_quote(text: &str) -> String {
    format!("'{}'", text.replace('\'', "'\\''"))
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
        self.run_in_kernel(&self.kernel, &self.ipc, None, request, events, cancel)
            .await
    }

    fn files(&self) -> Option<&dyn Files> {
        Some(&self.files)
    }

    async fn create_context(
        &self,
        language: Language,
        cwd: Option<&str>,
    ) -> Result<String, SandboxError> {
        if self.contexts.lock().len() >= MAX_CONTEXTS {
            return Err(SandboxError::InvalidInput(format!(
                "a session holds at most {MAX_CONTEXTS} contexts; delete one first"
            )));
        }
        let id = uuid::Uuid::new_v4().to_string();
        let ipc = self.root.join(format!("ipc-{}", &id[..8]));
        let kernel = if language == Language::Python {
            std::fs::create_dir(&ipc).map_err(|e| internal("context directory", &e))?;
            chown(&ipc, Some(self.jail.config.uid), Some(self.jail.config.gid))
                .map_err(|e| internal("context directory", &e))?;
            std::fs::set_permissions(&ipc, std::fs::Permissions::from_mode(0o700))
                .map_err(|e| internal("context directory", &e))?;
            Some(self.start_kernel_in(&ipc, cwd).await?)
        } else {
            None
        };
        let context = Arc::new(Context {
            language,
            cwd: cwd.map(str::to_string),
            kernel: tokio::sync::Mutex::new(kernel),
            ipc,
        });
        self.contexts.lock().insert(id.clone(), context);
        Ok(id)
    }

    async fn run_in_context(
        &self,
        context: &str,
        request: &RunRequest,
        events: Option<&mpsc::Sender<RunEvent>>,
        cancel: &CancellationToken,
    ) -> Result<RunOutcome, SandboxError> {
        let context = self.context(context)?;
        if context.language == Language::Python && request.language == Language::Python {
            return self
                .run_in_kernel(
                    &context.kernel,
                    &context.ipc,
                    context.cwd.as_deref(),
                    request,
                    events,
                    cancel,
                )
                .await;
        }
        let request = RunRequest {
            code: in_directory(request.language, context.cwd.as_deref(), &request.code),
            ..request.clone()
        };
        self.jail
            .run_process(&request, Some(&self.home), events, cancel)
            .await
    }

    async fn restart_context(&self, context: &str) -> Result<(), SandboxError> {
        let context = self.context(context)?;
        let mut slot = context.kernel.lock().await;
        if let Some(kernel) = slot.take() {
            kernel.shutdown().await;
            *slot = Some(
                self.start_kernel_in(&context.ipc, context.cwd.as_deref())
                    .await?,
            );
        }
        Ok(())
    }

    async fn delete_context(&self, context: &str) -> Result<(), SandboxError> {
        let found = self.contexts.lock().remove(context);
        let context =
            found.ok_or_else(|| SandboxError::NotFound(format!("Context {context} not found")))?;
        if let Some(kernel) = context.kernel.lock().await.take() {
            kernel.shutdown().await;
        }
        let _ = std::fs::remove_dir_all(&context.ipc);
        Ok(())
    }

    /// Stops everything in the session and removes its files.
    async fn close(&self) {
        if let Some(kernel) = self.kernel.lock().await.take() {
            kernel.shutdown().await;
        }
        let contexts: Vec<Arc<Context>> = self.contexts.lock().drain().map(|(_, c)| c).collect();
        for context in contexts {
            if let Some(kernel) = context.kernel.lock().await.take() {
                kernel.shutdown().await;
            }
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
