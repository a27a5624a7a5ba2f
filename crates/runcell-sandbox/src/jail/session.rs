//! A sandbox session: a home directory that lasts between runs (a sized tmpfs
//! owned by the session's uid) and kernels that keep their variables: one
//! for Python, started with the session, and one each for JavaScript,
//! TypeScript and R, started by their first run. Bash and C run as one
//! jailed process each in the same home. More contexts can be opened: a
//! context of a kernel language is a kernel of its own in the same home;
//! Bash and C contexts run each program afresh there.
//!
//! On the host a session is `/tmp/rc-<id>/`, owned by root, mode 0710 with
//! the session's gid (its jails, which start as the session's uid, must
//! reach the mounts below; nobody else can even look): `owner` (the
//! server's pid), `home/` and each kernel's `ipc*/`, every one a tmpfs of
//! its own owned by the session's uid, mode 0700. A kernel's socket
//! directory is tiny (it holds five sockets and a connection file) and is
//! mounted afresh for each kernel, so nothing a jail left there is ever
//! seen by the next kernel or by the server.

use std::collections::HashMap;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt, lchown};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::JailSandbox;
use super::identity::{HostId, Lease};
use super::kernel::{JailKernel, KernelKind, KernelOwner, KernelState};
use super::oneshot::SessionHome;
use crate::files::{Files, HomeDir};
use crate::packages::{Account, notices_to};
use crate::{
    Contexts, KernelRequest, Language, Limits, RunEvent, RunOutcome, RunRequest, SandboxError,
    SandboxSession, validate_code,
};

/// Where sessions' directories live on the host. Kernel socket paths must stay
/// short (a unix socket path has at most 107 bytes).
const SESSIONS_ROOT: &str = "/tmp";
const PREFIX: &str = "rc-";
const OWNER: &str = "owner";
/// A kernel's socket directory: five sockets and the connection file.
const IPC_BYTES: &str = "256k";
const IPC_INODES: u32 = 32;

pub struct JailSession {
    id: String,
    root: PathBuf,
    home: PathBuf,
    jail: Arc<JailSandbox>,
    limits: Limits,
    /// The session's own kernel of each kernel language.
    kernels: HashMap<KernelKind, KernelSlot>,
    files: HomeDir,
    contexts: parking_lot::Mutex<ContextTable>,
    /// The host uid of every jail of the session.
    user: HostId,
    /// What its jails were served by the package index.
    account: Arc<Account>,
    /// Cancelled first thing by `close`: a run in progress ends at once
    /// (its kernel shut down, its process killed) instead of holding the
    /// kernel's lock, and with it the close, until it finishes.
    closing: CancellationToken,
    /// Last, so that it is given back only after the kernels (and their
    /// groups) were dropped.
    _lease: Lease,
}

/// A kernel (once started) and the directory of its sockets.
struct KernelSlot {
    kernel: tokio::sync::Mutex<Option<JailKernel>>,
    ipc: PathBuf,
}

impl KernelSlot {
    fn new(ipc: PathBuf) -> Self {
        Self {
            kernel: tokio::sync::Mutex::new(None),
            ipc,
        }
    }
}

/// An execution context beyond the session's own kernels.
struct Context {
    language: Language,
    /// The working directory its programs start in.
    cwd: Option<String>,
    /// A kernel language's context has a kernel of its own.
    kernel: KernelSlot,
}

/// Contexts a session may hold besides its own kernel.
const MAX_CONTEXTS: usize = 8;

/// A session's contexts, and how many are starting: a context's place is
/// taken before its kernel starts (an await), so that contexts asked for
/// at once cannot all pass [`MAX_CONTEXTS`] while none is in the table.
#[derive(Default)]
struct ContextTable {
    open: HashMap<String, Arc<Context>>,
    starting: usize,
}

/// A context's place, taken while its kernel starts: given back when
/// dropped (the start failed, or the request went away mid-way) unless
/// the context took it.
struct Starting<'a> {
    table: &'a parking_lot::Mutex<ContextTable>,
    opened: bool,
}

impl<'a> Starting<'a> {
    /// A place in `table`, or the refusal when it is full.
    fn take(table: &'a parking_lot::Mutex<ContextTable>) -> Result<Self, SandboxError> {
        let mut held = table.lock();
        if held.open.len() + held.starting >= MAX_CONTEXTS {
            return Err(SandboxError::InvalidInput(format!(
                "a session holds at most {MAX_CONTEXTS} contexts; delete one first"
            )));
        }
        held.starting += 1;
        Ok(Self {
            table,
            opened: false,
        })
    }

    /// The context started: it takes the place, in one step.
    fn open(mut self, id: String, context: Arc<Context>) {
        let table = self.table;
        let mut held = table.lock();
        held.open.insert(id, context);
        held.starting = held.starting.saturating_sub(1);
        self.opened = true;
    }
}

impl Drop for Starting<'_> {
    fn drop(&mut self) {
        if !self.opened {
            let mut held = self.table.lock();
            held.starting = held.starting.saturating_sub(1);
        }
    }
}

fn internal(what: &str, e: &dyn std::fmt::Display) -> SandboxError {
    SandboxError::Internal(format!("{what}: {e}"))
}

impl JailSession {
    /// Makes the session's directories and starts its Python kernel.
    pub async fn open(jail: Arc<JailSandbox>, limits: Limits) -> Result<Self, SandboxError> {
        jail.ready_cgroups()?;
        let lease = jail.lease_uid()?;
        let user = lease.id();
        let short = uuid::Uuid::new_v4().simple().to_string();
        let root = Path::new(SESSIONS_ROOT).join(format!("{PREFIX}{}", &short[..12]));
        let home = root.join("home");
        let kernels: HashMap<KernelKind, KernelSlot> = [
            (KernelKind::Python, "ipc"),
            (KernelKind::Javascript, "ipc-js"),
            (KernelKind::Typescript, "ipc-ts"),
            (KernelKind::R, "ipc-r"),
            (KernelKind::Java, "ipc-java"),
        ]
        .into_iter()
        .map(|(kind, dir)| (kind, KernelSlot::new(root.join(dir))))
        .collect();
        // mkdir never follows a link; /tmp is sticky, so nobody else can
        // move what root made there.
        std::fs::DirBuilder::new()
            .mode(0o700)
            .create(&root)
            .map_err(|e| internal("session directory", &e))?;
        let files = HomeDir::new(home.clone(), user.uid, user.gid, limits.disk_bytes);
        let session = Self {
            id: uuid::Uuid::new_v4().to_string(),
            root,
            home,
            jail,
            limits,
            kernels,
            files,
            contexts: parking_lot::Mutex::new(ContextTable::default()),
            user,
            account: Account::new(format!("session {}", &short[..12])),
            closing: CancellationToken::new(),
            _lease: lease,
        };
        // Whose session this is: a later server removes it only once this
        // process is gone.
        std::fs::write(session.root.join(OWNER), std::process::id().to_string())
            .map_err(|e| internal("session directory", &e))?;
        // Root's, and only the session's jails may pass through.
        lchown(&session.root, Some(0), Some(user.gid))
            .and_then(|()| {
                std::fs::set_permissions(&session.root, std::fs::Permissions::from_mode(0o710))
            })
            .map_err(|e| internal("session directory", &e))?;
        let dirs = std::iter::once(&session.home).chain(session.kernels.values().map(|k| &k.ipc));
        for dir in dirs {
            std::fs::DirBuilder::new()
                .mode(0o700)
                .create(dir)
                .map_err(|e| internal("session directory", &e))?;
        }
        // The home is a tmpfs of its own: the disk limit holds across runs.
        let size = session.limits.home_bytes();
        session
            .mount(&session.home, &format!("size={size},nosuid,nodev"))
            .await?;
        let python = session.slot(KernelKind::Python)?;
        let kernel = session
            .start_kernel_in(KernelKind::Python, &python.ipc, None)
            .await?;
        *python.kernel.lock().await = Some(kernel);
        Ok(session)
    }

    /// Mounts a tmpfs owned by the session's uid, mode 0700, on `dir`.
    async fn mount(&self, dir: &Path, options: &str) -> Result<(), SandboxError> {
        let HostId { uid, gid } = self.user;
        let options = format!("{options},mode=0700,uid={uid},gid={gid}");
        let mounted = tokio::process::Command::new("/usr/bin/mount")
            .args([
                "--no-canonicalize",
                "-t",
                "tmpfs",
                "-o",
                &options,
                "runcell",
            ])
            .arg(dir)
            .stderr(std::process::Stdio::null())
            .status()
            .await
            .map_err(|e| internal("cannot mount a session tmpfs", &e))?;
        if mounted.success() {
            Ok(())
        } else {
            Err(SandboxError::Unavailable(format!(
                "cannot mount a tmpfs on {} ({mounted})",
                dir.display()
            )))
        }
    }

    /// An empty socket directory for a new kernel at `ipc`: whatever an
    /// earlier kernel's jail left there (files, links) goes with the old
    /// tmpfs.
    async fn fresh_ipc(&self, ipc: &Path) -> Result<(), SandboxError> {
        let _ = tokio::process::Command::from(unmount_command(ipc))
            .status()
            .await;
        let options = format!("size={IPC_BYTES},nr_inodes={IPC_INODES},nosuid,nodev,noexec");
        self.mount(ipc, &options).await
    }

    /// The session's own kernel of `kind`.
    fn slot(&self, kind: KernelKind) -> Result<&KernelSlot, SandboxError> {
        self.kernels
            .get(&kind)
            .ok_or_else(|| internal("kernel", &format!("no {} kernel", kind.label())))
    }

    /// A kernel whose sockets are in `ipc`, started in `cwd` if given.
    async fn start_kernel_in(
        &self,
        kind: KernelKind,
        ipc: &Path,
        cwd: Option<&str>,
    ) -> Result<JailKernel, SandboxError> {
        self.fresh_ipc(ipc).await?;
        let name = format!("kernel-{}", uuid::Uuid::new_v4().simple());
        let mut kernel = JailKernel::start(
            kind,
            &self.jail,
            KernelOwner {
                user: self.user,
                account: &self.account,
            },
            &name,
            ipc,
            &self.home,
            &self.limits,
        )
        .await?;
        if let Some(cwd) = cwd {
            let code = kind.chdir(cwd);
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

    /// Runs a cell in `slot`'s kernel (started if it is not yet),
    /// replacing a kernel that died.
    async fn run_in_kernel(
        &self,
        kind: KernelKind,
        slot: &KernelSlot,
        cwd: Option<&str>,
        request: &RunRequest,
        events: Option<&mpsc::Sender<RunEvent>>,
        cancel: &CancellationToken,
    ) -> Result<RunOutcome, SandboxError> {
        validate_code(&request.code)?;
        let limits = super::clamp(&request.limits, &self.limits);
        let ipc = &slot.ipc;
        let mut slot = tokio::select! {
            slot = slot.kernel.lock() => slot,
            () = self.closing.cancelled() => return Err(closed()),
        };
        if self.closing.is_cancelled() {
            return Err(closed());
        }
        let kernel = match slot.as_mut() {
            Some(kernel) => kernel,
            None => slot.insert(self.start_kernel_in(kind, ipc, cwd).await?),
        };
        let notices = notices_to(&self.account, events);
        let ran = tokio::select! {
            ran = kernel.execute(&request.code, &limits, events, cancel) => Some(ran),
            () = self.closing.cancelled() => None,
        };
        let Some((mut outcome, state)) = ran else {
            // The session is closing: the kernel goes now, mid-run.
            if let Some(kernel) = slot.take() {
                kernel.shutdown().await;
            }
            return Err(closed());
        };
        notices.into_outcome(&mut outcome);
        if matches!(state, KernelState::Lost) && !self.closing.is_cancelled() {
            if let Some(dead) = slot.take() {
                dead.shutdown().await;
            }
            // A fresh kernel now, so that the next run does not wait for it;
            // if it cannot start, the next run tries again.
            match self.start_kernel_in(kind, ipc, cwd).await {
                Ok(kernel) => *slot = Some(kernel),
                Err(e) => tracing::warn!(%e, "cannot restart the kernel"),
            }
        }
        Ok(outcome)
    }

    /// A jailed process in the session's home, stopped by `cancel` or by
    /// the session closing.
    async fn run_process(
        &self,
        request: &RunRequest,
        events: Option<&mpsc::Sender<RunEvent>>,
        cancel: &CancellationToken,
    ) -> Result<RunOutcome, SandboxError> {
        if self.closing.is_cancelled() {
            return Err(closed());
        }
        let either = self.closing.child_token();
        let link = {
            let (either, cancel) = (either.clone(), cancel.clone());
            tokio::spawn(async move {
                cancel.cancelled().await;
                either.cancel();
            })
        };
        let ran = self
            .jail
            .run_process(
                request,
                Some(SessionHome {
                    dir: &self.home,
                    user: self.user,
                    account: &self.account,
                }),
                events,
                &either,
            )
            .await;
        link.abort();
        if self.closing.is_cancelled() {
            return Err(closed());
        }
        ran
    }

    fn context(&self, id: &str) -> Result<Arc<Context>, SandboxError> {
        self.contexts
            .lock()
            .open
            .get(id)
            .cloned()
            .ok_or_else(|| SandboxError::NotFound(format!("Context {id} not found")))
    }
}

/// What a run gets when its session closes under it (its sandbox killed
/// or timed out).
fn closed() -> SandboxError {
    SandboxError::NotFound("the sandbox was closed while the code ran".into())
}

/// `text` as one word for the shell.
pub fn shell_quote(text: &str) -> String {
    format!("'{}'", text.replace('\'', "'\\''"))
}

/// Detaches the tmpfs on `dir`, if there is one. `dir` is a path only root
/// can change (inside a root-owned session directory).
fn unmount_command(dir: &Path) -> std::process::Command {
    let mut command = std::process::Command::new("/usr/bin/umount");
    command
        .args(["--lazy", "--no-canonicalize"])
        .arg(dir)
        .stderr(std::process::Stdio::null());
    command
}

fn unmount(dir: &Path) {
    let _ = unmount_command(dir).status();
}

/// Unmounts every mount under `root` and removes it. `remove_dir_all` never
/// follows a link, and only root can write `root` itself.
fn remove_session_dir(root: &Path) {
    let mounts = std::fs::read_to_string("/proc/self/mounts").unwrap_or_default();
    for line in mounts.lines() {
        if let Some(path) = line.split_whitespace().nth(1).map(Path::new)
            && path.parent() == Some(root)
        {
            unmount(path);
        }
    }
    let _ = std::fs::remove_dir_all(root);
}

/// A session dropped without `close` (a task cut short, a panic) still
/// gives back its mounts and files; the kernel's processes die with its jail.
impl Drop for JailSession {
    fn drop(&mut self) {
        if std::fs::symlink_metadata(&self.root).is_ok() {
            remove_session_dir(&self.root);
        }
    }
}

#[async_trait::async_trait]
impl SandboxSession for JailSession {
    fn id(&self) -> &str {
        &self.id
    }

    /// Python, JavaScript, TypeScript and R run in the session's kernel of
    /// their language; Bash and C as a jailed process in its home.
    async fn run(
        &self,
        request: &RunRequest,
        events: Option<&mpsc::Sender<RunEvent>>,
        cancel: &CancellationToken,
    ) -> Result<RunOutcome, SandboxError> {
        let Some(kind) = KernelKind::of(request.language) else {
            // run_process checks the program itself.
            return self.run_process(request, events, cancel).await;
        };
        let slot = self.slot(kind)?;
        self.run_in_kernel(kind, slot, None, request, events, cancel)
            .await
    }

    fn files(&self) -> Option<&dyn Files> {
        Some(&self.files)
    }

    fn contexts(&self) -> Option<&dyn Contexts> {
        Some(self)
    }

    fn installed_packages(&self) -> Vec<(String, String)> {
        self.account.installed()
    }

    /// Asks the session's own kernel of `language` (started if it is not
    /// yet), after the execution running in it, if one is.
    async fn kernel_request(
        &self,
        language: Language,
        request: KernelRequest,
    ) -> Result<serde_json::Map<String, serde_json::Value>, SandboxError> {
        let kind = KernelKind::of(language).ok_or_else(|| {
            SandboxError::NotSupported(format!(
                "{language} runs as a process of its own here, with no kernel to ask"
            ))
        })?;
        let slot = self.slot(kind)?;
        let mut held = tokio::select! {
            held = slot.kernel.lock() => held,
            () = self.closing.cancelled() => return Err(closed()),
        };
        if self.closing.is_cancelled() {
            return Err(closed());
        }
        let kernel = match held.as_mut() {
            Some(kernel) => kernel,
            None => held.insert(self.start_kernel_in(kind, &slot.ipc, None).await?),
        };
        tokio::select! {
            reply = kernel.request(request) => reply,
            () = self.closing.cancelled() => Err(closed()),
        }
    }

    /// Stops everything in the session and removes its files.
    async fn close(&self) {
        self.closing.cancel();
        for slot in self.kernels.values() {
            if let Some(kernel) = slot.kernel.lock().await.take() {
                kernel.shutdown().await;
            }
        }
        let contexts: Vec<Arc<Context>> =
            self.contexts.lock().open.drain().map(|(_, c)| c).collect();
        for context in contexts {
            if let Some(kernel) = context.kernel.kernel.lock().await.take() {
                kernel.shutdown().await;
            }
        }
        let root = self.root.clone();
        let _ = tokio::task::spawn_blocking(move || remove_session_dir(&root)).await;
    }
}

#[async_trait::async_trait]
impl Contexts for JailSession {
    async fn create_context(
        &self,
        language: Language,
        cwd: Option<&str>,
    ) -> Result<String, SandboxError> {
        let place = Starting::take(&self.contexts)?;
        let id = uuid::Uuid::new_v4().to_string();
        let ipc = self.root.join(format!("ipc-{}", &id[..8]));
        let kernel = if let Some(kind) = KernelKind::of(language) {
            std::fs::DirBuilder::new()
                .mode(0o700)
                .create(&ipc)
                .map_err(|e| internal("context directory", &e))?;
            match self.start_kernel_in(kind, &ipc, cwd).await {
                Ok(kernel) => Some(kernel),
                Err(e) => {
                    unmount(&ipc);
                    let _ = std::fs::remove_dir(&ipc);
                    return Err(e);
                }
            }
        } else {
            None
        };
        let context = Arc::new(Context {
            language,
            cwd: cwd.map(str::to_string),
            kernel: KernelSlot {
                kernel: tokio::sync::Mutex::new(kernel),
                ipc,
            },
        });
        place.open(id.clone(), context);
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
        if let Some(kind) = KernelKind::of(request.language) {
            if context.language == request.language {
                return self
                    .run_in_kernel(
                        kind,
                        &context.kernel,
                        context.cwd.as_deref(),
                        request,
                        events,
                        cancel,
                    )
                    .await;
            }
            return Err(SandboxError::InvalidInput(format!(
                "this context runs {}, not {}",
                context.language, request.language
            )));
        }
        let request = RunRequest {
            cwd: request.cwd.clone().or_else(|| context.cwd.clone()),
            ..request.clone()
        };
        self.run_process(&request, events, cancel).await
    }

    async fn restart_context(&self, context: &str) -> Result<(), SandboxError> {
        let context = self.context(context)?;
        let mut slot = context.kernel.kernel.lock().await;
        if let Some(kernel) = slot.take()
            && let Some(kind) = KernelKind::of(context.language)
        {
            kernel.shutdown().await;
            *slot = Some(
                self.start_kernel_in(kind, &context.kernel.ipc, context.cwd.as_deref())
                    .await?,
            );
        }
        Ok(())
    }

    async fn delete_context(&self, context: &str) -> Result<(), SandboxError> {
        let found = self.contexts.lock().open.remove(context);
        let context =
            found.ok_or_else(|| SandboxError::NotFound(format!("Context {context} not found")))?;
        if let Some(kernel) = context.kernel.kernel.lock().await.take() {
            kernel.shutdown().await;
        }
        let _ = tokio::process::Command::from(unmount_command(&context.kernel.ipc))
            .status()
            .await;
        let _ = std::fs::remove_dir_all(&context.kernel.ipc);
        Ok(())
    }
}

/// Whether the session directory `root` belongs to a process that is gone.
/// Only a directory root owns counts (never a link, nor someone else's).
fn orphaned(root: &Path) -> bool {
    let ours = std::fs::symlink_metadata(root).is_ok_and(|m| m.is_dir() && m.uid() == 0);
    if !ours {
        return false;
    }
    let owner = root.join(OWNER);
    let plain = std::fs::symlink_metadata(&owner).is_ok_and(|m| m.is_file() && m.uid() == 0);
    match std::fs::read_to_string(&owner) {
        Ok(pid) if plain => !Path::new("/proc").join(pid.trim()).exists(),
        // Being made right now, or not one of ours: leave it.
        _ => false,
    }
}

/// Removes what sessions of servers that are gone left behind: their
/// mounts (homes, socket directories) and directories, and those servers'
/// `/etc` for jails. Sessions of live servers are left alone.
pub fn remove_stale_sessions() {
    super::cgroup::remove_stale_groups();
    super::etc::remove_stale();
    let Ok(entries) = std::fs::read_dir(SESSIONS_ROOT) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let is_dir = entry.file_type().is_ok_and(|t| t.is_dir());
        if entry.file_name().to_string_lossy().starts_with(PREFIX) && is_dir && orphaned(&path) {
            tracing::info!(dir = %path.display(), "removing a stale sandbox session");
            remove_session_dir(&path);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn python() -> Arc<Context> {
        Arc::new(Context {
            language: Language::Python,
            cwd: None,
            kernel: KernelSlot::new(PathBuf::from("/nonexistent/ipc-test")),
        })
    }

    fn counts(table: &parking_lot::Mutex<ContextTable>) -> (usize, usize) {
        let held = table.lock();
        (held.open.len(), held.starting)
    }

    #[test]
    fn a_contexts_place_is_taken_before_its_kernel_starts() {
        let table = parking_lot::Mutex::new(ContextTable::default());
        let mut places: Vec<Starting<'_>> = (0..MAX_CONTEXTS)
            .map(|_| Starting::take(&table).expect("room for it"))
            .collect();
        assert_eq!(counts(&table), (0, MAX_CONTEXTS));
        let refused = Starting::take(&table).err().map(|e| e.to_string());
        assert_eq!(
            refused.as_deref(),
            Some("a session holds at most 8 contexts; delete one first")
        );
        places.pop().expect("a place").open("a".into(), python());
        assert_eq!(counts(&table), (1, MAX_CONTEXTS - 1));
        // A start that failed, or a request gone mid-way, gives its place back.
        drop(places.pop());
        assert_eq!(counts(&table), (1, MAX_CONTEXTS - 2));
        assert!(Starting::take(&table).is_ok());
        drop(places);
        assert_eq!(counts(&table), (1, 0));
    }
}
