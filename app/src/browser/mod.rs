//! What only a browser does (compiled with the `hydrate` feature alone):
//! the session's WebSocket, the Files panel's requests, the page's own
//! Python (Pyodide in a sandboxed frame), auto-scroll and the clipboard.
//! Everything here works on the state in `crate::contexts`; nothing here
//! renders.

pub mod clipboard;
pub mod download;
pub mod files;
pub mod import;
pub mod kernels;
mod keys;
pub mod outputs;
pub mod page_data;
mod page_python;
pub mod scroll;
pub mod sessions;
pub mod share;
mod socket;
mod xhr;

use leptos::prelude::*;

use crate::contexts::{FilesState, Sender, SessionState};
use page_python::PagePython;
use socket::WsClient;

/// Brings a hydrated session page to life: the socket and the sender the
/// controls use, the page's Python (started as soon as Browser is picked),
/// auto-scroll, and the Files panel's list.
pub fn connect(state: SessionState, files: FilesState) {
    let python = PagePython::new(state);
    let client = WsClient::start(state, python);
    let sender: Sender = std::sync::Arc::new(move |message| client.send(&message));
    state.send.set_value(Some(sender));
    // The page's Python loads in the background as soon as Browser is
    // picked, so that it is ready when the first program comes.
    Effect::new(move |_| {
        if state.runs_in_page() {
            python.start();
        }
    });
    on_cleanup(move || python.shut());
    scroll::follow_bottom(state);
    keys::close_menus_on_escape();
    files::watch(state, files);
}

/// The server-rendered message box's text, typed before hydration.
pub fn typed_message() -> String {
    use wasm_bindgen::JsCast;
    web_sys::window()
        .and_then(|w| w.document())
        .and_then(|d| d.query_selector("textarea[name=message]").ok().flatten())
        .and_then(|e| e.dyn_into::<web_sys::HtmlTextAreaElement>().ok())
        .map(|t| t.value())
        .unwrap_or_default()
}
