//! The notebook a session's events describe: a pure fold over [`SessionEvent`]s.
//!
//! The server renders it for the first page load and the browser keeps it up to
//! date from the WebSocket, with the same code, so both always agree on what a
//! history means.

use serde::{Deserialize, Serialize};

use crate::protocol::{CellError, CellId, CellKind, CellStatus, EventBody, SessionEvent};

/// One cell as the page shows it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Cell {
    pub id: CellId,
    pub kind: CellKind,
    pub text: String,
    pub status: CellStatus,
    pub elapsed_ms: Option<u64>,
    /// Why the cell failed, when it did.
    pub error: Option<CellError>,
}

/// What applying one event did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Applied {
    /// The event was the next one and is now part of the notebook.
    Applied,
    /// Already seen (a replay after a reconnect): ignored.
    Duplicate,
    /// Events between the last one applied and this one are missing: ignored.
    /// The caller should resume from [`Notebook::last_seq`].
    Gap,
}

/// A session's cells, in order.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Notebook {
    cells: Vec<Cell>,
    last_seq: u64,
}

impl Notebook {
    pub fn from_events<'a>(events: impl IntoIterator<Item = &'a SessionEvent>) -> Self {
        let mut notebook = Self::default();
        for event in events {
            notebook.apply(event);
        }
        notebook
    }

    /// The newest event folded in; 0 for an empty session.
    pub fn last_seq(&self) -> u64 {
        self.last_seq
    }

    pub fn cells(&self) -> &[Cell] {
        &self.cells
    }

    pub fn cell(&self, id: CellId) -> Option<&Cell> {
        self.cells.iter().rev().find(|c| c.id == id)
    }

    /// Whether some cell is still streaming.
    pub fn is_busy(&self) -> bool {
        self.cells.iter().any(|c| c.status == CellStatus::Streaming)
    }

    /// Folds in one event, exactly once and only in order.
    pub fn apply(&mut self, event: &SessionEvent) -> Applied {
        if event.seq <= self.last_seq {
            return Applied::Duplicate;
        }
        if event.seq != self.last_seq + 1 {
            return Applied::Gap;
        }
        self.last_seq = event.seq;
        match &event.event {
            EventBody::UserMessage { cell_id, text } => self.cells.push(Cell {
                id: *cell_id,
                kind: CellKind::User,
                text: text.clone(),
                status: CellStatus::Ok,
                elapsed_ms: None,
                error: None,
            }),
            EventBody::CellStarted { cell_id, cell_kind } => self.cells.push(Cell {
                id: *cell_id,
                kind: *cell_kind,
                text: String::new(),
                status: CellStatus::Streaming,
                elapsed_ms: None,
                error: None,
            }),
            EventBody::CellDelta { cell_id, text } => {
                if let Some(cell) = self.cell_mut(*cell_id) {
                    cell.text.push_str(text);
                }
            }
            EventBody::CellFinished {
                cell_id,
                status,
                elapsed_ms,
                error,
            } => {
                if let Some(cell) = self.cell_mut(*cell_id) {
                    cell.status = *status;
                    cell.elapsed_ms = Some(*elapsed_ms);
                    cell.error.clone_from(error);
                }
            }
        }
        Applied::Applied
    }

    fn cell_mut(&mut self, id: CellId) -> Option<&mut Cell> {
        self.cells.iter_mut().rev().find(|c| c.id == id)
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn turn(first_seq: u64, first_cell: u64, text: &str) -> Vec<SessionEvent> {
        let user = CellId(first_cell);
        let answer = CellId(first_cell + 1);
        let mut bodies = vec![
            EventBody::UserMessage {
                cell_id: user,
                text: text.into(),
            },
            EventBody::CellStarted {
                cell_id: answer,
                cell_kind: CellKind::Answer,
            },
        ];
        bodies.extend(text.split_inclusive(' ').map(|w| EventBody::CellDelta {
            cell_id: answer,
            text: w.into(),
        }));
        bodies.push(EventBody::CellFinished {
            cell_id: answer,
            status: CellStatus::Ok,
            elapsed_ms: 7,
            error: None,
        });
        bodies
            .into_iter()
            .zip(first_seq..)
            .map(|(event, seq)| SessionEvent {
                seq,
                ts_ms: 0,
                event,
            })
            .collect()
    }

    #[test]
    fn a_turn_makes_a_user_cell_and_a_finished_answer_cell() {
        let events = turn(1, 1, "how many r's in strawberry");
        let notebook = Notebook::from_events(&events);
        assert_eq!(notebook.last_seq(), events.len() as u64);
        let cells = notebook.cells();
        assert_eq!(cells.len(), 2);
        assert_eq!(cells[0].kind, CellKind::User);
        assert_eq!(cells[1].kind, CellKind::Answer);
        assert_eq!(cells[1].text, "how many r's in strawberry");
        assert_eq!(cells[1].status, CellStatus::Ok);
        assert_eq!(cells[1].elapsed_ms, Some(7));
        assert!(!notebook.is_busy());
    }

    #[test]
    fn a_cell_without_its_finish_is_busy() {
        let mut events = turn(1, 1, "a b c");
        events.pop();
        assert!(Notebook::from_events(&events).is_busy());
    }

    #[test]
    fn duplicates_and_gaps_are_refused() {
        let events = turn(1, 1, "one two three");
        let mut notebook = Notebook::default();
        assert_eq!(notebook.apply(&events[0]), Applied::Applied);
        assert_eq!(notebook.apply(&events[0]), Applied::Duplicate);
        assert_eq!(notebook.apply(&events[2]), Applied::Gap);
        assert_eq!(notebook.last_seq(), 1);
        assert_eq!(notebook.apply(&events[1]), Applied::Applied);
        assert_eq!(notebook.apply(&events[2]), Applied::Applied);
    }

    #[test]
    fn deltas_for_unknown_cells_change_nothing_but_the_cursor() {
        let mut notebook = Notebook::default();
        let stray = SessionEvent {
            seq: 1,
            ts_ms: 0,
            event: EventBody::CellDelta {
                cell_id: CellId(9),
                text: "x".into(),
            },
        };
        assert_eq!(notebook.apply(&stray), Applied::Applied);
        assert!(notebook.cells().is_empty());
        assert_eq!(notebook.last_seq(), 1);
    }

    proptest! {
        /// However a reconnecting page sees the stream (replays of any prefix,
        /// frames repeated), it ends with the notebook of the clean stream.
        #[test]
        fn replays_never_duplicate(
            words in prop::collection::vec("[a-z]{1,6}", 1..8),
            cuts in prop::collection::vec(0usize..40, 0..6),
        ) {
            let text = words.join(" ");
            let mut events = turn(1, 1, &text);
            events.extend(turn(events.len() as u64 + 1, 3, "again"));
            let clean = Notebook::from_events(&events);

            let mut notebook = Notebook::default();
            let mut delivered = 0;
            for cut in cuts {
                let upto = cut.min(events.len());
                // deliver up to `upto`, then reconnect and replay from the cursor
                for e in &events[delivered.min(upto)..upto] {
                    notebook.apply(e);
                }
                delivered = upto.max(delivered);
                let resume = notebook.last_seq() as usize;
                for e in &events[resume.saturating_sub(2)..delivered] {
                    notebook.apply(e);
                }
            }
            for e in &events {
                notebook.apply(e);
            }
            prop_assert_eq!(notebook, clean);
        }
    }
}
