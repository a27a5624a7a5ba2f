//! One request, answered: the route and method, the segments decoded, then
//! the index asked and its answer mapped.

use http::header::{self, HeaderMap, HeaderValue};
use http::{Method, Request, Response, StatusCode};

use super::respond::{self, ResponseBody};
use super::route::{self, InvalidUtf8, Route};
use crate::PackageIndex;
use crate::account::Account;
use crate::config::Mode;
use crate::page::{self, Format};

/// The answer to `request` from `account`'s jail. GET and HEAD are
/// answered alike (HEAD without the body); another method on a route
/// gets 405, a path that is no route 404. The request's body is not read.
pub(crate) async fn answer<B>(
    index: &PackageIndex,
    account: &Account,
    request: Request<B>,
) -> Response<ResponseBody> {
    let (parts, _body) = request.into_parts();
    let head = parts.method == Method::HEAD;
    let response = match route::route(parts.uri.path()) {
        None => respond::text(StatusCode::NOT_FOUND, "not found\n"),
        Some(_) if !(parts.method == Method::GET || head) => {
            return respond::method_not_allowed();
        }
        Some(route) => {
            let format = format_of(&parts.headers);
            match on_route(index, account, route, format).await {
                Ok(response) => response,
                Err(invalid) => {
                    tracing::debug!(
                        account = account.label(),
                        segment = invalid.key,
                        "a package request's path is not UTF-8"
                    );
                    respond::text(StatusCode::BAD_REQUEST, invalid.to_string())
                }
            }
        }
    };
    respond::finish(response, head)
}

async fn on_route(
    index: &PackageIndex,
    account: &Account,
    route: Route<'_>,
    format: Format,
) -> Result<Response<ResponseBody>, InvalidUtf8> {
    Ok(match route {
        Route::Root => root(index, account, format),
        Route::Project(project) => self::project(index, account, &project.decode()?, format).await,
        Route::File { sha256, filename } => {
            let sha256 = sha256.decode()?;
            file(index, account, &sha256, &filename.decode()?).await
        }
    })
}

fn format_of(headers: &HeaderMap) -> Format {
    Format::from_accept(headers.get(header::ACCEPT).and_then(|v| v.to_str().ok()))
}

/// `/simple/`: the projects this session itself asked for, never what
/// other sessions (other people) installed.
fn root(index: &PackageIndex, account: &Account, format: Format) -> Response<ResponseBody> {
    if index.config().mode == Mode::Off {
        let text = "runcell's package index is off (packages.mode = \"off\")\n";
        return respond::text(StatusCode::FORBIDDEN, text);
    }
    let page = page::render_root(&account.asked(), format);
    respond::with_type(StatusCode::OK, format.content_type(), respond::whole(page))
}

/// `/simple/{project}/`: the project's page, streamed from the shared page
/// as the jail reads it (a request costs its indices and one chunk, not a
/// rendered copy of the page).
async fn project(
    index: &PackageIndex,
    account: &Account,
    project: &str,
    format: Format,
) -> Response<ResponseBody> {
    match index.project_files(account, project).await {
        Ok((page, listed)) => {
            let chunks = page::render_project_stream(project, page, listed, format);
            let chunks = futures::TryStreamExt::map_err(chunks, |never| match never {});
            respond::with_type(
                StatusCode::OK,
                format.content_type(),
                respond::streamed(chunks),
            )
        }
        Err(failure) => respond::failure(failure),
    }
}

/// `/files/{sha256}/{filename}`: the file, streamed from the cache, with
/// its length.
async fn file(
    index: &PackageIndex,
    account: &Account,
    sha256: &str,
    filename: &str,
) -> Response<ResponseBody> {
    let served = match index.file(account, sha256, filename).await {
        Ok(served) => served,
        Err(failure) => return respond::failure(failure),
    };
    let file = match tokio::fs::File::open(&served.path).await {
        Ok(file) => file,
        Err(err) => {
            tracing::warn!(%err, path = %served.path.display(), "a cached package file could not be opened");
            return respond::text(
                StatusCode::INTERNAL_SERVER_ERROR,
                "the cached file could not be read\n",
            );
        }
    };
    let mut response = respond::with_type(
        StatusCode::OK,
        "application/octet-stream",
        respond::streamed(tokio_util::io::ReaderStream::new(file)),
    );
    response
        .headers_mut()
        .insert(header::CONTENT_LENGTH, HeaderValue::from(served.bytes));
    response
}
