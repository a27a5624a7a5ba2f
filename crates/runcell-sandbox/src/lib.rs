//! Sandboxes: where model-written code runs. One trait, several backends; the
//! local jail (`jail/`) is the default and the first.
//!
//! A run streams [`RunEvent`]s while it happens and ends with a [`RunOutcome`].
//! Limits that bite are reported as typed errors in the outcome (`Timeout`,
//! `MemoryLimit`, `OutputLimit`, `ProcessLimit`, `DiskLimit`), not as failures of
//! the sandbox itself; [`SandboxError`] is for runs that could not happen.

pub mod asked;
pub mod backends;
pub mod browser;
pub mod config;
#[cfg(any(test, feature = "conformance"))]
pub mod conformance;
pub mod contents;
pub mod e2b;
pub mod files;
pub mod jail;
mod output;
pub mod packages;
pub mod sessions;
pub mod slots;

use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

pub use output::{
    Dropped, ERROR_FLOOR_BYTES, MAX_RESULTS, MAX_TRACEBACK_BYTES, OutputBudget, OutputCollector,
    fit, serialized_len,
};

/// The largest program accepted, in bytes.
pub const MAX_CODE_BYTES: usize = 1024 * 1024;

/// The MIME type of a data frame's own data, beside its HTML: the jail's
/// kernel adds it (`jail::kernel::kind::TABLE_DATA`) so that the notebook's table
/// holds the frame's rows, not only the ten pandas prints. It is runcell's
/// own: the Jupyter and E2B surfaces leave it out of what they pass on.
pub const TABLE_DATA_MIME: &str = "application/vnd.runcell.table+json";

/// Shared with the page and every API: one definition, in `app`.
pub use runcell_protocol::{Language, SandboxKind};

/// What a run may use. Defaults follow the table; a server sets its
/// own maxima and requests may only lower them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Limits {
    pub wall: Duration,
    pub memory_bytes: u64,
    pub pids: u32,
    /// CPU quota in thousandths of a core.
    pub cpu_millis: u32,
    /// What a run may show, in bytes: stdout, stderr, rich results (each
    /// counted as its serialized MIME bundle, so an image by its base64
    /// length) and the error together, kept through one
    /// [`OutputBudget`]. Whatever does not fit is dropped and the run is
    /// stopped with an `OutputLimit` error; besides, a run keeps at most
    /// [`MAX_RESULTS`] results and a traceback of at most
    /// [`MAX_TRACEBACK_BYTES`] (cut in the middle), and its error always
    /// gets [`ERROR_FLOOR_BYTES`] even when the output used the rest.
    pub output_bytes: usize,
    pub file_bytes: u64,
    /// `/home/user` and `/tmp` together.
    pub disk_bytes: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            wall: Duration::from_secs(30),
            memory_bytes: 512 * 1024 * 1024,
            pids: 128,
            cpu_millis: 1000,
            output_bytes: 1024 * 1024,
            file_bytes: 10 * 1024 * 1024,
            disk_bytes: 256 * 1024 * 1024,
        }
    }
}

impl Limits {
    /// How much of `disk_bytes` is `/home/user` (the rest is `/tmp`).
    pub fn home_bytes(&self) -> u64 {
        self.disk_bytes * 3 / 4
    }
}

/// The longest wall time any request may ask for.
pub const MAX_WALL: Duration = Duration::from_secs(300);

#[derive(Clone, Debug)]
pub struct RunRequest {
    pub code: String,
    pub language: Language,
    pub limits: Limits,
    /// Environment variables for a program run as a process of its own
    /// (Bash, C, a one-shot run); a kernel keeps its own environment.
    pub env: Vec<(String, String)>,
    /// Where such a program starts, if not in `/home/user`.
    pub cwd: Option<String>,
}

/// The most environment variables a run may set, and their bytes together.
pub const MAX_ENV_VARS: usize = 256;
pub const MAX_ENV_BYTES: usize = 64 * 1024;

/// Checks a run's environment variables and working directory: names
/// without `=`, no NUL anywhere, bounded in number and size.
pub fn validate_process(request: &RunRequest) -> Result<(), SandboxError> {
    if request.env.len() > MAX_ENV_VARS {
        return Err(SandboxError::InvalidInput(format!(
            "{} environment variables; at most {MAX_ENV_VARS} are accepted",
            request.env.len()
        )));
    }
    let bytes: usize = request.env.iter().map(|(k, v)| k.len() + v.len()).sum();
    if bytes > MAX_ENV_BYTES {
        return Err(SandboxError::InvalidInput(format!(
            "the environment variables are {bytes} bytes; at most {MAX_ENV_BYTES} are accepted"
        )));
    }
    for (key, value) in &request.env {
        let word = key
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
            && key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
        if !word {
            return Err(SandboxError::InvalidInput(format!(
                "`{}` is not an environment variable name (letters, digits and _, not first a digit)",
                key.chars().take(64).collect::<String>()
            )));
        }
        if value.contains('\0') {
            return Err(SandboxError::InvalidInput(format!(
                "the value of {key} contains NUL bytes"
            )));
        }
    }
    if let Some(cwd) = &request.cwd
        && (!cwd.starts_with('/') || cwd.contains('\0') || cwd.len() > 4096)
    {
        return Err(SandboxError::InvalidInput(
            "the working directory must be an absolute path".into(),
        ));
    }
    Ok(())
}

/// The checks every backend applies before running anything.
pub fn validate_code(code: &str) -> Result<(), SandboxError> {
    if code.len() > MAX_CODE_BYTES {
        return Err(SandboxError::InvalidInput(format!(
            "the code is {} bytes; at most {MAX_CODE_BYTES} are accepted",
            code.len()
        )));
    }
    if code.contains('\0') {
        return Err(SandboxError::InvalidInput(
            "the code contains NUL bytes".into(),
        ));
    }
    Ok(())
}

/// A piece of a run, in the order it happened.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum RunEvent {
    Stdout {
        text: String,
        ts_ms: u64,
    },
    Stderr {
        text: String,
        ts_ms: u64,
    },
    /// A rich result (Jupyter MIME bundle: `text/plain`, `image/png`, …).
    Result {
        data: serde_json::Map<String, serde_json::Value>,
        /// The value of the program's last expression (Jupyter's
        /// `execute_result`) rather than something it displayed.
        #[serde(skip_serializing_if = "std::ops::Not::not")]
        main: bool,
        /// Jupyter's output metadata (an image's size, `isolated`...), at
        /// most [`output::MAX_METADATA_BYTES`] of it; empty for none.
        #[serde(default, skip_serializing_if = "serde_json::Map::is_empty")]
        metadata: serde_json::Map<String, serde_json::Value>,
        /// Jupyter's `transient.display_id`: a later [`RunEvent::Update`]
        /// of the same id replaces this result wherever it is shown. At
        /// most [`MAX_DISPLAY_ID_BYTES`].
        #[serde(default, skip_serializing_if = "Option::is_none")]
        display_id: Option<String>,
        ts_ms: u64,
    },
    /// Jupyter's `clear_output`: what the cell showed so far is cleared;
    /// with `wait`, only once it shows something new.
    Clear {
        wait: bool,
        ts_ms: u64,
    },
    /// Jupyter's `update_display_data`: every result shown with
    /// `display_id` (in this run or an earlier one) now shows `data`.
    Update {
        display_id: String,
        data: serde_json::Map<String, serde_json::Value>,
        #[serde(default, skip_serializing_if = "serde_json::Map::is_empty")]
        metadata: serde_json::Map<String, serde_json::Value>,
        ts_ms: u64,
    },
    /// Jupyter's pager (the `page` payload of an `execute_reply`: the help
    /// `zip?` asks for), a MIME bundle to read beside the cell. It comes
    /// after the run's other output, and counts as a result.
    Page {
        data: serde_json::Map<String, serde_json::Value>,
        ts_ms: u64,
    },
    Error {
        error: ExecError,
        ts_ms: u64,
    },
}

impl RunEvent {
    /// When it happened, in milliseconds since the Unix epoch.
    pub fn ts_ms(&self) -> u64 {
        match self {
            Self::Stdout { ts_ms, .. }
            | Self::Stderr { ts_ms, .. }
            | Self::Result { ts_ms, .. }
            | Self::Clear { ts_ms, .. }
            | Self::Update { ts_ms, .. }
            | Self::Page { ts_ms, .. }
            | Self::Error { ts_ms, .. } => *ts_ms,
        }
    }
}

/// The longest display id kept; a longer one is dropped (the display is
/// then one that cannot be updated).
pub const MAX_DISPLAY_ID_BYTES: usize = 256;

/// A question a front end asks a session's kernel without running
/// anything: Jupyter's shell requests for completion, inspection, whether
/// code is complete, and history. The kernel's reply content comes back
/// as it gave it, bounded ([`MAX_KERNEL_REPLY_BYTES`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum KernelRequest {
    /// `complete_request`; `cursor_pos` counts characters, as Jupyter's.
    Complete { code: String, cursor_pos: usize },
    /// `inspect_request`; `detail_level` 0 or 1.
    Inspect {
        code: String,
        cursor_pos: usize,
        detail_level: u8,
    },
    /// `is_complete_request`.
    IsComplete { code: String },
    /// `history_request`.
    History(HistoryQuery),
}

impl KernelRequest {
    /// Jupyter's name of the request (`complete_request`…).
    pub fn msg_type(&self) -> &'static str {
        match self {
            Self::Complete { .. } => "complete_request",
            Self::Inspect { .. } => "inspect_request",
            Self::IsComplete { .. } => "is_complete_request",
            Self::History(_) => "history_request",
        }
    }
}

/// What a `history_request` asks for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HistoryQuery {
    /// Outputs too, not only inputs.
    pub output: bool,
    /// The raw input, before the kernel transformed it.
    pub raw: bool,
    pub access: HistoryAccess,
}

/// Which history entries (Jupyter's `hist_access_type` and its fields).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HistoryAccess {
    /// The last `n`.
    Tail { n: i32 },
    /// Lines `start..stop` of `session` (this one if `None`).
    Range {
        session: Option<i32>,
        start: i32,
        stop: i32,
    },
    /// Those matching a glob `pattern`, the last `n`.
    Search {
        pattern: String,
        unique: bool,
        n: i32,
    },
}

/// The largest kernel reply passed on (its content as JSON); a larger one
/// is refused.
pub const MAX_KERNEL_REPLY_BYTES: usize = 1024 * 1024;

/// An error as Jupyter reports one: a name, a message and a traceback.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(utoipa::ToSchema))]
pub struct ExecError {
    pub name: String,
    pub value: String,
    pub traceback: Vec<String>,
}

impl ExecError {
    pub fn new(name: &str, value: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            value: value.into(),
            traceback: Vec::new(),
        }
    }
}

/// The names of errors a limit produces.
pub mod limit_error {
    pub const TIMEOUT: &str = "Timeout";
    pub const MEMORY: &str = "MemoryLimit";
    pub const OUTPUT: &str = "OutputLimit";
    pub const PROCESSES: &str = "ProcessLimit";
    pub const DISK: &str = "DiskLimit";
    pub const CANCELLED: &str = "Cancelled";
    pub const COMPILE: &str = "CompileError";
    pub const KERNEL_DIED: &str = "KernelDied";
    /// The kernel sent something outside the wire protocol or its bounds
    /// (a frame too large, a bad signature…); it was replaced.
    pub const KERNEL_PROTOCOL: &str = "KernelProtocolError";
}

/// How a run ended, as the metrics label it.
pub fn outcome_label(result: &Result<RunOutcome, SandboxError>) -> &'static str {
    match result {
        Err(SandboxError::InvalidInput(_)) => "refused",
        Err(_) => "unavailable",
        Ok(outcome) => match outcome.error.as_ref().map(|e| e.name.as_str()) {
            None => "ok",
            Some(limit_error::TIMEOUT) => "timeout",
            Some(limit_error::CANCELLED) => "cancelled",
            Some(
                limit_error::MEMORY
                | limit_error::OUTPUT
                | limit_error::PROCESSES
                | limit_error::DISK,
            ) => "limit",
            Some(_) => "error",
        },
    }
}

/// How a run ended; the default is a run that has not printed anything yet.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
#[cfg_attr(feature = "schema", derive(utoipa::ToSchema))]
pub struct RunOutcome {
    pub stdout: String,
    pub stderr: String,
    /// Rich results (Jupyter MIME bundles such as `{"text/plain": ...,
    /// "image/png": <base64>}`); only sessions give them.
    #[cfg_attr(feature = "schema", schema(value_type = Vec<Object>))]
    pub results: Vec<serde_json::Map<String, serde_json::Value>>,
    /// The program's error, or a limit it hit (`Timeout`, `MemoryLimit`,
    /// `OutputLimit`, `ProcessLimit`, `DiskLimit`, `Cancelled`...).
    pub error: Option<ExecError>,
    /// The process's exit code, for one-shot runs.
    pub exit_code: Option<i32>,
    pub duration_ms: u64,
    /// Output was cut at the output limit.
    pub truncated: bool,
}

/// What a backend can do. `sandbox::conformance` checks every claim and skips,
/// saying so, what a backend does not claim; a claim left out must be one
/// the backend really cannot keep (the conformance suite checks that it
/// refuses it).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Capabilities {
    pub backend: SandboxKind,
    /// The languages its sessions (and one-shot runs, where it has them)
    /// run.
    pub languages: Vec<Language>,
    /// A session keeps variables from one run to the next.
    pub stateful: bool,
    /// Sessions offer [`SandboxSession::files`].
    pub files: bool,
    /// A run can be stopped (cancelled, or at its time limit) and the
    /// session goes on.
    pub interrupt: bool,
    /// [`Sandbox::run`] runs a program in a fresh, throw-away environment;
    /// without it, programs run only in sessions and `run` is refused with
    /// `NotSupported`.
    pub one_shot: bool,
    /// Two sessions of one sandbox share nothing (files, variables,
    /// processes).
    pub isolated_sessions: bool,
    /// Sessions offer execution contexts beyond their own
    /// ([`SandboxSession::contexts`]).
    pub contexts: bool,
}

/// Why a run could not happen at all.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SandboxError {
    /// The request is unacceptable (too big, NUL bytes, unknown language).
    #[error("{0}")]
    InvalidInput(String),
    /// An isolation layer is missing; nothing runs until it is fixed.
    #[error("the sandbox is unavailable: {0}")]
    Unavailable(String),
    /// Setting up or supervising the run failed.
    #[error("the sandbox failed: {0}")]
    Internal(String),
    /// A file, context or sandbox that is not there.
    #[error("{0}")]
    NotFound(String),
    /// The backend cannot do this (files on a backend without them...).
    #[error("{0}")]
    NotSupported(String),
    /// Not enough room for a file.
    #[error("{0}")]
    NoSpace(String),
}

/// A place code runs.
#[async_trait::async_trait]
pub trait Sandbox: Send + Sync {
    fn capabilities(&self) -> Capabilities;

    /// Runs `request` in a fresh, throw-away environment to its end; events
    /// go to `events` as they happen (a closed receiver is not an error).
    /// Cancelling stops the run.
    async fn run(
        &self,
        request: RunRequest,
        events: Option<mpsc::Sender<RunEvent>>,
        cancel: CancellationToken,
    ) -> Result<RunOutcome, SandboxError>;

    /// Opens a session whose files (and, where `capabilities().stateful`,
    /// variables) last from one run to the next.
    async fn open_session(&self) -> Result<Box<dyn SandboxSession>, SandboxError>;
}

/// A sandbox session; closing it stops everything in it.
#[async_trait::async_trait]
pub trait SandboxSession: Send + Sync {
    fn id(&self) -> &str;

    async fn run(
        &self,
        request: &RunRequest,
        events: Option<&mpsc::Sender<RunEvent>>,
        cancel: &CancellationToken,
    ) -> Result<RunOutcome, SandboxError>;

    async fn close(&self);

    /// The session's files, where `capabilities().files`.
    fn files(&self) -> Option<&dyn files::Files> {
        None
    }

    /// The session's execution contexts beyond its own, where the backend
    /// has them; callers go through [`SandboxSessionExt`], which says
    /// `NotSupported` (or `NotFound`) for a backend without.
    fn contexts(&self) -> Option<&dyn Contexts> {
        None
    }

    /// The projects runcell's package index served the session so far (pip
    /// installing them), in order, as (project, version): what a later
    /// kernel of the same notebook installs again. None for a backend
    /// without the index.
    fn installed_packages(&self) -> Vec<(String, String)> {
        Vec::new()
    }

    /// Asks the session's kernel of `language` a question that runs no
    /// code ([`KernelRequest`]) and gives its reply's content, a JSON
    /// object. The request waits for a running execution to end, as a
    /// kernel answers its shell in order. A backend whose kernels cannot
    /// be asked says `NotSupported`.
    async fn kernel_request(
        &self,
        language: Language,
        request: KernelRequest,
    ) -> Result<serde_json::Map<String, serde_json::Value>, SandboxError> {
        let _ = request;
        Err(SandboxError::NotSupported(format!(
            "this sandbox's {language} kernel answers no requests but runs"
        )))
    }
}

/// Execution contexts: kernels of their own beside a session's, sharing its
/// files. What a backend that has them implements (the jail, E2B).
#[async_trait::async_trait]
pub trait Contexts: Send + Sync {
    /// Opens another execution context and gives its id.
    async fn create_context(
        &self,
        language: Language,
        cwd: Option<&str>,
    ) -> Result<String, SandboxError>;

    /// Runs in a context `create_context` made.
    async fn run_in_context(
        &self,
        context: &str,
        request: &RunRequest,
        events: Option<&mpsc::Sender<RunEvent>>,
        cancel: &CancellationToken,
    ) -> Result<RunOutcome, SandboxError>;

    /// Starts a context afresh (its variables are lost).
    async fn restart_context(&self, context: &str) -> Result<(), SandboxError>;

    async fn delete_context(&self, context: &str) -> Result<(), SandboxError>;
}

/// What every session offers on top of [`SandboxSession`]'s small core
/// (object_store's `ObjectStore` and its extension): the context calls,
/// answered by [`SandboxSession::contexts`] where the backend has contexts,
/// refused where it has none.
#[async_trait::async_trait]
pub trait SandboxSessionExt: SandboxSession {
    /// Opens another execution context (a kernel of its own, sharing the
    /// session's files) and gives its id.
    async fn create_context(
        &self,
        language: Language,
        cwd: Option<&str>,
    ) -> Result<String, SandboxError> {
        match self.contexts() {
            Some(contexts) => contexts.create_context(language, cwd).await,
            None => Err(SandboxError::NotSupported(
                "this sandbox has no execution contexts".into(),
            )),
        }
    }

    /// Runs in a context `create_context` made.
    async fn run_in_context(
        &self,
        context: &str,
        request: &RunRequest,
        events: Option<&mpsc::Sender<RunEvent>>,
        cancel: &CancellationToken,
    ) -> Result<RunOutcome, SandboxError> {
        match self.contexts() {
            Some(contexts) => {
                contexts
                    .run_in_context(context, request, events, cancel)
                    .await
            }
            None => Err(no_context(context)),
        }
    }

    /// Starts a context afresh (its variables are lost).
    async fn restart_context(&self, context: &str) -> Result<(), SandboxError> {
        match self.contexts() {
            Some(contexts) => contexts.restart_context(context).await,
            None => Err(no_context(context)),
        }
    }

    async fn delete_context(&self, context: &str) -> Result<(), SandboxError> {
        match self.contexts() {
            Some(contexts) => contexts.delete_context(context).await,
            None => Err(no_context(context)),
        }
    }
}

impl<S: SandboxSession + ?Sized> SandboxSessionExt for S {}

fn no_context(context: &str) -> SandboxError {
    SandboxError::NotFound(format!("no context {context}"))
}

pub(crate) use runcell_core::clock::now_ms;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn code_is_checked_for_size_and_nul_bytes() {
        assert!(validate_code("print(1)").is_ok());
        assert!(validate_code(&"x".repeat(MAX_CODE_BYTES)).is_ok());
        assert!(matches!(
            validate_code(&"x".repeat(MAX_CODE_BYTES + 1)),
            Err(SandboxError::InvalidInput(_))
        ));
        assert!(matches!(
            validate_code("print(1)\0"),
            Err(SandboxError::InvalidInput(_))
        ));
    }

    #[test]
    fn languages_have_their_wire_names() {
        for language in Language::ALL {
            let wire = serde_json::to_string(&language).unwrap();
            assert_eq!(wire, format!("\"{}\"", language.name()));
        }
        assert!(serde_json::from_str::<Language>("\"cobol\"").is_err());
    }
}
