//! The header's status: the page's own Python and the connection.

use leptos::prelude::*;

use crate::contexts::{PyStatus, use_session};

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
            hidden=move || python.get() == PyStatus::Off
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
