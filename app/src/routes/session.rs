//! `/sessions/{id}`: one conversation, live.

use leptos::prelude::*;

use crate::api::{SessionPageData, display_title, title_after_edit, title_from};
use crate::components::{
    BackendPicker, Cells, ConnectionIndicator, FilesPanel, Header, KernelNotice, LoadProblem,
    ModelPicker, PageTitle, Prompt, PythonIndicator, ShareControls, Sidebar, TurnAnnouncer,
};
use crate::contexts::{SessionState, provide_files, provide_session};
use crate::notebook::Notebook;
use runcell_protocol::{CellKind, TurnId};

/// `/sessions/{id}`: one conversation.
#[cfg(any(feature = "ssr", not(feature = "hydrate")))]
#[component]
pub fn SessionPage() -> impl IntoView {
    use crate::api::SessionLoad;
    use crate::components::problem_of;

    let params = leptos_router::hooks::use_params_map();
    let session_id = move || params.read().get("id").unwrap_or_default();
    // The server reads the session and sends it with the page (the route
    // is rendered whole before it is sent); the browser reads it from
    // there (`SessionLoad`, by hand: no serde readers for it).
    let log = Resource::new_str(session_id, |id| async move {
        SessionLoad(crate::api::load_session(id).await)
    });

    view! {
        <Suspense fallback=|| view! { <p class="loading">"Loading the session…"</p> }>
            <ErrorBoundary fallback=|errors| {
                view! { <LoadProblem heading=PROBLEM_HEADING why=problem_of(&errors)/> }
            }>
                {move || Suspend::new(async move {
                    log.await.0.map(|log| view! { <SessionView log/> })
                })}
            </ErrorBoundary>
        </Suspense>
    }
}

/// The browser's side of `/sessions/{id}`: the data the server sent with
/// the page, read once as hydration reaches it (`browser::page_data`), so
/// the bundle has no resource, suspense or asynchronous view code. The
/// markup is the server's: neither the suspense nor the error boundary
/// writes any of its own.
#[cfg(all(feature = "hydrate", not(feature = "ssr")))]
#[component]
pub fn SessionPage() -> impl IntoView {
    match crate::browser::page_data::served_session() {
        Ok(log) => view! { <SessionView log/> }.into_any(),
        Err(error) => {
            view! { <LoadProblem heading=PROBLEM_HEADING why=error.to_string()/> }.into_any()
        }
    }
}

/// What a session page that cannot be shown says.
const PROBLEM_HEADING: &str = "This session cannot be opened";

/// A live notebook: the cells so far, then whatever the WebSocket brings.
#[component]
pub fn SessionView(log: SessionPageData) -> impl IntoView {
    let SessionPageData {
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
        account,
    } = log;
    let state = provide_session(SessionState::live(
        session_id.clone(),
        &events,
        &backends,
        backend,
        pyodide_url,
    ));
    let files = provide_files(upload_limit);

    #[cfg(feature = "hydrate")]
    crate::browser::connect(state, files);

    // The stored title (a rename in the sidebar changes it); until then a
    // new session is named by its first question as soon as it is asked.
    let title = RwSignal::new(title);
    // An edited first question (a newer turn asking it) renames the session
    // by the server's rule, so the heading follows it without a reload;
    // showing an older version of the question renames nothing.
    let first = Memo::new(move |_| {
        state.notebook.with(|n| {
            n.cells()
                .find(|c| c.kind == CellKind::User)
                .map(|c| (c.turn, c.text.clone()))
        })
    });
    // The first question seen last is kept while none shows: an edit's new
    // branch is on show a moment before its question arrives.
    Effect::new(move |seen: Option<Option<(Option<TurnId>, String)>>| {
        let seen = seen.flatten();
        let now = first.get();
        if let (Some((asked, question)), Some((edited, edit))) = (&seen, &now)
            && edited > asked
            && let Some(renamed) = title_after_edit(&title.get_untracked(), question, edit)
        {
            title.set(renamed);
        }
        now.or(seen)
    });
    let heading = move || {
        state.notebook.with(|n| {
            let stored = title.get();
            if !stored.trim().is_empty() {
                return stored;
            }
            match n.first_question() {
                Some(question) => display_title(&title_from(question)).to_string(),
                None if n.last_seq() > 0 => display_title("").to_string(),
                None => "New session".to_string(),
            }
        })
    };
    let notebook_href = StoredValue::new(format!("/api/sessions/{session_id}/notebook.ipynb"));
    view! {
        <PageTitle text=Signal::derive(move || format!("{} · runcell", heading()))/>
        // Files dropped anywhere on the page are uploaded (never opened
        // by the browser in place of the page).
        <div
            class="page with-sidebar"
            on:dragover=move |ev| {
                #[cfg(feature = "hydrate")]
                crate::browser::files::on_drag_over(files, &ev);
                #[cfg(not(feature = "hydrate"))]
                let _ = ev;
            }
            on:dragleave=move |_| files.dragging.set(false)
            on:drop=move |ev| {
                #[cfg(feature = "hydrate")]
                crate::browser::files::on_drop(state, files, &ev);
                #[cfg(not(feature = "hydrate"))]
                let _ = ev;
            }
        >
            <Header skip_to_message=true>
                <ModelPicker models/>
                <BackendPicker backends/>
                <PythonIndicator/>
                <ConnectionIndicator/>
            </Header>
            <TurnAnnouncer/>
            <Sidebar sessions current=session_id.clone() title heading=Signal::derive(heading) account/>
            <div class="column">
                // The title and the session's controls are part of the main
                // landmark, with the conversation (axe: all content in landmarks).
                <main class="notebook" id="main" tabindex="-1">
                    <div class="session-bar">
                        <h1 class="session-title">{heading}</h1>
                        // Shown once there is something to share, also when the
                        // first question was asked on this page.
                        <Show when=move || state.notebook.with(|n| n.last_seq() > 0)>
                            // A notebook of no cells is not worth a file.
                            <Show when=move || state.notebook.with(|n| n.cells().next().is_some())>
                                <a
                                    class="button download-notebook"
                                    href=notebook_href.get_value()
                                    download=""
                                    rel="external"
                                    title="Download this session as a Jupyter notebook"
                                >
                                    "Download .ipynb"
                                </a>
                            </Show>
                            <ShareControls
                                session_id=session_id.clone()
                                share_path=share_path.clone()
                                share_files
                            />
                        </Show>
                    </div>
                    <p class="notice no-js-only">
                        "JavaScript is off: answers appear when the page reloads (it does by itself while one is written)."
                    </p>
                    // Without scripts, the page reloads itself while a turn
                    // runs. As markup of its own (`inner_html`): a page with
                    // scripts reads a `noscript`'s content as text, which
                    // hydration must not walk.
                    <Show when=move || state.notebook.with(Notebook::is_busy)>
                        <noscript inner_html=r#"<meta http-equiv="refresh" content="3">"#></noscript>
                    </Show>
                    <Cells/>
                </main>
                <KernelNotice/>
                <FilesPanel/>
                <Prompt/>
            </div>
        </div>
    }
}
