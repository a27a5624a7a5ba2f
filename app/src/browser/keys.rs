//! Page-wide keys: Escape closes whatever disclosure is open (the sidebar
//! drawer, a session's actions, a delete confirmation), innermost first,
//! and gives the keyboard back to the control that opened it.

use wasm_bindgen::JsCast;
use wasm_bindgen::closure::Closure;

/// The menus Escape closes.
const MENUS: &str = "details.confirm[open], details.entry-actions[open], details.sidebar[open]";

/// Listens for Escape on the whole page, for as long as the page lives.
pub fn close_menus_on_escape() {
    let on_key = Closure::<dyn FnMut(web_sys::KeyboardEvent)>::new(|ev: web_sys::KeyboardEvent| {
        if ev.key() != "Escape" || ev.default_prevented() {
            return;
        }
        let document = leptos::prelude::document();
        // The selector lists the innermost kinds first; the first match in
        // document order may be an outer one, so look for each in turn.
        for selector in MENUS.split(", ") {
            if let Ok(Some(open)) = document.query_selector(selector) {
                let _ = open.remove_attribute("open");
                if let Ok(Some(summary)) = open.query_selector(":scope > summary")
                    && let Ok(summary) = summary.dyn_into::<web_sys::HtmlElement>()
                {
                    let _ = summary.focus();
                }
                ev.prevent_default();
                return;
            }
        }
    });
    let _ = leptos::prelude::window()
        .add_event_listener_with_callback("keydown", on_key.as_ref().unchecked_ref());
    // Every navigation away from a page loads a new document.
    on_key.forget();
}
