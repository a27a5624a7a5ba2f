//! The browser's end of the session WebSocket: connects after hydration, folds
//! events into the notebook, and reconnects with `?after=<last seq>` so that no
//! event is lost or applied twice.

use std::cell::RefCell;
use std::rc::{Rc, Weak};
use std::time::Duration;

use leptos::prelude::*;
use wasm_bindgen::JsCast;
use wasm_bindgen::closure::Closure;
use web_sys::{CloseEvent, MessageEvent, WebSocket};

use super::page_python::PagePython;
use crate::contexts::{ConnState, SessionState};
use crate::notebook::Applied;
use crate::protocol::{ClientMessage, PROTOCOL_VERSION, SUBPROTOCOL, ServerMessage};

const MAX_BACKOFF_MS: u64 = 5_000;

/// A handle to the page's connection; cheap to copy into event handlers.
#[derive(Clone, Copy)]
pub struct WsClient {
    live: StoredValue<Rc<RefCell<Live>>, LocalStorage>,
}

struct Live {
    state: SessionState,
    /// The page's own Python, told when the socket opens and closes and
    /// handed the frames meant for it.
    python: PagePython,
    socket: Option<WebSocket>,
    handlers: Option<Handlers>,
    failures: u32,
    closed_for_good: bool,
}

/// The callbacks of the current socket, kept alive as long as it is.
struct Handlers {
    _open: Closure<dyn FnMut()>,
    _message: Closure<dyn FnMut(MessageEvent)>,
    _close: Closure<dyn FnMut(CloseEvent)>,
}

impl WsClient {
    /// Connects once the page is hydrated (effects run only in the browser).
    pub fn start(state: SessionState, python: PagePython) -> Self {
        let live = Rc::new(RefCell::new(Live {
            state,
            python,
            socket: None,
            handlers: None,
            failures: 0,
            closed_for_good: false,
        }));
        let client = Self {
            live: StoredValue::new_local(live),
        };
        Effect::new(move |_| client.live.with_value(connect));
        on_cleanup(move || {
            client.live.try_with_value(|live| live.borrow_mut().shut());
        });
        client
    }

    /// Sends a frame; false when the socket is not open (the caller keeps
    /// what the person typed).
    pub fn send(&self, message: &ClientMessage) -> bool {
        let Ok(frame) = serde_json::to_string(message) else {
            return false;
        };
        self.live
            .try_with_value(|live| match &live.borrow().socket {
                Some(socket) if socket.ready_state() == WebSocket::OPEN => {
                    socket.send_with_str(&frame).is_ok()
                }
                _ => false,
            })
            .unwrap_or(false)
    }
}

impl Live {
    fn shut(&mut self) {
        self.closed_for_good = true;
        if let Some(socket) = self.socket.take() {
            detach(&socket);
            let _ = socket.close();
        }
        self.handlers = None;
    }
}

fn detach(socket: &WebSocket) {
    socket.set_onopen(None);
    socket.set_onmessage(None);
    socket.set_onclose(None);
}

/// The close code the server ends a page's socket with for good (1008,
/// "policy violation": the account was disabled).
const CLOSED_BY_POLICY: u16 = 1008;

fn url(session_id: &str, after: u64) -> Option<String> {
    let location = window().location();
    let scheme = if location.protocol().ok()? == "https:" {
        "wss"
    } else {
        "ws"
    };
    let host = location.host().ok()?;
    Some(format!(
        "{scheme}://{host}/ws/sessions/{session_id}?after={after}"
    ))
}

fn connect(live: &Rc<RefCell<Live>>) {
    let (state, python, url) = {
        let mut this = live.borrow_mut();
        if this.closed_for_good {
            return;
        }
        if let Some(old) = this.socket.take() {
            detach(&old);
            let _ = old.close();
        }
        this.handlers = None;
        let state = this.state;
        let after = state.notebook.with_untracked(|n| n.last_seq());
        let id = state.session_id.get_value();
        (state, this.python, url(&id, after))
    };
    state.conn.set(ConnState::Connecting);
    let Some(socket) = url.and_then(|url| WebSocket::new_with_str(&url, SUBPROTOCOL).ok()) else {
        state.conn.set(ConnState::Offline);
        retry_later(Rc::downgrade(live));
        return;
    };

    let weak = Rc::downgrade(live);
    let on_open = Closure::<dyn FnMut()>::new({
        let weak = weak.clone();
        move || {
            if let Some(live) = weak.upgrade() {
                live.borrow_mut().failures = 0;
            }
            state.conn.set(ConnState::Connected);
            python.on_connected();
        }
    });
    let on_message = Closure::<dyn FnMut(MessageEvent)>::new({
        let socket = socket.clone();
        move |ev: MessageEvent| on_frame(state, python, &socket, &ev)
    });
    let on_close = Closure::<dyn FnMut(CloseEvent)>::new(move |ev: CloseEvent| {
        state.conn.set(ConnState::Offline);
        python.on_disconnected();
        // Closed by policy (the account was disabled): said, and not tried
        // again, since every new socket would be refused the same way.
        if ev.code() == CLOSED_BY_POLICY {
            let reason = ev.reason();
            state.problem.set(Some(if reason.is_empty() {
                "The server closed this page's connection: reload the page.".to_string()
            } else {
                format!("{reason}: this page is no longer connected.")
            }));
            if let Some(live) = weak.upgrade() {
                live.borrow_mut().closed_for_good = true;
            }
            return;
        }
        retry_later(weak.clone());
    });
    socket.set_onopen(Some(on_open.as_ref().unchecked_ref()));
    socket.set_onmessage(Some(on_message.as_ref().unchecked_ref()));
    socket.set_onclose(Some(on_close.as_ref().unchecked_ref()));

    let mut this = live.borrow_mut();
    this.socket = Some(socket);
    this.handlers = Some(Handlers {
        _open: on_open,
        _message: on_message,
        _close: on_close,
    });
}

fn on_frame(state: SessionState, python: PagePython, socket: &WebSocket, ev: &MessageEvent) {
    let Some(text) = ev.data().as_string() else {
        return;
    };
    let message = match crate::reader::server_message_text(&text) {
        Ok(message) => message,
        Err(err) => {
            leptos::logging::warn!("unreadable frame from the server: {err}");
            return;
        }
    };
    if python.on_server(&message) {
        return;
    }
    match message {
        ServerMessage::Welcome { protocol, .. } if protocol != PROTOCOL_VERSION => {
            state.problem.set(Some(format!(
                "The server speaks protocol {protocol}, this page {PROTOCOL_VERSION}: reload the page."
            )));
        }
        ServerMessage::Welcome { last_seq, .. }
            if last_seq < state.notebook.with_untracked(|n| n.last_seq()) =>
        {
            state.problem.set(Some(
                "The server no longer has this session's latest events: reload the page.".into(),
            ));
        }
        ServerMessage::Welcome { .. } => {}
        ServerMessage::Event(event) => {
            let applied = state
                .notebook
                .try_update_untracked(|n| n.apply(&event))
                .unwrap_or(Applied::Duplicate);
            match applied {
                Applied::Applied => state.notebook.notify(),
                Applied::Duplicate => {}
                // Something was lost: reconnecting resumes from the last event applied.
                Applied::Gap => {
                    let _ = socket.close();
                }
            }
        }
        ServerMessage::Error { message, .. } => state.problem.set(Some(message)),
        // Handled by the page's Python above.
        ServerMessage::BrowserRun { .. } | ServerMessage::BrowserStop { .. } => {}
    }
}

fn retry_later(weak: Weak<RefCell<Live>>) {
    let Some(live) = weak.upgrade() else {
        return;
    };
    let delay = {
        let mut this = live.borrow_mut();
        if this.closed_for_good {
            return;
        }
        this.failures = this.failures.saturating_add(1);
        (250u64 << this.failures.min(5)).min(MAX_BACKOFF_MS)
    };
    set_timeout(
        move || {
            if let Some(live) = weak.upgrade() {
                connect(&live);
            }
        },
        Duration::from_millis(delay),
    );
}
