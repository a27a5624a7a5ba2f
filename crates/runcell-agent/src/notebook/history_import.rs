//! A session's own history as a file: what `GET /api/sessions/{id}/events`
//! gives (one `{"type":"event",…}` frame per line) read back into a new
//! session by `POST /api/sessions/import`, beside Jupyter notebooks. It
//! keeps what a notebook cannot (attempts, stops, withdrawn explanations),
//! so a session moves between servers whole.
//!
//! The file is the visitor's, so nothing in it is trusted as the server's
//! own: code highlighting (markup the page shows as it is) is dropped and
//! made again here, images that point elsewhere are left out, the events
//! are numbered afresh, and their number is bounded.

use std::collections::HashMap;

use runcell_protocol::{CellId, CellKind, EventBody, Output, ServerMessage, SessionEvent};

use super::{ImportError, MAX_IMPORT_BYTES};
use crate::highlight::{Highlighter, highlight_all};

/// The most events one history file may hold.
pub const MAX_EVENTS: usize = 200_000;

/// Whether `bytes` look like a history file (its first line an event frame)
/// rather than a notebook.
pub fn is_history(bytes: &[u8]) -> bool {
    let first = bytes
        .split(|&b| b == b'\n')
        .map(<[u8]>::trim_ascii)
        .find(|line| !line.is_empty());
    first.is_some_and(|line| {
        serde_json::from_slice::<serde_json::Value>(line)
            .is_ok_and(|v| v.get("type").and_then(|t| t.as_str()) == Some("event"))
    })
}

/// The history's title (its first question's first line) and its events,
/// numbered from 1.
pub fn import(
    bytes: &[u8],
    highlighter: &Highlighter,
) -> Result<(String, Vec<SessionEvent>), ImportError> {
    if bytes.len() > MAX_IMPORT_BYTES {
        return Err(ImportError::new(format!(
            "the file is {} bytes; at most {} are accepted",
            bytes.len(),
            MAX_IMPORT_BYTES
        )));
    }
    let mut events = Vec::new();
    let mut open = OpenCells::default();
    for (n, line) in bytes.split(|&b| b == b'\n').enumerate() {
        let line = line.trim_ascii();
        if line.is_empty() {
            continue;
        }
        let (ts_ms, event) = read_event(n, line)?;
        if events.len() >= MAX_EVENTS {
            return Err(ImportError::new(format!(
                "it holds more than {MAX_EVENTS} events"
            )));
        }
        for event in open.rewrite(event, highlighter) {
            events.push(SessionEvent {
                seq: events.len() as u64 + 1,
                ts_ms,
                event,
            });
        }
    }
    if events.is_empty() {
        return Err(ImportError::new("it holds no events"));
    }
    let title = events
        .iter()
        .find_map(|e| match &e.event {
            EventBody::UserMessage { text, .. } => Some(runcell_protocol::page::title_from(text)),
            _ => None,
        })
        .unwrap_or_default();
    Ok((title, events))
}

/// Line `n` (from 0) of the file, `line`, as an event and its time.
fn read_event(n: usize, line: &[u8]) -> Result<(u64, EventBody), ImportError> {
    let frame: ServerMessage = serde_json::from_slice(line).map_err(|e| {
        ImportError::new(format!("line {} is not an event of a session ({e})", n + 1))
    })?;
    let ServerMessage::Event(SessionEvent { ts_ms, event, .. }) = frame else {
        return Err(ImportError::new(format!(
            "line {} is not an event of a session",
            n + 1
        )));
    };
    Ok((ts_ms, event))
}

/// What the history's open code and explanation cells have shown so far, to
/// highlight or render each here when it finishes.
#[derive(Default)]
struct OpenCells {
    /// Code cells' text and language.
    code: HashMap<CellId, (String, String)>,
    explanations: HashMap<CellId, String>,
}

impl OpenCells {
    /// The events `event` of the file becomes: its highlighting dropped, a
    /// cell's highlighting made here before the cell finishes, none for an
    /// image (it may point elsewhere).
    fn rewrite(&mut self, event: EventBody, highlighter: &Highlighter) -> Vec<EventBody> {
        let mut bodies = vec![event];
        match &mut bodies[0] {
            EventBody::CellStarted {
                cell_id,
                cell_kind: CellKind::Code,
                language,
                ..
            } => {
                self.code.insert(
                    *cell_id,
                    (String::new(), language.clone().unwrap_or_default()),
                );
            }
            EventBody::CellStarted {
                cell_id,
                cell_kind: CellKind::Explanation,
                ..
            } => {
                self.explanations.insert(*cell_id, String::new());
            }
            EventBody::CellDelta {
                cell_id,
                text,
                highlight,
            } => {
                *highlight = None;
                if let Some((shown, _)) = self.code.get_mut(cell_id) {
                    shown.push_str(text);
                }
                if let Some(shown) = self.explanations.get_mut(cell_id) {
                    shown.push_str(text);
                }
            }
            EventBody::CellReset { cell_id } => {
                if let Some(shown) = self.explanations.get_mut(cell_id) {
                    shown.clear();
                }
            }
            EventBody::CellOutput { output, .. } => {
                if matches!(output, Output::Image { .. }) {
                    return Vec::new();
                }
            }
            EventBody::CellFinished { cell_id, .. } => {
                let cell_id = *cell_id;
                // An explanation's math, rendered here as the agent does.
                if let Some(shown) = self.explanations.remove(&cell_id)
                    && let Some(highlight) =
                        runcell_protocol::render::markdown::rendered_with_math(&shown)
                {
                    bodies.insert(
                        0,
                        EventBody::CellDelta {
                            cell_id,
                            text: String::new(),
                            highlight: Some(highlight),
                        },
                    );
                }
                if let Some((shown, language)) = self.code.remove(&cell_id)
                    && let Some(highlight) = highlight_all(highlighter, &language, &shown)
                {
                    bodies.insert(
                        0,
                        EventBody::CellDelta {
                            cell_id,
                            text: String::new(),
                            highlight: Some(highlight),
                        },
                    );
                }
            }
            _ => {}
        }
        bodies
    }
}

#[cfg(test)]
mod tests {
    use runcell_protocol::notebook::Notebook;
    use runcell_protocol::{CellStatus, Highlight, TurnId, TurnKind};

    use super::*;

    fn file(bodies: Vec<EventBody>) -> Vec<u8> {
        SessionEvent::numbered(bodies, 40)
            .into_iter()
            .map(|e| serde_json::to_string(&ServerMessage::Event(e)).expect("json") + "\n")
            .collect::<String>()
            .into_bytes()
    }

    #[test]
    fn a_history_comes_back_renumbered_with_its_own_highlighting_only() {
        let code = CellId(2);
        let bytes = file(vec![
            EventBody::TurnStarted {
                turn: TurnId(1),
                turn_kind: TurnKind::Ask,
                alternative_to: None,
            },
            EventBody::UserMessage {
                cell_id: CellId(1),
                text: "Sum it\nplease".into(),
                markup: None,
            },
            EventBody::CellStarted {
                cell_id: code,
                cell_kind: CellKind::Code,
                language: Some("python".into()),
                attempt: Some(1),
                source: None,
            },
            EventBody::CellDelta {
                cell_id: code,
                text: "print(1 + 1)".into(),
                highlight: Some(Highlight {
                    html: "<img src=x onerror=alert(1)>".into(),
                    upto: 12,
                }),
            },
            EventBody::CellOutput {
                cell_id: code,
                output: Output::Image {
                    url: "https://elsewhere.example/track.png".into(),
                    text: String::new(),
                    width: Some(1),
                    height: Some(1),
                },
            },
            EventBody::CellFinished {
                cell_id: code,
                status: CellStatus::Ok,
                elapsed_ms: 3,
                error: None,
            },
        ]);
        assert!(is_history(&bytes));
        let (title, events) = import(&bytes, &Highlighter::new()).expect("a history");
        assert_eq!(title, "Sum it");
        assert_eq!(
            events.iter().map(|e| e.seq).collect::<Vec<_>>(),
            (1..=events.len() as u64).collect::<Vec<_>>()
        );
        let all = serde_json::to_string(&events).expect("json");
        assert!(!all.contains("onerror"), "{all}");
        assert!(!all.contains("elsewhere.example"), "{all}");
        let notebook = Notebook::from_events(&events);
        let cell = notebook.cell(code).expect("the code cell");
        assert_eq!(cell.text, "print(1 + 1)");
        assert!(
            cell.html.contains("print"),
            "highlighted here: {}",
            cell.html
        );
    }

    #[test]
    fn what_is_not_a_history_is_refused_plainly() {
        assert!(!is_history(b"{\"nbformat\": 4}"));
        assert!(!is_history(b""));
        let bad =
            b"{\"type\":\"event\",\"seq\":1,\"ts_ms\":0,\"event\":{\"kind\":\"turn_started\"}}\n";
        let err = import(bad, &Highlighter::new()).expect_err("a broken event");
        assert!(err.to_string().contains("line 1"), "{err}");
        let welcome =
            b"{\"type\":\"welcome\",\"protocol\":1,\"session_id\":\"x\",\"last_seq\":0}\n";
        assert!(import(welcome, &Highlighter::new()).is_err());
    }
}
