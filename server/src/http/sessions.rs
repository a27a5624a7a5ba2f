//! Keeping sessions: the list, rename, delete, share links and forks. Each
//! action has a JSON route under `/api` for programs and a form route the
//! page posts to (answered with a redirect), so it works without JavaScript.

use axum::Json;
use axum::extract::rejection::{FormRejection, JsonRejection, QueryRejection};
use axum::extract::{Form, Path, Query, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Redirect, Response};
use serde::Deserialize;
use serde_json::json;

use super::ApiError;
use super::notebook::owned;
use super::owner::Owner;
use crate::clock::now_ms;
use crate::session::{SessionChannel, ShareToken};
use crate::state::AppState;
use crate::store::ShareRecord;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TitleBody {
    title: String,
}

/// `GET /api/sessions`: the caller's sessions that have begun, most recent
/// first.
pub async fn list(
    State(state): State<AppState>,
    Owner(owner): Owner,
) -> Result<Response, ApiError> {
    let sessions: Vec<_> = state
        .sessions
        .store()
        .sessions_of(owner)
        .await?
        .into_iter()
        .map(|s| {
            json!({
                "id": s.id.to_string(),
                "title": s.title,
                "url": format!("/sessions/{}", s.id),
                "created_ms": s.created_ms,
                "updated_ms": s.updated_ms,
            })
        })
        .collect();
    Ok(Json(json!({ "sessions": sessions })).into_response())
}

/// `PATCH /api/sessions/{id} {"title"}`.
pub async fn rename(
    State(state): State<AppState>,
    owner: Owner,
    Path(id): Path<String>,
    body: Result<Json<TitleBody>, JsonRejection>,
) -> Result<Response, ApiError> {
    let channel = owned(&state, owner, &id).await?;
    let Json(body) = body?;
    let title = rename_to(&state, &channel, &body.title).await?;
    Ok(Json(json!({ "id": channel.id().to_string(), "title": title })).into_response())
}

/// `DELETE /api/sessions/{id}`: the session, its events, outputs and links.
pub async fn delete(
    State(state): State<AppState>,
    owner: Owner,
    Path(id): Path<String>,
) -> Result<StatusCode, ApiError> {
    let channel = owned(&state, owner, &id).await?;
    delete_session(&state, &channel).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Whether a share link offers the session's files: `?files=true` on the
/// JSON route, a ticked `files` box on the form.
#[derive(Debug, Default, Deserialize)]
pub struct ShareOptions {
    #[serde(default)]
    files: Option<String>,
}

impl ShareOptions {
    fn files(&self) -> Result<bool, ApiError> {
        match self.files.as_deref() {
            None | Some("false" | "0") => Ok(false),
            Some("true" | "1" | "on") => Ok(true),
            Some(other) => Err(ApiError::BadRequest(format!(
                "files is true or false, not '{other}'"
            ))),
        }
    }
}

/// `POST /api/sessions/{id}/share[?files=true]` → `{"url", "token",
/// "upto_seq", "files"}`: the session's link (made, or moved on to include
/// what happened since), with a copy of the session's files if asked.
pub async fn share(
    State(state): State<AppState>,
    owner: Owner,
    Path(id): Path<String>,
    options: Result<Query<ShareOptions>, QueryRejection>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let Query(options) = options.map_err(|e| ApiError::BadRequest(e.body_text()))?;
    let files = options.files()?;
    let channel = owned(&state, owner, &id).await?;
    let link = share_session(&state, &channel, files).await?;
    Ok(Json(json!({
        "url": format!("{}{}", origin(&headers), link.token.path()),
        "path": link.token.path(),
        "token": link.token.to_string(),
        "upto_seq": link.upto_seq,
        "files": link.files,
    }))
    .into_response())
}

/// `DELETE /api/sessions/{id}/share`: revokes the link; it 404s from now on.
pub async fn unshare(
    State(state): State<AppState>,
    owner: Owner,
    Path(id): Path<String>,
) -> Result<StatusCode, ApiError> {
    let channel = owned(&state, owner, &id).await?;
    unshare_session(&state, &channel).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// `POST /s/{token}/fork`: a new session of the caller's with the shared
/// cells copied; answered with a redirect to it.
pub async fn fork(
    State(state): State<AppState>,
    Owner(owner): Owner,
    Path(token): Path<String>,
) -> Result<Response, ApiError> {
    let gone = || ApiError::NotFound("this link does not exist or was revoked".into());
    let token: ShareToken = token.parse().map_err(|_| gone())?;
    let (record, events) = state
        .sessions
        .shared_events(&token)
        .await?
        .ok_or_else(gone)?;
    let link = state
        .sessions
        .store()
        .shared(&token)
        .await?
        .ok_or_else(gone)?;
    let channel = state
        .sessions
        .fork(owner, &record.title, &token, events)
        .await?;
    if link.files {
        // The fork starts with the files the link offers.
        state
            .runner
            .agent()
            .kernels()
            .fork_files(link.session_id, channel.id())
            .await?;
    }
    tracing::info!(from = ?token, to = %channel.id(), files = link.files, "session forked");
    Ok(see_other(&format!("/sessions/{}", channel.id())))
}

// The page's forms.

#[derive(Debug, Deserialize)]
pub struct TitleForm {
    title: String,
}

/// `POST /sessions/{id}/rename` (form).
pub async fn rename_form(
    State(state): State<AppState>,
    owner: Owner,
    Path(id): Path<String>,
    form: Result<Form<TitleForm>, FormRejection>,
) -> Result<Response, ApiError> {
    let channel = owned(&state, owner, &id).await?;
    let Form(form) = form.map_err(|e| ApiError::BadRequest(e.body_text()))?;
    rename_to(&state, &channel, &form.title).await?;
    Ok(see_other(&format!("/sessions/{}", channel.id())))
}

/// `POST /sessions/{id}/delete` (form): back to a new session.
pub async fn delete_form(
    State(state): State<AppState>,
    owner: Owner,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    let channel = owned(&state, owner, &id).await?;
    delete_session(&state, &channel).await?;
    Ok(see_other("/"))
}

/// `POST /sessions/{id}/share` (form): back to the session, which now shows
/// its link.
pub async fn share_form(
    State(state): State<AppState>,
    owner: Owner,
    Path(id): Path<String>,
    form: Result<Form<ShareOptions>, FormRejection>,
) -> Result<Response, ApiError> {
    let Form(options) = form.map_err(|e| ApiError::BadRequest(e.body_text()))?;
    let files = options.files()?;
    let channel = owned(&state, owner, &id).await?;
    share_session(&state, &channel, files).await?;
    Ok(see_other(&format!("/sessions/{}#share", channel.id())))
}

/// `POST /sessions/{id}/unshare` (form).
pub async fn unshare_form(
    State(state): State<AppState>,
    owner: Owner,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    let channel = owned(&state, owner, &id).await?;
    unshare_session(&state, &channel).await?;
    Ok(see_other(&format!("/sessions/{}", channel.id())))
}

async fn rename_to(
    state: &AppState,
    channel: &SessionChannel,
    title: &str,
) -> Result<String, ApiError> {
    let title = crate::store::title_from(title);
    if title.is_empty() {
        return Err(ApiError::BadRequest("the title is empty".into()));
    }
    state
        .sessions
        .store()
        .rename_session(channel.id(), &title)
        .await?;
    Ok(title)
}

async fn delete_session(state: &AppState, channel: &SessionChannel) -> Result<(), ApiError> {
    state.sessions.delete(channel.id()).await?;
    state.runner.agent().drop_kernel(channel.id()).await;
    tracing::info!(session = %channel.id(), "session deleted");
    Ok(())
}

async fn share_session(
    state: &AppState,
    channel: &SessionChannel,
    files: bool,
) -> Result<ShareRecord, ApiError> {
    // The link must show what the owner sees: what is queued is stored first.
    state.sessions.flush().await;
    // The copy of the files is made before the link says it has one.
    state
        .runner
        .agent()
        .kernels()
        .share_files(channel.id(), files)
        .await?;
    let link = state
        .sessions
        .store()
        .share(channel.id(), channel.settled_seq(), files, now_ms())
        .await?;
    tracing::info!(session = %channel.id(), upto = link.upto_seq, files, "session shared");
    Ok(link)
}

async fn unshare_session(state: &AppState, channel: &SessionChannel) -> Result<(), ApiError> {
    state.sessions.store().revoke_shares(channel.id()).await?;
    state
        .runner
        .agent()
        .kernels()
        .share_files(channel.id(), false)
        .await?;
    Ok(())
}

/// The origin the client reached us at, for absolute links.
fn origin(headers: &HeaderMap) -> String {
    let host = headers
        .get(header::HOST)
        .and_then(|v| v.to_str().ok())
        .filter(|h| !h.is_empty() && h.bytes().all(|b| b.is_ascii_graphic()))
        .unwrap_or("localhost");
    let https = headers
        .get("x-forwarded-proto")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.eq_ignore_ascii_case("https"));
    format!("{}://{host}", if https { "https" } else { "http" })
}

fn see_other(path: &str) -> Response {
    ([(header::CACHE_CONTROL, "no-store")], Redirect::to(path)).into_response()
}
