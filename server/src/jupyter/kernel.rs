//! One gateway kernel: a sandbox session of its key's, the cells sent to it
//! run one at a time in order (as a Jupyter kernel runs them), and what
//! they print published on iopub to every connection.
//!
//! The messages are runcell's own, made from the run's events, never the
//! sandbox's bytes passed through: a cell's output is bounded, its time
//! limited and its errors named by the same code as every other run.

use std::collections::VecDeque;
use std::sync::Arc;

use parking_lot::Mutex;
use serde_json::{Map, Value, json};
use tokio::sync::{broadcast, mpsc};
use tokio_util::sync::CancellationToken;

use super::message::{Channel, Incoming, Outgoing, now_iso};
use crate::auth::Caller;
use crate::code_api::{CodeApi, CodeApiError};
use crate::sandbox::{ExecError, Language, Limits, RunEvent, RunOutcome, RunRequest, limit_error};

/// Messages a slow connection may fall behind on iopub before it misses
/// some (it is then told so on stderr).
const IOPUB_BACKLOG: usize = 1024;
/// Cells waiting to run, at most; more are answered `aborted`.
const MAX_QUEUED: usize = 256;

/// What a client asked of the kernel that the gateway does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Asked {
    Restart,
    Shutdown,
}

/// The connection a reply goes to (shell, control, stdin replies go only to
/// the connection that asked).
pub type ReplyTo = u64;
/// Frames for every connection (iopub) carry this instead.
const EVERYONE: ReplyTo = 0;

/// A cell waiting to run, with the connection that sent it.
struct Job {
    request: Incoming,
    reply: ReplyTo,
    /// The kernel's generation when it was sent: a restart aborts the
    /// cells sent before it.
    generation: u64,
}

/// What changes as the kernel lives.
#[derive(Debug)]
struct State {
    /// The sandbox session cells run in (a new one after each restart).
    session_id: String,
    execution_state: &'static str,
    last_activity: String,
    connections: usize,
    execution_count: u64,
    generation: u64,
    /// Why the kernel cannot run cells any more (a failed restart).
    dead: Option<String>,
}

pub struct Kernel {
    pub id: String,
    pub name: String,
    pub owner: Caller,
    out: Outgoing,
    state: Mutex<State>,
    /// Every frame the kernel sends, in order, with the connection it is
    /// for: one stream, so that a reply never overtakes the iopub messages
    /// sent before it (nor `idle` the reply).
    frames: broadcast::Sender<(ReplyTo, Arc<str>)>,
    next_connection: std::sync::atomic::AtomicU64,
    queue: Mutex<VecDeque<Job>>,
    wake: tokio::sync::Notify,
    /// The running cell's stop.
    current: Mutex<Option<CancellationToken>>,
    /// Restarts one at a time.
    restarting: tokio::sync::Mutex<()>,
    /// Cancelled when the kernel is shut down: its connections close.
    pub closed: CancellationToken,
    python_version: String,
    limits: Limits,
}

impl std::fmt::Debug for Kernel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Kernel")
            .field("id", &self.id)
            .field("owner", &self.owner.key_id)
            .finish_non_exhaustive()
    }
}

/// The kernel model the REST API answers with.
#[derive(Debug, Clone, serde::Serialize, PartialEq, Eq)]
pub struct KernelModel {
    pub id: String,
    pub name: String,
    pub last_activity: String,
    pub execution_state: String,
    pub connections: usize,
}

impl Kernel {
    pub fn new(
        id: String,
        name: String,
        owner: Caller,
        session_id: String,
        python_version: String,
        limits: Limits,
    ) -> Arc<Self> {
        let (frames, _) = broadcast::channel(IOPUB_BACKLOG);
        Arc::new(Self {
            out: Outgoing::new(uuid::Uuid::new_v4().to_string()),
            id,
            name,
            owner,
            state: Mutex::new(State {
                session_id,
                execution_state: "idle",
                last_activity: now_iso(),
                connections: 0,
                execution_count: 0,
                generation: 0,
                dead: None,
            }),
            frames,
            next_connection: std::sync::atomic::AtomicU64::new(EVERYONE + 1),
            queue: Mutex::new(VecDeque::new()),
            wake: tokio::sync::Notify::new(),
            current: Mutex::new(None),
            restarting: tokio::sync::Mutex::new(()),
            closed: CancellationToken::new(),
            python_version,
            limits,
        })
    }

    pub fn model(&self) -> KernelModel {
        let state = self.state.lock();
        KernelModel {
            id: self.id.clone(),
            name: self.name.clone(),
            last_activity: state.last_activity.clone(),
            execution_state: if state.dead.is_some() {
                "dead".into()
            } else {
                state.execution_state.into()
            },
            connections: state.connections,
        }
    }

    pub fn session_id(&self) -> String {
        self.state.lock().session_id.clone()
    }

    /// A new connection's view of the kernel's frames, counted until it is
    /// dropped.
    pub fn connect(self: &Arc<Self>) -> Connection {
        self.state.lock().connections += 1;
        Connection {
            id: self
                .next_connection
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed),
            kernel: Arc::clone(self),
            frames: self.frames.subscribe(),
        }
    }

    /// An iopub frame, for every connection.
    fn publish(&self, frame: String) {
        self.send_to(EVERYONE, frame);
    }

    fn send_to(&self, to: ReplyTo, frame: String) {
        // No connection is listening: nothing to tell.
        let _ = self.frames.send((to, Arc::from(frame)));
    }

    fn set_state(&self, parent: Option<&Map<String, Value>>, state: &'static str) {
        {
            let mut s = self.state.lock();
            s.execution_state = state;
            s.last_activity = now_iso();
        }
        self.publish(self.out.status(parent, state));
    }

    /// Handles a client's message; cells are queued for [`Self::work`].
    /// A restart or shutdown asked for on the control channel is the
    /// caller's to do (as through the REST API).
    pub fn handle(&self, message: Incoming, reply: ReplyTo) -> Option<Asked> {
        self.state.lock().last_activity = now_iso();
        let parent = Some(&message.header);
        let answer = |channel: Channel, msg_type: &str, content: Value| {
            self.out.frame(channel, msg_type, parent, content)
        };
        match (message.channel, message.msg_type.as_str()) {
            (Channel::Shell, "execute_request") => self.enqueue(message, reply),
            (Channel::Shell | Channel::Control, "kernel_info_request") => {
                // Clients take its busy and idle as the sign that iopub is
                // connected.
                let info = super::message::kernel_info(&self.python_version);
                self.reply_between_statuses(
                    parent,
                    reply,
                    answer(message.channel, "kernel_info_reply", info),
                );
            }
            (_, "interrupt_request") => {
                self.interrupt();
                self.send_to(
                    reply,
                    answer(Channel::Control, "interrupt_reply", json!({"status": "ok"})),
                );
            }
            (_, "shutdown_request") => {
                let restart = message.flag("restart", false);
                let content = json!({"status": "ok", "restart": restart});
                self.send_to(
                    reply,
                    answer(Channel::Control, "shutdown_reply", content.clone()),
                );
                // JupyterLab looks for it on iopub too.
                self.publish(answer(Channel::Iopub, "shutdown_reply", content));
                return Some(if restart {
                    Asked::Restart
                } else {
                    Asked::Shutdown
                });
            }
            (Channel::Shell, other) => {
                let content = match other {
                    "complete_request" => {
                        let cursor = message
                            .content
                            .get("cursor_pos")
                            .and_then(Value::as_u64)
                            .unwrap_or(0);
                        json!({"status": "ok", "matches": [], "cursor_start": cursor,
                            "cursor_end": cursor, "metadata": {}})
                    }
                    "inspect_request" => {
                        json!({"status": "ok", "found": false, "data": {}, "metadata": {}})
                    }
                    "is_complete_request" => json!({"status": "complete"}),
                    "comm_info_request" => json!({"status": "ok", "comms": {}}),
                    "history_request" => json!({"status": "ok", "history": []}),
                    _ => {
                        tracing::debug!(msg_type = other, "an unknown shell message is ignored");
                        return None;
                    }
                };
                let reply_type = other.replace("_request", "_reply");
                self.reply_between_statuses(
                    parent,
                    reply,
                    answer(Channel::Shell, &reply_type, content),
                );
            }
            (channel, other) => {
                tracing::debug!(
                    channel = channel.name(),
                    msg_type = other,
                    "a message is ignored"
                );
            }
        }
        None
    }
}

impl Kernel {
    fn enqueue(&self, request: Incoming, reply: ReplyTo) {
        let generation = self.state.lock().generation;
        let mut queue = self.queue.lock();
        if queue.len() >= MAX_QUEUED {
            drop(queue);
            tracing::warn!(kernel = %self.id, "too many cells queued; one is aborted");
            let frame = self.out.frame(
                Channel::Shell,
                "execute_reply",
                Some(&request.header),
                json!({"status": "aborted", "execution_count": null}),
            );
            self.send_to(reply, frame);
            return;
        }
        queue.push_back(Job {
            request,
            reply,
            generation,
        });
        drop(queue);
        self.wake.notify_one();
    }

    /// Stops the running cell, if one is; the cells after it still run
    /// unless it asked to stop on an error.
    pub fn interrupt(&self) {
        if let Some(cancel) = self.current.lock().as_ref() {
            cancel.cancel();
        }
    }

    /// Runs the queued cells one after another until the kernel is shut
    /// down.
    pub async fn work(self: Arc<Self>, code_api: Arc<CodeApi>) {
        loop {
            let job = self.queue.lock().pop_front();
            let Some(job) = job else {
                tokio::select! {
                    () = self.wake.notified() => continue,
                    () = self.closed.cancelled() => return,
                }
            };
            if job.generation != self.state.lock().generation {
                self.abort(&job);
                continue;
            }
            let failed = self.execute(&code_api, &job).await;
            if failed && job.request.flag("stop_on_error", true) {
                // As ipykernel does: what was queued behind a failed cell
                // is not run.
                let pending: Vec<Job> = self.queue.lock().drain(..).collect();
                for job in &pending {
                    self.abort(job);
                }
            }
        }
    }

    fn abort(&self, job: &Job) {
        let parent = Some(&job.request.header);
        let count = self.state.lock().execution_count;
        self.reply_between_statuses(
            parent,
            job.reply,
            self.out.frame(
                Channel::Shell,
                "execute_reply",
                parent,
                json!({"status": "aborted", "execution_count": count}),
            ),
        );
    }

    /// A reply with `busy` before it and `idle` after, on iopub, as ipykernel
    /// sends every shell reply that runs no code.
    fn reply_between_statuses(
        &self,
        parent: Option<&Map<String, Value>>,
        to: ReplyTo,
        frame: String,
    ) {
        self.publish(self.out.status(parent, "busy"));
        self.send_to(to, frame);
        self.publish(self.out.status(parent, "idle"));
    }

    /// Runs one cell; `true` if it ended in an error.
    async fn execute(&self, code_api: &CodeApi, job: &Job) -> bool {
        let request = &job.request;
        let parent = Some(&request.header);
        let code = request.text("code").unwrap_or_default().to_string();
        let silent = request.flag("silent", false);
        let store_history = request.flag("store_history", !silent);
        self.set_state(parent, "busy");
        let (count, session_id, dead) = {
            let mut state = self.state.lock();
            if store_history && !silent && !code.trim().is_empty() {
                state.execution_count += 1;
            }
            (
                state.execution_count,
                state.session_id.clone(),
                state.dead.clone(),
            )
        };
        if !silent {
            self.publish(self.out.frame(
                Channel::Iopub,
                "execute_input",
                parent,
                json!({"code": code, "execution_count": count}),
            ));
        }
        let outcome = if let Some(why) = dead {
            Err(ExecError::new("KernelDead", why))
        } else if code.trim().is_empty() {
            Ok(RunOutcome::default())
        } else {
            self.run(code_api, &session_id, code, parent, count, silent)
                .await
        };
        let error = match outcome {
            Ok(outcome) => outcome.error,
            Err(error) => Some(error),
        };
        let content = match &error {
            None => json!({
                "status": "ok",
                "execution_count": count,
                "user_expressions": {},
                "payload": [],
            }),
            Some(error) => {
                let error = jupyter_error(error);
                self.publish(
                    self.out
                        .frame(Channel::Iopub, "error", parent, error.clone()),
                );
                let mut content = error;
                if let Some(fields) = content.as_object_mut() {
                    fields.insert("status".into(), "error".into());
                    fields.insert("execution_count".into(), count.into());
                }
                content
            }
        };
        self.send_to(
            job.reply,
            self.out
                .frame(Channel::Shell, "execute_reply", parent, content),
        );
        self.set_state(parent, "idle");
        error.is_some()
    }

    /// Runs `code` in the kernel's session under its key's limits,
    /// publishing what it prints as it happens.
    async fn run(
        &self,
        code_api: &CodeApi,
        session_id: &str,
        code: String,
        parent: Option<&Map<String, Value>>,
        count: u64,
        silent: bool,
    ) -> Result<RunOutcome, ExecError> {
        let request = RunRequest {
            code,
            language: Language::Python,
            limits: self.limits.clone(),
        };
        let admitted = code_api
            .admit(&self.owner, request, Some(session_id.to_string()), None)
            .map_err(|e| refused(&e))?;
        let cancel = CancellationToken::new();
        *self.current.lock() = Some(cancel.clone());
        let (events, mut received) = mpsc::channel::<RunEvent>(64);
        let run = code_api.run(admitted, Some(events), cancel.clone());
        tokio::pin!(run);
        let closed = self.closed.cancelled();
        tokio::pin!(closed);
        let mut open = true;
        let outcome = loop {
            tokio::select! {
                biased;
                event = received.recv(), if open => match event {
                    Some(event) => self.publish_event(event, parent, count, silent),
                    None => open = false,
                },
                outcome = &mut run => {
                    // The run's task has ended: its events are all in.
                    while let Ok(event) = received.try_recv() {
                        self.publish_event(event, parent, count, silent);
                    }
                    break outcome;
                }
                () = &mut closed, if !cancel.is_cancelled() => cancel.cancel(),
            }
        };
        *self.current.lock() = None;
        outcome.map_err(|e| refused(&e))
    }

    fn publish_event(
        &self,
        event: RunEvent,
        parent: Option<&Map<String, Value>>,
        count: u64,
        silent: bool,
    ) {
        let frame = match event {
            RunEvent::Stdout { text, .. } => self.out.frame(
                Channel::Iopub,
                "stream",
                parent,
                json!({"name": "stdout", "text": text}),
            ),
            RunEvent::Stderr { text, .. } => self.out.frame(
                Channel::Iopub,
                "stream",
                parent,
                json!({"name": "stderr", "text": text}),
            ),
            RunEvent::Result {
                data, main: true, ..
            } if !silent => self.out.frame(
                Channel::Iopub,
                "execute_result",
                parent,
                json!({"data": data, "metadata": {}, "execution_count": count}),
            ),
            RunEvent::Result {
                data, main: false, ..
            } => self.out.frame(
                Channel::Iopub,
                "display_data",
                parent,
                json!({"data": data, "metadata": {}, "transient": {}}),
            ),
            // The outcome's error is published once, at the end.
            RunEvent::Result { .. } | RunEvent::Error { .. } => return,
        };
        self.publish(frame);
    }

    /// Starts the kernel afresh in a new session of its key's (variables
    /// are lost); cells queued before are aborted.
    pub async fn restart(&self, code_api: &CodeApi) -> Result<(), CodeApiError> {
        let _one_at_a_time = self.restarting.lock().await;
        let old = {
            let mut state = self.state.lock();
            state.generation += 1;
            state.session_id.clone()
        };
        self.interrupt();
        self.set_state(None, "restarting");
        // Closed first: the new session counts against the key's sessions.
        if let Err(e) = code_api.delete_session(&self.owner, &old).await {
            tracing::debug!(%e, "the old session of a restarted kernel was gone");
        }
        match code_api
            .create_session(&self.owner, Language::Python, None)
            .await
        {
            Ok(info) => {
                {
                    let mut state = self.state.lock();
                    state.session_id = info.session_id;
                    state.execution_count = 0;
                    state.dead = None;
                }
                self.set_state(None, "starting");
                self.set_state(None, "idle");
                self.wake.notify_one();
                Ok(())
            }
            Err(e) => {
                self.state.lock().dead = Some(format!("the kernel could not be restarted: {e}"));
                self.set_state(None, "dead");
                Err(e)
            }
        }
    }

    /// Stops the kernel: the running cell, its session and its connections.
    pub async fn shutdown(&self, code_api: &CodeApi) {
        self.state.lock().generation += 1;
        self.interrupt();
        self.closed.cancel();
        let session = self.session_id();
        if let Err(e) = code_api.delete_session(&self.owner, &session).await {
            tracing::debug!(%e, "the session of a kernel shut down was gone");
        }
    }
}

/// A connection's view of the kernel: iopub and its own replies, in the
/// order the kernel sent them; counted among the kernel's connections until
/// dropped.
pub struct Connection {
    id: ReplyTo,
    pub kernel: Arc<Kernel>,
    frames: broadcast::Receiver<(ReplyTo, Arc<str>)>,
}

/// What a connection receives next.
pub enum Received {
    Frame(Arc<str>),
    /// It fell this many frames behind, and they are lost.
    Missed(u64),
    Closed,
}

impl Drop for Connection {
    fn drop(&mut self) {
        let mut state = self.kernel.state.lock();
        state.connections = state.connections.saturating_sub(1);
    }
}

impl Connection {
    pub fn id(&self) -> ReplyTo {
        self.id
    }

    /// The next frame for this connection.
    pub async fn recv(&mut self) -> Received {
        loop {
            match self.frames.recv().await {
                Ok((to, frame)) if to == EVERYONE || to == self.id => {
                    return Received::Frame(frame);
                }
                Ok(_) => {}
                Err(broadcast::error::RecvError::Lagged(missed)) => {
                    return Received::Missed(missed);
                }
                Err(broadcast::error::RecvError::Closed) => return Received::Closed,
            }
        }
    }

    /// What a connection that fell behind is told it missed.
    pub fn missed(&self, count: u64) -> String {
        self.kernel.out.frame(
            Channel::Iopub,
            "stream",
            None,
            json!({"name": "stderr",
                "text": format!("[runcell: this connection fell behind and missed {count} messages]\n")}),
        )
    }
}

/// An error as Jupyter's `error` message has it; a stop by the person
/// (interrupt) is Python's `KeyboardInterrupt`, as clients expect.
fn jupyter_error(error: &ExecError) -> Value {
    let ename = if error.name == limit_error::CANCELLED {
        "KeyboardInterrupt"
    } else {
        error.name.as_str()
    };
    let traceback = if error.traceback.is_empty() {
        vec![format!("{ename}: {}", error.value)]
    } else {
        error.traceback.clone()
    };
    json!({"ename": ename, "evalue": error.value, "traceback": traceback})
}

/// A run the gateway could not start, as the cell's error.
fn refused(error: &CodeApiError) -> ExecError {
    let name = match error {
        CodeApiError::Limited(_) => "RateLimited",
        CodeApiError::NotFound(_) => "KernelDead",
        _ => "SandboxError",
    };
    ExecError::new(name, error.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_interrupt_is_a_keyboard_interrupt_and_every_error_has_a_traceback() {
        let stopped = jupyter_error(&ExecError::new(
            limit_error::CANCELLED,
            "the run was stopped",
        ));
        assert_eq!(stopped["ename"], "KeyboardInterrupt");
        assert_eq!(
            stopped["traceback"][0],
            "KeyboardInterrupt: the run was stopped"
        );
        let own = jupyter_error(&ExecError {
            name: "ZeroDivisionError".into(),
            value: "division by zero".into(),
            traceback: vec!["line 1".into()],
        });
        assert_eq!(own["ename"], "ZeroDivisionError");
        assert_eq!(own["traceback"], json!(["line 1"]));
    }
}
