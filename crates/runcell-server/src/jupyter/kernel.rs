//! One gateway kernel: a sandbox session of its key's, the cells sent to it
//! run one at a time in order (as a Jupyter kernel runs them), and what
//! they print published on iopub to every connection.
//!
//! The messages are runcell's own, made from the run's events, never the
//! sandbox's bytes passed through: a cell's output is bounded, its time
//! limited and its errors named by the same code as every other run.

use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;

use parking_lot::Mutex;
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::budget::{Charge, ConnectionBudget, Share};
use super::connection::{Connection, Outbound};
use super::message::{Channel, Incoming, Outgoing, Parent, now_iso};
use super::restarts::{Begin, Restarts, Ticket};
use crate::auth::Caller;
use crate::code_api::{CodeApi, CodeApiError};
use crate::sandbox::{ExecError, Language, Limits, RunEvent, RunOutcome, RunRequest, limit_error};

/// What a client asked of the kernel that the gateway does.
#[derive(Debug)]
pub enum Asked {
    /// A restart this client leads (others asked for meanwhile join it).
    Restart(Ticket),
    Shutdown,
}

/// What bounds a kernel and its connections (from `[jupyter]`).
#[derive(Debug, Clone)]
pub struct KernelSettings {
    /// Cells waiting to run, at most; more are refused.
    pub max_queued_cells: usize,
    /// Messages a connection may send a second.
    pub messages_per_second: u32,
    pub restarts_per_minute: u32,
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
    /// Its code's bytes, charged to the sender's budget until it has run.
    _held: Charge,
}

/// What changes as the kernel lives.
#[derive(Debug)]
struct State {
    /// The sandbox session cells run in (a new one after each restart).
    session_id: String,
    execution_state: &'static str,
    last_activity: String,
    execution_count: u64,
    generation: u64,
    /// Why the kernel cannot run cells any more (a failed restart).
    dead: Option<String>,
}

pub struct Kernel {
    pub id: String,
    pub name: String,
    /// What its cells run as (from its spec).
    language: Language,
    pub owner: Caller,
    out: Outgoing,
    state: Mutex<State>,
    /// Each connection's queue of frames to write. Every frame is pushed
    /// under this lock, in the order the kernel sends them, so that a reply
    /// never overtakes the iopub messages sent before it (nor `idle` the
    /// reply); a connection whose queue goes past its budget is dropped
    /// from here.
    connections: Mutex<BTreeMap<ReplyTo, Arc<Outbound>>>,
    next_connection: std::sync::atomic::AtomicU64,
    queue: Mutex<VecDeque<Job>>,
    wake: tokio::sync::Notify,
    /// The running cell's stop.
    current: Mutex<Option<CancellationToken>>,
    pub restarts: Restarts,
    settings: KernelSettings,
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
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        id: String,
        name: String,
        language: Language,
        owner: Caller,
        session_id: String,
        python_version: String,
        limits: Limits,
        settings: KernelSettings,
    ) -> Arc<Self> {
        Arc::new(Self {
            out: Outgoing::new(uuid::Uuid::new_v4().to_string()),
            id,
            name,
            language,
            owner,
            state: Mutex::new(State {
                session_id,
                execution_state: "idle",
                last_activity: now_iso(),
                execution_count: 0,
                generation: 0,
                dead: None,
            }),
            connections: Mutex::new(BTreeMap::new()),
            next_connection: std::sync::atomic::AtomicU64::new(EVERYONE + 1),
            queue: Mutex::new(VecDeque::new()),
            wake: tokio::sync::Notify::new(),
            current: Mutex::new(None),
            restarts: Restarts::new(settings.restarts_per_minute),
            settings,
            closed: CancellationToken::new(),
            python_version,
            limits,
        })
    }

    pub fn model(&self) -> KernelModel {
        let connections = self.connections.lock().len();
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
            connections,
        }
    }

    pub fn session_id(&self) -> String {
        self.state.lock().session_id.clone()
    }

    /// A new connection to the kernel, its frames charged to `budget`;
    /// counted among the kernel's until it is dropped or cut off.
    pub fn connect(self: &Arc<Self>, budget: Arc<ConnectionBudget>) -> Connection {
        let id = self
            .next_connection
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let outbound = Arc::new(Outbound::new(Arc::clone(&budget)));
        self.connections.lock().insert(id, Arc::clone(&outbound));
        Connection::new(
            id,
            Arc::clone(self),
            outbound,
            budget,
            self.settings.messages_per_second,
            self.settings.max_queued_cells,
        )
    }

    /// Forgets a connection (it was dropped).
    pub(super) fn detach(&self, id: ReplyTo) {
        self.connections.lock().remove(&id);
    }

    /// An iopub frame, for every connection.
    fn publish(&self, frame: String) {
        self.send_to(EVERYONE, frame);
    }

    /// Queues a frame for its connection (or every one); a connection it
    /// takes past its budget is cut off: it closes, and is sent nothing more.
    fn send_to(&self, to: ReplyTo, frame: String) {
        let frame: Arc<str> = Arc::from(frame);
        let mut connections = self.connections.lock();
        let mut cut = Vec::new();
        for (&id, outbound) in connections.range(..) {
            if (to == EVERYONE || to == id)
                && let Err(why) = outbound.push(&frame)
            {
                tracing::info!(kernel = %self.id, connection = id, %why, "a Jupyter connection reads too slowly for what it asked; it is closed");
                cut.push(id);
            }
        }
        for id in cut {
            connections.remove(&id);
        }
    }

    fn set_state(&self, parent: Option<&Parent>, state: &'static str) {
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
    pub fn handle(&self, message: Incoming, from: &Connection) -> Option<Asked> {
        self.state.lock().last_activity = now_iso();
        let reply = from.id();
        let parent = Some(&message.parent);
        let answer = |channel: Channel, msg_type: &str, content: Value| {
            self.out.frame(channel, msg_type, parent, content)
        };
        match (message.channel, message.msg_type.as_str()) {
            (Channel::Shell, "execute_request") => self.enqueue(message, from),
            (Channel::Shell | Channel::Control, "kernel_info_request") => {
                // Clients take its busy and idle as the sign that iopub is
                // connected.
                let info = super::message::kernel_info(self.language, &self.python_version);
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
                let restart = message.content.restart.unwrap_or(false);
                // Restarts asked for during one join it; too many are refused.
                let asked = if restart {
                    match self.restarts.begin() {
                        Begin::Lead(ticket) => Some(Asked::Restart(ticket)),
                        Begin::Join(_) => None,
                        Begin::Refused(why) => {
                            tracing::info!(kernel = %self.id, %why, "a restart is refused");
                            let mut content = error_content("RateLimited", &why.to_string());
                            content["restart"] = true.into();
                            self.send_to(
                                reply,
                                answer(Channel::Control, "shutdown_reply", content),
                            );
                            return None;
                        }
                    }
                } else {
                    Some(Asked::Shutdown)
                };
                let content = json!({"status": "ok", "restart": restart});
                self.send_to(
                    reply,
                    answer(Channel::Control, "shutdown_reply", content.clone()),
                );
                // JupyterLab looks for it on iopub too.
                self.publish(answer(Channel::Iopub, "shutdown_reply", content));
                return asked;
            }
            (Channel::Shell, other) => {
                let content = match other {
                    "complete_request" => {
                        let cursor = message.content.cursor_pos.unwrap_or(0);
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
    /// Queues a cell, its code charged to the sender's budget; one past the
    /// budget or `jupyter.max_queued_cells` is refused (`ResourceExhausted`)
    /// rather than held.
    fn enqueue(&self, request: Incoming, from: &Connection) {
        let generation = self.state.lock().generation;
        let held = match from
            .budget()
            .charge(request.content.code.len(), Share::Half)
        {
            Ok(held) => held,
            Err(why) => {
                tracing::info!(kernel = %self.id, %why, "a cell is refused");
                self.refuse(&request, from.id(), "ResourceExhausted", &why.to_string());
                return;
            }
        };
        let mut queue = self.queue.lock();
        let most = self.settings.max_queued_cells;
        if queue.len() >= most {
            drop(queue);
            tracing::info!(kernel = %self.id, "too many cells queued; one is refused");
            self.refuse(
                &request,
                from.id(),
                "ResourceExhausted",
                &format!(
                    "this kernel has {most} cells waiting to run, its most (jupyter.max_queued_cells)"
                ),
            );
            return;
        }
        queue.push_back(Job {
            request,
            reply: from.id(),
            generation,
            _held: held,
        });
        drop(queue);
        self.wake.notify_one();
    }

    /// Answers a request with an error reply (Jupyter's `status: error`,
    /// with `ename`, `evalue`, `traceback`) instead of doing it; a message
    /// that is not a request gets nothing.
    pub(super) fn refuse(&self, request: &Incoming, to: ReplyTo, ename: &str, evalue: &str) {
        let Some(kind) = request.msg_type.strip_suffix("_request") else {
            return;
        };
        let mut content = error_content(ename, evalue);
        if kind == "execute" {
            content["execution_count"] = self.state.lock().execution_count.into();
        }
        let parent = Some(&request.parent);
        let channel = match request.channel {
            Channel::Control => Channel::Control,
            _ => Channel::Shell,
        };
        self.reply_between_statuses(
            parent,
            to,
            self.out
                .frame(channel, &format!("{kind}_reply"), parent, content),
        );
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
            if failed && job.request.content.stop_on_error.unwrap_or(true) {
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
        let parent = Some(&job.request.parent);
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
    fn reply_between_statuses(&self, parent: Option<&Parent>, to: ReplyTo, frame: String) {
        self.publish(self.out.status(parent, "busy"));
        self.send_to(to, frame);
        self.publish(self.out.status(parent, "idle"));
    }

    /// Runs one cell; `true` if it ended in an error.
    async fn execute(&self, code_api: &CodeApi, job: &Job) -> bool {
        let request = &job.request;
        let parent = Some(&request.parent);
        let code = request.content.code.clone();
        let silent = request.content.silent.unwrap_or(false);
        let store_history = request.content.store_history.unwrap_or(!silent);
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
        parent: Option<&Parent>,
        count: u64,
        silent: bool,
    ) -> Result<RunOutcome, ExecError> {
        let request = RunRequest {
            code,
            language: self.language,
            limits: self.limits.clone(),
            env: Vec::new(),
            cwd: None,
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

    fn publish_event(&self, event: RunEvent, parent: Option<&Parent>, count: u64, silent: bool) {
        let event = match event {
            // runcell's own table data is for its notebook only.
            RunEvent::Result {
                mut data,
                main,
                metadata,
                ts_ms,
            } => {
                data.remove(crate::sandbox::TABLE_DATA_MIME);
                RunEvent::Result {
                    data,
                    main,
                    metadata,
                    ts_ms,
                }
            }
            other => other,
        };
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
                data,
                main: true,
                metadata,
                ..
            } if !silent => self.out.frame(
                Channel::Iopub,
                "execute_result",
                parent,
                json!({"data": data, "metadata": metadata, "execution_count": count}),
            ),
            RunEvent::Result {
                data,
                main: false,
                metadata,
                ..
            } => self.out.frame(
                Channel::Iopub,
                "display_data",
                parent,
                json!({"data": data, "metadata": metadata, "transient": {}}),
            ),
            // The outcome's error is published once, at the end.
            RunEvent::Result { .. } | RunEvent::Error { .. } => return,
        };
        self.publish(frame);
    }

    /// Starts the kernel afresh in a new session of its key's (variables
    /// are lost); cells queued before are aborted. Only the leader of a
    /// restart ([`Restarts::begin`]) calls this, so one runs at a time.
    pub async fn restart(&self, code_api: &CodeApi) -> Result<(), CodeApiError> {
        let old = {
            let mut state = self.state.lock();
            state.generation += 1;
            state.session_id.clone()
        };
        self.interrupt();
        // Recorded, not published: jupyter_server's sockets say
        // `restarting` only for its auto-restarter (a kernel that died), and
        // JupyterLab takes that status as "the kernel appears to have died";
        // a restart someone asked for shows `starting`, then `idle`.
        {
            let mut state = self.state.lock();
            state.execution_state = "restarting";
            state.last_activity = now_iso();
        }
        // Closed first: the new session counts against the key's sessions.
        if let Err(e) = code_api.delete_session(&self.owner, &old).await {
            tracing::debug!(%e, "the old session of a restarted kernel was gone");
        }
        match code_api
            .create_session(&self.owner, self.language, None)
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

/// An error reply's content.
fn error_content(ename: &str, evalue: &str) -> Value {
    json!({"status": "error", "ename": ename, "evalue": evalue,
        "traceback": [format!("{ename}: {evalue}")]})
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
