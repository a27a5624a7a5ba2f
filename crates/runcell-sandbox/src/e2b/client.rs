//! A client of E2B's control and data planes: the HTTP half of the E2B
//! backend. It talks to E2B's cloud, or to any server speaking the same
//! protocol (runcell's own, in the tests).

use std::time::Duration;

use futures::StreamExt;
use reqwest::{RequestBuilder, Response, StatusCode};
use secrecy::{ExposeSecret, SecretString};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::protocol::{
    self, ContextJson, EntryInfo, Line, NewContext, NewSandbox, SandboxJson, TimeoutBody,
};
use crate::config::E2bConfig;
use crate::files::{FileEntry, FileKind};
use crate::{
    ExecError, Limits, OutputBudget, RunEvent, RunOutcome, SandboxError, limit_error, now_ms,
};

/// How long a control-plane call or a file transfer may take.
const CALL_TIMEOUT: Duration = Duration::from_secs(60);
/// How long a sandbox may take to be created.
const CREATE_TIMEOUT: Duration = Duration::from_secs(120);
/// The most bytes of a JSON answer read (a sandbox, a context, a listing).
const MAX_REPLY_BYTES: usize = 16 * 1024 * 1024;
/// The most bytes of a refusal's body read (for its message).
const MAX_REFUSAL_BYTES: usize = 64 * 1024;
/// Bytes of JSON around a stream line's text, beyond what the output
/// budget allows.
const LINE_SLACK_BYTES: usize = 64 * 1024;

/// Where E2B is and how to sign in.
#[derive(Clone, Debug)]
pub struct E2bSettings {
    /// Sent in E2B's key header only; `Debug` shows `[REDACTED]`.
    pub api_key: SecretString,
    /// The control plane's base URL.
    pub api_url: String,
    /// One base URL for every sandbox port (routed by headers), if set.
    pub sandbox_url: Option<String>,
    pub domain: String,
    pub template: String,
    /// What new sandboxes live for unless renewed.
    pub sandbox_timeout: Duration,
}

impl E2bSettings {
    pub fn from_config(config: &E2bConfig) -> Self {
        let trim = |url: &str| url.trim().trim_end_matches('/').to_string();
        let api_url = if config.api_url.trim().is_empty() {
            format!("https://api.{}", config.domain)
        } else {
            trim(&config.api_url)
        };
        Self {
            api_key: config.api_key.expose().into(),
            api_url,
            sandbox_url: Some(trim(&config.sandbox_url)).filter(|u| !u.is_empty()),
            domain: config.domain.clone(),
            template: config.template.clone(),
            sandbox_timeout: Duration::from_secs(config.sandbox_timeout_secs),
        }
    }
}

/// Where code runs in a sandbox: a language's default context, or one made
/// by [`Client::create_context`].
#[derive(Clone, Copy, Debug)]
pub enum Place<'a> {
    Language(&'a str),
    Context(&'a str),
}

/// A sandbox this client made: where it is and its tokens.
#[derive(Clone, Debug)]
pub struct Handle {
    pub id: String,
    envd_token: Option<String>,
    traffic_token: Option<String>,
    domain: Option<String>,
}

pub struct Client {
    http: reqwest::Client,
    settings: E2bSettings,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("settings", &self.settings)
            .finish_non_exhaustive()
    }
}

/// An E2B answer that is not a success, as a sandbox error that says what
/// to do.
async fn refusal(what: &str, response: Response) -> SandboxError {
    let status = response.status();
    let (body, _) = read_at_most(response, MAX_REFUSAL_BYTES)
        .await
        .unwrap_or_default();
    let body = String::from_utf8_lossy(&body).into_owned();
    let message = serde_json::from_str::<serde_json::Value>(&body)
        .ok()
        .and_then(|v| {
            v.get("message")
                .and_then(|m| m.as_str())
                .map(str::to_string)
        })
        .unwrap_or(body);
    let message: String = message.chars().take(300).collect();
    match status {
        StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN => SandboxError::Unavailable(format!(
            "E2B refused the API key ({status}) when it was asked to {what}: check E2B_API_KEY ({message})"
        )),
        StatusCode::TOO_MANY_REQUESTS => SandboxError::Unavailable(format!(
            "E2B is limiting requests ({status}); try again later: {message}"
        )),
        StatusCode::NOT_FOUND => SandboxError::NotFound(format!(
            "E2B could not {what}: not found (the sandbox may have timed out): {message}"
        )),
        StatusCode::BAD_REQUEST | StatusCode::UNPROCESSABLE_ENTITY => {
            SandboxError::InvalidInput(format!("E2B could not {what}: {message}"))
        }
        StatusCode::INSUFFICIENT_STORAGE => SandboxError::NoSpace(message),
        StatusCode::BAD_GATEWAY | StatusCode::GATEWAY_TIMEOUT => {
            SandboxError::Unavailable(format!(
                "E2B could not {what}: the sandbox did not answer ({status}); it may have timed out"
            ))
        }
        _ => SandboxError::Unavailable(format!("E2B could not {what}: {status} {message}")),
    }
}

/// At most `max` bytes of a body, and whether that was all of it. A
/// declared length is only believed when it says the body is too long.
async fn read_at_most(response: Response, max: usize) -> Result<(Vec<u8>, bool), reqwest::Error> {
    if response
        .content_length()
        .is_some_and(|n| n > u64::try_from(max).unwrap_or(u64::MAX))
    {
        return Ok((Vec::new(), false));
    }
    let mut bytes = Vec::new();
    let mut stream = response.bytes_stream();
    while let Some(chunk) = stream.next().await {
        let chunk = chunk?;
        let room = max - bytes.len();
        if chunk.len() > room {
            bytes.extend_from_slice(&chunk[..room]);
            return Ok((bytes, false));
        }
        bytes.extend_from_slice(&chunk);
    }
    Ok((bytes, true))
}

/// A JSON answer, read within [`MAX_REPLY_BYTES`].
async fn json_reply<T: serde::de::DeserializeOwned>(
    what: &str,
    response: Response,
) -> Result<T, SandboxError> {
    let (bytes, whole) = read_at_most(response, MAX_REPLY_BYTES)
        .await
        .map_err(|e| unreachable(what, &e))?;
    if !whole {
        return Err(SandboxError::Unavailable(format!(
            "E2B's answer to {what} is larger than {MAX_REPLY_BYTES} bytes"
        )));
    }
    serde_json::from_slice(&bytes).map_err(|e| {
        SandboxError::Unavailable(format!("E2B's answer to {what} is not understood: {e}"))
    })
}

fn unreachable(what: &str, e: &reqwest::Error) -> SandboxError {
    if e.is_timeout() {
        SandboxError::Unavailable(format!("E2B did not answer in time when asked to {what}"))
    } else {
        SandboxError::Unavailable(format!("cannot reach E2B to {what}: {e}"))
    }
}

impl Client {
    pub fn new(settings: E2bSettings) -> Result<Self, SandboxError> {
        let http = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(10))
            .build()
            .map_err(|e| SandboxError::Internal(format!("cannot build an HTTP client: {e}")))?;
        Ok(Self { http, settings })
    }

    pub fn settings(&self) -> &E2bSettings {
        &self.settings
    }

    fn api(&self, method: reqwest::Method, path: &str) -> RequestBuilder {
        self.http
            .request(method, format!("{}{path}", self.settings.api_url))
            .header(
                protocol::API_KEY_HEADER,
                self.settings.api_key.expose_secret(),
            )
            .timeout(CALL_TIMEOUT)
    }

    /// A request to one of a sandbox's ports, with its routing headers and
    /// tokens.
    fn data(
        &self,
        handle: &Handle,
        port: u16,
        method: reqwest::Method,
        path: &str,
    ) -> RequestBuilder {
        let base = match &self.settings.sandbox_url {
            Some(url) => url.clone(),
            None => {
                let domain = handle.domain.as_deref().unwrap_or(&self.settings.domain);
                format!("https://{port}-{}.{domain}", handle.id)
            }
        };
        let mut request = self
            .http
            .request(method, format!("{base}{path}"))
            .header(protocol::SANDBOX_ID_HEADER, &handle.id)
            .header(protocol::SANDBOX_PORT_HEADER, port.to_string());
        if let Some(token) = &handle.envd_token {
            request = request.header(protocol::ACCESS_TOKEN_HEADER, token);
        }
        if port == protocol::CODE_PORT
            && let Some(token) = &handle.traffic_token
        {
            request = request.header(protocol::TRAFFIC_TOKEN_HEADER, token);
        }
        request
    }

    async fn send(what: &str, request: RequestBuilder) -> Result<Response, SandboxError> {
        let response = request.send().await.map_err(|e| unreachable(what, &e))?;
        if response.status().is_success() {
            Ok(response)
        } else {
            Err(refusal(what, response).await)
        }
    }

    /// Creates a sandbox from the configured template.
    pub async fn create(&self) -> Result<Handle, SandboxError> {
        let body = NewSandbox {
            template_id: self.settings.template.clone(),
            timeout: Some(self.settings.sandbox_timeout.as_secs().max(1)),
            ..NewSandbox::default()
        };
        let what = "create a sandbox";
        let response = Self::send(
            what,
            self.api(reqwest::Method::POST, "/sandboxes")
                .json(&body)
                .timeout(CREATE_TIMEOUT),
        )
        .await?;
        let sandbox: SandboxJson = json_reply(what, response).await?;
        tracing::info!(sandbox.id = %sandbox.sandbox_id, "E2B sandbox created");
        Ok(Handle {
            id: sandbox.sandbox_id,
            envd_token: sandbox.envd_access_token,
            traffic_token: sandbox.traffic_access_token,
            domain: sandbox.domain,
        })
    }

    /// Kills a sandbox; one that is gone already is not an error.
    pub async fn kill(&self, handle: &Handle) -> Result<(), SandboxError> {
        let path = format!("/sandboxes/{}", handle.id);
        match Self::send("kill a sandbox", self.api(reqwest::Method::DELETE, &path)).await {
            Ok(_) | Err(SandboxError::NotFound(_)) => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// Restarts a sandbox's clock.
    pub async fn set_timeout(
        &self,
        handle: &Handle,
        timeout: Duration,
    ) -> Result<(), SandboxError> {
        let path = format!("/sandboxes/{}/timeout", handle.id);
        let body = TimeoutBody {
            timeout: timeout.as_secs().max(1),
        };
        Self::send(
            "keep a sandbox alive",
            self.api(reqwest::Method::POST, &path).json(&body),
        )
        .await
        .map(drop)
    }

    /// Runs code through the code interpreter, streaming its events.
    pub async fn execute(
        &self,
        handle: &Handle,
        code: &str,
        place: Place<'_>,
        limits: &Limits,
        events: Option<&mpsc::Sender<RunEvent>>,
        cancel: &CancellationToken,
    ) -> Result<RunOutcome, SandboxError> {
        let started = std::time::Instant::now();
        let (language, context_id) = match place {
            Place::Language(language) => (Some(language.to_string()), None),
            Place::Context(context) => (None, Some(context.to_string())),
        };
        let body = protocol::ExecutionRequest {
            code: code.to_string(),
            context_id,
            language,
            env_vars: None,
        };
        let request = self
            .data(
                handle,
                protocol::CODE_PORT,
                reqwest::Method::POST,
                "/execute",
            )
            .json(&body);
        let mut reader = LineReader::new(limits.output_bytes);
        // Dropping the stream (time limit, cancel) closes the connection,
        // which interrupts the code on E2B's side.
        let streamed = async {
            let response = Self::send("run code", request).await?;
            let mut stream = response.bytes_stream();
            while let Some(chunk) = stream.next().await {
                let chunk = chunk.map_err(|e| unreachable("read a run's output", &e))?;
                for line in reader.push(&chunk) {
                    if let Some(event) = reader.apply(line)
                        && let Some(events) = events
                    {
                        let _ = events.send(event).await;
                    }
                }
                // Past the budget the stream is dropped, which stops the
                // run on E2B's side.
                if reader.ended || reader.over() {
                    break;
                }
            }
            Ok::<(), SandboxError>(())
        };
        let stopped = tokio::select! {
            result = tokio::time::timeout(limits.wall, streamed) => match result {
                Ok(Ok(())) => None,
                Ok(Err(e)) => return Err(e),
                Err(_) => Some(ExecError::new(limit_error::TIMEOUT, format!(
                    "the run took longer than {} s and was stopped",
                    limits.wall.as_secs_f64()
                ))),
            },
            () = cancel.cancelled() => Some(ExecError::new(limit_error::CANCELLED, "the run was cancelled")),
        };
        let mut outcome = reader.outcome;
        outcome.truncated = reader.budget.truncated();
        if let Some(error) = stopped {
            outcome.error = Some(error);
        } else if let Some(error) = reader.budget.limit_error() {
            outcome.error = Some(error);
        } else if !reader.ended && outcome.error.is_none() {
            outcome.error = Some(ExecError::new(
                "UnexpectedEndOfExecution",
                "Connection to the execution was closed before the execution was finished",
            ));
        }
        // E2B's stream has no `truncated`: an output limit the other side
        // hit says so.
        if outcome
            .error
            .as_ref()
            .is_some_and(|e| e.name == limit_error::OUTPUT)
        {
            outcome.truncated = true;
        }
        if let (Some(events), Some(error)) = (events, &outcome.error) {
            let _ = events
                .send(RunEvent::Error {
                    error: error.clone(),
                    ts_ms: now_ms(),
                })
                .await;
        }
        outcome.duration_ms = runcell_core::clock::millis(started.elapsed());
        Ok(outcome)
    }

    pub async fn create_context(
        &self,
        handle: &Handle,
        language: &str,
        cwd: Option<&str>,
    ) -> Result<String, SandboxError> {
        let body = NewContext {
            language: Some(language.to_string()),
            cwd: cwd.map(str::to_string),
        };
        let response = Self::send(
            "create a code context",
            self.data(
                handle,
                protocol::CODE_PORT,
                reqwest::Method::POST,
                "/contexts",
            )
            .json(&body)
            .timeout(CALL_TIMEOUT),
        )
        .await?;
        let context: ContextJson = json_reply("create a code context", response).await?;
        Ok(context.id)
    }

    pub async fn restart_context(&self, handle: &Handle, id: &str) -> Result<(), SandboxError> {
        let path = format!("/contexts/{id}/restart");
        Self::send(
            "restart a code context",
            self.data(handle, protocol::CODE_PORT, reqwest::Method::POST, &path)
                .timeout(CALL_TIMEOUT),
        )
        .await
        .map(drop)
    }

    pub async fn delete_context(&self, handle: &Handle, id: &str) -> Result<(), SandboxError> {
        let path = format!("/contexts/{id}");
        Self::send(
            "delete a code context",
            self.data(handle, protocol::CODE_PORT, reqwest::Method::DELETE, &path)
                .timeout(CALL_TIMEOUT),
        )
        .await
        .map(drop)
    }

    /// Writes a file (raw bytes, envd ≥ 0.5.7), streamed from where it is.
    pub async fn upload(
        &self,
        handle: &Handle,
        path: &str,
        bytes: crate::files::Contents,
    ) -> Result<(), SandboxError> {
        Self::send(
            "write a file",
            self.data(handle, protocol::ENVD_PORT, reqwest::Method::POST, "/files")
                .query(&[("path", path)])
                .header(reqwest::header::CONTENT_TYPE, "application/octet-stream")
                .header(reqwest::header::CONTENT_LENGTH, bytes.len())
                .body(reqwest::Body::wrap_stream(bytes.stream()))
                .timeout(CALL_TIMEOUT),
        )
        .await
        .map(drop)
    }

    pub async fn download(
        &self,
        handle: &Handle,
        path: &str,
        max: u64,
    ) -> Result<Vec<u8>, SandboxError> {
        let response = Self::send(
            "read a file",
            self.data(handle, protocol::ENVD_PORT, reqwest::Method::GET, "/files")
                .query(&[("path", path)])
                .timeout(CALL_TIMEOUT),
        )
        .await?;
        let mut bytes = Vec::new();
        let mut stream = response.bytes_stream();
        while let Some(chunk) = stream.next().await {
            let chunk = chunk.map_err(|e| unreachable("read a file", &e))?;
            if (bytes.len() + chunk.len()) as u64 > max {
                return Err(SandboxError::NoSpace(format!(
                    "'{path}' is larger than {max} bytes"
                )));
            }
            bytes.extend_from_slice(&chunk);
        }
        Ok(bytes)
    }

    /// A unary Connect call to envd with the JSON codec.
    pub async fn connect_unary(
        &self,
        handle: &Handle,
        method: &str,
        body: &serde_json::Value,
    ) -> Result<serde_json::Value, SandboxError> {
        let what = format!("call {method}");
        let response = self
            .data(
                handle,
                protocol::ENVD_PORT,
                reqwest::Method::POST,
                &format!("/{method}"),
            )
            .header("connect-protocol-version", "1")
            .header("connect-timeout-ms", CALL_TIMEOUT.as_millis().to_string())
            .json(body)
            .timeout(CALL_TIMEOUT)
            .send()
            .await
            .map_err(|e| unreachable(&what, &e))?;
        let status = response.status();
        if status.is_success() {
            return json_reply(&what, response).await;
        }
        let json: serde_json::Value = match read_at_most(response, MAX_REFUSAL_BYTES).await {
            Ok((bytes, true)) => serde_json::from_slice(&bytes).unwrap_or_default(),
            _ => serde_json::Value::Null,
        };
        let message = json
            .get("message")
            .and_then(|m| m.as_str())
            .unwrap_or("no message")
            .to_string();
        Err(match json.get("code").and_then(|c| c.as_str()) {
            Some("not_found") => SandboxError::NotFound(message),
            Some("already_exists") => {
                SandboxError::InvalidInput(format!("exists already: {message}"))
            }
            Some("invalid_argument" | "failed_precondition") => SandboxError::InvalidInput(message),
            Some("resource_exhausted") => SandboxError::NoSpace(message),
            Some("unauthenticated" | "permission_denied") => SandboxError::Unavailable(format!(
                "E2B refused the sandbox's access token: {message}"
            )),
            _ => SandboxError::Unavailable(format!("E2B could not {what}: {status} {message}")),
        })
    }
}

/// envd's entry as runcell's.
pub fn file_entry(entry: EntryInfo) -> FileEntry {
    let kind = match entry.kind.as_str() {
        protocol::FILE_TYPE_DIRECTORY => FileKind::Directory,
        protocol::FILE_TYPE_SYMLINK => FileKind::Symlink,
        protocol::FILE_TYPE_UNSPECIFIED => FileKind::Other,
        _ => FileKind::File,
    };
    FileEntry {
        path: entry.path,
        name: entry.name,
        kind,
        size: entry.size,
        mode: entry.mode,
        modified_ms: None,
        symlink_target: entry.symlink_target,
    }
}

/// Reads an execution's NDJSON stream into events and an outcome, within
/// the run's output budget; a line longer than anything the budget could
/// keep is refused before it is read whole.
struct LineReader {
    buffer: Vec<u8>,
    outcome: RunOutcome,
    budget: OutputBudget,
    ended: bool,
    /// The longest line read.
    max_line: usize,
    /// A line passed `max_line`: the budget refuses it once the lines
    /// before it are taken.
    oversized: bool,
}

impl LineReader {
    fn new(output_bytes: usize) -> Self {
        Self {
            buffer: Vec::new(),
            outcome: RunOutcome::default(),
            budget: OutputBudget::new(output_bytes),
            ended: false,
            // ASCII-only JSON writes a byte of text as up to six.
            max_line: output_bytes
                .saturating_mul(6)
                .saturating_add(LINE_SLACK_BYTES),
            oversized: false,
        }
    }

    /// The whole lines `bytes` completes; none once a line was too long.
    fn push(&mut self, mut bytes: &[u8]) -> Vec<Line> {
        let mut lines = Vec::new();
        while !bytes.is_empty() && !self.oversized {
            let end = bytes.iter().position(|b| *b == b'\n');
            let piece = end.map_or(bytes, |end| &bytes[..end]);
            if self.buffer.len() + piece.len() > self.max_line {
                self.oversized = true;
                self.buffer = Vec::new();
                break;
            }
            self.buffer.extend_from_slice(piece);
            let Some(end) = end else { break };
            bytes = &bytes[end + 1..];
            let raw = std::mem::take(&mut self.buffer);
            let raw = raw.trim_ascii();
            if raw.is_empty() {
                continue;
            }
            match serde_json::from_slice::<Line>(raw) {
                Ok(line) => lines.push(line),
                Err(e) => tracing::debug!(%e, "an E2B stream line is not understood"),
            }
        }
        lines
    }

    /// Whether the budget refused something: the run must be stopped.
    fn over(&mut self) -> bool {
        if self.oversized {
            self.budget.refuse_oversized(self.max_line);
        }
        self.budget.overflowed()
    }

    /// Takes a line into the outcome; the event to pass on, if any.
    fn apply(&mut self, line: Line) -> Option<RunEvent> {
        let ts_ms = now_ms();
        let event = match line {
            Line::Stdout { text, .. } => RunEvent::Stdout { text, ts_ms },
            Line::Stderr { text, .. } => RunEvent::Stderr { text, ts_ms },
            Line::Result(result) => RunEvent::Result {
                data: result.to_bundle(),
                main: result.is_main_result,
                metadata: serde_json::Map::new(),
                display_id: None,
                ts_ms,
            },
            Line::Error {
                name,
                value,
                traceback,
            } => RunEvent::Error {
                error: ExecError {
                    name,
                    value,
                    traceback: traceback.lines().map(str::to_string).collect(),
                },
                ts_ms,
            },
            Line::EndOfExecution => {
                self.ended = true;
                return None;
            }
            Line::NumberOfExecutions { .. } | Line::Keepalive | Line::Unknown => return None,
        };
        self.budget.record(&mut self.outcome, event)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn streams_are_read_line_by_line_whatever_the_chunks() {
        let stream = concat!(
            "{\"type\": \"number_of_executions\", \"execution_count\": 1}\n",
            "{\"type\": \"stdout\", \"text\": \"hi\\n\", \"timestamp\": \"2026-11-21T23:10:00.123456+00:00\"}\n",
            "{\"type\": \"keepalive\"}\n",
            "{\"type\": \"result\", \"text\": \"2\", \"extra\": {}, \"is_main_result\": true}\n",
            "{\"type\": \"something_new\"}\n",
            "{\"type\": \"error\", \"name\": \"ZeroDivisionError\", \"value\": \"division by zero\", \"traceback\": \"a\\nb\"}\n",
            "{\"type\": \"end_of_execution\"}\n",
        );
        for chunk in [1, 7, 64, stream.len()] {
            let mut reader = LineReader::new(1024);
            let mut events = Vec::new();
            for piece in stream.as_bytes().chunks(chunk) {
                for line in reader.push(piece) {
                    events.extend(reader.apply(line));
                }
            }
            assert!(reader.ended);
            assert_eq!(reader.outcome.stdout, "hi\n");
            assert_eq!(reader.outcome.results.len(), 1);
            assert_eq!(reader.outcome.results[0]["text/plain"], "2");
            let error = reader.outcome.error.clone().unwrap();
            assert_eq!(error.name, "ZeroDivisionError");
            assert_eq!(error.traceback, ["a", "b"]);
            assert_eq!(events.len(), 2, "{events:?}");
            assert!(matches!(&events[1], RunEvent::Result { main: true, .. }));
        }
    }

    #[test]
    fn output_beyond_the_limit_is_cut() {
        let mut reader = LineReader::new(4);
        for line in reader.push(b"{\"type\": \"stdout\", \"text\": \"abcdef\"}\n") {
            reader.apply(line);
        }
        assert_eq!(reader.outcome.stdout, "abcd");
        assert!(reader.over());
        assert!(reader.budget.truncated());
    }

    fn result_line(bytes: usize) -> Vec<u8> {
        let line = format!(
            "{{\"type\": \"result\", \"html\": \"{}\", \"is_main_result\": false}}\n",
            "x".repeat(bytes)
        );
        line.into_bytes()
    }

    /// A fake E2B stream: results past the budget or past the count stop
    /// the run, and a line longer than any budget is refused before it is
    /// read whole, whatever the chunks.
    #[test]
    fn results_and_lines_beyond_the_budget_stop_the_run() {
        // 40 displays of 2 MB with a budget of 1 MiB: none is kept.
        let mut reader = LineReader::new(1024 * 1024);
        let mut events = Vec::new();
        for _ in 0..40 {
            for line in reader.push(&result_line(2_000_000)) {
                events.extend(reader.apply(line));
            }
            if reader.over() {
                break;
            }
        }
        assert!(events.is_empty());
        assert!(reader.outcome.results.is_empty());
        let error = reader.budget.limit_error().unwrap();
        assert_eq!(error.name, limit_error::OUTPUT);
        assert!(error.value.contains("a display of 2000"), "{error:?}");

        // Many small results: 64 are kept.
        let mut reader = LineReader::new(1024 * 1024);
        let many: Vec<u8> = (0..100).flat_map(|_| result_line(10)).collect();
        for line in reader.push(&many) {
            reader.apply(line);
        }
        assert!(reader.over());
        assert_eq!(reader.outcome.results.len(), crate::MAX_RESULTS);

        // One endless line, in chunks: refused once it passes the cap, and
        // never buffered beyond it.
        let mut reader = LineReader::new(1000);
        let chunk = vec![b'x'; 4096];
        let mut pushed = 0;
        while !reader.over() {
            assert!(reader.push(&chunk).is_empty());
            assert!(reader.buffer.len() <= reader.max_line);
            pushed += chunk.len();
            assert!(pushed <= reader.max_line + chunk.len(), "never refused");
        }
        assert!(
            matches!(
                reader.budget.dropped(),
                Some(crate::Dropped::Oversized { .. })
            ),
            "{:?}",
            reader.budget.dropped()
        );
        // The lines before a long one still count.
        let mut reader = LineReader::new(10);
        let mut stream = b"{\"type\": \"stdout\", \"text\": \"ok\"}\n".to_vec();
        stream.extend(std::iter::repeat_n(b'y', 70_000));
        let lines = reader.push(&stream);
        assert_eq!(lines.len(), 1);
        for line in lines {
            reader.apply(line);
        }
        assert!(reader.over());
        assert_eq!(reader.outcome.stdout, "ok");
    }

    #[test]
    fn settings_come_from_the_domain_or_the_urls() {
        let config = E2bConfig {
            api_key: "e2b_1".into(),
            ..E2bConfig::default()
        };
        let settings = E2bSettings::from_config(&config);
        assert_eq!(settings.api_key.expose_secret(), "e2b_1");
        assert!(!format!("{settings:?}").contains("e2b_1"));
        assert_eq!(settings.api_url, "https://api.e2b.app");
        assert_eq!(settings.sandbox_url, None);
        let config = E2bConfig {
            api_url: "http://127.0.0.1:3000/".into(),
            sandbox_url: "http://127.0.0.1:3000".into(),
            ..config
        };
        let settings = E2bSettings::from_config(&config);
        assert_eq!(settings.api_url, "http://127.0.0.1:3000");
        assert_eq!(
            settings.sandbox_url.as_deref(),
            Some("http://127.0.0.1:3000")
        );
    }
}
