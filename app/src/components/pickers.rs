//! The header's pickers: which model answers, and where the code runs.

use leptos::prelude::*;

use crate::api::ModelChoices;
use crate::contexts::use_session;
use crate::protocol::SandboxKind;

/// Where the code runs, when the server offers more than the local jail.
/// A change takes effect with the next question or run, in a fresh kernel.
#[component]
pub fn BackendPicker(backends: Vec<SandboxKind>) -> impl IntoView {
    let state = use_session();
    (backends.len() > 1).then(move || {
        let picked = state.backend.get_untracked();
        // Said after a change (never on load): what the change means, with
        // how many turns the notebook had then. "From the next question" is
        // no longer news once that question began: the note goes.
        let changed = RwSignal::new(None::<(SandboxKind, usize)>);
        let turns = move || state.notebook.with(|n| n.turns().count());
        let note = Memo::new(move |_| {
            changed
                .get()
                .filter(|(_, at)| turns() == *at)
                .map(|(kind, _)| kind)
        });
        let select = NodeRef::<leptos::html::Select>::new();
        // The note sits over the page, under the header (never a row of
        // its own): read, it is put away, and the keyboard goes back to
        // the picker.
        let dismiss = move |_| {
            changed.set(None);
            if let Some(select) = select.get_untracked() {
                let _ = select.focus();
            }
        };
        view! {
            <label class="model-picker backend-picker" title="Where the code runs; a change starts a fresh kernel">
                <span class="model-backend">"sandbox"</span>
                <select
                    node_ref=select
                    aria-label="Sandbox"
                    aria-describedby="backend-note"
                    on:change=move |ev| {
                        if let Ok(kind) = event_target_value(&ev).parse() {
                            state.backend.set(Some(kind));
                            changed.set(Some((kind, turns())));
                        }
                    }
                >
                    {backends
                        .into_iter()
                        .map(|kind| {
                            let selected = Some(kind) == picked;
                            view! { <option value=kind.name() selected=selected>{kind.label()}</option> }
                        })
                        .collect_view()}
                </select>
            </label>
            <div class="backend-note-box">
                <p class="backend-note" id="backend-note" role="status">
                    {move || note.get().map(change_note)}
                </p>
                <button
                    type="button"
                    class="backend-note-close"
                    aria-label="Dismiss the note"
                    hidden=move || note.get().is_none()
                    on:click=dismiss
                >
                    "×"
                </button>
            </div>
        }
    })
}

/// What picking `kind` changes, in words.
fn change_note(kind: SandboxKind) -> String {
    let (place, files) = match kind {
        SandboxKind::Jail => ("in this server's local sandbox", ""),
        SandboxKind::E2b => ("in an E2B cloud sandbox", ""),
        SandboxKind::Browser => ("in this page's own Python (Pyodide)", " It has no files."),
    };
    format!(
        "From the next question, code runs {place}, in a fresh kernel: variables from earlier cells are not there.{files}"
    )
}

/// Which model answers: the backend's list, the default first.
#[component]
pub fn ModelPicker(models: ModelChoices) -> impl IntoView {
    let state = use_session();
    let ModelChoices {
        backend,
        default_model,
        models,
        problem,
    } = models;
    let others: Vec<String> = models.into_iter().filter(|m| *m != default_model).collect();
    let default_short = short_name(&default_model);
    // The whole name, also where the picker's width cuts it.
    let title = problem.clone().unwrap_or_else(|| {
        format!("Answers come from the {backend} backend; by default, {default_model}")
    });
    view! {
        <label class="model-picker" title=title data-backend=backend>
            <span class="model-backend">"model"</span>
            <select
                aria-label="Model"
                on:change=move |ev| state.model.set(event_target_value(&ev))
            >
                <option value="" title=default_model>{default_short}</option>
                {others
                    .into_iter()
                    .map(|m| {
                        let label = short_name(&m);
                        view! { <option value=m.clone() title=m>{label}</option> }
                    })
                    .collect_view()}
            </select>
            {problem.map(|p| view! { <span class="model-problem" role="note">{p}</span> })}
        </label>
    }
}

/// A model's name as the picker shows it: a model file without its
/// `.gguf` (the whole name is the option's title).
pub(crate) fn short_name(model: &str) -> String {
    model.strip_suffix(".gguf").unwrap_or(model).to_string()
}
