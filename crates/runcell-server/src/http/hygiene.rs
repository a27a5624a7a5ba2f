//! Request hygiene: a time limit on answers, security headers on every
//! response, CORS for the API only when configured (closed by default), and
//! counts of API requests for the metrics.

use std::time::Duration;

use axum::Router;
use axum::extract::{MatchedPath, Request};
use axum::http::{HeaderName, HeaderValue, Method, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use tower_http::cors::{AllowOrigin, CorsLayer};
use tower_http::set_header::SetResponseHeaderLayer;

use super::ApiError;

/// Answers `503` if the response has not begun within `limit`. A response
/// that has begun (a stream, a socket) is not cut.
pub async fn time_limit(limit: Duration, request: Request, next: Next) -> Response {
    match tokio::time::timeout(limit, next.run(request)).await {
        Ok(response) => response,
        Err(_) => ApiError::Unavailable(format!(
            "no answer within {} seconds; try again",
            limit.as_secs()
        ))
        .into_response(),
    }
}

/// Headers every response carries unless it set its own: no MIME sniffing,
/// never framed by another site, no referrer (share links are secrets in
/// URLs), no scripts, no plugins, forms and base URLs of this site only.
/// Pages that run scripts set their own policy: the app's pages allow
/// only their response's nonce (`app::page_policy`), the frames theirs.
const SECURITY_HEADERS: [(&str, &str); 6] = [
    ("x-content-type-options", "nosniff"),
    ("x-frame-options", "DENY"),
    ("referrer-policy", "no-referrer"),
    (
        "content-security-policy",
        "script-src 'none'; frame-ancestors 'none'; base-uri 'self'; object-src 'none'; \
         form-action 'self'",
    ),
    // Together: the page is cross-origin isolated, which gives it
    // SharedArrayBuffer, the way Stop interrupts Python in the page.
    ("cross-origin-opener-policy", "same-origin"),
    ("cross-origin-embedder-policy", "require-corp"),
];

pub fn with_security_headers<S>(mut router: Router<S>) -> Router<S>
where
    S: Clone + Send + Sync + 'static,
{
    for (name, value) in SECURITY_HEADERS {
        router = router.layer(SetResponseHeaderLayer::if_not_present(
            HeaderName::from_static(name),
            HeaderValue::from_static(value),
        ));
    }
    router
}

/// CORS for `/v1` and `/mcp`: the configured origins may call them with a
/// bearer token (no cookies); none are by default, so browsers refuse every
/// cross-site call.
pub fn cors(origins: &[String]) -> Option<CorsLayer> {
    if origins.is_empty() {
        return None;
    }
    let origins: Vec<HeaderValue> = origins
        .iter()
        .filter_map(|o| HeaderValue::from_str(o.trim_end_matches('/')).ok())
        .collect();
    Some(
        CorsLayer::new()
            .allow_origin(AllowOrigin::list(origins))
            .allow_methods([Method::GET, Method::POST, Method::DELETE])
            .allow_headers([
                header::AUTHORIZATION,
                header::CONTENT_TYPE,
                header::ACCEPT,
                HeaderName::from_static("mcp-session-id"),
                HeaderName::from_static("mcp-protocol-version"),
                HeaderName::from_static("last-event-id"),
            ])
            .expose_headers([
                header::RETRY_AFTER,
                HeaderName::from_static("x-ratelimit-limit"),
                HeaderName::from_static("x-ratelimit-remaining"),
                HeaderName::from_static("x-ratelimit-reset"),
                HeaderName::from_static("mcp-session-id"),
            ])
            .max_age(Duration::from_secs(600)),
    )
}

/// Counts each API request by route (the pattern it matched, so that ids
/// do not multiply the series) and status.
pub async fn count(request: Request, next: Next) -> Response {
    let route = route_label(
        request.extensions().get::<MatchedPath>(),
        request.uri().path(),
    );
    let began = std::time::Instant::now();
    let response = next.run(request).await;
    runcell_core::metrics::api_request_time(&route, began.elapsed());
    runcell_core::metrics::api_request(&route, response.status().as_u16());
    response
}

/// The label of the route a request to `path` matched: its pattern, with
/// the services mounted under a prefix (`/mcp`, the docs), which may match
/// no pattern of ours, named by the prefix.
fn route_label(matched: Option<&MatchedPath>, path: &str) -> String {
    let pattern = matched.map_or(path, MatchedPath::as_str);
    for prefix in ["/mcp", "/v1/docs"] {
        if pattern == prefix || pattern.starts_with(&format!("{prefix}/")) {
            return prefix.into();
        }
    }
    match matched {
        Some(matched) => matched.as_str().into(),
        None => "other".into(),
    }
}

#[cfg(test)]
mod tests {
    use axum::body::Body;
    use axum::routing::get;
    use tower::ServiceExt;

    use super::*;

    fn app() -> Router {
        let limit = Duration::from_millis(50);
        Router::new()
            .route(
                "/slow",
                get(|| async {
                    tokio::time::sleep(Duration::from_secs(5)).await;
                    "late"
                }),
            )
            .route("/quick", get(|| async { "soon" }))
            .layer(axum::middleware::from_fn(
                move |request: Request, next: Next| time_limit(limit, request, next),
            ))
    }

    #[tokio::test]
    async fn an_answer_past_the_limit_is_a_json_503() {
        let response = app()
            .oneshot(Request::get("/slow").body(Body::empty()).expect("request"))
            .await
            .expect("response");
        assert_eq!(response.status(), 503);
        let body = axum::body::to_bytes(response.into_body(), 1024)
            .await
            .expect("body");
        let body: serde_json::Value = serde_json::from_slice(&body).expect("json");
        assert_eq!(body["error"]["code"], "unavailable");
        let response = app()
            .oneshot(Request::get("/quick").body(Body::empty()).expect("request"))
            .await
            .expect("response");
        assert_eq!(response.status(), 200);
    }

    /// What `count` labels a request to `path` with, through real routing.
    async fn label_of(router: Router, path: &str) -> String {
        let router = router.layer(axum::middleware::from_fn(
            |request: Request, next: Next| async move {
                let label = route_label(
                    request.extensions().get::<MatchedPath>(),
                    request.uri().path(),
                );
                let mut response = next.run(request).await;
                response.headers_mut().insert(
                    "x-label",
                    HeaderValue::from_str(&label).expect("a label is a header value"),
                );
                response
            },
        ));
        let response = router
            .oneshot(Request::get(path).body(Body::empty()).expect("request"))
            .await
            .expect("response");
        response.headers()["x-label"]
            .to_str()
            .expect("text")
            .to_string()
    }

    #[tokio::test]
    async fn api_routes_are_labelled_by_pattern() {
        let api = || {
            Router::new()
                .route("/v1/code_interpreter/run", get(|| async { "" }))
                .route("/v1/code_interpreter/sessions/{id}", get(|| async { "" }))
                .route("/v1/whatever/{*rest}", get(|| async { "" }))
                .nest_service("/mcp", get(|| async { "" }))
        };
        assert_eq!(
            label_of(api(), "/v1/code_interpreter/run").await,
            "/v1/code_interpreter/run"
        );
        assert_eq!(
            label_of(api(), "/v1/code_interpreter/sessions/abc").await,
            "/v1/code_interpreter/sessions/{id}"
        );
        assert_eq!(label_of(api(), "/mcp").await, "/mcp");
        assert_eq!(label_of(api(), "/mcp/x").await, "/mcp");
        assert_eq!(
            label_of(api(), "/v1/whatever/else").await,
            "/v1/whatever/{*rest}"
        );
        assert_eq!(route_label(None, "/v1/whatever/else"), "other");
    }

    #[test]
    fn cors_is_closed_unless_origins_are_set() {
        assert!(cors(&[]).is_none());
        assert!(cors(&["https://app.example".into()]).is_some());
    }
}
