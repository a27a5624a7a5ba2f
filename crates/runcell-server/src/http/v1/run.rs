//! `POST /v1/code_interpreter/run`: one program, run to its end in a fresh
//! throw-away jail or in one of the caller's sessions. JSON by default; one
//! JSON event a line with `Accept: application/x-ndjson`, ending with a
//! `summary` line.

use std::sync::Arc;

use axum::Json;
use axum::body::Bytes;
use axum::extract::{FromRef, State};
use axum::http::{HeaderMap, HeaderValue};
use axum::response::{IntoResponse, Response};
use futures::StreamExt;
use serde::Deserialize;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use utoipa::ToSchema;

use crate::auth::Caller;
use crate::auth::limits::RateState;
use crate::code_api::{Admitted, CodeApi};
use crate::config::Config;
use crate::http::error::ErrorBody;
use crate::http::extract::ApiJson;
use crate::http::state::AppState;
use crate::http::{ApiError, ndjson};
use runcell_sandbox::asked::{Limit, lowered};
use runcell_sandbox::{Language, RunEvent, RunOutcome, RunRequest, SandboxKind};

/// Bodies above this are refused: the largest program plus JSON escaping.
pub const MAX_RUN_BODY: usize = 8 * 1024 * 1024;

/// A program to run.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RunBody {
    /// The program's source (at most 1 MiB, no NUL bytes).
    #[schema(example = "print(sum(range(10)))")]
    code: String,
    language: Language,
    /// Seconds of wall time, more than 0 and at most the server's
    /// `max_timeout_secs` (default: its `timeout_secs`).
    timeout: Option<f64>,
    /// Run in this session of yours (state kept between runs); without it
    /// the program runs in a fresh sandbox that is thrown away after.
    session_id: Option<String>,
    /// Where a run without a session goes: `jail` (the default, the local
    /// sandbox) or `e2b` (E2B's cloud, when the server has an E2B key).
    #[serde(default, deserialize_with = "SandboxKind::deserialize_pick")]
    backend: Option<SandboxKind>,
    /// Lower (never higher) limits than the server's.
    #[serde(default)]
    limits: RequestLimits,
}

/// Limits a request may ask for, each more than 0 and at most the server's.
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RequestLimits {
    memory_mib: Option<u64>,
    pids: Option<u32>,
    cpu_millis: Option<u32>,
    output_kib: Option<u64>,
    file_mib: Option<u64>,
    disk_mib: Option<u64>,
}

impl RequestLimits {
    /// Each limit the request may lower, with what it asked for.
    fn asked(&self) -> [(Limit, Option<u64>); 6] {
        [
            (Limit::MemoryMib, self.memory_mib),
            (Limit::Pids, self.pids.map(u64::from)),
            (Limit::CpuMillis, self.cpu_millis.map(u64::from)),
            (Limit::OutputKib, self.output_kib),
            (Limit::FileMib, self.file_mib),
            (Limit::DiskMib, self.disk_mib),
        ]
    }
}

/// Run a program.
///
/// Runs to its end and answers with the outcome; with
/// `Accept: application/x-ndjson` the events stream one JSON object a line
/// as they happen (`stdout`, `stderr`, `result`, `error`), ending with a
/// `summary` line (the outcome) or a `failed` line. A program's own errors
/// and limits (`Timeout`, `MemoryLimit`...) are in the outcome's `error`,
/// with status 200.
#[utoipa::path(
    post,
    path = "/v1/code_interpreter/run",
    tag = "code_interpreter",
    request_body = RunBody,
    security(("bearer" = [])),
    responses(
        (status = 200, description = "The run's outcome (or, with `Accept: application/x-ndjson`, its events)",
            body = RunOutcome,
            headers(
                ("x-ratelimit-limit" = u32, description = "Runs this key may start at once after a quiet spell"),
                ("x-ratelimit-remaining" = u32, description = "Runs this key may start right now"),
            )),
        (status = 400, description = "Not JSON, not this schema, or an invalid program or limit", body = ErrorBody),
        (status = 401, description = "Missing, invalid, expired or revoked credentials", body = ErrorBody),
        (status = 404, description = "No such session of this key", body = ErrorBody),
        (status = 413, description = "The body is too large", body = ErrorBody),
        (status = 429, description = "A per-key limit: see `Retry-After`", body = ErrorBody),
        (status = 503, description = "The sandbox cannot run programs now", body = ErrorBody),
    )
)]
pub async fn run(
    State(state): State<RunState>,
    caller: Caller,
    headers: HeaderMap,
    ApiJson(body): ApiJson<RunBody>,
) -> Result<Response, ApiError> {
    let limits = lowered(&state.config.sandbox, body.timeout, &body.limits.asked())
        .map_err(|e| ApiError::BadRequest(e.to_string()))?;
    let request = RunRequest {
        code: body.code,
        language: body.language,
        limits,
        env: Vec::new(),
        cwd: None,
    };
    let admitted = state
        .code_api
        .admit(&caller, request, body.session_id, body.backend)?;
    let rate = admitted.permit.rate;

    let mut response = if ndjson::wanted(&headers) {
        stream(&state, admitted)
    } else {
        let outcome = state
            .code_api
            .run(admitted, None, state.shutdown.child_token())
            .await?;
        Json(outcome).into_response()
    };
    rate_headers(&mut response, rate);
    Ok(response)
}

/// What a run needs of the server.
#[derive(Clone)]
pub struct RunState {
    pub code_api: Arc<CodeApi>,
    pub config: Arc<Config>,
    pub shutdown: CancellationToken,
}

impl FromRef<AppState> for RunState {
    fn from_ref(state: &AppState) -> Self {
        Self {
            code_api: Arc::clone(&state.code_api),
            config: Arc::clone(&state.config),
            shutdown: state.shutdown.clone(),
        }
    }
}

fn rate_headers(response: &mut Response, rate: RateState) {
    let headers = response.headers_mut();
    headers.insert("x-ratelimit-limit", HeaderValue::from(rate.limit));
    headers.insert("x-ratelimit-remaining", HeaderValue::from(rate.remaining));
}

/// Streams events as they happen. A client that goes away cancels the run.
fn stream(state: &RunState, admitted: Admitted) -> Response {
    let (events, receiver) = mpsc::channel::<RunEvent>(64);
    let cancel = state.shutdown.child_token();
    let guard = cancel.clone().drop_guard();
    let api = Arc::clone(&state.code_api);
    let finished = tokio::spawn(async move { api.run(admitted, Some(events), cancel).await });

    let lines = tokio_stream::wrappers::ReceiverStream::new(receiver)
        .map(|event| line(&event))
        .chain(futures::stream::once(async move {
            let summary = match finished.await {
                Ok(Ok(outcome)) => summary_line(&outcome),
                Ok(Err(err)) => error_line(&err.into()),
                Err(join) => {
                    tracing::error!(%join, "the run task failed");
                    error_line(&ApiError::Internal("the run task failed".into()))
                }
            };
            drop(guard);
            summary
        }));
    ndjson::response(lines)
}

fn line(value: &impl serde::Serialize) -> Bytes {
    ndjson::line(
        value,
        r#"{"type":"error","error":{"name":"Internal","value":"unencodable event","traceback":[]}}"#,
    )
}

fn summary_line(outcome: &RunOutcome) -> Bytes {
    let mut value = serde_json::to_value(outcome).unwrap_or_default();
    if let Some(object) = value.as_object_mut() {
        object.insert("type".into(), "summary".into());
    }
    line(&value)
}

fn error_line(err: &ApiError) -> Bytes {
    line(&serde_json::json!({ "type": "failed", "error": err.body() }))
}
