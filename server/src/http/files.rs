//! `/api/sessions/{id}/files`: a notebook session's files in `/home/user`,
//! for its owner's pages: list, download (`?path=`), upload (a raw body to
//! `?path=`, refused over `sandbox.upload_mib` and when it would replace a
//! file unless `overwrite=true`), delete.

use axum::Json;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Path, Query, Request, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Deserialize;

use super::ApiError;
use super::notebook::owned;
use super::owner::Owner;
use super::upload::{download, uploads};
use crate::agent::FilesError;
use crate::sandbox::sessions::SessionError;
use crate::state::AppState;

#[derive(Debug, Deserialize)]
pub struct FileQuery {
    path: Option<String>,
    #[serde(default)]
    overwrite: bool,
}

impl From<FilesError> for ApiError {
    fn from(err: FilesError) -> Self {
        match err {
            FilesError::Exists(path) => Self::Conflict(format!(
                "{path} exists already: upload it again with overwrite to replace it"
            )),
            FilesError::Session(SessionError::Sandbox(err)) | FilesError::Sandbox(err) => {
                err.into()
            }
            FilesError::Session(SessionError::NotFound(_)) => {
                Self::NotFound("the session's kernel is gone; try again".into())
            }
            FilesError::Session(err @ SessionError::TooMany(_)) => {
                Self::Unavailable(err.to_string())
            }
            FilesError::Session(err @ SessionError::OwnerFull(_)) => Self::Busy(err.to_string()),
        }
    }
}

fn query(query: Result<Query<FileQuery>, QueryRejection>) -> Result<FileQuery, ApiError> {
    query
        .map(|Query(q)| q)
        .map_err(|e| ApiError::BadRequest(e.body_text()))
}

/// `GET`: the list (`{"files": [...]}`), or one file's bytes with `?path=`.
pub async fn get(
    State(state): State<AppState>,
    owner: Owner,
    Path(id): Path<String>,
    params: Result<Query<FileQuery>, QueryRejection>,
) -> Result<Response, ApiError> {
    let params = query(params)?;
    let channel = owned(&state, owner, &id).await?;
    let kernels = state.runner.agent().kernels();
    match params.path {
        None => {
            let files = kernels.list_files(channel.id()).await?;
            Ok(Json(serde_json::json!({ "files": files })).into_response())
        }
        Some(path) => {
            let (entry, bytes) = kernels.read_file(channel.id(), &path).await?;
            Ok(download(&entry.name, bytes))
        }
    }
}

/// `PUT ?path=`: an upload; answers the file as written.
pub async fn put(
    State(state): State<AppState>,
    owner: Owner,
    Path(id): Path<String>,
    params: Result<Query<FileQuery>, QueryRejection>,
    request: Request,
) -> Result<Response, ApiError> {
    let params = query(params)?;
    let channel = owned(&state, owner, &id).await?;
    let max = state.config.sandbox.upload_bytes();
    let kernels = state.runner.agent().kernels();
    let mut written = Vec::new();
    for upload in uploads(request, params.path.as_deref(), max).await? {
        let entry = kernels
            .upload(channel.id(), &upload.path, upload.bytes, params.overwrite)
            .await?;
        written.push(entry);
    }
    Ok((
        StatusCode::CREATED,
        Json(serde_json::json!({ "files": written })),
    )
        .into_response())
}

/// `DELETE ?path=`.
pub async fn delete(
    State(state): State<AppState>,
    owner: Owner,
    Path(id): Path<String>,
    params: Result<Query<FileQuery>, QueryRejection>,
) -> Result<StatusCode, ApiError> {
    let path = query(params)?
        .path
        .ok_or_else(|| ApiError::BadRequest("say which file: ?path=".into()))?;
    let channel = owned(&state, owner, &id).await?;
    state
        .runner
        .agent()
        .kernels()
        .delete_file(channel.id(), &path)
        .await?;
    Ok(StatusCode::NO_CONTENT)
}

/// The share link behind `token`, if it is live and offers files.
async fn files_link(state: &AppState, token: &str) -> Option<crate::store::ShareRecord> {
    let token: crate::session::ShareToken = token.parse().ok()?;
    match state.sessions.store().shared(&token).await {
        Ok(Some(link)) if link.files => Some(link),
        Ok(_) => None,
        Err(err) => {
            tracing::warn!(%err, "a share link could not be read");
            None
        }
    }
}

/// `GET /s/{token}/files?path=`: a file the link offers (its owner shared
/// the session's files with it), as it was when shared.
pub async fn shared_get(
    State(state): State<AppState>,
    Path(token): Path<String>,
    params: Result<Query<FileQuery>, QueryRejection>,
) -> Result<Response, ApiError> {
    let path = query(params)?
        .path
        .ok_or_else(|| ApiError::BadRequest("say which file: ?path=".into()))?;
    let link = files_link(&state, &token)
        .await
        .ok_or_else(|| ApiError::NotFound("this link offers no files".into()))?;
    let (entry, bytes) = state
        .runner
        .agent()
        .kernels()
        .read_shared_file(link.session_id, &path)
        .await?;
    Ok(download(&entry.name, bytes))
}

/// The shared page's list of what its link offers.
pub struct LinkFiles(pub AppState);

#[async_trait::async_trait]
impl app::api::ports::ShareLinkFiles for LinkFiles {
    async fn files(&self, token: &str) -> Vec<app::api::FileItem> {
        let Some(link) = files_link(&self.0, token).await else {
            return Vec::new();
        };
        self.0
            .runner
            .agent()
            .kernels()
            .shared_files(link.session_id)
            .await
            .into_iter()
            .map(|entry| app::api::FileItem {
                path: entry.path,
                name: entry.name,
                kind: "file".into(),
                size: entry.size,
                modified_ms: entry.modified_ms,
            })
            .collect()
    }
}
