//! The notebook agent: a question becomes a code cell (the model writes a
//! program), a result cell (the program runs in the session's kernel) and an
//! explanation cell (the model says what it means). A failed program goes
//! back to the model with its error, a bounded number of times; a sandbox
//! that could not run it at all ends the turn with that error.
//!
//! Plain Rust: it publishes events to a [`SessionChannel`] and knows nothing
//! of HTTP or WebSockets.

pub mod answered;
mod code;
mod execute;
mod fix_hints;
pub mod grounding;
mod kernels;
mod profile;
pub mod prompt;
mod runner;
mod tables;

use std::sync::Arc;
use std::time::{Duration, Instant};

use app::notebook::Notebook;
use app::protocol::{
    CellError, CellId, CellKind, CellStatus, EventBody, TurnId, TurnKind, TurnStatus,
};
use futures::StreamExt;
use tokio_util::sync::CancellationToken;

use self::code::{CodeCell, CodeChannel, publish_complete};
use self::execute::{Program, Ran, RunEnd, run_into_cell};
pub use self::kernels::{BrowserOffer, FilesError, Kernels};
pub use self::prompt::SYSTEM_PROMPT;
pub use self::runner::{TurnRefusal, TurnRunner, parse_language};
use crate::highlight::Highlighter;
use crate::llm::tools::{EXECUTE_CODE, ExecuteCode, execute_code_spec, program_of, result_message};
use crate::llm::{
    ChatRequest, Completion, FinishReason, Llm, LlmError, LlmEvent, Message, Requester,
    ResponseSchema, Role, ToolChoice,
};
use crate::sandbox::slots::Claim;
use crate::sandbox::{Language, Limits, validate_code};
use crate::session::SessionChannel;

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
}

impl Default for AgentSettings {
    fn default() -> Self {
        Self {
            max_tokens: 1024,
            answer_timeout: Duration::from_secs(600),
            max_fixes: 2,
            context_tokens: 8192,
            limits: Limits::default(),
        }
    }
}

pub struct Agent {
    llm: Arc<dyn Llm>,
    kernels: Kernels,
    highlighter: Highlighter,
    settings: AgentSettings,
}

/// How a model call ended.
enum Reply {
    Program {
        program: ExecuteCode,
        cell: CellId,
    },
    /// The model answered in words only.
    Prose(String),
    /// The reply should have been a program and none could be read from it
    /// (a malformed call, a program cut at the token limit).
    NoProgram,
    Cancelled,
    Failed,
}

/// Programs written again as they were, refused, that a turn asks for
/// once more without using one of its attempts.
const MAX_REPEATS: u32 = 2;

/// A program a turn tried: as compared, the attempt number shown, and what
/// came of it.
struct Tried {
    code: String,
    shown: u32,
    /// Its error's last line, or what was wrong with what it printed.
    verdict: String,
    /// What it hit, with the remedy, for a start over.
    hit: String,
    /// It failed (a repeat of it is refused).
    failed: bool,
}

/// A program as compared with earlier ones: its lines without trailing
/// blanks, comments or blank lines (a repeat with a new comment is a
/// repeat).
fn normalized(code: &str) -> String {
    code.lines()
        .map(|line| answered::without_comment(line).trim_end())
        .filter(|line| !line.trim().is_empty())
        .collect::<Vec<_>>()
        .join("\n")
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
        }
    }

    pub fn llm(&self) -> &Arc<dyn Llm> {
        &self.llm
    }

    /// Runs one turn. Turns in a session run one after another; a turn
    /// cancelled while it waits still records that it was stopped, so that
    /// every turn asked for has its `turn_finished`.
    #[tracing::instrument(name = "turn", skip_all, fields(session.id = %session.id(), turn = turn.0, llm.backend = self.llm.backend()))]
    pub async fn run_turn(
        &self,
        session: &SessionChannel,
        turn: TurnId,
        request: TurnRequest,
        cancel: CancellationToken,
    ) {
        let _turn = session.turn.lock().await;
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
    pub async fn drop_kernel(&self, session: crate::session::SessionId) {
        self.kernels.forget(session).await;
    }

    /// "Re-run all": the session's kernel is replaced by a fresh one, which
    /// runs each program that stood, as a code cell (pointing at the one it
    /// copies) and its result; the first failure or a Stop ends it.
    async fn rerun_all(
        &self,
        session: &SessionChannel,
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
        session: &SessionChannel,
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
            let request = crate::sandbox::RunRequest {
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
        session: &SessionChannel,
        code: String,
        language: Language,
        source: Option<CellId>,
        cancel: &CancellationToken,
    ) -> Ended {
        let cell = publish_complete(session, &self.highlighter, &code, language.name(), source);
        let program = Program {
            code_cell: cell,
            attempt: None,
            language,
            code: &code,
        };
        let ran = run_into_cell(
            &self.kernels,
            session,
            program,
            &self.settings.limits,
            cancel,
        )
        .await;
        Ended {
            status: status_of(&ran),
            final_cell: Some(cell),
        }
    }

    /// A question: code, result (and fixes), explanation.
    async fn ask(
        &self,
        session: &SessionChannel,
        history: &Notebook,
        text: String,
        model: Option<String>,
        cancel: &CancellationToken,
    ) -> Ended {
        let mut system = SYSTEM_PROMPT.to_string();
        if let Some(note) = self.kernels.environment_note(session.id()) {
            system = format!("{system} {note}");
        }
        if let Some(note) = prompt::chart_note(&text) {
            system = format!("{system} {note}");
            runcell_core::metrics::prompt_note("chart");
        }
        if let Some(note) = prompt::format_note(&text) {
            system = format!("{system} {note}");
            runcell_core::metrics::prompt_note(if note == prompt::FORMAT_NOTE {
                "format"
            } else {
                "form"
            });
        }
        // The person's files, so that "summarise the uploaded CSV" reads it.
        if let Some(note) = self.kernels.files_note(session.id(), session.owner()).await {
            system = format!("{system}\n\n{note}");
            // A table, and a question that multiplies its columns.
            if note.contains(profile::PANDAS_NOTE)
                && let Some(product) = profile::product_note(&text)
            {
                system = format!("{system} {product}");
                runcell_core::metrics::prompt_note("product");
            }
            // A table, and a question that says how to treat gaps.
            if note.contains(profile::PANDAS_NOTE)
                && let Some(missing) = prompt::missing_note(&text)
            {
                system = format!("{system} {missing}");
                runcell_core::metrics::prompt_note("missing");
            }
        }
        // The tables' real column names, for a KeyError's hint.
        let columns = self.kernels.table_columns(session.id());
        let budget = (self.settings.context_tokens as usize)
            .saturating_sub(self.settings.max_tokens as usize)
            .saturating_sub(prompt::approx_tokens(&system) + prompt::approx_tokens(&text) + 256);
        let channel = self.code_channel();
        let mut messages = vec![Message::system(system)];
        messages.extend(prompt::history(history, budget));
        // A rebuild for this branch that failed part-way lost variables too.
        let restore_failed = history
            .all_turns()
            .last()
            .and_then(|t| t.restored.as_ref())
            .is_some_and(|r| r.error.is_some());
        messages.push(Message::user(
            if history.kernel_lost().is_some() || restore_failed {
                // The earlier programs' variables are gone: say so, or the
                // model would use them.
                format!("{}\n\n{text}", prompt::KERNEL_LOST_NOTE)
            } else {
                text.clone()
            },
        ));

        let attempts = 1 + self.settings.max_fixes;
        // Where the question ends: the last attempt may start over from it.
        let asked = messages.len();
        // The question as asked, which a start over repeats.
        let question = messages
            .last()
            .map(|m| m.content.clone())
            .unwrap_or_default();
        let mut last: Option<(ExecuteCode, Ran, CellId)> = None;
        // The programs of this turn so far, to refuse one written again.
        let mut tried: Vec<Tried> = Vec::new();
        // Programs refused as repeats, asked again without using an attempt.
        let mut repeats = 0;
        let mut attempt = 0;
        // Whether the conversation ends with the last result and the
        // request to explain it (not so when the loop ended on a repeat or
        // on words without a program).
        let mut explain_asked = false;
        while attempt < attempts {
            attempt += 1;
            // A repeat is asked for again a little less greedily: at
            // temperature 0 the same conversation gives the same program.
            let temperature = if repeats > 0 { 0.5 } else { 0.0 };
            let shown = tried.len() as u32 + 1;
            let reply = self
                .write_code(
                    session,
                    &messages,
                    model.clone(),
                    shown,
                    temperature,
                    channel,
                    cancel,
                )
                .await;
            let (program, cell) = match reply {
                Reply::Program { program, cell } => (program, cell),
                Reply::Prose(prose) => {
                    // Words without a program are the answer only when no
                    // program of this turn was tried (after failed ones,
                    // "Iceland, Denmark, Switzerland" would be a conclusion
                    // nothing computed) and every figure they name is the
                    // question's: a number no program computed was made up
                    // ("x divided by 5 is 1676204", from memory and wrong).
                    // Such a reply is never shown: the model is asked for
                    // the program.
                    let invented = grounding::invented(&prose, &[text.as_str()], "");
                    if invented.is_empty() && tried.is_empty() {
                        self.publish_text(session, CellKind::Explanation, &prose);
                        return Ended {
                            status: TurnStatus::Ok,
                            final_cell: None,
                        };
                    }
                    // After a program that ran but looked unanswered (a
                    // doubt is a suspicion), words without figures of their
                    // own say it did answer: that program is explained.
                    if invented.is_empty() && last.as_ref().is_some_and(|(_, ran, _)| !ran.failed())
                    {
                        break;
                    }
                    tracing::info!(attempt, invented = ?invented, "a reply without a program answers what nothing computed");
                    runcell_core::metrics::explained("uncomputed");
                    if attempt < attempts {
                        messages.push(Message::assistant(prose));
                        messages.push(Message::user(if invented.is_empty() {
                            prompt::NO_PROGRAM_REQUEST.to_string()
                        } else {
                            prompt::compute_request(&invented)
                        }));
                        continue;
                    }
                    let text = match &last {
                        Some((program, ran, _)) => {
                            prompt::no_answer(tried.len(), &ran.report, &program.code, &columns)
                        }
                        None => prompt::UNCOMPUTED.to_string(),
                    };
                    self.publish_text(session, CellKind::Explanation, &text);
                    return Ended {
                        status: TurnStatus::Error,
                        final_cell: last.map(|(_, _, cell)| cell),
                    };
                }
                Reply::Cancelled => {
                    return Ended {
                        status: TurnStatus::Cancelled,
                        final_cell: last.map(|(_, _, cell)| cell),
                    };
                }
                // Asked again, like a program that failed.
                Reply::NoProgram if attempt < attempts => {
                    tracing::info!(attempt, "the reply held no program; asking again");
                    messages.push(Message::user(prompt::NO_PROGRAM_REQUEST));
                    continue;
                }
                Reply::NoProgram | Reply::Failed => {
                    return Ended {
                        status: TurnStatus::Error,
                        final_cell: last.map(|(_, _, cell)| cell),
                    };
                }
            };
            // The same program as an earlier attempt would fail the same
            // way (six of DABench's seven turns whose every attempt failed
            // sent one program three times): refused before it runs, and
            // asked for again without using an attempt, twice a turn at most.
            // Only a failed one: a program that ran and only looked
            // unanswered (printed nothing, as a definition does) may run
            // again, the model's way of saying it stands by it.
            if let Some(earlier) = tried
                .iter()
                .find(|t| t.failed && t.code == normalized(&program.code))
            {
                let problem = prompt::repeated_program(earlier.shown, &earlier.verdict);
                self.publish_refusal(session, cell, shown, "repeated_program", &problem);
                let hit = format!(
                    "{} (then the same program was written again, and not run)",
                    earlier.hit
                );
                tried.push(Tried {
                    code: normalized(&program.code),
                    shown,
                    verdict: earlier.verdict.clone(),
                    hit: earlier.hit.clone(),
                    failed: true,
                });
                runcell_core::metrics::unanswered("repeated_program", repeats < MAX_REPEATS);
                if repeats < MAX_REPEATS {
                    // Shown its failed program, a small model copies it:
                    // asked from the question again, told what it hit.
                    repeats += 1;
                    attempt -= 1;
                    messages.truncate(asked);
                    if let Some(asked) = messages.last_mut().filter(|m| m.role == Role::User) {
                        asked.content = prompt::start_over(&question, tried.len() as u32, &hit);
                    }
                    tracing::info!(attempt, "the same program again; asked anew");
                    continue;
                }
                if last.is_none() {
                    return Ended {
                        status: TurnStatus::Error,
                        final_cell: Some(cell),
                    };
                }
                break;
            }
            let ran = match checked_language(&program) {
                Ok(language) => {
                    let run = Program {
                        code_cell: cell,
                        attempt: Some(shown),
                        language,
                        code: &program.code,
                    };
                    run_into_cell(&self.kernels, session, run, &self.settings.limits, cancel).await
                }
                Err(problem) => {
                    self.publish_refusal(session, cell, shown, "invalid_code", &problem);
                    Ran {
                        report: problem,
                        end: RunEnd::Failed,
                    }
                }
            };
            if ran.end == RunEnd::Cancelled || cancel.is_cancelled() {
                return Ended {
                    status: TurnStatus::Cancelled,
                    final_cell: Some(cell),
                };
            }
            if ran.end == RunEnd::Unavailable {
                // The program never ran: the result cell says why, and
                // neither a fix nor an explanation would help.
                return Ended {
                    status: TurnStatus::Error,
                    final_cell: Some(cell),
                };
            }
            let retry = attempt < attempts;
            // Ran but did not answer: sent back like a failure.
            let doubt = (!ran.failed())
                .then(|| answered::doubt(&text, &program.language, &program.code, &ran.report))
                .flatten();
            tried.push(Tried {
                code: normalized(&program.code),
                shown,
                verdict: match doubt {
                    Some(doubt) if !ran.failed() => doubt.reason().replace('_', " "),
                    _ => prompt::verdict(&ran.report),
                },
                hit: match doubt {
                    Some(doubt) if !ran.failed() => doubt.note().to_string(),
                    _ => prompt::failure_summary(&ran.report, &program.code, &columns),
                },
                failed: ran.failed(),
            });
            if let Some(doubt) = doubt {
                tracing::info!(
                    attempt,
                    reason = doubt.reason(),
                    retry,
                    "the program ran but did not answer"
                );
                runcell_core::metrics::unanswered(doubt.reason(), retry);
            }
            if ran.failed()
                && let Some(hint) = fix_hints::which(&ran.report, &program.code, &columns)
            {
                runcell_core::metrics::fix_hint(hint);
            }
            let instruction = match (ran.failed(), doubt) {
                (true, _) if retry => prompt::fix_request(&ran.report, &program.code, &columns),
                (false, Some(doubt)) if retry => doubt.note().to_string(),
                _ => prompt::EXPLAIN_REQUEST.to_string(),
            };
            let again = retry && (ran.failed() || doubt.is_some());
            if again && attempt >= 2 && attempt + 1 == attempts {
                // A fix went wrong too. The small models copy the program in
                // front of them, mistake and all (the tuple of columns three
                // times in a row): the last attempt starts over from the
                // question, told what the failed attempts hit.
                let hit = match doubt {
                    Some(doubt) if !ran.failed() => doubt.note().to_string(),
                    _ => prompt::failure_summary(&ran.report, &program.code, &columns),
                };
                messages.truncate(asked);
                if let Some(asked) = messages.last_mut().filter(|m| m.role == Role::User) {
                    asked.content = prompt::start_over(&question, tried.len() as u32, &hit);
                }
                tracing::info!(attempt, "starting over from the question");
                last = Some((program, ran, cell));
                continue;
            }
            feed_back(&mut messages, &program, &ran.report, &instruction);
            last = Some((program, ran, cell));
            if !again {
                explain_asked = true;
                break;
            }
            tracing::info!(attempt, "asking for a fix");
        }
        let Some((program, ran, cell)) = last else {
            return Ended {
                status: TurnStatus::Error,
                final_cell: None,
            };
        };
        // Nothing computed an answer: the explanation says so and what was
        // tried, in the server's words. Asked to explain a failure, the
        // model concluded anyway ("does not follow a normal distribution…
        // the p-value is less than 0.05" after three failed programs).
        if ran.failed() {
            runcell_core::metrics::explained("unanswered");
            let statement = prompt::no_answer(tried.len(), &ran.report, &program.code, &columns);
            self.publish_text(session, CellKind::Explanation, &statement);
            return Ended {
                status: if cancel.is_cancelled() {
                    TurnStatus::Cancelled
                } else {
                    TurnStatus::Error
                },
                final_cell: Some(cell),
            };
        }
        // It ran and printed nothing, or only an empty value (a definition,
        // `x = 5`): what it printed is quoted, and nothing concluded.
        if matches!(
            answered::doubt(&text, &program.language, &program.code, &ran.report),
            Some(answered::Doubt::Nothing | answered::Doubt::Empty)
        ) {
            runcell_core::metrics::explained("unanswered");
            self.publish_text(
                session,
                CellKind::Explanation,
                &grounding::fallback(&ran.report),
            );
            return Ended {
                status: TurnStatus::Ok,
                final_cell: Some(cell),
            };
        }
        if !explain_asked {
            messages.truncate(asked);
            if let Some(asked) = messages.last_mut().filter(|m| m.role == Role::User) {
                asked.content.clone_from(&question);
            }
            feed_back(
                &mut messages,
                &program,
                &ran.report,
                prompt::EXPLAIN_REQUEST,
            );
        }
        let tools = match channel {
            CodeChannel::Tool => vec![execute_code_spec()],
            CodeChannel::Structured | CodeChannel::Fenced => Vec::new(),
        };
        let explained = self
            .explain(
                session,
                &text,
                &program.code,
                messages,
                tools,
                &ran,
                model,
                cancel,
            )
            .await;
        Ended {
            status: match explained {
                _ if cancel.is_cancelled() => TurnStatus::Cancelled,
                _ if ran.failed() => TurnStatus::Error,
                false => TurnStatus::Error,
                true => TurnStatus::Ok,
            },
            final_cell: Some(cell),
        }
    }

    /// How this backend hands over programs: tool calls where it has them
    /// (the embedded model then decodes under a grammar: 8 of 8 eval
    /// programs runnable against 5 of 8 left free), else a reply constrained
    /// to the tool's schema, else a fenced block in prose.
    fn code_channel(&self) -> CodeChannel {
        let capabilities = self.llm.capabilities();
        if capabilities.tools {
            CodeChannel::Tool
        } else if capabilities.structured_output {
            CodeChannel::Structured
        } else {
            CodeChannel::Fenced
        }
    }

    fn code_request(
        &self,
        messages: &[Message],
        model: Option<String>,
        channel: CodeChannel,
    ) -> ChatRequest {
        let spec = execute_code_spec();
        ChatRequest {
            model,
            messages: messages.to_vec(),
            tools: if channel == CodeChannel::Tool {
                vec![spec.clone()]
            } else {
                Vec::new()
            },
            tool_choice: if channel == CodeChannel::Tool {
                ToolChoice::Named(EXECUTE_CODE.into())
            } else {
                ToolChoice::Auto
            },
            response_schema: (channel == CodeChannel::Structured).then(|| ResponseSchema {
                name: spec.name.clone(),
                schema: spec.parameters.clone(),
            }),
            max_tokens: Some(self.settings.max_tokens),
            temperature: Some(0.0),
            requester: Requester::Unnamed,
        }
    }

    /// Whom the session's model requests are for: its owner when signed in,
    /// else the anonymous pages of its owner's address together (a shared
    /// model is fair between these).
    fn requester(&self, session: &SessionChannel) -> Requester {
        match self.kernels.claim_of(session.owner()) {
            Claim::Known => Requester::Known(session.owner().to_string()),
            Claim::Anonymous {
                client: Some(address),
            } => Requester::Anonymous(address.to_string()),
            Claim::Anonymous { client: None } => Requester::Anonymous("unknown".into()),
        }
    }

    /// Streams the model's program into a new code cell.
    #[allow(clippy::too_many_arguments)]
    async fn write_code(
        &self,
        session: &SessionChannel,
        messages: &[Message],
        model: Option<String>,
        attempt: u32,
        temperature: f32,
        channel: CodeChannel,
        cancel: &CancellationToken,
    ) -> Reply {
        let request = ChatRequest {
            requester: self.requester(session),
            temperature: Some(temperature),
            ..self.code_request(messages, model, channel)
        };
        let mut cell = CodeCell::new(session, &self.highlighter, attempt);
        let mut prose = String::new();
        let streamed = tokio::select! {
            biased;
            () = cancel.cancelled() => Err(None),
            () = tokio::time::sleep(self.settings.answer_timeout) => {
                Err(Some(LlmError::Timeout(self.settings.answer_timeout)))
            }
            outcome = self.stream(request, |event| match event {
                LlmEvent::Text(text) => {
                    prose.push_str(&text);
                    match channel {
                        CodeChannel::Tool => {}
                        CodeChannel::Structured | CodeChannel::Fenced => cell.push(channel, &text),
                    }
                }
                LlmEvent::ToolCallDelta { index: 0, arguments, .. } => cell.push(CodeChannel::Tool, &arguments),
                _ => {}
            }) => outcome.map_err(Some),
        };
        let completion = match streamed {
            Ok(completion) => completion,
            Err(None) => {
                cell.finish(CellStatus::Cancelled, None);
                return Reply::Cancelled;
            }
            Err(Some(e)) => {
                tracing::warn!(code = e.code(), error = %e, "the model failed");
                cell.finish(CellStatus::Error, Some(llm_cell_error(&e)));
                return Reply::Failed;
            }
        };
        let program = program_of(&completion).or_else(|| {
            (channel == CodeChannel::Structured)
                .then(|| ExecuteCode::parse(EXECUTE_CODE, &completion.text).ok())
                .flatten()
        });
        match program {
            Some(program) => {
                let id = cell.complete(&program);
                if completion.finish_reason == FinishReason::Length {
                    tracing::info!("the program was cut at the token limit");
                }
                Reply::Program { program, cell: id }
            }
            None if !prose.trim().is_empty() && !cell.is_open() => Reply::Prose(prose),
            None => {
                let error = LlmError::MalformedStream(
                    if completion.finish_reason == FinishReason::Length {
                        "the program was cut off at the answer's token limit".into()
                    } else {
                        "the model answered with neither text nor a program".into()
                    },
                );
                cell.finish(
                    CellStatus::Error,
                    Some(CellError {
                        code: "llm_no_answer".into(),
                        message: error.to_string(),
                    }),
                );
                Reply::NoProgram
            }
        }
    }

    /// Streams one model reply, handing each event to `on_event`.
    async fn stream(
        &self,
        request: ChatRequest,
        mut on_event: impl FnMut(LlmEvent),
    ) -> Result<Completion, LlmError> {
        let started = Instant::now();
        let mut first_token = None;
        let mut stream = self.llm.chat(request).await?;
        while let Some(item) = stream.next().await {
            match item? {
                LlmEvent::Done(completion) => {
                    tracing::info!(
                        ttft_ms = first_token.map(runcell_core::clock::millis),
                        prompt_tokens = completion.usage.map(|u| u.prompt_tokens),
                        completion_tokens = completion.usage.map(|u| u.completion_tokens),
                        "model answered"
                    );
                    return Ok(completion);
                }
                event => {
                    first_token.get_or_insert_with(|| started.elapsed());
                    on_event(event);
                }
            }
        }
        Err(LlmError::MalformedStream(
            "the stream ended before the answer did".into(),
        ))
    }

    /// Writes the explanation: it continues the conversation the program
    /// was written in (whose last message is the result with the request
    /// for an explanation). It streams a sentence at a time, each shown once
    /// it is complete and every figure it names is in the output, the
    /// question or the program; the first sentence that names another is
    /// held, with all after it. Such a draft is never shown as text that
    /// stands: the model is asked once more, saying which figures, and the
    /// cell starts over in place ([`EventBody::CellReset`]); if it still
    /// invents one, the grounded sentences of that draft (or a plain
    /// statement quoting the output) replace it. False if no explanation
    /// could be written at all.
    #[allow(clippy::too_many_arguments)]
    async fn explain(
        &self,
        session: &SessionChannel,
        question: &str,
        code: &str,
        mut messages: Vec<Message>,
        tools: Vec<crate::llm::ToolSpec>,
        ran: &Ran,
        model: Option<String>,
        cancel: &CancellationToken,
    ) -> bool {
        let sources = [ran.report.as_str(), question, code];
        let started = Instant::now();
        let cell_id = session.next_cell_id();
        session.publish(EventBody::CellStarted {
            cell_id,
            cell_kind: CellKind::Explanation,
            language: None,
            attempt: None,
            source: None,
        });
        let mut last_text = None;
        for round in 0..2 {
            let request = ChatRequest {
                model: model.clone(),
                messages: messages.clone(),
                tools: tools.clone(),
                tool_choice: ToolChoice::None,
                response_schema: None,
                max_tokens: Some(self.settings.max_tokens.min(400)),
                temperature: Some(0.0),
                requester: self.requester(session),
            };
            if round > 0 {
                session.publish(EventBody::CellReset { cell_id });
            }
            let mut gate = grounding::Gate::new(&sources, code);
            let outcome = self
                .stream_explanation(session, cell_id, &mut gate, request, cancel)
                .await;
            let text = match outcome {
                Ok(completion) if !completion.text.trim().is_empty() => completion.text,
                Ok(_) => {
                    self.finish_explanation(
                        session,
                        cell_id,
                        started,
                        CellStatus::Error,
                        Some(CellError {
                            code: "llm_no_answer".into(),
                            message: "the model wrote no explanation".into(),
                        }),
                    );
                    return false;
                }
                Err(None) => {
                    self.finish_explanation(session, cell_id, started, CellStatus::Cancelled, None);
                    return false;
                }
                Err(Some(e)) => {
                    tracing::warn!(code = e.code(), error = %e, "the model failed to explain");
                    self.finish_explanation(
                        session,
                        cell_id,
                        started,
                        CellStatus::Error,
                        Some(llm_cell_error(&e)),
                    );
                    return false;
                }
            };
            let invented = grounding::invented(&text, &sources, code);
            if invented.is_empty() {
                if let Some(rest) = gate.finish() {
                    session.publish(EventBody::CellDelta {
                        cell_id,
                        text: rest,
                        highlight: None,
                    });
                }
                publish_rendered(session, cell_id, &text);
                self.finish_explanation(session, cell_id, started, CellStatus::Ok, None);
                runcell_core::metrics::explained(if round == 0 {
                    "grounded"
                } else {
                    "regrounded"
                });
                return true;
            }
            tracing::info!(round, invented = ?invented, "the explanation names figures the output does not show; held");
            messages.push(Message::assistant(text.clone()));
            messages.push(Message::user(prompt::regrounding_request(&invented)));
            last_text = Some(text);
        }
        // What stands: the grounded sentences of the second explanation when
        // its first (the answer) is grounded, with the output quoted.
        let (text, pruned) = grounding::stand_in(last_text.as_deref(), &ran.report, &sources, code);
        runcell_core::metrics::explained(if pruned { "pruned" } else { "fallback" });
        session.publish(EventBody::CellReset { cell_id });
        session.publish(EventBody::CellDelta {
            cell_id,
            text: text.clone(),
            highlight: None,
        });
        publish_rendered(session, cell_id, &text);
        self.finish_explanation(session, cell_id, started, CellStatus::Ok, None);
        true
    }

    /// Streams the model's reply into the open explanation cell, through
    /// `gate`: only grounded sentences are shown while it streams.
    async fn stream_explanation(
        &self,
        session: &SessionChannel,
        cell_id: CellId,
        gate: &mut grounding::Gate<'_>,
        request: ChatRequest,
        cancel: &CancellationToken,
    ) -> Result<Completion, Option<LlmError>> {
        // A small model now and then ends its reply at once; asked again,
        // a little less greedily, it answers.
        let mut outcome = Err(None);
        for temperature in [0.0, 0.5] {
            let request = ChatRequest {
                temperature: Some(temperature),
                ..request.clone()
            };
            outcome = tokio::select! {
                biased;
                () = cancel.cancelled() => Err(None),
                () = tokio::time::sleep(self.settings.answer_timeout) => {
                    Err(Some(LlmError::Timeout(self.settings.answer_timeout)))
                }
                outcome = self.stream(request, |event| {
                    if let LlmEvent::Text(text) = event
                        && let Some(shown) = gate.push(&text)
                    {
                        session.publish(EventBody::CellDelta { cell_id, text: shown, highlight: None });
                    }
                }) => outcome.map_err(Some),
            };
            match &outcome {
                Ok(completion) if completion.text.trim().is_empty() => {
                    tracing::info!("the explanation came back empty; asking again");
                }
                _ => break,
            }
        }
        outcome
    }

    fn finish_explanation(
        &self,
        session: &SessionChannel,
        cell_id: CellId,
        started: Instant,
        status: CellStatus,
        error: Option<CellError>,
    ) {
        session.publish(EventBody::CellFinished {
            cell_id,
            status,
            elapsed_ms: runcell_core::clock::millis(started.elapsed()),
            error,
        });
    }

    /// A cell holding `text`, complete.
    fn publish_text(&self, session: &SessionChannel, kind: CellKind, text: &str) {
        publish_cell(session, kind, text, CellStatus::Ok, None);
    }

    /// A result cell saying why a program was not run.
    fn publish_refusal(
        &self,
        session: &SessionChannel,
        code_cell: CellId,
        attempt: u32,
        code: &str,
        problem: &str,
    ) {
        let cell_id = session.next_cell_id();
        session.publish(EventBody::CellStarted {
            cell_id,
            cell_kind: CellKind::Result,
            language: None,
            attempt: Some(attempt),
            source: Some(code_cell),
        });
        session.publish(EventBody::CellOutput {
            cell_id,
            output: app::protocol::Output::Error {
                name: "InvalidCode".into(),
                value: problem.to_string(),
                traceback: Vec::new(),
            },
        });
        session.publish(EventBody::CellFinished {
            cell_id,
            status: CellStatus::Error,
            elapsed_ms: 0,
            error: Some(CellError {
                code: code.into(),
                message: format!("not run: {problem}"),
            }),
        });
    }
}

/// The language to run `program` in, or why it cannot run. Syntax is
/// checked by the kernel itself, which compiles a cell before running it.
fn checked_language(program: &ExecuteCode) -> Result<Language, String> {
    let language: Language = program.language.parse().map_err(|_| {
        format!(
            "unknown language `{}`: runcell runs python, javascript, typescript, r, bash and c",
            program.language.chars().take(40).collect::<String>()
        )
    })?;
    if program.code.trim().is_empty() {
        return Err("the program is empty".into());
    }
    validate_code(&program.code).map_err(|e| e.to_string())?;
    Ok(language)
}

pub use app::protocol::UNGROUNDED;

/// A whole cell, `text` in one piece, finished as `status`.
fn publish_cell(
    session: &SessionChannel,
    kind: CellKind,
    text: &str,
    status: CellStatus,
    error: Option<CellError>,
) {
    let cell_id = session.next_cell_id();
    session.publish(EventBody::CellStarted {
        cell_id,
        cell_kind: kind,
        language: None,
        attempt: None,
        source: None,
    });
    session.publish(EventBody::CellDelta {
        cell_id,
        text: text.to_string(),
        highlight: None,
    });
    if kind == CellKind::Explanation {
        publish_rendered(session, cell_id, text);
    }
    session.publish(EventBody::CellFinished {
        cell_id,
        status,
        elapsed_ms: 0,
        error,
    });
}

/// An explanation's whole markup, rendered here, when it holds math: the
/// page's bundle has no LaTeX parser (it shows a formula as its source
/// while it streams), so the finished cell takes the server's MathML, as a
/// code cell takes the server's highlighting.
pub fn publish_rendered(session: &SessionChannel, cell_id: CellId, text: &str) {
    if let Some(highlight) = app::render::markdown::rendered_with_math(text) {
        session.publish(EventBody::CellDelta {
            cell_id,
            text: String::new(),
            highlight: Some(highlight),
        });
    }
}

/// Adds the attempt and its result, with what to do next, to the
/// conversation, laid out as [`prompt::answered_turn`] lays out earlier
/// turns, so that the next question's prompt starts with this one's.
fn feed_back(messages: &mut Vec<Message>, program: &ExecuteCode, report: &str, instruction: &str) {
    messages.push(prompt::program_message(&program.language, &program.code));
    messages.push(Message::user(result_message(report, instruction)));
}

fn status_of(ran: &Ran) -> TurnStatus {
    match ran.end {
        RunEnd::Ok => TurnStatus::Ok,
        RunEnd::Failed | RunEnd::Unavailable => TurnStatus::Error,
        RunEnd::Cancelled => TurnStatus::Cancelled,
    }
}

fn llm_cell_error(e: &LlmError) -> CellError {
    CellError {
        code: e.code().into(),
        message: e.to_string(),
    }
}
