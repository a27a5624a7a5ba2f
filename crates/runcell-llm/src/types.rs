//! What every language-model backend speaks: the request, the streamed events,
//! the assembled completion and the one error type.
//!
//! This file depends only on crates (serde, thiserror, futures, async-trait),
//! never on the rest of runcell, so that backends can be built and tested on
//! their own.

use std::pin::Pin;
use std::time::Duration;

use futures::Stream;
use serde::{Deserialize, Serialize};

/// Who wrote a message.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    System,
    User,
    Assistant,
    Tool,
}

/// One message of a conversation, in the OpenAI chat shape.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Message {
    pub role: Role,
    pub content: String,
    /// The tool calls an assistant message made.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<ToolCall>,
    /// For a `Tool` message: which call this is the result of.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
}

impl Message {
    pub fn system(content: impl Into<String>) -> Self {
        Self::plain(Role::System, content)
    }
    pub fn user(content: impl Into<String>) -> Self {
        Self::plain(Role::User, content)
    }
    pub fn assistant(content: impl Into<String>) -> Self {
        Self::plain(Role::Assistant, content)
    }
    /// The result of the tool call `call_id`.
    pub fn tool(call_id: impl Into<String>, content: impl Into<String>) -> Self {
        Self {
            tool_call_id: Some(call_id.into()),
            ..Self::plain(Role::Tool, content)
        }
    }
    fn plain(role: Role, content: impl Into<String>) -> Self {
        Self {
            role,
            content: content.into(),
            tool_calls: Vec::new(),
            tool_call_id: None,
        }
    }
}

/// A function the model may call, described by a JSON schema.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ToolSpec {
    pub name: String,
    pub description: String,
    /// JSON schema of the arguments object.
    pub parameters: serde_json::Value,
}

/// Whether the model must call a tool.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolChoice {
    /// The model decides (the default).
    #[default]
    Auto,
    /// The model must call some tool.
    Required,
    /// The model must call this tool.
    Named(String),
    /// No tool calls.
    None,
}

/// A reply shape to enforce (`response_format` with a JSON schema).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ResponseSchema {
    pub name: String,
    pub schema: serde_json::Value,
}

/// One chat completion to stream.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ChatRequest {
    /// The model to use; `None` means the backend's configured default.
    pub model: Option<String>,
    pub messages: Vec<Message>,
    /// Tools offered; ignored by backends without tool support.
    pub tools: Vec<ToolSpec>,
    pub tool_choice: ToolChoice,
    /// Constrain the reply to this JSON schema (structured output).
    pub response_schema: Option<ResponseSchema>,
    pub max_tokens: Option<u32>,
    /// `None`: the backend's default. `Some(0.0)`: greedy.
    pub temperature: Option<f32>,
    /// The seed a sampled reply (temperature above 0) is drawn with, so
    /// that one request draws the same reply again and another seed
    /// another; `None`: the backend's own. Sent to OpenAI-compatible
    /// servers as `seed`, which some honour.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed: Option<u64>,
    /// Whose request it is, so that a model shared by everyone (the
    /// embedded one) can be fair between them; never sent anywhere.
    #[serde(skip)]
    pub requester: Requester,
    /// How many leading messages are the server's own (its system prompt,
    /// nothing a person wrote or uploaded): a backend with a prompt cache
    /// may reuse their reading for every requester. 0: none.
    #[serde(skip)]
    pub shared_messages: usize,
    /// The conversation this request continues (a notebook session's id):
    /// a backend with a prompt cache reuses what it read of the rest of the
    /// messages only for requests that name the same conversation, so that
    /// cache timing tells nobody what another person asked.
    #[serde(skip)]
    pub conversation: Option<String>,
}

/// Who a model request is for.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub enum Requester {
    /// The server's own use (benchmarks, checks) or a caller that does not
    /// say: counted with the known requesters, as one of them.
    #[default]
    Unnamed,
    /// A signed-in person or a key, by its owner id.
    Known(String),
    /// Anonymous pages, together per client address (`unknown` where the
    /// address is not known): a cookie anyone can drop names nobody.
    Anonymous(String),
}

impl Requester {
    pub fn is_anonymous(&self) -> bool {
        matches!(self, Self::Anonymous(_))
    }
}

/// A complete tool call: `arguments` is the raw JSON text the model wrote.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolCall {
    pub id: String,
    pub name: String,
    pub arguments: String,
}

/// Why generation stopped.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FinishReason {
    /// A natural end or a stop sequence.
    Stop,
    /// `max_tokens` or the context window was reached.
    Length,
    ToolCalls,
    ContentFilter,
    /// The server sent no reason, or one runcell does not know.
    Other(String),
}

/// Token counts, when the backend reports them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    pub prompt_tokens: u32,
    pub completion_tokens: u32,
    /// Of the prompt's tokens, those the backend found already read (its
    /// prompt cache); 0 when it does not say.
    #[serde(default)]
    pub cached_tokens: u32,
}

/// The whole reply, assembled from the stream.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Completion {
    pub text: String,
    pub tool_calls: Vec<ToolCall>,
    pub finish_reason: FinishReason,
    pub usage: Option<Usage>,
}

/// What a chat stream yields, in order: deltas as they arrive, then exactly
/// one `Done` with everything assembled. A stream that ends without `Done`
/// was cut off (the backend yields an error first).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum LlmEvent {
    /// Reply text as it is generated.
    Text(String),
    /// A fragment of tool call `index`: `id` and `name` arrive on its first
    /// fragment, `arguments` is the next piece of the JSON text.
    ToolCallDelta {
        index: usize,
        id: Option<String>,
        name: Option<String>,
        arguments: String,
    },
    Done(Completion),
}

/// A model the backend can serve.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ModelInfo {
    pub id: String,
    /// Who serves it, e.g. the server's `owned_by`, or `embedded`.
    pub owned_by: Option<String>,
}

/// What a backend can do.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Capabilities {
    /// Takes `tools` and answers with tool calls.
    pub tools: bool,
    /// Honours `response_schema`.
    pub structured_output: bool,
    /// Yields text as it is generated rather than all at the end.
    pub streaming: bool,
}

/// Why a chat failed. Every variant carries a message a person can act on;
/// none carries a secret (API keys never appear here).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum LlmError {
    #[error("the model server at {url} cannot be reached: {detail}")]
    Unreachable { url: String, detail: String },
    #[error("the model server refused the API key (HTTP {status}): {message}")]
    Auth { status: u16, message: String },
    #[error("model `{model}` is not available: {message}")]
    ModelNotFound { model: String, message: String },
    #[error("the conversation is too long for the model's context: {message}")]
    ContextTooLong { message: String },
    #[error("the model server is rate limiting requests: {message}")]
    RateLimited {
        message: String,
        retry_after: Option<Duration>,
    },
    #[error("the model server rejected the request (HTTP {status}): {message}")]
    BadRequest { status: u16, message: String },
    #[error("the model server failed (HTTP {status}): {message}")]
    Server { status: u16, message: String },
    #[error("the model server sent a malformed stream: {0}")]
    MalformedStream(String),
    #[error("the model did not answer within {0:?}")]
    Timeout(Duration),
    /// The embedded model's weights are missing or damaged.
    #[error("model file {path}: {detail}. {hint}")]
    ModelFile {
        path: String,
        detail: String,
        hint: String,
    },
    /// Anything else inside a backend (the embedded model's maths, a thread
    /// that died).
    #[error("the model failed: {0}")]
    Backend(String),
}

impl LlmError {
    /// A stable, machine-readable name for the UI and the API.
    pub fn code(&self) -> &'static str {
        match self {
            Self::Unreachable { .. } => "llm_unreachable",
            Self::Auth { .. } => "llm_auth",
            Self::ModelNotFound { .. } => "llm_model_not_found",
            Self::ContextTooLong { .. } => "llm_context_too_long",
            Self::RateLimited { .. } => "llm_rate_limited",
            Self::BadRequest { .. } => "llm_bad_request",
            Self::Server { .. } => "llm_server_error",
            Self::MalformedStream(_) => "llm_malformed_stream",
            Self::Timeout(_) => "llm_timeout",
            Self::ModelFile { .. } => "llm_model_file",
            Self::Backend(_) => "llm_backend",
        }
    }
}

/// A streamed reply. Dropping it cancels the generation at once: the HTTP
/// stream is closed, the embedded model stops at its next token.
pub type ChatStream = Pin<Box<dyn Stream<Item = Result<LlmEvent, LlmError>> + Send>>;

/// A language model: an OpenAI-compatible server, the embedded model, or the
/// scripted test model.
#[async_trait::async_trait]
pub trait Llm: Send + Sync + 'static {
    /// The backend's name: `openai`, `embedded` or `scripted`.
    fn backend(&self) -> &'static str;

    fn capabilities(&self) -> Capabilities;

    /// The models this backend can serve, for the UI's selector.
    async fn models(&self) -> Result<Vec<ModelInfo>, LlmError>;

    /// Starts a streamed chat completion. Errors that happen before the first
    /// event (unreachable, auth, unknown model...) come back here; later ones
    /// come as the stream's last item.
    async fn chat(&self, request: ChatRequest) -> Result<ChatStream, LlmError>;

    /// Reads `request`'s messages ahead (a session's prompt while its owner
    /// types, or once a file is uploaded), so that a request continuing them
    /// soon pays only for what it adds. Backends without a prompt cache of
    /// their own do nothing; errors are the caller's to ignore.
    async fn prefill(&self, _request: ChatRequest) -> Result<(), LlmError> {
        Ok(())
    }
}
