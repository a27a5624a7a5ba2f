//! `GET /metrics`: Prometheus text format. Open while the pages are (on
//! loopback by default); when the pages ask for a key, so does this: an API
//! key or access token as `Authorization: Bearer`, or a page sign-in's
//! cookie.

use std::sync::Arc;

use axum::extract::{FromRef, Request, State};
use axum::http::header;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::ApiError;
use crate::auth::Audience;
use crate::auth::token::bearer;
use crate::http::state::AppState;
use runcell_agent::notebook::Notebooks;
use runcell_sandbox::sessions::SandboxSessions;

/// What the metrics read the sizes of: the jail's sessions and the open
/// notebooks.
#[derive(Clone)]
pub struct Sizes {
    sessions: Arc<SandboxSessions>,
    notebooks: Arc<Notebooks>,
}

impl FromRef<AppState> for Sizes {
    fn from_ref(state: &AppState) -> Self {
        Self {
            sessions: Arc::clone(&state.sandbox_sessions),
            notebooks: Arc::clone(&state.notebooks),
        }
    }
}

/// Lets a request through if the pages are open or it carries a credential
/// of a live key.
pub async fn gate(
    State(state): State<super::signin::SignIn>,
    request: Request,
    next: Next,
) -> Response {
    if !state.pages_need_key {
        return next.run(request).await;
    }
    let headers = request.headers();
    let bearer = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(bearer);
    let checked = match bearer {
        Some(credential) => state
            .auth
            .authenticate(credential, Audience::Api)
            .await
            .map(|_| ()),
        None => super::signin::signed_in(&state.accounts, headers)
            .await
            .map(|_| ()),
    };
    match checked {
        Ok(_) => next.run(request).await,
        Err(err) => ApiError::from(err).into_response(),
    }
}

/// The metrics, with the sizes of things read now.
pub async fn render(State(state): State<Sizes>) -> Response {
    let Some(handle) = runcell_core::metrics::handle() else {
        return ApiError::Unavailable("another metrics recorder is installed".into())
            .into_response();
    };
    runcell_core::metrics::set_sizes(
        state.sessions.pooled().await,
        state.sessions.live_count(),
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
