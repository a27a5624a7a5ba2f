//! `/mcp`: runcell as an MCP server (streamable HTTP, the official Rust SDK),
//! so that MCP clients can use it as their sandbox. Behind the same bearer
//! credentials as `/v1`; each tool acts as the caller's API key through the
//! same [`CodeApi`](crate::code_api::CodeApi), limits included.

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::request::Parts;
use axum::http::{HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::handler::server::tool::Extension;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{CallToolResult, ContentBlock, ServerCapabilities, ServerConfig};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{ErrorData, ServerHandler, schemars, tool, tool_handler, tool_router};
use serde::Deserialize;

use super::ApiError;
use super::mcp_sessions::{McpSessions, Whose};
use super::v1::run::RunState;
use crate::auth::Auth;
use crate::auth::Caller;
use crate::code_api::CodeApiError;
use runcell_protocol::render::ansi;
use runcell_sandbox::{ExecError, Language, RunOutcome, RunRequest};

/// Characters of stdout or stderr a tool result carries, at most.
const MAX_TEXT_CHARS: usize = 100_000;

#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct ExecuteCode {
    /// `python`, `javascript`, `typescript`, `r`, `bash`, `c`… (the schema
    /// lists every language the server knows).
    language: Language,
    /// The program.
    code: String,
    /// Run in this session (from `create_session`), keeping variables and
    /// files between calls; without it the code runs in a fresh sandbox.
    session_id: Option<String>,
    /// Seconds of wall time (default: the server's).
    timeout: Option<f64>,
    /// Where a run without a session goes: `jail` (default) or `e2b` (when
    /// the server offers E2B). Text, not a `SandboxKind`: an unknown name
    /// is a refusal the model reads, like a backend not on offer.
    backend: Option<String>,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct CreateSession {
    /// The session's language (default `python`).
    language: Option<Language>,
    /// Where it runs: `jail` (default) or `e2b` (when the server offers
    /// E2B). Text, as for `execute_code`.
    backend: Option<String>,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct SessionRef {
    /// A session id from `create_session` or `list_sessions`.
    session_id: String,
}

#[derive(Clone)]
pub struct McpServer {
    state: RunState,
    tool_router: ToolRouter<Self>,
}

fn caller(parts: &Parts) -> Result<Caller, ErrorData> {
    parts
        .extensions
        .get::<Caller>()
        .cloned()
        .ok_or_else(|| ErrorData::internal_error("the request was not authenticated", None))
}

/// A refusal the client can act on is a tool error (the model sees it), not
/// a protocol error.
fn refused(err: CodeApiError) -> CallToolResult {
    let message = match ApiError::from(err) {
        ApiError::Internal(_) => "internal error".to_string(),
        other => other.to_string(),
    };
    CallToolResult::error(vec![ContentBlock::text(message)])
}

fn json_text(value: &impl serde::Serialize) -> ContentBlock {
    ContentBlock::text(serde_json::to_string_pretty(value).unwrap_or_default())
}

fn clipped(text: &str) -> String {
    match text.char_indices().nth(MAX_TEXT_CHARS) {
        Some((cut, _)) => format!("{}\n[… cut at {MAX_TEXT_CHARS} characters]", &text[..cut]),
        None => text.to_string(),
    }
}

/// A run's error as one text: its traceback without escape sequences (a
/// kernel's are coloured), headed by `name: value` unless the traceback
/// already ends with it, as a Python traceback does.
fn error_text(error: &ExecError) -> String {
    let head = format!("{}: {}", error.name, error.value);
    let traceback = ansi::strip(&error.traceback.join("\n"));
    let traceback = traceback.trim_end();
    if traceback.is_empty() {
        head
    } else if traceback.ends_with(head.trim_end()) {
        traceback.to_string()
    } else {
        format!("{head}\n{traceback}")
    }
}

/// `stderr` without the traceback at its end that the error carries too: a
/// one-shot run's error is read from its stderr.
fn stderr_before_error<'a>(stderr: &'a str, error: Option<&ExecError>) -> &'a str {
    let traceback = error.map(|e| e.traceback.join("\n")).unwrap_or_default();
    let traceback = traceback.trim_end();
    if traceback.is_empty() {
        return stderr;
    }
    stderr.trim_end().strip_suffix(traceback).unwrap_or(stderr)
}

/// What a run's outcome looks like to an MCP client: its output as text
/// (labelled), PNG results as images, the error once; `isError` when the
/// program failed.
fn outcome_result(outcome: &RunOutcome) -> CallToolResult {
    let mut content = Vec::new();
    if !outcome.stdout.is_empty() {
        content.push(ContentBlock::text(clipped(&outcome.stdout)));
    }
    let stderr = stderr_before_error(&outcome.stderr, outcome.error.as_ref());
    if !stderr.trim().is_empty() {
        content.push(ContentBlock::text(format!("[stderr]\n{}", clipped(stderr))));
    }
    for result in &outcome.results {
        if let Some(png) = result.get("image/png").and_then(|v| v.as_str()) {
            content.push(ContentBlock::image(png.trim().to_string(), "image/png"));
        } else if let Some(text) = result.get("text/plain").and_then(|v| v.as_str()) {
            content.push(ContentBlock::text(clipped(text)));
        }
    }
    if let Some(error) = &outcome.error {
        content.push(ContentBlock::text(error_text(error)));
    }
    if content.is_empty() {
        content.push(ContentBlock::text("(no output)"));
    }
    if outcome.error.is_some() {
        CallToolResult::error(content)
    } else {
        CallToolResult::success(content)
    }
}

#[tool_router]
impl McpServer {
    pub fn new(state: RunState) -> Self {
        Self {
            state,
            tool_router: Self::tool_router(),
        }
    }

    #[tool(
        description = "Run a program in runcell's sandbox (no network) and return its output: stdout, stderr, results (PNG images from matplotlib and the like) and any error with its traceback. Pass a session_id from create_session to keep variables and files between calls."
    )]
    async fn execute_code(
        &self,
        Extension(parts): Extension<Parts>,
        Parameters(args): Parameters<ExecuteCode>,
    ) -> Result<CallToolResult, ErrorData> {
        let caller = caller(&parts)?;
        let limits = match self.state.config.sandbox.limits_with_timeout(args.timeout) {
            Ok(limits) => limits,
            Err(message) => return Ok(CallToolResult::error(vec![ContentBlock::text(message)])),
        };
        let request = RunRequest {
            code: args.code,
            language: args.language,
            limits,
            env: Vec::new(),
            cwd: None,
        };
        let api = &self.state.code_api;
        let admitted = match api
            .backends()
            .named(args.backend.as_deref())
            .map_err(CodeApiError::from)
            .and_then(|backend| api.admit(&caller, request, args.session_id, backend))
        {
            Ok(admitted) => admitted,
            Err(err) => return Ok(refused(err)),
        };
        match api
            .run(admitted, None, self.state.shutdown.child_token())
            .await
        {
            Ok(outcome) => Ok(outcome_result(&outcome)),
            Err(err) => Ok(refused(err)),
        }
    }

    #[tool(
        description = "Open a stateful sandbox session (variables and files persist between execute_code calls that name it). Returns its session_id."
    )]
    async fn create_session(
        &self,
        Extension(parts): Extension<Parts>,
        Parameters(args): Parameters<CreateSession>,
    ) -> Result<CallToolResult, ErrorData> {
        let caller = caller(&parts)?;
        let language = args.language.unwrap_or(Language::Python);
        let api = &self.state.code_api;
        let backend = match api.backends().named(args.backend.as_deref()) {
            Ok(backend) => backend,
            Err(err) => return Ok(refused(err.into())),
        };
        match api.create_session(&caller, language, backend).await {
            Ok(info) => Ok(CallToolResult::success(vec![json_text(&info)])),
            Err(err) => Ok(refused(err)),
        }
    }

    #[tool(description = "List your open sandbox sessions.")]
    async fn list_sessions(
        &self,
        Extension(parts): Extension<Parts>,
    ) -> Result<CallToolResult, ErrorData> {
        let caller = caller(&parts)?;
        let sessions = self.state.code_api.sessions(&caller);
        Ok(CallToolResult::success(vec![json_text(
            &serde_json::json!({ "sessions": sessions }),
        )]))
    }

    #[tool(description = "Close a sandbox session, stopping whatever runs in it.")]
    async fn close_session(
        &self,
        Extension(parts): Extension<Parts>,
        Parameters(args): Parameters<SessionRef>,
    ) -> Result<CallToolResult, ErrorData> {
        let caller = caller(&parts)?;
        match self
            .state
            .code_api
            .delete_session(&caller, &args.session_id)
            .await
        {
            Ok(()) => Ok(CallToolResult::success(vec![ContentBlock::text(format!(
                "closed {}",
                args.session_id
            ))])),
            Err(err) => Ok(refused(err)),
        }
    }
}

#[tool_handler(router = self.tool_router)]
impl ServerHandler for McpServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build()).with_instructions(
            "runcell runs code in sandboxes without network access. Use execute_code; open a session with create_session to keep state between calls.",
        )
    }
}

const SESSION_HEADER: &str = "mcp-session-id";

/// A JSON-RPC error for a request `/mcp` refuses before any MCP session
/// sees it, with its HTTP status.
fn json_rpc_refusal(status: StatusCode, message: &str) -> Response {
    let body = serde_json::json!({
        "jsonrpc": "2.0",
        "id": null,
        "error": { "code": -32000, "message": message },
    });
    let mut response = (status, axum::Json(body)).into_response();
    response
        .headers_mut()
        .insert(header::RETRY_AFTER, HeaderValue::from(MCP_RETRY_SECS));
    response
}

/// How long a key refused another MCP session is told to wait.
const MCP_RETRY_SECS: u64 = 60;

/// Authenticates requests to `/mcp` (every other API route's handler does
/// so itself by taking a `Caller`), keeps each MCP session to its key, and
/// holds each key to its number of sessions.
pub async fn authenticate(
    State((auth, sessions)): State<(Arc<Auth>, Arc<McpSessions>)>,
    request: Request,
    next: Next,
) -> Response {
    let path = request.uri().path();
    if path != "/mcp" && !path.starts_with("/mcp/") {
        return next.run(request).await;
    }
    let (mut parts, body) = request.into_parts();
    let caller = match super::v1::authenticate(&auth, &parts).await {
        Ok(caller) => caller,
        Err(err) => return err.into_response(),
    };
    let session = parts
        .headers
        .get(SESSION_HEADER)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let key = caller.key_id.clone();
    // A request without a session may open one (an `initialize`).
    let opening = match &session {
        Some(id) => {
            if sessions.used(id, &key) == Whose::Other {
                return ApiError::NotFound("no such MCP session".into()).into_response();
            }
            None
        }
        None if parts.method == Method::POST => match sessions.begin_open(&key, &caller.budget()) {
            Some(opening) => Some(opening),
            None => {
                return json_rpc_refusal(
                    StatusCode::TOO_MANY_REQUESTS,
                    &format!(
                        "this key (with the other keys of its person, if it is a person's) holds {} MCP sessions, the most it may; close one (DELETE /mcp with its Mcp-Session-Id) or wait for an idle one to be closed",
                        sessions.per_key()
                    ),
                );
            }
        },
        None => None,
    };
    let closing = parts.method == Method::DELETE;
    parts.extensions.insert(caller);
    let mut response = next.run(Request::from_parts(parts, body)).await;
    if closing && response.status() == StatusCode::ACCEPTED {
        // rmcp answers a closed session 202; the MCP SDKs take 200 or 204
        // (the Python SDK logs "Session termination failed: 202").
        *response.status_mut() = StatusCode::OK;
    }
    match (session, opening) {
        (Some(id), _) if closing && response.status().is_success() => sessions.forget(&id),
        (Some(id), _) => {
            sessions.used(&id, &key);
        }
        (None, Some(opening)) => {
            if let Some(id) = response
                .headers()
                .get(SESSION_HEADER)
                .and_then(|v| v.to_str().ok())
            {
                sessions.opened(id, opening);
            }
        }
        (None, None) => {}
    }
    response
}

/// The `/mcp` service. Host checks are off: every request must carry a
/// bearer credential, which a rebinding page cannot have.
pub fn service(
    state: RunState,
    sessions: &McpSessions,
) -> StreamableHttpService<McpServer, LocalSessionManager> {
    let shutdown = state.shutdown.child_token();
    StreamableHttpService::new(
        move || Ok(McpServer::new(state.clone())),
        sessions.manager(),
        StreamableHttpServerConfig::default()
            .disable_allowed_hosts()
            .with_cancellation_token(shutdown),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn error(name: &str, value: &str, traceback: &[&str]) -> ExecError {
        ExecError {
            name: name.into(),
            value: value.into(),
            traceback: traceback.iter().map(|line| line.to_string()).collect(),
        }
    }

    /// `outcome_result(stdout, stderr, error)`: the texts the client gets.
    fn check(stdout: &str, stderr: &str, error: ExecError, expect: &[&str]) {
        let result = outcome_result(&RunOutcome {
            stdout: stdout.into(),
            stderr: stderr.into(),
            error: Some(error),
            ..RunOutcome::default()
        });
        let texts: Vec<&str> = result
            .content
            .iter()
            .filter_map(|block| block.as_text().map(|t| t.text.as_str()))
            .collect();
        assert_eq!(texts, expect);
        assert_eq!(result.is_error, Some(true));
    }

    const PY_TRACEBACK: [&str; 4] = [
        "Traceback (most recent call last):",
        "  File \"/home/user/main.py\", line 3, in <module>",
        "    undefined_name",
        "NameError: name 'undefined_name' is not defined",
    ];

    #[test]
    fn a_one_shot_error_read_from_stderr_is_carried_once() {
        let stderr = format!("{}\n", PY_TRACEBACK.join("\n"));
        let name_error = || {
            error(
                "NameError",
                "name 'undefined_name' is not defined",
                &PY_TRACEBACK,
            )
        };
        check(
            "hi\n",
            &stderr,
            name_error(),
            &["hi\n", &PY_TRACEBACK.join("\n")],
        );
        // What the program wrote to stderr before failing stays.
        check(
            "",
            &format!("warning: slow\n{stderr}"),
            name_error(),
            &["[stderr]\nwarning: slow\n", &PY_TRACEBACK.join("\n")],
        );
    }

    #[test]
    fn a_kernels_coloured_traceback_is_plain_and_named_once() {
        let traceback = [
            "\u{1b}[31m---------------------------------------------------------------------------\u{1b}[39m",
            "\u{1b}[31mNameError\u{1b}[39m                                 Traceback (most recent call last)",
            "\u{1b}[32m----> \u{1b}[39m\u{1b}[32m2\u{1b}[39m undefined_name\n",
            "\u{1b}[31mNameError\u{1b}[39m: name 'undefined_name' is not defined",
        ];
        check(
            "hi\n",
            "",
            error(
                "NameError",
                "name 'undefined_name' is not defined",
                &traceback,
            ),
            &[
                "hi\n",
                "---------------------------------------------------------------------------\n\
                 NameError                                 Traceback (most recent call last)\n\
                 ----> 2 undefined_name\n\n\
                 NameError: name 'undefined_name' is not defined",
            ],
        );
    }

    #[test]
    fn an_error_whose_traceback_does_not_name_it_is_headed_by_its_name() {
        let compiler = [
            "main.c: In function ‘main’:",
            "main.c:1:20: error: ‘x’ undeclared (first use in this function)",
        ];
        check(
            "",
            &format!("{}\n", compiler.join("\n")),
            error("CompileError", "the C program did not compile", &compiler),
            &["CompileError: the C program did not compile\n\
               main.c: In function ‘main’:\n\
               main.c:1:20: error: ‘x’ undeclared (first use in this function)"],
        );
        check(
            "",
            "",
            error("Timeout", "the run was stopped after 2 s", &[]),
            &["Timeout: the run was stopped after 2 s"],
        );
    }
}
