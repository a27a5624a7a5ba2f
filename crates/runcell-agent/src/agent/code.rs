//! A code cell written by the model: the program streams in as the model
//! writes it (tool-call arguments, a structured reply, or a fenced block in
//! prose), highlighted a line at a time.

use runcell_protocol::{CellError, CellId, CellKind, CellStatus, EventBody, Language};

use crate::highlight::{CellHighlighter, Highlighter};
use crate::session::SessionLog;
use runcell_llm::tools::{ExecuteCode, PartialCode};

/// How the model hands over its program.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CodeDelivery {
    /// The arguments of an `execute_code` tool call.
    Tool,
    /// A reply constrained to the `execute_code` arguments schema.
    Structured,
    /// A fenced block in a prose reply.
    Fenced,
}

/// The code cell of one attempt, opened when the first code arrives.
pub struct CodeCell<'a> {
    session: &'a SessionLog,
    highlighter: &'a Highlighter,
    attempt: u32,
    open: Option<Open<'a>>,
    /// What the model has sent so far in the channel that carries code.
    raw: String,
}

struct Open<'a> {
    id: CellId,
    shown: String,
    highlight: CellHighlighter<'a>,
    started: std::time::Instant,
}

impl<'a> CodeCell<'a> {
    pub fn new(session: &'a SessionLog, highlighter: &'a Highlighter, attempt: u32) -> Self {
        Self {
            session,
            highlighter,
            attempt,
            open: None,
            raw: String::new(),
        }
    }

    pub fn is_open(&self) -> bool {
        self.open.is_some()
    }

    /// Takes more of the model's reply and shows the code it completes.
    pub fn push(&mut self, channel: CodeDelivery, piece: &str) {
        self.raw.push_str(piece);
        let (language, visible) = match channel {
            CodeDelivery::Tool | CodeDelivery::Structured => {
                let partial = PartialCode::read(&self.raw);
                (partial.language, partial.code)
            }
            CodeDelivery::Fenced => match runcell_llm::fenced::extract_code(&self.raw) {
                // Only whole lines: the end of a block may be a fence.
                Some(code) => {
                    let body = code.code;
                    let whole = body.rfind('\n').map_or(0, |i| i + 1);
                    (Some(code.language), body[..whole].to_string())
                }
                None => (None, String::new()),
            },
        };
        if visible.is_empty() {
            return;
        }
        let session = self.session;
        let open = self.ensure_open(language.as_deref().unwrap_or(Language::Python.name()));
        if let Some(new) = visible
            .strip_prefix(open.shown.as_str())
            .filter(|n| !n.is_empty())
        {
            let new = new.to_string();
            Self::append(session, open, &new);
        }
    }

    /// Shows the program as it finally stands and finishes the cell; the code
    /// is what will run. A program that does not continue what was shown
    /// (a model that changed its mind) goes into a cell of its own.
    pub fn complete(&mut self, program: &ExecuteCode) -> CellId {
        let rest = match self.open.as_ref() {
            None => Some(program.code.clone()),
            Some(open) => match program.code.strip_prefix(open.shown.as_str()) {
                Some(rest) => Some(rest.to_string()),
                None if open.shown.trim_end_matches('\n') == program.code => Some(String::new()),
                None => None,
            },
        };
        let rest = rest.unwrap_or_else(|| {
            tracing::warn!("the finished program differs from the streamed one");
            self.finish(
                CellStatus::Error,
                Some(CellError {
                    code: "llm_code_changed".into(),
                    message: "the model rewrote this program at the end; the next cell holds the version that runs".into(),
                }),
            );
            program.code.clone()
        });
        let session = self.session;
        let open = self.ensure_open(&program.language);
        Self::append(session, open, &rest);
        self.finish(CellStatus::Ok, None)
    }

    /// Finishes the cell (opening an empty one to carry an error, if none is open).
    pub fn finish(&mut self, status: CellStatus, error: Option<CellError>) -> CellId {
        if self.open.is_none() {
            self.ensure_open(Language::Python.name());
        }
        let Some(mut open) = self.open.take() else {
            return CellId(0);
        };
        if let Some(highlight) = open.highlight.finish() {
            self.session.publish(EventBody::CellDelta {
                cell_id: open.id,
                text: String::new(),
                highlight: Some(highlight),
            });
        }
        self.session.publish(EventBody::CellFinished {
            cell_id: open.id,
            status,
            elapsed_ms: runcell_core::clock::millis(open.started.elapsed()),
            error,
        });
        self.raw.clear();
        open.id
    }

    fn ensure_open(&mut self, language: &str) -> &mut Open<'a> {
        let (session, highlighter, attempt) = (self.session, self.highlighter, self.attempt);
        self.open.get_or_insert_with(|| {
            let id = session.next_cell_id();
            session.publish(EventBody::CellStarted {
                cell_id: id,
                cell_kind: CellKind::Code,
                language: Some(language.to_string()),
                attempt: Some(attempt),
                source: None,
            });
            Open {
                id,
                shown: String::new(),
                highlight: highlighter.cell(language),
                started: std::time::Instant::now(),
            }
        })
    }

    fn append(session: &SessionLog, open: &mut Open<'_>, text: &str) {
        if text.is_empty() {
            return;
        }
        open.shown.push_str(text);
        let highlight = open.highlight.push(text);
        session.publish(EventBody::CellDelta {
            cell_id: open.id,
            text: text.to_string(),
            highlight,
        });
    }
}

/// A whole program shown at once (code the person wrote).
pub fn publish_complete(
    session: &SessionLog,
    highlighter: &Highlighter,
    code: &str,
    language: &str,
    source: Option<CellId>,
) -> CellId {
    let id = session.next_cell_id();
    session.publish(EventBody::CellStarted {
        cell_id: id,
        cell_kind: CellKind::Code,
        language: Some(language.to_string()),
        attempt: None,
        source,
    });
    session.publish(EventBody::CellDelta {
        cell_id: id,
        text: code.to_string(),
        highlight: crate::highlight::highlight_all(highlighter, language, code),
    });
    session.publish(EventBody::CellFinished {
        cell_id: id,
        status: CellStatus::Ok,
        elapsed_ms: 0,
        error: None,
    });
    id
}
