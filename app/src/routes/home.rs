//! `/`: where a new session begins. Opening it changes nothing on the
//! server (a link or another site's page may make a browser open it); the
//! session is made by the form's post, with its first question if one is
//! typed.

use leptos::prelude::*;

use crate::api::{HomeInfo, load_home};
use crate::components::Header;
use crate::protocol::SandboxKind;

/// `/`: a question box whose post makes the session.
#[component]
pub fn HomePage() -> impl IntoView {
    let form = NodeRef::<leptos::html::Form>::new();
    // Enter sends, as on a session's page (Shift+Enter makes a new line).
    let on_keydown = move |ev: leptos::ev::KeyboardEvent| {
        if ev.key() == "Enter" && !ev.shift_key() && !ev.is_composing() {
            ev.prevent_default();
            #[cfg(feature = "hydrate")]
            if let Some(form) = form.get() {
                let _ = form.request_submit();
            }
        }
    };
    let info = Resource::new(|| (), |()| load_home());
    view! {
        <div class="page">
            <Header/>
            <main class="home" id="main" tabindex="-1">
                <h1 class="session-title">"Ask something to start"</h1>
                <form class="prompt" aria-label="Ask" method="post" action="/sessions" node_ref=form>
                    <div class="prompt-row">
                        <textarea
                            name="message"
                            aria-label="Message"
                            placeholder="Ask in plain language, e.g. plot the primes below 1000"
                            rows="2"
                            on:keydown=on_keydown
                        ></textarea>
                        <button type="submit">"Ask"</button>
                    </div>
                </form>
                <section class="suggestions" aria-labelledby="suggestions-heading">
                    <h2 id="suggestions-heading">"Or try one of these"</h2>
                    <ul>
                        {SUGGESTIONS
                            .iter()
                            .map(|s| {
                                // Each a form of its own: it works without
                                // scripts, and the sample file goes along.
                                view! {
                                    <li>
                                        <form method="post" action="/sessions">
                                            <input type="hidden" name="message" value=s.question/>
                                            {s.sample.map(|sample| view! { <input type="hidden" name="sample" value=sample/> })}
                                            <button type="submit" class="suggestion">
                                                <span class="suggestion-label">{s.label}</span>
                                                <span class="suggestion-question">{s.question}</span>
                                            </button>
                                        </form>
                                    </li>
                                }
                            })
                            .collect_view()}
                    </ul>
                </section>
                <Suspense fallback=|| ()>
                    {move || Suspend::new(async move {
                        info.await.ok().map(|info| view! { <WhatRunsWhere info/> })
                    })}
                </Suspense>
            </main>
        </div>
    }
}

/// A first question to try.
struct Suggestion {
    label: &'static str,
    question: &'static str,
    /// A bundled sample file the session gets first (`sales`: `sales.csv`).
    sample: Option<&'static str>,
}

const SUGGESTIONS: [Suggestion; 4] = [
    Suggestion {
        label: "Analyse a sample file",
        question: "In sales.csv, which region sold the most (units × unit_price), and how did each region do month by month? Plot it.",
        sample: Some("sales"),
    },
    Suggestion {
        label: "Draw a chart",
        question: "Plot the primes below 1000",
        sample: None,
    },
    Suggestion {
        label: "Count exactly",
        question: "How many r's are in strawberry?",
        sample: None,
    },
    Suggestion {
        label: "Compute",
        question: "What is the 50th Fibonacci number, and is it prime?",
        sample: None,
    },
];

/// Which model answers and where the code runs, in a line.
#[component]
fn WhatRunsWhere(info: HomeInfo) -> impl IntoView {
    let HomeInfo { models, backends } = info;
    let model = if models.default_model.is_empty() {
        "no model".to_string()
    } else {
        let name = models
            .default_model
            .strip_suffix(".gguf")
            .unwrap_or(&models.default_model)
            .to_string();
        match models.backend.as_str() {
            "embedded" => format!("{name}, running on this server"),
            "openai" => format!("{name}, from the configured model server"),
            _ => name,
        }
    };
    let sandbox = match backends.first() {
        Some(SandboxKind::Jail) | None => "in a sandbox on this server, without network",
        Some(SandboxKind::E2b) => "in an E2B cloud sandbox",
        Some(SandboxKind::Browser) => "in your browser (Pyodide)",
    };
    view! {
        <p class="what-runs-where">
            "Answers: " <strong>{model}</strong> ". Code runs " {sandbox} "."
            {models.problem.map(|p| view! { <span class="model-problem">" " {p}</span> })}
        </p>
    }
}
