//! The notebook's cells: the question, the code (highlighted, with Copy and
//! "Edit & run"), its result (text, images, tables, tracebacks) and the
//! explanation (markdown, its markup sent by the server with the events:
//! `render::for_pages`). Each renders the same on the server and in the
//! browser, so a page without JavaScript shows the whole session.

mod install;
mod outputs;
mod question;

use leptos::prelude::*;

use crate::components::copy_text;
use crate::components::indicators::TurnPhase;
use crate::contexts::use_session;
use crate::notebook::{Cell, Notebook};
use crate::protocol::{CellId, CellKind, CellStatus, ClientMessage, Output, UNGROUNDED};
use crate::render::markdown;
use crate::render::sizes::one_decimal;
use outputs::ResultBody;

/// The conversation: every cell, in order, each following the notebook.
#[component]
pub fn Cells() -> impl IntoView {
    let state = use_session();
    let notebook = state.notebook;
    let ids = move || notebook.with(|n| n.cells().map(|c| c.id).collect::<Vec<_>>());
    let empty = move || notebook.with(|n| n.cells().next().is_none());

    view! {
        <section class="cells" aria-label="Conversation">
            <Show when=empty>
                <p class="empty">
                    {if state.read_only {
                        "Nothing had been asked yet when this session was shared."
                    } else {
                        "Ask something to start: the answer streams in here."
                    }}
                </p>
            </Show>
            <For each=ids key=|id| *id let:id>
                <CellView id/>
            </For>
            <TurnPhase/>
        </section>
    }
}

/// One cell, by id; it follows the notebook as the cell streams.
#[component]
pub fn CellView(id: CellId) -> impl IntoView {
    let state = use_session();
    let notebook = state.notebook;
    let cell = Memo::new(move |_| notebook.with(|n| n.cell(id).cloned()));
    let kind = notebook
        .with_untracked(|n| n.cell(id).map(|c| c.kind))
        .unwrap_or(CellKind::Explanation);
    let (class, label) = match kind {
        CellKind::User => ("cell cell-user", "You"),
        CellKind::Code => ("cell cell-code", "Code"),
        CellKind::Result => ("cell cell-result", "Result"),
        CellKind::Explanation => ("cell cell-explanation", "Explanation"),
    };
    let status = move || cell.with(|c| c.as_ref().map(|c| c.status));
    // A code cell's outcome is its result's: a program that failed is not
    // shown "ok" because it was written without trouble.
    let outcome = move || {
        if kind != CellKind::Code {
            return None;
        }
        let turn = cell.with(|c| c.as_ref().and_then(|c| c.turn))?;
        notebook.with(|n| n.result_of(turn, id).map(|r| r.status))
    };
    let badges = move || {
        cell.with(|c| {
            let c = c.as_ref()?;
            let mut badges = Vec::new();
            if let Some(language) = c.language.as_ref().filter(|_| c.kind == CellKind::Code) {
                badges.push(language.clone());
            }
            match c.attempt {
                Some(n) if n > 1 => badges.push(format!("attempt {n}")),
                _ => {}
            }
            if c.is_final && c.attempt.is_some_and(|n| n > 1) {
                badges.push("final".into());
            }
            if c.source.is_some() && c.kind == CellKind::Code {
                badges.push(match notebook.with(|n| install::rerun_after(n, c)) {
                    Some(project) => format!("re-run after installing {project}"),
                    None => "edited".into(),
                });
            }
            Some(badges.join(" · "))
        })
    };

    view! {
        <article
            class=class
            aria-label=label
            data-cell-id=id.to_string()
            data-status=move || status().map(status_name)
            data-outcome=move || outcome().map(status_name)
            data-final=move || cell.with(|c| c.as_ref().is_some_and(|c| c.is_final).to_string())
            data-withdrawn=move || cell.with(|c| c.as_ref().is_some_and(withdrawn).then_some("true"))
        >
            <div class="cell-head">
                <span class="cell-kind">{label}</span>
                <span class="cell-badges">{badges}</span>
                <span class="cell-status">
                    {move || match outcome().and_then(outcome_label) {
                        Some(outcome) => Some(outcome.to_string()),
                        None => cell.with(|c| c.as_ref().map(status_label)),
                    }}
                </span>
            </div>
            // Why this attempt was sent back, or what runcell changed to make
            // it: shown also when the attempt is folded.
            {move || {
                notebook
                    .with(|n| n.notes_of(id).map(str::to_string).collect::<Vec<_>>())
                    .into_iter()
                    .map(|note| {
                        view! {
                            <p class="cell-note" role="note">
                                {note}
                            </p>
                        }
                    })
                    .collect_view()
            }}
            {match kind {
                CellKind::User => {
                    view! {
                        <div class="cell-body markdown question" inner_html=move || markdown_html(cell)></div>
                        <question::QuestionTools cell/>
                    }
                        .into_any()
                }
                // An attempt that a later one replaced folds behind a line
                // saying what became of it.
                CellKind::Code | CellKind::Result => {
                    let folded = Memo::new(move |_| notebook.with(|n| fold_summary(n, id)));
                    // An install's result reads as runcell's line, pip's log folded.
                    let installing = notebook.with_untracked(|n| {
                        n.cell(id)
                            .filter(|c| install::is_install_result(n, c))
                            .and_then(|c| c.source)
                            .and_then(|s| n.cell(s))
                            .and_then(install::installs)
                            .map(str::to_string)
                    });
                    let body = move || match (kind, installing.clone()) {
                        (CellKind::Code, _) => view! { <CodeBody id cell/> }.into_any(),
                        (_, Some(project)) => view! { <install::InstallBody cell project/> }.into_any(),
                        _ => view! { <ResultBody cell/> }.into_any(),
                    };
                    (move || match folded.get() {
                        Some(summary) => {
                            view! {
                                <details class="fold">
                                    <summary>{summary}</summary>
                                    {body()}
                                </details>
                            }
                                .into_any()
                        }
                        None => body(),
                    })
                        .into_any()
                }
                CellKind::Explanation => {
                    view! {
                        <div class="cell-body markdown" inner_html=move || markdown_html(cell)></div>
                    }
                        .into_any()
                }
            }}
            {move || {
                // A result's traceback already says what went wrong.
                cell.with(|c| {
                    c.as_ref()
                        .filter(|c| !c.outputs.iter().any(|o| matches!(o, Output::Error { .. })))
                        .and_then(|c| c.error.clone())
                })
                    .map(|e| {
                        view! {
                            <p class="cell-error" role="alert" data-code=e.code>
                                {e.message}
                            </p>
                        }
                    })
            }}
        </article>
    }
}

/// What became of a code cell (or its result) that a later attempt of its
/// turn replaced: "attempt 1 failed: ZeroDivisionError — fixed in attempt
/// 2". `None` for a cell that stands (or that nothing replaced yet).
/// A look at the data runcell ran before the model's program: folded once
/// the turn has an answer that stands.
fn look_summary(notebook: &Notebook, code: &Cell, kind: CellKind) -> Option<String> {
    let turn = notebook.turn(code.turn?)?;
    turn.final_cell.filter(|&c| c != code.id)?;
    let what = code
        .text
        .lines()
        .next()
        .and_then(|l| l.strip_prefix(crate::protocol::LOOK_COMMENT))
        .unwrap_or("the data");
    Some(match kind {
        CellKind::Result => format!("what the look at the data showed ({what})"),
        _ => format!("runcell looked at the data first: {what}"),
    })
}

fn fold_summary(notebook: &Notebook, id: CellId) -> Option<String> {
    let cell = notebook.cell(id)?;
    let code = match cell.kind {
        CellKind::Code => cell,
        CellKind::Result => notebook.cell(cell.source?)?,
        _ => return None,
    };
    if code.attempt.is_none() && code.text.starts_with(crate::protocol::LOOK_COMMENT) {
        return look_summary(notebook, code, cell.kind);
    }
    let turn = code.turn?;
    // runcell's re-run after an install counts as its program's attempt.
    let attempt = code.attempt.or_else(|| {
        let rerun_of = notebook.cell(code.source?)?;
        install::rerun_after(notebook, code)?;
        rerun_of.attempt
    })?;
    let rerun = install::rerun_of(notebook, turn, code.id);
    let next = notebook
        .cells_of(turn)
        .filter(|c| c.kind == CellKind::Code)
        .filter_map(|c| c.attempt)
        .filter(|&a| a > attempt)
        .min();
    if next.is_none() && rerun.is_none() {
        return None;
    }
    let failure = notebook
        .result_of(turn, code.id)
        .and_then(|r| {
            r.outputs.iter().find_map(|o| match o {
                Output::Error { name, .. } => Some(name.clone()),
                _ => None,
            })
        })
        .or_else(|| code.error.as_ref().map(|e| e.code.clone()));
    let what = match failure {
        Some(name) => format!("attempt {attempt} failed: {name}"),
        None => format!("attempt {attempt} did not answer"),
    };
    // "Fixed" only by the attempt that stands and whose program ran well:
    // a turn whose last attempt failed too was not fixed.
    let fixed_by = notebook
        .turn(turn)
        .and_then(|t| t.final_cell)
        .and_then(|c| notebook.cell(c))
        .filter(|c| c.kind == CellKind::Code)
        .filter(|c| {
            notebook
                .result_of(turn, c.id)
                .is_some_and(|r| r.status == CellStatus::Ok && !has_error(r))
        })
        .and_then(|c| c.attempt);
    let next = match (rerun, fixed_by, next) {
        (Some((_, project)), _, _) => format!(" — re-run after installing {project}"),
        (None, Some(fixed), _) if fixed > attempt => format!(" — fixed in attempt {fixed}"),
        (None, _, Some(next)) => format!(" — attempt {next} followed"),
        (None, _, None) => String::new(),
    };
    let whose = if cell.kind == CellKind::Result {
        "its output: "
    } else {
        ""
    };
    Some(format!("{whose}{what}{next}"))
}

fn has_error(cell: &Cell) -> bool {
    cell.outputs
        .iter()
        .any(|o| matches!(o, Output::Error { .. }))
}

/// What a folded code cell says of itself: "Show code (python, 12 lines)".
fn code_summary(language: &str, code: &str) -> String {
    let lines = code.lines().count();
    let unit = if lines == 1 { "line" } else { "lines" };
    format!("Show code ({language}, {lines} {unit})")
}

/// An explanation withdrawn for an invented figure: shown struck through,
/// with the reason, above the one that stands.
fn withdrawn(cell: &Cell) -> bool {
    cell.kind == CellKind::Explanation && cell.error.as_ref().is_some_and(|e| e.code == UNGROUNDED)
}

/// A question's or an explanation's markup: the server's, sent with its
/// events (the page renders no markdown), with any text it does not cover
/// yet after it as text.
fn markdown_html(cell: Memo<Option<Cell>>) -> String {
    cell.with(|c| {
        c.as_ref()
            .map(|c| markdown::shown(&c.html, c.unhighlighted()))
            .unwrap_or_default()
    })
}

fn text_of(cell: Memo<Option<Cell>>) -> String {
    cell.with(|c| c.as_ref().map(|c| c.text.clone()).unwrap_or_default())
}

fn status_name(status: CellStatus) -> String {
    match status {
        CellStatus::Streaming => "streaming",
        CellStatus::Ok => "ok",
        CellStatus::Error => "error",
        CellStatus::Cancelled => "cancelled",
    }
    .to_string()
}

/// A code cell's label while and after its program runs, when that says
/// more than its own ("ok" for having been written): running, failed or
/// stopped.
fn outcome_label(result: CellStatus) -> Option<&'static str> {
    match result {
        CellStatus::Streaming => Some("running"),
        CellStatus::Ok => None,
        CellStatus::Error => Some("failed"),
        CellStatus::Cancelled => Some("stopped"),
    }
}

/// "writing", "running", "ok · 1.2 s", "error · 0.3 s", "stopped".
fn status_label(cell: &Cell) -> String {
    let seconds = cell
        .elapsed_ms
        .map(|ms| format!(" · {} s", one_decimal(ms, 1000)))
        .unwrap_or_default();
    match (cell.status, cell.kind) {
        (_, CellKind::User) => String::new(),
        _ if withdrawn(cell) => "withdrawn".into(),
        (CellStatus::Streaming, CellKind::Result) => "running".into(),
        (CellStatus::Streaming, _) => "writing".into(),
        (CellStatus::Ok, _) => format!("ok{seconds}"),
        (CellStatus::Error, _) => format!("error{seconds}"),
        (CellStatus::Cancelled, _) => "stopped".into(),
    }
}

/// An in-place editor's focus: into `editor` when `editing` turns on, back
/// to the button that opened it (`edit_button`) when `close` closes it
/// without sending (never on the page's first render).
struct EditFocus<F: Fn() + Copy> {
    editor: NodeRef<leptos::html::Textarea>,
    edit_button: NodeRef<leptos::html::Button>,
    close: F,
}

fn edit_focus(editing: RwSignal<bool>) -> EditFocus<impl Fn() + Copy> {
    let editor = NodeRef::<leptos::html::Textarea>::new();
    let edit_button = NodeRef::<leptos::html::Button>::new();
    let give_back_focus = RwSignal::new(false);
    Effect::new(move |_| {
        if editing.get() {
            if let Some(editor) = editor.get() {
                let _ = editor.focus();
            }
        } else if give_back_focus.get()
            && let Some(button) = edit_button.get()
        {
            let _ = button.focus();
            give_back_focus.set(false);
        }
    });
    EditFocus {
        editor,
        edit_button,
        close: move || {
            give_back_focus.set(true);
            editing.set(false);
        },
    }
}

#[component]
fn CodeBody(id: CellId, cell: Memo<Option<Cell>>) -> impl IntoView {
    let state = use_session();
    let editing = RwSignal::new(false);
    let draft = RwSignal::new(String::new());
    let copied = RwSignal::new(false);
    let EditFocus {
        editor,
        edit_button,
        close,
    } = edit_focus(editing);
    let html = move || {
        cell.with(|c| {
            c.as_ref()
                .map(|c| format!("{}{}", c.html, markdown::escape(c.unhighlighted())))
                .unwrap_or_default()
        })
    };
    let language = move || {
        cell.with(|c| {
            c.as_ref()
                .and_then(|c| c.language.clone())
                .unwrap_or_else(|| "python".into())
        })
    };
    let streaming = move || {
        cell.with(|c| {
            c.as_ref()
                .is_some_and(|c| c.status == CellStatus::Streaming)
        })
    };
    let run = move || {
        let code = draft.get_untracked();
        let message = ClientMessage::Run {
            code,
            language: language(),
            source: Some(id),
            backend: state.picked_backend(),
        };
        if state.send_frame(message) {
            close();
            state.problem.set(None);
        } else {
            state
                .problem
                .set(Some("Not run: the server is not connected.".into()));
        }
    };

    view! {
        <div class="cell-body">
            // Code folds away behind its summary (also without scripts).
            <details class="code-fold" open hidden=move || editing.get()>
                <summary>
                    <span class="when-open">"Hide code"</span>
                    <span class="when-closed">{move || code_summary(&language(), &text_of(cell))}</span>
                </summary>
                // Focusable, so that a keyboard can scroll a long line.
                <pre class="code" tabindex="0"><code inner_html=html></code></pre>
            </details>
            <Show when=move || editing.get()>
                <textarea
                    class="code-editor"
                    aria-label="Edit code"
                    aria-keyshortcuts="Control+Enter Meta+Enter Escape"
                    spellcheck="false"
                    node_ref=editor
                    rows=move || draft.with(|d| d.lines().count().clamp(3, 30))
                    prop:value=move || draft.get()
                    on:input=move |ev| draft.set(event_target_value(&ev))
                    on:keydown=move |ev| {
                        if ev.key() == "Enter" && (ev.ctrl_key() || ev.meta_key()) {
                            ev.prevent_default();
                            run();
                        } else if ev.key() == "Escape" {
                            ev.prevent_default();
                            close();
                        }
                    }
                ></textarea>
            </Show>
            <div class="cell-actions js-only">
                <Show
                    when=move || editing.get()
                    fallback=move || {
                        view! {
                            <button
                                type="button"
                                on:click=move |_| {
                                    copy_text(&text_of(cell));
                                    copied.set(true);
                                }
                            >
                                {move || if copied.get() { "Copied" } else { "Copy" }}
                            </button>
                            <button
                                type="button"
                                node_ref=edit_button
                                hidden=state.read_only
                                disabled=streaming
                                on:click=move |_| {
                                    draft.set(text_of(cell));
                                    editing.set(true);
                                }
                            >
                                "Edit & run"
                            </button>
                        }
                    }
                >
                    <button type="button" class="primary" on:click=move |_| run()>
                        "Run"
                    </button>
                    <button type="button" on:click=move |_| close()>
                        "Cancel"
                    </button>
                </Show>
            </div>
        </div>
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::{EventBody, SessionEvent, TurnId, TurnKind, TurnStatus};

    /// A turn of `attempts` code cells, each with its result; `ok` says
    /// which attempts' programs ran well.
    fn turn_of_attempts(ok: &[bool], turn_status: TurnStatus) -> Notebook {
        let turn = TurnId(1);
        let mut bodies = vec![EventBody::TurnStarted {
            turn,
            turn_kind: TurnKind::Ask,
            alternative_to: None,
        }];
        let mut last_code = None;
        for (n, &ran_well) in ok.iter().enumerate() {
            let code = CellId(10 + 2 * n as u64);
            let result = CellId(11 + 2 * n as u64);
            last_code = Some(code);
            bodies.push(EventBody::CellStarted {
                cell_id: code,
                cell_kind: CellKind::Code,
                language: Some("python".into()),
                attempt: Some(n as u32 + 1),
                source: None,
            });
            bodies.push(EventBody::CellFinished {
                cell_id: code,
                status: CellStatus::Ok,
                elapsed_ms: 0,
                error: None,
            });
            bodies.push(EventBody::CellStarted {
                cell_id: result,
                cell_kind: CellKind::Result,
                language: None,
                attempt: Some(n as u32 + 1),
                source: Some(code),
            });
            if !ran_well {
                bodies.push(EventBody::CellOutput {
                    cell_id: result,
                    output: Output::Error {
                        name: "FileNotFoundError".into(),
                        value: "sales.csv".into(),
                        traceback: Vec::new(),
                    },
                });
            }
            bodies.push(EventBody::CellFinished {
                cell_id: result,
                status: if ran_well {
                    CellStatus::Ok
                } else {
                    CellStatus::Error
                },
                elapsed_ms: 0,
                error: None,
            });
        }
        bodies.push(EventBody::TurnFinished {
            turn,
            status: turn_status,
            elapsed_ms: 0,
            final_cell: last_code,
        });
        Notebook::from_events(&SessionEvent::numbered(bodies, 1))
    }

    #[test]
    fn a_fold_says_fixed_only_when_the_standing_attempt_ran_well() {
        let fixed = turn_of_attempts(&[false, false, true], TurnStatus::Ok);
        assert_eq!(
            fold_summary(&fixed, CellId(10)).as_deref(),
            Some("attempt 1 failed: FileNotFoundError — fixed in attempt 3")
        );
        // Issue 41: every attempt failed, and the first said "fixed in 3".
        let failed = turn_of_attempts(&[false, false, false], TurnStatus::Error);
        assert_eq!(
            fold_summary(&failed, CellId(10)).as_deref(),
            Some("attempt 1 failed: FileNotFoundError — attempt 2 followed")
        );
        assert_eq!(
            fold_summary(&failed, CellId(13)).as_deref(),
            Some("its output: attempt 2 failed: FileNotFoundError — attempt 3 followed")
        );
        // The attempt that stands folds behind nothing.
        assert_eq!(fold_summary(&failed, CellId(14)), None);
    }

    /// A look at the data (cells 1 and 2), then one code cell per attempt
    /// (from 10), the last standing; `finished`: the turn is over.
    fn look_then(ok: &[bool], finished: bool) -> Notebook {
        let look = "# Looking at the data: the values of 'source' in news.csv\nprint(1)";
        let mut bodies = vec![
            EventBody::TurnStarted {
                turn: TurnId(1),
                turn_kind: TurnKind::Ask,
                alternative_to: None,
            },
            EventBody::CellStarted {
                cell_id: CellId(1),
                cell_kind: CellKind::Code,
                language: Some("python".into()),
                attempt: None,
                source: None,
            },
            EventBody::CellDelta {
                cell_id: CellId(1),
                text: look.into(),
                highlight: None,
            },
            EventBody::CellStarted {
                cell_id: CellId(2),
                cell_kind: CellKind::Result,
                language: None,
                attempt: None,
                source: Some(CellId(1)),
            },
        ];
        let mut rest = attempts_events(ok);
        if !finished {
            rest.pop();
        }
        bodies.append(&mut rest);
        Notebook::from_events(&SessionEvent::numbered(bodies, 1))
    }

    fn attempts_events(ok: &[bool]) -> Vec<EventBody> {
        let mut bodies = Vec::new();
        for n in 0..ok.len() {
            let code = CellId(10 + 2 * n as u64);
            bodies.push(EventBody::CellStarted {
                cell_id: code,
                cell_kind: CellKind::Code,
                language: Some("python".into()),
                attempt: Some(n as u32 + 1),
                source: None,
            });
        }
        bodies.push(EventBody::TurnFinished {
            turn: TurnId(1),
            status: TurnStatus::Ok,
            elapsed_ms: 0,
            final_cell: Some(CellId(10 + 2 * (ok.len() as u64 - 1))),
        });
        bodies
    }

    #[test]
    fn a_look_at_the_data_folds_once_the_answer_stands() {
        let done = look_then(&[true], true);
        assert_eq!(
            fold_summary(&done, CellId(1)).as_deref(),
            Some("runcell looked at the data first: the values of 'source' in news.csv")
        );
        assert_eq!(
            fold_summary(&done, CellId(2)).as_deref(),
            Some("what the look at the data showed (the values of 'source' in news.csv)")
        );
        // While the turn runs, the look stays open.
        let running = look_then(&[true], false);
        assert_eq!(fold_summary(&running, CellId(1)), None);
    }

    #[test]
    fn a_program_run_again_after_an_install_is_a_rerun_and_folds_the_failure() {
        let code = |id: u64, attempt: Option<u32>, source: Option<u64>, text: &str| {
            vec![
                EventBody::CellStarted {
                    cell_id: CellId(id),
                    cell_kind: CellKind::Code,
                    language: Some("python".into()),
                    attempt,
                    source: source.map(CellId),
                },
                EventBody::CellDelta {
                    cell_id: CellId(id),
                    text: text.into(),
                    highlight: None,
                },
            ]
        };
        let result = |id: u64, of: u64, error: Option<&str>| {
            let mut bodies = vec![EventBody::CellStarted {
                cell_id: CellId(id),
                cell_kind: CellKind::Result,
                language: None,
                attempt: Some(1),
                source: Some(CellId(of)),
            }];
            if let Some(name) = error {
                bodies.push(EventBody::CellOutput {
                    cell_id: CellId(id),
                    output: Output::Error {
                        name: name.into(),
                        value: "No module named 'humanize'".into(),
                        traceback: Vec::new(),
                    },
                });
            }
            bodies.push(EventBody::CellFinished {
                cell_id: CellId(id),
                status: if error.is_some() {
                    CellStatus::Error
                } else {
                    CellStatus::Ok
                },
                elapsed_ms: 0,
                error: None,
            });
            bodies
        };
        let mut bodies = vec![EventBody::TurnStarted {
            turn: TurnId(1),
            turn_kind: TurnKind::Ask,
            alternative_to: None,
        }];
        bodies.extend(code(10, Some(1), None, "import humanize"));
        bodies.extend(result(11, 10, Some("ModuleNotFoundError")));
        bodies.extend(code(12, None, None, "%pip install humanize"));
        bodies.extend(result(13, 12, None));
        bodies.extend(code(14, None, Some(10), "import humanize"));
        bodies.extend(result(15, 14, None));
        bodies.push(EventBody::TurnFinished {
            turn: TurnId(1),
            status: TurnStatus::Ok,
            elapsed_ms: 0,
            final_cell: Some(CellId(14)),
        });
        let notebook = Notebook::from_events(&SessionEvent::numbered(bodies, 1));
        assert_eq!(
            fold_summary(&notebook, CellId(10)).as_deref(),
            Some("attempt 1 failed: ModuleNotFoundError — re-run after installing humanize")
        );
        assert_eq!(fold_summary(&notebook, CellId(14)), None);
        let rerun = notebook.cell(CellId(14)).cloned();
        assert_eq!(
            rerun
                .and_then(|c| install::rerun_after(&notebook, &c))
                .as_deref(),
            Some("humanize")
        );
        let install_result = notebook.cell(CellId(13)).cloned();
        assert!(install_result.is_some_and(|c| install::is_install_result(&notebook, &c)));
    }
}
