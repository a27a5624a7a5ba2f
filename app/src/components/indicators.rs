//! The page's status: the page's own Python, the connection, and the turn
//! as a screen reader hears it.

use leptos::prelude::*;

use crate::contexts::{PyStatus, use_session};
use crate::notebook::Notebook;
use crate::protocol::{CellKind, CellStatus, TurnStatus};

/// The page's own Python, while Browser is picked: loading, ready, or why
/// it could not start.
#[component]
pub fn PythonIndicator() -> impl IntoView {
    let state = use_session();
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
            // What the page's Python says matters only while programs run
            // there: another sandbox picked, it is not shown.
            hidden=move || python.get() == PyStatus::Off || !state.runs_in_page()
        >
            {text}
        </span>
    }
}

#[component]
pub fn ConnectionIndicator() -> impl IntoView {
    let state = use_session();
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

/// What a screen reader hears as a turn goes (a polite live region): that
/// the answer is being written, that its code runs, and how the turn ended.
#[component]
pub fn TurnAnnouncer() -> impl IntoView {
    let state = use_session();
    let notebook = state.notebook;
    let said = move || notebook.with(announcement);
    view! {
        <p class="visually-hidden" role="status" aria-live="polite" aria-atomic="true">
            {said}
        </p>
    }
}

/// The last turn's phase in words; nothing before the first question.
fn announcement(notebook: &Notebook) -> String {
    let Some(turn) = notebook.turns().last() else {
        return String::new();
    };
    match turn.status {
        None => {
            let running = notebook
                .cells_of(turn.id)
                .last()
                .is_some_and(|c| c.kind == CellKind::Result && c.status == CellStatus::Streaming);
            if running {
                "Running the code…".into()
            } else {
                "Writing the answer…".into()
            }
        }
        Some(TurnStatus::Ok) => "The answer is ready.".into(),
        Some(TurnStatus::Cancelled) => "Stopped.".into(),
        Some(TurnStatus::Error) => {
            let why = notebook
                .cells_of(turn.id)
                .filter_map(|c| c.error.as_ref())
                .last()
                .map(|e| format!(": {}", e.message))
                .unwrap_or_default();
            format!("The turn failed{why}")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::{EventBody, SessionEvent, TurnId, TurnKind};

    fn event(seq: u64, event: EventBody) -> SessionEvent {
        SessionEvent {
            seq,
            ts_ms: 0,
            event,
        }
    }

    #[test]
    fn a_turn_is_announced_as_it_starts_and_ends() {
        let mut notebook = Notebook::default();
        assert_eq!(announcement(&notebook), "");
        notebook.apply(&event(
            1,
            EventBody::TurnStarted {
                turn: TurnId(1),
                turn_kind: TurnKind::Ask,
            },
        ));
        assert_eq!(announcement(&notebook), "Writing the answer…");
        notebook.apply(&event(
            2,
            EventBody::TurnFinished {
                turn: TurnId(1),
                status: TurnStatus::Ok,
                elapsed_ms: 10,
                final_cell: None,
            },
        ));
        assert_eq!(announcement(&notebook), "The answer is ready.");
    }
}
