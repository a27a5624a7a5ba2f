//! The notebook's parts.

use leptos::prelude::*;
use leptos_meta::Title;

use crate::api::{ModelChoices, SessionLog, SessionSummary, SharedLog, display_title, title_from};
use crate::cells::CellView;
use crate::notebook::Notebook;
use crate::protocol::{CellKind, ClientMessage, KernelLoss, validate_ask};

/// Sends a frame to the server; false when it could not be sent.
pub type Sender = std::sync::Arc<dyn Fn(ClientMessage) -> bool + Send + Sync>;

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

/// The page's own Python (the Browser sandbox), as the header shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PyStatus {
    /// Not started: Browser is not picked.
    Off,
    /// Loading in the background; the stage it is at.
    Loading(String),
    Ready,
    Failed(String),
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
    /// The sandbox backend picked; empty for the server's default.
    pub backend: RwSignal<String>,
    /// The page's own Python, when Browser is picked.
    pub python: RwSignal<PyStatus>,
    /// Where the page loads Pyodide from, when Browser is on offer.
    pub pyodide_url: StoredValue<Option<String>>,
    /// The page's connection, once the page is hydrated.
    pub send: StoredValue<Option<Sender>>,
    /// A shared page: cells only, no controls.
    pub read_only: bool,
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
impl SessionState {
    /// The backend picked, if one was.
    pub fn picked_backend(&self) -> Option<String> {
        Some(self.backend.get_untracked()).filter(|b| !b.is_empty())
    }

    /// Sends a frame over the page's connection; false when there is none.
    pub fn send_frame(self, message: ClientMessage) -> bool {
        self.send
            .with_value(|send| send.as_ref().is_some_and(|send| send(message)))
    }
}

#[component]
pub fn SessionView(log: SessionLog) -> impl IntoView {
    let SessionLog {
        session_id,
        title,
        events,
        models,
        backends,
        backend,
        pyodide_url,
        upload_limit,
        share_path,
        share_files,
        sessions,
    } = log;
    // What the picker shows is what every ask and run says, so that a
    // reloaded page never runs code somewhere it does not show.
    let picked = if backends.contains(&backend) {
        backend
    } else if backends.len() > 1 {
        backends[0].clone()
    } else {
        String::new()
    };
    let state = SessionState {
        session_id: StoredValue::new(session_id.clone()),
        notebook: RwSignal::new(Notebook::from_events(&events)),
        conn: RwSignal::new(ConnState::Offline),
        problem: RwSignal::new(None),
        model: RwSignal::new(String::new()),
        backend: RwSignal::new(picked),
        python: RwSignal::new(PyStatus::Off),
        pyodide_url: StoredValue::new(pyodide_url),
        send: StoredValue::new(None),
        read_only: false,
    };
    provide_context(state);
    let files = crate::files::FilesState::new(upload_limit);
    provide_context(files);

    #[cfg(feature = "hydrate")]
    {
        connect(state);
        crate::files_client::watch(state, files);
    }

    // The stored title; until the list is read again, a new session is
    // named by its first question as soon as it is asked.
    let title = StoredValue::new(title);
    let heading = move || {
        state.notebook.with(|n| {
            let stored = title.get_value();
            if !stored.trim().is_empty() {
                return stored;
            }
            let first = n.cells().iter().find(|c| c.kind == CellKind::User);
            match first {
                Some(cell) => display_title(&title_from(&cell.text)).to_string(),
                None if n.last_seq() > 0 => display_title("").to_string(),
                None => "New session".to_string(),
            }
        })
    };
    view! {
        <Title text=move || format!("{} · runcell", heading())/>
        // Files dropped anywhere on the page are uploaded (never opened
        // by the browser in place of the page).
        <div
            class="page with-sidebar"
            on:dragover=move |ev| {
                #[cfg(feature = "hydrate")]
                crate::files_client::on_drag_over(files, &ev);
                #[cfg(not(feature = "hydrate"))]
                let _ = ev;
            }
            on:dragleave=move |_| files.dragging.set(false)
            on:drop=move |ev| {
                #[cfg(feature = "hydrate")]
                crate::files_client::on_drop(state, files, &ev);
                #[cfg(not(feature = "hydrate"))]
                let _ = ev;
            }
        >
            <Header>
                <ModelPicker models/>
                <BackendPicker backends/>
                <PythonIndicator/>
                <ConnectionIndicator/>
            </Header>
            <Sidebar sessions current=session_id.clone()/>
            <div class="column">
                <div class="session-bar">
                    <h1 class="session-title">{heading}</h1>
                    // Shown once there is something to share, also when the
                    // first question was asked on this page.
                    <Show when=move || state.notebook.with(|n| n.last_seq() > 0)>
                        <ShareControls
                            session_id=session_id.clone()
                            share_path=share_path.clone()
                            share_files
                        />
                    </Show>
                </div>
                <p class="notice no-js-only">"JavaScript is off: this notebook is read-only."</p>
                <main class="notebook">
                    <Cells/>
                </main>
                <KernelNotice/>
                <crate::files::FilesPanel/>
                <Prompt/>
            </div>
        </div>
    }
}

/// A shared session, read-only, with a way to fork it.
#[component]
pub fn SharedView(log: SharedLog) -> impl IntoView {
    let SharedLog {
        token,
        title,
        events,
        files,
    } = log;
    let state = SessionState {
        session_id: StoredValue::new(String::new()),
        notebook: RwSignal::new(Notebook::from_events(&events)),
        conn: RwSignal::new(ConnState::Offline),
        problem: RwSignal::new(None),
        model: RwSignal::new(String::new()),
        backend: RwSignal::new(String::new()),
        python: RwSignal::new(PyStatus::Off),
        pyodide_url: StoredValue::new(None),
        send: StoredValue::new(None),
        read_only: true,
    };
    provide_context(state);
    let offered = SharedFileLinks {
        base: format!("/s/{token}/files"),
        paths: files.iter().map(|f| f.path.clone()).collect(),
    };
    provide_context(offered);
    let heading = display_title(&title).to_string();
    view! {
        <Title text=format!("{heading} · shared · runcell")/>
        <div class="page shared">
            <Header/>
            <div class="column">
                <div class="session-bar">
                    <h1 class="session-title">{heading}</h1>
                    <form class="fork" method="post" action=format!("/s/{token}/fork")>
                        <button type="submit" class="primary">"Fork"</button>
                    </form>
                </div>
                <p class="notice shared-notice">
                    "A shared session, read-only. Fork it to get your own copy to continue; "
                    "its code can be run again there with Re-run all."
                </p>
                <main class="notebook">
                    <Cells/>
                </main>
                {(!files.is_empty()).then(|| view! { <SharedFiles files/> })}
            </div>
        </div>
    }
}

/// On a shared page: the files its link offers, and where they download.
#[derive(Clone, Debug)]
pub struct SharedFileLinks {
    /// `/s/{token}/files`
    pub base: String,
    pub paths: Vec<String>,
}

impl SharedFileLinks {
    /// Where `path` downloads, if the link offers it.
    pub fn href(&self, path: &str) -> Option<String> {
        self.paths
            .iter()
            .any(|p| p == path)
            .then(|| format!("{}?path={}", self.base, crate::files::query_value(path)))
    }
}

/// The files a share link offers, as they were when it was shared.
#[component]
fn SharedFiles(files: Vec<crate::files::FileItem>) -> impl IntoView {
    let links = expect_context::<SharedFileLinks>();
    let rows = files
        .into_iter()
        .map(|file| {
            let shown = file
                .path
                .strip_prefix("/home/user/")
                .unwrap_or(&file.path)
                .to_string();
            let href = links.href(&file.path).unwrap_or_default();
            view! {
                <li class="file-row">
                    <a class="file-name" href=href download=file.name.clone() title=format!("Download {shown}")>
                        {shown.clone()}
                    </a>
                    <span class="file-size">{crate::files::human_size(file.size)}</span>
                </li>
            }
        })
        .collect_view();
    view! {
        <section class="files shared-files" aria-label="Files">
            <div class="files-head">
                <h2>"Files"</h2>
                <span class="files-where">"as they were when the session was shared"</span>
            </div>
            <ul class="file-list">{rows}</ul>
        </section>
    }
}

/// The viewer's sessions, with rename and delete (each behind a disclosure,
/// so that both work as plain forms without JavaScript).
#[component]
fn Sidebar(sessions: Vec<SessionSummary>, current: String) -> impl IntoView {
    let count = sessions.len();
    view! {
        <details class="sidebar" open>
            <summary>"Sessions " <span class="count">{format!("({count})")}</span></summary>
            <nav aria-label="Sessions">
                <ul class="session-list">
                    {sessions
                        .into_iter()
                        .map(|s| {
                            let is_current = s.id == current;
                            view! { <SessionEntry session=s is_current/> }
                        })
                        .collect_view()}
                </ul>
                {(count == 0)
                    .then(|| view! { <p class="empty-list">"Sessions you ask something in are listed here."</p> })}
            </nav>
        </details>
    }
}

#[component]
fn SessionEntry(session: SessionSummary, is_current: bool) -> impl IntoView {
    let SessionSummary { id, title, .. } = session;
    let label = display_title(&title).to_string();
    view! {
        <li class="session-entry" class:current=is_current>
            <a
                href=format!("/sessions/{id}")
                rel="external"
                aria-current=is_current.then_some("page")
            >
                {label.clone()}
            </a>
            <details class="entry-actions">
                <summary aria-label=format!("Actions for {label}")>"⋯"</summary>
                <form class="rename" method="post" action=format!("/sessions/{id}/rename")>
                    <input
                        name="title"
                        aria-label="New title"
                        value=title
                        maxlength="200"
                        required
                    />
                    <button type="submit">"Rename"</button>
                </form>
                <details class="confirm">
                    <summary class="danger">"Delete…"</summary>
                    <p>{format!("Delete “{label}” with all its cells and outputs?")}</p>
                    <form method="post" action=format!("/sessions/{id}/delete")>
                        <button type="submit" class="danger">"Delete permanently"</button>
                    </form>
                </details>
            </details>
        </li>
    }
}

/// Whether a link offers the session's files: off unless ticked.
#[component]
fn ShareFilesBox(checked: bool) -> impl IntoView {
    view! {
        <label class="share-files" title="Readers of the link can download the session's files as they are now">
            <input type="checkbox" name="files" value="on" checked=checked/>
            " with its files"
        </label>
    }
}

/// Share: make a read-only link (with the session's files, if ticked), copy
/// it, move it on, or revoke it.
#[component]
fn ShareControls(
    session_id: String,
    share_path: Option<String>,
    share_files: bool,
) -> impl IntoView {
    let copied = RwSignal::new(false);
    match share_path {
        None => view! {
            <form class="share" method="post" action=format!("/sessions/{session_id}/share")>
                <ShareFilesBox checked=false/>
                <button type="submit">"Share"</button>
            </form>
        }
        .into_any(),
        Some(path) => {
            let copy_path = path.clone();
            let href = path.clone();
            view! {
                <div class="share shared-link" id="share">
                    <span>"Shared: "</span>
                    <a class="share-link" href=href target="_blank" rel="external">
                        {path}
                    </a>
                    <button
                        type="button"
                        class="js-only"
                        on:click=move |_| {
                            crate::cells::copy_link(&copy_path);
                            copied.set(true);
                        }
                    >
                        {move || if copied.get() { "Copied" } else { "Copy link" }}
                    </button>
                    <form method="post" action=format!("/sessions/{session_id}/share")>
                        <ShareFilesBox checked=share_files/>
                        <button type="submit" title="Include what happened since it was shared">
                            "Update link"
                        </button>
                    </form>
                    <form method="post" action=format!("/sessions/{session_id}/unshare")>
                        <button type="submit" class="danger">"Stop sharing"</button>
                    </form>
                </div>
            }
            .into_any()
        }
    }
}

/// Says so when the kernel that ran the cells above is gone, and offers to
/// rebuild it.
#[component]
fn KernelNotice() -> impl IntoView {
    let state = expect_context::<SessionState>();
    let lost = move || state.notebook.with(Notebook::kernel_lost);
    let busy = move || state.notebook.with(Notebook::is_busy);
    let connected = move || state.conn.get() == ConnState::Connected;
    let rerun = move |_| {
        if !state.send_frame(ClientMessage::RerunAll) {
            state
                .problem
                .set(Some("Not re-run: the server is not connected.".into()));
        }
    };
    view! {
        <Show when=move || lost().is_some()>
            <div class="kernel-lost" role="status">
                <p>
                    {move || match lost() {
                        Some(KernelLoss::Fork) => {
                            "This is a fork: its cells were copied, not run here, so none of their variables exist yet."
                        }
                        _ => {
                            "The server restarted since these cells ran, and their kernel with it: variables from the cells above are gone."
                        }
                    }}
                    " Re-run all runs the code cells that succeeded again, in order, in a fresh kernel."
                </p>
                <button
                    type="button"
                    class="primary js-only"
                    disabled=move || busy() || !connected()
                    on:click=rerun
                >
                    "Re-run all"
                </button>
            </div>
        </Show>
    }
}

/// Where the code runs, when the server offers more than the local jail.
/// A change takes effect with the next question or run, in a fresh kernel.
#[component]
fn BackendPicker(backends: Vec<String>) -> impl IntoView {
    let state = expect_context::<SessionState>();
    (backends.len() > 1).then(|| {
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

/// The page's own Python, while Browser is picked: loading, ready, or why
/// it could not start.
#[component]
fn PythonIndicator() -> impl IntoView {
    let state = expect_context::<SessionState>();
    let python = state.python;
    let text = move || match python.get() {
        PyStatus::Off => String::new(),
        PyStatus::Loading(stage) => format!("Python: {stage}…"),
        PyStatus::Ready => "Python ready".to_string(),
        PyStatus::Failed(why) => format!("Python failed: {why}"),
    };
    let kind = move || match python.get() {
        PyStatus::Off => "off",
        PyStatus::Loading(_) => "loading",
        PyStatus::Ready => "ready",
        PyStatus::Failed(_) => "failed",
    };
    view! {
        <span
            class="python-status"
            role="status"
            aria-label="Python in this page"
            data-state=kind
            hidden=move || python.get() == PyStatus::Off
        >
            {text}
        </span>
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
        </section>
    }
}

/// Connects the page to its session (in the browser only): the socket, the
/// sender the controls use, and the auto-scroll.
#[cfg(feature = "hydrate")]
fn connect(state: SessionState) {
    let client = crate::ws_client::WsClient::start(state);
    let sender: Sender = std::sync::Arc::new(move |message| client.send(&message));
    state.send.set_value(Some(sender));
    // The page's Python loads in the background as soon as Browser is
    // picked, so that it is ready when the first program comes.
    Effect::new(move |_| {
        if state.backend.get() == "browser" {
            crate::page_python::start(state);
        }
    });
    on_cleanup(crate::page_python::shut);
    crate::ws_client::watch_scrolling();
    Effect::new(move |_| {
        state.notebook.track();
        crate::ws_client::follow_bottom();
    });
}

/// The message box. Enter sends; Shift+Enter starts a new line.
#[component]
fn Prompt() -> impl IntoView {
    let state = expect_context::<SessionState>();
    let draft = RwSignal::new(String::new());
    let connected = move || state.conn.get() == ConnState::Connected;
    let busy = move || state.notebook.with(Notebook::is_busy);
    let send = move |text: String| {
        let model = Some(state.model.get_untracked()).filter(|m| !m.is_empty());
        let backend = state.picked_backend();
        state.send_frame(ClientMessage::Ask {
            text,
            model,
            backend,
        })
    };
    let stop = move || {
        if !state.send_frame(ClientMessage::Stop) {
            state
                .problem
                .set(Some("Not stopped: the server is not connected.".into()));
        }
    };

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
                <button
                    type="button"
                    class="stop js-only"
                    hidden=move || !busy()
                    disabled=move || !connected()
                    on:click=move |_| stop()
                >
                    "Stop"
                </button>
                <button type="submit" class="primary" disabled=move || !connected()>
                    "Send"
                </button>
            </div>
        </form>
    }
}
