//! The sidebar: the viewer's sessions.

use leptos::prelude::*;

use crate::api::{SessionSummary, display_title};

/// The viewer's sessions, with rename and delete (each behind a disclosure,
/// so that both work as plain forms without JavaScript).
#[component]
pub fn Sidebar(sessions: Vec<SessionSummary>, current: String) -> impl IntoView {
    let count = sessions.len();
    view! {
        // Closed as sent: on wide screens the list shows as a column
        // anyway (CSS); on narrow ones the summary opens it as a drawer.
        <details class="sidebar">
            <summary>"Sessions " <span class="count">{format!("({count})")}</span></summary>
            <nav aria-label="Sessions">
                <ul class="session-list">
                    {sessions
                        .into_iter()
                        .map(move |s| {
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
