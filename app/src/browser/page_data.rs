//! A session's data in the browser comes with its page only. The server
//! renders a session page with its data (the route's resource, read as the
//! page hydrates); the page never asks the server function for it again,
//! so the bundle carries none of a server function's client (its request,
//! its arguments' and answers' encodings: 16 KB of the gzipped bundle).
//!
//! Every link to a session loads it as a page of its own (`rel="external"`),
//! and the bundle has no router: should this document's history still move
//! to another path (a history entry of its own), that path is loaded as a
//! page; and should this document's own data be missing, the page says so
//! instead of waiting or loading itself again and again.

use std::cell::RefCell;

use crate::api::{LoadError, SessionLoad, SessionPageData};

thread_local! {
    /// The path this document was loaded for, as hydration began.
    static DOCUMENT_PATH: RefCell<Option<String>> = const { RefCell::new(None) };
}

fn pathname() -> Option<String> {
    web_sys::window().and_then(|w| w.location().pathname().ok())
}

/// Remembers the path the page was served for (before hydrating).
pub fn remember_document_path() {
    DOCUMENT_PATH.with(|path| *path.borrow_mut() = pathname());
}

/// The path this document was served for.
pub fn document_path() -> String {
    DOCUMENT_PATH
        .with(|path| path.borrow().clone())
        .or_else(pathname)
        .unwrap_or_default()
}

/// A move of this document's history to another path (the back button
/// over an entry some script pushed) loads that path as a page of its own.
pub fn reload_on_history_moves() {
    let handle = leptos::prelude::window_event_listener(leptos::ev::popstate, |_| {
        let here = pathname();
        let moved = DOCUMENT_PATH.with(|path| path.borrow().as_ref() != here.as_ref());
        if moved && let Some(window) = web_sys::window() {
            let _ = window.location().reload();
        }
    });
    // For the document's life.
    std::mem::forget(handle);
}

/// The session page's data as the server sent it with the page: the
/// route's resource, resolved before the page was sent, read from the
/// page's hydration data under the id the resource had (the same order of
/// ids as on the server: it is the first the page asks for). Data missing
/// or unreadable is an error the page shows.
pub fn served_session() -> Result<SessionPageData, LoadError> {
    let Some(shared) = leptos::prelude::Owner::current_shared_context() else {
        return Err(LoadError::NotWithPage);
    };
    let id = shared.next_id();
    shared
        .read_data(&id)
        .and_then(|text| text.parse::<SessionLoad>().ok())
        .map_or(Err(LoadError::NotWithPage), |load| load.0)
}
