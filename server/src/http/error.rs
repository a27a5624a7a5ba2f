use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::json;

/// The one error type of the HTTP layer: a status and a JSON body
/// `{"error": {"code", "message"}}` that never carries internals.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    #[error("{0}")]
    NotFound(String),
    #[error("{0}")]
    BadRequest(String),
    /// Refused whoever asks (403), e.g. a socket opened from another site.
    #[error("{0}")]
    Forbidden(String),
    #[error("{0}")]
    TooLarge(String),
    /// Too much already under way (429).
    #[error("{0}")]
    Busy(String),
    #[error("{0}")]
    Unavailable(String),
    /// Logged in full; the client sees only that something failed.
    #[error("internal error")]
    Internal(String),
}

impl ApiError {
    fn parts(&self) -> (StatusCode, &'static str) {
        match self {
            Self::NotFound(_) => (StatusCode::NOT_FOUND, "not_found"),
            Self::BadRequest(_) => (StatusCode::BAD_REQUEST, "bad_request"),
            Self::Forbidden(_) => (StatusCode::FORBIDDEN, "forbidden"),
            Self::TooLarge(_) => (StatusCode::PAYLOAD_TOO_LARGE, "too_large"),
            Self::Busy(_) => (StatusCode::TOO_MANY_REQUESTS, "busy"),
            Self::Unavailable(_) => (StatusCode::SERVICE_UNAVAILABLE, "unavailable"),
            Self::Internal(_) => (StatusCode::INTERNAL_SERVER_ERROR, "internal"),
        }
    }
}

impl From<axum::extract::rejection::JsonRejection> for ApiError {
    fn from(rejection: axum::extract::rejection::JsonRejection) -> Self {
        if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE {
            Self::TooLarge(rejection.body_text())
        } else {
            Self::BadRequest(rejection.body_text())
        }
    }
}

impl From<crate::store::StoreError> for ApiError {
    fn from(err: crate::store::StoreError) -> Self {
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
        (status, Json(json!({ "error": self.body() }))).into_response()
    }
}
