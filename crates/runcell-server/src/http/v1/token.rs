//! `POST /v1/auth/token`: an API key for a short-lived access token.

use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::auth::Auth;
use crate::http::ApiError;
use crate::http::error::ErrorBody;
use crate::http::extract::ApiJson;

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct TokenRequest {
    /// A key from `runcell keys create` (`rc_…`).
    api_key: String,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct TokenResponse {
    /// Send as `Authorization: Bearer <access_token>`.
    pub access_token: String,
    /// Always `bearer`.
    pub token_type: String,
    /// Seconds until the token expires.
    pub expires_in: u64,
}

/// Exchange an API key for an access token.
#[utoipa::path(
    post,
    path = "/v1/auth/token",
    tag = "auth",
    request_body = TokenRequest,
    responses(
        (status = 200, description = "A signed access token (JWT)", body = TokenResponse),
        (status = 400, description = "Not JSON or not this schema", body = ErrorBody),
        (status = 401, description = "Unknown or revoked key", body = ErrorBody),
        (status = 413, description = "The body is too large", body = ErrorBody),
        (status = 503, description = "The key store is unavailable", body = ErrorBody),
    )
)]
pub async fn token(
    State(auth): State<Arc<Auth>>,
    ApiJson(body): ApiJson<TokenRequest>,
) -> Result<Json<TokenResponse>, ApiError> {
    let issued = auth.exchange(&body.api_key).await?;
    Ok(Json(TokenResponse {
        access_token: issued.token,
        token_type: "bearer".into(),
        expires_in: issued.expires_in.as_secs(),
    }))
}
