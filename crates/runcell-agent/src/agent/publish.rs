//! Cells a turn publishes whole: text, a refusal to run a program, an
//! error from the model, and an explanation's rendered math.

use runcell_protocol::{CellError, CellId, CellKind, CellStatus, EventBody};

use crate::session::SessionLog;
use runcell_llm::LlmError;

/// A cell holding `text`, complete.
pub(super) fn publish_text(session: &SessionLog, kind: CellKind, text: &str) {
    publish_cell(session, kind, text, CellStatus::Ok, None);
}

/// A result cell saying why a program was not run.
pub(super) fn publish_refusal(
    session: &SessionLog,
    code_cell: CellId,
    attempt: u32,
    code: &str,
    problem: &str,
) {
    let cell_id = session.next_cell_id();
    session.publish(EventBody::CellStarted {
        cell_id,
        cell_kind: CellKind::Result,
        language: None,
        attempt: Some(attempt),
        source: Some(code_cell),
    });
    session.publish(EventBody::CellOutput {
        cell_id,
        output: runcell_protocol::Output::Error {
            name: "InvalidCode".into(),
            value: problem.to_string(),
            traceback: Vec::new(),
        },
    });
    session.publish(EventBody::CellFinished {
        cell_id,
        status: CellStatus::Error,
        elapsed_ms: 0,
        error: Some(CellError {
            code: code.into(),
            message: format!("not run: {problem}"),
        }),
    });
}

/// runcell's note on a code cell: why its attempt was sent back, or what
/// runcell changed to make it.
pub(super) fn publish_note(session: &SessionLog, code_cell: CellId, note: &str) {
    session.publish(EventBody::CellNote {
        cell_id: code_cell,
        note: note.to_string(),
    });
}

/// A whole cell, `text` in one piece, finished as `status`.
fn publish_cell(
    session: &SessionLog,
    kind: CellKind,
    text: &str,
    status: CellStatus,
    error: Option<CellError>,
) {
    let cell_id = session.next_cell_id();
    session.publish(EventBody::CellStarted {
        cell_id,
        cell_kind: kind,
        language: None,
        attempt: None,
        source: None,
    });
    session.publish(EventBody::CellDelta {
        cell_id,
        text: text.to_string(),
        highlight: None,
    });
    if kind == CellKind::Explanation {
        publish_rendered(session, cell_id, text);
    }
    session.publish(EventBody::CellFinished {
        cell_id,
        status,
        elapsed_ms: 0,
        error,
    });
}

/// An explanation's whole markup, rendered here, when it holds math: the
/// page's bundle has no LaTeX parser (it shows a formula as its source
/// while it streams), so the finished cell takes the server's MathML, as a
/// code cell takes the server's highlighting.
pub(super) fn publish_rendered(session: &SessionLog, cell_id: CellId, text: &str) {
    if let Some(highlight) = runcell_protocol::render::markdown::rendered_with_math(text) {
        session.publish(EventBody::CellDelta {
            cell_id,
            text: String::new(),
            highlight: Some(highlight),
        });
    }
}

pub(super) fn llm_cell_error(e: &LlmError) -> CellError {
    CellError {
        code: e.code().into(),
        message: e.to_string(),
    }
}
