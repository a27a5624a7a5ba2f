//! A session's data in the browser comes with its page only. The server
//! renders a session page with its data (the route's resource, read as the
//! page hydrates); the page never asks the server function for it again,
//! so the bundle carries none of a server function's client (its request,
//! its arguments' and answers' encodings: 16 KB of the gzipped bundle).
//!
//! Every link to a session loads it as a page of its own (`rel="external"`).
//! Should the router still move to another session within this document
//! (a history entry of its own), that session is loaded as a page; and
//! should this document's own data be missing, the page says so instead of
//! waiting or loading itself again and again.

use std::cell::RefCell;

use crate::api::{LoadError, SessionPageData};

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

/// The route's resource's reading in the browser: another session than
/// the document's is loaded as a page; the document's own data, had it not
/// come with the page, is an error the page shows.
pub async fn load_session_page(_session_id: String) -> Result<SessionPageData, LoadError> {
    let here = pathname();
    let moved = DOCUMENT_PATH.with(|path| path.borrow().as_ref() != here.as_ref());
    if moved && web_sys::window().is_some_and(|w| w.location().reload().is_ok()) {
        // The page goes; nothing is shown from here.
        std::future::pending::<()>().await;
    }
    Err(LoadError::NotWithPage)
}
