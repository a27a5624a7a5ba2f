//! The bar at the top of every page.

use leptos::prelude::*;

/// Gives the keyboard to the page's main part (a browser only scrolls to
/// it), so that the next Tab goes on from there.
fn focus_main() {
    #[cfg(feature = "hydrate")]
    if let Some(main) = document().get_element_by_id("main") {
        use wasm_bindgen::JsCast;
        if let Ok(main) = main.dyn_into::<web_sys::HtmlElement>() {
            let _ = main.focus();
        }
    }
}

/// The brand, "New session", and whatever the page adds (pickers, status).
#[component]
pub fn Header(#[prop(optional)] children: Option<Children>) -> impl IntoView {
    view! {
        <a class="skip-link" href="#main" on:click=|_| focus_main()>
            "Skip to the conversation"
        </a>
        <header class="topbar">
            <a class="brand" href="/" rel="external">"runcell"</a>
            <nav class="actions">
                // A post: opening a page never makes a session.
                <form method="post" action="/sessions" class="new-session-form">
                    <button type="submit" class="new-session">"New session"</button>
                </form>
                <super::import::ImportNotebook/>
                {children.map(|c| c())}
                <super::theme::ThemeSwitch/>
            </nav>
        </header>
    }
}
