//! envd's routes (port 49983): files over plain HTTP, the filesystem and
//! processes over Connect RPC with the JSON codec.

use std::sync::Arc;
use std::time::Duration;

use axum::Json;
use axum::body::{Body, Bytes};
use axum::extract::{FromRequest, Multipart, Path, Query, Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use futures::StreamExt;
use futures::stream::BoxStream;
use serde::Deserialize;
use tokio_stream::wrappers::ReceiverStream;

use super::{InSandbox, MaxUpload, json_error, status_of};
use crate::e2b::protocol::{
    self, EntryInfo, FLAG_MESSAGE, ProcessEvent, ProcessEventJson, StartRequest, WrittenEntry,
    envelope,
};
use crate::e2b::served::{
    DEFAULT_KEEPALIVE, ProcessOptions, ProcessStep, Served, ServedError, ServedSandbox,
};
use crate::http::ApiError;
use crate::http::spool::Spool;
use runcell_sandbox::SandboxError;
use runcell_sandbox::files::{Contents, FileEntry, FileKind, permissions};

fn failed(err: &ServedError) -> Response {
    let (status, message) = status_of(err);
    super::with_retry_after(json_error(status, &message), err)
}

fn files_of(
    served: &Served,
    sandbox: &ServedSandbox,
) -> Result<Arc<dyn runcell_sandbox::SandboxSession>, ServedError> {
    let session = served.session(sandbox)?;
    if session.files().is_none() {
        return Err(SandboxError::NotSupported("this sandbox has no files".into()).into());
    }
    Ok(session)
}

/// `GET /envs`: the sandbox's environment variables.
pub(super) async fn envs(InSandbox { sandbox }: InSandbox) -> Response {
    Json(&sandbox.env_vars).into_response()
}

#[derive(Debug, Deserialize)]
pub(super) struct FileQuery {
    path: Option<String>,
}

/// `GET /files?path=`: the file's bytes.
pub(super) async fn download(
    State(served): State<Arc<Served>>,
    InSandbox { sandbox }: InSandbox,
    Query(query): Query<FileQuery>,
) -> Response {
    let Some(path) = query.path else {
        return json_error(StatusCode::BAD_REQUEST, "the path is missing");
    };
    let session = match files_of(&served, &sandbox) {
        Ok(session) => session,
        Err(e) => return failed(&e),
    };
    let Some(files) = session.files() else {
        return json_error(StatusCode::BAD_REQUEST, "this sandbox has no files");
    };
    match files.read(&path).await {
        // Saved, never shown: a sandbox's HTML or SVG must not open as a
        // page of this origin.
        Ok(bytes) => {
            crate::http::upload::download(path.rsplit('/').next().unwrap_or("file"), bytes)
        }
        Err(e) => failed(&e.into()),
    }
}

/// `POST /files?path=`: multipart (field `file`, its file name the path
/// when the query has none) or raw bytes; parents are made, files replaced.
/// Each file streams to the spool as it arrives (at most a sandbox's disk
/// in all), then from there into the sandbox.
pub(super) async fn upload(
    State(served): State<Arc<Served>>,
    State(spool): State<Arc<Spool>>,
    State(MaxUpload(max)): State<MaxUpload>,
    InSandbox { sandbox }: InSandbox,
    Query(query): Query<FileQuery>,
    request: Request,
) -> Response {
    let session = match files_of(&served, &sandbox) {
        Ok(session) => session,
        Err(e) => return failed(&e),
    };
    let Some(files) = session.files() else {
        return json_error(StatusCode::BAD_REQUEST, "this sandbox has no files");
    };
    let uploads = match spooled(&spool, request, query.path, max).await {
        Ok(uploads) => uploads,
        Err(e) => return refused(&e),
    };
    let mut written = Vec::new();
    for (path, bytes) in uploads {
        match files.write(&path, bytes).await {
            Ok(entry) => written.push(WrittenEntry {
                path: entry.path,
                name: entry.name,
                kind: "file".into(),
            }),
            Err(e) => return failed(&e.into()),
        }
    }
    Json(written).into_response()
}

/// The files of an upload, spooled: a raw body to `path`, or each `file`
/// field of a form (to `path`, else to its file name); `max` bytes in all.
async fn spooled(
    spool: &Spool,
    request: Request,
    path: Option<String>,
    max: u64,
) -> Result<Vec<(String, Contents)>, ApiError> {
    let multipart = request
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("multipart/form-data"));
    let place = spool.place()?;
    if !multipart {
        let path = path.ok_or_else(|| ApiError::BadRequest("the path is missing".into()))?;
        return Ok(vec![(
            path,
            spool.body(&place, request.into_body(), max).await?,
        )]);
    }
    let mut form = Multipart::from_request(request, &())
        .await
        .map_err(|e| ApiError::BadRequest(e.body_text()))?;
    let mut uploads = Vec::new();
    let mut total = 0;
    while let Some(field) = form
        .next_field()
        .await
        .map_err(|e| ApiError::BadRequest(e.body_text()))?
    {
        if field.name() != Some("file") {
            continue;
        }
        let name = field.file_name().map(str::to_string);
        let path = path
            .clone()
            .or(name)
            .ok_or_else(|| ApiError::BadRequest("the path is missing".into()))?;
        let bytes = spool
            .take(&place, field, max - total, |e| {
                ApiError::BadRequest(e.body_text())
            })
            .await?;
        total += bytes.len();
        uploads.push((path, bytes));
    }
    Ok(uploads)
}

/// An upload refused before it reached the sandbox, as envd's JSON error.
fn refused(err: &ApiError) -> Response {
    let mut response = json_error(err.status(), &err.to_string());
    if matches!(err, ApiError::Busy(_)) {
        response
            .headers_mut()
            .insert(header::RETRY_AFTER, axum::http::HeaderValue::from(1u32));
    }
    response
}

/// A Connect error for a unary call.
fn connect_error(status: StatusCode, message: &str) -> Response {
    (
        status,
        Json(serde_json::json!({
            "code": protocol::connect_code(status.as_u16()),
            "message": message,
        })),
    )
        .into_response()
}

fn connect_failed(err: &ServedError) -> Response {
    let (status, message) = status_of(err);
    connect_error(status, &message)
}

fn entry_info(entry: FileEntry) -> EntryInfo {
    EntryInfo {
        kind: match entry.kind {
            FileKind::File => protocol::FILE_TYPE_FILE,
            FileKind::Directory => protocol::FILE_TYPE_DIRECTORY,
            FileKind::Symlink => protocol::FILE_TYPE_SYMLINK,
            FileKind::Other => protocol::FILE_TYPE_UNSPECIFIED,
        }
        .into(),
        permissions: permissions(entry.kind, entry.mode),
        name: entry.name,
        path: entry.path,
        size: entry.size,
        mode: entry.mode,
        owner: "user".into(),
        group: "user".into(),
        modified_time: entry.modified_ms.map(protocol::rfc3339),
        symlink_target: entry.symlink_target,
    }
}

#[derive(Debug, Default, Deserialize)]
struct PathRequest {
    #[serde(default)]
    path: String,
    #[serde(default)]
    depth: Option<u32>,
}

/// `/filesystem.Filesystem/{method}`: unary calls with JSON bodies.
pub(super) async fn filesystem(
    State(served): State<Arc<Served>>,
    InSandbox { sandbox }: InSandbox,
    Path(method): Path<String>,
    body: Bytes,
) -> Response {
    let request: PathRequest = match serde_json::from_slice(&body) {
        Ok(request) => request,
        Err(e) => return connect_error(StatusCode::BAD_REQUEST, &e.to_string()),
    };
    let session = match files_of(&served, &sandbox) {
        Ok(session) => session,
        Err(e) => return connect_failed(&e),
    };
    let Some(files) = session.files() else {
        return connect_error(StatusCode::BAD_REQUEST, "this sandbox has no files");
    };
    let answer = match method.as_str() {
        "ListDir" => files
            .list(&request.path, request.depth.unwrap_or(1))
            .await
            .map(|entries| {
                let entries: Vec<EntryInfo> = entries.into_iter().map(entry_info).collect();
                serde_json::json!({ "entries": entries })
            }),
        "Stat" => files
            .stat(&request.path)
            .await
            .map(|entry| serde_json::json!({ "entry": entry_info(entry) })),
        "MakeDir" => match files.make_dir(&request.path).await {
            Ok(true) => files
                .stat(&request.path)
                .await
                .map(|entry| serde_json::json!({ "entry": entry_info(entry) })),
            Ok(false) => {
                return connect_error(
                    StatusCode::CONFLICT,
                    &format!("directory {} already exists", request.path),
                );
            }
            Err(e) => Err(e),
        },
        "Remove" => files
            .remove(&request.path)
            .await
            .map(|()| serde_json::json!({})),
        other => {
            return connect_error(
                StatusCode::NOT_IMPLEMENTED,
                &format!("filesystem.Filesystem/{other} is not available on this server"),
            );
        }
    };
    match answer {
        Ok(json) => Json(json).into_response(),
        Err(e) => connect_failed(&e.into()),
    }
}

/// `/process.Process/{method}`: `Start` streams a command's events; `List`
/// answers that nothing runs in the background.
pub(super) async fn process(
    State(served): State<Arc<Served>>,
    InSandbox { sandbox }: InSandbox,
    Path(method): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    match method.as_str() {
        "Start" => start(&served, sandbox, &headers, &body),
        "List" => Json(serde_json::json!({ "processes": [] })).into_response(),
        other => connect_error(
            StatusCode::NOT_IMPLEMENTED,
            &format!("process.Process/{other} is not available on this server"),
        ),
    }
}

fn header_secs(headers: &HeaderMap, name: &str, unit_ms: bool) -> Option<Duration> {
    let value: u64 = headers.get(name)?.to_str().ok()?.trim().parse().ok()?;
    Some(if unit_ms {
        Duration::from_millis(value)
    } else {
        Duration::from_secs(value)
    })
}

/// `Start`'s answer: the process's steps as Connect envelopes, ending with
/// the end-of-stream one. The lifecycle is the served side's
/// ([`Served::start_process`]); dropping this body stops the command.
fn start(
    served: &Arc<Served>,
    sandbox: Arc<ServedSandbox>,
    headers: &HeaderMap,
    body: &[u8],
) -> Response {
    let stream = |chunks: BoxStream<'static, Bytes>| {
        (
            [(header::CONTENT_TYPE, "application/connect+json")],
            Body::from_stream(chunks.map(Ok::<_, std::convert::Infallible>)),
        )
            .into_response()
    };
    let request = protocol::single_envelope(body)
        .map_err(|e| e.to_string())
        .and_then(|m| serde_json::from_slice::<StartRequest>(&m).map_err(|e| e.to_string()));
    let request = match request {
        Ok(request) => request,
        Err(message) => {
            let end = protocol::end_stream(Some(("invalid_argument", &message)));
            return stream(futures::stream::once(async { Bytes::from(end) }).boxed());
        }
    };
    let options = ProcessOptions {
        wall: header_secs(headers, "connect-timeout-ms", true),
        keepalive: header_secs(headers, "keepalive-ping-interval", false)
            .unwrap_or(DEFAULT_KEEPALIVE),
    };
    let steps = served.start_process(sandbox, &request, options);
    stream(ReceiverStream::new(steps).map(envelope_of).boxed())
}

/// A process step as the Connect envelope(s) that carry it: its end is
/// followed by the end of the stream, a failure is the stream's end.
fn envelope_of(step: ProcessStep) -> Bytes {
    let message = |event: ProcessEvent| {
        let json = serde_json::to_vec(&ProcessEventJson { event }).unwrap_or_default();
        envelope(FLAG_MESSAGE, &json)
    };
    Bytes::from(match step {
        ProcessStep::Event(end @ ProcessEvent::End(_)) => {
            let mut bytes = message(end);
            bytes.extend(protocol::end_stream(None));
            bytes
        }
        ProcessStep::Event(event) => message(event),
        ProcessStep::Failed(e) => {
            let (status, message) = status_of(&e);
            protocol::end_stream(Some((protocol::connect_code(status.as_u16()), &message)))
        }
    })
}
