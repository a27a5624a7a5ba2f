//! The jail-facing HTTP side: three routes that parse, ask the index and
//! map its answer, and the listener that serves them for one account.

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio::task::JoinSet;

use crate::PackageIndex;
use crate::account::Account;
use crate::config::Mode;
use crate::index::Failure;
use crate::page::{self, Format};

/// How long a request head may take, and a kept-alive connection may idle.
const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(30);
/// How long the listener waits after `accept` fails before it tries again.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(100);

#[derive(Clone)]
struct Jail {
    index: Arc<PackageIndex>,
    account: Arc<Account>,
}

pub(crate) fn router(index: Arc<PackageIndex>, account: Arc<Account>) -> Router {
    Router::new()
        .route("/simple/", get(root))
        .route("/simple/{project}/", get(project))
        .route("/files/{sha256}/{filename}", get(file))
        .fallback(|| async { (StatusCode::NOT_FOUND, "not found\n") })
        .with_state(Jail { index, account })
}

fn format_of(headers: &HeaderMap) -> Format {
    Format::from_accept(headers.get(header::ACCEPT).and_then(|v| v.to_str().ok()))
}

fn page_response(body: String, format: Format) -> Response {
    ([(header::CONTENT_TYPE, format.content_type())], body).into_response()
}

/// `/simple/`: the projects this session itself asked for, never what
/// other sessions (other people) installed.
async fn root(State(jail): State<Jail>, headers: HeaderMap) -> Response {
    let format = format_of(&headers);
    if jail.index.config().mode == Mode::Off {
        let text = "runcell's package index is off (packages.mode = \"off\")\n";
        return (StatusCode::FORBIDDEN, text).into_response();
    }
    page_response(page::render_root(&jail.account.asked(), format), format)
}

async fn project(
    State(jail): State<Jail>,
    Path(project): Path<String>,
    headers: HeaderMap,
) -> Response {
    let format = format_of(&headers);
    match jail.index.project_files(&jail.account, &project).await {
        // Streamed from the shared page as the jail reads it: a request
        // costs its indices and one chunk, not a rendered copy of the page.
        Ok((page, listed)) => (
            [(header::CONTENT_TYPE, format.content_type())],
            axum::body::Body::from_stream(page::render_project_stream(
                &project, page, listed, format,
            )),
        )
            .into_response(),
        Err(failure) => failure.into_response(),
    }
}

async fn file(
    State(jail): State<Jail>,
    Path((sha256, filename)): Path<(String, String)>,
) -> Response {
    let served = match jail.index.file(&jail.account, &sha256, &filename).await {
        Ok(served) => served,
        Err(failure) => return failure.into_response(),
    };
    let file = match tokio::fs::File::open(&served.path).await {
        Ok(file) => file,
        Err(err) => {
            tracing::warn!(%err, path = %served.path.display(), "a cached package file could not be opened");
            return (
                StatusCode::INTERNAL_SERVER_ERROR,
                "the cached file could not be read\n",
            )
                .into_response();
        }
    };
    let body = axum::body::Body::from_stream(tokio_util::io::ReaderStream::new(file));
    let mut response = body.into_response();
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/octet-stream"),
    );
    headers.insert(header::CONTENT_LENGTH, HeaderValue::from(served.bytes));
    response
}

impl IntoResponse for Failure {
    fn into_response(self) -> Response {
        let (status, text) = match self {
            Self::NotFound(text) | Self::BadName(text) => (StatusCode::NOT_FOUND, text),
            Self::Refused { reason, .. } => (StatusCode::FORBIDDEN, reason),
            Self::Upstream { reason, .. } => (StatusCode::BAD_GATEWAY, reason),
        };
        (
            status,
            [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
            format!("{text}\n"),
        )
            .into_response()
    }
}

/// Serves the index on `listener` for `account`, over HTTP/1 only (one
/// request at a time per connection: HTTP/2's many streams on one
/// connection would let a jail past the connection cap): at most
/// [`crate::account::MAX_CONNECTIONS`] connections of the account's at once,
/// over all its listeners (a session has one for each of its jails); a
/// connection over that is taken and waits for one to end (the next ones
/// wait in the listen queue). Each ends when this future is dropped.
///
/// The permit is asked for after `accept`, never before: a listener idle
/// in `accept` holds none, so a session with more jails than permits (its
/// kernels, contexts and a command) still has them all for the one that
/// installs.
pub(crate) async fn serve(index: Arc<PackageIndex>, listener: TcpListener, account: Arc<Account>) {
    let app = router(index, Arc::clone(&account));
    let mut builder = auto::Builder::new(TokioExecutor::new()).http1_only();
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(HEADER_READ_TIMEOUT);
    let mut connections = JoinSet::new();
    loop {
        while connections.try_join_next().is_some() {}
        let stream = match listener.accept().await {
            Ok((stream, _)) => stream,
            Err(err) if is_transient(&err) => {
                tracing::warn!(%err, account = account.label(), "the package index's listener failed to accept");
                tokio::time::sleep(ACCEPT_BACKOFF).await;
                continue;
            }
            Err(err) => {
                tracing::warn!(%err, account = account.label(), "the package index's listener failed");
                return;
            }
        };
        let Ok(permit) = Arc::clone(&account.connections).acquire_owned().await else {
            return;
        };
        let connection = builder
            .serve_connection(TokioIo::new(stream), TowerToHyperService::new(app.clone()))
            .into_owned();
        connections.spawn(async move {
            if let Err(err) = connection.await {
                tracing::debug!(%err, "a package index connection ended with an error");
            }
            drop(permit);
        });
    }
}

/// Whether `accept` failed for this once (a connection gone before it was
/// taken, or out of descriptors or memory for now) rather than for good.
fn is_transient(err: &std::io::Error) -> bool {
    use std::io::ErrorKind;
    matches!(
        err.kind(),
        ErrorKind::ConnectionAborted
            | ErrorKind::ConnectionReset
            | ErrorKind::Interrupted
            | ErrorKind::WouldBlock
    ) || matches!(err.raw_os_error(), Some(12 | 23 | 24 | 105))
}
