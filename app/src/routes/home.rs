//! `/`: where a new session begins. Opening it changes nothing on the
//! server (a link or another site's page may make a browser open it); the
//! session is made by the form's post, with its first question if one is
//! typed.

use leptos::prelude::*;

use crate::components::Header;

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
                // Said by the server; the page keeps its words as they are.
                <p class="what-runs-where" inner_html=what_runs_where()></p>
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

/// Which model answers and where the code runs, in a line of markup: made
/// on the server from its ports; in the page, where hydration keeps the
/// server's markup as it is, nothing.
fn what_runs_where() -> String {
    #[cfg(feature = "ssr")]
    {
        use crate::api::ports::{ArcModelCatalog, ArcSandboxChoices};
        use crate::protocol::SandboxKind;
        use crate::render::markdown::escape;

        let models = use_context::<ArcModelCatalog>()
            .map(|catalog| catalog.choices())
            .unwrap_or_default();
        let backends = use_context::<ArcSandboxChoices>()
            .map(|sandboxes| sandboxes.backends())
            .unwrap_or_default();
        let name = crate::components::model_short_name(&models.default_model);
        let model = match (name.is_empty(), models.backend.as_str()) {
            (true, _) => "no model".to_string(),
            (false, "embedded") => format!("{name}, running on this server"),
            (false, "openai") => format!("{name}, from the configured model server"),
            (false, _) => name,
        };
        let sandbox = match backends.first() {
            Some(SandboxKind::Jail) | None => "in a sandbox on this server, without network",
            Some(SandboxKind::E2b) => "in an E2B cloud sandbox",
            Some(SandboxKind::Browser) => "in your browser (Pyodide)",
        };
        let problem = models
            .problem
            .map(|p| format!(" <span class=\"model-problem\">{}</span>", escape(&p)))
            .unwrap_or_default();
        format!(
            "Answers: <strong>{}</strong>. Code runs {sandbox}.{problem}",
            escape(&model)
        )
    }
    #[cfg(not(feature = "ssr"))]
    String::new()
}
