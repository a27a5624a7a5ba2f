//! The bar at the top of every page: one row at any width. What does not
//! fit the row is behind "More" (a disclosure button): opened, those
//! controls take the lines under the row, and Escape or a press outside
//! the header closes them again.
//! Which controls wait behind it at which width is the stylesheet's
//! choice (`style/main.css`, "The header"); without scripts nothing does.

use leptos::prelude::*;

/// Gives the keyboard to the element `id` (a browser only scrolls to a
/// link's target), so that the next Tab goes on from there.
fn focus_on(id: &str) {
    #[cfg(feature = "hydrate")]
    if let Some(main) = document().get_element_by_id(id) {
        use wasm_bindgen::JsCast;
        if let Ok(main) = main.dyn_into::<web_sys::HtmlElement>() {
            let _ = main.focus();
        }
    }
    #[cfg(not(feature = "hydrate"))]
    let _ = id;
}

/// The id of the controls "More" shows.
const MORE_ID: &str = "header-more";

/// The brand, "New session", and whatever the page adds (pickers, status).
/// `skip_to_message`: the skip link leads to the page's message box (a
/// session's next action) rather than its main part.
#[component]
pub fn Header(
    #[prop(optional)] children: Option<Children>,
    #[prop(optional)] skip_to_message: bool,
) -> impl IntoView {
    let (skip_id, skip_label) = if skip_to_message {
        (
            crate::contexts::session::MESSAGE_ID,
            "Skip to the message box",
        )
    } else {
        ("main", "Skip to the conversation")
    };
    let open = RwSignal::new(false);
    let toggle = NodeRef::<leptos::html::Button>::new();
    let with_controls = children.is_some();
    let on_keydown = move |ev: leptos::ev::KeyboardEvent| {
        if ev.key() == "Escape" && open.get_untracked() {
            ev.prevent_default();
            open.set(false);
            if let Some(button) = toggle.get_untracked() {
                let _ = button.focus();
            }
        }
    };
    // The keyboard moved on past the header's last control: it closes.
    let on_focusout = move |ev: leptos::ev::FocusEvent| {
        #[cfg(feature = "hydrate")]
        {
            use wasm_bindgen::JsCast;
            let inside = ev
                .related_target()
                .and_then(|t| t.dyn_into::<web_sys::Element>().ok())
                .map(|e| e.closest(".topbar").ok().flatten().is_some());
            if inside == Some(false) {
                open.set(false);
            }
        }
        #[cfg(not(feature = "hydrate"))]
        let _ = ev;
    };
    // A press anywhere outside the header closes "More" (a pointer's
    // counterpart of Escape): the menu never stays over the page.
    #[cfg(feature = "hydrate")]
    {
        let handle = window_event_listener(leptos::ev::pointerdown, move |ev| {
            if !open.get_untracked() {
                return;
            }
            use wasm_bindgen::JsCast;
            let outside = ev
                .target()
                .and_then(|t| t.dyn_into::<web_sys::Element>().ok())
                .is_none_or(|e| e.closest(".topbar").ok().flatten().is_none());
            if outside {
                open.set(false);
            }
        });
        on_cleanup(move || handle.remove());
    }
    view! {
        <a class="skip-link" href=format!("#{skip_id}") on:click=move |_| focus_on(skip_id)>
            {skip_label}
        </a>
        <header
            class="topbar"
            class:with-controls=with_controls
            class:menu-open=move || open.get()
            on:keydown=on_keydown
            on:focusout=on_focusout
        >
            <a class="brand" href="/" rel="external">"runcell"</a>
            <nav class="actions">
                // A post: opening a page never makes a session.
                <form method="post" action="/sessions" class="new-session-form">
                    <button type="submit" class="new-session">"New session"</button>
                </form>
                <button
                    type="button"
                    class="menu-toggle js-only"
                    aria-expanded=move || if open.get() { "true" } else { "false" }
                    aria-controls=MORE_ID
                    node_ref=toggle
                    on:click=move |_| open.update(|o| *o = !*o)
                >
                    "More"
                    <span class="menu-arrow" aria-hidden="true">
                        {move || if open.get() { "▴" } else { "▾" }}
                    </span>
                </button>
                // Always in the page (a row's part on wide screens): the
                // stylesheet hides what the row has no room for until
                // "More" is pressed.
                <div class="header-more" id=MORE_ID>
                    <span class="menu-break" aria-hidden="true"></span>
                    <super::import::ImportNotebook/>
                    {children.map(|c| c())}
                    <super::theme::ThemeSwitch/>
                </div>
            </nav>
        </header>
    }
}
