//! `/api/sessions/{id}/files`: a notebook session's files in `/home/user`,
//! for its owner's pages: list, download (`?path=`), upload (a raw body to
//! `?path=`, refused over `sandbox.upload_mib` and when it would replace a
//! file unless `overwrite=true`), delete. And `/s/{token}/files`: what a
//! share link offers.

use std::sync::Arc;

use axum::Json;
use axum::extract::{Path, Request, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Deserialize;

use super::ApiError;
use super::extract::{ApiQuery, OwnedSession};
use super::spool::Spool;
use super::upload::{download, uploads};
use crate::config::Config;
use runcell_agent::notebook::{NotebookError, Notebooks};
use runcell_protocol::ShareToken;

#[derive(Debug, Deserialize)]
pub struct FileQuery {
    path: Option<String>,
    #[serde(default)]
    overwrite: bool,
}

impl FileQuery {
    fn path(self) -> Result<String, ApiError> {
        self.path
            .ok_or_else(|| ApiError::BadRequest("say which file: ?path=".into()))
    }
}

/// `GET`: the list (`{"files": [...]}`), or one file's bytes with `?path=`.
pub async fn get(
    State(notebooks): State<Arc<Notebooks>>,
    ApiQuery(params): ApiQuery<FileQuery>,
    OwnedSession(channel): OwnedSession,
) -> Result<Response, ApiError> {
    match params.path {
        None => {
            let files = notebooks.list_files(&channel).await?;
            Ok(Json(serde_json::json!({ "files": files })).into_response())
        }
        Some(path) => {
            let (entry, bytes) = notebooks.read_file(&channel, &path).await?;
            Ok(download(&entry.name, bytes))
        }
    }
}

/// `PUT ?path=`: an upload; answers the file as written.
pub async fn put(
    State(notebooks): State<Arc<Notebooks>>,
    State(config): State<Arc<Config>>,
    State(spool): State<Arc<Spool>>,
    ApiQuery(params): ApiQuery<FileQuery>,
    OwnedSession(channel): OwnedSession,
    request: Request,
) -> Result<Response, ApiError> {
    let max = config.sandbox.upload_bytes();
    let mut written = Vec::new();
    for upload in uploads(&spool, request, params.path.as_deref(), max).await? {
        let entry = notebooks
            .upload(&channel, &upload.path, upload.bytes, params.overwrite)
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
    State(notebooks): State<Arc<Notebooks>>,
    ApiQuery(params): ApiQuery<FileQuery>,
    OwnedSession(channel): OwnedSession,
) -> Result<StatusCode, ApiError> {
    let path = params.path()?;
    notebooks.delete_file(&channel, &path).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// `GET /s/{token}/files?path=`: a file the link offers (its owner shared
/// the session's files with it), as it was when shared.
pub async fn shared_get(
    State(notebooks): State<Arc<Notebooks>>,
    Path(token): Path<String>,
    ApiQuery(params): ApiQuery<FileQuery>,
) -> Result<Response, ApiError> {
    let path = params.path()?;
    // A token that does not parse offers no files, like one that is gone.
    let token: ShareToken = token.parse().map_err(|_| NotebookError::NoSharedFiles)?;
    let (entry, bytes) = notebooks.read_shared_file(&token, &path).await?;
    Ok(download(&entry.name, bytes))
}
