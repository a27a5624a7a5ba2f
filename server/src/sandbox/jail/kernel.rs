//! A stateful Python kernel (ipykernel) in a session's jail, driven over
//! ZeroMQ `ipc` sockets in a directory bound into the jail at the same path
//! (TCP cannot cross the jail's network namespace).

use std::os::unix::fs::{PermissionsExt, chown};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use jupyter_protocol::{
    ConnectionInfo, ExecuteRequest, ExecutionState, InterruptRequest, JupyterMessage,
    JupyterMessageContent, KernelInfoRequest, Stdio, Transport,
};
use jupyter_zmq_client::{
    ClientControlConnection, ClientIoPubConnection, ClientShellConnection,
    create_client_control_connection, create_client_iopub_connection,
    create_client_shell_connection_with_identity, peer_identity_for_session,
};
use tokio::io::AsyncReadExt;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::{JailSandbox, Mounts, PYTHON_ENV, RunGroup, stop_error};
use crate::sandbox::{
    ExecError, Limits, OutputBudget, RunEvent, RunOutcome, SandboxError, limit_error, now_ms,
};

/// How long a kernel may take to come up.
const START_TIMEOUT: Duration = Duration::from_secs(30);
/// How long an interrupted kernel gets to become idle before it is replaced.
const INTERRUPT_GRACE: Duration = Duration::from_secs(3);

pub(crate) struct Kernel {
    child: tokio::process::Child,
    group: RunGroup,
    shell: ClientShellConnection,
    iopub: ClientIoPubConnection,
    control: ClientControlConnection,
    client_session: String,
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

impl Kernel {
    /// Starts a kernel whose sockets live in `ipc_dir` and whose working
    /// directory is the session's `home`; both belong to the jail uid.
    pub async fn start(
        jail: &JailSandbox,
        name: &str,
        ipc_dir: &Path,
        home: &Path,
        limits: &Limits,
    ) -> Result<Self, SandboxError> {
        let started = Instant::now();
        let cgroups = jail.ready_cgroups()?;
        let (uid, gid) = (jail.config.uid, jail.config.gid);
        // Sockets from an earlier kernel of this session must not linger.
        if let Ok(entries) = std::fs::read_dir(ipc_dir) {
            for entry in entries.flatten() {
                let _ = std::fs::remove_file(entry.path());
            }
        }
        let info = ConnectionInfo {
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
            kernel_name: Some("python3".into()),
        };
        let connection_file = ipc_dir.join("connection.json");
        let json = serde_json::to_vec(&info).map_err(|e| internal("connection file", &e))?;
        std::fs::write(&connection_file, json).map_err(|e| internal("connection file", &e))?;
        std::fs::set_permissions(&connection_file, std::fs::Permissions::from_mode(0o400))
            .map_err(|e| internal("connection file", &e))?;
        chown(&connection_file, Some(uid), Some(gid))
            .map_err(|e| internal("connection file", &e))?;

        let group = RunGroup::create(cgroups, name, limits)
            .map_err(|e| SandboxError::Unavailable(e.to_string()))?;
        let mounts = Mounts {
            home: Some(home.to_path_buf()),
            code_file: None,
            shared: vec![ipc_dir.to_path_buf()],
            // Figures are sent to the page as PNG when a cell shows them.
            env: vec![("MPLBACKEND", "module://matplotlib_inline.backend_inline")],
        };
        let command = vec![
            format!("{PYTHON_ENV}/bin/python3"),
            "-m".into(),
            "ipykernel_launcher".into(),
            "-f".into(),
            connection_file.to_string_lossy().into_owned(),
            "--HistoryManager.enabled=False".into(),
            "--IPKernelApp.log_level=ERROR".into(),
        ];
        let mut child = jail.spawn_jail(limits, &group, &mounts, command, super::Code::None)?;
        drain_logs(&mut child);

        // The kernel binds its sockets once it is up.
        let sockets: Vec<PathBuf> = (1..=5).map(|p| ipc_dir.join(format!("k-{p}"))).collect();
        loop {
            if sockets.iter().all(|s| s.exists()) {
                break;
            }
            if let Ok(Some(status)) = child.try_wait() {
                return Err(internal("the kernel exited while starting", &status));
            }
            if started.elapsed() > START_TIMEOUT {
                return Err(internal("the kernel did not start", &"timed out"));
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }

        let client_session = uuid::Uuid::new_v4().to_string();
        let identity =
            peer_identity_for_session(&client_session).map_err(|e| internal("kernel", &e))?;
        let shell = create_client_shell_connection_with_identity(&info, &client_session, identity)
            .await
            .map_err(|e| internal("kernel shell", &e))?;
        let iopub = create_client_iopub_connection(&info, "", &client_session)
            .await
            .map_err(|e| internal("kernel iopub", &e))?;
        let control = create_client_control_connection(&info, &client_session)
            .await
            .map_err(|e| internal("kernel control", &e))?;
        let mut kernel = Self {
            child,
            group,
            shell,
            iopub,
            control,
            client_session,
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

    async fn handshake(&mut self) -> Result<(), SandboxError> {
        let request = self.message(KernelInfoRequest {});
        let id = request.header.msg_id.clone();
        self.shell
            .send(request)
            .await
            .map_err(|e| internal("kernel", &e))?;
        loop {
            let reply = self
                .shell
                .read()
                .await
                .map_err(|e| internal("kernel", &e))?;
            if reply.parent_header.as_ref().is_some_and(|h| h.msg_id == id) {
                return Ok(());
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
        if let Err(e) = self.shell.send(request).await {
            outcome.error = Some(ExecError::new(
                limit_error::KERNEL_DIED,
                format!("cannot reach the kernel: {e}"),
            ));
            return (outcome, KernelState::Lost);
        }
        let deadline = tokio::time::sleep(limits.wall);
        tokio::pin!(deadline);
        let grace = tokio::time::sleep(Duration::MAX);
        tokio::pin!(grace);
        let mut stopped_by: Option<&'static str> = None;
        let mut state = KernelState::Alive;

        loop {
            tokio::select! {
                message = self.iopub.read() => {
                    let Ok(message) = message else {
                        state = KernelState::Lost;
                        break;
                    };
                    if message.parent_header.as_ref().is_none_or(|h| h.msg_id != id) {
                        continue;
                    }
                    let ts_ms = now_ms();
                    let event = match message.content {
                        JupyterMessageContent::StreamContent(stream) => match stream.name {
                            Stdio::Stdout => RunEvent::Stdout { text: stream.text, ts_ms },
                            Stdio::Stderr => RunEvent::Stderr { text: stream.text, ts_ms },
                        },
                        JupyterMessageContent::ExecuteResult(result) => {
                            let Some(data) = bundle(&result.data) else { continue };
                            RunEvent::Result { data, main: true, ts_ms }
                        }
                        JupyterMessageContent::DisplayData(display) => {
                            let Some(data) = bundle(&display.data) else { continue };
                            RunEvent::Result { data, main: false, ts_ms }
                        }
                        JupyterMessageContent::ErrorOutput(error) if stopped_by.is_none() => {
                            let error = ExecError {
                                name: error.ename,
                                value: error.evalue,
                                traceback: error.traceback,
                            };
                            RunEvent::Error { error, ts_ms }
                        }
                        JupyterMessageContent::Status(status)
                            if status.execution_state == ExecutionState::Idle => break,
                        _ => continue,
                    };
                    if let Some(event) = budget.record(&mut outcome, event) {
                        send(events, event).await;
                    }
                    if budget.overflowed() && stopped_by.is_none() {
                        stopped_by = Some(limit_error::OUTPUT);
                        self.interrupt().await;
                        grace.as_mut().reset(tokio::time::Instant::now() + INTERRUPT_GRACE);
                    }
                }
                exited = self.child.wait() => {
                    tracing::warn!(status = ?exited.ok(), "the kernel died");
                    state = KernelState::Lost;
                    break;
                }
                () = &mut deadline, if stopped_by.is_none() => {
                    stopped_by = Some(limit_error::TIMEOUT);
                    self.interrupt().await;
                    grace.as_mut().reset(tokio::time::Instant::now() + INTERRUPT_GRACE);
                }
                () = cancel.cancelled(), if stopped_by.is_none() => {
                    stopped_by = Some(limit_error::CANCELLED);
                    self.interrupt().await;
                    grace.as_mut().reset(tokio::time::Instant::now() + INTERRUPT_GRACE);
                }
                () = &mut grace => {
                    tracing::warn!("the kernel ignored an interrupt");
                    state = KernelState::Lost;
                    break;
                }
            }
        }
        if matches!(state, KernelState::Alive) {
            // Take the reply off the shell socket so that it cannot be read as
            // the answer to a later request.
            let _ = tokio::time::timeout(Duration::from_secs(1), async {
                while let Ok(reply) = self.shell.read().await {
                    if reply.parent_header.as_ref().is_some_and(|h| h.msg_id == id) {
                        break;
                    }
                }
            })
            .await;
        }
        let lost = matches!(state, KernelState::Lost);
        let oom = self.group.oom_killed();
        outcome.truncated = budget.truncated();
        let stopped = match stopped_by {
            Some(limit_error::OUTPUT) => budget.limit_error(),
            _ => stop_error(stopped_by, limits),
        };
        outcome.error = match stopped {
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
                "the Python kernel died",
            )),
            _ => outcome.error,
        };
        if lost && let Some(error) = outcome.error.as_mut() {
            error
                .value
                .push_str("; the kernel was restarted and earlier variables are gone");
        }
        outcome.duration_ms = crate::clock::millis(started.elapsed());
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

    /// Interrupts the running cell and waits for the kernel to confirm, so
    /// that the signal cannot land in a later cell (ipykernel handles the
    /// control channel on a thread of its own).
    async fn interrupt(&mut self) {
        let request = self.message(InterruptRequest {});
        let id = request.header.msg_id.clone();
        if let Err(e) = self.control.send(request).await {
            tracing::warn!(%e, "cannot interrupt the kernel");
            return;
        }
        let confirmed = tokio::time::timeout(INTERRUPT_GRACE, async {
            while let Ok(reply) = self.control.read().await {
                if reply.parent_header.as_ref().is_some_and(|h| h.msg_id == id) {
                    return true;
                }
            }
            false
        })
        .await;
        if !matches!(confirmed, Ok(true)) {
            tracing::warn!("the kernel did not confirm an interrupt");
        }
    }

    /// Stops the kernel and everything in its jail.
    pub async fn shutdown(mut self) {
        let _ = self.child.start_kill();
        let _ = tokio::time::timeout(Duration::from_secs(2), self.child.wait()).await;
        self.group.kill_all();
    }
}

/// A MIME bundle as a run's result.
fn bundle(data: &impl serde::Serialize) -> Option<serde_json::Map<String, serde_json::Value>> {
    match serde_json::to_value(data) {
        Ok(serde_json::Value::Object(data)) => Some(data),
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
