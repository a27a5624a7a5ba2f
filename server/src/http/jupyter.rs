//! `/jupyter`: the kernels part of Jupyter Server's REST API and the kernel
//! WebSocket, for Jupyter's own clients (JupyterLab's gateway client,
//! jupyter_client, Open WebUI). Credentials as Jupyter sends them:
//! `Authorization: token <key or access token>` (or `Bearer`), or
//! `?token=`. Errors are Jupyter's `{"message", "reason"}`.

use std::sync::Arc;
use std::time::Duration;

use axum::Json;
use axum::Router;
use axum::body::Body;
use axum::extract::ws::{CloseFrame, Message, Utf8Bytes, WebSocket, WebSocketUpgrade, close_code};
use axum::extract::{FromRef, FromRequestParts, Path, State};
use axum::http::StatusCode;
use axum::http::header;
use axum::http::request::Parts;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use futures::{SinkExt, StreamExt};
use serde::Deserialize;
use serde_json::json;
use tokio_util::sync::CancellationToken;

use super::ApiError;
use crate::auth::token::{Audience, bearer};
use crate::auth::{Auth, Caller};
use crate::jupyter::message::Incoming;
use crate::jupyter::{Connection, Gateway, GatewayError, Received};
use crate::state::AppState;

/// The largest frame a client may send: the largest program, JSON-escaped.
const MAX_FRAME_BYTES: usize = 8 * 1024 * 1024;
/// Pings keep clients that time out a silent socket (jupyter_client's
/// gateway client: 40 s) connected through long, quiet cells.
const PING_EVERY: Duration = Duration::from_secs(15);

/// What the routes need of the server.
#[derive(Clone)]
pub struct JupyterState {
    gateway: Arc<Gateway>,
    auth: Arc<Auth>,
    shutdown: CancellationToken,
}

impl FromRef<AppState> for JupyterState {
    fn from_ref(state: &AppState) -> Self {
        Self {
            gateway: Arc::clone(&state.gateway),
            auth: Arc::clone(&state.auth),
            shutdown: state.shutdown.clone(),
        }
    }
}

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/jupyter/api", get(version))
        .route("/jupyter/api/", get(version))
        .route("/jupyter/api/kernelspecs", get(kernelspecs))
        .route("/jupyter/api/kernelspecs/{name}", get(kernelspec))
        .route("/jupyter/api/kernels", get(list).post(start))
        .route("/jupyter/api/kernels/{id}", get(model).delete(shut_down))
        .route("/jupyter/api/kernels/{id}/interrupt", post(interrupt))
        .route("/jupyter/api/kernels/{id}/restart", post(restart))
        .route("/jupyter/api/kernels/{id}/channels", get(channels))
        .route("/jupyter/{*rest}", axum::routing::any(not_found))
}

/// An error as Jupyter's clients read one; status and headers (such as
/// `Retry-After`) as the rest of the API has them.
#[derive(Debug)]
pub struct JupyterError(ApiError);

impl<E: Into<ApiError>> From<E> for JupyterError {
    fn from(error: E) -> Self {
        Self(error.into())
    }
}

impl From<GatewayError> for ApiError {
    fn from(error: GatewayError) -> Self {
        match error {
            GatewayError::NotFound(_) | GatewayError::NoSuchSpec(_) => {
                Self::NotFound(error.to_string())
            }
            GatewayError::Api(error) => error.into(),
        }
    }
}

impl IntoResponse for JupyterError {
    fn into_response(self) -> Response {
        let message = match &self.0 {
            ApiError::Internal(_) => "internal error".to_string(),
            other => other.to_string(),
        };
        let (parts, _) = self.0.into_response().into_parts();
        let reason = parts.status.canonical_reason().unwrap_or("error");
        let body = json!({ "message": message, "reason": reason }).to_string();
        Response::from_parts(parts, Body::from(body))
    }
}

/// The caller, from Jupyter's forms of a credential.
pub struct JupyterCaller(Caller);

impl<S> FromRequestParts<S> for JupyterCaller
where
    JupyterState: FromRef<S>,
    S: Send + Sync,
{
    type Rejection = JupyterError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        let state = JupyterState::from_ref(state);
        let credential = credential(parts).ok_or_else(|| {
            ApiError::Unauthorized(
                "missing credentials: send `Authorization: token <runcell API key or access token>` or `?token=`"
                    .into(),
            )
        })?;
        Ok(Self(
            state
                .auth
                .authenticate(&credential, Audience::Api)
                .await
                .map_err(ApiError::from)?,
        ))
    }
}

/// `Authorization: token X` or `Bearer X`, else `?token=X`.
fn credential(parts: &Parts) -> Option<String> {
    if let Some(value) = parts
        .headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
    {
        let token = match value.split_once(' ') {
            Some((scheme, rest)) if scheme.eq_ignore_ascii_case("token") => {
                Some(rest.trim_matches(' '))
            }
            _ => bearer(value),
        };
        return token
            .filter(|t| !t.is_empty() && !t.contains(' '))
            .map(str::to_string);
    }
    let query = parts.uri.query()?;
    form_urlencoded::parse(query.as_bytes())
        .find(|(name, _)| name == "token")
        .map(|(_, value)| value.into_owned())
        .filter(|t| !t.is_empty())
}

async fn version() -> Json<serde_json::Value> {
    Json(json!({ "version": env!("CARGO_PKG_VERSION"), "runcell": true }))
}

async fn not_found() -> JupyterError {
    JupyterError(ApiError::NotFound(
        "no such Jupyter route; runcell serves /api/kernels and /api/kernelspecs here".into(),
    ))
}

async fn kernelspecs(
    State(state): State<JupyterState>,
    JupyterCaller(_): JupyterCaller,
) -> Json<serde_json::Value> {
    Json(state.gateway.kernelspecs())
}

async fn kernelspec(
    State(state): State<JupyterState>,
    JupyterCaller(_): JupyterCaller,
    Path(name): Path<String>,
) -> Result<Json<serde_json::Value>, JupyterError> {
    Ok(Json(state.gateway.kernelspec(&name)?))
}

async fn list(
    State(state): State<JupyterState>,
    JupyterCaller(caller): JupyterCaller,
) -> impl IntoResponse {
    Json(state.gateway.list(&caller))
}

/// `POST /api/kernels`: any body Jupyter's clients send (none, `{"name"}`,
/// `{"name", "env", "path"}`); only the name is used.
#[derive(Debug, Default, Deserialize)]
struct StartBody {
    name: Option<String>,
}

async fn start(
    State(state): State<JupyterState>,
    JupyterCaller(caller): JupyterCaller,
    body: axum::body::Bytes,
) -> Result<Response, JupyterError> {
    let body: StartBody = if body.iter().all(u8::is_ascii_whitespace) {
        StartBody::default()
    } else {
        serde_json::from_slice(&body)
            .map_err(|e| ApiError::BadRequest(format!("the body is not a kernel request: {e}")))?
    };
    let model = state.gateway.start(&caller, body.name.as_deref()).await?;
    let location = format!("/jupyter/api/kernels/{}", model.id);
    Ok((
        StatusCode::CREATED,
        [(header::LOCATION, location)],
        Json(model),
    )
        .into_response())
}

async fn model(
    State(state): State<JupyterState>,
    JupyterCaller(caller): JupyterCaller,
    Path(id): Path<String>,
) -> Result<Response, JupyterError> {
    Ok(Json(state.gateway.kernel(&caller, &id)?.model()).into_response())
}

async fn shut_down(
    State(state): State<JupyterState>,
    JupyterCaller(caller): JupyterCaller,
    Path(id): Path<String>,
) -> Result<StatusCode, JupyterError> {
    state.gateway.shutdown(&caller, &id).await?;
    Ok(StatusCode::NO_CONTENT)
}

async fn interrupt(
    State(state): State<JupyterState>,
    JupyterCaller(caller): JupyterCaller,
    Path(id): Path<String>,
) -> Result<StatusCode, JupyterError> {
    state.gateway.interrupt(&caller, &id)?;
    Ok(StatusCode::NO_CONTENT)
}

async fn restart(
    State(state): State<JupyterState>,
    JupyterCaller(caller): JupyterCaller,
    Path(id): Path<String>,
) -> Result<Response, JupyterError> {
    Ok(Json(state.gateway.restart(&caller, &id).await?).into_response())
}

/// The kernel's channels: Jupyter messages as JSON text frames (the legacy
/// protocol; the `v1.kernel.websocket.jupyter.org` subprotocol is not
/// offered, and clients fall back to this).
async fn channels(
    ws: WebSocketUpgrade,
    State(state): State<JupyterState>,
    JupyterCaller(caller): JupyterCaller,
    Path(id): Path<String>,
) -> Result<Response, JupyterError> {
    let kernel = state.gateway.kernel(&caller, &id)?;
    let connection = kernel.connect();
    Ok(ws
        .max_message_size(MAX_FRAME_BYTES)
        .on_upgrade(move |socket| serve(socket, connection, caller, state)))
}

/// Runs one connection until either side closes, the kernel is shut down or
/// the server stops.
async fn serve(socket: WebSocket, mut connection: Connection, caller: Caller, state: JupyterState) {
    let (mut sink, mut stream) = socket.split();
    let kernel = Arc::clone(&connection.kernel);
    let mut ping = tokio::time::interval(PING_EVERY);
    ping.tick().await;
    let closing = loop {
        let frame = tokio::select! {
            () = state.shutdown.cancelled() => break Some((close_code::AWAY, "server shutting down")),
            () = kernel.closed.cancelled() => break Some((close_code::NORMAL, "kernel shut down")),
            _ = ping.tick() => Message::Ping(Default::default()),
            received = connection.recv() => match received {
                Received::Frame(frame) => Message::Text(Utf8Bytes::from(frame.as_ref())),
                Received::Missed(missed) => {
                    tracing::warn!(kernel = %kernel.id, missed, "a Jupyter connection fell behind");
                    Message::Text(connection.missed(missed).into())
                }
                Received::Closed => break Some((close_code::NORMAL, "kernel shut down")),
            },
            received = stream.next() => {
                let message = match received {
                    Some(Ok(Message::Text(text))) => Incoming::parse(text.as_str()),
                    Some(Ok(Message::Binary(bytes))) => Incoming::parse_binary(&bytes),
                    Some(Ok(Message::Ping(_) | Message::Pong(_))) => continue,
                    Some(Ok(Message::Close(_)) | Err(_)) | None => break None,
                };
                match message {
                    Ok(message) => {
                        if let Some(asked) = kernel.handle(message, connection.id()) {
                            let gateway = Arc::clone(&state.gateway);
                            let (caller, id) = (caller.clone(), kernel.id.clone());
                            tokio::spawn(async move { gateway.asked(&caller, &id, asked).await });
                        }
                    }
                    // A client's mistake ends nothing: it is logged and
                    // the frame skipped, as Jupyter Server does.
                    Err(e) => tracing::debug!(kernel = %kernel.id, %e, "a frame is not a Jupyter message"),
                }
                continue;
            }
        };
        if sink.send(frame).await.is_err() {
            break None;
        }
    };
    if let Some((code, reason)) = closing {
        let _ = sink
            .send(Message::Close(Some(CloseFrame {
                code,
                reason: Utf8Bytes::from_static(reason),
            })))
            .await;
    }
}

#[cfg(test)]
mod tests {
    use axum::http::Request;

    use super::*;

    fn parts(auth: Option<&str>, uri: &str) -> Parts {
        let mut request = Request::builder().uri(uri);
        if let Some(auth) = auth {
            request = request.header(header::AUTHORIZATION, auth);
        }
        request.body(()).expect("a request").into_parts().0
    }

    #[test]
    fn a_credential_comes_as_jupyter_sends_it() {
        assert_eq!(
            credential(&parts(Some("token abc"), "/")),
            Some("abc".into())
        );
        assert_eq!(
            credential(&parts(Some("Token  abc"), "/")),
            Some("abc".into())
        );
        assert_eq!(
            credential(&parts(Some("Bearer abc"), "/")),
            Some("abc".into())
        );
        assert_eq!(
            credential(&parts(None, "/x?session_id=1&token=abc")),
            Some("abc".into())
        );
        assert_eq!(credential(&parts(None, "/x?token=")), None);
        assert_eq!(credential(&parts(Some("token "), "/")), None);
        assert_eq!(credential(&parts(Some("Basic abc"), "/")), None);
        // A header that is there wins over the query, even when it is bad.
        assert_eq!(credential(&parts(Some("token"), "/x?token=abc")), None);
    }
}
