//! `GET /metrics`: Prometheus text format. Open while the pages are (on
//! loopback by default); when the pages ask for a key, so does this: an API
//! key or access token as `Authorization: Bearer`, or a page sign-in's
//! cookie.

use axum::extract::{Request, State};
use axum::http::header;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::ApiError;
use crate::auth::Audience;
use crate::auth::token::bearer;
use crate::state::AppState;

/// Lets a request through if the pages are open or it carries a credential
/// of a live key.
pub async fn gate(State(state): State<AppState>, request: Request, next: Next) -> Response {
    if !state.config.pages_need_key() {
        return next.run(request).await;
    }
    let headers = request.headers();
    let bearer = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(bearer);
    let checked = match bearer {
        Some(credential) => state.auth.authenticate(credential, Audience::Api).await,
        None => super::signin::signed_in(&state, headers).await,
    };
    match checked {
        Ok(_) => next.run(request).await,
        Err(err) => ApiError::from(err).into_response(),
    }
}

/// The metrics, with the sizes of things read now.
pub async fn render(State(state): State<AppState>) -> Response {
    let Some(handle) = crate::metrics::handle() else {
        return ApiError::Unavailable("another metrics recorder is installed".into())
            .into_response();
    };
    crate::metrics::set_sizes(
        state.sandbox_sessions.pooled().await,
        state.sandbox_sessions.live_count(),
        state.notebooks.open_count(),
    );
    (
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        handle.render(),
    )
        .into_response()
}
