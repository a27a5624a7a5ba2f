//! Static files with their own caching rules: the hydration bundle (checked
//! on every load), Pyodide's runtime (its directory is named by its content,
//! so it is cached for good) and the worker that runs it, under a policy of
//! its own.

use std::path::Path;

use axum::Router;
use axum::extract::Request;
use axum::http::{HeaderValue, header};
use axum::middleware::Next;
use axum::response::Response;
use tower_http::services::{ServeDir, ServeFile};
use tower_http::set_header::SetResponseHeaderLayer;

/// The worker that runs Python in a page (the Browser sandbox).
pub const WORKER_PATH: &str = "/py-worker.mjs";

/// The worker's own policy (a worker takes it from its script's response):
/// the programs it runs may load scripts and fetch from this site alone, so
/// that they cannot send what the page can read to another origin; Pyodide
/// (same-origin, under `/pyodide/`) needs `wasm-unsafe-eval` to compile its
/// WebAssembly. No JavaScript `eval`, no nested workers, nothing else.
pub const WORKER_CSP: &str =
    "default-src 'none'; script-src 'self' 'wasm-unsafe-eval'; connect-src 'self'";

/// `/pkg`: the wasm bundle, its script and styles, gzipped when asked.
pub fn bundle(site_root: &Path) -> Router {
    Router::new()
        .fallback_service(ServeDir::new(site_root.join("pkg")).precompressed_gzip())
        .layer(SetResponseHeaderLayer::overriding(
            header::CACHE_CONTROL,
            HeaderValue::from_static("no-cache"),
        ))
}

/// `/pyodide`: the Pyodide runtime and vendored wheels the build put under
/// `<site>/pyodide/<version>-<hash>/`.
pub fn pyodide(site_root: &Path) -> Router {
    Router::new()
        .fallback_service(ServeDir::new(site_root.join("pyodide")).precompressed_gzip())
        .layer(axum::middleware::from_fn(runtime_headers))
}

/// [`WORKER_PATH`]: checked on every load, like the bundle it goes with.
pub fn worker(site_root: &Path) -> Router {
    Router::new()
        .fallback_service(ServeFile::new(
            site_root.join(WORKER_PATH.trim_start_matches('/')),
        ))
        .layer(axum::middleware::from_fn(script_type))
        .layer(SetResponseHeaderLayer::overriding(
            header::CACHE_CONTROL,
            HeaderValue::from_static("no-cache"),
        ))
        .layer(SetResponseHeaderLayer::overriding(
            header::CONTENT_SECURITY_POLICY,
            HeaderValue::from_static(WORKER_CSP),
        ))
}

/// The content type a module script must have (browsers refuse module
/// workers and imports served as anything else than JavaScript).
fn javascript_type(path: &str) -> Option<HeaderValue> {
    (path.ends_with(".mjs") || path.ends_with(".js"))
        .then(|| HeaderValue::from_static("text/javascript"))
}

async fn script_type(request: Request, next: Next) -> Response {
    let mut response = next.run(request).await;
    if response.status().is_success() {
        response.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("text/javascript"),
        );
    }
    response
}

async fn runtime_headers(request: Request, next: Next) -> Response {
    let path = request.uri().path().to_string();
    let mut response = next.run(request).await;
    if !response.status().is_success() && response.status().as_u16() != 304 {
        return response;
    }
    let headers = response.headers_mut();
    if let Some(kind) = javascript_type(&path) {
        headers.insert(header::CONTENT_TYPE, kind);
    } else if path.ends_with(".whl") {
        headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/zip"),
        );
    }
    // A directory's name changes with its content.
    headers.insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static("public, max-age=31536000, immutable"),
    );
    headers.insert(
        header::HeaderName::from_static("cross-origin-resource-policy"),
        HeaderValue::from_static("same-origin"),
    );
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scripts_are_javascript() {
        assert_eq!(
            javascript_type("/314.0.7-x/pyodide.mjs").unwrap(),
            "text/javascript"
        );
        assert_eq!(javascript_type("/a.js").unwrap(), "text/javascript");
        assert!(javascript_type("/pyodide.asm.wasm").is_none());
    }
}
