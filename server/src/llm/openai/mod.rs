//! Any OpenAI-compatible chat server (OpenAI, vLLM, Ollama, llama.cpp's
//! `llama-server`, `llama_cpp.server`...): an API base URL, an optional key,
//! and one parser for the streamed `chat.completion.chunk` format.
//!
//! - [`sse`] frames the byte stream into events, [`delta`] turns each
//!   payload into [`LlmEvent`]s and assembles the [`Completion`], [`error`]
//!   maps statuses, bodies and transport failures to [`LlmError`].
//! - Failures before the first event are retried (429, 5xx, refused or reset
//!   connections, timeouts) with exponential backoff and jitter; once an
//!   event has been yielded nothing is retried: the error ends the stream.
//! - Dropping a [`ChatStream`] drops the HTTP response, which closes the
//!   connection at once.
//! - What a server does not accept (`stream_options`, `json_schema`
//!   response formats) is learnt from its first refusal and not sent again.
//!
//! Invariant: the API key travels only in the `Authorization` header; it
//! never appears in an error, a log line or `Debug` output.

mod delta;
mod error;
mod sse;
#[cfg(test)]
mod tests;

use std::collections::VecDeque;
use std::fmt;
use std::pin::Pin;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::time::Duration;

use bytes::Bytes;
use futures::{Stream, StreamExt};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use tracing::Instrument;

use self::delta::{Assembler, Fed};
use self::error::{RETRY_AFTER_CAP, is_retryable, redact};
use self::sse::SseParser;
use crate::llm::{
    Capabilities, ChatRequest, ChatStream, Llm, LlmError, LlmEvent, ModelInfo, Role, ToolChoice,
};

/// The longest pause between two attempts, unless `Retry-After` asks.
const MAX_BACKOFF: Duration = Duration::from_secs(10);

/// How to ask for structured output (`ChatRequest::response_schema`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StructuredOutputMode {
    /// `json_schema` first; `json_object` with the schema if the server
    /// refuses it (remembered for later requests).
    #[default]
    Auto,
    /// `{"type":"json_schema","json_schema":{name,schema,strict}}` (OpenAI, vLLM).
    JsonSchema,
    /// `{"type":"json_object","schema":...}` (`llama_cpp.server`, llama.cpp).
    JsonObject,
    /// Never send `response_format`.
    Off,
}

/// Where the server is and how to talk to it.
#[derive(Clone)]
pub struct OpenAiConfig {
    /// The API base, `/v1` included, as `OPENAI_BASE_URL` conventionally
    /// is: `http://127.0.0.1:8080/v1`, `https://api.openai.com/v1`.
    pub base_url: String,
    /// Sent as `Authorization: Bearer`; redacted in `Debug`.
    pub api_key: Option<String>,
    /// The model when a request names none; when this is `None` too, the
    /// first model the server lists.
    pub model: Option<String>,
    /// The longest wait for response headers, and for each next piece of
    /// a streamed reply (not for the whole reply).
    pub request_timeout: Duration,
    /// Extra attempts after a failure that may pass.
    pub max_retries: u32,
    /// The first backoff; it doubles with each retry.
    pub retry_base_delay: Duration,
    /// The server takes `tools` (most do).
    pub tools: bool,
    pub structured_output: StructuredOutputMode,
}

impl OpenAiConfig {
    /// The defaults, for the server at `base_url`.
    pub fn new(base_url: impl Into<String>) -> Self {
        Self {
            base_url: base_url.into(),
            api_key: None,
            model: None,
            request_timeout: Duration::from_secs(120),
            max_retries: 2,
            retry_base_delay: Duration::from_millis(500),
            tools: true,
            structured_output: StructuredOutputMode::Auto,
        }
    }
}

impl Default for OpenAiConfig {
    fn default() -> Self {
        Self::new("https://api.openai.com/v1")
    }
}

impl fmt::Debug for OpenAiConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OpenAiConfig")
            .field("base_url", &display_url(&self.base_url))
            .field("api_key", &self.api_key.as_ref().map(|_| "[redacted]"))
            .field("model", &self.model)
            .field("request_timeout", &self.request_timeout)
            .field("max_retries", &self.max_retries)
            .field("retry_base_delay", &self.retry_base_delay)
            .field("tools", &self.tools)
            .field("structured_output", &self.structured_output)
            .finish()
    }
}

/// `response_format` shapes, as learnt in `Auto` mode.
const FORMAT_SCHEMA: u8 = 0;
const FORMAT_OBJECT: u8 = 1;

/// A client for one OpenAI-compatible server.
pub struct OpenAiClient {
    config: OpenAiConfig,
    http: reqwest::Client,
    /// The base URL without a trailing `/`.
    base: String,
    /// The base URL as errors show it: no credentials, no query.
    shown_url: String,
    /// The server accepts `stream_options` (until it refuses it once).
    stream_options: AtomicBool,
    /// `FORMAT_SCHEMA` or `FORMAT_OBJECT`, for `Auto` mode.
    format: AtomicU8,
    /// The server's model list and when it was read: the default model when
    /// none is named, and the names to refuse (llama.cpp's servers answer any
    /// name with their one model).
    known_models: Mutex<Option<(std::time::Instant, Vec<String>)>>,
}

/// The longest wait for a TCP connection.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// How long a read model list is trusted.
const MODEL_LIST_TTL: Duration = Duration::from_secs(60);

impl fmt::Debug for OpenAiClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OpenAiClient")
            .field("config", &self.config)
            .field("stream_options", &self.stream_options)
            .field("format", &self.format)
            .finish_non_exhaustive()
    }
}

/// What one attempt came to, when it brought no stream.
enum Failure {
    /// Worth another attempt after a backoff.
    Retry(LlmError, Option<Duration>),
    /// The server refused an optional field; ask again without it, now.
    Fallback,
    Fatal(LlmError),
}

impl OpenAiClient {
    pub fn new(mut config: OpenAiConfig) -> Result<Self, LlmError> {
        // The key as sent is the key as redacted: trimmed once, here.
        config.api_key = config
            .api_key
            .map(|k| k.trim().to_owned())
            .filter(|k| !k.is_empty());
        let base = config.base_url.trim().trim_end_matches('/').to_owned();
        let shown_url = display_url(&base);
        match reqwest::Url::parse(&base) {
            Ok(url) if matches!(url.scheme(), "http" | "https") => {}
            _ => {
                return Err(LlmError::Unreachable {
                    url: shown_url,
                    detail: "the base URL is not an http(s) URL".to_owned(),
                });
            }
        }
        let http = reqwest::Client::builder()
            // A dead host should fail in seconds, whatever the reply timeout.
            .connect_timeout(config.request_timeout.min(CONNECT_TIMEOUT))
            .user_agent(concat!("runcell/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| LlmError::Backend(format!("cannot build the HTTP client: {e}")))?;
        Ok(Self {
            format: AtomicU8::new(match config.structured_output {
                StructuredOutputMode::JsonObject => FORMAT_OBJECT,
                _ => FORMAT_SCHEMA,
            }),
            config,
            http,
            base,
            shown_url,
            stream_options: AtomicBool::new(true),
            known_models: Mutex::new(None),
        })
    }

    fn authorized(&self, builder: reqwest::RequestBuilder) -> reqwest::RequestBuilder {
        // Trimmed: a key read from a file often ends in a newline.
        match self
            .config
            .api_key
            .as_deref()
            .map(str::trim)
            .filter(|k| !k.is_empty())
        {
            Some(key) => builder.bearer_auth(key),
            None => builder,
        }
    }

    fn redact(&self, err: LlmError) -> LlmError {
        redact(err, self.config.api_key.as_deref())
    }

    fn transport(&self, err: &reqwest::Error) -> LlmError {
        self.redact(error::from_transport(
            err,
            &self.shown_url,
            self.config.request_timeout,
        ))
    }

    /// Sends a request, waiting at most `request_timeout` for the headers.
    async fn send(&self, builder: reqwest::RequestBuilder) -> Result<reqwest::Response, Failure> {
        match tokio::time::timeout(self.config.request_timeout, builder.send()).await {
            Err(_) => Err(Failure::Retry(
                LlmError::Timeout(self.config.request_timeout),
                None,
            )),
            Ok(Err(e)) => {
                let err = self.transport(&e);
                Err(if is_retryable(&err) {
                    Failure::Retry(err, None)
                } else {
                    Failure::Fatal(err)
                })
            }
            Ok(Ok(response)) => Ok(response),
        }
    }

    /// Reads an error response's body, within the timeout.
    async fn error_body(&self, response: reqwest::Response) -> String {
        tokio::time::timeout(self.config.request_timeout, response.text())
            .await
            .ok()
            .and_then(Result::ok)
            .unwrap_or_default()
    }

    /// The pause before retry number `retry` (0-based).
    fn backoff(&self, retry: u32, retry_after: Option<Duration>) -> Duration {
        if let Some(wait) = retry_after {
            return wait.min(RETRY_AFTER_CAP);
        }
        let exp = self
            .config
            .retry_base_delay
            .saturating_mul(1 << retry.min(16))
            .min(MAX_BACKOFF);
        exp.mul_f64(0.5 + 0.5 * rand::random::<f64>())
    }

    /// Runs `attempt` until it succeeds, fails for good, or runs out of
    /// retries.
    async fn with_retries<T, F, Fut>(&self, mut attempt: F) -> Result<T, LlmError>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T, Failure>>,
    {
        let mut retries = 0;
        loop {
            match attempt().await {
                Ok(value) => {
                    tracing::Span::current().record("retries", retries);
                    return Ok(value);
                }
                Err(Failure::Fallback) => {}
                Err(Failure::Retry(err, retry_after)) if retries < self.config.max_retries => {
                    let wait = self.backoff(retries, retry_after);
                    tracing::debug!(error = %err, ?wait, "retrying the model server");
                    tokio::time::sleep(wait).await;
                    retries += 1;
                }
                Err(Failure::Retry(err, _) | Failure::Fatal(err)) => {
                    tracing::Span::current().record("retries", retries);
                    tracing::debug!(error = %err, code = err.code(), "the model server failed");
                    return Err(err);
                }
            }
        }
    }

    async fn list_models(&self) -> Result<Vec<ModelInfo>, Failure> {
        let url = format!("{}/models", self.base);
        let response = self.send(self.authorized(self.http.get(&url))).await?;
        let status = response.status();
        if !status.is_success() {
            let retry_after = error::retry_after(response.headers());
            let body = self.error_body(response).await;
            let err = if status.as_u16() == 404 {
                LlmError::BadRequest {
                    status: 404,
                    message: format!(
                        "{}/models does not exist; does the base URL end in /v1?",
                        self.shown_url
                    ),
                }
            } else {
                error::from_status(status.as_u16(), &body, retry_after, "")
            };
            let err = self.redact(err);
            return Err(if is_retryable(&err) {
                Failure::Retry(err, retry_after)
            } else {
                Failure::Fatal(err)
            });
        }
        let body = tokio::time::timeout(self.config.request_timeout, response.bytes())
            .await
            .map_err(|_| Failure::Retry(LlmError::Timeout(self.config.request_timeout), None))?
            .map_err(|e| Failure::Retry(self.transport(&e), None))?;
        let value: Value = serde_json::from_slice(&body).map_err(|e| {
            Failure::Fatal(LlmError::MalformedStream(format!(
                "the model list is not JSON: {e}"
            )))
        })?;
        Ok(parse_models(&value))
    }

    /// The request's model, the configured one, or the first listed.
    async fn model_for(&self, request: &ChatRequest) -> Result<String, LlmError> {
        if let Some(model) = request.model.as_ref().filter(|m| !m.is_empty()) {
            if self.config.model.as_ref() != Some(model) {
                self.check_listed(model).await?;
            }
            return Ok(model.clone());
        }
        if let Some(model) = self.config.model.as_ref().filter(|m| !m.is_empty()) {
            return Ok(model.clone());
        }
        self.listed_ids()
            .await?
            .into_iter()
            .next()
            .ok_or_else(|| LlmError::ModelNotFound {
                model: String::new(),
                message: "no model is configured and the server lists none".to_owned(),
            })
    }

    /// The ids the server lists, read at most once per [`MODEL_LIST_TTL`].
    async fn listed_ids(&self) -> Result<Vec<String>, LlmError> {
        let cached = self
            .known_models
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
            .filter(|(read, _)| read.elapsed() < MODEL_LIST_TTL)
            .map(|(_, ids)| ids);
        if let Some(ids) = cached {
            return Ok(ids);
        }
        let ids: Vec<String> = self.models().await?.into_iter().map(|m| m.id).collect();
        *self.known_models.lock().unwrap_or_else(|p| p.into_inner()) =
            Some((std::time::Instant::now(), ids.clone()));
        Ok(ids)
    }

    /// Refuses a model the server does not list. A list that cannot be read
    /// (some servers have no `/models`) or is empty lets every name through;
    /// Ollama's `name` for `name:latest` passes.
    async fn check_listed(&self, model: &str) -> Result<(), LlmError> {
        let ids = match self.listed_ids().await {
            Ok(ids) => ids,
            // The server is not there: say so now rather than retry it.
            Err(
                e @ (LlmError::Unreachable { .. } | LlmError::Timeout(_) | LlmError::Auth { .. }),
            ) => {
                return Err(e);
            }
            Err(e) => {
                tracing::debug!(error = %e, "cannot list models; not checking the name");
                return Ok(());
            }
        };
        let served = ids.is_empty()
            || ids
                .iter()
                .any(|id| id == model || id.strip_suffix(":latest") == Some(model));
        if served {
            return Ok(());
        }
        let mut listed: Vec<&str> = ids.iter().map(String::as_str).take(10).collect();
        if ids.len() > listed.len() {
            listed.push("...");
        }
        Err(LlmError::ModelNotFound {
            model: model.chars().take(100).collect(),
            message: format!("the server lists {}", listed.join(", ")),
        })
    }

    /// The `response_format` to send now, if any.
    fn response_format(&self, request: &ChatRequest) -> Option<Value> {
        let schema = request.response_schema.as_ref()?;
        let object = match self.config.structured_output {
            StructuredOutputMode::Off => return None,
            StructuredOutputMode::JsonSchema => false,
            StructuredOutputMode::JsonObject => true,
            StructuredOutputMode::Auto => self.format.load(Ordering::Relaxed) == FORMAT_OBJECT,
        };
        Some(if object {
            json!({"type": "json_object", "schema": schema.schema})
        } else {
            json!({"type": "json_schema", "json_schema": {
                "name": schema_name(&schema.name),
                "schema": schema.schema,
                "strict": true,
            }})
        })
    }

    /// One POST to `/chat/completions`, read up to its first event.
    async fn start(
        &self,
        request: &ChatRequest,
        model: &str,
    ) -> Result<(LlmEvent, Reader), Failure> {
        let stream_options = self.stream_options.load(Ordering::Relaxed);
        let body = request_body(
            request,
            model,
            self.config.tools,
            stream_options,
            self.response_format(request),
        );
        let url = format!("{}/chat/completions", self.base);
        let builder = self
            .authorized(self.http.post(&url))
            .header(reqwest::header::ACCEPT, "text/event-stream")
            .json(&body);
        let response = self.send(builder).await?;
        let status = response.status();
        tracing::Span::current().record("status", status.as_u16());
        if !status.is_success() {
            let retry_after = error::retry_after(response.headers());
            let text = self.error_body(response).await;
            return Err(self.refusal(status.as_u16(), &text, retry_after, request, model));
        }
        let json_body = response
            .headers()
            .get(reqwest::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with("application/json"));
        let mut reader = Reader {
            body: Box::pin(response.bytes_stream()),
            idle: self.config.request_timeout,
            parser: SseParser::default(),
            json_body: json_body.then(Vec::new),
            assembler: Some(Assembler::new(model)),
            queue: VecDeque::new(),
            pending_error: None,
            ended: false,
            broken: false,
            received: 0,
        };
        match reader.next().await {
            Some(Ok(event)) => Ok((event, reader)),
            Some(Err(err)) => {
                let err = self.redact(err);
                Err(if reader.broken || is_retryable(&err) {
                    Failure::Retry(err, None)
                } else {
                    Failure::Fatal(err)
                })
            }
            None => Err(Failure::Fatal(LlmError::MalformedStream(
                "the stream ended without a reply".to_owned(),
            ))),
        }
    }

    /// What an error status means: a field to drop, or an error.
    fn refusal(
        &self,
        status: u16,
        body: &str,
        retry_after: Option<Duration>,
        request: &ChatRequest,
        model: &str,
    ) -> Failure {
        let lower = body.to_lowercase();
        if matches!(status, 400 | 422) {
            if lower.contains("stream_options")
                && self.stream_options.swap(false, Ordering::Relaxed)
            {
                tracing::debug!("the server refuses stream_options; not sending it again");
                return Failure::Fallback;
            }
            if self.config.structured_output == StructuredOutputMode::Auto
                && request.response_schema.is_some()
                && (lower.contains("response_format") || lower.contains("json_schema"))
                && self.format.swap(FORMAT_OBJECT, Ordering::Relaxed) == FORMAT_SCHEMA
            {
                tracing::debug!("the server refuses json_schema; using json_object from now on");
                return Failure::Fallback;
            }
        }
        let err = self.redact(error::from_status(status, body, retry_after, model));
        if is_retryable(&err) {
            Failure::Retry(err, retry_after)
        } else {
            Failure::Fatal(err)
        }
    }
}

#[async_trait::async_trait]
impl Llm for OpenAiClient {
    fn backend(&self) -> &'static str {
        "openai"
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities {
            tools: self.config.tools,
            structured_output: self.config.structured_output != StructuredOutputMode::Off,
            streaming: true,
        }
    }

    async fn models(&self) -> Result<Vec<ModelInfo>, LlmError> {
        let span = tracing::debug_span!(
            "llm.models",
            backend = "openai",
            retries = tracing::field::Empty
        );
        self.with_retries(|| self.list_models())
            .instrument(span)
            .await
    }

    async fn chat(&self, request: ChatRequest) -> Result<ChatStream, LlmError> {
        let model = self.model_for(&request).await?;
        let span = tracing::debug_span!(
            "llm.chat",
            backend = "openai",
            model = %model,
            status = tracing::field::Empty,
            retries = tracing::field::Empty,
        );
        let (first, reader) = self
            .with_retries(|| self.start(&request, &model))
            .instrument(span)
            .await?;
        let key = self.config.api_key.clone();
        let stream = futures::stream::unfold((Some(first), reader), |(first, mut reader)| async {
            if let Some(event) = first {
                return Some((Ok(event), (None, reader)));
            }
            let item = reader.next().await?;
            Some((item, (None, reader)))
        })
        // Errors met mid-stream are redacted like the ones before it.
        .map(move |item| item.map_err(|e| redact(e, key.as_deref())));
        Ok(Box::pin(stream))
    }
}

type ByteStream = Pin<Box<dyn Stream<Item = reqwest::Result<Bytes>> + Send>>;

/// Reads one streamed reply into events.
struct Reader {
    body: ByteStream,
    idle: Duration,
    parser: SseParser,
    /// The whole body, when the server answered with plain JSON.
    json_body: Option<Vec<u8>>,
    /// `None` once `Done` is queued.
    assembler: Option<Assembler>,
    queue: VecDeque<LlmEvent>,
    /// Yielded after the queued events.
    pending_error: Option<LlmError>,
    ended: bool,
    /// The connection failed (rather than the server saying something).
    broken: bool,
    /// Body bytes read so far, against [`MAX_REPLY_BYTES`].
    received: usize,
}

/// The most a reply's body may hold. It bounds every buffer the reader keeps
/// (a line without an end, a JSON body, the assembled answer) against a
/// server that streams without stopping.
const MAX_REPLY_BYTES: usize = 16 * 1024 * 1024;

impl Reader {
    /// The next event, an error (then nothing), or `None` after `Done`.
    async fn next(&mut self) -> Option<Result<LlmEvent, LlmError>> {
        loop {
            if let Some(event) = self.queue.pop_front() {
                return Some(Ok(event));
            }
            if let Some(err) = self.pending_error.take() {
                return Some(Err(err));
            }
            if self.ended {
                return None;
            }
            match tokio::time::timeout(self.idle, self.body.next()).await {
                Err(_) => self.fail(LlmError::Timeout(self.idle)),
                Ok(Some(Ok(bytes))) if self.received + bytes.len() > MAX_REPLY_BYTES => {
                    self.fail(LlmError::MalformedStream(format!(
                        "the reply is larger than {} MiB",
                        MAX_REPLY_BYTES / (1024 * 1024)
                    )));
                }
                Ok(Some(Ok(bytes))) => {
                    self.received += bytes.len();
                    match &mut self.json_body {
                        Some(whole) => whole.extend_from_slice(&bytes),
                        None => {
                            let mut events = Vec::new();
                            self.parser.feed(&bytes, &mut events);
                            self.payloads(events);
                        }
                    }
                }
                Ok(Some(Err(e))) => {
                    self.broken = true;
                    self.fail(LlmError::MalformedStream(format!(
                        "the connection closed mid-reply ({})",
                        error::transport_detail(&e)
                    )));
                }
                Ok(None) => self.end_of_body(),
            }
        }
    }

    fn fail(&mut self, err: LlmError) {
        self.ended = true;
        self.assembler = None;
        self.pending_error = Some(err);
    }

    fn payloads(&mut self, events: Vec<sse::SseEvent>) {
        for event in events {
            let Some(assembler) = self.assembler.as_mut() else {
                return;
            };
            let mut out = Vec::new();
            let fed = assembler.feed(event.event.as_deref(), &event.data, &mut out);
            self.queue.extend(out);
            match fed {
                Ok(Fed::More) => {}
                Ok(Fed::Done) => return self.done(),
                Err(err) => return self.fail(err),
            }
        }
    }

    fn end_of_body(&mut self) {
        if let Some(whole) = self.json_body.take() {
            let text = String::from_utf8_lossy(&whole);
            self.payloads(vec![sse::SseEvent {
                event: None,
                data: text.into_owned(),
            }]);
        } else {
            let mut events = Vec::new();
            self.parser.finish(&mut events);
            self.payloads(events);
        }
        match &self.assembler {
            Some(assembler) if assembler.finished() => self.done(),
            Some(_) => self.fail(LlmError::MalformedStream(
                "the stream ended before the reply was complete".to_owned(),
            )),
            None => self.ended = true,
        }
    }

    fn done(&mut self) {
        self.ended = true;
        if let Some(assembler) = self.assembler.take() {
            self.queue.push_back(LlmEvent::Done(assembler.completion()));
        }
    }
}

/// The JSON body of a streamed chat request.
fn request_body(
    request: &ChatRequest,
    model: &str,
    tools: bool,
    stream_options: bool,
    response_format: Option<Value>,
) -> Value {
    let messages: Vec<Value> = request
        .messages
        .iter()
        .map(|m| {
            let role = match m.role {
                Role::System => "system",
                Role::User => "user",
                Role::Assistant => "assistant",
                Role::Tool => "tool",
            };
            // Never `null`: llama_cpp.server refuses it.
            let mut message = json!({"role": role, "content": m.content});
            if !m.tool_calls.is_empty() {
                message["tool_calls"] = m
                    .tool_calls
                    .iter()
                    .map(|c| {
                        json!({"id": c.id, "type": "function",
                               "function": {"name": c.name, "arguments": c.arguments}})
                    })
                    .collect();
            }
            if let Some(id) = &m.tool_call_id {
                message["tool_call_id"] = json!(id);
            }
            message
        })
        .collect();
    let mut body = json!({"model": model, "messages": messages, "stream": true});
    if stream_options {
        body["stream_options"] = json!({"include_usage": true});
    }
    if tools && !request.tools.is_empty() {
        body["tools"] = request
            .tools
            .iter()
            .map(|t| {
                json!({"type": "function", "function": {
                    "name": t.name, "description": t.description, "parameters": t.parameters}})
            })
            .collect();
        body["tool_choice"] = match &request.tool_choice {
            ToolChoice::Auto => json!("auto"),
            ToolChoice::Required => json!("required"),
            ToolChoice::None => json!("none"),
            ToolChoice::Named(name) => json!({"type": "function", "function": {"name": name}}),
        };
    }
    if let Some(t) = request.temperature {
        body["temperature"] = json!(t);
    }
    if let Some(n) = request.max_tokens {
        body["max_tokens"] = json!(n);
    }
    if let Some(format) = response_format {
        body["response_format"] = format;
    }
    body
}

/// OpenAI wants `^[a-zA-Z0-9_-]{1,64}$`.
fn schema_name(name: &str) -> String {
    let clean: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' {
                c
            } else {
                '_'
            }
        })
        .take(64)
        .collect();
    if clean.is_empty() {
        "reply".to_owned()
    } else {
        clean
    }
}

/// Models from `{"data":[{"id","owned_by"}]}` (OpenAI, vLLM, llama.cpp,
/// Ollama's `/v1`), `{"models":[{"name"|"model"}]}` (Ollama's and
/// llama-server's native lists) or a bare array.
fn parse_models(value: &Value) -> Vec<ModelInfo> {
    let lists = [value.get("data"), value.get("models"), Some(value)];
    let mut models: Vec<ModelInfo> = Vec::new();
    for item in lists
        .into_iter()
        .flatten()
        .filter_map(Value::as_array)
        .flatten()
    {
        let id = match item {
            Value::String(s) => Some(s.as_str()),
            _ => ["id", "model", "name"]
                .iter()
                .find_map(|k| item.get(k).and_then(Value::as_str)),
        };
        let Some(id) = id.filter(|id| !id.is_empty()) else {
            continue;
        };
        if models.iter().any(|m| m.id == id) {
            continue;
        }
        models.push(ModelInfo {
            id: id.to_owned(),
            owned_by: item
                .get("owned_by")
                .and_then(Value::as_str)
                .map(str::to_owned),
        });
    }
    models
}

/// The URL without credentials or query, for errors and logs.
pub(crate) fn display_url(url: &str) -> String {
    match reqwest::Url::parse(url) {
        Ok(mut parsed) => {
            let _ = parsed.set_username("");
            let _ = parsed.set_password(None);
            parsed.set_query(None);
            parsed.to_string().trim_end_matches('/').to_owned()
        }
        Err(_) => "(an invalid URL)".to_owned(),
    }
}
