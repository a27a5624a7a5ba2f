//! One session's reactive state, shared by the parts of its page.

use leptos::prelude::*;

use crate::notebook::Notebook;
use crate::protocol::{ClientMessage, SandboxKind, SessionEvent};

/// The message box's element id: the session page's skip link leads there.
pub const MESSAGE_ID: &str = "message";

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
    pub fn label(self) -> &'static str {
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
    /// The sandbox backend picked; `None` for the server's default (no
    /// choice on offer, or a share link's page).
    pub backend: RwSignal<Option<SandboxKind>>,
    /// The page's own Python, when Browser is picked.
    pub python: RwSignal<PyStatus>,
    /// Where the page loads Pyodide from, when Browser is on offer.
    pub pyodide_url: StoredValue<Option<String>>,
    /// The page's connection, once the page is hydrated.
    pub send: StoredValue<Option<Sender>>,
    /// A share link's page: cells only, no controls.
    pub read_only: bool,
    /// Whether the view follows new output (the reader is at the bottom).
    pub following: RwSignal<bool>,
    /// Cells that arrived while the reader looked elsewhere.
    pub unseen: RwSignal<usize>,
}

impl SessionState {
    /// A session of the viewer's, its cells folded from `events`. The
    /// sandbox picked is the one its programs run on (`backend`) when it is
    /// on offer.
    pub fn live(
        session_id: String,
        events: &[SessionEvent],
        backends: &[SandboxKind],
        backend: Option<SandboxKind>,
        pyodide_url: Option<String>,
    ) -> Self {
        Self {
            session_id: StoredValue::new(session_id),
            notebook: RwSignal::new(Notebook::from_events(events)),
            conn: RwSignal::new(ConnState::Offline),
            problem: RwSignal::new(None),
            model: RwSignal::new(String::new()),
            backend: RwSignal::new(picked_backend(backends, backend)),
            python: RwSignal::new(PyStatus::Off),
            pyodide_url: StoredValue::new(pyodide_url),
            send: StoredValue::new(None),
            read_only: false,
            following: RwSignal::new(true),
            unseen: RwSignal::new(0),
        }
    }

    /// A session seen through a share link: its cells, and nothing to send.
    pub fn for_share_link(events: &[SessionEvent]) -> Self {
        Self {
            session_id: StoredValue::new(String::new()),
            notebook: RwSignal::new(Notebook::from_events(events)),
            conn: RwSignal::new(ConnState::Offline),
            problem: RwSignal::new(None),
            model: RwSignal::new(String::new()),
            backend: RwSignal::new(None),
            python: RwSignal::new(PyStatus::Off),
            pyodide_url: StoredValue::new(None),
            send: StoredValue::new(None),
            read_only: true,
            following: RwSignal::new(true),
            unseen: RwSignal::new(0),
        }
    }

    /// The backend picked, if one was.
    /// The model picked for the next question; `None` for the default.
    pub fn picked_model(&self) -> Option<String> {
        Some(self.model.get_untracked()).filter(|m| !m.is_empty())
    }

    pub fn picked_backend(&self) -> Option<SandboxKind> {
        self.backend.get_untracked()
    }

    /// Whether the session's programs run in this page's Python (tracked).
    pub fn runs_in_page(&self) -> bool {
        self.backend.get() == Some(SandboxKind::Browser)
    }

    /// Sends a frame over the page's connection; false when there is none.
    pub fn send_frame(self, message: ClientMessage) -> bool {
        self.send
            .with_value(|send| send.as_ref().is_some_and(|send| send(message)))
    }
}

/// What the sandbox picker shows first. It is what every ask and run says,
/// so that a reloaded page never runs code somewhere it does not show: the
/// session's backend when it is on offer, else the default when there is a
/// choice, else nothing (the server's default).
fn picked_backend(backends: &[SandboxKind], backend: Option<SandboxKind>) -> Option<SandboxKind> {
    match backend {
        Some(kind) if backends.contains(&kind) => Some(kind),
        _ if backends.len() > 1 => Some(backends[0]),
        _ => None,
    }
}

/// Makes `state` the page's session; returns it.
pub fn provide_session(state: SessionState) -> SessionState {
    provide_context(state);
    state
}

/// The page's session (a component under a session or share link page).
pub fn use_session() -> SessionState {
    expect_context::<SessionState>()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_picker_shows_where_the_code_runs() {
        use SandboxKind::{Browser, E2b, Jail};
        let cases: [(&[SandboxKind], _, _); 5] = [
            (&[Jail, Browser], Some(Browser), Some(Browser)),
            (&[Jail, Browser], Some(E2b), Some(Jail)),
            (&[Jail, Browser], None, Some(Jail)),
            (&[Jail], Some(E2b), None),
            (&[], None, None),
        ];
        for (backends, backend, shown) in cases {
            assert_eq!(
                picked_backend(backends, backend),
                shown,
                "{backends:?} {backend:?}"
            );
        }
    }
}
