//! The page's status: the page's own Python, the connection, and the turn
//! as a screen reader hears it.

use leptos::prelude::*;

use crate::contexts::{PyStatus, use_session};
use crate::notebook::{Notebook, Phase};
use crate::protocol::TurnStatus;

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
            // A narrow row cuts a long stage short: the whole of it.
            title=text
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
        // A page without scripts has no link to lose: no dot.
        <span
            class="conn js-only"
            role="status"
            aria-label="Connection"
            data-state=move || format!("{:?}", conn.get()).to_lowercase()
        >
            <span class="dot" aria-hidden="true"></span>
            {move || conn.get().label()}
        </span>
    }
}

/// What the open turn is doing, with the seconds it has been at it, where
/// its next output will appear: from Enter on, never a silent wait. (The
/// announcer below says the phase to screen readers; this is what is seen.)
#[component]
pub fn TurnPhase() -> impl IntoView {
    let state = use_session();
    let notebook = state.notebook;
    let phase = Memo::new(move |_| notebook.with(Notebook::phase));
    // When the phase began: the server's time of the event that began it
    // (so a reload keeps counting), or when the page saw it begin for a
    // history without times; and the clock's tick while a phase shows.
    let since = RwSignal::new(0.0_f64);
    let now = RwSignal::new(0.0_f64);
    #[cfg(feature = "hydrate")]
    {
        Effect::new(move |_| {
            phase.track();
            let t = js_sys::Date::now();
            let recorded = notebook.with_untracked(Notebook::phase_since_ms) as f64;
            // A clock far from the server's (or no time at all): the page's.
            since.set(if recorded > 0.0 && (t - recorded).abs() < 3_600_000.0 {
                recorded.min(t)
            } else {
                t
            });
            now.set(t);
        });
        let tick = set_interval_with_handle(
            move || {
                if phase.with_untracked(Option::is_some) {
                    now.set(js_sys::Date::now());
                }
            },
            std::time::Duration::from_millis(1000),
        );
        on_cleanup(move || {
            if let Ok(tick) = tick {
                tick.clear();
            }
        });
    }
    let seconds = move || {
        let elapsed = ((now.get() - since.get()) / 1000.0).floor();
        (elapsed >= 1.0).then(|| format!(" · {elapsed} s"))
    };
    view! {
        <Show when=move || phase.get().is_some()>
            <div class="turn-phase" data-phase=move || phase.get().map(Phase::name)>
                <span class="spinner" aria-hidden="true"></span>
                <span class="turn-phase-label">
                    {move || phase.get().map(|p| format!("{}…", p.label()))}
                </span>
                <span class="turn-phase-time" aria-hidden="true">{seconds}</span>
            </div>
        </Show>
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
    let Some(turn) = notebook.turns().next_back() else {
        return String::new();
    };
    match turn.status {
        None => format!(
            "{}…",
            notebook.phase().unwrap_or(Phase::WaitingForModel).label()
        ),
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
                alternative_to: None,
            },
        ));
        assert_eq!(announcement(&notebook), "Waiting for the model…");
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
