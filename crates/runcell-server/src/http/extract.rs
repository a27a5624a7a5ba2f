//! Extractors that refuse with the API's one error type, [`ApiError`]: a
//! body, query or form that does not parse is a 400 (a JSON body over its
//! limit a 413) in the `{"error": {"code", "message"}}` shape, and the
//! notebook session a path names is opened for the request's owner.

use std::sync::Arc;

use axum::extract::rejection::{FormRejection, JsonRejection, QueryRejection};
use axum::extract::{FromRef, FromRequest, FromRequestParts, Path};
use axum::http::request::Parts;

use super::ApiError;
use super::owner::Owner;
use runcell_agent::notebook::{Notebooks, parse_session_id};
use runcell_agent::session::SessionChannel;

/// A JSON body.
#[derive(Debug, FromRequest)]
#[from_request(via(axum::Json), rejection(ApiError))]
pub struct ApiJson<T>(pub T);

/// A form body (or, for `GET`, the query read as one).
#[derive(Debug, FromRequest)]
#[from_request(via(axum::Form), rejection(ApiError))]
pub struct ApiForm<T>(pub T);

/// The query string.
#[derive(Debug, FromRequestParts)]
#[from_request(via(axum::extract::Query), rejection(ApiError))]
pub struct ApiQuery<T>(pub T);

impl From<JsonRejection> for ApiError {
    fn from(rejection: JsonRejection) -> Self {
        if rejection.status() == axum::http::StatusCode::PAYLOAD_TOO_LARGE {
            Self::TooLarge(rejection.body_text())
        } else {
            Self::BadRequest(rejection.body_text())
        }
    }
}

impl From<FormRejection> for ApiError {
    fn from(rejection: FormRejection) -> Self {
        Self::BadRequest(rejection.body_text())
    }
}

impl From<QueryRejection> for ApiError {
    fn from(rejection: QueryRejection) -> Self {
        Self::BadRequest(rejection.body_text())
    }
}

/// The notebook session the route's `{id}` names, opened for the request's
/// owner: a malformed id, a missing session and another owner's are the
/// same 404.
pub struct OwnedSession(pub Arc<SessionChannel>);

impl<S> FromRequestParts<S> for OwnedSession
where
    Arc<Notebooks>: FromRef<S>,
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        let Owner(owner) = Owner::from_request_parts(parts, state).await?;
        let Path(id) = Path::<String>::from_request_parts(parts, state)
            .await
            .map_err(|e| ApiError::BadRequest(e.body_text()))?;
        let notebooks = Arc::<Notebooks>::from_ref(state);
        Ok(Self(
            notebooks.open_owned(owner, parse_session_id(&id)?).await?,
        ))
    }
}
