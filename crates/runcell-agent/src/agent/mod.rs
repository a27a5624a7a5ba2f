//! The notebook agent: a question becomes a code cell (the model writes a
//! program), a result cell (the program runs in the session's kernel) and an
//! explanation cell (the model says what it means). A failed program goes
//! back to the model with its error, a bounded number of times; a sandbox
//! that could not run it at all ends the turn with that error.
//!
//! Plain Rust: it publishes events to a [`SessionLog`] and knows nothing
//! of HTTP or WebSockets.

mod ahead;
pub mod answered;
mod ask;
mod code;
mod conversation;
mod execute;
mod explain;
mod fix_hints;
pub mod grounding;
mod install;
mod kernels;
mod look;
mod model;
mod profile;
pub mod prompt;
mod publish;
mod repair;
mod runner;
mod tables;

use std::sync::Arc;
use std::time::{Duration, Instant};

use runcell_protocol::notebook::Notebook;
use runcell_protocol::{CellError, CellId, EventBody, TurnId, TurnKind, TurnStatus};
use tokio_util::sync::CancellationToken;

use self::code::publish_complete;
use self::execute::{Program, Ran, RunEnd, run_into_cell};
pub use self::kernels::{BrowserOffer, FilesError, HeldKernelInfo, KernelClose, Kernels};
pub use self::prompt::SYSTEM_PROMPT;
pub use self::runner::{TurnRefusal, TurnRunner, parse_language};
use crate::highlight::Highlighter;
use crate::session::SessionLog;
use runcell_llm::Llm;
use runcell_sandbox::{Language, Limits};

/// What a turn is asked to do.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TurnRequest {
    /// A question for the model; `alternative_to` makes it another version
    /// of an earlier question (an edit, a regenerate), on a branch of its own.
    Ask {
        text: String,
        model: Option<String>,
        alternative_to: Option<TurnId>,
    },
    /// Code to run as written, with no model.
    Run {
        code: String,
        language: Language,
        source: Option<CellId>,
    },
    /// "Re-run all": a fresh kernel, then the code cells that stood, in order.
    RerunAll,
}

#[derive(Clone, Debug)]
pub struct AgentSettings {
    /// The longest model reply, in tokens.
    pub max_tokens: u32,
    /// The longest one model reply may take.
    pub answer_timeout: Duration,
    /// Fixes tried after a failed program (so `1 + max_fixes` attempts).
    pub max_fixes: u32,
    /// The model's context window, in tokens, for the conversation memory.
    pub context_tokens: u32,
    /// Limits for each program run.
    pub limits: Limits,
    /// A program that fails for want of a module gets its project
    /// installed (`%pip install`) and runs again: sessions can install
    /// packages.
    pub install_missing: bool,
}

impl Default for AgentSettings {
    fn default() -> Self {
        Self {
            max_tokens: 1024,
            answer_timeout: Duration::from_secs(600),
            max_fixes: 2,
            context_tokens: 8192,
            limits: Limits::default(),
            install_missing: false,
        }
    }
}

pub struct Agent {
    llm: Arc<dyn Llm>,
    kernels: Kernels,
    highlighter: Highlighter,
    settings: AgentSettings,
    /// Each session's last conversation as sent, which its next question
    /// extends.
    conversations: conversation::Conversations,
    /// When each session's conversation was last read ahead.
    read_ahead: ahead::ReadAhead,
}

/// How the steps of a turn ended.
struct Ended {
    status: TurnStatus,
    final_cell: Option<CellId>,
}

impl Agent {
    pub fn new(llm: Arc<dyn Llm>, kernels: Kernels, settings: AgentSettings) -> Self {
        Self {
            llm,
            kernels,
            highlighter: Highlighter::new(),
            settings,
            conversations: conversation::Conversations::default(),
            read_ahead: ahead::ReadAhead::default(),
        }
    }

    pub fn llm(&self) -> &Arc<dyn Llm> {
        &self.llm
    }

    /// Runs one turn on the session's log (the [`TurnRunner`] runs a
    /// session's turns one after another); a turn cancelled while it waits
    /// still records that it was stopped, so that every turn asked for has
    /// its `turn_finished`.
    #[tracing::instrument(name = "turn", skip_all, fields(session.id = %session.id(), turn = turn.0, llm.backend = self.llm.backend()))]
    pub async fn run_turn(
        &self,
        session: &SessionLog,
        turn: TurnId,
        request: TurnRequest,
        cancel: CancellationToken,
    ) {
        let started = Instant::now();
        let (turn_kind, alternative_to) = match &request {
            TurnRequest::Ask { alternative_to, .. } => (TurnKind::Ask, *alternative_to),
            TurnRequest::Run { .. } => (TurnKind::Run, None),
            TurnRequest::RerunAll => (TurnKind::Rerun, None),
        };
        session.publish(EventBody::TurnStarted {
            turn,
            turn_kind,
            alternative_to,
        });
        // The question shows at once, also while a kernel is rebuilt for it.
        if let TurnRequest::Ask { text, .. } = &request
            && !cancel.is_cancelled()
        {
            session.publish(EventBody::UserMessage {
                cell_id: session.next_cell_id(),
                text: text.clone(),
                markup: None,
            });
        }
        // The history as this turn sees it: the branch it is on.
        let mut history = Notebook::from_events(&session.events_after(0));
        if turn_kind != TurnKind::Rerun && history.kernel_off_branch() && !cancel.is_cancelled() {
            self.restore_branch(session, &history, &cancel).await;
            history = Notebook::from_events(&session.events_after(0));
        }
        let ended = if cancel.is_cancelled() {
            Ended {
                status: TurnStatus::Cancelled,
                final_cell: None,
            }
        } else {
            match request {
                TurnRequest::Ask { text, model, .. } => {
                    self.ask(session, &history, text, model, &cancel).await
                }
                TurnRequest::Run {
                    code,
                    language,
                    source,
                } => {
                    self.run_code(session, code, language, source, &cancel)
                        .await
                }
                TurnRequest::RerunAll => self.rerun_all(session, &history, &cancel).await,
            }
        };
        let elapsed_ms = runcell_core::clock::millis(started.elapsed());
        session.publish(EventBody::TurnFinished {
            turn,
            status: ended.status,
            elapsed_ms,
            final_cell: ended.final_cell,
        });
        tracing::info!(duration_ms = elapsed_ms, status = ?ended.status, "turn finished");
    }

    /// The notebook sessions' kernels.
    pub fn kernels(&self) -> &Kernels {
        &self.kernels
    }

    /// Closes the session's kernel (the session was deleted).
    pub async fn drop_kernel(&self, session: runcell_protocol::SessionId) {
        self.conversations.forget(session);
        self.kernels.forget(session).await;
    }

    /// "Re-run all": the session's kernel is replaced by a fresh one, which
    /// runs each program that stood, as a code cell (pointing at the one it
    /// copies) and its result; the first failure or a Stop ends it.
    async fn rerun_all(
        &self,
        session: &SessionLog,
        history: &Notebook,
        cancel: &CancellationToken,
    ) -> Ended {
        self.kernels.reset(session.id()).await;
        let mut ended = Ended {
            status: TurnStatus::Ok,
            final_cell: None,
        };
        for step in history.rerun_plan() {
            if cancel.is_cancelled() {
                ended.status = TurnStatus::Cancelled;
                break;
            }
            let Ok(language) = parse_language(&step.language) else {
                tracing::warn!(language = %step.language, "a stored cell's language is unknown; skipped");
                continue;
            };
            ended = self
                .run_code(session, step.code, language, Some(step.source), cancel)
                .await;
            if ended.status != TurnStatus::Ok {
                break;
            }
        }
        ended
    }

    /// Rebuilds the kernel for the branch the turn is on, when it holds
    /// another branch's variables: a fresh kernel re-runs the branch's
    /// programs that stood, as "Re-run all" does, without showing their
    /// output again; the turn says how many re-ran and which failed.
    async fn restore_branch(
        &self,
        session: &SessionLog,
        history: &Notebook,
        cancel: &CancellationToken,
    ) {
        self.kernels.reset(session.id()).await;
        let plan = history.rerun_plan();
        let total = plan.len();
        let mut programs = 0;
        let mut error = None;
        for (n, step) in plan.into_iter().enumerate() {
            if cancel.is_cancelled() {
                break;
            }
            let Ok(language) = parse_language(&step.language) else {
                continue;
            };
            let request = runcell_sandbox::RunRequest {
                code: step.code,
                language,
                limits: self.settings.limits.clone(),
                env: Vec::new(),
                cwd: None,
            };
            // Output is not shown again; the channel only has to be read.
            let (events, mut drain) = tokio::sync::mpsc::channel(64);
            let drained = tokio::spawn(async move { while drain.recv().await.is_some() {} });
            let run = self
                .kernels
                .run(session.id(), session.owner(), &request, &events, cancel)
                .await;
            drop(events);
            let _ = drained.await;
            let failure = match run {
                Ok(run) => run
                    .outcome
                    .error
                    .map(|e| format!("{}: {}", e.name, e.value)),
                Err(e) => Some(e.to_string()),
            };
            match failure {
                None => programs += 1,
                Some(why) => {
                    error = Some(CellError {
                        code: "restore_failed".into(),
                        message: format!(
                            "Program {} of {total} of this branch failed when re-run ({}), so the variables it and later programs made are missing.",
                            n + 1,
                            why.chars().take(200).collect::<String>(),
                        ),
                    });
                    break;
                }
            }
        }
        tracing::info!(
            programs,
            total,
            failed = error.is_some(),
            "kernel rebuilt for a branch"
        );
        session.publish(EventBody::KernelRestored { programs, error });
    }

    /// "Edit & run": the code as the person wrote it, then its result.
    async fn run_code(
        &self,
        session: &SessionLog,
        code: String,
        language: Language,
        source: Option<CellId>,
        cancel: &CancellationToken,
    ) -> Ended {
        let (ran, cell) = self
            .run_shown(session, &code, language, source, None, cancel)
            .await;
        Ended {
            status: status_of(&ran),
            final_cell: Some(cell),
        }
    }

    /// `code` as a complete code cell (pointing at `source`, numbered
    /// `attempt`), then run into its result cell; the run and the code cell.
    async fn run_shown(
        &self,
        session: &SessionLog,
        code: &str,
        language: Language,
        source: Option<CellId>,
        attempt: Option<u32>,
        cancel: &CancellationToken,
    ) -> (Ran, CellId) {
        let cell = publish_complete(session, &self.highlighter, code, language.name(), source);
        let program = Program {
            code_cell: cell,
            attempt,
            language,
            code,
        };
        let ran = run_into_cell(
            &self.kernels,
            session,
            program,
            &self.settings.limits,
            cancel,
        )
        .await;
        (ran, cell)
    }
}

pub use runcell_protocol::UNGROUNDED;

fn status_of(ran: &Ran) -> TurnStatus {
    match ran.end {
        RunEnd::Ok => TurnStatus::Ok,
        RunEnd::Failed | RunEnd::Unavailable | RunEnd::Refused => TurnStatus::Error,
        RunEnd::Cancelled => TurnStatus::Cancelled,
    }
}
