//! The code interpreter's routes (port 49999): `POST /execute` streams NDJSON
//! as E2B's server writes it, and `/contexts` manages code contexts.

use std::sync::Arc;
use std::time::Duration;

use axum::Json;
use axum::body::{Body, Bytes};
use axum::extract::rejection::JsonRejection;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::{InSandbox, plain_error, status_of};
use crate::e2b::protocol::{self, ExecutionRequest, Line, NewContext, ResultLine, ndjson_line};
use crate::e2b::served::Served;
use crate::e2b::served::ServedError;
use runcell_sandbox::RunEvent;

fn failed(err: &ServedError) -> Response {
    let (status, message) = status_of(err);
    super::with_retry_after(plain_error(status, &message), err)
}

/// A run event as a stream line; errors wait for the outcome (only the
/// first error of an execution is sent, just before its end).
fn line(event: RunEvent) -> Option<Line> {
    match event {
        RunEvent::Stdout { text, ts_ms } => Some(Line::Stdout {
            text,
            timestamp: protocol::timestamp(ts_ms),
        }),
        RunEvent::Stderr { text, ts_ms } => Some(Line::Stderr {
            text,
            timestamp: protocol::timestamp(ts_ms),
        }),
        RunEvent::Result { data, main, .. } => {
            Some(Line::Result(ResultLine::from_bundle(&data, main)))
        }
        // The pager's help (`zip?`), shown as a display.
        RunEvent::Page { data, .. } => Some(Line::Result(ResultLine::from_bundle(&data, false))),
        // E2B's stream has no clear and no update: what was sent stays
        // sent (the execution's results, kept by the outcome, drop what a
        // clear cleared).
        RunEvent::Clear { .. } | RunEvent::Update { .. } | RunEvent::Error { .. } => None,
    }
}

/// `POST /execute`: the run's lines as they happen, a keepalive every five
/// seconds of silence, the error if any and `end_of_execution`. A client
/// that goes away stops the run. A sandbox killed (or timed out) during the
/// run ends the response mid-stream, as E2B's own does when its machine
/// goes: the SDKs then ask whether the sandbox still runs and raise "the
/// sandbox was killed while the request was in progress".
pub(super) async fn execute(
    State(served): State<Arc<Served>>,
    InSandbox { sandbox }: InSandbox,
    request: Result<Json<ExecutionRequest>, JsonRejection>,
) -> Response {
    let request = match request {
        Ok(Json(request)) => request,
        Err(e) => return plain_error(StatusCode::UNPROCESSABLE_ENTITY, &e.body_text()),
    };
    let target = match served.target(
        &sandbox,
        request.context_id.as_deref(),
        request.language.as_deref(),
    ) {
        Ok(target) => target,
        Err(ServedError::NotFound(what)) => {
            return plain_error(StatusCode::NOT_FOUND, &format!("{what} not found"));
        }
        Err(e) => return failed(&e),
    };
    let count = served.count(&sandbox, &target);
    let (lines, body) = mpsc::channel::<Result<Bytes, std::io::Error>>(64);
    let served = Arc::clone(&served);
    tokio::spawn(async move {
        let cancel = CancellationToken::new();
        let send = |line: Line| {
            let lines = lines.clone();
            async move {
                lines
                    .send(Ok(Bytes::from(ndjson_line(&line))))
                    .await
                    .is_ok()
            }
        };
        send(Line::NumberOfExecutions {
            execution_count: count,
        })
        .await;
        let (events, mut received) = mpsc::channel(256);
        let env = request.env_vars.unwrap_or_default();
        let run = served.execute(&sandbox, target, request.code, &env, events, cancel.clone());
        tokio::pin!(run);
        let keepalive = Duration::from_secs(protocol::KEEPALIVE_SECS);
        let outcome = loop {
            tokio::select! {
                outcome = &mut run => break outcome,
                Some(event) = received.recv() => {
                    if let Some(line) = line(event)
                        && !send(line).await
                    {
                        cancel.cancel();
                    }
                }
                () = lines.closed(), if !cancel.is_cancelled() => cancel.cancel(),
                () = tokio::time::sleep(keepalive) => {
                    if !send(Line::Keepalive).await {
                        cancel.cancel();
                    }
                }
            }
        };
        while let Ok(event) = received.try_recv() {
            if let Some(line) = line(event) {
                send(line).await;
            }
        }
        if outcome.is_err() && served.get(&sandbox.id).is_err() {
            let killed = std::io::Error::other("the sandbox was killed during the run");
            let _ = lines.send(Err(killed)).await;
            return;
        }
        let error = match outcome {
            Ok(outcome) => outcome.error.map(|e| Line::Error {
                name: e.name,
                value: e.value,
                traceback: e.traceback.join("\n"),
            }),
            Err(e) => {
                let (_, message) = status_of(&e);
                Some(Line::Error {
                    name: "ExecutionError".into(),
                    value: message,
                    traceback: String::new(),
                })
            }
        };
        if let Some(error) = error {
            send(error).await;
        }
        send(Line::EndOfExecution).await;
    });
    let stream = futures::stream::unfold(body, |mut body| async move {
        body.recv().await.map(|line| (line, body))
    });
    // No content type: E2B's server sends none either.
    Response::new(Body::from_stream(stream))
}

/// `POST /contexts`.
pub(super) async fn create_context(
    State(served): State<Arc<Served>>,
    InSandbox { sandbox }: InSandbox,
    body: Option<Json<NewContext>>,
) -> Response {
    let new = body.map(|Json(b)| b).unwrap_or_default();
    match served
        .create_context(&sandbox, new.language.as_deref(), new.cwd.as_deref())
        .await
    {
        Ok(context) => Json(context).into_response(),
        Err(e) => failed(&e),
    }
}

/// `GET /contexts`.
pub(super) async fn list_contexts(InSandbox { sandbox }: InSandbox) -> Response {
    Json(sandbox.contexts()).into_response()
}

/// `POST /contexts/{id}/restart`.
pub(super) async fn restart_context(
    State(served): State<Arc<Served>>,
    InSandbox { sandbox }: InSandbox,
    Path(id): Path<String>,
) -> Response {
    match served.restart_context(&sandbox, &id).await {
        Ok(()) => Json(serde_json::Value::Null).into_response(),
        Err(ServedError::NotFound(what)) => {
            plain_error(StatusCode::NOT_FOUND, &format!("{what} not found"))
        }
        Err(e) => failed(&e),
    }
}

/// `DELETE /contexts/{id}`.
pub(super) async fn delete_context(
    State(served): State<Arc<Served>>,
    InSandbox { sandbox }: InSandbox,
    Path(id): Path<String>,
) -> Response {
    match served.delete_context(&sandbox, &id).await {
        Ok(()) => Json(serde_json::Value::Null).into_response(),
        Err(ServedError::NotFound(what)) => {
            plain_error(StatusCode::NOT_FOUND, &format!("{what} not found"))
        }
        Err(e) => failed(&e),
    }
}
