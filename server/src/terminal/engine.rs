//! What the terminal client asks of runcell, whether it is a server at a
//! URL ([`super::remote::Remote`], over the NDJSON API) or the engine in
//! this process ([`super::embedded::InProcess`]).

use app::protocol::SessionEvent;
use async_trait::async_trait;
use futures::stream::BoxStream;
use serde::Deserialize;

/// One line of a turn: the NDJSON line as the server wrote it (printed as
/// is by `--json`) and the event it holds.
#[derive(Clone, Debug)]
pub struct Frame {
    pub line: String,
    pub event: SessionEvent,
}

/// A turn's events as they happen, up to `turn_finished`.
pub type TurnStream = BoxStream<'static, Result<Frame, ClientError>>;

/// A file in the session's home, as listed.
#[derive(Clone, Debug, Deserialize)]
pub struct FileSummary {
    pub path: String,
    pub name: String,
    #[serde(default)]
    pub size: u64,
    #[serde(default)]
    pub kind: String,
}

/// What an upload did.
#[derive(Clone, Debug)]
pub enum Uploaded {
    Written(FileSummary),
    /// A file of that name is there, and replacing it was not asked for.
    Exists,
}

#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error(
        "cannot reach runcell at {url}: {reason} (start one with ./scripts/run.sh or `runcell serve`, or use --embedded)"
    )]
    Unreachable { url: String, reason: String },
    #[error(
        "this server asks for an API key: pass --key or set RUNCELL_API_KEY (make one on the server with `runcell keys create --name NAME`)"
    )]
    NeedsKey,
    #[error("the server refused the API key: {0}")]
    KeyRefused(String),
    /// The server answered with an error of its own.
    #[error("{message}")]
    Refused {
        status: u16,
        code: String,
        message: String,
    },
    #[error("the server's answer could not be read: {0}")]
    Protocol(String),
    #[error("{0}")]
    Local(String),
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

impl ClientError {
    /// The session is not there (or is someone else's).
    pub fn is_not_found(&self) -> bool {
        matches!(self, Self::Refused { status: 404, .. })
    }
}

#[async_trait]
pub trait Backend: Send + Sync {
    /// Where the sessions live, for the banner.
    fn describe(&self) -> String;
    /// The model that answers when none is asked for, if known.
    async fn default_model(&self) -> Option<String>;
    /// A new, empty session of this client's owner.
    async fn new_session(&self) -> Result<String, ClientError>;
    /// Whether `id` is a session of this client's owner.
    async fn check_session(&self, id: &str) -> Result<(), ClientError>;
    /// Asks a question; its turn streams back.
    async fn ask(
        &self,
        id: &str,
        text: &str,
        model: Option<&str>,
    ) -> Result<TurnStream, ClientError>;
    /// Runs the session's code again in a fresh kernel.
    async fn rerun(&self, id: &str) -> Result<TurnStream, ClientError>;
    /// Stops the running turn.
    async fn stop(&self, id: &str) -> Result<(), ClientError>;
    async fn upload(
        &self,
        id: &str,
        name: &str,
        bytes: Vec<u8>,
        replace: bool,
    ) -> Result<Uploaded, ClientError>;
    async fn files(&self, id: &str) -> Result<Vec<FileSummary>, ClientError>;
    async fn download(&self, id: &str, path: &str) -> Result<Vec<u8>, ClientError>;
    /// The session's read-only share link (made, or moved on).
    async fn share(&self, id: &str) -> Result<String, ClientError>;
    /// The session's page, where a browser can open it.
    fn page(&self, id: &str) -> Option<String>;
    /// Lets go (the embedded engine drains its turns and closes its store).
    async fn close(&self);
}
