//! `POST /v1/code_interpreter/run`: one program, run to its end in a fresh
//! throw-away jail. JSON by default; one JSON event a line with
//! `Accept: application/x-ndjson`, ending with a `summary` line.

use std::convert::Infallible;
use std::time::Duration;

use axum::Json;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::extract::rejection::JsonRejection;
use axum::http::{HeaderMap, HeaderValue, header};
use axum::response::{IntoResponse, Response};
use futures::StreamExt;
use serde::Deserialize;
use tokio::sync::mpsc;

use super::ApiError;
use crate::sandbox::sessions::SessionError;
use crate::sandbox::{Language, Limits, RunEvent, RunOutcome, RunRequest, SandboxError};
use crate::state::AppState;

/// Bodies above this are refused: the largest program plus JSON escaping.
pub const MAX_RUN_BODY: usize = 8 * 1024 * 1024;
const NDJSON: &str = "application/x-ndjson";

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunBody {
    code: String,
    language: Language,
    /// Seconds of wall time, at most the server's `max_timeout_secs`.
    timeout: Option<f64>,
    session_id: Option<String>,
    /// Lower (never higher) limits than the server's.
    #[serde(default)]
    limits: RequestLimits,
}

/// Limits a request may ask for, each at most the server's maximum.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RequestLimits {
    memory_mib: Option<u64>,
    pids: Option<u32>,
    cpu_millis: Option<u32>,
    output_kib: Option<u64>,
    file_mib: Option<u64>,
    disk_mib: Option<u64>,
}

/// The limits for one run: the server's defaults, lowered where the request
/// asks; asking for more than the server allows is an error, not a clamp.
fn limits_for(body: &RunBody, server: &crate::config::SandboxConfig) -> Result<Limits, ApiError> {
    let max = server.max_limits();
    let mut limits = server.default_limits();
    if let Some(timeout) = body.timeout {
        if !(timeout > 0.0 && timeout <= max.wall.as_secs_f64()) {
            return Err(ApiError::BadRequest(format!(
                "timeout must be more than 0 and at most {} seconds",
                max.wall.as_secs()
            )));
        }
        limits.wall = Duration::from_secs_f64(timeout);
    }
    let asked = &body.limits;
    let checks: [(&str, Option<u64>, u64); 6] = [
        ("memory_mib", asked.memory_mib, server.memory_mib),
        ("pids", asked.pids.map(u64::from), u64::from(server.pids)),
        (
            "cpu_millis",
            asked.cpu_millis.map(u64::from),
            u64::from(server.cpu_millis),
        ),
        ("output_kib", asked.output_kib, server.output_kib),
        ("file_mib", asked.file_mib, server.file_mib),
        ("disk_mib", asked.disk_mib, server.disk_mib),
    ];
    for (name, value, most) in checks {
        if let Some(value) = value
            && (value == 0 || value > most)
        {
            return Err(ApiError::BadRequest(format!(
                "limits.{name} must be more than 0 and at most {most}"
            )));
        }
    }
    let mib = 1024 * 1024;
    if let Some(v) = asked.memory_mib {
        limits.memory_bytes = v * mib;
    }
    if let Some(v) = asked.pids {
        limits.pids = v;
    }
    if let Some(v) = asked.cpu_millis {
        limits.cpu_millis = v;
    }
    if let Some(v) = asked.output_kib {
        limits.output_bytes = usize::try_from(v * 1024).unwrap_or(usize::MAX);
    }
    if let Some(v) = asked.file_mib {
        limits.file_bytes = v * mib;
    }
    if let Some(v) = asked.disk_mib {
        limits.disk_bytes = v * mib;
    }
    Ok(limits)
}

pub async fn run(
    State(state): State<AppState>,
    headers: HeaderMap,
    body: Result<Json<RunBody>, JsonRejection>,
) -> Result<Response, ApiError> {
    let Json(body) = body?;
    if let Some(id) = &body.session_id
        && state.sandbox_sessions.get(id).is_none()
    {
        return Err(ApiError::NotFound(format!("no sandbox session {id}")));
    }
    let limits = limits_for(&body, &state.config.sandbox)?;
    let target = body.session_id;
    let request = RunRequest {
        code: body.code,
        language: body.language,
        limits,
    };
    crate::sandbox::validate_code(&request.code).map_err(sandbox_error)?;

    let wants_ndjson = headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.contains(NDJSON));
    if !wants_ndjson {
        let outcome = execute(
            &state,
            target.as_deref(),
            request,
            None,
            state.shutdown.child_token(),
        )
        .await?;
        return Ok(Json(outcome).into_response());
    }
    Ok(stream(&state, target, request))
}

/// Runs in the named session, or one-shot when there is none.
async fn execute(
    state: &AppState,
    session: Option<&str>,
    request: RunRequest,
    events: Option<mpsc::Sender<RunEvent>>,
    cancel: tokio_util::sync::CancellationToken,
) -> Result<RunOutcome, ApiError> {
    match session {
        None => state
            .sandbox
            .run(request, events, cancel)
            .await
            .map_err(sandbox_error),
        Some(id) => state
            .sandbox_sessions
            .run(id, &request, events.as_ref(), &cancel)
            .await
            .map_err(session_error),
    }
}

/// Streams events as they happen. A client that goes away cancels the run.
fn stream(state: &AppState, session: Option<String>, request: RunRequest) -> Response {
    let (events, receiver) = mpsc::channel::<RunEvent>(64);
    let cancel = state.shutdown.child_token();
    let guard = cancel.clone().drop_guard();
    let state = state.clone();
    let finished = tokio::spawn(async move {
        execute(&state, session.as_deref(), request, Some(events), cancel).await
    });

    let lines = tokio_stream_from(receiver)
        .map(|event| line(&event))
        .chain(futures::stream::once(async move {
            let summary = match finished.await {
                Ok(Ok(outcome)) => summary_line(&outcome),
                Ok(Err(err)) => error_line(&err),
                Err(join) => {
                    tracing::error!(%join, "the run task failed");
                    error_line(&ApiError::Internal("the run task failed".into()))
                }
            };
            drop(guard);
            summary
        }))
        .map(Ok::<Bytes, Infallible>);
    let mut response = Response::new(Body::from_stream(lines));
    response
        .headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(NDJSON));
    response
}

fn tokio_stream_from<T: Send + 'static>(
    mut receiver: mpsc::Receiver<T>,
) -> impl futures::Stream<Item = T> {
    futures::stream::poll_fn(move |cx| receiver.poll_recv(cx))
}

fn line(value: &impl serde::Serialize) -> Bytes {
    let mut text = serde_json::to_string(value).unwrap_or_else(|e| {
        tracing::error!(%e, "cannot encode an event");
        r#"{"type":"error","error":{"name":"Internal","value":"unencodable event","traceback":[]}}"#
            .into()
    });
    text.push('\n');
    Bytes::from(text)
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

fn session_error(err: SessionError) -> ApiError {
    match err {
        SessionError::NotFound(id) => ApiError::NotFound(format!("no sandbox session {id}")),
        SessionError::TooMany(_) => ApiError::Unavailable(err.to_string()),
        SessionError::Sandbox(err) => sandbox_error(err),
    }
}

pub(super) fn sandbox_error(err: SandboxError) -> ApiError {
    match err {
        SandboxError::InvalidInput(message) => ApiError::BadRequest(message),
        SandboxError::Unavailable(_) => ApiError::Unavailable(err.to_string()),
        SandboxError::Internal(message) => ApiError::Internal(message),
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NewSession {
    #[serde(default = "default_language")]
    language: Language,
}

fn default_language() -> Language {
    Language::Python
}

/// `POST /v1/code_interpreter/sessions`
pub async fn create_session(
    State(state): State<AppState>,
    body: Result<Json<NewSession>, JsonRejection>,
) -> Result<Response, ApiError> {
    let Json(body) = body?;
    let info = state
        .sandbox_sessions
        .create(body.language)
        .await
        .map_err(session_error)?;
    Ok((axum::http::StatusCode::CREATED, Json(info)).into_response())
}

/// `GET /v1/code_interpreter/sessions`
pub async fn list_sessions(State(state): State<AppState>) -> Response {
    Json(serde_json::json!({ "sessions": state.sandbox_sessions.list() })).into_response()
}

/// `DELETE /v1/code_interpreter/sessions/{id}`: stops everything in it.
pub async fn delete_session(
    State(state): State<AppState>,
    axum::extract::Path(id): axum::extract::Path<String>,
) -> Result<axum::http::StatusCode, ApiError> {
    state
        .sandbox_sessions
        .delete_public(&id)
        .await
        .map_err(session_error)?;
    Ok(axum::http::StatusCode::NO_CONTENT)
}
