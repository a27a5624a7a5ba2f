//! Auto-scroll: the newest cell stays in view while the reader is at the
//! bottom of the page; scrolling up stops it until they come back down.

use std::cell::Cell;
use std::rc::Rc;

use leptos::prelude::*;
use wasm_bindgen::JsCast;
use wasm_bindgen::closure::Closure;

use crate::notebook::Notebook;

/// How close to the bottom counts as "at the bottom", in CSS pixels.
const PIN_SLACK: f64 = 80.0;

fn at_bottom() -> bool {
    let window = window();
    let Some(body) = window.document().and_then(|d| d.body()) else {
        return true;
    };
    let viewport = window
        .inner_height()
        .ok()
        .and_then(|v| v.as_f64())
        .unwrap_or(0.0);
    let scrolled = window.scroll_y().unwrap_or(0.0);
    scrolled + viewport >= f64::from(body.scroll_height()) - PIN_SLACK
}

/// Follows the reader's scrolling, and keeps the newest cell in view
/// whenever `notebook` changes while they are at the bottom.
pub fn follow_bottom(notebook: RwSignal<Notebook>) {
    // Whether the reader is at the bottom (and so wants to follow new
    // output): this page's, held by its scroll listener and its effect.
    let pinned = Rc::new(Cell::new(true));
    let on_scroll = Closure::<dyn FnMut()>::new({
        let pinned = Rc::clone(&pinned);
        move || pinned.set(at_bottom())
    });
    let _ = window().add_event_listener_with_callback("scroll", on_scroll.as_ref().unchecked_ref());
    // The listener lives as long as the page (every navigation away from a
    // session loads a new document); it only ever writes `pinned`.
    on_scroll.forget();
    Effect::new(move |_| {
        notebook.track();
        if pinned.get() {
            scroll_to_bottom();
        }
    });
}

fn scroll_to_bottom() {
    let window = window();
    let Some(body) = window.document().and_then(|d| d.body()) else {
        return;
    };
    window.scroll_to_with_x_and_y(0.0, f64::from(body.scroll_height()));
}
