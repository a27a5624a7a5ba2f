//! `/`: where a new session begins. Opening it changes nothing on the
//! server (a link or another site's page may make a browser open it); the
//! session is made by the form's post, with its first question if one is
//! typed.

use leptos::prelude::*;

use crate::components::Header;

/// `/`: a question box whose post makes the session.
#[component]
pub fn HomePage() -> impl IntoView {
    let form = NodeRef::<leptos::html::Form>::new();
    // Enter sends, as on a session's page (Shift+Enter makes a new line).
    let on_keydown = move |ev: leptos::ev::KeyboardEvent| {
        if ev.key() == "Enter" && !ev.shift_key() && !ev.is_composing() {
            ev.prevent_default();
            #[cfg(feature = "hydrate")]
            if let Some(form) = form.get() {
                let _ = form.request_submit();
            }
        }
    };
    view! {
        <div class="page">
            <Header/>
            <main class="home" id="main" tabindex="-1">
                <h1 class="session-title">"Ask something to start"</h1>
                <form class="prompt" aria-label="Ask" method="post" action="/sessions" node_ref=form>
                    <div class="prompt-row">
                        <textarea
                            name="message"
                            aria-label="Message"
                            placeholder="Ask in plain language, e.g. plot the primes below 1000"
                            rows="2"
                            on:keydown=on_keydown
                        ></textarea>
                        <button type="submit">"Ask"</button>
                    </div>
                </form>
            </main>
        </div>
    }
}
