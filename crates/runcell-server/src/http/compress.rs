//! Compressed answers: pages, styles, scripts, JSON documents and plain
//! text leave gzip- or brotli-compressed when the client accepts it. What
//! streams as it happens (NDJSON turns and runs, E2B's Connect and NDJSON
//! streams, server-sent events) is never compressed: an encoder holds bytes
//! back until it has enough, and a stream's point is that nothing waits.
//! Nor is what is already compressed (images, the precompressed bundle)
//! or costly to compress on every load for little gain (Pyodide's wasm,
//! cached for good once loaded).

use axum::http::{HeaderMap, Response, header};
use tower_http::compression::predicate::{Predicate, SizeAbove};
use tower_http::compression::{CompressionLayer, CompressionLevel};

/// Smaller answers are not worth a compressor's header and time.
const MIN_BYTES: u16 = 512;

/// The content types worth compressing, by their essence (no parameters).
const TEXTUAL: [&str; 7] = [
    "text/html",
    "text/css",
    "text/plain",
    "text/javascript",
    "application/javascript",
    "application/json",
    "image/svg+xml",
];

/// Whether a response is one that should be compressed: a textual type
/// that is not a stream, not already encoded.
#[derive(Clone, Copy, Debug, Default)]
pub struct Textual;

impl Predicate for Textual {
    fn should_compress<B>(&self, response: &Response<B>) -> bool
    where
        B: axum::body::HttpBody,
    {
        compressible(response.headers())
    }
}

fn compressible(headers: &HeaderMap) -> bool {
    if headers.contains_key(header::CONTENT_ENCODING) {
        return false;
    }
    let Some(kind) = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
    else {
        return false;
    };
    let essence = kind
        .split(';')
        .next()
        .unwrap_or_default()
        .trim()
        .to_ascii_lowercase();
    TEXTUAL.contains(&essence.as_str())
}

/// The layer: gzip and brotli at their default levels, for textual answers
/// of at least [`MIN_BYTES`] (when their size is known).
pub fn layer() -> CompressionLayer<impl Predicate> {
    CompressionLayer::new()
        .gzip(true)
        .br(true)
        .quality(CompressionLevel::Default)
        .compress_when(Textual.and(SizeAbove::new(MIN_BYTES)))
}

#[cfg(test)]
mod tests {
    use axum::http::HeaderValue;

    use super::*;

    fn headers(kind: &str, encoding: Option<&str>) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_str(kind).expect("a header value"),
        );
        if let Some(encoding) = encoding {
            headers.insert(
                header::CONTENT_ENCODING,
                HeaderValue::from_str(encoding).expect("a header value"),
            );
        }
        headers
    }

    #[test]
    fn pages_and_documents_are_compressed_streams_and_images_are_not() {
        for kind in [
            "text/html; charset=utf-8",
            "text/css",
            "text/plain; version=0.0.4; charset=utf-8",
            "application/json",
            "Application/JavaScript",
            "image/svg+xml",
        ] {
            assert!(compressible(&headers(kind, None)), "{kind}");
        }
        for kind in [
            "application/x-ndjson",
            "application/connect+json",
            "text/event-stream",
            "image/png",
            "application/octet-stream",
        ] {
            assert!(!compressible(&headers(kind, None)), "{kind}");
        }
        assert!(
            !compressible(&headers("text/css", Some("gzip"))),
            "already encoded"
        );
        assert!(!compressible(&HeaderMap::new()), "no type");
    }
}
