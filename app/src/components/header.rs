//! The bar at the top of every page.

use leptos::prelude::*;

/// The brand, "New session", and whatever the page adds (pickers, status).
#[component]
pub fn Header(#[prop(optional)] children: Option<Children>) -> impl IntoView {
    view! {
        <a class="skip-link" href="#main">"Skip to the conversation"</a>
        <header class="topbar">
            <a class="brand" href="/" rel="external">"runcell"</a>
            <nav class="actions">
                <a href="/" rel="external" class="new-session">"New session"</a>
                {children.map(|c| c())}
            </nav>
        </header>
    }
}
