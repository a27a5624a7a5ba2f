//! The page's "Kernels in use": asking which kernels the viewer's
//! notebooks hold, and closing one.

use super::xhr::{json_of, message_of, send};
use crate::api::KernelsInUse as HeldKernels;

/// Asks for the viewer's kernels; `done` gets them or why not.
pub fn list(done: impl FnOnce(Result<HeldKernels, String>) + 'static) -> bool {
    send("GET", "/api/kernels", None, move |xhr| {
        if xhr.status().unwrap_or(0) != 200 {
            return done(Err(message_of(xhr)));
        }
        let read = json_of(xhr).and_then(|v| crate::reader::kernels_in_use(&v).ok());
        done(read.ok_or_else(|| "the server's answer was not a list of kernels".to_string()));
    })
}

/// Closes the kernel of session `id`; `done` gets why not, if it failed.
pub fn close(id: &str, done: impl FnOnce(Result<(), String>) + 'static) -> bool {
    send(
        "DELETE",
        &format!("/api/sessions/{id}/kernel"),
        None,
        move |xhr| {
            if xhr.status().unwrap_or(0) == 204 {
                done(Ok(()));
            } else {
                done(Err(message_of(xhr)));
            }
        },
    )
}

/// Opens the sessions list (a drawer on narrow screens) and moves the focus
/// to its "Kernels in use"; `false` when the page shows no such list.
pub fn show_list() -> bool {
    use wasm_bindgen::JsCast;
    let document = leptos::prelude::document();
    if let Ok(Some(sidebar)) = document.query_selector("details.sidebar") {
        let _ = sidebar.set_attribute("open", "");
    }
    let Some(heading) = document
        .get_element_by_id("kernels-heading")
        .and_then(|h| h.dyn_into::<web_sys::HtmlElement>().ok())
    else {
        return false;
    };
    heading.scroll_into_view();
    heading.focus().is_ok()
}
