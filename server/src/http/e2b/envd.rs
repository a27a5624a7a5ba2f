//! envd's routes (port 49983): files over plain HTTP, the filesystem and
//! processes over Connect RPC with the JSON codec.

use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use axum::Json;
use axum::body::{Body, Bytes};
use axum::extract::{FromRequest, Multipart, Path, Query, Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use base64::Engine;
use serde::Deserialize;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::{InSandbox, json_error, status_of};
use crate::e2b::protocol::{
    self, EntryInfo, FLAG_MESSAGE, ProcessEnd, ProcessEvent, ProcessEventJson, StartRequest,
    WrittenEntry, envelope,
};
use crate::e2b::served::{Command, ServedError, ServedSandbox};
use crate::sandbox::files::{FileEntry, FileKind, permissions};
use crate::sandbox::{RunEvent, SandboxError};
use crate::state::AppState;

fn failed(err: &ServedError) -> Response {
    let (status, message) = status_of(err);
    super::with_retry_after(json_error(status, &message), err)
}

fn files_of(
    state: &AppState,
    sandbox: &ServedSandbox,
) -> Result<std::sync::Arc<dyn crate::sandbox::SandboxSession>, ServedError> {
    let session = state.e2b.session(sandbox)?;
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
    State(state): State<AppState>,
    InSandbox { sandbox }: InSandbox,
    Query(query): Query<FileQuery>,
) -> Response {
    let Some(path) = query.path else {
        return json_error(StatusCode::BAD_REQUEST, "the path is missing");
    };
    let session = match files_of(&state, &sandbox) {
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
pub(super) async fn upload(
    State(state): State<AppState>,
    InSandbox { sandbox }: InSandbox,
    Query(query): Query<FileQuery>,
    request: Request,
) -> Response {
    let session = match files_of(&state, &sandbox) {
        Ok(session) => session,
        Err(e) => return failed(&e),
    };
    let Some(files) = session.files() else {
        return json_error(StatusCode::BAD_REQUEST, "this sandbox has no files");
    };
    let multipart = request
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("multipart/form-data"));
    let mut uploads: Vec<(String, Vec<u8>)> = Vec::new();
    if multipart {
        let mut form = match Multipart::from_request(request, &()).await {
            Ok(form) => form,
            Err(e) => return json_error(StatusCode::BAD_REQUEST, &e.body_text()),
        };
        loop {
            match form.next_field().await {
                Ok(Some(field)) => {
                    if field.name() != Some("file") {
                        continue;
                    }
                    let name = field.file_name().map(str::to_string);
                    let Some(path) = query.path.clone().or(name) else {
                        return json_error(StatusCode::BAD_REQUEST, "the path is missing");
                    };
                    match field.bytes().await {
                        Ok(bytes) => uploads.push((path, bytes.to_vec())),
                        Err(e) => return json_error(e.status(), &e.body_text()),
                    }
                }
                Ok(None) => break,
                Err(e) => return json_error(e.status(), &e.body_text()),
            }
        }
    } else {
        let Some(path) = query.path.clone() else {
            return json_error(StatusCode::BAD_REQUEST, "the path is missing");
        };
        match Bytes::from_request(request, &()).await {
            Ok(bytes) => uploads.push((path, bytes.to_vec())),
            Err(e) => return json_error(e.status(), &e.body_text()),
        }
    }
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
    State(state): State<AppState>,
    InSandbox { sandbox }: InSandbox,
    Path(method): Path<String>,
    body: Bytes,
) -> Response {
    let request: PathRequest = match serde_json::from_slice(&body) {
        Ok(request) => request,
        Err(e) => return connect_error(StatusCode::BAD_REQUEST, &e.to_string()),
    };
    let session = match files_of(&state, &sandbox) {
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

/// Process ids handed out by `Start` (the jail's own pids are not visible).
static NEXT_PID: AtomicU32 = AtomicU32::new(1000);

/// The script a `Start` request runs: `bash -l -c SCRIPT` as the SDK sends
/// it, or the command and its arguments quoted.
fn script(request: &StartRequest) -> String {
    let process = &request.process;
    let is_bash = matches!(
        process.cmd.as_str(),
        "/bin/bash" | "bash" | "/bin/sh" | "sh"
    );
    if is_bash
        && let Some(i) = process.args.iter().position(|a| a == "-c")
        && let Some(script) = process.args.get(i + 1)
    {
        return script.clone();
    }
    std::iter::once(&process.cmd)
        .chain(&process.args)
        .map(|word| crate::sandbox::jail::shell_quote(word))
        .collect::<Vec<_>>()
        .join(" ")
}

/// `/process.Process/{method}`: `Start` streams a command's events; `List`
/// answers that nothing runs in the background.
pub(super) async fn process(
    State(state): State<AppState>,
    InSandbox { sandbox }: InSandbox,
    Path(method): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    match method.as_str() {
        "Start" => start(state, sandbox, &headers, &body),
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

/// A streamed answer: Connect envelopes, ending with the end-of-stream one.
fn start(
    state: AppState,
    sandbox: std::sync::Arc<ServedSandbox>,
    headers: &HeaderMap,
    body: &[u8],
) -> Response {
    let stream_response = |chunks: mpsc::Receiver<Bytes>| {
        let stream = futures::stream::unfold(chunks, |mut chunks| async move {
            chunks
                .recv()
                .await
                .map(|bytes| (Ok::<_, std::convert::Infallible>(bytes), chunks))
        });
        (
            [(header::CONTENT_TYPE, "application/connect+json")],
            Body::from_stream(stream),
        )
            .into_response()
    };
    let (chunks, receiver) = mpsc::channel::<Bytes>(64);
    let request = protocol::single_envelope(body)
        .map_err(|e| e.to_string())
        .and_then(|m| serde_json::from_slice::<StartRequest>(&m).map_err(|e| e.to_string()));
    let request = match request {
        Ok(request) => request,
        Err(message) => {
            let end = protocol::end_stream(Some(("invalid_argument", &message)));
            let _ = chunks.try_send(Bytes::from(end));
            return stream_response(receiver);
        }
    };
    let wall = header_secs(headers, "connect-timeout-ms", true);
    let keepalive = header_secs(headers, "keepalive-ping-interval", false)
        .unwrap_or(Duration::from_secs(90))
        .max(Duration::from_secs(1));
    let pid = NEXT_PID.fetch_add(1, Ordering::Relaxed);
    tokio::spawn(async move {
        let send = |event: ProcessEvent| {
            let chunks = chunks.clone();
            async move {
                let json = serde_json::to_vec(&ProcessEventJson { event }).unwrap_or_default();
                chunks
                    .send(Bytes::from(envelope(FLAG_MESSAGE, &json)))
                    .await
                    .is_ok()
            }
        };
        send(ProcessEvent::Start { pid }).await;
        let cancel = CancellationToken::new();
        let (events, mut received) = mpsc::channel(256);
        let command = Command {
            script: script(&request),
            env: request.process.envs.clone(),
            cwd: request.process.cwd.clone(),
            wall,
        };
        let run = state
            .e2b
            .run_command(&sandbox, command, events, cancel.clone());
        tokio::pin!(run);
        let data = |stream: &str, text: &str| {
            let encoded = base64::engine::general_purpose::STANDARD.encode(text.as_bytes());
            ProcessEvent::Data([(stream.to_string(), encoded)].into())
        };
        let outcome = loop {
            tokio::select! {
                outcome = &mut run => break outcome,
                Some(event) = received.recv() => {
                    let event = match event {
                        RunEvent::Stdout { text, .. } => Some(data("stdout", &text)),
                        RunEvent::Stderr { text, .. } => Some(data("stderr", &text)),
                        _ => None,
                    };
                    if let Some(event) = event && !send(event).await {
                        cancel.cancel();
                    }
                }
                () = chunks.closed(), if !cancel.is_cancelled() => cancel.cancel(),
                () = tokio::time::sleep(keepalive) => {
                    if !send(ProcessEvent::Keepalive {}).await {
                        cancel.cancel();
                    }
                }
            }
        };
        while let Ok(event) = received.try_recv() {
            match event {
                RunEvent::Stdout { text, .. } => send(data("stdout", &text)).await,
                RunEvent::Stderr { text, .. } => send(data("stderr", &text)).await,
                _ => true,
            };
        }
        let end = match outcome {
            Ok(outcome) => {
                let limit = outcome
                    .error
                    .as_ref()
                    .filter(|_| outcome.exit_code.is_none())
                    .map(|e| format!("{}: {}", e.name, e.value));
                let exit_code = outcome.exit_code.unwrap_or(-1);
                let end = ProcessEnd {
                    exit_code,
                    exited: outcome.exit_code.is_some(),
                    status: match &limit {
                        Some(_) => "signal: killed".into(),
                        None => format!("exit status {exit_code}"),
                    },
                    error: limit,
                };
                send(ProcessEvent::End(end)).await;
                protocol::end_stream(None)
            }
            Err(e) => {
                let (status, message) = status_of(&e);
                protocol::end_stream(Some((protocol::connect_code(status.as_u16()), &message)))
            }
        };
        let _ = chunks.send(Bytes::from(end)).await;
    });
    stream_response(receiver)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::e2b::protocol::ProcessConfig;

    fn start(cmd: &str, args: &[&str]) -> StartRequest {
        StartRequest {
            process: ProcessConfig {
                cmd: cmd.into(),
                args: args.iter().map(|a| (*a).to_string()).collect(),
                ..ProcessConfig::default()
            },
            stdin: false,
        }
    }

    #[test]
    fn commands_become_scripts() {
        assert_eq!(
            script(&start("/bin/bash", &["-l", "-c", "echo out; echo err >&2"])),
            "echo out; echo err >&2"
        );
        assert_eq!(
            script(&start("/usr/bin/ls", &["-la", "it's here"])),
            "'/usr/bin/ls' '-la' 'it'\\''s here'"
        );
    }
}
