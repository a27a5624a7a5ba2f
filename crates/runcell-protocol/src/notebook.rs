//! The notebook a session's events describe: a pure fold over [`SessionEvent`]s.
//!
//! The server renders it for the first page load and the browser keeps it up to
//! date from the WebSocket, with the same code, so both always agree on what a
//! history means.

use serde::{Deserialize, Serialize};

use crate::{
    CellError, CellId, CellKind, CellStatus, EventBody, KernelCap, KernelLoss, Language, Output,
    SessionEvent, TurnId, TurnKind, TurnStatus,
};

/// One cell as the page shows it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Cell {
    pub id: CellId,
    pub kind: CellKind,
    /// The turn the cell belongs to.
    pub turn: Option<TurnId>,
    /// User, code and explanation cells: their text.
    pub text: String,
    /// Code cells: highlighted markup for `text[..highlighted]`.
    pub html: String,
    pub highlighted: usize,
    pub language: Option<String>,
    pub attempt: Option<u32>,
    pub source: Option<CellId>,
    /// Result cells: what the program printed and returned, in order.
    pub outputs: Vec<Output>,
    /// The code cell whose result stands for its turn.
    pub is_final: bool,
    pub status: CellStatus,
    pub elapsed_ms: Option<u64>,
    /// Why the cell failed, when it did.
    pub error: Option<CellError>,
    /// Its turn is on a branch that is not on show.
    #[serde(default, skip)]
    pub off_branch: bool,
    /// A `clear_output(wait=True)` clears the outputs when the next comes.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub clear_pending: bool,
}

impl Cell {
    fn new(id: CellId, kind: CellKind, turn: Option<TurnId>) -> Self {
        Self {
            id,
            kind,
            turn,
            text: String::new(),
            html: String::new(),
            highlighted: 0,
            language: None,
            attempt: None,
            source: None,
            outputs: Vec::new(),
            is_final: false,
            status: CellStatus::Streaming,
            elapsed_ms: None,
            error: None,
            off_branch: false,
            clear_pending: false,
        }
    }

    /// The part of a code cell's text that has no markup yet.
    pub fn unhighlighted(&self) -> &str {
        self.text.get(self.highlighted..).unwrap_or_default()
    }

    /// Everything the result cell printed to stdout and stderr, as one
    /// text without its colours (what Copy output and Download give).
    pub fn printed(&self) -> String {
        let all: String = self
            .outputs
            .iter()
            .filter_map(|o| match o {
                Output::Stdout { text } | Output::Stderr { text } => Some(text.as_str()),
                _ => None,
            })
            .collect();
        if all.contains('\u{1b}') {
            crate::render::ansi::strip(&all)
        } else {
            all
        }
    }
}

/// A turn as the page tracks it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Turn {
    pub id: TurnId,
    pub kind: TurnKind,
    /// `None` while it runs.
    pub status: Option<TurnStatus>,
    pub final_cell: Option<CellId>,
    /// The turn it follows (`None` for a first turn): turns with the same
    /// one are versions of each other (an edited question, a regenerated
    /// answer).
    pub parent: Option<TurnId>,
    /// Whether it is on the branch on show.
    pub on_branch: bool,
    /// Its kernel was rebuilt for its branch before it ran.
    pub restored: Option<Restored>,
    /// Its program did not run: no kernel was free.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refused: Option<Refused>,
}

/// A run refused for want of a kernel: the code cell that did not run, and
/// the limit every kernel of which is held.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Refused {
    pub cell_id: CellId,
    pub cap: KernelCap,
    pub held: u32,
}

/// A kernel rebuilt for a branch: how many programs re-ran, and what
/// failed, if one did.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Restored {
    pub programs: u32,
    pub error: Option<CellError>,
}

/// Where a turn stands among its versions: "← 2/3 →".
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Versions {
    /// 1-based.
    pub position: usize,
    pub count: usize,
    pub previous: Option<TurnId>,
    pub next: Option<TurnId>,
}

/// What an open turn is doing, as the page tells it between the question
/// and the answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    /// The kernel holds another branch's variables: this branch's programs
    /// run again first.
    Restoring,
    /// Nothing of the answer yet: the model is queued or reading the
    /// question (the first token can take a minute on a small machine).
    WaitingForModel,
    /// Code is streaming in.
    WritingCode,
    /// The code is written; its program is about to run.
    Starting,
    /// The program runs.
    Running,
    /// The program is over; the model reads what it printed.
    ReadingOutput,
    /// The explanation is streaming in.
    Explaining,
    /// The explanation is written; its figures are checked against the output.
    Checking,
}

impl Phase {
    /// The phase in words, as the page shows and a screen reader hears it.
    pub fn label(self) -> &'static str {
        match self {
            Self::Restoring => "Rebuilding this version's variables",
            Self::WaitingForModel => "Waiting for the model",
            Self::WritingCode => "Writing code",
            Self::Starting => "Starting the program",
            Self::Running => "Running",
            Self::ReadingOutput => "Reading the output",
            Self::Explaining => "Explaining",
            Self::Checking => "Checking the answer",
        }
    }

    /// A stable name, for the page's `data-phase` and tests.
    pub fn name(self) -> &'static str {
        match self {
            Self::Restoring => "restoring",
            Self::WaitingForModel => "waiting",
            Self::WritingCode => "writing-code",
            Self::Starting => "starting",
            Self::Running => "running",
            Self::ReadingOutput => "reading-output",
            Self::Explaining => "explaining",
            Self::Checking => "checking",
        }
    }
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

/// A session's cells, in order. Its turns form a tree (an edited question
/// or a regenerated answer starts a branch beside the turn it replaces);
/// [`cells`](Self::cells) and [`turns`](Self::turns) are the branch on
/// show, the one the newest turn is on unless another was selected since.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Notebook {
    /// Every cell, of every branch, in the order they started.
    cells: Vec<Cell>,
    /// Every turn, in the order they started.
    turns: Vec<Turn>,
    /// The last turn of the branch on show.
    leaf: Option<TurnId>,
    /// The turns whose programs the current kernel ran, in order.
    kernel_ran: Vec<TurnId>,
    /// When the server recorded the last event that began a phase of a
    /// turn (ms since the Unix epoch): a reloaded page counts from it.
    phase_since_ms: u64,
    last_seq: u64,
    /// Set when the kernel was lost and no "Re-run all" has succeeded since.
    kernel_lost: Option<KernelLoss>,
    /// Whether code has run since the kernel was last lost (or ever).
    kernel_used: bool,
    /// runcell's notes on code cells (why an attempt was sent back, what a
    /// repair changed), by cell.
    notes: Vec<(CellId, String)>,
}

/// One program for "Re-run all".
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RerunStep {
    /// The code cell it was copied from.
    pub source: CellId,
    pub language: String,
    pub code: String,
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

    /// The cells of the branch on show, in order.
    pub fn cells(&self) -> impl DoubleEndedIterator<Item = &Cell> + Clone {
        self.cells.iter().filter(|c| !c.off_branch)
    }

    /// The turns of the branch on show, in order.
    pub fn turns(&self) -> impl DoubleEndedIterator<Item = &Turn> + Clone {
        self.turns.iter().filter(|t| t.on_branch)
    }

    /// Every cell, of every branch.
    pub fn all_cells(&self) -> &[Cell] {
        &self.cells
    }

    /// Every turn, of every branch.
    pub fn all_turns(&self) -> &[Turn] {
        &self.turns
    }

    pub fn turn(&self, id: TurnId) -> Option<&Turn> {
        self.turns.iter().rev().find(|t| t.id == id)
    }

    pub fn cell(&self, id: CellId) -> Option<&Cell> {
        self.cells.iter().rev().find(|c| c.id == id)
    }

    /// Where `turn` stands among the versions of its place (the turns that
    /// follow the same turn); `None` for a turn that has no other version.
    pub fn versions(&self, turn: TurnId) -> Option<Versions> {
        let parent = self.turn(turn)?.parent;
        let siblings: Vec<TurnId> = self
            .turns
            .iter()
            .filter(|t| t.parent == parent)
            .map(|t| t.id)
            .collect();
        if siblings.len() < 2 {
            return None;
        }
        let at = siblings.iter().position(|&t| t == turn)?;
        Some(Versions {
            position: at + 1,
            count: siblings.len(),
            previous: at.checked_sub(1).map(|i| siblings[i]),
            next: siblings.get(at + 1).copied(),
        })
    }

    /// Whether the kernel holds variables of a turn that is not on the
    /// branch on show: the branch's programs must run again in a fresh one
    /// before the next program can rely on them.
    pub fn kernel_off_branch(&self) -> bool {
        self.kernel_ran
            .iter()
            .any(|id| self.turn(*id).is_some_and(|t| !t.on_branch))
    }

    /// The cells of one turn, in order.
    pub fn cells_of(&self, turn: TurnId) -> impl Iterator<Item = &Cell> {
        self.cells.iter().filter(move |c| c.turn == Some(turn))
    }

    /// What the person asked in turn `turn`, if it was a question.
    pub fn question(&self, turn: TurnId) -> Option<&str> {
        self.cells_of(turn)
            .find(|c| c.kind == CellKind::User)
            .map(|c| c.text.as_str())
    }

    /// The session's first question, if one was asked.
    pub fn first_question(&self) -> Option<&str> {
        self.cells()
            .find(|c| c.kind == CellKind::User)
            .map(|c| c.text.as_str())
    }

    /// The result of the code cell `code` in its turn `turn`.
    pub fn result_of(&self, turn: TurnId, code: CellId) -> Option<&Cell> {
        self.cells_of(turn)
            .find(|c| c.kind == CellKind::Result && c.source == Some(code))
    }

    /// runcell's notes on the code cell `id`, in order.
    pub fn notes_of(&self, id: CellId) -> impl Iterator<Item = &str> {
        self.notes
            .iter()
            .filter(move |(cell, _)| *cell == id)
            .map(|(_, note)| note.as_str())
    }

    /// Why the kernel is gone, if it was lost and not rebuilt since.
    pub fn kernel_lost(&self) -> Option<KernelLoss> {
        self.kernel_lost
    }

    /// Whether any code has run in the current kernel (or, after a loss,
    /// since the loss).
    pub fn kernel_used(&self) -> bool {
        self.kernel_used
    }

    /// The largest cell id so far (0 for none).
    pub fn max_cell_id(&self) -> u64 {
        self.cells.iter().map(|c| c.id.0).max().unwrap_or(0)
    }

    /// The largest turn id so far (0 for none).
    pub fn max_turn_id(&self) -> u64 {
        self.turns.iter().map(|t| t.id.0).max().unwrap_or(0)
    }

    /// The programs "Re-run all" runs, in order: of each question or edited
    /// run that is over, the code cell that stood, if its result was ok.
    /// Earlier re-runs are copies and are skipped.
    pub fn rerun_plan(&self) -> Vec<RerunStep> {
        self.turns()
            .filter(|t| matches!(t.kind, TurnKind::Ask | TurnKind::Run))
            .filter_map(|t| t.final_cell)
            .filter_map(|id| self.cell(id))
            .filter(|code| code.kind == CellKind::Code && code.status == CellStatus::Ok)
            .filter(|code| {
                self.cells.iter().any(|c| {
                    c.kind == CellKind::Result
                        && c.source == Some(code.id)
                        && c.status == CellStatus::Ok
                })
            })
            .map(|code| RerunStep {
                source: code.id,
                language: code
                    .language
                    .clone()
                    .unwrap_or_else(|| Language::Python.name().into()),
                code: code.text.clone(),
            })
            .collect()
    }

    /// The cells still streaming and the turn still open, if any: what a
    /// history cut short (a crash, a snapshot) leaves unfinished.
    pub fn unfinished(&self) -> (Vec<CellId>, Option<TurnId>) {
        let cells = self
            .cells
            .iter()
            .filter(|c| c.status == CellStatus::Streaming)
            .map(|c| c.id)
            .collect();
        let turn = self.turns.iter().find(|t| t.status.is_none()).map(|t| t.id);
        (cells, turn)
    }

    /// What the open turn is doing; `None` when no turn is open.
    pub fn phase(&self) -> Option<Phase> {
        let turn = self.turns.iter().rev().find(|t| t.status.is_none())?;
        let last = self
            .cells_of(turn.id)
            .filter(|c| c.kind != CellKind::User)
            .last();
        Some(match last {
            // Before anything runs: the agent first rebuilds the kernel
            // for the turn's branch (a re-run starts afresh anyway).
            None if turn.kind != TurnKind::Rerun
                && turn.restored.is_none()
                && self.kernel_off_branch() =>
            {
                Phase::Restoring
            }
            // An edited run or a re-run asks no model.
            None if turn.kind != TurnKind::Ask => Phase::Starting,
            None => Phase::WaitingForModel,
            Some(c) => match (c.kind, c.status == CellStatus::Streaming) {
                (CellKind::Code, true) => Phase::WritingCode,
                (CellKind::Code, false) => Phase::Starting,
                (CellKind::Result, true) => Phase::Running,
                (CellKind::Result, false) => Phase::ReadingOutput,
                (CellKind::Explanation, true) => Phase::Explaining,
                (CellKind::Explanation, false) => Phase::Checking,
                (CellKind::User, _) => Phase::WaitingForModel,
            },
        })
    }

    /// When the open turn's phase began, by the server's clock (ms since
    /// the Unix epoch); 0 for histories without times.
    pub fn phase_since_ms(&self) -> u64 {
        self.phase_since_ms
    }

    /// Whether a turn is under way or some cell is still streaming.
    pub fn is_busy(&self) -> bool {
        self.turns.iter().any(|t| t.status.is_none())
            || self.cells.iter().any(|c| c.status == CellStatus::Streaming)
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
        if matches!(
            event.event,
            EventBody::TurnStarted { .. }
                | EventBody::CellStarted { .. }
                | EventBody::CellFinished { .. }
                | EventBody::TurnFinished { .. }
        ) {
            self.phase_since_ms = event.ts_ms;
        }
        let turn = self
            .turns
            .last()
            .filter(|t| t.status.is_none())
            .map(|t| t.id);
        match &event.event {
            EventBody::TurnStarted {
                turn,
                turn_kind,
                alternative_to,
            } => {
                let parent = match alternative_to.and_then(|id| self.turn(id)) {
                    Some(replaced) => replaced.parent,
                    None => self.leaf,
                };
                let follows_leaf = parent == self.leaf;
                self.turns.push(Turn {
                    id: *turn,
                    kind: *turn_kind,
                    status: None,
                    final_cell: None,
                    parent,
                    on_branch: true,
                    restored: None,
                    refused: None,
                });
                self.leaf = Some(*turn);
                if !follows_leaf {
                    self.mark_branch();
                }
                if *turn_kind == TurnKind::Rerun {
                    self.kernel_ran.clear();
                }
            }
            EventBody::BranchSelected { turn } => {
                if self.turn(*turn).is_some() {
                    self.leaf = Some(self.newest_end(*turn));
                    self.mark_branch();
                }
            }
            EventBody::KernelRestored { programs, error } => {
                self.kernel_ran.clear();
                if let Some(t) = self.turns.last_mut().filter(|t| t.status.is_none()) {
                    t.restored = Some(Restored {
                        programs: *programs,
                        error: error.clone(),
                    });
                }
            }
            EventBody::UserMessage {
                cell_id,
                text,
                markup,
            } => {
                let mut cell = Cell::new(*cell_id, CellKind::User, turn);
                cell.text.clone_from(text);
                if let Some(markup) = markup {
                    cell.html.clone_from(markup);
                    cell.highlighted = text.len();
                }
                cell.status = CellStatus::Ok;
                self.cells.push(cell);
            }
            EventBody::CellStarted {
                cell_id,
                cell_kind,
                language,
                attempt,
                source,
            } => {
                if *cell_kind == CellKind::Result {
                    self.kernel_used = true;
                    if let Some(turn) = turn
                        && self.kernel_ran.last() != Some(&turn)
                    {
                        self.kernel_ran.push(turn);
                    }
                }
                let mut cell = Cell::new(*cell_id, *cell_kind, turn);
                cell.language.clone_from(language);
                cell.attempt = *attempt;
                cell.source = *source;
                self.cells.push(cell);
            }
            EventBody::CellDelta {
                cell_id,
                text,
                highlight,
            } => {
                if let Some(cell) = self.cell_mut(*cell_id) {
                    cell.text.push_str(text);
                    if let Some(highlight) = highlight {
                        // A code cell's markup comes a line at a time; an
                        // explanation's is its whole text's, each time
                        // (markdown read again from the start).
                        if cell.kind != CellKind::Code {
                            cell.html.clear();
                        }
                        cell.html.push_str(&highlight.html);
                        cell.highlighted = highlight.upto.min(cell.text.len());
                        while !cell.text.is_char_boundary(cell.highlighted) {
                            cell.highlighted -= 1;
                        }
                    }
                }
            }
            EventBody::CellReset { cell_id } => {
                if let Some(cell) = self.cell_mut(*cell_id) {
                    cell.text.clear();
                    cell.html.clear();
                    cell.highlighted = 0;
                }
            }
            EventBody::CellNote { cell_id, note } => {
                self.notes.push((*cell_id, note.clone()));
            }
            EventBody::CellOutput { cell_id, output } => {
                if let Some(cell) = self.cell_mut(*cell_id) {
                    if std::mem::take(&mut cell.clear_pending) {
                        cell.outputs.clear();
                    }
                    push_output(&mut cell.outputs, output);
                }
            }
            EventBody::CellCleared { cell_id, wait } => {
                if let Some(cell) = self.cell_mut(*cell_id) {
                    if *wait {
                        cell.clear_pending = true;
                    } else {
                        cell.outputs.clear();
                        cell.clear_pending = false;
                    }
                }
            }
            EventBody::DisplayUpdated { display_id, output } => {
                for cell in &mut self.cells {
                    update_display(&mut cell.outputs, display_id, output);
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
            EventBody::TurnFinished {
                turn,
                status,
                final_cell,
                ..
            } => {
                if let Some(t) = self.turns.iter_mut().rev().find(|t| t.id == *turn) {
                    t.status = Some(*status);
                    t.final_cell = *final_cell;
                    if t.kind == TurnKind::Rerun && *status == TurnStatus::Ok {
                        self.kernel_lost = None;
                    }
                }
                if let Some(cell) = final_cell.and_then(|id| self.cell_mut(id)) {
                    cell.is_final = true;
                }
            }
            EventBody::KernelLost { reason } => {
                self.kernel_lost = Some(*reason);
                self.kernel_used = false;
                self.kernel_ran.clear();
            }
            EventBody::KernelRefused { cell_id, cap, held } => {
                if let Some(t) = self.turns.last_mut().filter(|t| t.status.is_none()) {
                    t.refused = Some(Refused {
                        cell_id: *cell_id,
                        cap: *cap,
                        held: *held,
                    });
                }
            }
        }
        Applied::Applied
    }

    /// The newest end of the branches through `turn`: from it, the newest
    /// turn that follows, until none does.
    fn newest_end(&self, turn: TurnId) -> TurnId {
        let mut end = turn;
        // Each step goes to a later turn, so at most one per turn.
        for _ in 0..self.turns.len() {
            match self.turns.iter().rev().find(|t| t.parent == Some(end)) {
                Some(next) => end = next.id,
                None => break,
            }
        }
        end
    }

    /// Marks the turns and cells of the branch that ends at `leaf` as on
    /// show, and the others as not.
    fn mark_branch(&mut self) {
        let mut on = std::collections::HashSet::new();
        let mut at = self.leaf;
        while let Some(id) = at {
            if !on.insert(id) {
                break;
            }
            at = self.turn(id).and_then(|t| t.parent);
        }
        for t in &mut self.turns {
            t.on_branch = on.contains(&t.id);
        }
        for c in &mut self.cells {
            c.off_branch = c.turn.is_some_and(|t| !on.contains(&t));
        }
    }

    fn cell_mut(&mut self, id: CellId) -> Option<&mut Cell> {
        self.cells.iter_mut().rev().find(|c| c.id == id)
    }
}

/// Shows `output` in the place of every output of `outputs` shown with
/// `display_id`, which it keeps (a later update finds it again), as
/// Jupyter's front ends do with `update_display_data`.
pub fn update_display(outputs: &mut [Output], display_id: &str, output: &Output) {
    for shown in outputs.iter_mut() {
        if matches!(shown, Output::Rich { display_id: Some(id), .. } if id == display_id) {
            *shown = match output.clone() {
                Output::Rich {
                    data,
                    main,
                    metadata,
                    ..
                } => Output::Rich {
                    data,
                    main,
                    metadata,
                    display_id: Some(display_id.to_string()),
                },
                // Only a rich output carries its id: what is not one
                // stands in its place for good.
                other => other,
            };
        }
    }
}

/// Appends an output, joining a chunk to the stream text before it so that a
/// program printing line by line makes one block, not thousands.
fn push_output(outputs: &mut Vec<Output>, output: &Output) {
    match (outputs.last_mut(), output) {
        (Some(Output::Stdout { text }), Output::Stdout { text: more })
        | (Some(Output::Stderr { text }), Output::Stderr { text: more }) => text.push_str(more),
        _ => outputs.push(output.clone()),
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn turn(first_seq: u64, first_cell: u64, text: &str) -> Vec<SessionEvent> {
        let user = CellId(first_cell);
        let answer = CellId(first_cell + 1);
        let turn = TurnId(first_cell);
        let mut bodies = vec![
            EventBody::TurnStarted {
                turn,
                turn_kind: TurnKind::Ask,
                alternative_to: None,
            },
            EventBody::UserMessage {
                cell_id: user,
                text: text.into(),
                markup: None,
            },
            EventBody::CellStarted {
                cell_id: answer,
                cell_kind: CellKind::Explanation,
                language: None,
                attempt: None,
                source: None,
            },
        ];
        bodies.extend(text.split_inclusive(' ').map(|w| EventBody::CellDelta {
            cell_id: answer,
            text: w.into(),
            highlight: None,
        }));
        bodies.push(EventBody::CellFinished {
            cell_id: answer,
            status: CellStatus::Ok,
            elapsed_ms: 7,
            error: None,
        });
        bodies.push(EventBody::TurnFinished {
            turn,
            status: TurnStatus::Ok,
            elapsed_ms: 8,
            final_cell: None,
        });
        SessionEvent::numbered(bodies, first_seq)
    }

    #[test]
    fn a_turn_makes_a_user_cell_and_a_finished_answer_cell() {
        let events = turn(1, 1, "how many r's in strawberry");
        let notebook = Notebook::from_events(&events);
        assert_eq!(notebook.last_seq(), events.len() as u64);
        let cells = notebook.all_cells();
        assert_eq!(cells.len(), 2);
        assert_eq!(cells[0].kind, CellKind::User);
        assert_eq!(cells[1].kind, CellKind::Explanation);
        assert_eq!(cells[1].turn, Some(TurnId(1)));
        assert_eq!(notebook.all_turns()[0].status, Some(TurnStatus::Ok));
        assert_eq!(cells[1].text, "how many r's in strawberry");
        assert_eq!(cells[1].status, CellStatus::Ok);
        assert_eq!(cells[1].elapsed_ms, Some(7));
        assert!(!notebook.is_busy());
    }

    #[test]
    fn a_cell_without_its_finish_is_busy() {
        let mut events = turn(1, 1, "a b c");
        events.pop();
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
                highlight: None,
            },
        };
        assert_eq!(notebook.apply(&stray), Applied::Applied);
        assert!(notebook.cells().next().is_none());
        assert_eq!(notebook.last_seq(), 1);
    }

    fn at(seq: u64, event: EventBody) -> SessionEvent {
        SessionEvent {
            seq,
            ts_ms: 0,
            event,
        }
    }

    #[test]
    fn outputs_join_stream_chunks_and_keep_rich_values_apart() {
        let cell = CellId(1);
        let stdout = |t: &str| EventBody::CellOutput {
            cell_id: cell,
            output: Output::Stdout { text: t.into() },
        };
        let events = [
            at(
                1,
                EventBody::CellStarted {
                    cell_id: cell,
                    cell_kind: CellKind::Result,
                    language: None,
                    attempt: Some(1),
                    source: Some(CellId(0)),
                },
            ),
            at(2, stdout("a\n")),
            at(3, stdout("b\n")),
            at(
                4,
                EventBody::CellOutput {
                    cell_id: cell,
                    output: Output::Rich {
                        data: [("text/plain".to_string(), "3".to_string())].into(),
                        main: false,
                        metadata: String::new(),
                        display_id: None,
                    },
                },
            ),
            at(5, stdout("c\n")),
        ];
        let notebook = Notebook::from_events(&events);
        let result = &notebook.all_cells()[0];
        assert_eq!(result.outputs.len(), 3, "{:?}", result.outputs);
        assert_eq!(result.printed(), "a\nb\nc\n");
        assert_eq!(result.source, Some(CellId(0)));
    }

    #[test]
    fn clear_output_and_display_updates_fold_as_jupyter_shows_them() {
        let (first, second) = (CellId(1), CellId(2));
        let started = |cell_id| EventBody::CellStarted {
            cell_id,
            cell_kind: CellKind::Result,
            language: None,
            attempt: Some(1),
            source: None,
        };
        let out = |cell_id, t: &str| EventBody::CellOutput {
            cell_id,
            output: Output::Stdout { text: t.into() },
        };
        let rich = |text: &str, display_id: Option<&str>| Output::Rich {
            data: [("text/plain".to_string(), text.to_string())].into(),
            main: false,
            metadata: String::new(),
            display_id: display_id.map(str::to_string),
        };
        let shown = |cell_id, text, id| EventBody::CellOutput {
            cell_id,
            output: rich(text, id),
        };
        let cleared = |cell_id, wait| EventBody::CellCleared { cell_id, wait };
        let updated = |id: &str, text| EventBody::DisplayUpdated {
            display_id: id.into(),
            output: rich(text, None),
        };
        let events = SessionEvent::numbered(
            [
                started(first),
                out(first, "a\n"),
                cleared(first, false),
                out(first, "b\n"),
                shown(first, "v1", Some("d")),
                shown(first, "other", Some("e")),
                started(second),
                out(second, "x\n"),
                cleared(second, true),
                // With wait, the outputs stay until the next one.
                shown(second, "v1 too", Some("d")),
                updated("d", "v2"),
            ],
            1,
        );
        let mut notebook = Notebook::from_events(&events[..9]);
        assert_eq!(
            notebook.all_cells()[1].outputs,
            vec![Output::Stdout { text: "x\n".into() }]
        );
        for event in &events[9..] {
            assert_eq!(notebook.apply(event), Applied::Applied);
        }
        let cells = notebook.all_cells();
        // Every display of the id shows the update, in every cell, and
        // keeps the id for the next one.
        assert_eq!(
            cells[0].outputs,
            vec![
                Output::Stdout { text: "b\n".into() },
                rich("v2", Some("d")),
                rich("other", Some("e")),
            ]
        );
        assert_eq!(cells[1].outputs, vec![rich("v2", Some("d"))]);
        assert!(!cells[1].clear_pending);
        let again = SessionEvent::numbered([updated("d", "v3")], 12);
        notebook.apply(&again[0]);
        assert_eq!(notebook.all_cells()[1].outputs, vec![rich("v3", Some("d"))]);
    }

    #[test]
    fn a_package_is_an_output_of_its_own_and_not_printed() {
        let cell = CellId(1);
        let output = |output: Output| EventBody::CellOutput {
            cell_id: cell,
            output,
        };
        let package = Output::Package {
            project: "six".into(),
            version: "1.16.0".into(),
            size: 11_053,
            cached: true,
            refused: None,
        };
        let events = [
            at(
                1,
                EventBody::CellStarted {
                    cell_id: cell,
                    cell_kind: CellKind::Result,
                    language: None,
                    attempt: Some(1),
                    source: Some(CellId(0)),
                },
            ),
            at(2, output(Output::Stdout { text: "a\n".into() })),
            at(3, output(package.clone())),
            at(4, output(package.clone())),
            at(5, output(Output::Stdout { text: "b\n".into() })),
        ];
        let notebook = Notebook::from_events(&events);
        let result = &notebook.all_cells()[0];
        // Each file the index served is one line, in the order pip asked.
        assert_eq!(result.outputs.len(), 4, "{:?}", result.outputs);
        assert_eq!(result.outputs[1], package);
        assert_eq!(result.outputs[2], package);
        assert_eq!(result.printed(), "a\nb\n");
    }

    #[test]
    fn highlighting_covers_a_prefix_and_the_final_cell_is_marked() {
        let code = CellId(2);
        let delta = |text: &str, upto: Option<usize>| EventBody::CellDelta {
            cell_id: code,
            text: text.into(),
            highlight: upto.map(|upto| crate::Highlight {
                html: format!("<b>{upto}</b>"),
                upto,
            }),
        };
        let events = [
            at(
                1,
                EventBody::TurnStarted {
                    turn: TurnId(1),
                    turn_kind: TurnKind::Ask,
                    alternative_to: None,
                },
            ),
            at(
                2,
                EventBody::CellStarted {
                    cell_id: code,
                    cell_kind: CellKind::Code,
                    language: Some("python".into()),
                    attempt: Some(1),
                    source: None,
                },
            ),
            at(3, delta("x = 1\ny", Some(6))),
            at(4, delta(" = 2", None)),
            at(
                5,
                EventBody::TurnFinished {
                    turn: TurnId(1),
                    status: TurnStatus::Ok,
                    elapsed_ms: 1,
                    final_cell: Some(code),
                },
            ),
        ];
        let notebook = Notebook::from_events(&events);
        let cell = &notebook.all_cells()[0];
        assert_eq!(cell.html, "<b>6</b>");
        assert_eq!(cell.unhighlighted(), "y = 2");
        assert!(cell.is_final);
        assert_eq!(notebook.cells_of(TurnId(1)).count(), 1);
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
    /// A turn whose program `code` ran with the given result status.
    fn code_turn(
        first_seq: u64,
        id: u64,
        kind: TurnKind,
        code: &str,
        ok: bool,
    ) -> Vec<SessionEvent> {
        let (code_cell, result) = (CellId(id * 10), CellId(id * 10 + 1));
        let status = if ok {
            CellStatus::Ok
        } else {
            CellStatus::Error
        };
        let bodies = vec![
            EventBody::TurnStarted {
                turn: TurnId(id),
                turn_kind: kind,
                alternative_to: None,
            },
            EventBody::CellStarted {
                cell_id: code_cell,
                cell_kind: CellKind::Code,
                language: Some("python".into()),
                attempt: None,
                source: None,
            },
            EventBody::CellDelta {
                cell_id: code_cell,
                text: code.into(),
                highlight: None,
            },
            EventBody::CellFinished {
                cell_id: code_cell,
                status: CellStatus::Ok,
                elapsed_ms: 1,
                error: None,
            },
            EventBody::CellStarted {
                cell_id: result,
                cell_kind: CellKind::Result,
                language: None,
                attempt: None,
                source: Some(code_cell),
            },
            EventBody::CellFinished {
                cell_id: result,
                status,
                elapsed_ms: 1,
                error: None,
            },
            EventBody::TurnFinished {
                turn: TurnId(id),
                status: if ok {
                    TurnStatus::Ok
                } else {
                    TurnStatus::Error
                },
                elapsed_ms: 2,
                final_cell: Some(code_cell),
            },
        ];
        SessionEvent::numbered(bodies, first_seq)
    }

    /// A refused run is the open turn's, and only that turn's: its code
    /// cell stands, complete, with no result cell.
    #[test]
    fn a_refused_run_is_kept_on_its_turn() {
        let events = SessionEvent::numbered(
            [
                EventBody::TurnStarted {
                    turn: TurnId(1),
                    turn_kind: TurnKind::Run,
                    alternative_to: None,
                },
                EventBody::CellStarted {
                    cell_id: CellId(1),
                    cell_kind: CellKind::Code,
                    language: Some("python".into()),
                    attempt: None,
                    source: None,
                },
                EventBody::CellDelta {
                    cell_id: CellId(1),
                    text: "print(1)".into(),
                    highlight: None,
                },
                EventBody::CellFinished {
                    cell_id: CellId(1),
                    status: CellStatus::Ok,
                    elapsed_ms: 0,
                    error: None,
                },
                EventBody::KernelRefused {
                    cell_id: CellId(1),
                    cap: KernelCap::Owner,
                    held: 2,
                },
                EventBody::TurnFinished {
                    turn: TurnId(1),
                    status: TurnStatus::Error,
                    elapsed_ms: 3,
                    final_cell: Some(CellId(1)),
                },
                // Outside a turn it belongs to none.
                EventBody::KernelRefused {
                    cell_id: CellId(1),
                    cap: KernelCap::Server,
                    held: 9,
                },
            ],
            1,
        );
        let notebook = Notebook::from_events(&events);
        let refused: Vec<_> = notebook.turns().map(|t| t.refused).collect();
        assert_eq!(
            refused,
            vec![Some(Refused {
                cell_id: CellId(1),
                cap: KernelCap::Owner,
                held: 2,
            })]
        );
        let cells: Vec<_> = notebook.cells().map(|c| (c.kind, c.status)).collect();
        assert_eq!(cells, vec![(CellKind::Code, CellStatus::Ok)]);
        assert!(!notebook.kernel_used());
    }

    #[test]
    fn a_lost_kernel_is_remembered_until_a_rerun_succeeds() {
        let mut events = code_turn(1, 1, TurnKind::Ask, "x = 1", true);
        events.extend(code_turn(8, 2, TurnKind::Run, "boom(", false));
        events.extend(code_turn(15, 3, TurnKind::Run, "print(x)", true));
        let mut notebook = Notebook::from_events(&events);
        assert!(notebook.kernel_used());
        assert_eq!(notebook.kernel_lost(), None);
        let plan: Vec<String> = notebook.rerun_plan().into_iter().map(|s| s.code).collect();
        assert_eq!(
            plan,
            vec!["x = 1", "print(x)"],
            "failed programs are not re-run"
        );

        let lost = SessionEvent {
            seq: 22,
            ts_ms: 0,
            event: EventBody::KernelLost {
                reason: KernelLoss::ServerRestart,
            },
        };
        notebook.apply(&lost);
        assert_eq!(notebook.kernel_lost(), Some(KernelLoss::ServerRestart));
        assert!(!notebook.kernel_used());
        assert_eq!((notebook.max_cell_id(), notebook.max_turn_id()), (31, 3));

        for event in code_turn(23, 4, TurnKind::Rerun, "x = 1", true) {
            notebook.apply(&event);
        }
        assert_eq!(notebook.kernel_lost(), None);
        assert_eq!(
            notebook.rerun_plan().len(),
            2,
            "re-runs are copies, not steps"
        );
    }

    #[test]
    fn unfinished_cells_and_turns_are_found() {
        let events = code_turn(1, 1, TurnKind::Ask, "x = 1", true);
        let cut = Notebook::from_events(&events[..5]);
        assert_eq!(cut.unfinished(), (vec![CellId(11)], Some(TurnId(1))));
        assert_eq!(Notebook::from_events(&events).unfinished(), (vec![], None));
    }

    /// A question whose program ran well: turn `id`, cells `10*id..`.
    fn ran(id: u64, alternative_to: Option<u64>, code: &str) -> Vec<EventBody> {
        let (turn, user, cell, result) = (
            TurnId(id),
            CellId(10 * id),
            CellId(10 * id + 1),
            CellId(10 * id + 2),
        );
        let finished = |cell_id| EventBody::CellFinished {
            cell_id,
            status: CellStatus::Ok,
            elapsed_ms: 1,
            error: None,
        };
        vec![
            EventBody::TurnStarted {
                turn,
                turn_kind: TurnKind::Ask,
                alternative_to: alternative_to.map(TurnId),
            },
            EventBody::UserMessage {
                cell_id: user,
                text: format!("question {id}"),
                markup: None,
            },
            EventBody::CellStarted {
                cell_id: cell,
                cell_kind: CellKind::Code,
                language: Some("python".into()),
                attempt: Some(1),
                source: None,
            },
            EventBody::CellDelta {
                cell_id: cell,
                text: code.into(),
                highlight: None,
            },
            finished(cell),
            EventBody::CellStarted {
                cell_id: result,
                cell_kind: CellKind::Result,
                language: None,
                attempt: Some(1),
                source: Some(cell),
            },
            finished(result),
            EventBody::TurnFinished {
                turn,
                status: TurnStatus::Ok,
                elapsed_ms: 2,
                final_cell: Some(cell),
            },
        ]
    }

    fn shown(notebook: &Notebook) -> Vec<u64> {
        notebook.turns().map(|t| t.id.0).collect()
    }

    fn plan(notebook: &Notebook) -> Vec<String> {
        notebook.rerun_plan().into_iter().map(|s| s.code).collect()
    }

    #[test]
    fn an_edited_question_starts_a_branch_and_the_old_one_stays_reachable() {
        let mut bodies = ran(1, None, "a = 1");
        bodies.extend(ran(2, None, "b = a + 1"));
        bodies.extend(ran(3, Some(2), "b = a + 2"));
        let mut notebook = Notebook::from_events(&SessionEvent::numbered(bodies, 1));
        assert_eq!(shown(&notebook), [1, 3]);
        assert!(notebook.cells().all(|c| c.turn != Some(TurnId(2))));
        assert_eq!(notebook.all_cells().len(), 9);
        assert_eq!(plan(&notebook), ["a = 1", "b = a + 2"]);
        let versions = notebook.versions(TurnId(3)).unwrap();
        assert_eq!(
            (
                versions.position,
                versions.count,
                versions.previous,
                versions.next
            ),
            (2, 2, Some(TurnId(2)), None)
        );
        assert_eq!(notebook.versions(TurnId(2)).unwrap().next, Some(TurnId(3)));
        assert_eq!(notebook.versions(TurnId(1)), None);
        // The kernel ran turn 2's program, which this branch does not have.
        assert!(notebook.kernel_off_branch());

        // Back to the first version; a new question follows it there.
        let next = notebook.last_seq() + 1;
        let mut more = vec![EventBody::BranchSelected { turn: TurnId(2) }];
        more.extend(ran(4, None, "c = b * 2"));
        for event in SessionEvent::numbered(more, next) {
            notebook.apply(&event);
        }
        assert_eq!(shown(&notebook), [1, 2, 4]);
        assert_eq!(notebook.turn(TurnId(4)).unwrap().parent, Some(TurnId(2)));
        assert_eq!(plan(&notebook), ["a = 1", "b = a + 1", "c = b * 2"]);

        // Selecting the other version shows its newest end.
        let next = notebook.last_seq() + 1;
        let mut more = vec![EventBody::BranchSelected { turn: TurnId(3) }];
        more.extend(ran(5, None, "d = 0"));
        more.push(EventBody::BranchSelected { turn: TurnId(2) });
        more.push(EventBody::BranchSelected { turn: TurnId(3) });
        for event in SessionEvent::numbered(more, next) {
            notebook.apply(&event);
        }
        assert_eq!(shown(&notebook), [1, 3, 5]);
    }

    #[test]
    fn a_restored_kernel_holds_the_branch_on_show() {
        let mut bodies = ran(1, None, "a = 1");
        bodies.extend(ran(2, Some(1), "a = 2"));
        let mut notebook = Notebook::from_events(&SessionEvent::numbered(bodies, 1));
        assert_eq!(shown(&notebook), [2]);
        assert!(notebook.kernel_off_branch());
        let next = notebook.last_seq() + 1;
        let mut more = ran(3, None, "b = a");
        more.insert(
            1,
            EventBody::KernelRestored {
                programs: 1,
                error: None,
            },
        );
        for event in SessionEvent::numbered(more, next) {
            notebook.apply(&event);
        }
        assert!(!notebook.kernel_off_branch());
        assert_eq!(
            notebook.turn(TurnId(3)).unwrap().restored,
            Some(Restored {
                programs: 1,
                error: None
            })
        );
        // An edit of a first question stands beside it, with no parent.
        assert_eq!(notebook.turn(TurnId(2)).unwrap().parent, None);
        assert_eq!(notebook.versions(TurnId(2)).unwrap().position, 2);
    }

    #[test]
    fn a_turn_says_it_rebuilds_the_kernel_before_it_waits_for_the_model() {
        let mut bodies = ran(1, None, "a = 1");
        bodies.extend(ran(2, Some(1), "a = 2"));
        bodies.extend(ran(3, Some(2), "a = 3")[..2].to_vec());
        let mut notebook = Notebook::from_events(&SessionEvent::numbered(bodies, 1));
        assert_eq!(notebook.phase(), Some(Phase::Restoring));
        let next = notebook.last_seq() + 1;
        notebook.apply(&SessionEvent {
            seq: next,
            ts_ms: 5,
            event: EventBody::KernelRestored {
                programs: 0,
                error: None,
            },
        });
        assert_eq!(notebook.phase(), Some(Phase::WaitingForModel));
    }

    #[test]
    fn a_branch_to_an_unknown_turn_changes_nothing() {
        let mut bodies = ran(1, None, "a = 1");
        bodies.push(EventBody::BranchSelected { turn: TurnId(9) });
        bodies.extend(ran(2, Some(9), "b = 1"));
        let notebook = Notebook::from_events(&SessionEvent::numbered(bodies, 1));
        assert_eq!(shown(&notebook), [1, 2]);
        assert!(!notebook.kernel_off_branch());
    }

    #[test]
    fn a_reset_explanation_keeps_only_its_new_text() {
        let cell = CellId(3);
        let events = [
            at(
                1,
                EventBody::TurnStarted {
                    turn: TurnId(1),
                    turn_kind: TurnKind::Ask,
                    alternative_to: None,
                },
            ),
            at(
                2,
                EventBody::CellStarted {
                    cell_id: cell,
                    cell_kind: CellKind::Explanation,
                    language: None,
                    attempt: None,
                    source: None,
                },
            ),
            at(
                3,
                EventBody::CellDelta {
                    cell_id: cell,
                    text: "The answer is 42. ".into(),
                    highlight: Some(crate::Highlight {
                        html: "<p>old</p>".into(),
                        upto: 3,
                    }),
                },
            ),
            at(4, EventBody::CellReset { cell_id: cell }),
            at(
                5,
                EventBody::CellDelta {
                    cell_id: cell,
                    text: "It is 42.".into(),
                    highlight: None,
                },
            ),
        ];
        let notebook = Notebook::from_events(&events);
        let shown = notebook.cells().find(|c| c.id == cell).unwrap();
        assert_eq!(shown.text, "It is 42.");
        assert!(shown.html.is_empty() && shown.highlighted == 0);
    }
}
