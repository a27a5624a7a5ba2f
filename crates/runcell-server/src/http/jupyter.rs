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
use crate::http::state::AppState;
use crate::jupyter::budget::BudgetError;
use crate::jupyter::message::Incoming;
use crate::jupyter::restarts::RestartError;
use crate::jupyter::{Connection, Gateway, GatewayError, Next};

/// Pings keep clients that time out a silent socket (jupyter_client's
/// gateway client: 40 s) connected through long, quiet cells.
const PING_EVERY: Duration = Duration::from_secs(15);
/// How long a closing frame may take to go out before the socket is just
/// dropped (a client that reads nothing never takes it).
const CLOSE_GRACE: Duration = Duration::from_secs(20);

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
pub struct JupyterError {
    error: ApiError,
    /// Seconds to wait, for a refusal the API's errors do not carry one of.
    retry_after: Option<u64>,
}

impl<E: Into<ApiError>> From<E> for JupyterError {
    fn from(error: E) -> Self {
        Self {
            error: error.into(),
            retry_after: None,
        }
    }
}

impl From<GatewayError> for JupyterError {
    fn from(error: GatewayError) -> Self {
        let (error, retry_after) = match error {
            GatewayError::NotFound(_) | GatewayError::NoSuchSpec(_) => {
                (ApiError::NotFound(error.to_string()), None)
            }
            GatewayError::Api(error) => (error.into(), None),
            // Too many restarts: 429 with Retry-After.
            GatewayError::Restart(error @ RestartError::TooMany { .. }) => {
                let wait = error.retry_after_secs();
                (ApiError::Busy(error.to_string()), wait)
            }
            GatewayError::Restart(error) => (ApiError::Unavailable(error.to_string()), None),
        };
        Self { error, retry_after }
    }
}

impl IntoResponse for JupyterError {
    fn into_response(self) -> Response {
        let message = match &self.error {
            ApiError::Internal(_) => "internal error".to_string(),
            other => other.to_string(),
        };
        let (mut parts, _) = self.error.into_response().into_parts();
        if let Some(wait) = self.retry_after {
            parts
                .headers
                .insert(header::RETRY_AFTER, header::HeaderValue::from(wait));
        }
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
    ApiError::NotFound(
        "no such Jupyter route; runcell serves /api/kernels and /api/kernelspecs here".into(),
    )
    .into()
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
    let connection = state.gateway.connect(&caller, &id)?;
    let most = state.gateway.max_message_bytes();
    Ok(ws
        .max_message_size(most)
        .max_frame_size(most)
        .on_upgrade(move |socket| serve(socket, connection, caller, state)))
}

/// Why a connection ends.
enum Ending {
    /// Closed with this code and reason.
    Close(u16, String),
    /// The client left, or the socket failed.
    Gone,
}

/// Runs one connection until either side closes, the kernel is shut down,
/// the server stops, or the client reads too slowly for what it asks (its
/// unsent frames past its budget: 1008). Frames go out in their own future,
/// so that a client that does not read holds only its budget's worth and
/// is cut off even while a write to it is stuck.
async fn serve(socket: WebSocket, connection: Connection, caller: Caller, state: JupyterState) {
    let (mut sink, mut stream) = socket.split();
    let kernel = Arc::clone(&connection.kernel);
    let most_mib = state.gateway.max_message_bytes() / (1024 * 1024);
    let writing = async {
        let mut ping = tokio::time::interval(PING_EVERY);
        ping.tick().await;
        loop {
            let (message, _sending) = tokio::select! {
                _ = ping.tick() => (Message::Ping(Default::default()), None),
                next = connection.next() => match next {
                    Next::Frame(sending) => (Message::Text(Utf8Bytes::from(sending.frame.as_ref())), Some(sending)),
                    Next::Overflowed(why) => break too_slow(&why),
                },
            };
            // The frame's bytes stay charged until it is written.
            if sink.send(message).await.is_err() {
                break Ending::Gone;
            }
        }
    };
    let reading = async {
        loop {
            let message = match stream.next().await {
                Some(Ok(Message::Text(text))) => Incoming::parse(text.as_str()),
                Some(Ok(Message::Binary(bytes))) => Incoming::parse_binary(&bytes),
                Some(Ok(Message::Ping(_) | Message::Pong(_))) => continue,
                Some(Err(e)) if too_big(&e) => {
                    break Ending::Close(
                        close_code::SIZE,
                        format!(
                            "a message is larger than {most_mib} MiB (jupyter.max_message_mib)"
                        ),
                    );
                }
                Some(Ok(Message::Close(_)) | Err(_)) | None => break Ending::Gone,
            };
            match message {
                Ok(message) => {
                    if let Some(asked) = connection.receive(message) {
                        state.gateway.asked(&caller, &kernel, asked);
                    }
                }
                // A client's mistake ends nothing: it is logged and the
                // frame skipped, as Jupyter Server does.
                Err(e) => {
                    tracing::debug!(kernel = %kernel.id, %e, "a frame is not a Jupyter message");
                }
            }
        }
    };
    let ending = tokio::select! {
        () = state.shutdown.cancelled() => Ending::Close(close_code::AWAY, "server shutting down".into()),
        () = kernel.closed.cancelled() => Ending::Close(close_code::NORMAL, "kernel shut down".into()),
        why = connection.cut_off() => too_slow(&why),
        ending = writing => ending,
        ending = reading => ending,
    };
    // Cut off from the kernel before the goodbye, which may never be read.
    drop(connection);
    if let Ending::Close(code, reason) = ending {
        let close = Message::Close(Some(CloseFrame {
            code,
            reason: Utf8Bytes::from(reason),
        }));
        // The closing handshake: what the client still sends is read and
        // dropped until its close, so that the socket ends with a FIN the
        // client reads our close before, not a reset that loses it.
        let _ = tokio::time::timeout(CLOSE_GRACE, async {
            sink.send(close).await.ok()?;
            while let Some(Ok(message)) = stream.next().await {
                if let Message::Close(_) = message {
                    break;
                }
            }
            Some(())
        })
        .await;
    }
}

/// The end of a client that reads too slowly for what it asks (a close
/// reason is at most 123 bytes: the setting says the rest).
fn too_slow(why: &BudgetError) -> Ending {
    Ending::Close(
        close_code::POLICY,
        format!("reading too slowly: unsent messages past {}", why.setting()),
    )
}

/// Whether a socket's error is a frame over the size allowed.
fn too_big(error: &axum::Error) -> bool {
    use std::error::Error as _;
    let mut source: Option<&(dyn std::error::Error + 'static)> = error.source();
    while let Some(error) = source {
        if let Some(tokio_tungstenite::tungstenite::Error::Capacity(_)) =
            error.downcast_ref::<tokio_tungstenite::tungstenite::Error>()
        {
            return true;
        }
        source = error.source();
    }
    false
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
