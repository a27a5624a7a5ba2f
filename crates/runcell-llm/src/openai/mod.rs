//! Any OpenAI-compatible chat server (OpenAI, vLLM, Ollama, llama.cpp's
//! `llama-server`, `llama_cpp.server`...): an API base URL, an optional key,
//! and one parser for the streamed `chat.completion.chunk` format.
//!
//! - [`config`] says where the server is; [`request`] builds what is sent;
//!   [`models`] picks the model from the server's list; [`reader`] reads a
//!   reply, with [`sse`] framing the byte stream into events, [`delta`]
//!   turning each payload into [`LlmEvent`]s and assembling the
//!   [`Completion`]; [`error`] maps statuses, bodies and transport failures
//!   to [`LlmError`]; this file is the client: attempts, retries, the `Llm`
//!   impl.
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

mod config;
mod delta;
mod error;
mod models;
mod reader;
mod request;
mod sse;
#[cfg(test)]
mod tests;

use std::collections::VecDeque;
use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use secrecy::{ExposeSecret, SecretString};
use tracing::Instrument;

pub use self::config::{OpenAiConfig, StructuredOutputMode};
use self::delta::Assembler;
use self::error::{RETRY_AFTER_CAP, is_retryable, redact};
use self::reader::Reader;
use self::request::request_body;
use self::sse::SseParser;
use crate::{Capabilities, ChatRequest, ChatStream, Llm, LlmError, LlmEvent, ModelInfo};

/// The longest pause between two attempts, unless `Retry-After` asks.
const MAX_BACKOFF: Duration = Duration::from_secs(10);

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
    /// The chat streams open now. llama-cpp-python's server ends a stream
    /// it is sending (a bare `[DONE]`, mid tool call) as soon as any other
    /// request arrives, `/v1/models` included: while one is open, the model
    /// list is answered from [`Self::last_listed`] instead of asked for.
    streams_open: Arc<AtomicUsize>,
    /// The server's last model list, as read.
    last_listed: Mutex<Option<Vec<ModelInfo>>>,
}

/// Counts an open chat stream until dropped.
struct StreamOpen(Arc<AtomicUsize>);

impl StreamOpen {
    fn new(count: &Arc<AtomicUsize>) -> Self {
        count.fetch_add(1, Ordering::SeqCst);
        Self(Arc::clone(count))
    }
}

impl Drop for StreamOpen {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// The longest wait for a TCP connection.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

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
            .map(|k| k.expose_secret().trim().to_owned())
            .filter(|k| !k.is_empty())
            .map(SecretString::from);
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
            streams_open: Arc::new(AtomicUsize::new(0)),
            last_listed: Mutex::new(None),
        })
    }

    fn authorized(&self, builder: reqwest::RequestBuilder) -> reqwest::RequestBuilder {
        // Trimmed: a key read from a file often ends in a newline.
        match self
            .config
            .api_key
            .as_ref()
            .map(|k| k.expose_secret().trim())
            .filter(|k| !k.is_empty())
        {
            Some(key) => builder.bearer_auth(key),
            None => builder,
        }
    }

    fn redact(&self, err: LlmError) -> LlmError {
        redact(
            err,
            self.config
                .api_key
                .as_ref()
                .map(ExposeSecret::expose_secret),
        )
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
        if self.streams_open.load(Ordering::SeqCst) > 0
            && let Some(listed) = self
                .last_listed
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .clone()
        {
            return Ok(listed);
        }
        let span = tracing::debug_span!(
            "llm.models",
            backend = "openai",
            retries = tracing::field::Empty
        );
        let listed = self
            .with_retries(|| self.list_models())
            .instrument(span)
            .await?;
        *self.last_listed.lock().unwrap_or_else(|p| p.into_inner()) = Some(listed.clone());
        Ok(listed)
    }

    async fn chat(&self, request: ChatRequest) -> Result<ChatStream, LlmError> {
        let model = self.model_for(&request).await?;
        let open = StreamOpen::new(&self.streams_open);
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
        // The stream counts as open until it is dropped.
        .map(move |item| {
            let _open = &open;
            item.map_err(|e| redact(e, key.as_ref().map(ExposeSecret::expose_secret)))
        });
        Ok(Box::pin(stream))
    }
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
