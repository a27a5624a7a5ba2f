//! NDJSON answers: one JSON value a line, streamed as it is produced. The
//! notebook's turns (`/api/sessions/{id}/ask`…) and the run API's events
//! (`/v1/code_interpreter/run` with `Accept: application/x-ndjson`) both
//! answer this way.

use std::convert::Infallible;

use axum::body::{Body, Bytes};
use axum::http::{HeaderMap, HeaderValue, header};
use axum::response::Response;
use futures::{Stream, StreamExt};
use serde::Serialize;

pub const CONTENT_TYPE: &str = "application/x-ndjson";

/// The request's `Accept` asks for NDJSON.
pub fn wanted(headers: &HeaderMap) -> bool {
    headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.contains(CONTENT_TYPE))
}

/// `value` as one line; `fallback` (a line of the same protocol saying so)
/// if it cannot be encoded.
pub fn line(value: &impl Serialize, fallback: &str) -> Bytes {
    let mut text = serde_json::to_string(value).unwrap_or_else(|e| {
        tracing::error!(%e, "cannot encode an NDJSON line");
        fallback.to_string()
    });
    text.push('\n');
    Bytes::from(text)
}

/// A streamed NDJSON answer, never cached.
pub fn response<S>(lines: S) -> Response
where
    S: Stream<Item = Bytes> + Send + 'static,
{
    let mut response = Response::new(Body::from_stream(lines.map(Ok::<Bytes, Infallible>)));
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(CONTENT_TYPE));
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_ends_with_one_newline_and_holds_no_other() {
        let bytes = line(&serde_json::json!({"text": "a\nb"}), "{}");
        assert_eq!(bytes.iter().filter(|&&b| b == b'\n').count(), 1);
        assert!(bytes.ends_with(b"\n"));
    }

    #[test]
    fn accept_headers_that_ask_for_ndjson() {
        let mut headers = HeaderMap::new();
        assert!(!wanted(&headers));
        headers.insert(
            header::ACCEPT,
            HeaderValue::from_static("application/json, application/x-ndjson"),
        );
        assert!(wanted(&headers));
    }
}
