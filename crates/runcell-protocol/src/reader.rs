//! The page's reading of the frames it is sent, by hand from a parsed
//! [`Value`] rather than through serde's derived code.
//!
//! serde's `Deserialize` for the protocol's internally tagged enums
//! ([`ServerMessage`], [`EventBody`], [`Output`]) buffers every frame and is
//! generated once per deserializer: reading the socket's frames and the
//! page's events with it made the shipped bundle 8% bigger (1.75 MB
//! against 1.63 MB after `wasm-opt -Oz`; 5% gzipped), December 2026.
//! The page already parses JSON into a [`Value`] (its XHR answers), so it
//! reads the server's frames, a session's events and its Python's messages
//! from one too. The server keeps the derives in [`crate::wire`], which
//! define the wire; this module reads the same shapes and is tested against
//! them (every kind of frame round-trips, and what serde refuses is refused).
//!
//! It is kept in step by the compiler: each tag is read as a kind
//! ([`EventKind`], [`OutputKind`], [`ServerMessageKind`], and every enum of
//! names through [`Named`]) and each `match` on kinds has no `_` arm, so a
//! new variant of the wire does not compile until it is read here; the
//! tests' witnesses (`reader/tests.rs`) do not compile until it has samples.
//!
//! What is read as serde reads it: tags, required fields, `#[serde(default)]`
//! fields, integers that fit the field's type; unknown fields are ignored.
//! Two differences, in what no server writes: a `null` counts as an absent
//! field, also where serde would refuse it (a defaulted string or flag),
//! and a struct is never read from an array of its fields. One on purpose:
//! a rich output's `metadata` is not kept (pages do not use it).

use std::collections::BTreeMap;

use serde_json::Value;

use crate::page::FileItem;
use crate::{
    CellError, CellId, EventBody, EventKind, Highlight, Named, Output, OutputKind, ServerMessage,
    ServerMessageKind, SessionEvent, Table, TurnId,
};

/// Why a frame could not be read: the field (or tag) that was missing or
/// not of its type.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("unreadable `{0}`")]
pub struct Unreadable(pub &'static str);

type Read<T> = Result<T, Unreadable>;

/// A frame from the server, as text.
pub fn server_message_text(text: &str) -> Read<ServerMessage> {
    let value = serde_json::from_str::<Value>(text).map_err(|_| Unreadable("frame"))?;
    server_message(&value)
}

/// A frame from the server.
pub fn server_message(v: &Value) -> Read<ServerMessage> {
    Ok(match named(v, "type")? {
        ServerMessageKind::Welcome => ServerMessage::Welcome {
            protocol: u32_of(v, "protocol")?,
            session_id: text(v, "session_id")?,
            last_seq: u64_of(v, "last_seq")?,
        },
        ServerMessageKind::Event => ServerMessage::Event(session_event(v)?),
        ServerMessageKind::Error => ServerMessage::Error {
            code: named(v, "code")?,
            message: text(v, "message")?,
        },
        ServerMessageKind::BrowserRun => ServerMessage::BrowserRun {
            run: u64_of(v, "run")?,
            code: text(v, "code")?,
            fresh: flag(v, "fresh")?,
            timeout_ms: u64_of(v, "timeout_ms")?,
            prepare_ms: optional(v, "prepare_ms")
                .map(|p| p.as_u64().ok_or(Unreadable("prepare_ms")))
                .transpose()?
                .unwrap_or(0),
        },
        ServerMessageKind::BrowserStop => ServerMessage::BrowserStop {
            run: u64_of(v, "run")?,
        },
    })
}

/// A session's events: a list of [`SessionEvent`]s.
pub fn session_events(v: &Value) -> Read<Vec<SessionEvent>> {
    v.as_array()
        .ok_or(Unreadable("events"))?
        .iter()
        .map(session_event)
        .collect()
}

/// `deserialize_with` for a list of events (a [`SessionPageData`]'s, which the
/// page reads as it hydrates): parsed as a [`Value`], then read here.
///
/// [`SessionPageData`]: crate::page::SessionPageData
pub fn deserialize_events<'de, D>(deserializer: D) -> Result<Vec<SessionEvent>, D::Error>
where
    D: serde::Deserializer<'de>,
{
    use serde::Deserialize;
    let value = Value::deserialize(deserializer)?;
    session_events(&value).map_err(serde::de::Error::custom)
}

fn cell_error(e: &Value) -> Read<CellError> {
    Ok(CellError {
        code: text(e, "code")?,
        message: text(e, "message")?,
    })
}

/// A sequenced event.
pub fn session_event(v: &Value) -> Read<SessionEvent> {
    Ok(SessionEvent {
        seq: u64_of(v, "seq")?,
        ts_ms: u64_of(v, "ts_ms")?,
        event: event_body(required(v, "event")?)?,
    })
}

/// One step in a session's history.
pub fn event_body(v: &Value) -> Read<EventBody> {
    Ok(match named(v, "kind")? {
        EventKind::TurnStarted => EventBody::TurnStarted {
            turn: TurnId(u64_of(v, "turn")?),
            turn_kind: named(v, "turn_kind")?,
            alternative_to: optional(v, "alternative_to")
                .map(|_| u64_of(v, "alternative_to").map(TurnId))
                .transpose()?,
        },
        EventKind::BranchSelected => EventBody::BranchSelected {
            turn: TurnId(u64_of(v, "turn")?),
        },
        EventKind::KernelRestored => EventBody::KernelRestored {
            programs: u32_of(v, "programs")?,
            error: optional(v, "error").map(cell_error).transpose()?,
        },
        EventKind::UserMessage => EventBody::UserMessage {
            cell_id: cell_id(v, "cell_id")?,
            text: text(v, "text")?,
            markup: optional_text(v, "markup")?,
        },
        EventKind::CellStarted => EventBody::CellStarted {
            cell_id: cell_id(v, "cell_id")?,
            cell_kind: named(v, "cell_kind")?,
            language: optional_text(v, "language")?,
            attempt: optional(v, "attempt")
                .map(|_| u32_of(v, "attempt"))
                .transpose()?,
            source: optional(v, "source")
                .map(|_| cell_id(v, "source"))
                .transpose()?,
        },
        EventKind::CellDelta => EventBody::CellDelta {
            cell_id: cell_id(v, "cell_id")?,
            text: text(v, "text")?,
            highlight: optional(v, "highlight")
                .map(|h| {
                    Ok(Highlight {
                        html: text(h, "html")?,
                        upto: usize_of(h, "upto")?,
                    })
                })
                .transpose()?,
        },
        EventKind::CellReset => EventBody::CellReset {
            cell_id: cell_id(v, "cell_id")?,
        },
        EventKind::CellNote => EventBody::CellNote {
            cell_id: cell_id(v, "cell_id")?,
            note: text(v, "note")?,
        },
        EventKind::CellOutput => EventBody::CellOutput {
            cell_id: cell_id(v, "cell_id")?,
            output: output(required(v, "output")?)?,
        },
        EventKind::CellCleared => EventBody::CellCleared {
            cell_id: cell_id(v, "cell_id")?,
            wait: flag(v, "wait")?,
        },
        EventKind::DisplayUpdated => EventBody::DisplayUpdated {
            display_id: text(v, "display_id")?,
            output: output(required(v, "output")?)?,
        },
        EventKind::CellFinished => EventBody::CellFinished {
            cell_id: cell_id(v, "cell_id")?,
            status: named(v, "status")?,
            elapsed_ms: u64_of(v, "elapsed_ms")?,
            error: optional(v, "error").map(cell_error).transpose()?,
        },
        EventKind::TurnFinished => EventBody::TurnFinished {
            turn: TurnId(u64_of(v, "turn")?),
            status: named(v, "status")?,
            elapsed_ms: u64_of(v, "elapsed_ms")?,
            final_cell: optional(v, "final_cell")
                .map(|_| cell_id(v, "final_cell"))
                .transpose()?,
        },
        EventKind::KernelLost => EventBody::KernelLost {
            reason: named(v, "reason")?,
        },
        EventKind::KernelRefused => EventBody::KernelRefused {
            cell_id: cell_id(v, "cell_id")?,
            cap: named(v, "cap")?,
            held: u32_of(v, "held")?,
        },
    })
}

/// One piece of a result cell.
pub fn output(v: &Value) -> Read<Output> {
    Ok(match named(v, "type")? {
        OutputKind::Stdout => Output::Stdout {
            text: text(v, "text")?,
        },
        OutputKind::Stderr => Output::Stderr {
            text: text(v, "text")?,
        },
        OutputKind::Rich => Output::Rich {
            data: string_map(v, "data")?,
            main: main_of(v),
            metadata: String::new(),
            display_id: optional_text(v, "display_id")?,
        },
        OutputKind::Table => {
            let t = required(v, "table")?;
            Output::Table {
                table: Table {
                    columns: strings(t, "columns")?,
                    index_columns: optional(t, "index_columns")
                        .map(|_| usize_of(t, "index_columns"))
                        .transpose()?
                        .unwrap_or(0),
                    rows: list(t, "rows")?
                        .iter()
                        .map(|row| row_of(row).ok_or(Unreadable("rows")))
                        .collect::<Read<_>>()?,
                    elided: optional_text(t, "elided")?,
                },
                text: text_or_empty(v, "text")?,
                main: main_of(v),
            }
        }
        OutputKind::Image => Output::Image {
            url: text(v, "url")?,
            text: text_or_empty(v, "text")?,
            width: optional(v, "width")
                .map(|_| u32_of(v, "width"))
                .transpose()?,
            height: optional(v, "height")
                .map(|_| u32_of(v, "height"))
                .transpose()?,
        },
        OutputKind::File => Output::File {
            path: text(v, "path")?,
            name: text(v, "name")?,
            size: u64_of(v, "size")?,
        },
        OutputKind::Package => Output::Package {
            project: text(v, "project")?,
            version: text_or_empty(v, "version")?,
            size: optional(v, "size")
                .map(|_| u64_of(v, "size"))
                .transpose()?
                .unwrap_or(0),
            cached: flag(v, "cached")?,
            refused: optional_text(v, "refused")?,
        },
        OutputKind::Error => Output::Error {
            name: text(v, "name")?,
            value: text(v, "value")?,
            traceback: match optional(v, "traceback") {
                Some(_) => strings(v, "traceback")?,
                None => Vec::new(),
            },
        },
    })
}

/// Files as `GET /api/sessions/{id}/files` lists them (`{"files": [...]}`).
pub fn file_items(v: &Value) -> Read<Vec<FileItem>> {
    list(v, "files")?
        .iter()
        .map(|f| {
            Ok(FileItem {
                path: text(f, "path")?,
                name: text(f, "name")?,
                kind: text(f, "kind")?,
                size: u64_of(f, "size")?,
                modified_ms: optional(f, "modified_ms")
                    .map(|_| u64_of(f, "modified_ms"))
                    .transpose()?,
            })
        })
        .collect()
}

/// A message from the page's Python (its frame, then its worker), tagged
/// by `t`: the frame's protocol, not the server's (`public/py-frame.js`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FromWorker {
    /// The frame is there; whether Stop can interrupt its Python.
    Frame {
        interruptible: bool,
    },
    /// The worker could not be loaded, or raised an error.
    Broken {
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
    /// A run's program began (Python is up, its packages loaded).
    Started {
        run: u64,
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
        traceback: Vec<String>,
    },
    Done {
        run: u64,
    },
}

crate::wire::kinds! {
    /// The kinds of [`FromWorker`], by their `t` tags.
    pub enum WorkerKind for FromWorker {
        Frame => "frame",
        Broken => "broken",
        Loading => "loading",
        Ready => "ready",
        Failed => "failed",
        Started => "started",
        Out => "out",
        Result => "result",
        Error => "error",
        Done => "done",
    }
}

/// A message from the page's Python, as text.
pub fn from_worker_text(text: &str) -> Read<FromWorker> {
    let value = serde_json::from_str::<Value>(text).map_err(|_| Unreadable("message"))?;
    from_worker(&value)
}

/// A message from the page's Python.
pub fn from_worker(v: &Value) -> Read<FromWorker> {
    Ok(match named(v, "t")? {
        WorkerKind::Frame => FromWorker::Frame {
            interruptible: required(v, "interruptible")?
                .as_bool()
                .ok_or(Unreadable("interruptible"))?,
        },
        WorkerKind::Broken => FromWorker::Broken {
            message: text_or_empty(v, "message")?,
        },
        WorkerKind::Loading => FromWorker::Loading {
            stage: text(v, "stage")?,
        },
        WorkerKind::Ready => FromWorker::Ready {
            ms: u64_of(v, "ms")?,
        },
        WorkerKind::Failed => FromWorker::Failed {
            message: text(v, "message")?,
        },
        WorkerKind::Started => FromWorker::Started {
            run: u64_of(v, "run")?,
        },
        WorkerKind::Out => FromWorker::Out {
            run: u64_of(v, "run")?,
            stream: text(v, "stream")?,
            text: text(v, "text")?,
        },
        WorkerKind::Result => FromWorker::Result {
            run: u64_of(v, "run")?,
            data: string_map(v, "data")?,
        },
        WorkerKind::Error => FromWorker::Error {
            run: u64_of(v, "run")?,
            name: text(v, "name")?,
            value: text(v, "value")?,
            traceback: match optional(v, "traceback") {
                Some(_) => strings(v, "traceback")?,
                None => Vec::new(),
            },
        },
        WorkerKind::Done => FromWorker::Done {
            run: u64_of(v, "run")?,
        },
    })
}

/// An output's `main` flag: absent (or not a boolean) is `false`.
fn main_of(v: &Value) -> bool {
    optional(v, "main")
        .and_then(Value::as_bool)
        .unwrap_or(false)
}

/// `v[key]` when `v` is an object that has it, not `null`.
fn optional<'v>(v: &'v Value, key: &str) -> Option<&'v Value> {
    v.as_object()?.get(key).filter(|x| !x.is_null())
}

fn required<'v>(v: &'v Value, key: &'static str) -> Read<&'v Value> {
    optional(v, key).ok_or(Unreadable(key))
}

/// A tag or a name, as its variant (or kind); a frame that is no object
/// has none.
fn named<T: Named>(v: &Value, key: &'static str) -> Read<T> {
    T::named(name(v, key)?).ok_or(Unreadable(key))
}

fn name<'v>(v: &'v Value, key: &'static str) -> Read<&'v str> {
    required(v, key)?.as_str().ok_or(Unreadable(key))
}

fn text(v: &Value, key: &'static str) -> Read<String> {
    name(v, key).map(str::to_string)
}

/// A `#[serde(default)]` string: absent is empty.
fn text_or_empty(v: &Value, key: &'static str) -> Read<String> {
    match optional(v, key) {
        Some(_) => text(v, key),
        None => Ok(String::new()),
    }
}

/// An `Option<String>`: absent or `null` is `None`.
fn optional_text(v: &Value, key: &'static str) -> Read<Option<String>> {
    optional(v, key).map(|_| text(v, key)).transpose()
}

/// A `#[serde(default)]` boolean: absent is `false`.
fn flag(v: &Value, key: &'static str) -> Read<bool> {
    optional(v, key)
        .map(|f| f.as_bool().ok_or(Unreadable(key)))
        .transpose()
        .map(Option::unwrap_or_default)
}

fn u64_of(v: &Value, key: &'static str) -> Read<u64> {
    required(v, key)?.as_u64().ok_or(Unreadable(key))
}

fn u32_of(v: &Value, key: &'static str) -> Read<u32> {
    u32::try_from(u64_of(v, key)?).map_err(|_| Unreadable(key))
}

fn usize_of(v: &Value, key: &'static str) -> Read<usize> {
    usize::try_from(u64_of(v, key)?).map_err(|_| Unreadable(key))
}

fn cell_id(v: &Value, key: &'static str) -> Read<CellId> {
    u64_of(v, key).map(CellId)
}

fn list<'v>(v: &'v Value, key: &'static str) -> Read<&'v Vec<Value>> {
    required(v, key)?.as_array().ok_or(Unreadable(key))
}

/// A list of strings; `None` if any item is not one.
fn row_of(v: &Value) -> Option<Vec<String>> {
    v.as_array()?
        .iter()
        .map(|s| s.as_str().map(str::to_string))
        .collect()
}

fn strings(v: &Value, key: &'static str) -> Read<Vec<String>> {
    row_of(required(v, key)?).ok_or(Unreadable(key))
}

fn string_map(v: &Value, key: &'static str) -> Read<BTreeMap<String, String>> {
    required(v, key)?
        .as_object()
        .ok_or(Unreadable(key))?
        .iter()
        .map(|(k, s)| Ok((k.clone(), s.as_str().ok_or(Unreadable(key))?.to_string())))
        .collect()
}

mod page;
pub use page::{kernels_in_use, session_page_data};

#[cfg(test)]
mod tests;
