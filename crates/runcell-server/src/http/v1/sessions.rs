//! `/v1/code_interpreter/sessions`: stateful sandbox sessions of the
//! caller's key (variables and files persist between runs).

use std::sync::Arc;

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::auth::Caller;
use crate::code_api::CodeApi;
use crate::http::ApiError;
use crate::http::error::ErrorBody;
use crate::http::extract::ApiJson;
use runcell_sandbox::sessions::SessionInfo;
use runcell_sandbox::{Language, SandboxKind};

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NewSession {
    /// The session's language (default `python`).
    #[serde(default = "default_language")]
    language: Language,
    /// Where it runs: `jail` (the default) or `e2b` (when the server has an
    /// E2B key).
    #[serde(default, deserialize_with = "SandboxKind::deserialize_pick")]
    backend: Option<SandboxKind>,
}

fn default_language() -> Language {
    Language::Python
}

#[derive(Debug, Serialize, ToSchema)]
pub struct SessionList {
    pub sessions: Vec<SessionInfo>,
}

/// Open a session.
#[utoipa::path(
    post,
    path = "/v1/code_interpreter/sessions",
    tag = "code_interpreter",
    request_body = NewSession,
    security(("bearer" = [])),
    responses(
        (status = 201, description = "The new session", body = SessionInfo),
        (status = 400, description = "Not JSON or not this schema", body = ErrorBody),
        (status = 401, description = "Missing, invalid, expired or revoked credentials", body = ErrorBody),
        (status = 413, description = "The body is too large", body = ErrorBody),
        (status = 429, description = "This key holds its most sessions: see `Retry-After`", body = ErrorBody),
        (status = 503, description = "The server holds its most sessions, or cannot start one", body = ErrorBody),
    )
)]
pub async fn create_session(
    State(api): State<Arc<CodeApi>>,
    caller: Caller,
    ApiJson(body): ApiJson<NewSession>,
) -> Result<Response, ApiError> {
    let info = api
        .create_session(&caller, body.language, body.backend)
        .await?;
    Ok((StatusCode::CREATED, Json(info)).into_response())
}

/// List your sessions.
#[utoipa::path(
    get,
    path = "/v1/code_interpreter/sessions",
    tag = "code_interpreter",
    security(("bearer" = [])),
    responses(
        (status = 200, description = "This key's open sessions, oldest first", body = SessionList),
        (status = 401, description = "Missing, invalid, expired or revoked credentials", body = ErrorBody),
    )
)]
pub async fn list_sessions(State(api): State<Arc<CodeApi>>, caller: Caller) -> Json<SessionList> {
    Json(SessionList {
        sessions: api.sessions(&caller),
    })
}

/// Describe a session.
#[utoipa::path(
    get,
    path = "/v1/code_interpreter/sessions/{id}",
    tag = "code_interpreter",
    params(("id" = String, Path, description = "The session's id")),
    security(("bearer" = [])),
    responses(
        (status = 200, description = "The session", body = SessionInfo),
        (status = 401, description = "Missing, invalid, expired or revoked credentials", body = ErrorBody),
        (status = 404, description = "No such session of this key", body = ErrorBody),
    )
)]
pub async fn get_session(
    State(api): State<Arc<CodeApi>>,
    caller: Caller,
    Path(id): Path<String>,
) -> Result<Json<SessionInfo>, ApiError> {
    Ok(Json(api.session(&caller, &id)?))
}

/// Close a session, stopping whatever runs in it.
#[utoipa::path(
    delete,
    path = "/v1/code_interpreter/sessions/{id}",
    tag = "code_interpreter",
    params(("id" = String, Path, description = "The session's id")),
    security(("bearer" = [])),
    responses(
        (status = 204, description = "Closed"),
        (status = 401, description = "Missing, invalid, expired or revoked credentials", body = ErrorBody),
        (status = 404, description = "No such session of this key", body = ErrorBody),
    )
)]
pub async fn delete_session(
    State(api): State<Arc<CodeApi>>,
    caller: Caller,
    Path(id): Path<String>,
) -> Result<StatusCode, ApiError> {
    api.delete_session(&caller, &id).await?;
    Ok(StatusCode::NO_CONTENT)
}
