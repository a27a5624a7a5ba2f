//! `/api/sessions`: the notebook without a browser. A turn asked here runs
//! through the same [`TurnRunner`](crate::agent::TurnRunner) as one asked
//! from the page, and its events stream back as NDJSON: one WebSocket
//! frame (`ServerMessage`) a line, from `turn_started` to `turn_finished`.
//! A page open on the session sees the same turn live.

use std::convert::Infallible;
use std::sync::Arc;

use app::protocol::{CellId, EventBody, ServerMessage, SessionEvent, TurnId};
use axum::Json;
use axum::body::{Body, Bytes};
use axum::extract::rejection::{JsonRejection, QueryRejection};
use axum::extract::{Path, Query, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use futures::StreamExt;
use serde::Deserialize;
use tokio::sync::broadcast::error::RecvError;
use tokio::sync::{broadcast, mpsc};

use super::ApiError;
use super::owner::Owner;
use crate::agent::{TurnRefusal, TurnRequest, parse_language};
use crate::session::{SessionChannel, SessionId};
use crate::state::AppState;

const NDJSON: &str = "application/x-ndjson";

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AskBody {
    text: String,
    model: Option<String>,
    /// The sandbox backend (`jail`, `e2b`) from now on.
    backend: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunBody {
    code: String,
    language: String,
    source: Option<CellId>,
    backend: Option<String>,
}

#[derive(Debug, Deserialize)]
pub struct After {
    #[serde(default)]
    after: u64,
}

/// `POST /api/sessions`: a new, empty session of the caller's.
pub async fn create(
    State(state): State<AppState>,
    Owner(owner): Owner,
) -> Result<Response, ApiError> {
    if state.shutdown.is_cancelled() {
        return Err(ApiError::Unavailable("the server is shutting down".into()));
    }
    let id = state.sessions.create(owner).await?.id();
    let url = format!("/sessions/{id}");
    Ok((
        StatusCode::CREATED,
        [(header::LOCATION, url.clone())],
        Json(serde_json::json!({ "id": id.to_string(), "url": url })),
    )
        .into_response())
}

/// `POST /api/sessions/{id}/ask {"text", "model"?}`: a question; its turn
/// streams back.
pub async fn ask(
    State(state): State<AppState>,
    owner: Owner,
    Path(id): Path<String>,
    body: Result<Json<AskBody>, JsonRejection>,
) -> Result<Response, ApiError> {
    let channel = owned(&state, owner, &id).await?;
    let Json(body) = body?;
    state
        .runner
        .choose_backend(&channel, body.backend.as_deref())
        .map_err(|r| refusal_error(&r))?;
    start_streaming(
        &state,
        channel,
        TurnRequest::Ask {
            text: body.text,
            model: body.model,
        },
    )
}

/// `POST /api/sessions/{id}/run {"code", "language", "source"?}`: code run
/// as written, no model; its turn streams back.
pub async fn run(
    State(state): State<AppState>,
    owner: Owner,
    Path(id): Path<String>,
    body: Result<Json<RunBody>, JsonRejection>,
) -> Result<Response, ApiError> {
    let channel = owned(&state, owner, &id).await?;
    let Json(body) = body?;
    let language = parse_language(&body.language).map_err(|r| refusal_error(&r))?;
    state
        .runner
        .choose_backend(&channel, body.backend.as_deref())
        .map_err(|r| refusal_error(&r))?;
    start_streaming(
        &state,
        channel,
        TurnRequest::Run {
            code: body.code,
            language,
            source: body.source,
        },
    )
}

/// `POST /api/sessions/{id}/stop`: stops the running turn and those waiting.
pub async fn stop(
    State(state): State<AppState>,
    owner: Owner,
    Path(id): Path<String>,
) -> Result<StatusCode, ApiError> {
    let channel = owned(&state, owner, &id).await?;
    state.runner.stop(&channel);
    Ok(StatusCode::NO_CONTENT)
}

/// `GET /api/sessions/{id}/events?after=N`: the history after `N`, as NDJSON.
pub async fn events(
    State(state): State<AppState>,
    owner: Owner,
    Path(id): Path<String>,
    query: Result<Query<After>, QueryRejection>,
) -> Result<Response, ApiError> {
    let channel = owned(&state, owner, &id).await?;
    let Query(After { after }) = query.map_err(|e| ApiError::BadRequest(e.body_text()))?;
    let mut text = Vec::new();
    for event in channel.events_after(after) {
        text.extend_from_slice(&line(&ServerMessage::Event(event)));
    }
    Ok(ndjson(Body::from(text)))
}

/// `POST /api/sessions/{id}/rerun`: a fresh kernel runs the session's code
/// cells again; the turn streams back.
pub async fn rerun(
    State(state): State<AppState>,
    owner: Owner,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    let channel = owned(&state, owner, &id).await?;
    start_streaming(&state, channel, TurnRequest::RerunAll)
}

/// The caller's session `id`. Someone else's is "not found", exactly like
/// one that does not exist, so ids cannot be probed.
pub async fn owned(
    state: &AppState,
    Owner(owner): Owner,
    id: &str,
) -> Result<Arc<SessionChannel>, ApiError> {
    let not_found = || {
        ApiError::NotFound(format!(
            "no session `{}`",
            id.chars().take(40).collect::<String>()
        ))
    };
    let id: SessionId = id.parse().map_err(|_| not_found())?;
    state
        .sessions
        .open_owned(id, owner)
        .await?
        .ok_or_else(not_found)
}

/// Starts the turn and answers with its events as they happen. The turn
/// runs on if the client goes away (`/stop` stops it).
fn start_streaming(
    state: &AppState,
    channel: Arc<SessionChannel>,
    request: TurnRequest,
) -> Result<Response, ApiError> {
    // Listen before starting, so that nothing of the turn is missed.
    let (_, listening_from, live) = channel.subscribe(u64::MAX);
    let turn = state
        .runner
        .start(&channel, request)
        .map_err(|r| refusal_error(&r))?;
    let (lines, receiver) = mpsc::channel::<Bytes>(64);
    let shutdown = state.shutdown.clone();
    tokio::spawn(async move {
        tokio::select! {
            () = forward_turn(&channel, turn, listening_from, live, &lines) => {}
            () = shutdown.cancelled() => {}
        }
    });
    let body = tokio_stream::wrappers::ReceiverStream::new(receiver).map(Ok::<Bytes, Infallible>);
    Ok(ndjson(Body::from_stream(body)))
}

/// Sends the events of `turn`, in order and without gaps, until it finishes
/// or the client goes away.
async fn forward_turn(
    channel: &SessionChannel,
    turn: TurnId,
    mut sent: u64,
    mut live: broadcast::Receiver<SessionEvent>,
    lines: &mpsc::Sender<Bytes>,
) {
    let mut started = false;
    loop {
        let events = match live.recv().await {
            Ok(event) => vec![event],
            // Fell behind the live buffer: catch up from the history.
            Err(RecvError::Lagged(_)) => channel.events_after(sent),
            Err(RecvError::Closed) => return,
        };
        for event in events {
            if event.seq <= sent {
                continue;
            }
            sent = event.seq;
            let (first, last) = match &event.event {
                EventBody::TurnStarted { turn: t, .. } => (*t == turn, false),
                EventBody::TurnFinished { turn: t, .. } => (false, *t == turn),
                _ => (false, false),
            };
            started |= first;
            if !started {
                // An earlier turn of the session, still running.
                continue;
            }
            if lines
                .send(line(&ServerMessage::Event(event)))
                .await
                .is_err()
                || last
            {
                return;
            }
        }
    }
}

fn refusal_error(refusal: &TurnRefusal) -> ApiError {
    let message = refusal.to_string();
    match refusal {
        TurnRefusal::Empty | TurnRefusal::InvalidCode(_) | TurnRefusal::Backend(_) => {
            ApiError::BadRequest(message)
        }
        TurnRefusal::TooLong => ApiError::TooLarge(message),
        TurnRefusal::Busy => ApiError::Busy(message),
        TurnRefusal::ShuttingDown => ApiError::Unavailable(message),
        TurnRefusal::Deleted => ApiError::NotFound(message),
    }
}

fn ndjson(body: Body) -> Response {
    let mut response = Response::new(body);
    response
        .headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(NDJSON));
    response
        .headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}

fn line(message: &ServerMessage) -> Bytes {
    let mut text = serde_json::to_string(message).unwrap_or_else(|e| {
        tracing::error!(%e, "cannot encode an event");
        r#"{"type":"error","code":"unavailable","message":"unencodable event"}"#.into()
    });
    text.push('\n');
    Bytes::from(text)
}
