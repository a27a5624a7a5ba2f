//! The sidebar: the viewer's sessions, kept current without a reload: the
//! session joins the list with its first question, and a rename shows at
//! once, here and in the page's heading.

use leptos::prelude::*;

use crate::api::{AccountMenu, SessionSummary, display_title};
use crate::contexts::use_session;

/// The viewer's sessions, with rename and delete (each behind a disclosure,
/// so that both work as plain forms without JavaScript). `title` is the
/// current session's stored title and `heading` what the page calls it.
#[component]
pub fn Sidebar(
    sessions: Vec<SessionSummary>,
    current: String,
    title: RwSignal<String>,
    #[prop(into)] heading: Signal<String>,
    account: AccountMenu,
) -> impl IntoView {
    let state = use_session();
    let listed = RwSignal::new(sessions);
    let current = StoredValue::new(current);
    let asked = move || state.notebook.with(|n| n.first_question().is_some());
    // The list as the server gave it, with this session first once it has
    // a question (the server lists only sessions with one).
    let entries = Memo::new(move |_| {
        let mut list = listed.get();
        let id = current.get_value();
        if asked() && !list.iter().any(|s| s.id == id) {
            list.insert(
                0,
                SessionSummary {
                    id,
                    title: String::new(),
                    updated_ms: 0,
                },
            );
        }
        list
    });
    let count = move || entries.with(Vec::len);
    // Sessions whose title holds what is typed in the search box.
    let query = RwSignal::new(String::new());
    let shown = move || {
        let wanted = query.with(|q| q.trim().to_lowercase());
        let id = current.get_value();
        entries.with(|list| {
            list.iter()
                .filter(|s| {
                    wanted.is_empty() || {
                        let title = if s.id == id {
                            heading.get()
                        } else {
                            display_title(&s.title).to_string()
                        };
                        title.to_lowercase().contains(&wanted)
                    }
                })
                .cloned()
                .collect::<Vec<_>>()
        })
    };
    view! {
        // Closed as sent: on wide screens the list shows as a column
        // anyway (CSS); on narrow ones the summary opens it as a drawer.
        <details class="sidebar">
            <summary>"Sessions " <span class="count">{move || format!("({})", count())}</span></summary>
            // On a narrow screen all of it is the drawer, above its backdrop:
            // the kernels' buttons and the account's too, not the list alone.
            <div class="sidebar-drawer">
                <nav aria-label="Sessions">
                    <input
                        type="search"
                        class="session-search js-only"
                        aria-label="Search sessions"
                        placeholder="Search sessions"
                        prop:value=move || query.get()
                        on:input=move |ev| query.set(event_target_value(&ev))
                    />
                    <ul class="session-list">
                        <For each=shown key=|s| s.id.clone() let:session>
                            <SessionEntry
                                is_current=session.id == current.get_value()
                                updated_ms=session.updated_ms
                                id=session.id
                                listed
                                title
                                heading
                            />
                        </For>
                    </ul>
                    <Show when=move || count() == 0>
                        <p class="empty-list">"Sessions you ask something in are listed here."</p>
                    </Show>
                </nav>
                <super::kernels::KernelsInUse current=current.get_value()/>
                // A code for `runcell chat --join`: the terminal becomes this
                // browser's owner, so both list the same sessions.
                <form method="post" action="/terminal" target="_blank" class="to-terminal">
                    <button type="submit">"Use in a terminal"</button>
                </form>
                <Account menu=account back=format!("/sessions/{}", current.get_value())/>
            </div>
        </details>
    }
}

/// Who is signed in, with sign-out and (for admins) the admin page; or a
/// sign-in link when the server offers one. Plain links and forms; the
/// links are to the server's own pages, not the router's (`rel="external"`:
/// a hydrated page loads them, never routes to them).
#[component]
fn Account(
    menu: AccountMenu,
    /// This page, to come back to after signing in (a session id has only
    /// letters, digits and `-`, nothing to escape in a query).
    back: String,
) -> impl IntoView {
    match menu.name {
        Some(name) => view! {
            <div class="account" role="group" aria-label="Account">
                <p class="account-name">"Signed in as " <strong>{name}</strong></p>
                {menu.admin.then(|| view! { <a class="account-admin" href="/admin" rel="external">"Admin"</a> })}
                <a class="account-keys" href="/account" rel="external">"Your API keys"</a>
                <form method="post" action="/logout" class="account-signout">
                    <button type="submit">"Sign out"</button>
                </form>
            </div>
        }
        .into_any(),
        None if menu.sign_in => view! {
            <div class="account" role="group" aria-label="Account">
                <a class="account-signin" href=format!("/login?next={back}") rel="external">"Sign in"</a>
            </div>
        }
        .into_any(),
        None => ().into_any(),
    }
}

#[component]
fn SessionEntry(
    id: String,
    is_current: bool,
    /// When it last changed (0: not known, as for a session just asked).
    updated_ms: u64,
    listed: RwSignal<Vec<SessionSummary>>,
    title: RwSignal<String>,
    heading: Signal<String>,
) -> impl IntoView {
    let id = StoredValue::new(id);
    let label = move || {
        if is_current {
            heading.get()
        } else {
            listed.with(|l| {
                l.iter()
                    .find(|s| s.id == id.get_value())
                    .map(|s| display_title(&s.title).to_string())
                    .unwrap_or_default()
            })
        }
    };
    let draft = RwSignal::new(label());
    let problem = RwSignal::new(None::<String>);
    let actions = NodeRef::<leptos::html::Details>::new();
    let link = NodeRef::<leptos::html::A>::new();
    let renamed = move |kept: String| {
        listed.update(|l| {
            if let Some(s) = l.iter_mut().find(|s| s.id == id.get_value()) {
                s.title = kept.clone();
            }
        });
        if is_current {
            title.set(kept.clone());
        }
        draft.set(kept);
        problem.set(None);
        if let Some(actions) = actions.get_untracked() {
            actions.set_open(false);
        }
        if let Some(link) = link.get_untracked() {
            let _ = link.focus();
        }
    };
    let submit = move |ev: leptos::ev::SubmitEvent| {
        #[cfg(feature = "hydrate")]
        {
            let sent = crate::browser::sessions::rename(
                &id.get_value(),
                &draft.get_untracked(),
                move |answer| match answer {
                    Ok(kept) => renamed(kept),
                    Err(why) => problem.set(Some(format!("Not renamed: {why}."))),
                },
            );
            // Without a request to send, the form posts as it would without
            // scripts.
            if sent {
                ev.prevent_default();
            }
        }
        #[cfg(not(feature = "hydrate"))]
        let _ = (ev, renamed);
    };
    view! {
        <li class="session-entry" class:current=is_current>
            <a
                href=format!("/sessions/{}", id.get_value())
                rel="external"
                node_ref=link
                aria-current=is_current.then_some("page")
            >
                {label}
            </a>
            {(updated_ms > 0).then(|| {
                // Rendered in UTC (the server knows no reader's zone), then
                // the reader's own day once the page is live.
                let day = RwSignal::new(crate::render::dates::iso_day(updated_ms));
                #[cfg(feature = "hydrate")]
                Effect::new(move |_| day.set(crate::render::dates::local_day(updated_ms)));
                view! { <time class="session-date" datetime=move || day.get()>{move || day.get()}</time> }
            })}
            <details class="entry-actions" node_ref=actions>
                <summary aria-label=move || format!("Actions for {}", label())>"⋯"</summary>
                <form
                    class="rename"
                    method="post"
                    action=format!("/sessions/{}/rename", id.get_value())
                    on:submit=submit
                >
                    <input
                        name="title"
                        aria-label="New title"
                        prop:value=move || draft.get()
                        value=draft.get_untracked()
                        on:input=move |ev| draft.set(event_target_value(&ev))
                        maxlength="200"
                        required
                    />
                    <button type="submit">"Rename"</button>
                    <p class="form-problem" role="alert">{move || problem.get()}</p>
                </form>
                <details class="confirm">
                    <summary class="danger">"Delete…"</summary>
                    <p>{move || format!("Delete “{}” with all its cells and outputs?", label())}</p>
                    <form method="post" action=format!("/sessions/{}/delete", id.get_value())>
                        <button type="submit" class="danger">"Delete permanently"</button>
                    </form>
                </details>
            </details>
        </li>
    }
}
