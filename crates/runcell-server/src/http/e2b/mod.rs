//! runcell's E2B-compatible endpoints, backed by the local jail: the control
//! plane (`/sandboxes`, `/v2/sandboxes`, under the caller's API key in
//! `X-API-Key`) and the data plane (the code interpreter's `/execute` and
//! `/contexts`, envd's `/files` and Connect RPCs), which shares paths with
//! nothing else because every data-plane request names its sandbox and port
//! in the `E2b-Sandbox-Id` / `E2b-Sandbox-Port` headers. Point the official
//! SDKs here with `E2B_API_URL` and `E2B_SANDBOX_URL` both set to runcell.

mod code;
mod control;
mod envd;

use std::sync::Arc;

use axum::Router;
use axum::extract::{DefaultBodyLimit, FromRef, FromRequestParts, Request, State};
use axum::http::request::Parts;
use axum::http::{HeaderMap, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get, post};
use tower::ServiceExt;

use crate::e2b::protocol::{self, ErrorJson};
use crate::e2b::served::Served;
use crate::e2b::served::{ServedError, ServedSandbox};
use crate::http::ApiError;

/// The control plane's routes (merged into the programs' router).
pub fn control_plane<S>() -> Router<S>
where
    Arc<Served>: FromRef<S>,
    Arc<crate::auth::Auth>: FromRef<S>,
    S: Clone + Send + Sync + 'static,
{
    Router::new()
        .route("/health", get(|| async { StatusCode::NO_CONTENT }))
        .route("/sandboxes", post(control::create).get(control::list))
        .route("/v2/sandboxes", post(control::create).get(control::list))
        .route(
            "/sandboxes/{id}",
            get(control::detail).delete(control::kill),
        )
        .route("/sandboxes/{id}/timeout", post(control::set_timeout))
        .route("/sandboxes/{id}/refreshes", post(control::refresh))
        .route("/sandboxes/{id}/connect", post(control::connect))
        .route("/v2/sandboxes/{id}/connect", post(control::connect))
}

/// What the data plane's handlers share: the served sandboxes, and the
/// spool uploads stream to.
#[derive(Clone, FromRef)]
pub(super) struct DataPlane {
    served: Arc<Served>,
    spool: Arc<crate::http::Spool>,
    /// The largest upload: a sandbox's disk.
    max_upload: MaxUpload,
}

/// The largest file an upload may carry, in bytes.
#[derive(Clone, Copy, Debug)]
pub(super) struct MaxUpload(pub u64);

/// The data plane: every route a sandbox's ports answer.
/// Uploads stream to the spool and may be as large as a sandbox's disk,
/// `max_upload` bytes; other bodies are held to the run API's bound.
pub fn data_plane(
    served: Arc<Served>,
    spool: Arc<crate::http::Spool>,
    max_upload: usize,
) -> Router {
    Router::new()
        .route("/health", get(health))
        .route("/execute", post(code::execute))
        .route(
            "/contexts",
            post(code::create_context).get(code::list_contexts),
        )
        .route("/contexts/{id}/restart", post(code::restart_context))
        .route("/contexts/{id}", delete(code::delete_context))
        .route("/envs", get(envd::envs))
        .route(
            "/files",
            get(envd::download)
                .post(envd::upload)
                .layer(DefaultBodyLimit::disable()),
        )
        .route("/filesystem.Filesystem/{method}", post(envd::filesystem))
        .route("/process.Process/{method}", post(envd::process))
        .fallback(|| async { plain_error(StatusCode::NOT_FOUND, "no such route in a sandbox") })
        .layer(DefaultBodyLimit::max(crate::http::v1::MAX_RUN_BODY))
        .with_state(DataPlane {
            served,
            spool,
            max_upload: MaxUpload(max_upload as u64),
        })
}

/// Sends requests that name a sandbox to the data plane; the rest go on.
pub async fn dispatch(State(plane): State<Router>, request: Request, next: Next) -> Response {
    let headers = request.headers();
    if headers.contains_key(protocol::SANDBOX_ID_HEADER)
        || headers.contains_key(protocol::SANDBOX_PORT_HEADER)
    {
        return match plane.oneshot(request).await {
            Ok(response) => response,
            Err(never) => match never {},
        };
    }
    next.run(request).await
}

/// `GET /health` of each port: the code interpreter says `"OK"`, envd 204.
/// A sandbox that is gone (killed, timed out) answers 502, as E2B's edge
/// does for a machine that is no more: the SDKs' `is_running()` reads that
/// as "not running" (and then say a run cut short was killed).
async fn health(State(served): State<Arc<Served>>, headers: HeaderMap) -> Response {
    if let Some(id) = header(&headers, protocol::SANDBOX_ID_HEADER)
        && served.get(id).is_err()
    {
        return json_error(
            StatusCode::BAD_GATEWAY,
            &format!("The sandbox {id} was not found"),
        );
    }
    if port(&headers) == Some(protocol::CODE_PORT) {
        axum::Json("OK").into_response()
    } else {
        StatusCode::NO_CONTENT.into_response()
    }
}

fn header<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers.get(name).and_then(|v| v.to_str().ok())
}

fn port(headers: &HeaderMap) -> Option<u16> {
    header(headers, protocol::SANDBOX_PORT_HEADER).and_then(|p| p.trim().parse().ok())
}

/// E2B's JSON error (`{"code": 404, "message": "…"}`), as the control plane
/// and envd's HTTP routes send it.
pub(super) fn json_error(status: StatusCode, message: &str) -> Response {
    (
        status,
        axum::Json(ErrorJson {
            code: status.as_u16(),
            message: message.to_string(),
        }),
    )
        .into_response()
}

/// The code interpreter's errors are plain text.
pub(super) fn plain_error(status: StatusCode, message: &str) -> Response {
    (status, message.to_string()).into_response()
}

/// `response`, saying when to try again if `err` is one of the key's limits.
pub(super) fn with_retry_after(mut response: Response, err: &ServedError) -> Response {
    if let ServedError::Api(crate::code_api::CodeApiError::Limited(limited)) = err {
        response.headers_mut().insert(
            axum::http::header::RETRY_AFTER,
            axum::http::HeaderValue::from(limited.retry_after_secs()),
        );
    }
    response
}

/// A served sandbox's error: its status and a message that hides internals.
/// The statuses are the API's one mapping ([`ApiError`]) but where E2B's
/// own API answers otherwise and its SDKs read the status: a full disk is
/// envd's 507 (the SDKs' `NotEnoughSpaceError`), no room for another
/// sandbox is E2B's 429 for its concurrent-sandbox limit, and a missing
/// sandbox is named as E2B names it.
pub(super) fn status_of(err: &ServedError) -> (StatusCode, String) {
    use crate::code_api::CodeApiError;
    use runcell_sandbox::SandboxError;
    match err {
        ServedError::NotFound(_) | ServedError::UnknownTemplate(_) => {
            (StatusCode::NOT_FOUND, err.to_string())
        }
        ServedError::BadRequest(_) => (StatusCode::BAD_REQUEST, err.to_string()),
        ServedError::Unauthorized(_) => (StatusCode::UNAUTHORIZED, err.to_string()),
        ServedError::Api(CodeApiError::NotFound(id)) => {
            (StatusCode::NOT_FOUND, format!("sandbox {id} not found"))
        }
        ServedError::Api(CodeApiError::Sandbox(SandboxError::NoSpace(m))) => {
            (StatusCode::INSUFFICIENT_STORAGE, m.clone())
        }
        ServedError::Api(CodeApiError::Session(session)) if session.is_no_room() => {
            (StatusCode::TOO_MANY_REQUESTS, session.to_string())
        }
        ServedError::Api(api) => {
            let err = ApiError::from(api);
            if let ApiError::Internal(detail) = &err {
                tracing::error!(error = %detail, "an E2B request failed");
            }
            (err.status(), err.to_string())
        }
    }
}

/// A data-plane request's sandbox, its access token checked.
pub(super) struct InSandbox {
    pub sandbox: Arc<ServedSandbox>,
}

impl<S> FromRequestParts<S> for InSandbox
where
    Arc<Served>: FromRef<S>,
    S: Send + Sync,
{
    type Rejection = Response;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Response> {
        let headers = &parts.headers;
        let code_port = port(headers) == Some(protocol::CODE_PORT);
        let refuse = |status: StatusCode, message: &str| {
            if code_port {
                plain_error(status, message)
            } else {
                json_error(status, message)
            }
        };
        let Some(id) = header(headers, protocol::SANDBOX_ID_HEADER) else {
            return Err(refuse(
                StatusCode::BAD_REQUEST,
                "the E2b-Sandbox-Id header is missing",
            ));
        };
        let sandbox = Arc::<Served>::from_ref(state).get(id).map_err(|e| {
            let (status, message) = status_of(&e);
            refuse(status, &message)
        })?;
        let envd_token = header(headers, protocol::ACCESS_TOKEN_HEADER)
            .is_some_and(|t| sandbox.envd_token_is(t));
        let traffic_token = header(headers, protocol::TRAFFIC_TOKEN_HEADER)
            .is_some_and(|t| sandbox.traffic_token_is(t));
        // envd wants its token; the code interpreter's routes take either
        // (the SDKs send only the traffic token to `/contexts`).
        if envd_token || (code_port && traffic_token) {
            Ok(Self { sandbox })
        } else {
            Err(refuse(
                StatusCode::UNAUTHORIZED,
                "unauthorized access, please provide a valid access token or method signing if supported",
            ))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::code_api::CodeApiError;
    use runcell_sandbox::SandboxError;
    use runcell_sandbox::sessions::SandboxSessionError;

    fn status(err: impl Into<ServedError>) -> StatusCode {
        status_of(&err.into()).0
    }

    /// E2B's statuses are the API's, but where E2B's own API answers
    /// otherwise and its SDKs read the status.
    #[test]
    fn statuses_follow_the_api_but_where_e2b_answers_otherwise() {
        // E2B's own answers.
        assert_eq!(
            status(SandboxError::NoSpace("full".into())),
            StatusCode::INSUFFICIENT_STORAGE
        );
        assert_eq!(
            status(CodeApiError::Session(SandboxSessionError::TooMany(4))),
            StatusCode::TOO_MANY_REQUESTS
        );
        let (missing, message) = status_of(&CodeApiError::NotFound("i1".into()).into());
        assert_eq!(
            (missing, message.as_str()),
            (StatusCode::NOT_FOUND, "sandbox i1 not found")
        );
        // The rest as the API answers them.
        for err in [
            CodeApiError::Session(SandboxSessionError::OwnerFull(4)),
            CodeApiError::Session(SandboxSessionError::NotFound("s1".into())),
            CodeApiError::Session(SandboxSessionError::Sandbox(SandboxError::Unavailable(
                "no bwrap".into(),
            ))),
            CodeApiError::Sandbox(SandboxError::InvalidInput("NUL".into())),
            CodeApiError::Sandbox(SandboxError::Unavailable("no bwrap".into())),
            CodeApiError::Exists("/home/user/a.txt".into()),
        ] {
            let want = ApiError::from(&err).status();
            assert_eq!(status(err), want);
        }
        let (status, message) =
            status_of(&SandboxError::Internal("cgroup at /sys/fs/cgroup/x".into()).into());
        assert_eq!(
            (status, message.as_str()),
            (StatusCode::INTERNAL_SERVER_ERROR, "internal error")
        );
    }
}
