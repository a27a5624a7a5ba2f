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

mod engine;
mod outbox;

use std::cell::RefCell;
use std::rc::Rc;
use std::time::Duration;

use leptos::prelude::*;

use crate::contexts::{PyStatus, SessionState};
use crate::protocol::{ClientMessage, Output, ServerMessage};
use engine::{Engine, FromWorker};
use outbox::Outbox;

/// How long an interrupted program has to stop before its Python is ended.
const INTERRUPT_GRACE: Duration = Duration::from_millis(1500);
/// The same for a run whose program has not begun: the worker may be busy
/// for seconds starting Python or installing a package, and answers the stop
/// when it is done (ending Python then would lose the variables for nothing).
const PREPARE_STOP_GRACE: Duration = Duration::from_secs(20);
/// Added to the server's time limit before the page stops a run itself (the
/// server normally asks first).
const LOCAL_LIMIT_SLACK_MS: u64 = 2_000;
/// Why the worker failed to start, when the browser does not say.
const WORKER_FAILED: &str = "the Python worker failed to load (see the browser console)";

/// What the page's Python holds: its frame, when one runs, and the frames
/// for the server that wait for the socket.
#[derive(Default)]
struct Held {
    engine: RefCell<Option<Engine>>,
    outbox: RefCell<Outbox>,
}

/// The page's own Python; cheap to copy into callbacks. What it holds
/// belongs to the page's reactive owner: when the page goes, so does the
/// frame (and its worker), and callbacks still pending find nothing.
#[derive(Clone, Copy)]
pub struct PagePython {
    state: SessionState,
    held: StoredValue<Rc<Held>, LocalStorage>,
}

impl PagePython {
    /// Nothing runs until [`PagePython::start`].
    pub fn new(state: SessionState) -> Self {
        Self {
            state,
            held: StoredValue::new_local(Rc::new(Held::default())),
        }
    }

    /// `f` on the engine slot; `None` once the page is gone.
    fn with_engine<R>(self, f: impl FnOnce(&mut Option<Engine>) -> R) -> Option<R> {
        let held = self.held.try_get_value()?;
        let mut engine = held.engine.borrow_mut();
        Some(f(&mut engine))
    }

    /// `f` on the frames that wait; `None` once the page is gone.
    fn with_outbox<R>(self, f: impl FnOnce(&mut Outbox) -> R) -> Option<R> {
        let held = self.held.try_get_value()?;
        let mut outbox = held.outbox.borrow_mut();
        Some(f(&mut outbox))
    }

    /// Starts the page's Python in the background, unless it runs already.
    pub fn start(self) {
        // Running already, or the page is gone.
        if self.with_engine(|e| e.is_some()) != Some(false) {
            return;
        }
        let Some(url) = self.state.pyodide_url.get_value() else {
            self.state.python.set(PyStatus::Failed(
                "this server's site was built without Pyodide".into(),
            ));
            return;
        };
        match Engine::spawn(self, &url) {
            Ok(engine) => {
                self.with_engine(|e| *e = Some(engine));
                self.state.python.set(PyStatus::Loading("starting".into()));
                self.on_connected();
            }
            Err(message) => self.state.python.set(PyStatus::Failed(message)),
        }
    }

    /// Ends the page's Python (the page is going away).
    pub fn shut(self) {
        drop(self.with_engine(Option::take));
    }

    /// The socket (re)connected, or a new Python started: the server learns
    /// (again) which Python runs here, then gets the frames that waited, in
    /// order. Not sent while offline: the next connection does it.
    pub fn on_connected(self) {
        // Without a Python the page is not the runner: the server would refuse
        // the frames that wait.
        let Some(kernel) = self
            .with_engine(|e| e.as_ref().map(|e| e.kernel.clone()))
            .flatten()
        else {
            return;
        };
        if !self
            .state
            .send_frame(ClientMessage::BrowserAttach { kernel })
        {
            return;
        }
        self.with_outbox(|o| o.open = true);
        while let Some(frame) = self.with_outbox(Outbox::pop).flatten() {
            if !self.state.send_frame(frame.clone()) {
                self.with_outbox(|outbox| {
                    outbox.unpop(frame);
                    outbox.open = false;
                });
                break;
            }
        }
    }

    /// The socket closed: frames wait until the page attaches again.
    pub fn on_disconnected(self) {
        self.with_outbox(|o| o.open = false);
    }

    /// A frame for this page's Python; false if it is not one.
    pub fn on_server(self, message: &ServerMessage) -> bool {
        match message {
            ServerMessage::BrowserRun {
                run,
                code,
                fresh,
                timeout_ms,
                prepare_ms,
            } => {
                self.start();
                let posted = self
                    .with_engine(|e| {
                        e.as_mut().map(|engine| match &engine.failed {
                            Some(why) => Err((cannot_start(why), engine.kernel.clone())),
                            None => engine
                                .post_run(*run, code, *fresh, *timeout_ms)
                                .map_err(|message| (message, engine.kernel.clone())),
                        })
                    })
                    .flatten();
                match posted {
                    // The limit counts from the program's start (`started`);
                    // this one bounds the wait for Python and packages too.
                    Some(Ok(())) => {
                        self.stop_after(*run, prepare_ms.saturating_add(*timeout_ms));
                    }
                    Some(Err((message, kernel))) => self.refuse(*run, &message, kernel),
                    None => self.refuse(*run, "", String::new()),
                }
                true
            }
            ServerMessage::BrowserStop { run } => {
                self.stop(*run, "Stop");
                true
            }
            _ => false,
        }
    }

    /// Stops `run` itself when it is still on `limit_ms` (and a slack) from
    /// now: the server normally asks first.
    fn stop_after(self, run: u64, limit_ms: u64) {
        set_timeout(
            move || self.stop(run, "the time limit"),
            Duration::from_millis(limit_ms.saturating_add(LOCAL_LIMIT_SLACK_MS)),
        );
    }

    fn refuse(self, run: u64, message: &str, kernel: String) {
        let message = if message.is_empty() {
            "this page's Python is not running"
        } else {
            message
        };
        self.output(
            run,
            Output::Error {
                name: "BrowserError".into(),
                value: message.to_string(),
                traceback: Vec::new(),
            },
        );
        self.done(run, kernel);
    }

    fn output(self, run: u64, output: Output) {
        self.send(ClientMessage::BrowserOutput { run, output });
    }

    fn done(self, run: u64, kernel: String) {
        self.send(ClientMessage::BrowserDone { run, kernel });
    }

    /// Sends a frame about a run, or keeps it (behind any that wait already)
    /// until the page attaches again.
    fn send(self, message: ClientMessage) {
        let open = self
            .with_outbox(|outbox| outbox.open && outbox.frames.is_empty())
            .unwrap_or(false);
        if open && self.state.send_frame(message.clone()) {
            return;
        }
        self.with_outbox(|outbox| {
            outbox.open = false;
            outbox.push(message);
        });
    }

    /// Stops `run` if it is still on: interrupts it (running, or about to run
    /// when the page has not yet heard that the run before it ended), or drops
    /// a waiting one; a program that does not stop in time ends the frame
    /// (and the worker in it).
    fn stop(self, run: u64, why: &'static str) {
        enum Action {
            Nothing,
            Interrupted(Duration),
            Restart,
        }
        let action = self
            .with_engine(|e| {
                let Some(engine) = e.as_mut() else {
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
                let began = engine.started == Some(run);
                match (engine.interruptible, position) {
                    (true, _) if began => Action::Interrupted(INTERRUPT_GRACE),
                    (false, 0) if began => Action::Restart,
                    // Not begun: the worker answers the stop (or the cancel)
                    // once it is free.
                    (true, _) | (false, 0) => Action::Interrupted(PREPARE_STOP_GRACE),
                    (false, _) => Action::Nothing,
                }
            })
            .unwrap_or(Action::Nothing);
        match action {
            Action::Nothing => {}
            Action::Interrupted(grace) => set_timeout(
                move || {
                    // Still the running one: it did not stop.
                    let still = self
                        .with_engine(|e| {
                            e.as_ref()
                                .is_some_and(|engine| engine.runs.front() == Some(&run))
                        })
                        .unwrap_or(false);
                    if still {
                        self.restart(
                            &format!(
                                "(The program did not stop when interrupted ({why}), so this page's Python was ended and is starting again: its variables are gone.)\n"
                            ),
                        );
                    }
                },
                grace,
            ),
            Action::Restart => self.restart(
                &format!(
                    "(This page's Python cannot be interrupted (its frame is not cross-origin isolated): on {why} it was ended and is starting again, and its variables are gone.)\n"
                ),
            ),
        }
    }

    /// Ends the frame (and its worker) and starts another: every run it had
    /// ends, the running one with `note`.
    fn restart(self, note: &str) {
        let Some(old) = self.with_engine(Option::take).flatten() else {
            return;
        };
        // Its frame is removed when it is dropped, below, which ends its worker.
        for (i, run) in old.runs.iter().enumerate() {
            if i == 0 {
                self.output(
                    *run,
                    Output::Stderr {
                        text: note.to_string(),
                    },
                );
            }
            self.output(
                *run,
                Output::Error {
                    name: "KeyboardInterrupt".into(),
                    value: "stopped".into(),
                    traceback: Vec::new(),
                },
            );
            self.done(*run, old.kernel.clone());
        }
        drop(old);
        self.start();
    }

    fn on_worker(self, message: FromWorker) {
        match message {
            FromWorker::Frame { interruptible } => {
                self.with_engine(|e| {
                    if let Some(engine) = e.as_mut() {
                        engine.interruptible = interruptible;
                    }
                });
            }
            FromWorker::Broken { message } => {
                self.worker_failed(Some(message).filter(|m| !m.is_empty()));
            }
            FromWorker::Loading { stage } => self.state.python.set(PyStatus::Loading(stage)),
            FromWorker::Ready { ms } => {
                leptos::logging::log!("the page's Python is ready in {ms} ms");
                self.with_engine(|e| {
                    if let Some(engine) = e.as_mut() {
                        engine.ready = true;
                    }
                });
                self.state.python.set(PyStatus::Ready);
            }
            FromWorker::Failed { message } => {
                // The worker answers the runs it has; the page answers the next.
                self.with_engine(|e| {
                    if let Some(engine) = e.as_mut()
                        && !engine.ready
                    {
                        engine.failed.get_or_insert_with(|| message.clone());
                    }
                });
                self.state.python.set(PyStatus::Failed(message));
            }
            FromWorker::Started { run } => {
                let limit = self
                    .with_engine(|e| {
                        let engine = e.as_mut()?;
                        let limit = engine.limits.get(&run).copied()?;
                        engine.started = Some(run);
                        Some(limit)
                    })
                    .flatten();
                // A run this Python has: its time starts now.
                if let Some(limit) = limit {
                    self.stop_after(run, limit);
                    self.send(ClientMessage::BrowserStarted { run });
                }
            }
            FromWorker::Out { run, stream, text } => self.output(
                run,
                if stream == "stderr" {
                    Output::Stderr { text }
                } else {
                    Output::Stdout { text }
                },
            ),
            FromWorker::Result { run, data } => self.output(
                run,
                Output::Rich {
                    data,
                    main: false,
                    metadata: String::new(),
                    display_id: None,
                },
            ),
            FromWorker::Error {
                run,
                name,
                value,
                traceback,
            } => self.output(
                run,
                Output::Error {
                    name,
                    value,
                    traceback,
                },
            ),
            FromWorker::Done { run } => {
                let kernel = self
                    .with_engine(|e| {
                        let engine = e.as_mut()?;
                        engine.runs.retain(|r| *r != run);
                        engine.limits.remove(&run);
                        if engine.started == Some(run) {
                            engine.started = None;
                        }
                        Some(engine.kernel.clone())
                    })
                    .flatten();
                self.done(run, kernel.unwrap_or_default());
            }
        }
    }

    /// The worker raised an error. Before it is ready, that means it could not
    /// start (its script did not load): every run it has, and every run to
    /// come, is answered at once instead of waiting for the time limit.
    fn worker_failed(self, mut why: Option<String>) {
        let failed = self
            .with_engine(|e| {
                let engine = e.as_mut()?;
                if engine.ready {
                    return None;
                }
                let why = engine
                    .failed
                    .get_or_insert_with(|| why.take().unwrap_or_else(|| WORKER_FAILED.into()))
                    .clone();
                engine.limits.clear();
                Some((std::mem::take(&mut engine.runs), engine.kernel.clone(), why))
            })
            .flatten();
        let Some((runs, kernel, why)) = failed else {
            leptos::logging::warn!(
                "the page's Python worker raised an error: {}",
                why.as_deref().unwrap_or("(no message)")
            );
            return;
        };
        self.state.python.set(PyStatus::Failed(why.clone()));
        let message = cannot_start(&why);
        for run in runs {
            self.refuse(run, &message, kernel.clone());
        }
    }
}

/// What a run says when the worker could not start.
fn cannot_start(why: &str) -> String {
    format!(
        "Python could not start in this page ({why}): reload the page to try again, or pick another sandbox"
    )
}
