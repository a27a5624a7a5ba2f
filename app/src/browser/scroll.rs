//! Following: the newest output stays in view while the reader is at the
//! bottom of the page. Scrolling up stops it, and "Jump to latest" (with a
//! count of the cells that came since) shows until they are back. Content
//! that grows by itself (an image or a chart that loads, a table that
//! renders) is followed too: a resize observer watches the conversation, so
//! the page never stops following because a picture arrived late.

use std::cell::Cell;
use std::rc::Rc;

use leptos::prelude::*;
use wasm_bindgen::JsCast;
use wasm_bindgen::closure::Closure;

use crate::contexts::SessionState;

/// How close to the bottom counts as "at the bottom", in CSS pixels.
const PIN_SLACK: f64 = 80.0;

fn scroll_y() -> f64 {
    window().scroll_y().unwrap_or(0.0)
}

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
    scroll_y() + viewport >= f64::from(body.scroll_height()) - PIN_SLACK
}

/// Follows the reader's scrolling and the conversation's growth.
pub fn follow_bottom(state: SessionState) {
    let following = state.following;
    let unseen = state.unseen;
    // Where the page was at the last scroll event: a move up is the reader
    // leaving the bottom; a move down, or a page that grew under a still
    // reader, is not.
    let last_y = Rc::new(Cell::new(scroll_y()));
    let on_scroll = Closure::<dyn FnMut()>::new({
        let last_y = Rc::clone(&last_y);
        move || {
            let y = scroll_y();
            if at_bottom() {
                if !following.get_untracked() {
                    following.set(true);
                }
                unseen.set(0);
            } else if y < last_y.get() - 2.0 && following.get_untracked() {
                following.set(false);
            }
            mark_direction(y, last_y.get());
            last_y.set(y);
        }
    });
    let _ = window().add_event_listener_with_callback("scroll", on_scroll.as_ref().unchecked_ref());
    // The listener lives as long as the page (every navigation away from a
    // session loads a new document); it only ever writes the two signals.
    on_scroll.forget();

    // Whatever makes the conversation taller while the reader follows
    // (cells, images loading, charts drawing) brings its end into view.
    // A reader who sees the end of the conversation (it grew into view, or
    // a version switch made it shorter) has nothing new below.
    let on_resize = Closure::<dyn FnMut()>::new(move || {
        if following.get_untracked() {
            scroll_to_bottom();
        } else if at_bottom() {
            following.set(true);
            unseen.set(0);
        }
    });
    let on_resize = StoredValue::new_local(Some(on_resize));
    // After the page is built (effects run once it is in the document).
    Effect::new(move |_| {
        let Some(on_resize) = on_resize.try_update_value(Option::take).flatten() else {
            return;
        };
        if let Ok(observer) = web_sys::ResizeObserver::new(on_resize.as_ref().unchecked_ref())
            && let Some(cells) = document().query_selector("section.cells").ok().flatten()
        {
            observer.observe(&cells);
            // Held by the page for its life, as the scroll listener is.
            std::mem::forget(observer);
        }
        on_resize.forget();
    });

    // New cells: followed, or counted for "Jump to latest". Only cells that
    // arrived count (ids above the newest seen): a version switch shows
    // other cells, not new ones.
    let newest = Cell::new(state.notebook.with_untracked(|n| n.max_cell_id()));
    Effect::new(move |_| {
        let new = state
            .notebook
            .with(|n| arrived(n.cells().map(|c| c.id.0), newest.get()));
        newest.set(
            newest
                .get()
                .max(state.notebook.with_untracked(|n| n.max_cell_id())),
        );
        if following.get_untracked() {
            scroll_to_bottom();
        } else if new > 0 {
            unseen.update(|u| *u += new);
        }
    });
}

/// How many of the cells on show arrived after the newest one seen.
fn arrived(shown: impl Iterator<Item = u64>, newest_seen: u64) -> usize {
    shown.filter(|&id| id > newest_seen).count()
}

/// Brings the end of the conversation into view and follows from there on
/// (the person sent a message, or asked for the latest).
pub fn jump_to_latest(state: SessionState) {
    state.following.set(true);
    state.unseen.set(0);
    scroll_to_bottom();
}

/// Marks the page while the reader scrolls down past the top (a phone's
/// header hides then, and comes back on the first move up).
fn mark_direction(y: f64, before: f64) {
    let Some(root) = document().document_element() else {
        return;
    };
    let classes = root.class_list();
    if y > before + 4.0 && y > 64.0 {
        let _ = classes.add_1("scrolled-down");
    } else if y < before - 4.0 || y <= 64.0 {
        let _ = classes.remove_1("scrolled-down");
    }
}

fn scroll_to_bottom() {
    let window = window();
    let Some(body) = window.document().and_then(|d| d.body()) else {
        return;
    };
    window.scroll_to_with_x_and_y(0.0, f64::from(body.scroll_height()));
}

#[cfg(test)]
mod tests {
    use super::arrived;

    #[test]
    fn only_cells_that_arrived_are_new() {
        // A version switch: other cells on show, none newer than seen.
        assert_eq!(arrived([3, 4, 9].into_iter(), 12), 0);
        // Two cells streamed in below.
        assert_eq!(arrived([3, 4, 13, 14].into_iter(), 12), 2);
        assert_eq!(arrived(std::iter::empty(), 0), 0);
    }
}
