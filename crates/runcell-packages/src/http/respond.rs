//! The responses the index sends: their status, headers and body, and how
//! a response is finished for the wire (its length; HEAD without a body).

use bytes::Bytes;
use futures::{Stream, TryStreamExt};
use http::header::{self, HeaderValue};
use http::{Response, StatusCode};
use http_body_util::{BodyExt, Empty, Full, StreamBody};
use hyper::body::{Body, Frame};

use crate::index::Failure;

/// The body of every response the index sends: whole, or streamed from a
/// page or a cached file.
pub type ResponseBody = http_body_util::combinators::BoxBody<Bytes, std::io::Error>;

/// What every text answer (errors, refusals, "not found") is sent as.
const TEXT: &str = "text/plain; charset=utf-8";

/// `status` with `body` as `content_type`.
pub(super) fn with_type(
    status: StatusCode,
    content_type: &'static str,
    body: ResponseBody,
) -> Response<ResponseBody> {
    let mut response = Response::new(body);
    *response.status_mut() = status;
    response
        .headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    response
}

/// `status` with `text` as plain UTF-8 text.
pub(super) fn text(status: StatusCode, text: impl Into<Bytes>) -> Response<ResponseBody> {
    with_type(status, TEXT, whole(text))
}

/// A 405 for a method other than GET and HEAD on one of the routes: no
/// body, and the methods it takes.
pub(super) fn method_not_allowed() -> Response<ResponseBody> {
    let mut response = Response::new(empty());
    *response.status_mut() = StatusCode::METHOD_NOT_ALLOWED;
    response
        .headers_mut()
        .insert(header::ALLOW, HeaderValue::from_static("GET,HEAD"));
    response
}

/// A failure of the index's, said plainly: 404 for a name that is not
/// there or not valid, 403 for a refusal, 502 for an upstream failure.
pub(super) fn failure(failure: Failure) -> Response<ResponseBody> {
    let (status, text) = match failure {
        Failure::NotFound(text) | Failure::BadName(text) => (StatusCode::NOT_FOUND, text),
        Failure::Refused { reason, .. } => (StatusCode::FORBIDDEN, reason),
        Failure::Upstream { reason, .. } => (StatusCode::BAD_GATEWAY, reason),
    };
    self::text(status, format!("{text}\n"))
}

/// The response as it is sent: a body of known length says so in
/// `Content-Length` (unless the response says already), and an answer to
/// HEAD keeps its headers but not its body.
pub(super) fn finish(mut response: Response<ResponseBody>, head: bool) -> Response<ResponseBody> {
    if !response.headers().contains_key(header::CONTENT_LENGTH)
        && let Some(length) = response.body().size_hint().exact()
    {
        response
            .headers_mut()
            .insert(header::CONTENT_LENGTH, HeaderValue::from(length));
    }
    if head {
        *response.body_mut() = empty();
    }
    response
}

/// A body of `bytes`, of known length.
pub(super) fn whole(bytes: impl Into<Bytes>) -> ResponseBody {
    Full::new(bytes.into())
        .map_err(|never| match never {})
        .boxed()
}

/// A body sent a chunk at a time as `chunks` yields them, of unknown length.
pub(super) fn streamed<S, C>(chunks: S) -> ResponseBody
where
    S: Stream<Item = Result<C, std::io::Error>> + Send + Sync + 'static,
    C: Into<Bytes>,
{
    StreamBody::new(chunks.map_ok(|chunk| Frame::data(chunk.into()))).boxed()
}

fn empty() -> ResponseBody {
    Empty::new().map_err(|never| match never {}).boxed()
}
