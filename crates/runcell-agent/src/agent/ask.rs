//! A question's turn: the model writes a program, it runs, and what it
//! printed goes back to the model, to be fixed (a bounded number of times)
//! or explained. Each step of the loop is a method here; [`Attempts`] is
//! what the loop carries from one attempt to the next.

use runcell_protocol::notebook::Notebook;
use runcell_protocol::{CellId, CellKind, TurnStatus};
use tokio_util::sync::CancellationToken;

use super::code::{CodeCell, CodeDelivery};
use super::conversation::{finished_turns, first_explanation};
use super::execute::{Program, Ran, RunEnd, run_into_cell};
use super::install::{self, Installed};
use super::look::Look;
use super::model::Reply;
use super::publish::{publish_note, publish_refusal, publish_text};
use super::{Agent, Ended, answered, fix_hints, grounding, prompt, repair};
use crate::session::SessionLog;
use runcell_llm::tools::{ExecuteCode, execute_code_spec, result_message};
use runcell_llm::{Message, Role};
use runcell_sandbox::{Language, validate_code};

mod again;
use again::Regenerated;

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

/// What stays the same over a turn's attempts.
struct Asked<'a> {
    session: &'a SessionLog,
    /// The question as the person wrote it.
    text: &'a str,
    model: Option<String>,
    channel: CodeDelivery,
    /// The tables' real column names, for a KeyError's hint.
    columns: Vec<String>,
    /// The branch's turns, this one last: what the conversation the turn
    /// sends is kept for.
    turns: Vec<runcell_protocol::TurnId>,
    /// The packages of the Browser sandbox, when the programs run there.
    browser: Option<Vec<String>>,
    /// When the question is regenerated: the versions before it.
    again: Option<Regenerated>,
    cancel: &'a CancellationToken,
}

/// The turn's attempts so far: the conversation, and what each program did.
struct Attempts {
    messages: Vec<Message>,
    /// Where the question ends: the last attempt may start over from it.
    asked: usize,
    /// The question as asked, which a start over repeats.
    question: String,
    attempts: u32,
    attempt: u32,
    /// The programs of this turn so far, to refuse one written again.
    tried: Vec<Tried>,
    /// Programs refused as repeats, asked again without using an attempt.
    repeats: u32,
    last: Option<(ExecuteCode, Ran, CellId)>,
    /// Whether the conversation ends with the last result and the
    /// request to explain it (not so when the loop ended on a repeat or
    /// on words without a program).
    explain_asked: bool,
    /// Whether the conversation holds the last program and its result
    /// (not so after a start over).
    last_fed: bool,
    /// Projects this turn tried to install (each once).
    installs: std::collections::HashSet<String>,
}

impl Attempts {
    fn new(messages: Vec<Message>, attempts: u32) -> Self {
        let question = messages
            .last()
            .map(|m| m.content.clone())
            .unwrap_or_default();
        Self {
            asked: messages.len(),
            messages,
            question,
            attempts,
            attempt: 0,
            tried: Vec::new(),
            repeats: 0,
            last: None,
            explain_asked: false,
            last_fed: false,
            installs: std::collections::HashSet::new(),
        }
    }

    /// The conversation cut back to the question, which now reads `asked`.
    fn back_to_question(&mut self, asked: String) {
        self.last_fed = false;
        self.messages.truncate(self.asked);
        if let Some(question) = self.messages.last_mut().filter(|m| m.role == Role::User) {
            question.content = asked;
        }
    }

    /// The conversation started over from the question, told what the
    /// attempts so far hit.
    fn start_over(&mut self, hit: &str) {
        let asked = prompt::start_over(&self.question, self.tried.len() as u32, hit);
        self.back_to_question(asked);
    }

    /// The turn ends as `status`, on the last program's cell.
    fn ended(&self, status: TurnStatus) -> Ended {
        Ended {
            status,
            final_cell: self.last.as_ref().map(|(_, _, cell)| *cell),
        }
    }
}

/// What a step of the loop leads to.
enum Step {
    /// Another attempt.
    Next,
    /// The last program stands: it is explained, or said to have answered
    /// nothing.
    Conclude,
    /// The turn is over.
    Done(Ended),
}

impl Agent {
    /// A question: code, result (and fixes), explanation.
    pub(super) async fn ask(
        &self,
        session: &SessionLog,
        history: &Notebook,
        text: String,
        model: Option<String>,
        cancel: &CancellationToken,
    ) -> Ended {
        let mut messages = self.opening(session, history, &text).await;
        let again = Regenerated::of(history, &text);
        if let Some(again) = &again
            && let Some(question) = messages.last_mut().filter(|m| m.role == Role::User)
        {
            question.content = format!("{}\n\n{}", question.content, again.request());
        }
        let mut turns = finished_turns(history);
        turns.extend(
            history
                .turns()
                .last()
                .filter(|t| t.status.is_none())
                .map(|t| t.id),
        );
        let asked = Asked {
            session,
            text: &text,
            model,
            channel: self.code_channel(),
            columns: self.kernels.table_columns(session.id()),
            turns,
            browser: self.kernels.browser_imports(session.id()),
            again,
            cancel,
        };
        let mut turn = Attempts::new(messages, 1 + self.settings.max_fixes);
        // What the question needs read right, looked at first when the data
        // calls for it (its output goes to the model before any program).
        // A look refused for want of a kernel ends the turn: the model's
        // program would be refused alike, after a wait for its tokens.
        match self.look(session, &text, cancel).await {
            Look::Looked(looked) => turn.messages.extend(looked.messages()),
            Look::Skipped => {}
            Look::Refused(cell) => {
                return Ended {
                    status: TurnStatus::Error,
                    final_cell: Some(cell),
                };
            }
        }
        while turn.attempt < turn.attempts {
            turn.attempt += 1;
            // A repeat is asked for again a little less greedily: at
            // temperature 0 the same conversation gives the same program.
            // A regenerate is sampled throughout, with its version's seed.
            let (temperature, seed) = match &asked.again {
                Some(again) => (again::TEMPERATURE, Some(again.seed())),
                None if turn.repeats > 0 => (0.5, None),
                None => (0.0, None),
            };
            let shown = turn.tried.len() as u32 + 1;
            let reply = self
                .write_code(
                    session,
                    &turn.messages,
                    asked.model.clone(),
                    shown,
                    (temperature, seed),
                    asked.channel,
                    cancel,
                )
                .await;
            let step = match reply {
                Reply::Program { program, cell } => {
                    if let Some(again) = asked.again.as_ref().filter(|_| shown == 1) {
                        publish_note(session, cell, &again.note());
                    }
                    self.try_program(&asked, &mut turn, program, cell, shown)
                        .await
                }
                Reply::Prose(prose) => Self::on_prose(&asked, &mut turn, prose),
                Reply::Cancelled => Step::Done(turn.ended(TurnStatus::Cancelled)),
                // Asked again, like a program that failed.
                Reply::NoProgram if turn.attempt < turn.attempts => {
                    tracing::info!(
                        attempt = turn.attempt,
                        "the reply held no program; asking again"
                    );
                    turn.messages
                        .push(Message::user(prompt::NO_PROGRAM_REQUEST));
                    Step::Next
                }
                Reply::NoProgram | Reply::Failed => Step::Done(turn.ended(TurnStatus::Error)),
            };
            match step {
                Step::Next => {}
                Step::Conclude => break,
                Step::Done(ended) => return ended,
            }
        }
        self.conclude(&asked, turn).await
    }

    /// Words without a program are the answer only when no program of this
    /// turn was tried (after failed ones, "Iceland, Denmark, Switzerland"
    /// would be a conclusion nothing computed) and every figure they name
    /// is the question's: a number no program computed was made up ("x
    /// divided by 5 is 1676204", from memory and wrong). Such a reply is
    /// never shown: the model is asked for the program.
    fn on_prose(asked: &Asked<'_>, turn: &mut Attempts, prose: String) -> Step {
        let invented = grounding::invented(&prose, &[asked.text], "");
        if invented.is_empty() && turn.tried.is_empty() {
            publish_text(asked.session, CellKind::Explanation, &prose);
            return Step::Done(Ended {
                status: TurnStatus::Ok,
                final_cell: None,
            });
        }
        // After a program that ran but looked unanswered (a doubt is a
        // suspicion), words without figures of their own say it did
        // answer: that program is explained.
        if invented.is_empty() && turn.last.as_ref().is_some_and(|(_, ran, _)| !ran.failed()) {
            if turn.last_fed {
                turn.messages.push(Message::assistant(prose));
            }
            return Step::Conclude;
        }
        tracing::info!(attempt = turn.attempt, invented = ?invented, "a reply without a program answers what nothing computed");
        runcell_core::metrics::explained("uncomputed");
        if turn.attempt < turn.attempts {
            turn.messages.push(Message::assistant(prose));
            turn.messages.push(Message::user(if invented.is_empty() {
                prompt::NO_PROGRAM_REQUEST.to_string()
            } else {
                prompt::compute_request(&invented)
            }));
            return Step::Next;
        }
        let statement = match &turn.last {
            Some((program, ran, _)) => prompt::no_answer_in(
                turn.tried.len(),
                &ran.report,
                &program.code,
                &asked.columns,
                asked.browser.as_deref(),
            ),
            None => prompt::UNCOMPUTED.to_string(),
        };
        publish_text(asked.session, CellKind::Explanation, &statement);
        Step::Done(turn.ended(TurnStatus::Error))
    }

    /// A program the model wrote: refused if it repeats a failed one, else
    /// run and judged.
    async fn try_program(
        &self,
        asked: &Asked<'_>,
        turn: &mut Attempts,
        program: ExecuteCode,
        cell: CellId,
        shown: u32,
    ) -> Step {
        if let Some(step) = Self::refuse_repeat(asked, turn, &program, cell, shown) {
            return step;
        }
        let (program, cell, shown, refused) =
            self.without_installs(asked, turn, program, cell, shown);
        let mut ran = match refused {
            Some(ran) => ran,
            None => self.run_attempt(asked, &program, cell, shown).await,
        };
        let mut cell = cell;
        if ran.end == RunEnd::Failed
            && self.settings.install_missing
            && let Some(module) = install::missing_module(&ran.report)
            && turn.installs.insert(install::project_of(module))
        {
            let project = install::project_of(module);
            match self
                .install_and_rerun(
                    asked.session,
                    &project,
                    &program.code,
                    cell,
                    shown,
                    asked.cancel,
                )
                .await
            {
                Installed::RanAgain {
                    ran: again,
                    cell: again_cell,
                } => {
                    ran = again;
                    cell = again_cell;
                }
                Installed::Not(report) => {
                    ran.report
                        .push_str(&install::not_installed(&project, &report));
                }
                Installed::Cancelled => {}
            }
        }
        let (program, ran, cell, shown) =
            self.repaired(asked, turn, program, ran, cell, shown).await;
        if ran.end == RunEnd::Cancelled || asked.cancel.is_cancelled() {
            return Step::Done(Ended {
                status: TurnStatus::Cancelled,
                final_cell: Some(cell),
            });
        }
        if matches!(ran.end, RunEnd::Unavailable | RunEnd::Refused) {
            // The program never ran: the result cell (or, with no kernel
            // free, the refusal) says why, and neither a fix nor an
            // explanation would help.
            return Step::Done(Ended {
                status: TurnStatus::Error,
                final_cell: Some(cell),
            });
        }
        Self::judge(asked, turn, program, ran, cell, shown)
    }

    /// A program that installs packages where nothing installs them (the
    /// Browser sandbox, where `%pip` is a `SyntaxError` that stops the
    /// whole program): not run as written. Its install lines are dropped
    /// and the rest runs in a cell of its own, with a note saying what was
    /// dropped and why; a program that did nothing else is refused, with
    /// that reason. The program refused stays in the turn's tries.
    fn without_installs(
        &self,
        asked: &Asked<'_>,
        turn: &mut Attempts,
        program: ExecuteCode,
        cell: CellId,
        shown: u32,
    ) -> (ExecuteCode, CellId, u32, Option<Ran>) {
        let Some(imports) = asked.browser.as_deref() else {
            return (program, cell, shown, None);
        };
        let why = prompt::pip_refusal(imports);
        let Some(fix) = (program.language == Language::Python.name())
            .then(|| repair::without_installs(&program.code, &why))
            .flatten()
        else {
            return (program, cell, shown, None);
        };
        runcell_core::metrics::fix_hint("dropped_install");
        if !repair::has_statements(&fix.code) {
            publish_refusal(asked.session, cell, shown, "pip_in_browser", &why);
            let ran = Ran {
                report: format!("InvalidCode: {why}"),
                end: RunEnd::Failed,
            };
            return (program, cell, shown, Some(ran));
        }
        publish_refusal(asked.session, cell, shown, "pip_in_browser", &why);
        turn.tried.push(Tried {
            code: normalized(&program.code),
            shown,
            verdict: why.clone(),
            hit: why,
            failed: true,
        });
        let shown = shown + 1;
        let edited = ExecuteCode {
            language: program.language,
            code: fix.code,
        };
        let cell = CodeCell::new(asked.session, &self.highlighter, shown).complete(&edited);
        publish_note(asked.session, cell, &fix.note);
        (edited, cell, shown, None)
    }

    /// A failed program whose remedy is certain (a column written as the
    /// table does not write it), edited by runcell and run as the turn's
    /// next attempt: a code cell with a note saying what changed and why,
    /// and its result. The failed one stays in the conversation, told what
    /// runcell changed. Else the program as it was.
    async fn repaired(
        &self,
        asked: &Asked<'_>,
        turn: &mut Attempts,
        program: ExecuteCode,
        ran: Ran,
        cell: CellId,
        shown: u32,
    ) -> (ExecuteCode, Ran, CellId, u32) {
        let fixable = ran.end == RunEnd::Failed
            && turn.attempt < turn.attempts
            && program.language == Language::Python.name();
        let Some(fix) = fixable
            .then(|| repair::repair(&ran.report, &program.code, &asked.columns))
            .flatten()
        else {
            return (program, ran, cell, shown);
        };
        tracing::info!(
            attempt = turn.attempt,
            "a certain repair: runcell edits the program"
        );
        runcell_core::metrics::fix_hint("repaired_column");
        turn.tried.push(Tried {
            code: normalized(&program.code),
            shown,
            verdict: prompt::verdict(&ran.report),
            hit: prompt::failure_summary(&ran.report, &program.code, &asked.columns),
            failed: true,
        });
        feed_back(
            &mut turn.messages,
            &program,
            &ran.report,
            &prompt::repaired_request(&fix.note),
        );
        turn.attempt += 1;
        let shown = shown + 1;
        let edited = ExecuteCode {
            language: program.language,
            code: fix.code,
        };
        let cell = CodeCell::new(asked.session, &self.highlighter, shown).complete(&edited);
        publish_note(asked.session, cell, &fix.note);
        let ran = self.run_attempt(asked, &edited, cell, shown).await;
        (edited, ran, cell, shown)
    }

    /// The same program as an earlier attempt would fail the same way (six
    /// of DABench's seven turns whose every attempt failed sent one program
    /// three times): refused before it runs, and asked for again without
    /// using an attempt, twice a turn at most. Only a failed one: a program
    /// that ran and only looked unanswered (printed nothing, as a
    /// definition does) may run again, the model's way of saying it stands
    /// by it.
    fn refuse_repeat(
        asked: &Asked<'_>,
        turn: &mut Attempts,
        program: &ExecuteCode,
        cell: CellId,
        shown: u32,
    ) -> Option<Step> {
        let code = normalized(&program.code);
        let earlier = turn.tried.iter().find(|t| t.failed && t.code == code)?;
        let problem = prompt::repeated_program(earlier.shown, &earlier.verdict);
        publish_refusal(asked.session, cell, shown, "repeated_program", &problem);
        let hit = format!(
            "{} (then the same program was written again, and not run)",
            earlier.hit
        );
        let again = Tried {
            code,
            shown,
            verdict: earlier.verdict.clone(),
            hit: earlier.hit.clone(),
            failed: true,
        };
        turn.tried.push(again);
        runcell_core::metrics::unanswered("repeated_program", turn.repeats < MAX_REPEATS);
        if turn.repeats < MAX_REPEATS {
            // Shown its failed program, a small model copies it: asked from
            // the question again, told what it hit.
            turn.repeats += 1;
            turn.attempt -= 1;
            turn.start_over(&hit);
            tracing::info!(attempt = turn.attempt, "the same program again; asked anew");
            return Some(Step::Next);
        }
        if turn.last.is_none() {
            return Some(Step::Done(Ended {
                status: TurnStatus::Error,
                final_cell: Some(cell),
            }));
        }
        Some(Step::Conclude)
    }

    /// Runs the program into a result cell, or says there why it cannot run.
    async fn run_attempt(
        &self,
        asked: &Asked<'_>,
        program: &ExecuteCode,
        cell: CellId,
        shown: u32,
    ) -> Ran {
        match checked_language(program) {
            Ok(language) => {
                let run = Program {
                    code_cell: cell,
                    attempt: Some(shown),
                    language,
                    code: &program.code,
                };
                run_into_cell(
                    &self.kernels,
                    asked.session,
                    run,
                    &self.settings.limits,
                    asked.cancel,
                )
                .await
            }
            Err(problem) => {
                publish_refusal(asked.session, cell, shown, "invalid_code", &problem);
                Ran {
                    report: problem,
                    end: RunEnd::Failed,
                }
            }
        }
    }

    /// What a program that ran leads to: a fix asked for (it failed, or
    /// printed what does not answer), a start over on the last attempt, or
    /// the explanation.
    fn judge(
        asked: &Asked<'_>,
        turn: &mut Attempts,
        program: ExecuteCode,
        ran: Ran,
        cell: CellId,
        shown: u32,
    ) -> Step {
        let columns = &asked.columns;
        let retry = turn.attempt < turn.attempts;
        // Ran but did not answer: sent back like a failure.
        let doubt = (!ran.failed())
            .then(|| answered::doubt(asked.text, &program.code, &ran.report))
            .flatten();
        let hit = match doubt {
            Some(doubt) if !ran.failed() => doubt.note().to_string(),
            _ => prompt::failure_summary(&ran.report, &program.code, columns),
        };
        turn.tried.push(Tried {
            code: normalized(&program.code),
            shown,
            verdict: match doubt {
                Some(doubt) if !ran.failed() => doubt.reason().replace('_', " "),
                _ => prompt::verdict(&ran.report),
            },
            hit: hit.clone(),
            failed: ran.failed(),
        });
        if let Some(doubt) = doubt {
            tracing::info!(
                attempt = turn.attempt,
                reason = doubt.reason(),
                retry,
                "the program ran but did not answer"
            );
            runcell_core::metrics::unanswered(doubt.reason(), retry);
        }
        if ran.failed()
            && let Some(hint) = fix_hints::which(&ran.report, &program.code, columns)
        {
            runcell_core::metrics::fix_hint(hint);
        }
        let instruction = match (ran.failed(), doubt) {
            (true, _) if retry => prompt::fix_request(
                &ran.report,
                &program.code,
                columns,
                asked.browser.as_deref(),
            ),
            (false, Some(doubt)) if retry => doubt.note().to_string(),
            _ => prompt::EXPLAIN_REQUEST.to_string(),
        };
        let again = retry && (ran.failed() || doubt.is_some());
        // A program that ran is sent back only with the reason shown.
        if again && let Some(doubt) = doubt.filter(|_| !ran.failed()) {
            publish_note(asked.session, cell, &doubt.shown(asked.text, &ran.report));
        }
        if again && turn.attempt >= 2 && turn.attempt + 1 == turn.attempts {
            // A fix went wrong too. The small models copy the program in
            // front of them, mistake and all (the tuple of columns three
            // times in a row): the last attempt starts over from the
            // question, told what the failed attempts hit.
            turn.start_over(&hit);
            tracing::info!(attempt = turn.attempt, "starting over from the question");
            turn.last = Some((program, ran, cell));
            return Step::Next;
        }
        feed_back(&mut turn.messages, &program, &ran.report, &instruction);
        turn.last_fed = true;
        turn.last = Some((program, ran, cell));
        if !again {
            turn.explain_asked = true;
            return Step::Conclude;
        }
        tracing::info!(attempt = turn.attempt, "asking for a fix");
        Step::Next
    }

    /// The last program's turn ends: explained, or said to have answered
    /// nothing.
    async fn conclude(&self, asked: &Asked<'_>, mut turn: Attempts) -> Ended {
        let Some((program, ran, cell)) = turn.last.take() else {
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
            let statement = prompt::no_answer_in(
                turn.tried.len(),
                &ran.report,
                &program.code,
                &asked.columns,
                asked.browser.as_deref(),
            );
            publish_text(asked.session, CellKind::Explanation, &statement);
            return Ended {
                status: if asked.cancel.is_cancelled() {
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
            answered::doubt(asked.text, &program.code, &ran.report),
            Some(answered::Doubt::Nothing | answered::Doubt::Empty | answered::Doubt::BlankFigure)
        ) {
            runcell_core::metrics::explained("unanswered");
            publish_text(
                asked.session,
                CellKind::Explanation,
                &grounding::fallback(&ran.report),
            );
            return Ended {
                status: TurnStatus::Ok,
                final_cell: Some(cell),
            };
        }
        // A regenerate's result beside the version before's: the person
        // is told whether the two approaches agree before reading either.
        if let Some(note) = asked.again.as_ref().and_then(|a| a.comparison(&ran.report)) {
            publish_note(asked.session, cell, &note);
        }
        if !turn.explain_asked && turn.last_fed {
            // The conversation already holds the program and its result.
            turn.messages
                .push(Message::user(prompt::EXPLAIN_REQUEST.to_string()));
        } else if !turn.explain_asked {
            let question = turn.question.clone();
            turn.back_to_question(question);
            feed_back(
                &mut turn.messages,
                &program,
                &ran.report,
                prompt::EXPLAIN_REQUEST,
            );
        }
        let tools = match asked.channel {
            CodeDelivery::Tool => vec![execute_code_spec()],
            CodeDelivery::Structured | CodeDelivery::Fenced => Vec::new(),
        };
        let sent = turn.messages.clone();
        let before = asked.session.last_seq();
        let explained = self
            .explain(
                asked.session,
                asked.text,
                &program.code,
                turn.messages,
                tools,
                &ran,
                asked.model.clone(),
                asked.cancel,
            )
            .await;
        // The explanation as the model wrote it, at the first asking,
        // extends the conversation the next question opens with.
        if explained && let Some(explanation) = first_explanation(asked.session, before) {
            let mut sent = sent;
            sent.push(Message::assistant(explanation));
            self.conversations
                .keep(asked.session.id(), asked.turns.clone(), sent);
        }
        Ended {
            status: match explained {
                _ if asked.cancel.is_cancelled() => TurnStatus::Cancelled,
                _ if ran.failed() => TurnStatus::Error,
                false => TurnStatus::Error,
                true => TurnStatus::Ok,
            },
            final_cell: Some(cell),
        }
    }
}

/// The language to run `program` in, or why it cannot run. Syntax is
/// checked by the kernel itself, which compiles a cell before running it.
fn checked_language(program: &ExecuteCode) -> Result<Language, String> {
    let language: Language = program.language.parse().map_err(|_| {
        format!(
            "unknown language `{}`: runcell runs python, javascript, typescript, r, java, bash and c",
            program.language.chars().take(40).collect::<String>()
        )
    })?;
    if program.code.trim().is_empty() {
        return Err("the program is empty".into());
    }
    validate_code(&program.code).map_err(|e| e.to_string())?;
    Ok(language)
}

/// Adds the attempt and its result, with what to do next, to the
/// conversation, laid out as [`prompt::answered_turn`] lays out earlier
/// turns, so that the next question's prompt starts with this one's.
fn feed_back(messages: &mut Vec<Message>, program: &ExecuteCode, report: &str, instruction: &str) {
    messages.push(prompt::program_message(&program.language, &program.code));
    messages.push(Message::user(result_message(report, instruction)));
}
