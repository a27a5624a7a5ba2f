//! The header's pickers: which model answers, and where the code runs.

use leptos::prelude::*;

use crate::api::ModelChoices;
use crate::contexts::use_session;

/// Where the code runs, when the server offers more than the local jail.
/// A change takes effect with the next question or run, in a fresh kernel.
#[component]
pub fn BackendPicker(backends: Vec<String>) -> impl IntoView {
    let state = use_session();
    (backends.len() > 1).then(move || {
        let label = |name: &str| match name {
            "jail" => "Local sandbox".to_string(),
            "e2b" => "E2B cloud".to_string(),
            "browser" => "Browser (Pyodide)".to_string(),
            other => other.to_string(),
        };
        let picked = state.backend.get_untracked();
        view! {
            <label class="model-picker backend-picker" title="Where the code runs; a change starts a fresh kernel">
                <span class="model-backend">"sandbox"</span>
                <select
                    aria-label="Sandbox"
                    on:change=move |ev| state.backend.set(event_target_value(&ev))
                >
                    {backends
                        .iter()
                        .map(|b| {
                            let text = label(b);
                            let selected = *b == picked;
                            view! { <option value=b.clone() selected=selected>{text}</option> }
                        })
                        .collect_view()}
                </select>
            </label>
        }
    })
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
    let title = problem
        .clone()
        .unwrap_or_else(|| format!("Answers come from the {backend} backend"));
    view! {
        <label class="model-picker" title=title>
            <span class="model-backend">{backend}</span>
            <select
                aria-label="Model"
                on:change=move |ev| state.model.set(event_target_value(&ev))
            >
                <option value="">{default_model}</option>
                {others
                    .into_iter()
                    .map(|m| {
                        let label = m.clone();
                        view! { <option value=m>{label}</option> }
                    })
                    .collect_view()}
            </select>
            {problem.map(|p| view! { <span class="model-problem" role="note">{p}</span> })}
        </label>
    }
}
