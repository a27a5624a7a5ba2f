//! Under a question: its versions (← 2/3 →), Edit and Regenerate, and
//! what its kernel needed first. An edited question or a regenerated
//! answer is a new turn beside the old one, which stays reachable: the
//! notebook shows one branch, the server keeps them all.

use leptos::prelude::*;

use crate::contexts::use_session;
use crate::notebook::{Cell, Notebook, Restored};
use crate::protocol::{ClientMessage, TurnId, TurnKind};

/// The versions switcher, the question's actions and its kernel note.
#[component]
pub fn QuestionTools(cell: Memo<Option<Cell>>) -> impl IntoView {
    let state = use_session();
    let notebook = state.notebook;
    let turn = cell.with_untracked(|c| c.as_ref().and_then(|c| c.turn));
    let Some(turn) = turn else {
        return ().into_any();
    };
    let versions = Memo::new(move |_| notebook.with(|n| n.versions(turn)));
    let restored =
        Memo::new(move |_| notebook.with(|n| n.turn(turn).and_then(|t| t.restored.clone())));
    // Only a finished question can be edited or asked again, and only while
    // nothing runs (a new version would wait behind the running turn).
    let finished_question = move || {
        notebook.with(|n| {
            n.turn(turn)
                .is_some_and(|t| t.kind == TurnKind::Ask && t.status.is_some())
        })
    };
    let busy = move || notebook.with(Notebook::is_busy);
    let editing = RwSignal::new(false);
    let draft = RwSignal::new(String::new());
    let super::EditFocus {
        editor,
        edit_button,
        close,
    } = super::edit_focus(editing);
    let text = move || super::text_of(cell);
    let ask_again = move |text: String| {
        if text.trim().is_empty() {
            return;
        }
        let message = ClientMessage::Ask {
            text,
            model: state.picked_model(),
            backend: state.picked_backend(),
            alternative_to: Some(turn),
        };
        if state.send_frame(message) {
            editing.set(false);
            state.problem.set(None);
        } else {
            state
                .problem
                .set(Some("Not sent: the server is not connected.".into()));
        }
    };
    let select = move |to: Option<TurnId>| {
        if let Some(to) = to
            && !state.send_frame(ClientMessage::SelectBranch { turn: to })
        {
            state
                .problem
                .set(Some("Not switched: the server is not connected.".into()));
        }
    };

    view! {
        <Show when=move || editing.get()>
            <textarea
                class="question-editor"
                aria-label="Edit the question"
                aria-keyshortcuts="Enter Escape"
                node_ref=editor
                rows=move || draft.with(|d| d.lines().count().clamp(2, 12))
                prop:value=move || draft.get()
                on:input=move |ev| draft.set(event_target_value(&ev))
                on:keydown=move |ev| {
                    if ev.key() == "Enter" && !ev.shift_key() {
                        ev.prevent_default();
                        ask_again(draft.get_untracked());
                    } else if ev.key() == "Escape" {
                        ev.prevent_default();
                        close();
                    }
                }
            ></textarea>
        </Show>
        <div class="question-tools">
        {move || {
            versions
                .get()
                .map(|v| {
                    // One step to a neighbouring version, if there is one.
                    let step = move |to: Option<TurnId>, label: &'static str, glyph: &'static str| {
                        view! {
                            <button
                                type="button"
                                class="js-only"
                                hidden=state.read_only
                                aria-label=label
                                disabled=move || to.is_none() || busy()
                                on:click=move |_| select(to)
                            >
                                {glyph}
                            </button>
                        }
                    };
                    view! {
                        <nav class="versions" aria-label="Versions of this question">
                            {step(v.previous, "Previous version", "‹")}
                            <span class="versions-count">
                                {format!("{} / {}", v.position, v.count)}
                            </span>
                            {step(v.next, "Next version", "›")}
                        </nav>
                    }
                })
        }}
        <div class="cell-actions question-actions js-only" hidden=state.read_only>
            <Show
                when=move || editing.get()
                fallback=move || {
                    view! {
                        <button
                            type="button"
                            node_ref=edit_button
                            disabled=move || !finished_question() || busy()
                            on:click=move |_| {
                                draft.set(text());
                                editing.set(true);
                            }
                        >
                            "Edit"
                        </button>
                        <button
                            type="button"
                            title="Ask this question again; the answer you have stays as version 1"
                            disabled=move || !finished_question() || busy()
                            on:click=move |_| ask_again(text())
                        >
                            "Regenerate"
                        </button>
                    }
                }
            >
                <button
                    type="button"
                    class="primary"
                    on:click=move |_| ask_again(draft.get_untracked())
                >
                    "Send"
                </button>
                <button type="button" on:click=move |_| close()>
                    "Cancel"
                </button>
            </Show>
        </div>
        </div>
        {move || restored.get().map(|r| view! { <p class="restored" data-failed=r.error.is_some().then_some("true")>{restored_note(&r)}</p> })}
    }
    .into_any()
}

/// What a turn's kernel needed before it ran, in words.
fn restored_note(restored: &Restored) -> String {
    match &restored.error {
        Some(e) => e.message.clone(),
        // The first question's other version: nothing came before it.
        None if restored.programs == 0 => {
            "Started in a fresh kernel: the other version's variables are not here.".into()
        }
        None if restored.programs == 1 => {
            "Variables rebuilt for this version: 1 earlier program re-ran first.".into()
        }
        None => format!(
            "Variables rebuilt for this version: {} earlier programs re-ran first.",
            restored.programs
        ),
    }
}
