//! The pages.

use leptos::prelude::*;
use leptos_router::hooks::use_params_map;

use crate::api::{load_session, load_shared};
use crate::components::{Header, SessionView, SharedView};

/// `/sessions/{id}`: one conversation.
#[component]
pub fn SessionPage() -> impl IntoView {
    let params = use_params_map();
    let session_id = move || params.read().get("id").unwrap_or_default();
    let log = Resource::new(session_id, load_session);

    view! {
        <Suspense fallback=|| view! { <p class="loading">"Loading the session…"</p> }>
            {move || Suspend::new(async move {
                match log.await {
                    Ok(log) => view! { <SessionView log/> }.into_any(),
                    Err(err) => {
                        view! {
                            <div class="page">
                                <Header/>
                                <main class="problem" role="alert">
                                    <h1>"This session cannot be opened"</h1>
                                    <p>{problem_text(&err)}</p>
                                    <p><a href="/" rel="external">"Start a new session"</a></p>
                                </main>
                            </div>
                        }
                            .into_any()
                    }
                }
            })}
        </Suspense>
    }
}

/// `/s/{token}`: a shared session, read-only.
#[component]
pub fn SharedPage() -> impl IntoView {
    let params = use_params_map();
    let token = move || params.read().get("token").unwrap_or_default();
    let log = Resource::new(token, load_shared);

    view! {
        <Suspense fallback=|| view! { <p class="loading">"Loading the shared session…"</p> }>
            {move || Suspend::new(async move {
                match log.await {
                    Ok(log) => view! { <SharedView log/> }.into_any(),
                    Err(err) => {
                        view! {
                            <div class="page">
                                <Header/>
                                <main class="problem" role="alert">
                                    <h1>"This link does not work"</h1>
                                    <p>{problem_text(&err)}</p>
                                    <p><a href="/" rel="external">"Start a new session"</a></p>
                                </main>
                            </div>
                        }
                            .into_any()
                    }
                }
            })}
        </Suspense>
    }
}

fn problem_text(err: &ServerFnError) -> String {
    match err {
        ServerFnError::ServerError(message) => message.clone(),
        _ => "The server could not be reached.".to_string(),
    }
}

/// Anything else.
#[component]
pub fn NotFound() -> impl IntoView {
    #[cfg(feature = "ssr")]
    if let Some(response) = use_context::<leptos_axum::ResponseOptions>() {
        response.set_status(http::StatusCode::NOT_FOUND);
    }
    view! {
        <div class="page">
            <Header/>
            <main class="problem">
                <h1>"Page not found"</h1>
                <p><a href="/" rel="external">"Start a new session"</a></p>
            </main>
        </div>
    }
}
