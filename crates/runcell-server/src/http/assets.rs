//! Static files with their own caching rules: the hydration bundle (checked
//! on every load), Pyodide's runtime (its directory is named by its content,
//! so it is cached for good), and the frame and worker that run it, under a
//! policy of their own.
//!
//! The page's Python runs in a frame whose origin is opaque (sandboxed
//! without `allow-same-origin`), so that it holds none of the user's
//! credentials: for it every file it loads from here is cross-origin. The
//! public Python files (the runtime, the worker, the frame's script) are
//! therefore served with `Access-Control-Allow-Origin: *` and
//! `Cross-Origin-Resource-Policy: cross-origin`: they are the same for
//! everyone and carry no cookie. Nothing else is: the API stays unreadable
//! to the frame.

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
/// The document the page frames to run its Python in.
pub const FRAME_PATH: &str = "/py-frame.html";
/// That document's script.
pub const FRAME_SCRIPT_PATH: &str = "/py-frame.js";

/// An interactive chart's frame and its script (see `public/chart-frame.js`).
pub const CHART_FRAME_PATH: &str = "/chart-frame.html";
pub const CHART_SCRIPT_PATH: &str = "/chart-frame.js";

/// An interactive chart's frame: sandboxed however it is loaded, framed by
/// this site's pages alone, scripts from this site alone, and nothing
/// fetched at all (no connection; images only from `data:` and `blob:`), so
/// that a chart never tells another site who is reading it. Vega compiles
/// its own expression language with `Function`, hence `unsafe-eval`: in a
/// frame with an opaque origin that can reach nothing, and only for specs,
/// which are data (plotly.js's strict build needs none).
pub const CHART_FRAME_CSP: &str = "default-src 'none'; script-src 'self' 'unsafe-eval'; \
     style-src 'unsafe-inline'; img-src data: blob:; font-src data:; connect-src 'none'; \
     base-uri 'none'; form-action 'none'; frame-ancestors 'self'; sandbox allow-scripts";

/// The policy the page's Python lives under: the frame's, which its worker
/// (started from a blob: URL) inherits. The programs may load scripts and
/// fetch from this site alone (without credentials: the frame's origin is
/// opaque), so that they cannot send anything to another origin; Pyodide
/// needs `wasm-unsafe-eval` to compile its WebAssembly; the frame starts
/// its worker from a blob: URL. No JavaScript `eval`, nothing else. A macro,
/// so that [`FRAME_CSP`] is built from the same words.
macro_rules! python_csp {
    () => {
        "default-src 'none'; script-src 'self' 'wasm-unsafe-eval'; \
         worker-src blob:; connect-src 'self'; base-uri 'none'; form-action 'none'"
    };
}
pub const PYTHON_CSP: &str = python_csp!();

/// The frame document's policy: [`PYTHON_CSP`], framed by this site's
/// pages alone, and sandboxed however it is loaded (opened on its own, it
/// still gets an opaque origin).
pub const FRAME_CSP: &str = concat!(
    python_csp!(),
    "; frame-ancestors 'self'; sandbox allow-scripts"
);

/// The static files, the same for everyone: the bundle, and what the
/// page's Python frame loads (without cookies, from an opaque origin).
pub fn site<S>(site_root: &Path) -> Router<S>
where
    S: Clone + Send + Sync + 'static,
{
    Router::new()
        .nest_service("/pkg", bundle(site_root))
        .nest_service("/pyodide", pyodide(site_root))
        .route_service(WORKER_PATH, python_script(site_root, WORKER_PATH))
        .route_service(
            FRAME_SCRIPT_PATH,
            python_script(site_root, FRAME_SCRIPT_PATH),
        )
        .route_service(FRAME_PATH, frame(site_root, FRAME_PATH, FRAME_CSP))
        .route_service(
            CHART_FRAME_PATH,
            frame(site_root, CHART_FRAME_PATH, CHART_FRAME_CSP),
        )
        .route_service(
            CHART_SCRIPT_PATH,
            public_to_python(
                no_cache_file(site_root, CHART_SCRIPT_PATH, CHART_FRAME_CSP)
                    .layer(axum::middleware::from_fn(script_type)),
            ),
        )
        .nest_service("/charts", charts(site_root))
}

/// `/charts`: the chart libraries (npm's builds, copied by the build), for
/// the charts' frames, which load them from an opaque origin.
fn charts(site_root: &Path) -> Router {
    public_to_python(
        Router::new()
            .fallback_service(ServeDir::new(site_root.join("charts")).precompressed_gzip())
            .layer(axum::middleware::from_fn(script_type))
            .layer(SetResponseHeaderLayer::overriding(
                header::CACHE_CONTROL,
                HeaderValue::from_static("public, max-age=86400"),
            )),
    )
}

/// `/pkg`: the wasm bundle, its script and styles, sent as compressed at
/// build time (brotli, else gzip) when the browser accepts it.
pub fn bundle(site_root: &Path) -> Router {
    Router::new()
        .fallback_service(
            ServeDir::new(site_root.join("pkg"))
                .precompressed_br()
                .precompressed_gzip(),
        )
        .layer(SetResponseHeaderLayer::overriding(
            header::CACHE_CONTROL,
            HeaderValue::from_static("no-cache"),
        ))
}

/// `/pyodide`: the Pyodide runtime and vendored wheels the build put under
/// `<site>/pyodide/<version>-<hash>/`.
pub fn pyodide(site_root: &Path) -> Router {
    public_to_python(
        Router::new()
            .fallback_service(ServeDir::new(site_root.join("pyodide")).precompressed_gzip())
            .layer(axum::middleware::from_fn(runtime_headers)),
    )
}

/// [`WORKER_PATH`] and [`FRAME_SCRIPT_PATH`]: scripts checked on every
/// load, like the bundle they go with.
fn python_script(site_root: &Path, path: &str) -> Router {
    public_to_python(
        no_cache_file(site_root, path, PYTHON_CSP).layer(axum::middleware::from_fn(script_type)),
    )
}

/// A frame's document ([`FRAME_PATH`], [`CHART_FRAME_PATH`]), under its
/// policy, which this site's pages alone may frame (the security headers'
/// `DENY` is for every other page).
fn frame(site_root: &Path, path: &str, csp: &'static str) -> Router {
    no_cache_file(site_root, path, csp)
        .layer(SetResponseHeaderLayer::overriding(
            header::X_FRAME_OPTIONS,
            HeaderValue::from_static("SAMEORIGIN"),
        ))
        .layer(SetResponseHeaderLayer::overriding(
            CROSS_ORIGIN_RESOURCE_POLICY,
            HeaderValue::from_static("same-origin"),
        ))
}

/// The site's file at `path`, checked on every load, under `csp`.
fn no_cache_file(site_root: &Path, path: &str, csp: &'static str) -> Router {
    Router::new()
        .fallback_service(ServeFile::new(site_root.join(path.trim_start_matches('/'))))
        .layer(SetResponseHeaderLayer::overriding(
            header::CACHE_CONTROL,
            HeaderValue::from_static("no-cache"),
        ))
        .layer(SetResponseHeaderLayer::overriding(
            header::CONTENT_SECURITY_POLICY,
            HeaderValue::from_static(csp),
        ))
}

const CROSS_ORIGIN_RESOURCE_POLICY: header::HeaderName =
    header::HeaderName::from_static("cross-origin-resource-policy");

/// Readable from any origin, the page's opaque-origin frame among them:
/// for the public Python files only.
fn public_to_python(router: Router) -> Router {
    router
        .layer(SetResponseHeaderLayer::overriding(
            header::ACCESS_CONTROL_ALLOW_ORIGIN,
            HeaderValue::from_static("*"),
        ))
        .layer(SetResponseHeaderLayer::overriding(
            CROSS_ORIGIN_RESOURCE_POLICY,
            HeaderValue::from_static("cross-origin"),
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
