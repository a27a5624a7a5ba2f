//! `/api/sessions/{id}/…`: the notebook without a browser. A turn asked
//! here runs through the same notebook service as one asked from the page,
//! and its events stream back as NDJSON: one WebSocket frame
//! (`ServerMessage`) a line, from `turn_started` to `turn_finished`. A page
//! open on the session sees the same turn live.

use std::sync::Arc;

use app::protocol::{CellId, SandboxKind, ServerMessage, TurnId};
use axum::body::Bytes;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::Response;
use futures::StreamExt;
use serde::Deserialize;

use super::extract::{ApiJson, ApiQuery, OwnedSession};
use super::{ApiError, ndjson};
use runcell_agent::notebook::{AskedTurn, Notebooks};

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AskBody {
    text: String,
    model: Option<String>,
    /// The sandbox backend from now on (blank: the one it has).
    #[serde(default, deserialize_with = "SandboxKind::deserialize_pick")]
    backend: Option<SandboxKind>,
    /// An edited question or a regenerated answer: the turn it stands
    /// beside (kept as another branch).
    alternative_to: Option<TurnId>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunBody {
    code: String,
    /// Read in any case; an unknown one is refused by the notebook.
    language: String,
    source: Option<CellId>,
    #[serde(default, deserialize_with = "SandboxKind::deserialize_pick")]
    backend: Option<SandboxKind>,
}

#[derive(Debug, Deserialize)]
pub struct After {
    #[serde(default)]
    after: u64,
}

/// `POST /api/sessions/{id}/ask {"text", "model"?, "backend"?,
/// "alternative_to"?}`: a question (or another version of an earlier one);
/// its turn streams back.
pub async fn ask(
    State(notebooks): State<Arc<Notebooks>>,
    OwnedSession(channel): OwnedSession,
    ApiJson(body): ApiJson<AskBody>,
) -> Result<Response, ApiError> {
    let turn = AskedTurn::Ask {
        text: body.text,
        model: body.model,
        backend: body.backend,
        alternative_to: body.alternative_to,
    };
    stream(&notebooks, channel, turn).await
}

/// `POST /api/sessions/{id}/run {"code", "language", "source"?,
/// "backend"?}`: code run as written, no model; its turn streams back.
pub async fn run(
    State(notebooks): State<Arc<Notebooks>>,
    OwnedSession(channel): OwnedSession,
    ApiJson(body): ApiJson<RunBody>,
) -> Result<Response, ApiError> {
    let turn = AskedTurn::Run {
        code: body.code,
        language: body.language,
        source: body.source,
        backend: body.backend,
    };
    stream(&notebooks, channel, turn).await
}

/// `POST /api/sessions/{id}/rerun`: a fresh kernel runs the session's code
/// cells again; the turn streams back.
pub async fn rerun(
    State(notebooks): State<Arc<Notebooks>>,
    OwnedSession(channel): OwnedSession,
) -> Result<Response, ApiError> {
    stream(&notebooks, channel, AskedTurn::RerunAll).await
}

/// `POST /api/sessions/{id}/stop`: stops the running turn and those waiting.
pub async fn stop(
    State(notebooks): State<Arc<Notebooks>>,
    OwnedSession(channel): OwnedSession,
) -> Result<StatusCode, ApiError> {
    notebooks.stop(&channel);
    Ok(StatusCode::NO_CONTENT)
}

/// `POST /api/sessions/{id}/composing`: a question is being written (or a
/// file was given): the model may read the conversation ahead (202; the
/// reading goes on in the background, giving way to any request).
pub async fn composing(
    State(notebooks): State<Arc<Notebooks>>,
    OwnedSession(channel): OwnedSession,
) -> Result<StatusCode, ApiError> {
    notebooks.composing(&channel, None);
    Ok(StatusCode::ACCEPTED)
}

/// `GET /api/sessions/{id}/events?after=N`: the history after `N`, as NDJSON.
pub async fn events(
    State(_notebooks): State<Arc<Notebooks>>,
    OwnedSession(channel): OwnedSession,
    ApiQuery(After { after }): ApiQuery<After>,
) -> Result<Response, ApiError> {
    let lines: Vec<Bytes> = channel
        .log()
        .events_after(after)
        .into_iter()
        .map(|event| line(&ServerMessage::Event(event)))
        .collect();
    Ok(ndjson::response(futures::stream::iter(lines)))
}

/// Starts the turn and answers with its events as they happen. The turn
/// runs on if the client goes away (`/stop` stops it).
async fn stream(
    notebooks: &Notebooks,
    channel: Arc<runcell_agent::session::SessionChannel>,
    turn: AskedTurn,
) -> Result<Response, ApiError> {
    let events = notebooks.start_followed(channel, turn).await?;
    Ok(ndjson::response(
        events.map(|event| line(&ServerMessage::Event(event))),
    ))
}

fn line(message: &ServerMessage) -> Bytes {
    ndjson::line(
        message,
        r#"{"type":"error","code":"unavailable","message":"unencodable event"}"#,
    )
}
