//! Keeping sessions: the list, rename, delete, share links and forks. Each
//! action has a JSON route under `/api` for programs and a form route the
//! page posts to (answered with a redirect), so it works without JavaScript.
//! Each parses, calls the notebook service and maps its answer.

use std::sync::Arc;

use axum::Json;
use axum::extract::rejection::FormRejection;
use axum::extract::{Form, Path, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Redirect, Response};
use serde::Deserialize;
use serde_json::json;

use super::ApiError;
use super::extract::{ApiForm, ApiJson, ApiQuery, OwnedSession};
use super::navigation::Navigation;
use super::owner::Owner;
use super::request_origin::RequestOrigin;
use runcell_agent::notebook::{AskedTurn, Notebooks, parse_link_token};
use runcell_protocol::OwnerId;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TitleBody {
    title: String,
}

#[derive(Debug, Default, Deserialize)]
pub struct NewSessionForm {
    #[serde(default)]
    message: String,
    /// A bundled sample file the session gets before its first question
    /// (the first screen's suggestions): `sales`.
    #[serde(default)]
    sample: Option<String>,
}

/// The sample files the first screen's suggestions can bring along.
const SAMPLES: [(&str, &str, &[u8]); 1] = [(
    "sales",
    "sales.csv",
    include_bytes!("../../assets/samples/sales.csv"),
)];

/// `POST /sessions` (form): a new session of the visitor's, asked its first
/// question if one was typed; then its page, where the turn streams. Only
/// a post makes a session: `GET /` changes nothing. A refusal is a page
/// for a browser's navigation.
pub async fn create_form(
    State(notebooks): State<Arc<Notebooks>>,
    Owner(owner): Owner,
    navigation: Navigation,
    form: Result<Form<NewSessionForm>, FormRejection>,
) -> Response {
    navigation.answer(create_with(&notebooks, owner, form).await)
}

async fn create_with(
    notebooks: &Notebooks,
    owner: OwnerId,
    form: Result<Form<NewSessionForm>, FormRejection>,
) -> Result<Response, ApiError> {
    // A bare post (no form at all) asks for an empty session.
    let form = match form {
        Ok(Form(form)) => form,
        Err(FormRejection::InvalidFormContentType(_)) => NewSessionForm::default(),
        Err(err) => return Err(ApiError::BadRequest(err.body_text())),
    };
    let sample = match form.sample.as_deref().filter(|s| !s.is_empty()) {
        None => None,
        Some(name) => Some(
            SAMPLES
                .iter()
                .find(|(sample, ..)| *sample == name)
                .ok_or_else(|| ApiError::BadRequest(format!("there is no sample `{name}`")))?,
        ),
    };
    let channel = notebooks.create(owner).await?;
    if let Some((_, file, bytes)) = sample
        && let Err(err) = notebooks
            .upload(&channel, file, (*bytes).into(), false)
            .await
    {
        notebooks.delete(&channel).await?;
        return Err(err.into());
    }
    let text = form.message.trim();
    if !text.is_empty() {
        let turn = AskedTurn::question(text);
        if let Err(refusal) = notebooks.start(&channel, turn).await {
            // The session stands, empty; the page says why the question
            // was not taken rather than losing it silently.
            notebooks.delete(&channel).await?;
            return Err(refusal.into());
        }
    }
    Ok(see_other(&format!("/sessions/{}", channel.id())))
}

/// `POST /api/sessions`: a new, empty session of the caller's.
pub async fn create(
    State(notebooks): State<Arc<Notebooks>>,
    Owner(owner): Owner,
) -> Result<Response, ApiError> {
    Ok(created(notebooks.create(owner).await?.id()))
}

/// `201` for a new session: its page in `Location`, and `{"id", "url"}`.
pub(super) fn created(id: runcell_protocol::SessionId) -> Response {
    let url = format!("/sessions/{id}");
    (
        StatusCode::CREATED,
        [(header::LOCATION, url.clone())],
        Json(json!({ "id": id.to_string(), "url": url })),
    )
        .into_response()
}

/// `GET /api/sessions`: the caller's sessions that have begun, most recent
/// first.
pub async fn list(
    State(notebooks): State<Arc<Notebooks>>,
    Owner(owner): Owner,
) -> Result<Response, ApiError> {
    let sessions: Vec<_> = notebooks
        .list(owner)
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
    State(notebooks): State<Arc<Notebooks>>,
    OwnedSession(channel): OwnedSession,
    ApiJson(body): ApiJson<TitleBody>,
) -> Result<Response, ApiError> {
    let title = notebooks.rename(&channel, &body.title).await?;
    Ok(Json(json!({ "id": channel.id().to_string(), "title": title })).into_response())
}

/// `DELETE /api/sessions/{id}`: the session, its events, outputs and links.
pub async fn delete(
    State(notebooks): State<Arc<Notebooks>>,
    OwnedSession(channel): OwnedSession,
) -> Result<StatusCode, ApiError> {
    notebooks.delete(&channel).await?;
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
    State(notebooks): State<Arc<Notebooks>>,
    ApiQuery(options): ApiQuery<ShareOptions>,
    origin: RequestOrigin,
    OwnedSession(channel): OwnedSession,
) -> Result<Response, ApiError> {
    let files = options.files()?;
    let link = notebooks.share(&channel, files).await?;
    Ok(Json(json!({
        "url": format!("{}{}", origin.base_url(), link.token.path()),
        "path": link.token.path(),
        "token": link.token.to_string(),
        "upto_seq": link.upto_seq,
        "files": link.files,
    }))
    .into_response())
}

/// `DELETE /api/sessions/{id}/share`: revokes the link; it 404s from now on.
pub async fn unshare(
    State(notebooks): State<Arc<Notebooks>>,
    OwnedSession(channel): OwnedSession,
) -> Result<StatusCode, ApiError> {
    notebooks.unshare(&channel).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// `POST /s/{token}/fork`: a new session of the caller's with the shared
/// cells copied; answered with a redirect to it (a refusal is a page for a
/// browser's navigation).
pub async fn fork(
    State(notebooks): State<Arc<Notebooks>>,
    Owner(owner): Owner,
    navigation: Navigation,
    Path(token): Path<String>,
) -> Response {
    let forked = async {
        let channel = notebooks.fork(owner, &parse_link_token(&token)?).await?;
        Ok(see_other(&format!("/sessions/{}", channel.id())))
    };
    navigation.answer(forked.await)
}

// The page's forms.

#[derive(Debug, Deserialize)]
pub struct TitleForm {
    title: String,
}

/// `POST /sessions/{id}/rename` (form).
pub async fn rename_form(
    State(notebooks): State<Arc<Notebooks>>,
    OwnedSession(channel): OwnedSession,
    ApiForm(form): ApiForm<TitleForm>,
) -> Result<Response, ApiError> {
    notebooks.rename(&channel, &form.title).await?;
    Ok(see_other(&format!("/sessions/{}", channel.id())))
}

/// `POST /sessions/{id}/ask` (form): the page's composer without scripts.
/// The question is asked as over the socket; back to the session's page,
/// which reloads itself while the turn runs.
pub async fn ask_form(
    State(notebooks): State<Arc<Notebooks>>,
    OwnedSession(channel): OwnedSession,
    ApiForm(form): ApiForm<NewSessionForm>,
) -> Result<Response, ApiError> {
    let text = form.message.trim();
    if !text.is_empty() {
        let turn = AskedTurn::question(text);
        notebooks.start(&channel, turn).await?;
    }
    Ok(see_other(&format!("/sessions/{}", channel.id())))
}

/// `POST /sessions/{id}/delete` (form): back to a new session.
pub async fn delete_form(
    State(notebooks): State<Arc<Notebooks>>,
    OwnedSession(channel): OwnedSession,
) -> Result<Response, ApiError> {
    notebooks.delete(&channel).await?;
    Ok(see_other("/"))
}

/// `POST /sessions/{id}/share` (form): back to the session, which now shows
/// its link.
pub async fn share_form(
    State(notebooks): State<Arc<Notebooks>>,
    OwnedSession(channel): OwnedSession,
    ApiForm(options): ApiForm<ShareOptions>,
) -> Result<Response, ApiError> {
    let files = options.files()?;
    notebooks.share(&channel, files).await?;
    Ok(see_other(&format!("/sessions/{}#share", channel.id())))
}

/// `POST /sessions/{id}/unshare` (form).
pub async fn unshare_form(
    State(notebooks): State<Arc<Notebooks>>,
    OwnedSession(channel): OwnedSession,
) -> Result<Response, ApiError> {
    notebooks.unshare(&channel).await?;
    Ok(see_other(&format!("/sessions/{}", channel.id())))
}

fn see_other(path: &str) -> Response {
    ([(header::CACHE_CONTROL, "no-store")], Redirect::to(path)).into_response()
}
