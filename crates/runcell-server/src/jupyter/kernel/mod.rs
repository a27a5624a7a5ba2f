//! One gateway kernel: a sandbox session of its key's, the cells sent to it
//! run one at a time in order (as a Jupyter kernel runs them), and what
//! they print published on iopub to every connection.
//!
//! The messages are runcell's own, made from the run's events, never the
//! sandbox's bytes passed through: a cell's output is bounded, its time
//! limited and its errors named by the same code as every other run.

use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use parking_lot::Mutex;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::budget::{Charge, ConnectionBudget, Share};
use super::message::{Incoming, JupyterChannel, Outgoing, Parent, now_iso};
use super::outbound::Outbound;
use super::restarts::{Begin, Restarts, Ticket};

mod execution;

use crate::auth::Caller;
use crate::code_api::CodeApi;
use execution::error_content;
use runcell_sandbox::{HistoryAccess, HistoryQuery, KernelRequest, Language, Limits};

/// What a client asked of the kernel that the gateway does.
#[derive(Debug)]
pub enum Asked {
    /// A restart this client leads (others asked for meanwhile join it).
    Restart(Ticket),
    Shutdown,
    /// A question for the session's kernel, answered in the background
    /// ([`JupyterKernel::answer`]).
    Question(Box<Question>),
}

/// A request the session's kernel answers (completion, inspection, whether
/// code is complete, history), with what the gateway answers if it cannot.
#[derive(Debug)]
pub struct Question {
    request: KernelRequest,
    parent: Parent,
    reply: ReplyTo,
    /// The gateway's own answer: when the kernel does not answer within
    /// [`ANSWER_WAIT`], or cannot be asked.
    fallback: Value,
    /// Counted among the kernel's questions until answered.
    _pending: Pending,
}

/// How long a client's question waits for the kernel (which answers after
/// a cell it is running, and may have to start first) before the gateway
/// answers it itself.
const ANSWER_WAIT: Duration = Duration::from_secs(10);
/// Questions a kernel may have waiting for its answer; more are answered
/// by the gateway at once.
const MAX_QUESTIONS: usize = 8;

/// One of a kernel's questions waiting for its answer.
#[derive(Debug)]
struct Pending(Arc<AtomicUsize>);

impl Pending {
    fn take(count: &Arc<AtomicUsize>) -> Option<Self> {
        count
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < MAX_QUESTIONS).then_some(n + 1)
            })
            .ok()
            .map(|_| Self(Arc::clone(count)))
    }
}

impl Drop for Pending {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
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

pub struct JupyterKernel {
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
    /// Questions waiting for the session's kernel.
    questions: Arc<AtomicUsize>,
}

impl std::fmt::Debug for JupyterKernel {
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

impl JupyterKernel {
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
            questions: Arc::new(AtomicUsize::new(0)),
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

    /// Counts a connection among the kernel's, its frames queued on
    /// `outbound`, until it is [detached](Self::detach); its id.
    pub(super) fn attach(&self, outbound: Arc<Outbound>) -> ReplyTo {
        let id = self.next_connection.fetch_add(1, Ordering::Relaxed);
        self.connections.lock().insert(id, outbound);
        id
    }

    pub(super) fn settings(&self) -> &KernelSettings {
        &self.settings
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
    pub fn handle(
        &self,
        message: Incoming,
        reply: ReplyTo,
        budget: &Arc<ConnectionBudget>,
    ) -> Option<Asked> {
        self.state.lock().last_activity = now_iso();
        let parent = Some(&message.parent);
        let answer = |channel: JupyterChannel, msg_type: &str, content: Value| {
            self.out.frame(channel, msg_type, parent, content)
        };
        match (message.channel, message.msg_type.as_str()) {
            (JupyterChannel::Shell, "execute_request") => self.enqueue(message, reply, budget),
            (JupyterChannel::Shell | JupyterChannel::Control, "kernel_info_request") => {
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
                    answer(
                        JupyterChannel::Control,
                        "interrupt_reply",
                        json!({"status": "ok"}),
                    ),
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
                                answer(JupyterChannel::Control, "shutdown_reply", content),
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
                    answer(JupyterChannel::Control, "shutdown_reply", content.clone()),
                );
                // JupyterLab looks for it on iopub too.
                self.publish(answer(JupyterChannel::Iopub, "shutdown_reply", content));
                return asked;
            }
            (JupyterChannel::Shell, other) => {
                let content = match other {
                    "complete_request"
                    | "inspect_request"
                    | "is_complete_request"
                    | "history_request" => {
                        let fallback = fallback_answer(&message);
                        let asked = kernel_request(&message);
                        let pending = Pending::take(&self.questions);
                        match (asked, pending) {
                            (Some(request), Some(pending)) => {
                                return Some(Asked::Question(Box::new(Question {
                                    request,
                                    parent: message.parent,
                                    reply,
                                    fallback,
                                    _pending: pending,
                                })));
                            }
                            _ => fallback,
                        }
                    }
                    "comm_info_request" => json!({"status": "ok", "comms": {}}),
                    _ => {
                        tracing::debug!(msg_type = other, "an unknown shell message is ignored");
                        return None;
                    }
                };
                let reply_type = other.replace("_request", "_reply");
                self.reply_between_statuses(
                    parent,
                    reply,
                    answer(JupyterChannel::Shell, &reply_type, content),
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

impl JupyterKernel {
    /// Asks the session's kernel a client's question and sends its reply
    /// to the client, the kernel's content as it gave it; the gateway's
    /// own answer if the kernel does not answer within [`ANSWER_WAIT`] or
    /// cannot be asked (a backend without kernels to ask, a restart).
    pub async fn answer(&self, code_api: &CodeApi, question: Box<Question>) {
        let Question {
            request,
            parent,
            reply,
            fallback,
            _pending,
        } = *question;
        let reply_type = request.msg_type().replace("_request", "_reply");
        let session = self.session_id();
        let asked = code_api.kernel_request(&self.owner, &session, self.language, request);
        let content = match tokio::time::timeout(ANSWER_WAIT, asked).await {
            Ok(Ok(content)) => Value::Object(content),
            Ok(Err(e)) => {
                tracing::debug!(kernel = %self.id, %e, "the kernel could not answer; the gateway does");
                fallback
            }
            Err(_) => {
                tracing::debug!(kernel = %self.id, "the kernel did not answer in time; the gateway does");
                fallback
            }
        };
        let parent = Some(&parent);
        let frame = self
            .out
            .frame(JupyterChannel::Shell, &reply_type, parent, content);
        // While a cell runs the kernel is busy: an idle now would be a lie.
        if self.state.lock().execution_state == "busy" {
            self.send_to(reply, frame);
        } else {
            self.reply_between_statuses(parent, reply, frame);
        }
    }

    /// Queues a cell, its code charged to the sender's budget; one past the
    /// budget or `jupyter.max_queued_cells` is refused (`ResourceExhausted`)
    /// rather than held.
    fn enqueue(&self, request: Incoming, reply: ReplyTo, budget: &Arc<ConnectionBudget>) {
        let generation = self.state.lock().generation;
        let held = match budget.charge(request.content.code.len(), Share::Half) {
            Ok(held) => held,
            Err(why) => {
                tracing::info!(kernel = %self.id, %why, "a cell is refused");
                self.refuse(&request, reply, "ResourceExhausted", &why.to_string());
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
                reply,
                "ResourceExhausted",
                &format!(
                    "this kernel has {most} cells waiting to run, its most (jupyter.max_queued_cells)"
                ),
            );
            return;
        }
        queue.push_back(Job {
            request,
            reply,
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
            JupyterChannel::Control => JupyterChannel::Control,
            _ => JupyterChannel::Shell,
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

    /// A reply with `busy` before it and `idle` after, on iopub, as ipykernel
    /// sends every shell reply that runs no code.
    fn reply_between_statuses(&self, parent: Option<&Parent>, to: ReplyTo, frame: String) {
        self.publish(self.out.status(parent, "busy"));
        self.send_to(to, frame);
        self.publish(self.out.status(parent, "idle"));
    }
}

/// The request a client's question is for the session's kernel; `None`
/// for a question the kernel is not asked (a history access type that
/// Jupyter does not have).
fn kernel_request(message: &Incoming) -> Option<KernelRequest> {
    let content = &message.content;
    let code = content.code.clone();
    // Jupyter's default cursor is the end of the code, in characters.
    let cursor_pos = content
        .cursor_pos
        .and_then(|c| usize::try_from(c).ok())
        .unwrap_or_else(|| code.chars().count());
    Some(match message.msg_type.as_str() {
        "complete_request" => KernelRequest::Complete { code, cursor_pos },
        "inspect_request" => KernelRequest::Inspect {
            code,
            cursor_pos,
            detail_level: u8::from(content.detail_level.unwrap_or(0) > 0),
        },
        "is_complete_request" => KernelRequest::IsComplete { code },
        "history_request" => {
            let history = &content.history;
            let small = |n: Option<i64>, default: i32| {
                n.map_or(default, |n| {
                    i32::try_from(n.clamp(-MAX_HISTORY, MAX_HISTORY)).unwrap_or(default)
                })
            };
            let access = match history.access.as_deref() {
                Some("tail") => HistoryAccess::Tail {
                    n: small(history.n, 10).clamp(0, 1000),
                },
                Some("range") => HistoryAccess::Range {
                    session: history.session.map(|s| small(Some(s), 0)),
                    start: small(history.start, 0),
                    stop: small(history.stop, 0),
                },
                Some("search") => HistoryAccess::Search {
                    pattern: history.pattern.clone().unwrap_or_else(|| "*".into()),
                    unique: history.unique.unwrap_or(false),
                    n: small(history.n, 10).clamp(0, 1000),
                },
                _ => return None,
            };
            KernelRequest::History(HistoryQuery {
                output: history.output.unwrap_or(false),
                raw: history.raw.unwrap_or(false),
                access,
            })
        }
        _ => return None,
    })
}

/// The largest line number or count a history request may name.
const MAX_HISTORY: i64 = 1_000_000;

/// What the gateway answers a question itself: nothing to complete, nothing
/// found, code complete, no history (what it answered before kernels were
/// asked).
fn fallback_answer(message: &Incoming) -> Value {
    match message.msg_type.as_str() {
        "complete_request" => {
            let cursor = message.content.cursor_pos.unwrap_or(0);
            json!({"status": "ok", "matches": [], "cursor_start": cursor,
                "cursor_end": cursor, "metadata": {}})
        }
        "inspect_request" => json!({"status": "ok", "found": false, "data": {}, "metadata": {}}),
        "is_complete_request" => json!({"status": "complete"}),
        _ => json!({"status": "ok", "history": []}),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn incoming(msg_type: &str, content: &Value) -> Incoming {
        let frame = json!({
            "header": {"msg_id": "m", "msg_type": msg_type, "session": "s"},
            "content": content,
            "channel": "shell",
        });
        Incoming::parse(&frame.to_string()).expect("a message")
    }

    /// A client's question → what the kernel is asked.
    #[test]
    fn a_clients_question_becomes_the_kernels_request() {
        let cases = [
            (
                "complete_request",
                json!({"code": "os.pa", "cursor_pos": 3}),
                Some(KernelRequest::Complete {
                    code: "os.pa".into(),
                    cursor_pos: 3,
                }),
            ),
            // No cursor: the end of the code, in characters.
            (
                "complete_request",
                json!({"code": "é.pa"}),
                Some(KernelRequest::Complete {
                    code: "é.pa".into(),
                    cursor_pos: 4,
                }),
            ),
            (
                "inspect_request",
                json!({"code": "zip", "cursor_pos": 3, "detail_level": 1}),
                Some(KernelRequest::Inspect {
                    code: "zip".into(),
                    cursor_pos: 3,
                    detail_level: 1,
                }),
            ),
            (
                "inspect_request",
                json!({"code": "zip", "cursor_pos": 3, "detail_level": 9}),
                Some(KernelRequest::Inspect {
                    code: "zip".into(),
                    cursor_pos: 3,
                    detail_level: 1,
                }),
            ),
            (
                "is_complete_request",
                json!({"code": "for i in x:"}),
                Some(KernelRequest::IsComplete {
                    code: "for i in x:".into(),
                }),
            ),
            (
                "history_request",
                json!({"hist_access_type": "tail", "n": 5000, "output": true, "raw": true}),
                Some(KernelRequest::History(HistoryQuery {
                    output: true,
                    raw: true,
                    access: HistoryAccess::Tail { n: 1000 },
                })),
            ),
            (
                "history_request",
                json!({"hist_access_type": "range", "session": -1, "start": 1, "stop": 99999999999_i64}),
                Some(KernelRequest::History(HistoryQuery {
                    output: false,
                    raw: false,
                    access: HistoryAccess::Range {
                        session: Some(-1),
                        start: 1,
                        stop: 1_000_000,
                    },
                })),
            ),
            (
                "history_request",
                json!({"hist_access_type": "search", "pattern": "a*", "unique": true}),
                Some(KernelRequest::History(HistoryQuery {
                    output: false,
                    raw: false,
                    access: HistoryAccess::Search {
                        pattern: "a*".into(),
                        unique: true,
                        n: 10,
                    },
                })),
            ),
            ("history_request", json!({"hist_access_type": "all"}), None),
            ("comm_info_request", json!({}), None),
        ];
        for (msg_type, content, want) in cases {
            let message = incoming(msg_type, &content);
            assert_eq!(kernel_request(&message), want, "{msg_type} {content}");
        }
    }

    #[test]
    fn the_gateways_own_answers_are_empty_but_well_formed() {
        let cases = [
            (
                "complete_request",
                json!({"code": "ab", "cursor_pos": 2}),
                json!({"status": "ok", "matches": [], "cursor_start": 2, "cursor_end": 2, "metadata": {}}),
            ),
            (
                "inspect_request",
                json!({"code": "ab"}),
                json!({"status": "ok", "found": false, "data": {}, "metadata": {}}),
            ),
            (
                "is_complete_request",
                json!({"code": "ab"}),
                json!({"status": "complete"}),
            ),
            (
                "history_request",
                json!({"hist_access_type": "tail"}),
                json!({"status": "ok", "history": []}),
            ),
        ];
        for (msg_type, content, want) in cases {
            assert_eq!(
                fallback_answer(&incoming(msg_type, &content)),
                want,
                "{msg_type}"
            );
        }
    }

    #[test]
    fn a_kernel_has_at_most_its_share_of_questions_waiting() {
        let count = Arc::new(AtomicUsize::new(0));
        let mut held: Vec<Pending> = (0..MAX_QUESTIONS)
            .map(|_| Pending::take(&count).expect("room"))
            .collect();
        assert!(Pending::take(&count).is_none());
        held.pop();
        assert_eq!(count.load(Ordering::Acquire), MAX_QUESTIONS - 1);
        assert!(Pending::take(&count).is_some());
        drop(held);
        assert_eq!(count.load(Ordering::Acquire), 0);
    }
}
