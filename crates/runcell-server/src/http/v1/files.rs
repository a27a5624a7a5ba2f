//! `/v1/code_interpreter/sessions/{id}/files`: a session's files in
//! `/home/user`: upload, list, download, delete. Paths are confined to the
//! home; links made by code that lead out of it are refused both ways.

use std::sync::Arc;

use axum::Json;
use axum::extract::{Path, Request, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::auth::Caller;
use crate::code_api::CodeApi;
use crate::config::Config;
use crate::http::ApiError;
use crate::http::error::ErrorBody;
use crate::http::extract::ApiQuery;
use crate::http::upload::{download, uploads};
use runcell_sandbox::files::FileEntry;

#[derive(Debug, Deserialize)]
pub struct FileQuery {
    /// The file, absolute under `/home/user` or relative to it
    /// (`data/sales.csv`). Uploads of a form may name a directory ending
    /// in `/`, or leave it out: each file keeps its own name.
    path: Option<String>,
    /// Replace a file that is there already (uploads only; otherwise 409).
    #[serde(default)]
    overwrite: bool,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct FileList {
    pub files: Vec<FileEntry>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct Uploaded {
    pub files: Vec<FileEntry>,
}

/// List the session's files, or download one with `?path=`.
#[utoipa::path(
    get,
    path = "/v1/code_interpreter/sessions/{id}/files",
    tag = "code_interpreter",
    params(
        ("id" = String, Path, description = "The session's id"),
        ("path" = Option<String>, Query, description = "The file, absolute under `/home/user` or relative to it; uploads of a form may name a directory ending in `/` or leave it out (each file keeps its name)"),
        ("overwrite" = Option<bool>, Query, description = "Uploads: replace a file that is there already (otherwise 409)"),
    ),
    security(("bearer" = [])),
    responses(
        (status = 200, description = "Without `path`: every file and directory under `/home/user`. With it: the file's bytes, with its content type and name", body = FileList),
        (status = 400, description = "A path outside `/home/user`, a directory, or a link out of the home", body = ErrorBody),
        (status = 401, description = "Missing, invalid, expired or revoked credentials", body = ErrorBody),
        (status = 404, description = "No such session of this key, or no such file", body = ErrorBody),
    )
)]
pub async fn get_files(
    State(api): State<Arc<CodeApi>>,
    caller: Caller,
    Path(id): Path<String>,
    ApiQuery(params): ApiQuery<FileQuery>,
) -> Result<Response, ApiError> {
    match params.path {
        None => {
            let files = api.list_files(&caller, &id).await?;
            Ok(Json(FileList { files }).into_response())
        }
        Some(path) => {
            let (entry, bytes) = api.read_file(&caller, &id, &path).await?;
            Ok(download(&entry.name, bytes))
        }
    }
}

/// Upload files into the session: a raw body to `?path=`, or a multipart
/// form's files.
#[utoipa::path(
    put,
    path = "/v1/code_interpreter/sessions/{id}/files",
    tag = "code_interpreter",
    params(
        ("id" = String, Path, description = "The session's id"),
        ("path" = Option<String>, Query, description = "The file, absolute under `/home/user` or relative to it; uploads of a form may name a directory ending in `/` or leave it out (each file keeps its name)"),
        ("overwrite" = Option<bool>, Query, description = "Uploads: replace a file that is there already (otherwise 409)"),
    ),
    request_body(content = Vec<u8>, description = "The file's bytes, or a multipart/form-data form with file fields", content_type = "application/octet-stream"),
    security(("bearer" = [])),
    responses(
        (status = 201, description = "Written", body = Uploaded),
        (status = 400, description = "No path, a path outside `/home/user`, or a link out of the home", body = ErrorBody),
        (status = 401, description = "Missing, invalid, expired or revoked credentials", body = ErrorBody),
        (status = 404, description = "No such session of this key", body = ErrorBody),
        (status = 409, description = "A file is there already and `overwrite` was not asked for", body = ErrorBody),
        (status = 413, description = "A file over the upload limit, or the session's disk is full", body = ErrorBody),
    )
)]
pub async fn put_files(
    State(api): State<Arc<CodeApi>>,
    State(config): State<Arc<Config>>,
    State(spool): State<Arc<crate::http::Spool>>,
    caller: Caller,
    Path(id): Path<String>,
    ApiQuery(params): ApiQuery<FileQuery>,
    request: Request,
) -> Result<Response, ApiError> {
    // Nothing is read from a session that is not the caller's.
    api.session(&caller, &id)?;
    let max = config.sandbox.upload_bytes();
    let mut written = Vec::new();
    for upload in uploads(&spool, request, params.path.as_deref(), max).await? {
        let (entry, _) = api
            .write_file(&caller, &id, &upload.path, upload.bytes, params.overwrite)
            .await?;
        written.push(entry);
    }
    Ok((StatusCode::CREATED, Json(Uploaded { files: written })).into_response())
}

/// Delete a file (or an empty directory) from the session.
#[utoipa::path(
    delete,
    path = "/v1/code_interpreter/sessions/{id}/files",
    tag = "code_interpreter",
    params(
        ("id" = String, Path, description = "The session's id"),
        ("path" = Option<String>, Query, description = "The file, absolute under `/home/user` or relative to it; uploads of a form may name a directory ending in `/` or leave it out (each file keeps its name)"),
        ("overwrite" = Option<bool>, Query, description = "Uploads: replace a file that is there already (otherwise 409)"),
    ),
    security(("bearer" = [])),
    responses(
        (status = 204, description = "Deleted"),
        (status = 400, description = "No path, or a path outside `/home/user`", body = ErrorBody),
        (status = 401, description = "Missing, invalid, expired or revoked credentials", body = ErrorBody),
        (status = 404, description = "No such session of this key, or no such file", body = ErrorBody),
    )
)]
pub async fn delete_file(
    State(api): State<Arc<CodeApi>>,
    caller: Caller,
    Path(id): Path<String>,
    ApiQuery(params): ApiQuery<FileQuery>,
) -> Result<StatusCode, ApiError> {
    let path = params
        .path
        .ok_or_else(|| ApiError::BadRequest("say which file: ?path=".into()))?;
    api.delete_file(&caller, &id, &path).await?;
    Ok(StatusCode::NO_CONTENT)
}
