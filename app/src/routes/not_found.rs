//! Any other path.

use leptos::prelude::*;

use crate::components::Header;

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
            <main class="problem" id="main" tabindex="-1">
                <h1>"Page not found"</h1>
                <p><a href="/" rel="external">"Start a new session"</a></p>
            </main>
        </div>
    }
}
