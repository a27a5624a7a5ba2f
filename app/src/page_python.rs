//! The Browser sandbox's page side (hydrate only): Python (Pyodide) in a
//! module worker (`/py-worker.mjs`), which runs what the server sends in
//! `browser_run` frames and streams the output back as `browser_output`
//! frames, so the agent's turn goes on as with any sandbox.
//!
//! Stop writes the run's id and a flag into a `SharedArrayBuffer` the
//! worker's Python polls (`KeyboardInterrupt` for that run only); a program
//! that does not stop, or a page that is not cross-origin isolated, gets the
//! worker ended and a new Python started, said plainly in the result.
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
use web_sys::{MessageEvent, Worker, WorkerOptions, WorkerType};

use crate::components::{PyStatus, SessionState};
use crate::protocol::{ClientMessage, Output, ServerMessage};

/// The worker script the server serves.
const WORKER_URL: &str = "/py-worker.mjs";
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

/// What the worker posts.
#[derive(Debug, Deserialize)]
#[serde(tag = "t", rename_all = "snake_case")]
enum FromWorker {
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

/// The page's Python.
struct Engine {
    worker: Worker,
    /// New with every worker: the server tells a reloaded Python by it.
    kernel: String,
    /// Interrupts a run; absent when the page is not isolated.
    interrupt: Option<Interrupt>,
    /// Runs posted to the worker, the running one first.
    runs: VecDeque<u64>,
    /// The worker said it is ready.
    ready: bool,
    /// Why the worker could not start: every run is answered with it.
    failed: Option<String>,
    _on_message: Closure<dyn FnMut(MessageEvent)>,
    _on_error: Closure<dyn FnMut(web_sys::Event)>,
}

impl Drop for Engine {
    /// Ends the worker; its handlers are taken off first, so that a message
    /// still queued never calls a dropped closure.
    fn drop(&mut self) {
        self.worker.set_onmessage(None);
        self.worker.set_onerror(None);
        self.worker.terminate();
    }
}

/// The words the page shares with the worker: the run to stop (a float64
/// at byte 8), then 2 in the flag (an int32 at byte 0). A stop names its
/// run, so it cannot reach a run that started since.
struct Interrupt {
    buffer: js_sys::SharedArrayBuffer,
    flag: js_sys::Int32Array,
    run: js_sys::Float64Array,
}

impl Interrupt {
    fn new() -> Self {
        let buffer = js_sys::SharedArrayBuffer::new(16);
        Self {
            flag: js_sys::Int32Array::new_with_byte_offset_and_length(&buffer, 0, 1),
            run: js_sys::Float64Array::new_with_byte_offset_and_length(&buffer, 8, 1),
            buffer,
        }
    }

    fn raise(&self, run: u64) {
        // Run ids are counted from 1: far below 2^53, exact as a float64.
        #[expect(clippy::cast_precision_loss, reason = "run ids stay below 2^53")]
        self.run.set_index(0, run as f64);
        // The atomic store publishes the id written before it.
        let _ = js_sys::Atomics::store(&self.flag, 0, 2);
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
/// a waiting one; a program that does not stop in time ends the worker.
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
        // The worker cancels a waiting run, or one that awaits something.
        let _ = engine.post_json(&serde_json::json!({"cmd": "cancel", "run": run}));
        match (&engine.interrupt, position) {
            // The flag names the run: harmless if it has not begun.
            (Some(interrupt), _) => {
                interrupt.raise(run);
                Action::Interrupted
            }
            (None, 0) => Action::Restart,
            (None, _) => Action::Nothing,
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
                "(This page is not cross-origin isolated, so its Python cannot be interrupted: on {why} it was ended and is starting again, and its variables are gone.)\n"
            ),
        ),
    }
}

/// Ends the worker and starts another: every run it had ends, the running
/// one with `note`.
fn restart(state: SessionState, note: &str) {
    let Some(old) = ENGINE.with(|e| e.borrow_mut().take()) else {
        return;
    };
    // Its worker ends when it is dropped, below.
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
        let options = WorkerOptions::new();
        options.set_type(WorkerType::Module);
        let worker = Worker::new_with_options(WORKER_URL, &options)
            .map_err(|e| format!("the browser cannot start a worker: {e:?}"))?;
        let on_message = Closure::<dyn FnMut(MessageEvent)>::new(move |ev: MessageEvent| {
            if let Some(text) = ev.data().as_string() {
                match serde_json::from_str::<FromWorker>(&text) {
                    Ok(message) => from_worker(state, message),
                    Err(err) => leptos::logging::warn!("unreadable message from Python: {err}"),
                }
            }
        });
        let on_error = Closure::<dyn FnMut(web_sys::Event)>::new(move |ev: web_sys::Event| {
            // An `ErrorEvent` says what went wrong; a script that did not
            // load gives a bare `Event`.
            let why = js_sys::Reflect::get(&ev, &"message".into())
                .ok()
                .and_then(|m| m.as_string())
                .filter(|m| !m.is_empty());
            worker_failed(state, why);
        });
        worker.set_onmessage(Some(on_message.as_ref().unchecked_ref()));
        worker.set_onerror(Some(on_error.as_ref().unchecked_ref()));
        let kernel = new_kernel_id();
        let mut engine = Self {
            worker,
            kernel,
            interrupt: None,
            runs: VecDeque::new(),
            ready: false,
            failed: None,
            _on_message: on_message,
            _on_error: on_error,
        };
        engine.post_json(&serde_json::json!({"cmd": "init", "indexURL": url}))?;
        engine.interrupt = engine.share_interrupt();
        Ok(engine)
    }

    /// Gives the worker the words it can be interrupted through, when the
    /// page may share memory (it is cross-origin isolated).
    fn share_interrupt(&self) -> Option<Interrupt> {
        let isolated = js_sys::Reflect::get(&js_sys::global(), &"crossOriginIsolated".into())
            .ok()
            .and_then(|v| v.as_bool())
            .unwrap_or(false);
        if !isolated {
            return None;
        }
        let interrupt = Interrupt::new();
        let message = js_sys::Object::new();
        js_sys::Reflect::set(&message, &"cmd".into(), &"irq".into()).ok()?;
        js_sys::Reflect::set(&message, &"buf".into(), &interrupt.buffer).ok()?;
        self.worker.post_message(&message).ok()?;
        Some(interrupt)
    }

    fn post_json(&self, message: &serde_json::Value) -> Result<(), String> {
        self.worker
            .post_message(&message.to_string().into())
            .map_err(|e| format!("cannot reach the page's Python: {e:?}"))
    }

    fn post_run(&mut self, run: u64, code: &str, fresh: bool) -> Result<(), String> {
        self.post_json(&serde_json::json!({
            "cmd": "run", "run": run, "code": code, "fresh": fresh,
        }))?;
        self.runs.push_back(run);
        Ok(())
    }
}

fn from_worker(state: SessionState, message: FromWorker) {
    match message {
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
