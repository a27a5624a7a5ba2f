//! A stateful kernel in a session's jail — Python (ipykernel), JavaScript
//! and TypeScript (runcell's own `node_kernel.js`) or R (IRkernel) — driven
//! over ZeroMQ `ipc` sockets in a directory bound into the jail at the same
//! path (TCP cannot cross the jail's network namespace). The sockets are
//! spoken to with our own bounded client (`zmtp.rs`, `wire.rs`): the kernel
//! runs the session's code and is treated as a hostile peer.

mod ipc_dir;
mod kind;
mod request;

use std::path::Path;
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, Instant};

use jupyter_protocol::{
    ConnectionInfo, ExecuteRequest, ExecutionState, InterruptRequest, JupyterMessage,
    JupyterMessageContent, KernelInfoRequest, Payload, Stdio, Transport,
};
use tokio::io::AsyncReadExt;
use tokio::sync::mpsc;
use tokio::time::Sleep;
use tokio_util::sync::CancellationToken;

use self::ipc_dir::{CONNECTION_FILE, CONTROL, IOPUB, IpcDir, SHELL};
pub(crate) use self::kind::KernelKind;
use super::loopback::{JailNet, PackageNet};
use super::wire::{Signer, SocketChannel, WireError};
use super::zmtp::{SocketType, ZmtpError};
use super::{HostId, JailSandbox, Mounts, RunGroup, stop_error};
use crate::packages::Account;
use crate::{
    ExecError, Limits, OutputBudget, RunEvent, RunOutcome, SandboxError, limit_error, now_ms,
};

/// How long a kernel may take to come up.
const START_TIMEOUT: Duration = Duration::from_secs(30);
/// How long an interrupted kernel gets to become idle before it is replaced.
const INTERRUPT_GRACE: Duration = Duration::from_secs(3);
/// How long a kernel may leave a request unread before it counts as lost
/// (requests are small: the largest is a program of `MAX_CODE_BYTES`).
const SEND_TIMEOUT: Duration = Duration::from_secs(10);
/// How long to wait for iopub to show that its subscription is live before
/// asking again (the kernel may have published before it was).
const IOPUB_NUDGE: Duration = Duration::from_millis(500);
/// The most pager payloads one execution's reply may show.
const MAX_PAGES: usize = 4;

pub(crate) struct JailKernel {
    kind: KernelKind,
    child: tokio::process::Child,
    group: RunGroup,
    shell: SocketChannel,
    iopub: SocketChannel,
    control: SocketChannel,
    client_session: String,
    /// Why the kernel's wire can no longer be trusted, once it broke.
    broken: Option<WireError>,
    /// Its network, with the package index, while it lives.
    _net: Option<JailNet>,
}

/// Whose a kernel is: the session's host uid, and the account its
/// installs count to.
pub(crate) struct KernelOwner<'a> {
    pub user: HostId,
    pub account: &'a Arc<Account>,
}

/// How an execution ended, beyond its outcome.
pub(crate) enum KernelState {
    /// The kernel is fine and keeps its variables.
    Alive,
    /// The kernel died or stopped answering: it must be replaced.
    Lost,
}

fn internal(what: &str, e: &dyn std::fmt::Display) -> SandboxError {
    SandboxError::Internal(format!("{what}: {e}"))
}

impl JailKernel {
    /// Starts a kernel whose sockets live in `ipc_dir` and whose working
    /// directory is the session's `home`; both belong to `user`, the
    /// session's host uid, which the kernel runs as, so everything in
    /// `ipc_dir` is opened beneath its directory handle and never through a
    /// link the jail made.
    pub async fn start(
        kind: KernelKind,
        jail: &JailSandbox,
        owner: KernelOwner<'_>,
        name: &str,
        ipc_dir: &Path,
        home: &Path,
        limits: &Limits,
    ) -> Result<Self, SandboxError> {
        let started = Instant::now();
        let cgroups = jail.ready_cgroups()?;
        let user = owner.user;
        let HostId { uid, gid } = user;
        let dir = IpcDir::open(ipc_dir).map_err(|e| internal("kernel directory", &e))?;
        // Sockets from an earlier kernel of this session must not linger.
        dir.clear();
        let info = connection_info(kind, ipc_dir);
        let json = serde_json::to_vec(&info).map_err(|e| internal("connection file", &e))?;
        dir.write_connection_file(&json, uid, gid)
            .map_err(|e| internal("connection file", &e))?;
        let connection_file = ipc_dir.join(CONNECTION_FILE);

        let group = RunGroup::create(cgroups, name, limits)
            .map_err(|e| SandboxError::Unavailable(e.to_string()))?;
        let package_net = jail.package_net(owner.account)?;
        let mounts = kernel_mounts(kind, home, ipc_dir, package_net.as_ref());
        let command = kind.command(&connection_file, jail.packages_site());
        let mut child =
            jail.spawn_jail(user, limits, &group, &mounts, command, super::Code::None)?;
        drain_logs(&mut child);
        wait_for_sockets(&dir, uid, &mut child, started).await?;

        let client_session = uuid::Uuid::new_v4().to_string();
        let signer = Signer::new(info.key.as_bytes());
        let remaining = START_TIMEOUT.saturating_sub(started.elapsed());
        let (shell, iopub, control) = tokio::time::timeout(
            remaining,
            connect_channels(ipc_dir, &client_session, uid, &signer),
        )
        .await
        .map_err(|_| internal("the kernel did not answer", &"timed out"))??;
        let mut kernel = Self {
            kind,
            child,
            group,
            shell,
            iopub,
            control,
            client_session,
            broken: None,
            _net: package_net.map(|net| net.net),
        };
        let remaining = START_TIMEOUT.saturating_sub(started.elapsed());
        tokio::time::timeout(remaining, kernel.handshake())
            .await
            .map_err(|_| internal("the kernel did not answer", &"timed out"))??;
        tracing::debug!(ms = started.elapsed().as_millis() as u64, "kernel ready");
        Ok(kernel)
    }

    fn message(&self, content: impl Into<JupyterMessageContent>) -> JupyterMessage {
        let mut message = JupyterMessage::new(content, None);
        message.header.session.clone_from(&self.client_session);
        message
    }

    /// Asks for the kernel's info until it answers on shell and iopub has
    /// shown a message, so that iopub's subscription is known to be live
    /// before the first cell runs (what was published before it is lost).
    async fn handshake(&mut self) -> Result<(), SandboxError> {
        loop {
            let request = self.message(KernelInfoRequest {});
            let id = request.header.msg_id.clone();
            self.shell
                .send(&request)
                .await
                .map_err(|e| internal("kernel", &e))?;
            loop {
                let reply = self
                    .shell
                    .read()
                    .await
                    .map_err(|e| internal("kernel", &e))?;
                if answers(&reply, &id) {
                    break;
                }
            }
            match tokio::time::timeout(IOPUB_NUDGE, self.iopub.read()).await {
                Ok(Ok(_)) => return Ok(()),
                Ok(Err(e)) => return Err(internal("kernel iopub", &e)),
                Err(_) => {}
            }
        }
    }

    /// Runs `code`; returns the outcome and whether the kernel survived.
    pub async fn execute(
        &mut self,
        code: &str,
        limits: &Limits,
        events: Option<&mpsc::Sender<RunEvent>>,
        cancel: &CancellationToken,
    ) -> (RunOutcome, KernelState) {
        let started = Instant::now();
        let mut outcome = RunOutcome::default();
        let mut budget = OutputBudget::new(limits.output_bytes);
        let request = self.message(ExecuteRequest::new(code.to_string()));
        let id = request.header.msg_id.clone();
        if let Err(e) = self.send_shell(&request).await {
            outcome.error = Some(ExecError::new(
                limit_error::KERNEL_DIED,
                format!("cannot reach the kernel: {e}"),
            ));
            return (outcome, KernelState::Lost);
        }
        let (stopped_by, mut state) = self
            .follow(&id, limits, events, cancel, &mut outcome, &mut budget)
            .await;
        if matches!(state, KernelState::Alive) {
            let pages = self.take_reply(&id).await;
            let ts_ms = now_ms();
            for data in pages {
                if let Some(event) = budget.record(&mut outcome, RunEvent::Page { data, ts_ms }) {
                    send(events, event).await;
                }
            }
        }
        if self.broken.is_some() {
            state = KernelState::Lost;
        }
        let lost = matches!(state, KernelState::Lost);
        outcome.truncated = budget.truncated();
        outcome.error = self.end_error(outcome.error.take(), stopped_by, limits, &budget, lost);
        outcome.duration_ms = runcell_core::clock::millis(started.elapsed());
        if let Some(error) = &outcome.error {
            send(
                events,
                RunEvent::Error {
                    error: error.clone(),
                    ts_ms: now_ms(),
                },
            )
            .await;
        }
        (outcome, state)
    }

    /// Follows the cell of request `id` on iopub until the kernel is idle
    /// again: records its output in `outcome` within `budget` (and sends it
    /// to `events`), and interrupts it once it is out of time or output, or
    /// cancelled. Returns why it was stopped, if it was, and whether the
    /// kernel survived.
    async fn follow(
        &mut self,
        id: &str,
        limits: &Limits,
        events: Option<&mpsc::Sender<RunEvent>>,
        cancel: &CancellationToken,
        outcome: &mut RunOutcome,
        budget: &mut OutputBudget,
    ) -> (Option<&'static str>, KernelState) {
        let deadline = tokio::time::sleep(limits.wall);
        tokio::pin!(deadline);
        let grace = tokio::time::sleep(Duration::MAX);
        tokio::pin!(grace);
        let mut stopped_by: Option<&'static str> = None;
        let mut state = KernelState::Alive;

        loop {
            tokio::select! {
                message = self.iopub.read() => {
                    let event = match message {
                        Ok(message) if answers(&message, id) => {
                            match cell_message(message.content, stopped_by.is_some()) {
                                CellMessage::Output(event) => event,
                                CellMessage::Idle => break,
                            }
                        }
                        Ok(_) => None,
                        // Too big to keep, read past: over this run's output,
                        // and the kernel goes on.
                        Err(e) if let Some(bytes) = dropped(&e) => {
                            budget.refuse_oversized(usize::try_from(bytes).unwrap_or(usize::MAX));
                            None
                        }
                        Err(e) => {
                            self.broke(e);
                            state = KernelState::Lost;
                            break;
                        }
                    };
                    if let Some(event) = event
                        && let Some(event) = budget.record(outcome, event)
                    {
                        send(events, event).await;
                    }
                    if budget.overflowed() && stopped_by.is_none() {
                        self.stop(limit_error::OUTPUT, &mut stopped_by, grace.as_mut()).await;
                    }
                }
                exited = self.child.wait() => {
                    tracing::warn!(status = ?exited.ok(), "the kernel died");
                    state = KernelState::Lost;
                    break;
                }
                () = &mut deadline, if stopped_by.is_none() => {
                    self.stop(limit_error::TIMEOUT, &mut stopped_by, grace.as_mut()).await;
                }
                () = cancel.cancelled(), if stopped_by.is_none() => {
                    self.stop(limit_error::CANCELLED, &mut stopped_by, grace.as_mut()).await;
                }
                () = &mut grace => {
                    tracing::warn!("the kernel ignored an interrupt");
                    state = KernelState::Lost;
                    break;
                }
            }
        }
        (stopped_by, state)
    }

    /// Stops the running cell because of `why`: interrupts it and gives it
    /// [`INTERRUPT_GRACE`] to become idle.
    async fn stop(
        &mut self,
        why: &'static str,
        stopped_by: &mut Option<&'static str>,
        grace: Pin<&mut Sleep>,
    ) {
        *stopped_by = Some(why);
        self.interrupt().await;
        grace.reset(tokio::time::Instant::now() + INTERRUPT_GRACE);
    }

    /// Takes the reply to request `id` off the shell socket (waiting a
    /// second at most), so that it cannot be read as the answer to a later
    /// request; gives the pager payloads it carries (`zip?`'s help).
    async fn take_reply(&mut self, id: &str) -> Vec<serde_json::Map<String, serde_json::Value>> {
        tokio::time::timeout(Duration::from_secs(1), async {
            loop {
                match self.shell.read().await {
                    Ok(reply) if answers(&reply, id) => break pages(reply.content),
                    Ok(_) => {}
                    Err(e) if dropped(&e).is_some() => {}
                    Err(e) => {
                        self.broke(e);
                        break Vec::new();
                    }
                }
            }
        })
        .await
        .unwrap_or_default()
    }

    /// The error a run ends with: a broken wire's, else its stop's (time,
    /// output, cancel), else, when the kernel was `lost`, why (memory, or it
    /// died), else the program's own `error`. A lost kernel's error says
    /// that the variables are gone.
    fn end_error(
        &self,
        error: Option<ExecError>,
        stopped_by: Option<&'static str>,
        limits: &Limits,
        budget: &OutputBudget,
        lost: bool,
    ) -> Option<ExecError> {
        let oom = self.group.oom_killed();
        let broken = self.broken.as_ref().map(|e| {
            ExecError::new(
                limit_error::KERNEL_PROTOCOL,
                format!("the kernel broke the wire protocol ({e})"),
            )
        });
        let mut error = match stop_error(stopped_by, limits, budget) {
            _ if broken.is_some() => broken,
            Some(error) => Some(error),
            _ if lost && oom => Some(ExecError::new(
                limit_error::MEMORY,
                format!(
                    "the session used more than {} MiB of memory",
                    limits.memory_bytes / (1024 * 1024)
                ),
            )),
            _ if lost => Some(ExecError::new(
                limit_error::KERNEL_DIED,
                format!("the {} kernel died", self.kind.label()),
            )),
            _ => error,
        };
        if lost && let Some(error) = error.as_mut() {
            error
                .value
                .push_str("; the kernel was restarted and earlier variables are gone");
        }
        error
    }

    /// Interrupts the running cell and waits for the kernel to confirm, so
    /// that the signal cannot land in a later cell (ipykernel handles the
    /// control channel on a thread of its own).
    async fn interrupt(&mut self) {
        let request = self.message(InterruptRequest {});
        let id = request.header.msg_id.clone();
        let sent = tokio::time::timeout(INTERRUPT_GRACE, self.control.send(&request)).await;
        if !matches!(sent, Ok(Ok(()))) {
            tracing::warn!("cannot interrupt the kernel");
            return;
        }
        let confirmed = tokio::time::timeout(INTERRUPT_GRACE, async {
            loop {
                match self.control.read().await {
                    Ok(reply) if answers(&reply, &id) => return true,
                    Ok(_) => {}
                    Err(e) if dropped(&e).is_some() => {}
                    Err(e) => {
                        self.broke(e);
                        return false;
                    }
                }
            }
        })
        .await;
        if !matches!(confirmed, Ok(true)) {
            tracing::warn!("the kernel did not confirm an interrupt");
        }
    }

    /// Sends on shell, giving up on a kernel that does not read.
    async fn send_shell(&mut self, message: &JupyterMessage) -> Result<(), WireError> {
        tokio::time::timeout(SEND_TIMEOUT, self.shell.send(message))
            .await
            .map_err(|_| WireError::Zmtp(ZmtpError::Io(std::io::ErrorKind::TimedOut.into())))?
    }

    /// Remembers that the wire broke; a kernel that merely closed its
    /// sockets died, which the caller sees without this.
    fn broke(&mut self, error: WireError) {
        if matches!(
            error,
            WireError::Zmtp(
                ZmtpError::Closed
                    | ZmtpError::Truncated
                    | ZmtpError::Io(_)
                    | ZmtpError::Dropped { .. }
            )
        ) {
            return;
        }
        tracing::warn!(%error, "the kernel broke the wire protocol");
        self.broken.get_or_insert(error);
    }

    /// Stops the kernel and everything in its jail.
    pub async fn shutdown(mut self) {
        let _ = self.child.start_kill();
        let _ = tokio::time::timeout(Duration::from_secs(2), self.child.wait()).await;
        self.group.kill_all();
    }
}

/// The size of a message that was too big to keep and was read past: not a
/// broken wire, only output over the run's limit.
fn dropped(error: &WireError) -> Option<u64> {
    match error {
        WireError::Zmtp(ZmtpError::Dropped { bytes }) => Some(*bytes),
        _ => None,
    }
}

/// Whether `message` is the kernel's answer to (or output of) request `id`.
fn answers(message: &JupyterMessage, id: &str) -> bool {
    message
        .parent_header
        .as_ref()
        .is_some_and(|h| h.msg_id == id)
}

/// What a message of the running cell's says.
enum CellMessage {
    /// Output to show, or `None` for a message that shows nothing.
    Output(Option<RunEvent>),
    /// The kernel is idle again: the cell is done.
    Idle,
}

/// What `content`, a message of the running cell's, says; once the cell
/// was `stopped`, the error the interrupt raised in it is not shown.
fn cell_message(content: JupyterMessageContent, stopped: bool) -> CellMessage {
    let ts_ms = now_ms();
    CellMessage::Output(match content {
        JupyterMessageContent::StreamContent(stream) => Some(match stream.name {
            Stdio::Stdout => RunEvent::Stdout {
                text: stream.text,
                ts_ms,
            },
            Stdio::Stderr => RunEvent::Stderr {
                text: stream.text,
                ts_ms,
            },
        }),
        JupyterMessageContent::ExecuteResult(result) => {
            bundle(&result.data).map(|data| RunEvent::Result {
                data,
                main: true,
                metadata: result.metadata,
                display_id: result.transient.and_then(|t| t.display_id),
                ts_ms,
            })
        }
        JupyterMessageContent::DisplayData(display) => {
            bundle(&display.data).map(|data| RunEvent::Result {
                data,
                main: false,
                metadata: display.metadata,
                display_id: display.transient.and_then(|t| t.display_id),
                ts_ms,
            })
        }
        JupyterMessageContent::UpdateDisplayData(update) => {
            match (bundle(&update.data), update.transient.display_id) {
                (Some(data), Some(display_id)) => Some(RunEvent::Update {
                    display_id,
                    data,
                    metadata: update.metadata,
                    ts_ms,
                }),
                _ => None,
            }
        }
        JupyterMessageContent::ClearOutput(clear) => Some(RunEvent::Clear {
            wait: clear.wait,
            ts_ms,
        }),
        JupyterMessageContent::ErrorOutput(error) if !stopped => {
            let error = ExecError {
                name: error.ename,
                value: error.evalue,
                traceback: error.traceback,
            };
            Some(RunEvent::Error { error, ts_ms })
        }
        JupyterMessageContent::Status(status) if status.execution_state == ExecutionState::Idle => {
            return CellMessage::Idle;
        }
        _ => None,
    })
}

/// The pager payloads of an `execute_reply` (at most [`MAX_PAGES`]), as
/// MIME bundles.
fn pages(content: JupyterMessageContent) -> Vec<serde_json::Map<String, serde_json::Value>> {
    let JupyterMessageContent::ExecuteReply(reply) = content else {
        return Vec::new();
    };
    reply
        .payload
        .into_iter()
        .filter_map(|payload| match payload {
            Payload::Page { data, .. } => bundle(&data),
            _ => None,
        })
        .take(MAX_PAGES)
        .collect()
}

/// The connection file's content for a kernel of `kind` whose sockets are
/// in `ipc_dir`, with a fresh key.
fn connection_info(kind: KernelKind, ipc_dir: &Path) -> ConnectionInfo {
    ConnectionInfo {
        ip: ipc_dir.join("k").to_string_lossy().into_owned(),
        transport: Transport::IPC,
        shell_port: 1,
        iopub_port: 2,
        stdin_port: 3,
        control_port: 4,
        hb_port: 5,
        key: format!(
            "{}{}",
            uuid::Uuid::new_v4().simple(),
            uuid::Uuid::new_v4().simple()
        ),
        signature_scheme: "hmac-sha256".into(),
        kernel_name: Some(kind.kernel_name().into()),
    }
}

/// What a kernel's jail mounts: the session's `home`, its socket
/// directory, and the package index's network, if jails have one.
fn kernel_mounts(
    kind: KernelKind,
    home: &Path,
    ipc_dir: &Path,
    package_net: Option<&PackageNet>,
) -> Mounts {
    let mut env = kind.env();
    if let Some(net) = package_net {
        env.extend(net.env.iter().cloned());
    }
    Mounts {
        home: Some(home.to_path_buf()),
        code_file: None,
        shared: vec![ipc_dir.to_path_buf()],
        env,
        cwd: None,
        netns: package_net.map(|net| net.net.namespace()),
    }
}

/// Waits for the kernel to bind its sockets in `dir`, as it does once it is
/// up; fails if it exits first or is not up [`START_TIMEOUT`] after
/// `started`.
async fn wait_for_sockets(
    dir: &IpcDir,
    uid: u32,
    child: &mut tokio::process::Child,
    started: Instant,
) -> Result<(), SandboxError> {
    loop {
        let mut ready = true;
        for socket in [SHELL, IOPUB, CONTROL] {
            ready &= dir
                .socket_ready(socket, uid)
                .map_err(|e| internal("kernel socket", &e))?;
        }
        if ready {
            return Ok(());
        }
        if let Ok(Some(status)) = child.try_wait() {
            return Err(internal("the kernel exited while starting", &status));
        }
        if started.elapsed() > START_TIMEOUT {
            return Err(internal("the kernel did not start", &"timed out"));
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Connects to the kernel's shell, iopub and control sockets in `ipc_dir`,
/// in that order.
async fn connect_channels(
    ipc_dir: &Path,
    client_session: &str,
    uid: u32,
    signer: &Signer,
) -> Result<(SocketChannel, SocketChannel, SocketChannel), SandboxError> {
    // The shell's identity is the session id, as jupyter_client does.
    let shell = SocketChannel::connect(
        &ipc_dir.join(SHELL),
        SocketType::Dealer,
        Some(client_session.as_bytes()),
        uid,
        signer.clone(),
    )
    .await
    .map_err(|e| internal("kernel shell", &e))?;
    let iopub = SocketChannel::connect(
        &ipc_dir.join(IOPUB),
        SocketType::Sub,
        None,
        uid,
        signer.clone(),
    )
    .await
    .map_err(|e| internal("kernel iopub", &e))?;
    let control = SocketChannel::connect(
        &ipc_dir.join(CONTROL),
        SocketType::Dealer,
        None,
        uid,
        signer.clone(),
    )
    .await
    .map_err(|e| internal("kernel control", &e))?;
    Ok((shell, iopub, control))
}

/// A MIME bundle as a run's result.
/// A display's MIME bundle. The kernel may not speak for runcell's package
/// index: a [`crate::packages::PACKAGE_MIME`] value it sends is dropped
/// (only the server's own notices carry one).
fn bundle(data: &impl serde::Serialize) -> Option<serde_json::Map<String, serde_json::Value>> {
    match serde_json::to_value(data) {
        Ok(serde_json::Value::Object(mut data)) => {
            let forged = data.remove(crate::packages::PACKAGE_MIME).is_some();
            (!forged || !data.is_empty()).then_some(data)
        }
        _ => None,
    }
}

async fn send(events: Option<&mpsc::Sender<RunEvent>>, event: RunEvent) {
    if let Some(events) = events {
        let _ = events.send(event).await;
    }
}

/// Reads and drops the kernel's own log output so its pipes never fill.
fn drain_logs(child: &mut tokio::process::Child) {
    if let Some(mut out) = child.stdout.take() {
        tokio::spawn(async move {
            let mut buf = vec![0u8; 4096];
            while matches!(out.read(&mut buf).await, Ok(n) if n > 0) {}
        });
    }
    if let Some(mut err) = child.stderr.take() {
        tokio::spawn(async move {
            let mut buf = vec![0u8; 4096];
            while let Ok(n) = err.read(&mut buf).await {
                if n == 0 {
                    break;
                }
                tracing::debug!(log = %String::from_utf8_lossy(&buf[..n]), "kernel");
            }
        });
    }
}
