//! `GET /api/kernels`: the kernels the viewer's notebooks hold on this
//! node; `DELETE /api/sessions/{id}/kernel`: close one (the page's
//! "Kernels in use" list), so that a person never has to wait for one to
//! sit idle long enough to close by itself.

use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};

use super::error::ApiError;
use super::extract::OwnedSession;
use super::owner::Owner;
use runcell_agent::agent::KernelClose;
use runcell_agent::notebook::Notebooks;
use runcell_protocol::page::{KernelInUse, KernelsInUse};

/// `GET /api/kernels`: `{"kernels": [{session_id, title, url, backend,
/// running, idle_ms}], "cap"}`, the running and most recently used first.
pub async fn list(
    State(notebooks): State<Arc<Notebooks>>,
    Owner(owner): Owner,
) -> Result<Response, ApiError> {
    let held = notebooks.held_kernels(owner).await?;
    let kernels = held
        .kernels
        .iter()
        .map(|kernel| KernelInUse {
            session_id: kernel.session.to_string(),
            title: kernel.title.clone(),
            url: format!("/sessions/{}", kernel.session),
            backend: kernel.backend,
            backend_label: kernel.backend.label().into(),
            running: kernel.running,
            idle_ms: kernel.idle_ms,
        })
        .collect();
    Ok(Json(KernelsInUse {
        kernels,
        cap: held.cap,
    })
    .into_response())
}

/// `DELETE /api/sessions/{id}/kernel`: 204 when closed; 404 when the
/// notebook holds none; 409 while a program runs in it.
pub async fn close(
    State(notebooks): State<Arc<Notebooks>>,
    OwnedSession(channel): OwnedSession,
) -> Result<StatusCode, ApiError> {
    match notebooks.close_kernel(&channel).await {
        KernelClose::Closed => Ok(StatusCode::NO_CONTENT),
        KernelClose::NoKernel => Err(ApiError::NotFound(
            "this notebook holds no kernel now".into(),
        )),
        KernelClose::Running => Err(ApiError::Conflict(
            "a program is running in this notebook's kernel: stop it first".into(),
        )),
    }
}
