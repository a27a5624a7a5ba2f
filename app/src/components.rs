//! The notebook's parts.

use leptos::prelude::*;

use crate::api::{ModelChoices, SessionLog};
use crate::notebook::Notebook;
use crate::protocol::{CellId, CellKind, CellStatus, validate_ask};

/// The page's link to the server.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConnState {
    /// Not connected: before hydration, with JavaScript off, or after a failure.
    Offline,
    Connecting,
    Connected,
}

impl ConnState {
    fn label(self) -> &'static str {
        match self {
            Self::Offline => "offline",
            Self::Connecting => "connecting…",
            Self::Connected => "connected",
        }
    }
}

/// The page's reactive state for one session, shared by its parts.
#[derive(Clone, Copy)]
pub struct SessionState {
    pub session_id: StoredValue<String>,
    pub notebook: RwSignal<Notebook>,
    pub conn: RwSignal<ConnState>,
    /// The last problem to show the person (a refused message, a lost link).
    pub problem: RwSignal<Option<String>>,
    /// The model picked for the next question; empty for the default.
    pub model: RwSignal<String>,
}

#[component]
pub fn Header(#[prop(optional)] children: Option<Children>) -> impl IntoView {
    view! {
        <header class="topbar">
            <a class="brand" href="/" rel="external">"runcell"</a>
            <nav class="actions">
                <a href="/" rel="external" class="new-session">"New session"</a>
                {children.map(|c| c())}
            </nav>
        </header>
    }
}

/// A live notebook: the cells so far, then whatever the WebSocket brings.
#[component]
pub fn SessionView(log: SessionLog) -> impl IntoView {
    let SessionLog {
        session_id,
        events,
        models,
    } = log;
    let state = SessionState {
        session_id: StoredValue::new(session_id),
        notebook: RwSignal::new(Notebook::from_events(&events)),
        conn: RwSignal::new(ConnState::Offline),
        problem: RwSignal::new(None),
        model: RwSignal::new(String::new()),
    };
    provide_context(state);

    #[cfg(feature = "hydrate")]
    let client = crate::ws_client::WsClient::start(state);
    #[cfg(feature = "hydrate")]
    let send = move |text: String| {
        let model = Some(state.model.get_untracked()).filter(|m| !m.is_empty());
        client.send_ask(&text, model)
    };
    #[cfg(not(feature = "hydrate"))]
    let send = move |_text: String| false;
    #[cfg(feature = "hydrate")]
    Effect::new(move |_| {
        state.notebook.track();
        crate::ws_client::follow_bottom();
    });

    view! {
        <div class="page">
            <Header>
                <ModelPicker models/>
                <ConnectionIndicator/>
            </Header>
            <p class="notice no-js-only">"JavaScript is off: this notebook is read-only."</p>
            <main class="notebook">
                <Cells/>
            </main>
            <Prompt send/>
        </div>
    }
}

/// Which model answers: the backend's list, the default first.
#[component]
fn ModelPicker(models: ModelChoices) -> impl IntoView {
    let state = expect_context::<SessionState>();
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

#[component]
fn ConnectionIndicator() -> impl IntoView {
    let state = expect_context::<SessionState>();
    let conn = state.conn;
    view! {
        <span
            class="conn"
            role="status"
            aria-label="Connection"
            data-state=move || format!("{:?}", conn.get()).to_lowercase()
        >
            <span class="dot" aria-hidden="true"></span>
            {move || conn.get().label()}
        </span>
    }
}

#[component]
fn Cells() -> impl IntoView {
    let state = expect_context::<SessionState>();
    let notebook = state.notebook;
    let ids = move || notebook.with(|n| n.cells().iter().map(|c| c.id).collect::<Vec<_>>());
    let empty = move || notebook.with(|n| n.cells().is_empty());

    view! {
        <section class="cells" aria-label="Conversation">
            <Show when=empty>
                <p class="empty">"Ask something to start: the answer streams in here."</p>
            </Show>
            <For each=ids key=|id| *id let:id>
                <CellView id/>
            </For>
        </section>
    }
}

#[component]
fn CellView(id: CellId) -> impl IntoView {
    let state = expect_context::<SessionState>();
    let notebook = state.notebook;
    let cell = Memo::new(move |_| notebook.with(|n| n.cell(id).cloned()));
    let kind = notebook.with_untracked(|n| n.cell(id).map(|c| c.kind));
    let (class, label) = match kind {
        Some(CellKind::User) => ("cell cell-user", "You"),
        Some(CellKind::Answer) | None => ("cell cell-answer", "Answer"),
    };
    let text = move || cell.with(|c| c.as_ref().map(|c| c.text.clone()).unwrap_or_default());
    let status = move || cell.with(|c| c.as_ref().map(|c| c.status));
    let status_label = move || match status() {
        Some(CellStatus::Streaming) => "streaming".to_string(),
        Some(CellStatus::Ok) => cell.with(|c| match c.as_ref().and_then(|c| c.elapsed_ms) {
            Some(ms) => format!("ok · {:.1} s", ms as f64 / 1000.0),
            None => String::new(),
        }),
        Some(CellStatus::Error) => "error".to_string(),
        Some(CellStatus::Cancelled) => "cancelled".to_string(),
        None => String::new(),
    };

    view! {
        <article
            class=class
            aria-label=label
            data-cell-id=id.to_string()
            data-status=move || status().map(|s| format!("{s:?}").to_lowercase())
        >
            <div class="cell-head">
                <span class="cell-kind">{label}</span>
                <span class="cell-status">{status_label}</span>
            </div>
            <div class="cell-body">{text}</div>
            {move || {
                cell.with(|c| c.as_ref().and_then(|c| c.error.clone()))
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

/// The message box. Enter sends; Shift+Enter starts a new line.
#[component]
fn Prompt(send: impl Fn(String) -> bool + Copy + Send + Sync + 'static) -> impl IntoView {
    let state = expect_context::<SessionState>();
    let draft = RwSignal::new(String::new());
    let connected = move || state.conn.get() == ConnState::Connected;

    // Returns whether the message left; the draft is kept whenever it did not.
    let submit = move || {
        let text = draft.get_untracked();
        if let Err(err) = validate_ask(&text) {
            state.problem.set(Some(format!("Not sent: {err}.")));
            return;
        }
        if send(text) {
            draft.set(String::new());
            state.problem.set(None);
        } else {
            state
                .problem
                .set(Some("Not sent: the server is not connected.".into()));
        }
    };

    view! {
        <form
            class="prompt"
            aria-label="Ask"
            on:submit=move |ev| {
                ev.prevent_default();
                submit();
            }
        >
            <p class="problem-line" role="alert">{move || state.problem.get()}</p>
            <div class="prompt-row">
                <textarea
                    name="message"
                    aria-label="Message"
                    placeholder="Ask in plain language, e.g. plot the primes below 1000"
                    rows="2"
                    prop:value=move || draft.get()
                    on:input=move |ev| draft.set(event_target_value(&ev))
                    on:keydown=move |ev| {
                        if ev.key() == "Enter" && !ev.shift_key() && !ev.is_composing() {
                            ev.prevent_default();
                            submit();
                        }
                    }
                ></textarea>
                <button type="submit" disabled=move || !connected()>
                    "Send"
                </button>
            </div>
        </form>
    }
}
