use axum::Json;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use serde_json::json;

use crate::auth::{AuthError, Limited};
use crate::code_api::CodeApiError;
use runcell_agent::agent::{FilesError, TurnRefusal};
use runcell_agent::notebook::NotebookError;
use runcell_agent::notebook::remote::FailureKind;
use runcell_agent::session::CreateError;
use runcell_agent::session::quota::TooManySessions;
use runcell_sandbox::SandboxError;
use runcell_sandbox::sessions::SandboxSessionError;

/// Every error response's body.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct ErrorBody {
    pub error: ErrorDetail,
}

#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct ErrorDetail {
    /// Stable and machine-readable: `unauthorized`, `not_found`,
    /// `bad_request`, `too_large`, `rate_limited`, `busy`, `unavailable`...
    pub code: String,
    /// For people; may change.
    pub message: String,
}

/// How long a client refused for want of a sandbox slot is told to wait:
/// about as long as a short session lasts.
const NO_ROOM_RETRY_SECS: u64 = 30;

/// The one error type of the HTTP layer: a status and a JSON body
/// `{"error": {"code", "message"}}` that never carries internals.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    #[error("{0}")]
    NotFound(String),
    /// Missing, invalid, expired or revoked credentials (401).
    #[error("{0}")]
    Unauthorized(String),
    /// A per-key limit (429 with `Retry-After` and `X-RateLimit-*`).
    #[error("{}", .0.message())]
    Limited(Limited),
    /// An owner made too many sessions lately (429 with `Retry-After`).
    #[error(transparent)]
    TooManySessions(TooManySessions),
    #[error("{0}")]
    BadRequest(String),
    #[error("{0}")]
    MethodNotAllowed(String),
    /// Refused whoever asks (403), e.g. a socket opened from another site.
    #[error("{0}")]
    Forbidden(String),
    /// The request names a host this server does not answer to (421).
    #[error("{0}")]
    Misdirected(String),
    #[error("{0}")]
    TooLarge(String),
    /// The thing is there already (409).
    #[error("{0}")]
    Conflict(String),
    /// Too much already under way (429 with `Retry-After`).
    #[error("{0}")]
    Busy(String),
    /// A limit of the person's account (429): which, and until when, in
    /// the message.
    #[error("{0}")]
    OverQuota(String),
    /// The client stopped sending (a body idle too long): 408.
    #[error("{0}")]
    TimedOut(String),
    #[error("{0}")]
    Unavailable(String),
    /// No room for another sandbox session now (503 with `Retry-After`):
    /// the server's slots, or the share anonymous pages may hold.
    #[error("{0}")]
    NoRoom(String),
    /// Logged in full; the client sees only that something failed.
    #[error("internal error")]
    Internal(String),
}

impl ApiError {
    /// The status it answers with.
    pub fn status(&self) -> StatusCode {
        self.parts().0
    }

    fn parts(&self) -> (StatusCode, &'static str) {
        match self {
            Self::NotFound(_) => (StatusCode::NOT_FOUND, "not_found"),
            Self::Unauthorized(_) => (StatusCode::UNAUTHORIZED, "unauthorized"),
            Self::Limited(_) | Self::TooManySessions(_) => {
                (StatusCode::TOO_MANY_REQUESTS, "rate_limited")
            }
            Self::BadRequest(_) => (StatusCode::BAD_REQUEST, "bad_request"),
            Self::MethodNotAllowed(_) => (StatusCode::METHOD_NOT_ALLOWED, "method_not_allowed"),
            Self::Forbidden(_) => (StatusCode::FORBIDDEN, "forbidden"),
            Self::Misdirected(_) => (StatusCode::MISDIRECTED_REQUEST, "misdirected"),
            Self::TooLarge(_) => (StatusCode::PAYLOAD_TOO_LARGE, "too_large"),
            Self::Conflict(_) => (StatusCode::CONFLICT, "conflict"),
            Self::Busy(_) => (StatusCode::TOO_MANY_REQUESTS, "busy"),
            Self::OverQuota(_) => (StatusCode::TOO_MANY_REQUESTS, "over_quota"),
            Self::TimedOut(_) => (StatusCode::REQUEST_TIMEOUT, "timed_out"),
            Self::Unavailable(_) | Self::NoRoom(_) => {
                (StatusCode::SERVICE_UNAVAILABLE, "unavailable")
            }
            Self::Internal(_) => (StatusCode::INTERNAL_SERVER_ERROR, "internal"),
        }
    }
}

impl From<AuthError> for ApiError {
    fn from(err: AuthError) -> Self {
        match err {
            AuthError::BadName(message) => Self::BadRequest(message),
            AuthError::Store(err) => err.into(),
            other => Self::Unauthorized(other.to_string()),
        }
    }
}

impl From<SandboxError> for ApiError {
    fn from(err: SandboxError) -> Self {
        match err {
            SandboxError::InvalidInput(message) => Self::BadRequest(message),
            SandboxError::Unavailable(_) => Self::Unavailable(err.to_string()),
            SandboxError::Internal(message) => Self::Internal(message),
            SandboxError::NotFound(message) => Self::NotFound(message),
            SandboxError::NotSupported(message) => Self::BadRequest(message),
            SandboxError::NoSpace(message) => Self::TooLarge(message),
        }
    }
}

impl From<CodeApiError> for ApiError {
    fn from(err: CodeApiError) -> Self {
        Self::from(&err)
    }
}

impl From<&CodeApiError> for ApiError {
    fn from(err: &CodeApiError) -> Self {
        match err {
            CodeApiError::NotFound(id) => Self::NotFound(format!("no sandbox session {id}")),
            CodeApiError::Limited(limited) => Self::Limited(limited.clone()),
            CodeApiError::Sandbox(err) => err.clone().into(),
            CodeApiError::Exists(path) => Self::Conflict(format!(
                "{path} exists already: add overwrite=true to replace it"
            )),
            CodeApiError::Session(err) => err.into(),
        }
    }
}

/// A backend's registry refusing a session: no room now (503, worth a
/// retry), the owner's kernels all busy (429), one that is gone (404), or
/// the sandbox's own error.
impl From<&SandboxSessionError> for ApiError {
    fn from(err: &SandboxSessionError) -> Self {
        match err {
            SandboxSessionError::NotFound(_) => Self::NotFound(err.to_string()),
            SandboxSessionError::TooMany(_)
            | SandboxSessionError::AnonymousFull(_)
            | SandboxSessionError::ClientFull(_) => Self::NoRoom(err.to_string()),
            SandboxSessionError::OwnerFull(_) => Self::Busy(err.to_string()),
            SandboxSessionError::Sandbox(err) => err.clone().into(),
        }
    }
}

impl From<CreateError> for ApiError {
    fn from(err: CreateError) -> Self {
        match err {
            CreateError::TooMany(too_many) => Self::TooManySessions(too_many),
            CreateError::Store(err) => err.into(),
        }
    }
}

impl From<TurnRefusal> for ApiError {
    fn from(refusal: TurnRefusal) -> Self {
        let message = refusal.to_string();
        match refusal {
            TurnRefusal::Empty | TurnRefusal::InvalidCode(_) | TurnRefusal::Backend(_) => {
                Self::BadRequest(message)
            }
            TurnRefusal::TooLong => Self::TooLarge(message),
            TurnRefusal::Busy => Self::Busy(message),
            TurnRefusal::OverQuota(_) => Self::OverQuota(message),
            TurnRefusal::ShuttingDown | TurnRefusal::Unreachable(_) => Self::Unavailable(message),
            TurnRefusal::Deleted | TurnRefusal::UnknownTurn(_) => Self::NotFound(message),
        }
    }
}

impl From<FilesError> for ApiError {
    fn from(err: FilesError) -> Self {
        match err {
            FilesError::Exists(path) => Self::Conflict(format!(
                "{path} exists already: upload it again with overwrite to replace it"
            )),
            FilesError::Sandbox(err) => err.into(),
            FilesError::Session(SandboxSessionError::NotFound(_)) => {
                Self::NotFound("the session's kernel is gone; try again".into())
            }
            FilesError::Session(err) => (&err).into(),
        }
    }
}

impl From<NotebookError> for ApiError {
    fn from(err: NotebookError) -> Self {
        match err {
            NotebookError::NotFound(_) | NotebookError::LinkGone | NotebookError::NoSharedFiles => {
                Self::NotFound(err.to_string())
            }
            NotebookError::HandoverGone => Self::NotFound(err.to_string()),
            NotebookError::EmptyTitle | NotebookError::BadNotebook(_) => {
                Self::BadRequest(err.to_string())
            }
            NotebookError::ShuttingDown => Self::Unavailable(err.to_string()),
            NotebookError::OverQuota(message) => Self::OverQuota(message),
            NotebookError::Refused(refusal) => refusal.into(),
            NotebookError::Create(err) => err.into(),
            NotebookError::Store(err) => err.into(),
            NotebookError::Files(err) => err.into(),
            NotebookError::Unreachable(message) => Self::Unavailable(message),
            NotebookError::Remote(failure) => {
                let message = failure.message;
                match failure.kind {
                    FailureKind::NotFound => Self::NotFound(message),
                    FailureKind::BadRequest => Self::BadRequest(message),
                    FailureKind::Conflict => Self::Conflict(message),
                    FailureKind::TooLarge => Self::TooLarge(message),
                    FailureKind::Busy => Self::Busy(message),
                    FailureKind::Unavailable => Self::Unavailable(message),
                    FailureKind::Internal => Self::Internal(message),
                }
            }
        }
    }
}

impl From<runcell_store::StoreError> for ApiError {
    fn from(err: runcell_store::StoreError) -> Self {
        tracing::error!(%err, "the session store failed");
        Self::Unavailable("the session store is unavailable; try again".into())
    }
}

impl ApiError {
    /// `{"code", "message"}`, as every error body carries it.
    pub fn body(&self) -> serde_json::Value {
        let (_, code) = self.parts();
        json!({ "code": code, "message": self.to_string() })
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let (status, _) = self.parts();
        match &self {
            Self::Internal(detail) => tracing::error!(%status, %detail, "request failed"),
            _ => tracing::debug!(%status, error = %self, "request refused"),
        }
        let mut response = (status, Json(json!({ "error": self.body() }))).into_response();
        let headers = response.headers_mut();
        match &self {
            Self::Unauthorized(_) => {
                headers.insert(
                    header::WWW_AUTHENTICATE,
                    HeaderValue::from_static("Bearer realm=\"runcell\""),
                );
            }
            Self::Limited(limited) => {
                let wait = limited.retry_after_secs();
                headers.insert(header::RETRY_AFTER, HeaderValue::from(wait));
                headers.insert("x-ratelimit-limit", HeaderValue::from(limited.limit()));
                headers.insert("x-ratelimit-remaining", HeaderValue::from(0u32));
                headers.insert("x-ratelimit-reset", HeaderValue::from(wait));
            }
            Self::NoRoom(_) => {
                headers.insert(header::RETRY_AFTER, HeaderValue::from(NO_ROOM_RETRY_SECS));
            }
            Self::TooManySessions(too_many) => {
                headers.insert(
                    header::RETRY_AFTER,
                    HeaderValue::from(too_many.retry_after_secs()),
                );
            }
            Self::Busy(_) => {
                headers.insert(header::RETRY_AFTER, HeaderValue::from(1u32));
            }
            _ => {}
        }
        response
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refusals() -> Vec<(SandboxSessionError, StatusCode)> {
        vec![
            (
                SandboxSessionError::NotFound("s1".into()),
                StatusCode::NOT_FOUND,
            ),
            (
                SandboxSessionError::TooMany(4),
                StatusCode::SERVICE_UNAVAILABLE,
            ),
            (
                SandboxSessionError::AnonymousFull(2),
                StatusCode::SERVICE_UNAVAILABLE,
            ),
            (
                SandboxSessionError::ClientFull(2),
                StatusCode::SERVICE_UNAVAILABLE,
            ),
            (
                SandboxSessionError::OwnerFull(4),
                StatusCode::TOO_MANY_REQUESTS,
            ),
            (
                SandboxSessionError::Sandbox(SandboxError::Unavailable("no bwrap".into())),
                StatusCode::SERVICE_UNAVAILABLE,
            ),
            (
                SandboxSessionError::Sandbox(SandboxError::NoSpace("full".into())),
                StatusCode::PAYLOAD_TOO_LARGE,
            ),
            (
                SandboxSessionError::Sandbox(SandboxError::InvalidInput("NUL".into())),
                StatusCode::BAD_REQUEST,
            ),
        ]
    }

    /// A backend's registry refuses a session the same way whichever service
    /// met the refusal: `/v1` and MCP (`CodeApi`) or a notebook's files.
    #[test]
    fn a_session_refusal_answers_the_same_from_every_service() {
        for (err, want) in refusals() {
            let shown = err.to_string();
            assert_eq!(ApiError::from(&err).status(), want, "{shown}");
            let from_files = ApiError::from(FilesError::Session(err));
            // A notebook's missing kernel says what to do about it.
            if want != StatusCode::NOT_FOUND {
                assert_eq!(from_files.status(), want, "{shown}");
            }
        }
        for (err, want) in refusals() {
            let shown = err.to_string();
            assert_eq!(
                ApiError::from(CodeApiError::Session(err)).status(),
                want,
                "{shown}"
            );
        }
    }

    /// What the client is told of an internal failure is only that it
    /// happened.
    #[test]
    fn an_internal_failure_is_not_described_to_the_client() {
        let err = ApiError::from(CodeApiError::Sandbox(SandboxError::Internal(
            "cgroup at /sys/fs/cgroup/runcell/x".into(),
        )));
        assert_eq!(err.status(), StatusCode::INTERNAL_SERVER_ERROR);
        assert_eq!(err.to_string(), "internal error");
    }
}
