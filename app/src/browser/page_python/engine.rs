//! The page's Python itself: the sandboxed frame, the channel its worker
//! talks over, and what may come back through it.

use std::collections::{HashMap, VecDeque};
use std::time::Duration;

use leptos::prelude::*;
use wasm_bindgen::JsCast;
use wasm_bindgen::closure::Closure;
use web_sys::{HtmlIFrameElement, MessageEvent, MessagePort};

use super::PagePython;

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

/// What the frame posts: its own messages, then its worker's.
pub(super) use crate::reader::FromWorker;

/// The page's Python: a frame and the worker in it.
pub(super) struct Engine {
    pub(super) frame: HtmlIFrameElement,
    /// The page's end of the channel, once the frame said hello.
    pub(super) port: Option<MessagePort>,
    /// Messages for the frame posted before it said hello.
    pub(super) waiting: Vec<String>,
    /// New with every frame: the server tells a reloaded Python by it.
    pub(super) kernel: String,
    /// The frame can interrupt a run (it is cross-origin isolated); false
    /// until it says so.
    pub(super) interruptible: bool,
    /// Runs posted to the worker, the running one first, each with its
    /// wall-clock limit in milliseconds (counted from its program's start).
    pub(super) runs: VecDeque<u64>,
    pub(super) limits: HashMap<u64, u64>,
    /// The run whose program began (its Python up, its packages loaded);
    /// before that the worker may be busy for seconds without reading a stop.
    pub(super) started: Option<u64>,
    /// The worker said it is ready.
    pub(super) ready: bool,
    /// Why the worker could not start: every run is answered with it.
    pub(super) failed: Option<String>,
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

impl Engine {
    pub(super) fn spawn(python: PagePython, url: &str) -> Result<Self, String> {
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
            python.with_engine(|engine| {
                if let Some(engine) = engine.as_mut()
                    && engine.kernel == hello_kernel
                {
                    engine.accept(&ev);
                }
            });
        });
        let on_message = Closure::<dyn FnMut(MessageEvent)>::new(move |ev: MessageEvent| {
            if let Some(message) = read_message(&ev.data()) {
                python.on_worker(message);
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
            limits: HashMap::new(),
            started: None,
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
                let silent = python
                    .with_engine(|engine| {
                        engine
                            .as_ref()
                            .is_some_and(|engine| engine.kernel == kernel && engine.port.is_none())
                    })
                    .unwrap_or(false);
                if silent {
                    python.worker_failed(Some("Python's frame did not load".into()));
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

    pub(super) fn post_json(&mut self, message: &serde_json::Value) -> Result<(), String> {
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

    pub(super) fn post_run(
        &mut self,
        run: u64,
        code: &str,
        fresh: bool,
        limit_ms: u64,
    ) -> Result<(), String> {
        self.post_json(&serde_json::json!({
            "cmd": "run", "run": run, "code": code, "fresh": fresh,
        }))?;
        self.runs.push_back(run);
        self.limits.insert(run, limit_ms);
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
    match crate::reader::from_worker_text(&String::from(text)) {
        Ok(message) => Some(message),
        Err(err) => {
            leptos::logging::warn!("unreadable message from Python: {err}");
            None
        }
    }
}

/// A new id for a new Python: letters and digits.
fn new_kernel_id() -> String {
    let random = (js_sys::Math::random() * 4_294_967_296.0) as u64;
    let now = js_sys::Date::now() as u64;
    format!("k{now:x}{random:08x}")
}
