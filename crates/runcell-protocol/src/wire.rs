//! The WebSocket event protocol, defined once and used by the server and the browser.
//!
//! Every frame is one JSON object. Frames the server sends carry `"type"`; the
//! events that make up a session's history are sequenced (`seq` counts up from 1
//! per session) so that a page that reconnects with `?after=N` receives exactly
//! the events it has not seen. See `docs/protocol.md` for the prose version.
//! The names variants travel by are listed once more in `wire/names.rs`,
//! which the page's reader matches on: a new variant does not compile
//! until it is named there and read.

use serde::{Deserialize, Serialize};

mod names;

pub use names::{EventKind, Named, OutputKind, ServerMessageKind};
pub(crate) use names::{kinds, named};

/// Bumped on any incompatible change to the frames below.
pub const PROTOCOL_VERSION: u32 = 3;

/// The WebSocket sub-protocol name that carries [`PROTOCOL_VERSION`].
pub const SUBPROTOCOL: &str = "runcell.v3";

/// The largest WebSocket frame either side accepts; a bigger one closes the
/// connection (messages are far smaller).
pub const MAX_FRAME_BYTES: usize = 256 * 1024;

/// The longest message a user may send, in bytes of UTF-8.
pub const MAX_ASK_BYTES: usize = 32 * 1024;

/// A cell's identity, unique within its session.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct CellId(pub u64);

impl std::fmt::Display for CellId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "c{}", self.0)
    }
}

/// Where programs run: one of the sandbox backends. The lowercase name
/// (`jail`, `e2b`, `browser`) is how every frame, API body, stored form and
/// metric label spells it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(utoipa::ToSchema, schemars::JsonSchema))]
#[serde(rename_all = "lowercase")]
pub enum SandboxKind {
    // The local jail on the server, the default.
    Jail,
    // E2B's cloud, when the server has an E2B key.
    E2b,
    // The Python (Pyodide) of the notebook's own page.
    Browser,
}

impl SandboxKind {
    pub const ALL: [Self; 3] = [Self::Jail, Self::E2b, Self::Browser];

    pub const fn name(self) -> &'static str {
        match self {
            Self::Jail => "jail",
            Self::E2b => "e2b",
            Self::Browser => "browser",
        }
    }

    /// What the sandbox picker calls it.
    pub const fn label(self) -> &'static str {
        match self {
            Self::Jail => "Local sandbox",
            Self::E2b => "E2B cloud",
            Self::Browser => "Browser (Pyodide)",
        }
    }

    /// A backend as a request names it: blank is none, and spaces around
    /// the name do not count (as requests have always been read).
    pub fn pick(name: &str) -> Result<Option<Self>, UnknownSandboxKind> {
        let name = name.trim();
        if name.is_empty() {
            Ok(None)
        } else {
            name.parse().map(Some)
        }
    }

    /// `deserialize_with` for a request's optional backend, read as
    /// [`pick`](Self::pick) reads it.
    pub fn deserialize_pick<'de, D>(deserializer: D) -> Result<Option<Self>, D::Error>
    where
        D: serde::Deserializer<'de>,
    {
        match Option::<String>::deserialize(deserializer)? {
            Some(name) => Self::pick(&name).map_err(serde::de::Error::custom),
            None => Ok(None),
        }
    }
}

impl std::fmt::Display for SandboxKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for SandboxKind {
    type Err = UnknownSandboxKind;

    /// The exact name, as serde reads it.
    fn from_str(name: &str) -> Result<Self, Self::Err> {
        Self::ALL
            .into_iter()
            .find(|kind| kind.name() == name)
            .ok_or_else(|| UnknownSandboxKind(name.to_string()))
    }
}

/// A name that is no [`SandboxKind`].
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("unknown sandbox backend `{}`: jail, e2b or browser", clipped(.0))]
pub struct UnknownSandboxKind(pub String);

/// What a program is written in. The lowercase name (`python`,
/// `javascript`, `typescript`, `r`, `java`, `bash`, `c`) is how requests and
/// metric labels spell it.
/// A code cell's language stays text: it is what the model wrote, which
/// may be no language runcell runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(utoipa::ToSchema, schemars::JsonSchema))]
#[serde(rename_all = "lowercase")]
pub enum Language {
    Python,
    Javascript,
    Typescript,
    R,
    Java,
    Bash,
    C,
}

impl Language {
    pub const ALL: [Self; 7] = [
        Self::Python,
        Self::Javascript,
        Self::Typescript,
        Self::R,
        Self::Java,
        Self::Bash,
        Self::C,
    ];

    pub const fn name(self) -> &'static str {
        match self {
            Self::Python => "python",
            Self::Javascript => "javascript",
            Self::Typescript => "typescript",
            Self::R => "r",
            Self::Java => "java",
            Self::Bash => "bash",
            Self::C => "c",
        }
    }
}

impl std::fmt::Display for Language {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for Language {
    type Err = UnknownLanguage;

    /// The exact name, as serde reads it.
    fn from_str(name: &str) -> Result<Self, Self::Err> {
        Self::ALL
            .into_iter()
            .find(|language| language.name() == name)
            .ok_or_else(|| UnknownLanguage(name.to_string()))
    }
}

/// A name that is no [`Language`].
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("unknown language `{}`: python, javascript, typescript, r, java, bash or c", clipped(.0))]
pub struct UnknownLanguage(pub String);

/// A name as an error quotes it: its first 40 characters.
fn clipped(name: &str) -> String {
    name.chars().take(40).collect()
}

/// What a cell holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CellKind {
    /// What the person asked.
    User,
    /// A program: written by the model (streamed token by token) or by the
    /// person ("Edit & run").
    Code,
    /// What running a program printed and returned.
    Result,
    /// The model's plain-language account of the result (markdown).
    Explanation,
}

/// A turn's identity, unique within its session.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct TurnId(pub u64);

/// What started a turn.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TurnKind {
    /// A question for the model: code, result and explanation follow.
    Ask,
    /// Code the person wrote or edited, run as it is, with no model.
    Run,
    /// "Re-run all": a fresh kernel runs the code cells that stood (the final
    /// attempt of each turn that succeeded), in order, stopping at a failure.
    Rerun,
}

/// Why the kernel that ran the cells above is gone.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum KernelLoss {
    /// The server restarted: sessions are stored, kernels are not.
    ServerRestart,
    /// This session is a fork of a shared one: its cells were copied, not run.
    Fork,
    /// A fork of a link shared without its files, of a session that has
    /// some: the code may read files that are not here.
    ForkWithoutFiles,
    /// This session was imported from a Jupyter notebook: its cells were
    /// read from the file, not run here.
    Import,
}

/// Which limit on kernels refused a run: every kernel it allows is held.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum KernelCap {
    /// The person's own notebooks hold as many kernels as one person may,
    /// all of them running.
    Owner,
    /// The server holds as many kernels as it runs at once.
    Server,
    /// Pages without an account hold their whole share of the kernels.
    Anonymous,
    /// Pages without an account from this address hold as many as they may.
    Client,
}

/// How a turn ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TurnStatus {
    Ok,
    Error,
    Cancelled,
}

/// More highlighted markup for a code cell: appended to the markup so far,
/// it covers the cell's text up to byte `upto`; the page shows the rest as
/// plain text until more arrives. The server escapes the code; the markup
/// only adds `<span class="hl-…">`, and a span may stay open across pieces.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Highlight {
    pub html: String,
    pub upto: usize,
}

/// A table as a kernel showed it: its header, and its rows as the kernel
/// formatted each value (so that what is copied or downloaded is what was
/// shown).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Table {
    /// One name per column, the index's columns first.
    pub columns: Vec<String>,
    /// How many leading columns are the index (row labels).
    #[serde(default)]
    pub index_columns: usize,
    /// Each row has one value per column.
    pub rows: Vec<Vec<String>>,
    /// Set when the kernel showed only some of the rows or columns (its
    /// own "…" rows and columns are left out of `rows`): what it said of
    /// the whole, such as "1000 rows × 3 columns".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub elided: Option<String>,
}

/// One piece of a result cell.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Output {
    Stdout {
        text: String,
    },
    Stderr {
        text: String,
    },
    /// A rich value (a Jupyter MIME bundle): `image/png` (base64),
    /// `text/html`, `image/svg+xml`, `text/markdown`, `text/plain`.
    Rich {
        data: std::collections::BTreeMap<String, String>,
        /// The value of the program's last expression (Jupyter's
        /// `execute_result`, `Out[n]`) rather than something it displayed.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        main: bool,
        /// Jupyter's metadata of the output, as JSON text (an image's size,
        /// `isolated`...); empty for none. Kept for notebooks made of the
        /// session; pages do not use it.
        #[serde(default, skip_serializing_if = "String::is_empty")]
        metadata: String,
        /// Jupyter's `transient.display_id`: a later `display_updated` of
        /// the same id replaces this output, wherever it is shown.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        display_id: Option<String>,
    },
    /// A data frame the kernel showed as a plain HTML table, read into rows
    /// on the server (`agent::tables`), so that the page can show it as a
    /// table of its own: styled, sortable, with copy and CSV download.
    Table {
        table: Table,
        /// The value's `text/plain` form (what the model reads).
        #[serde(default)]
        text: String,
        /// The program's last expression, as for [`Output::Rich`].
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        main: bool,
    },
    /// An image the page loads by its address (the server's
    /// `…/figures/{seq}.png`), so that a page holds each figure once, as a
    /// link, rather than its bytes in both its markup and its state. Only
    /// pages are sent these; the events keep the bytes.
    Image {
        url: String,
        /// The value's `text/plain` form.
        #[serde(default)]
        text: String,
        /// Its size in pixels, read from the PNG's header, so that the page
        /// keeps its room before it loads (the view never jumps).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        width: Option<u32>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        height: Option<u32>,
    },
    /// A file the program wrote in the session's home (an image, a table),
    /// offered for download from the result cell.
    File {
        /// `/home/user/…`
        path: String,
        name: String,
        size: u64,
    },
    /// A package file runcell's package index handed to the program (pip
    /// installing it), or refused to: the project, its version, the file's
    /// size, and whether it came from the server's cache (it never left the
    /// machine); `refused` says why the index would not serve it.
    Package {
        project: String,
        #[serde(default)]
        version: String,
        #[serde(default)]
        size: u64,
        #[serde(default)]
        cached: bool,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        refused: Option<String>,
    },
    /// The program raised or hit a limit; the traceback may hold ANSI colours.
    Error {
        name: String,
        value: String,
        #[serde(default)]
        traceback: Vec<String>,
    },
}

/// The MIME types of interactive charts the page draws (in a frame of
/// their own, with libraries served by runcell), with the library that
/// draws each; their values are the chart's JSON as text.
pub const CHART_TYPES: [(&str, &str); 3] = [
    ("application/vnd.plotly.v1+json", "plotly"),
    ("application/vnd.vegalite.v5+json", "vegalite"),
    ("application/vnd.vegalite.v6+json", "vegalite"),
];

/// The library that draws a chart of MIME type `mime`, if it is one.
pub fn chart_kind(mime: &str) -> Option<&'static str> {
    CHART_TYPES
        .iter()
        .find(|(chart, _)| *chart == mime)
        .map(|(_, kind)| *kind)
}

/// A MIME bundle's interactive chart, if it has one: the library that
/// draws it and its JSON text.
pub fn chart_of(
    data: &std::collections::BTreeMap<String, String>,
) -> Option<(&'static str, &String)> {
    data.iter()
        .find_map(|(mime, spec)| chart_kind(mime).map(|kind| (kind, spec)))
}

/// The error code of an explanation withdrawn because it named figures that
/// neither the program's output nor the question shows.
pub const UNGROUNDED: &str = "ungrounded";

/// Why a cell failed, for the page to show.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CellError {
    /// A stable name, e.g. `llm_unreachable` or `llm_model_not_found`.
    pub code: String,
    /// What went wrong and, where there is one, what to do about it.
    pub message: String,
}

/// Where a cell is in its life.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CellStatus {
    /// Still receiving deltas.
    Streaming,
    Ok,
    Error,
    Cancelled,
}

/// One step in a session's history.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum EventBody {
    /// A turn begins; every event up to its `turn_finished` belongs to it.
    /// It follows the turn at the end of the branch on show, or, as an
    /// edited question or a regenerated answer, stands beside
    /// `alternative_to` (after the same turn), which stays as another branch.
    TurnStarted {
        turn: TurnId,
        turn_kind: TurnKind,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        alternative_to: Option<TurnId>,
    },
    /// The branch through `turn` is on show from now on (to its newest
    /// end); new turns follow it.
    BranchSelected { turn: TurnId },
    /// The turn's kernel was rebuilt for its branch before it ran: a fresh
    /// kernel re-ran the branch's `programs` programs that stood (their
    /// output not shown again), because the kernel held another branch's
    /// variables. `error` says which program failed, if one did.
    KernelRestored {
        programs: u32,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        error: Option<CellError>,
    },
    /// The person's message, complete.
    UserMessage {
        cell_id: CellId,
        text: String,
        /// Its markdown as HTML, added by the server to what it sends a
        /// page ([`crate::render::for_pages`]); never stored.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        markup: Option<String>,
    },
    /// A cell opens; deltas or outputs follow until it is finished.
    CellStarted {
        cell_id: CellId,
        cell_kind: CellKind,
        /// Code cells: the program's language.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        language: Option<String>,
        /// Code and result cells of an ask: 1 for the first try, then one
        /// more for each fix.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        attempt: Option<u32>,
        /// Result cells: the code cell that ran. Edited code: the cell it was
        /// edited from.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        source: Option<CellId>,
    },
    /// More text for a streaming code or explanation cell.
    CellDelta {
        cell_id: CellId,
        text: String,
        /// Code cells: the highlighted markup so far, when it grew.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        highlight: Option<Highlight>,
    },
    /// A streaming explanation starts over: the text (and markup) so far is
    /// dropped, and the deltas that follow are its new text. An explanation
    /// that named a figure the output does not show is replaced in place,
    /// never left standing struck through.
    CellReset { cell_id: CellId },
    /// More output for a result cell.
    CellOutput { cell_id: CellId, output: Output },
    /// The result cell's output so far is cleared (Jupyter's
    /// `clear_output`); with `wait`, only once its next output comes.
    CellCleared {
        cell_id: CellId,
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        wait: bool,
    },
    /// Every output shown with `display_id` (in any cell) now shows `output`
    /// (Jupyter's `update_display_data`).
    DisplayUpdated { display_id: String, output: Output },
    /// runcell's own word on a code cell of an ask, shown with it: why
    /// the attempt was sent back to the model ("Sent back: the output does
    /// not show `@mean_fare[…]` in the question's form"), or what runcell
    /// changed in the attempt before to make this one ("`'wind_speed'` →
    /// `'wind speed'`: the table's column").
    CellNote { cell_id: CellId, note: String },
    /// A cell is complete.
    CellFinished {
        cell_id: CellId,
        status: CellStatus,
        elapsed_ms: u64,
        /// Set when `status` is `error`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        error: Option<CellError>,
    },
    /// A turn is over. `final_cell` is the code cell whose result stands
    /// (the last attempt), if any code ran.
    TurnFinished {
        turn: TurnId,
        status: TurnStatus,
        elapsed_ms: u64,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        final_cell: Option<CellId>,
    },
    /// The kernel that ran the cells so far is gone, and their variables with
    /// it; "Re-run all" rebuilds them.
    KernelLost { reason: KernelLoss },
    /// The program of code cell `cell_id` did not run: no kernel could be
    /// had, as `cap` allows `held` and all of them are held. No result
    /// cell follows; the code cell stays, to be run again once a kernel is
    /// free, and the turn ends.
    KernelRefused {
        cell_id: CellId,
        cap: KernelCap,
        held: u32,
    },
}

/// A sequenced event: part of the session's history, replayed on reconnect.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionEvent {
    /// Session-wide, starting at 1, without gaps.
    pub seq: u64,
    /// Milliseconds since the Unix epoch, when the server recorded it.
    pub ts_ms: u64,
    pub event: EventBody,
}

impl SessionEvent {
    /// `bodies` as a history numbered from `first_seq`, stamped at time 0:
    /// a fixture, or a fold's input built by hand.
    pub fn numbered(bodies: impl IntoIterator<Item = EventBody>, first_seq: u64) -> Vec<Self> {
        bodies
            .into_iter()
            .zip(first_seq..)
            .map(|(event, seq)| Self {
                seq,
                ts_ms: 0,
                event,
            })
            .collect()
    }
}

/// Why the server refused a frame. Errors are not part of the history.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorCode {
    /// Not JSON, not an object of a known `type`, or a binary frame.
    BadFrame,
    /// A message with nothing but white space.
    EmptyMessage,
    /// A message over [`MAX_ASK_BYTES`].
    MessageTooLong,
    /// Too many turns are already waiting in this session.
    Busy,
    /// Code sent to run is unacceptable (too big, NUL bytes, unknown language).
    InvalidCode,
    /// An edit, a regenerate or a branch switch named a turn that is not a
    /// finished question of this session.
    UnknownTurn,
    /// The server is shutting down or hit an internal fault.
    Unavailable,
}

/// Frames from the server to the page.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ServerMessage {
    /// First frame on every connection.
    Welcome {
        protocol: u32,
        session_id: String,
        /// The newest `seq` in the session when the connection opened.
        last_seq: u64,
    },
    Event(SessionEvent),
    Error {
        code: ErrorCode,
        message: String,
    },
    /// Run `code` (Python) in this page's own Python (the Browser sandbox):
    /// sent only to the page the session's browser kernel lives in, and not
    /// part of the history. The page answers with `browser_output` frames
    /// and one `browser_done`.
    BrowserRun {
        run: u64,
        code: String,
        /// Start from empty globals (a new kernel of the session's, or
        /// Re-run all); otherwise the globals of the runs before stay.
        #[serde(default)]
        fresh: bool,
        /// The wall-clock limit, counted from `browser_started`; the server
        /// stops the run after it.
        timeout_ms: u64,
        /// How long the page may take to start the program (its Python and
        /// the packages the program imports loading) before `timeout_ms`
        /// counts anyway.
        #[serde(default)]
        prepare_ms: u64,
    },
    /// Stop a browser run (Stop was pressed, or a limit was hit).
    BrowserStop {
        run: u64,
    },
}

/// Frames from the page to the server.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ClientMessage {
    /// Ask something: starts a turn. `model` picks one of the models the
    /// server lists; absent, the server's default answers.
    Ask {
        text: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        model: Option<String>,
        /// The sandbox backend the session's programs run on from now on;
        /// absent (or blank), the session keeps the one it has.
        #[serde(
            default,
            deserialize_with = "SandboxKind::deserialize_pick",
            skip_serializing_if = "Option::is_none"
        )]
        backend: Option<SandboxKind>,
        /// An edited question or a regenerated answer: the turn it stands
        /// beside, which stays reachable as another branch.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        alternative_to: Option<TurnId>,
    },
    /// Show the branch through `turn` (one of a question's versions, ← 1/2 →);
    /// refused with `busy` while a turn runs.
    SelectBranch { turn: TurnId },
    /// Run code as written ("Edit & run"), with no model; `source` is the
    /// code cell it was edited from.
    Run {
        code: String,
        /// The code cell's language, as it stands: the server reads it in
        /// any case, and refuses one it does not run with `invalid_code`
        /// (so it is text here, not a [`Language`]).
        language: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        source: Option<CellId>,
        /// The sandbox backend, as for `Ask`.
        #[serde(
            default,
            deserialize_with = "SandboxKind::deserialize_pick",
            skip_serializing_if = "Option::is_none"
        )]
        backend: Option<SandboxKind>,
    },
    /// Stop the running turn (the model's stream ends, a running program is
    /// interrupted) and drop the turns waiting behind it.
    Stop,
    /// The person began writing a question, or gave the notebook a file:
    /// the server may have `model` (its default when absent) read the
    /// session's conversation ahead, so that the question pays only for its
    /// own tokens. No reply; ignored while a turn runs.
    Composing {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        model: Option<String>,
    },
    /// Re-run all: a fresh kernel runs the session's code cells again.
    RerunAll,
    /// This page runs the session's Browser-sandbox programs from now on, in
    /// the Python identified by `kernel` (new each time the tab's Python
    /// starts). Sent when the page's Python is ready and on every reconnect.
    BrowserAttach { kernel: String },
    /// A browser run's program began: the page's Python is up and the
    /// packages it imports are loaded (the run's wall time counts from here).
    BrowserStarted { run: u64 },
    /// A piece of a browser run's output, in order.
    BrowserOutput { run: u64, output: Output },
    /// A browser run ended (its error, if any, came as an output before).
    BrowserDone { run: u64, kernel: String },
}

/// The first line of a look at the data that runcell runs before the
/// model writes its program (what follows names what it looks at): the page
/// folds such a cell once its turn's answer stands.
pub const LOOK_COMMENT: &str = "# Looking at the data: ";

/// Why a message the person typed cannot be sent.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum AskError {
    #[error("the message is empty")]
    Empty,
    #[error("the message is longer than {MAX_ASK_BYTES} bytes")]
    TooLong,
}

impl AskError {
    pub fn code(self) -> ErrorCode {
        match self {
            Self::Empty => ErrorCode::EmptyMessage,
            Self::TooLong => ErrorCode::MessageTooLong,
        }
    }
}

/// The check both sides apply before a message becomes a turn.
pub fn validate_ask(text: &str) -> Result<(), AskError> {
    if text.trim().is_empty() {
        Err(AskError::Empty)
    } else if text.len() > MAX_ASK_BYTES {
        Err(AskError::TooLong)
    } else {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wire(msg: &ServerMessage) -> String {
        serde_json::to_string(msg).unwrap_or_default()
    }

    #[test]
    fn event_frames_have_a_stable_shape() {
        let msg = ServerMessage::Event(SessionEvent {
            seq: 3,
            ts_ms: 1_700_000_000_000,
            event: EventBody::CellDelta {
                cell_id: CellId(2),
                text: "hi".into(),
                highlight: None,
            },
        });
        assert_eq!(
            wire(&msg),
            r#"{"type":"event","seq":3,"ts_ms":1700000000000,"event":{"kind":"cell_delta","cell_id":2,"text":"hi"}}"#
        );
    }

    #[test]
    fn welcome_and_error_frames_have_a_stable_shape() {
        let welcome = ServerMessage::Welcome {
            protocol: PROTOCOL_VERSION,
            session_id: "s".into(),
            last_seq: 0,
        };
        assert_eq!(
            wire(&welcome),
            r#"{"type":"welcome","protocol":3,"session_id":"s","last_seq":0}"#
        );
        let error = ServerMessage::Error {
            code: ErrorCode::BadFrame,
            message: "x".into(),
        };
        assert_eq!(
            wire(&error),
            r#"{"type":"error","code":"bad_frame","message":"x"}"#
        );
    }

    #[test]
    fn server_frames_round_trip() {
        let frames = [
            ServerMessage::Event(SessionEvent {
                seq: 1,
                ts_ms: 5,
                event: EventBody::UserMessage {
                    cell_id: CellId(1),
                    text: "héllo\n\"there\"".into(),
                    markup: None,
                },
            }),
            ServerMessage::Event(SessionEvent {
                seq: 2,
                ts_ms: 6,
                event: EventBody::CellFinished {
                    cell_id: CellId(2),
                    status: CellStatus::Cancelled,
                    elapsed_ms: 12,
                    error: None,
                },
            }),
            ServerMessage::Event(SessionEvent {
                seq: 3,
                ts_ms: 7,
                event: EventBody::CellFinished {
                    cell_id: CellId(2),
                    status: CellStatus::Error,
                    elapsed_ms: 12,
                    error: Some(CellError {
                        code: "llm_unreachable".into(),
                        message: "no server".into(),
                    }),
                },
            }),
            ServerMessage::Event(SessionEvent {
                seq: 4,
                ts_ms: 8,
                event: EventBody::CellOutput {
                    cell_id: CellId(3),
                    output: Output::Rich {
                        data: [("image/png".to_string(), "iVBOR".to_string())].into(),
                        main: false,
                        metadata: String::new(),
                        display_id: None,
                    },
                },
            }),
            ServerMessage::Event(SessionEvent {
                seq: 5,
                ts_ms: 9,
                event: EventBody::TurnFinished {
                    turn: TurnId(1),
                    status: TurnStatus::Ok,
                    elapsed_ms: 20,
                    final_cell: Some(CellId(2)),
                },
            }),
        ];
        for frame in frames {
            let back: ServerMessage = serde_json::from_str(&wire(&frame)).unwrap_or_else(|e| {
                panic!("{frame:?} did not round-trip: {e}");
            });
            assert_eq!(back, frame);
        }
    }

    #[test]
    fn client_frames_parse_and_reject() {
        let ok: Result<ClientMessage, _> = serde_json::from_str(r#"{"type":"ask","text":"2+2"}"#);
        assert_eq!(
            ok.ok(),
            Some(ClientMessage::Ask {
                text: "2+2".into(),
                model: None,
                backend: None,
                alternative_to: None,
            })
        );
        let edited: Result<ClientMessage, _> =
            serde_json::from_str(r#"{"type":"ask","text":"2+3","alternative_to":4}"#);
        assert!(matches!(
            edited,
            Ok(ClientMessage::Ask {
                alternative_to: Some(TurnId(4)),
                ..
            })
        ));
        let select: Result<ClientMessage, _> =
            serde_json::from_str(r#"{"type":"select_branch","turn":2}"#);
        assert_eq!(
            select.ok(),
            Some(ClientMessage::SelectBranch { turn: TurnId(2) })
        );
        let with_model: Result<ClientMessage, _> =
            serde_json::from_str(r#"{"type":"ask","text":"hi","model":"qwen"}"#);
        assert!(matches!(with_model, Ok(ClientMessage::Ask { model: Some(m), .. }) if m == "qwen"));
        assert_eq!(
            serde_json::from_str::<ClientMessage>(r#"{"type":"stop"}"#).ok(),
            Some(ClientMessage::Stop)
        );
        let run: Result<ClientMessage, _> = serde_json::from_str(
            r#"{"type":"run","code":"print(1)","language":"python","source":4}"#,
        );
        assert!(
            matches!(
                run,
                Ok(ClientMessage::Run {
                    source: Some(CellId(4)),
                    ..
                })
            ),
            "{run:?}"
        );
        for bad in [
            "",
            r#"{"type":"run","code":"x"}"#,
            "null",
            "[]",
            r#"{"type":"ask"}"#,
            r#"{"type":"launch","text":"x"}"#,
            r#"{"text":"x"}"#,
            r#"{"type":"ask","text":5}"#,
        ] {
            assert!(
                serde_json::from_str::<ClientMessage>(bad).is_err(),
                "{bad:?} should be rejected"
            );
        }
    }

    #[test]
    fn kinds_and_languages_travel_by_their_lowercase_names() {
        let kinds: Vec<_> = SandboxKind::ALL.iter().map(|k| k.name()).collect();
        assert_eq!(kinds, ["jail", "e2b", "browser"]);
        for kind in SandboxKind::ALL {
            assert_eq!(serde_json::to_value(kind).ok(), Some(kind.name().into()));
            assert_eq!(serde_json::from_value(kind.name().into()).ok(), Some(kind));
            assert_eq!(kind.name().parse(), Ok(kind));
            assert_eq!(kind.to_string(), kind.name());
        }
        let languages: Vec<_> = Language::ALL.iter().map(|l| l.name()).collect();
        assert_eq!(
            languages,
            [
                "python",
                "javascript",
                "typescript",
                "r",
                "java",
                "bash",
                "c"
            ]
        );
        for language in Language::ALL {
            assert_eq!(
                serde_json::to_value(language).ok(),
                Some(language.name().into())
            );
            assert_eq!(
                serde_json::from_value(language.name().into()).ok(),
                Some(language)
            );
            assert_eq!(language.name().parse(), Ok(language));
            assert_eq!(language.to_string(), language.name());
        }
        // Names are exact; leniency is the caller's to choose.
        assert!("Jail".parse::<SandboxKind>().is_err());
        assert!("Python".parse::<Language>().is_err());
        assert_eq!(
            "cobol".parse::<Language>().map_err(|e| e.to_string()),
            Err(
                "unknown language `cobol`: python, javascript, typescript, r, java, bash or c"
                    .into()
            )
        );
        assert_eq!(
            "mars".parse::<SandboxKind>().map_err(|e| e.to_string()),
            Err("unknown sandbox backend `mars`: jail, e2b or browser".into())
        );
    }

    #[test]
    fn a_picked_backend_is_read_as_requests_always_were() {
        let cases = [
            ("e2b", Ok(Some(SandboxKind::E2b))),
            (" browser ", Ok(Some(SandboxKind::Browser))),
            ("", Ok(None)),
            ("  ", Ok(None)),
            ("mars", Err(UnknownSandboxKind("mars".into()))),
            ("Jail", Err(UnknownSandboxKind("Jail".into()))),
        ];
        for (name, want) in cases {
            assert_eq!(SandboxKind::pick(name), want, "{name:?}");
        }
        let parse = |text: &str| serde_json::from_str::<ClientMessage>(text);
        let ask = |backend| ClientMessage::Ask {
            text: "hi".into(),
            model: None,
            backend,
            alternative_to: None,
        };
        assert_eq!(
            parse(r#"{"type":"ask","text":"hi","backend":"e2b"}"#).ok(),
            Some(ask(Some(SandboxKind::E2b)))
        );
        assert_eq!(
            parse(r#"{"type":"ask","text":"hi","backend":""}"#).ok(),
            Some(ask(None))
        );
        assert_eq!(
            parse(r#"{"type":"ask","text":"hi","backend":null}"#).ok(),
            Some(ask(None))
        );
        let refused =
            parse(r#"{"type":"ask","text":"hi","backend":"mainframe"}"#).map_err(|e| e.to_string());
        assert!(
            refused
                .as_ref()
                .is_err_and(|e| e.contains("unknown sandbox backend `mainframe`")),
            "{refused:?}"
        );
        assert_eq!(
            serde_json::to_string(&ask(Some(SandboxKind::Browser))).ok(),
            Some(r#"{"type":"ask","text":"hi","backend":"browser"}"#.into())
        );
    }

    #[test]
    fn browser_frames_have_a_stable_shape() {
        let run = ServerMessage::BrowserRun {
            run: 7,
            code: "print(1)".into(),
            fresh: true,
            timeout_ms: 30_000,
            prepare_ms: 180_000,
        };
        assert_eq!(
            wire(&run),
            r#"{"type":"browser_run","run":7,"code":"print(1)","fresh":true,"timeout_ms":30000,"prepare_ms":180000}"#
        );
        assert_eq!(
            wire(&ServerMessage::BrowserStop { run: 7 }),
            r#"{"type":"browser_stop","run":7}"#
        );
        let parse = |text: &str| serde_json::from_str::<ClientMessage>(text);
        assert_eq!(
            parse(r#"{"type":"browser_attach","kernel":"k1"}"#).ok(),
            Some(ClientMessage::BrowserAttach {
                kernel: "k1".into()
            })
        );
        assert_eq!(
            parse(r#"{"type":"browser_output","run":7,"output":{"type":"stdout","text":"hi\n"}}"#)
                .ok(),
            Some(ClientMessage::BrowserOutput {
                run: 7,
                output: Output::Stdout {
                    text: "hi\n".into()
                },
            })
        );
        assert_eq!(
            parse(r#"{"type":"browser_started","run":7}"#).ok(),
            Some(ClientMessage::BrowserStarted { run: 7 })
        );
        assert_eq!(
            parse(r#"{"type":"browser_done","run":7,"kernel":"k1"}"#).ok(),
            Some(ClientMessage::BrowserDone {
                run: 7,
                kernel: "k1".into()
            })
        );
        for bad in [
            r#"{"type":"browser_output","run":-1,"output":{"type":"stdout","text":""}}"#,
            r#"{"type":"browser_output","run":7,"output":{"type":"shell","text":""}}"#,
            r#"{"type":"browser_done","run":7}"#,
            r#"{"type":"browser_attach"}"#,
        ] {
            assert!(parse(bad).is_err(), "{bad} should be rejected");
        }
    }

    #[test]
    fn asks_are_validated() {
        assert_eq!(validate_ask("   \n\t"), Err(AskError::Empty));
        assert_eq!(
            validate_ask("x".repeat(MAX_ASK_BYTES + 1).as_str()),
            Err(AskError::TooLong)
        );
        assert_eq!(validate_ask("x".repeat(MAX_ASK_BYTES).as_str()), Ok(()));
        assert_eq!(validate_ask("how many r's in strawberry?"), Ok(()));
    }
}
