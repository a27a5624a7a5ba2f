//! The Browser sandbox's page side (hydrate only): Python (Pyodide) in a
//! worker of a frame (`/py-frame.html`) that runs what the server sends in
//! `browser_run` frames and streams the output back as `browser_output`
//! frames, so the agent's turn goes on as with any sandbox.
//!
//! The frame is sandboxed without `allow-same-origin`: its origin is opaque,
//! so the programs carry none of the user's credentials (cookies) to
//! runcell, whose answers CORS keeps from them. The page and the frame talk
//! over a `MessageChannel` whose end the frame hands over in its first
//! message; what comes back is untrusted (the programs can post anything):
//! its size and shape are checked before it is read.
//!
//! Stop asks the frame, which writes the run's id and a flag into a
//! `SharedArrayBuffer` it shares with its worker, whose Python polls it
//! (`KeyboardInterrupt` for that run only); a program that does not stop,
//! or a frame that is not cross-origin isolated, gets the frame (and its
//! worker) removed and a new Python started, said plainly in the result.
//!
//! Frames that cannot go out while the socket reconnects wait, in order, and
//! go out after the page attaches again: a run that ends during a blip still
//! ends. A worker that cannot start answers every run at once.

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::time::Duration;

use leptos::prelude::*;
use serde::Deserialize;
use wasm_bindgen::JsCast;
use wasm_bindgen::closure::Closure;
use web_sys::{HtmlIFrameElement, MessageEvent, MessagePort};

use crate::components::{PyStatus, SessionState};
use crate::protocol::{ClientMessage, Output, ServerMessage};

/// The frame's document, which the server serves.
const FRAME_URL: &str = "/py-frame.html";
/// What the frame's first message says (with its end of the channel).
const FRAME_HELLO: &str = "runcell-py-frame";
/// The frame's origin, as the page sees it: opaque.
const OPAQUE_ORIGIN: &str = "null";
/// How long the frame has to say hello before it counts as failed.
const FRAME_WAIT: Duration = Duration::from_secs(20);
/// A message from the frame longer than this (in UTF-16 units) is dropped
/// unread: the worker keeps every message about a run far smaller, and the
/// server closes the socket on a frame over 256 KiB.
const MAX_MESSAGE_UNITS: u32 = 256 * 1024;
/// How long an interrupted program has to stop before its Python is ended.
const INTERRUPT_GRACE: Duration = Duration::from_millis(1500);
/// Added to the server's time limit before the page stops a run itself (the
/// server normally asks first).
const LOCAL_LIMIT_SLACK_MS: u64 = 2_000;
/// How much output waits for the socket to come back; output beyond it is
/// dropped (and the run says so), results, errors and ends never are.
const OUTBOX_OUTPUT_BYTES: usize = 2 * 1024 * 1024;
/// Said after a run's output when some of it could not wait.
const LOST_NOTE: &str =
    "\n(Some of this program's output was lost while the page was reconnecting.)\n";
/// Why the worker failed to start, when the browser does not say.
const WORKER_FAILED: &str = "the Python worker failed to load (see the browser console)";

/// What the frame posts: its own messages, then its worker's.
#[derive(Debug, Deserialize)]
#[serde(tag = "t", rename_all = "snake_case")]
enum FromWorker {
    /// The frame is there; whether Stop can interrupt its Python.
    Frame {
        interruptible: bool,
    },
    /// The worker could not be loaded, or raised an error.
    Broken {
        #[serde(default)]
        message: String,
    },
    Loading {
        stage: String,
    },
    Ready {
        ms: u64,
    },
    Failed {
        message: String,
    },
    Out {
        run: u64,
        stream: String,
        text: String,
    },
    Result {
        run: u64,
        data: BTreeMap<String, String>,
    },
    Error {
        run: u64,
        name: String,
        value: String,
        #[serde(default)]
        traceback: Vec<String>,
    },
    Done {
        run: u64,
    },
}

/// The page's Python: a frame and the worker in it.
struct Engine {
    frame: HtmlIFrameElement,
    /// The page's end of the channel, once the frame said hello.
    port: Option<MessagePort>,
    /// Messages for the frame posted before it said hello.
    waiting: Vec<String>,
    /// New with every frame: the server tells a reloaded Python by it.
    kernel: String,
    /// The frame can interrupt a run (it is cross-origin isolated); false
    /// until it says so.
    interruptible: bool,
    /// Runs posted to the worker, the running one first.
    runs: VecDeque<u64>,
    /// The worker said it is ready.
    ready: bool,
    /// Why the worker could not start: every run is answered with it.
    failed: Option<String>,
    /// The window's listener for the frame's hello.
    on_hello: Closure<dyn FnMut(MessageEvent)>,
    /// The port's listener, set on the port once there is one.
    on_message: Closure<dyn FnMut(MessageEvent)>,
}

impl Drop for Engine {
    /// Removes the frame, which ends its worker; the listeners are taken
    /// off first, so that a message still queued never calls a dropped
    /// closure.
    fn drop(&mut self) {
        if let Some(window) = web_sys::window() {
            let _ = window.remove_event_listener_with_callback(
                "message",
                self.on_hello.as_ref().unchecked_ref(),
            );
        }
        if let Some(port) = self.port.take() {
            port.set_onmessage(None);
            port.close();
        }
        self.frame.remove();
    }
}

/// Frames for the server, while the socket cannot take them.
#[derive(Default)]
struct Outbox {
    /// The page attached over the current socket: frames may go out.
    open: bool,
    frames: VecDeque<ClientMessage>,
    /// Bytes of output waiting.
    output_bytes: usize,
    /// Runs some of whose output was dropped.
    lost: BTreeSet<u64>,
}

impl Outbox {
    fn push(&mut self, message: ClientMessage) {
        match &message {
            ClientMessage::BrowserOutput {
                run,
                output: Output::Stdout { text } | Output::Stderr { text },
            } => {
                // Output after a gap would read as if nothing were missing.
                if self.lost.contains(run) || self.output_bytes + text.len() > OUTBOX_OUTPUT_BYTES {
                    self.lost.insert(*run);
                    return;
                }
                self.output_bytes += text.len();
            }
            ClientMessage::BrowserDone { run, .. } if self.lost.remove(run) => {
                self.frames.push_back(ClientMessage::BrowserOutput {
                    run: *run,
                    output: Output::Stderr {
                        text: LOST_NOTE.into(),
                    },
                });
            }
            _ => {}
        }
        self.frames.push_back(message);
    }

    fn pop(&mut self) -> Option<ClientMessage> {
        let message = self.frames.pop_front()?;
        if let ClientMessage::BrowserOutput {
            output: Output::Stdout { text } | Output::Stderr { text },
            ..
        } = &message
        {
            self.output_bytes = self.output_bytes.saturating_sub(text.len());
        }
        Some(message)
    }

    /// Puts back a frame that could not go out after all.
    fn unpop(&mut self, message: ClientMessage) {
        if let ClientMessage::BrowserOutput {
            output: Output::Stdout { text } | Output::Stderr { text },
            ..
        } = &message
        {
            self.output_bytes += text.len();
        }
        self.frames.push_front(message);
    }
}

thread_local! {
    static ENGINE: RefCell<Option<Engine>> = const { RefCell::new(None) };
    static OUTBOX: RefCell<Outbox> = RefCell::new(Outbox::default());
}

/// Starts the page's Python in the background, unless it runs already.
pub fn start(state: SessionState) {
    let running = ENGINE.with(|e| e.borrow().is_some());
    if running {
        return;
    }
    let Some(url) = state.pyodide_url.get_value() else {
        state.python.set(PyStatus::Failed(
            "this server's site was built without Pyodide".into(),
        ));
        return;
    };
    match Engine::spawn(state, &url) {
        Ok(engine) => {
            ENGINE.with(|e| *e.borrow_mut() = Some(engine));
            state.python.set(PyStatus::Loading("starting".into()));
            on_connected(state);
        }
        Err(message) => state.python.set(PyStatus::Failed(message)),
    }
}

/// Ends the page's Python (the page is going away).
pub fn shut() {
    drop(ENGINE.with(|e| e.borrow_mut().take()));
}

/// The socket (re)connected, or a new Python started: the server learns
/// (again) which Python runs here, then gets the frames that waited, in
/// order. Not sent while offline: the next connection does it.
pub fn on_connected(state: SessionState) {
    // Without a Python the page is not the runner: the server would refuse
    // the frames that wait.
    let Some(kernel) = ENGINE.with(|e| e.borrow().as_ref().map(|e| e.kernel.clone())) else {
        return;
    };
    if !state.send_frame(ClientMessage::BrowserAttach { kernel }) {
        return;
    }
    OUTBOX.with(|o| o.borrow_mut().open = true);
    while let Some(frame) = OUTBOX.with(|o| o.borrow_mut().pop()) {
        if !state.send_frame(frame.clone()) {
            OUTBOX.with(|o| {
                let mut outbox = o.borrow_mut();
                outbox.unpop(frame);
                outbox.open = false;
            });
            break;
        }
    }
}

/// The socket closed: frames wait until the page attaches again.
pub fn on_disconnected() {
    OUTBOX.with(|o| o.borrow_mut().open = false);
}

/// A frame for this page's Python; false if it is not one.
pub fn on_server(state: SessionState, message: &ServerMessage) -> bool {
    match message {
        ServerMessage::BrowserRun {
            run,
            code,
            fresh,
            timeout_ms,
        } => {
            start(state);
            let posted = ENGINE.with(|e| {
                e.borrow_mut().as_mut().map(|engine| match &engine.failed {
                    Some(why) => Err((cannot_start(why), engine.kernel.clone())),
                    None => engine
                        .post_run(*run, code, *fresh)
                        .map_err(|message| (message, engine.kernel.clone())),
                })
            });
            match posted {
                Some(Ok(())) => {
                    let (run, limit) = (*run, *timeout_ms);
                    set_timeout(
                        move || stop(state, run, "the time limit"),
                        Duration::from_millis(limit.saturating_add(LOCAL_LIMIT_SLACK_MS)),
                    );
                }
                Some(Err((message, kernel))) => refuse(state, *run, &message, kernel),
                None => refuse(state, *run, "", String::new()),
            }
            true
        }
        ServerMessage::BrowserStop { run } => {
            stop(state, *run, "Stop");
            true
        }
        _ => false,
    }
}

/// What a run says when the worker could not start.
fn cannot_start(why: &str) -> String {
    format!(
        "Python could not start in this page ({why}): reload the page to try again, or pick another sandbox"
    )
}

fn refuse(state: SessionState, run: u64, message: &str, kernel: String) {
    let message = if message.is_empty() {
        "this page's Python is not running"
    } else {
        message
    };
    output(
        state,
        run,
        Output::Error {
            name: "BrowserError".into(),
            value: message.to_string(),
            traceback: Vec::new(),
        },
    );
    done(state, run, kernel);
}

fn output(state: SessionState, run: u64, output: Output) {
    send(state, ClientMessage::BrowserOutput { run, output });
}

fn done(state: SessionState, run: u64, kernel: String) {
    send(state, ClientMessage::BrowserDone { run, kernel });
}

/// Sends a frame about a run, or keeps it (behind any that wait already)
/// until the page attaches again.
fn send(state: SessionState, message: ClientMessage) {
    let open = OUTBOX.with(|o| {
        let outbox = o.borrow();
        outbox.open && outbox.frames.is_empty()
    });
    if open && state.send_frame(message.clone()) {
        return;
    }
    OUTBOX.with(|o| {
        let mut outbox = o.borrow_mut();
        outbox.open = false;
        outbox.push(message);
    });
}

/// Stops `run` if it is still on: interrupts it (running, or about to run
/// when the page has not yet heard that the run before it ended), or drops
/// a waiting one; a program that does not stop in time ends the frame
/// (and the worker in it).
fn stop(state: SessionState, run: u64, why: &'static str) {
    enum Action {
        Nothing,
        Interrupted,
        Restart,
    }
    let action = ENGINE.with(|e| {
        let mut engine = e.borrow_mut();
        let Some(engine) = engine.as_mut() else {
            return Action::Nothing;
        };
        let Some(position) = engine.runs.iter().position(|r| *r == run) else {
            return Action::Nothing;
        };
        // The worker cancels a waiting run, or one that awaits something;
        // a stop also raises the frame's interrupt, which names the run:
        // harmless if it has not begun.
        let command = if engine.interruptible {
            "stop"
        } else {
            "cancel"
        };
        let _ = engine.post_json(&serde_json::json!({"cmd": command, "run": run}));
        match (engine.interruptible, position) {
            (true, _) => Action::Interrupted,
            (false, 0) => Action::Restart,
            (false, _) => Action::Nothing,
        }
    });
    match action {
        Action::Nothing => {}
        Action::Interrupted => set_timeout(
            move || {
                // Still the running one: it did not stop.
                let still = ENGINE.with(|e| {
                    e.borrow()
                        .as_ref()
                        .is_some_and(|engine| engine.runs.front() == Some(&run))
                });
                if still {
                    restart(
                        state,
                        &format!(
                            "(The program did not stop when interrupted ({why}), so this page's Python was ended and is starting again: its variables are gone.)\n"
                        ),
                    );
                }
            },
            INTERRUPT_GRACE,
        ),
        Action::Restart => restart(
            state,
            &format!(
                "(This page's Python cannot be interrupted (its frame is not cross-origin isolated): on {why} it was ended and is starting again, and its variables are gone.)\n"
            ),
        ),
    }
}

/// Ends the frame (and its worker) and starts another: every run it had
/// ends, the running one with `note`.
fn restart(state: SessionState, note: &str) {
    let Some(old) = ENGINE.with(|e| e.borrow_mut().take()) else {
        return;
    };
    // Its frame is removed when it is dropped, below, which ends its worker.
    for (i, run) in old.runs.iter().enumerate() {
        if i == 0 {
            output(
                state,
                *run,
                Output::Stderr {
                    text: note.to_string(),
                },
            );
        }
        output(
            state,
            *run,
            Output::Error {
                name: "KeyboardInterrupt".into(),
                value: "stopped".into(),
                traceback: Vec::new(),
            },
        );
        done(state, *run, old.kernel.clone());
    }
    drop(old);
    start(state);
}

impl Engine {
    fn spawn(state: SessionState, url: &str) -> Result<Self, String> {
        let window = web_sys::window().ok_or("no window")?;
        let document = window.document().ok_or("no document")?;
        let body = document.body().ok_or("no body")?;
        let cannot =
            |e: wasm_bindgen::JsValue| format!("the browser cannot make Python's frame: {e:?}");
        let frame: HtmlIFrameElement = document
            .create_element("iframe")
            .map_err(cannot)?
            .unchecked_into();
        // Scripts, and nothing else: no allow-same-origin (an opaque
        // origin), no forms, popups or navigation of the page.
        frame
            .set_attribute("sandbox", "allow-scripts")
            .map_err(cannot)?;
        // Isolated itself, so that it can share memory with its worker.
        frame
            .set_attribute("allow", "cross-origin-isolated")
            .map_err(cannot)?;
        frame.set_attribute("aria-hidden", "true").map_err(cannot)?;
        frame.set_attribute("tabindex", "-1").map_err(cannot)?;
        frame.set_title("Python in this page");
        frame.set_class_name("py-frame");
        let kernel = new_kernel_id();
        let hello_kernel = kernel.clone();
        let on_hello = Closure::<dyn FnMut(MessageEvent)>::new(move |ev: MessageEvent| {
            ENGINE.with(|e| {
                if let Some(engine) = e.borrow_mut().as_mut()
                    && engine.kernel == hello_kernel
                {
                    engine.accept(&ev);
                }
            });
        });
        let on_message = Closure::<dyn FnMut(MessageEvent)>::new(move |ev: MessageEvent| {
            if let Some(message) = read_message(&ev.data()) {
                from_worker(state, message);
            }
        });
        window
            .add_event_listener_with_callback("message", on_hello.as_ref().unchecked_ref())
            .map_err(cannot)?;
        let mut engine = Self {
            frame,
            port: None,
            waiting: Vec::new(),
            kernel,
            interruptible: false,
            runs: VecDeque::new(),
            ready: false,
            failed: None,
            on_hello,
            on_message,
        };
        // Absolute: the worker's own address is a blob: URL.
        let origin = window.location().origin().map_err(cannot)?;
        let index_url = if url.starts_with('/') {
            format!("{origin}{url}")
        } else {
            url.to_string()
        };
        engine.post_json(&serde_json::json!({"cmd": "init", "indexURL": index_url}))?;
        engine.frame.set_src(FRAME_URL);
        body.append_child(&engine.frame).map_err(cannot)?;
        // A frame that never says hello (it did not load) fails the runs
        // at once rather than at the time limit.
        let kernel = engine.kernel.clone();
        set_timeout(
            move || {
                let silent = ENGINE.with(|e| {
                    e.borrow()
                        .as_ref()
                        .is_some_and(|engine| engine.kernel == kernel && engine.port.is_none())
                });
                if silent {
                    worker_failed(state, Some("Python's frame did not load".into()));
                }
            },
            FRAME_WAIT,
        );
        Ok(engine)
    }

    /// Takes the channel the frame hands over in its first message: only
    /// from this engine's frame (its window, its opaque origin), only once.
    fn accept(&mut self, ev: &MessageEvent) {
        if self.port.is_some() {
            return;
        }
        let from_frame = match (ev.source(), self.frame.content_window()) {
            (Some(source), Some(window)) => js_sys::Object::is(&source, &window),
            _ => false,
        };
        if !from_frame
            || ev.origin() != OPAQUE_ORIGIN
            || ev.data().as_string().as_deref() != Some(FRAME_HELLO)
        {
            return;
        }
        let ports = ev.ports();
        if ports.length() != 1 {
            return;
        }
        let Ok(port) = ports.get(0).dyn_into::<MessagePort>() else {
            return;
        };
        port.set_onmessage(Some(self.on_message.as_ref().unchecked_ref()));
        for message in std::mem::take(&mut self.waiting) {
            if port.post_message(&message.into()).is_err() {
                leptos::logging::warn!("a message for the page's Python could not be posted");
            }
        }
        self.port = Some(port);
    }

    fn post_json(&mut self, message: &serde_json::Value) -> Result<(), String> {
        let text = message.to_string();
        match &self.port {
            Some(port) => port
                .post_message(&text.into())
                .map_err(|e| format!("cannot reach the page's Python: {e:?}")),
            None => {
                self.waiting.push(text);
                Ok(())
            }
        }
    }

    fn post_run(&mut self, run: u64, code: &str, fresh: bool) -> Result<(), String> {
        self.post_json(&serde_json::json!({
            "cmd": "run", "run": run, "code": code, "fresh": fresh,
        }))?;
        self.runs.push_back(run);
        Ok(())
    }
}

/// A message from the frame, if it is a string of a readable size and
/// shape; anything else is dropped with a warning.
fn read_message(data: &wasm_bindgen::JsValue) -> Option<FromWorker> {
    let Some(text) = data.dyn_ref::<js_sys::JsString>() else {
        leptos::logging::warn!("a message from Python that is not text was dropped");
        return None;
    };
    if text.length() > MAX_MESSAGE_UNITS {
        leptos::logging::warn!(
            "a message from Python of {} characters was dropped",
            text.length()
        );
        return None;
    }
    match serde_json::from_str::<FromWorker>(&String::from(text)) {
        Ok(message) => Some(message),
        Err(err) => {
            leptos::logging::warn!("unreadable message from Python: {err}");
            None
        }
    }
}

fn from_worker(state: SessionState, message: FromWorker) {
    match message {
        FromWorker::Frame { interruptible } => ENGINE.with(|e| {
            if let Some(engine) = e.borrow_mut().as_mut() {
                engine.interruptible = interruptible;
            }
        }),
        FromWorker::Broken { message } => {
            worker_failed(state, Some(message).filter(|m| !m.is_empty()));
        }
        FromWorker::Loading { stage } => state.python.set(PyStatus::Loading(stage)),
        FromWorker::Ready { ms } => {
            leptos::logging::log!("the page's Python is ready in {ms} ms");
            ENGINE.with(|e| {
                if let Some(engine) = e.borrow_mut().as_mut() {
                    engine.ready = true;
                }
            });
            state.python.set(PyStatus::Ready);
        }
        FromWorker::Failed { message } => {
            // The worker answers the runs it has; the page answers the next.
            ENGINE.with(|e| {
                if let Some(engine) = e.borrow_mut().as_mut()
                    && !engine.ready
                {
                    engine.failed.get_or_insert_with(|| message.clone());
                }
            });
            state.python.set(PyStatus::Failed(message));
        }
        FromWorker::Out { run, stream, text } => output(
            state,
            run,
            if stream == "stderr" {
                Output::Stderr { text }
            } else {
                Output::Stdout { text }
            },
        ),
        FromWorker::Result { run, data } => output(state, run, Output::Rich { data }),
        FromWorker::Error {
            run,
            name,
            value,
            traceback,
        } => output(
            state,
            run,
            Output::Error {
                name,
                value,
                traceback,
            },
        ),
        FromWorker::Done { run } => {
            let kernel = ENGINE.with(|e| {
                let mut engine = e.borrow_mut();
                let engine = engine.as_mut()?;
                engine.runs.retain(|r| *r != run);
                Some(engine.kernel.clone())
            });
            done(state, run, kernel.unwrap_or_default());
        }
    }
}

/// The worker raised an error. Before it is ready, that means it could not
/// start (its script did not load): every run it has, and every run to
/// come, is answered at once instead of waiting for the time limit.
fn worker_failed(state: SessionState, mut why: Option<String>) {
    let failed = ENGINE.with(|e| {
        let mut engine = e.borrow_mut();
        let engine = engine.as_mut()?;
        if engine.ready {
            return None;
        }
        let why = engine
            .failed
            .get_or_insert_with(|| why.take().unwrap_or_else(|| WORKER_FAILED.into()))
            .clone();
        Some((std::mem::take(&mut engine.runs), engine.kernel.clone(), why))
    });
    let Some((runs, kernel, why)) = failed else {
        leptos::logging::warn!(
            "the page's Python worker raised an error: {}",
            why.as_deref().unwrap_or("(no message)")
        );
        return;
    };
    state.python.set(PyStatus::Failed(why.clone()));
    let message = cannot_start(&why);
    for run in runs {
        refuse(state, run, &message, kernel.clone());
    }
}

/// A new id for a new Python: letters and digits.
fn new_kernel_id() -> String {
    let random = (js_sys::Math::random() * 4_294_967_296.0) as u64;
    let now = js_sys::Date::now() as u64;
    format!("k{now:x}{random:08x}")
}
