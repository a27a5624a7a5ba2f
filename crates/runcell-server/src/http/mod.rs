//! HTTP: routes, pages and the WebSocket. Handlers parse, call the domain, map.

mod account;
mod admin;
mod assets;
mod compress;
mod cookies;
mod document;
mod e2b;
pub mod error;
mod extract;
mod figures;
mod files;
pub mod host;
mod hygiene;
mod ipynb;
mod jupyter;
mod kernels;
mod listener;
mod mcp;
pub mod mcp_sessions;
mod metrics;
mod navigation;
mod ndjson;
mod oidc;
mod origin;
pub mod owner;
mod page_ports;
mod people;
mod reactive;
mod request_origin;
mod sessions;
mod signin;
pub mod spool;
pub mod state;
mod terminal;
mod theme;
mod turns;
mod upload;
mod v1;
pub(crate) mod ws;

use std::sync::Arc;

use app::api::ports::{
    ArcModelCatalog, ArcSandboxChoices, ArcSessionPages, ArcShareLinkFiles, UploadLimit,
};
use app::{App, shell};
use axum::Router;
use axum::body::Body;
use axum::extract::{DefaultBodyLimit, FromRef, MatchedPath, Request, State};
use axum::http::{Method, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use futures::future::BoxFuture;
use leptos::prelude::provide_context;
use leptos_axum::{LeptosRoutes, generate_route_list};
use std::time::Duration;
use tower::ServiceExt;
use tower_http::services::ServeDir;
use tower_http::trace::TraceLayer;

pub use error::ApiError;
pub use listener::{ConnectionLimits, peer_of, serve as serve_connections};
pub use spool::Spool;
pub use v1::openapi;

use crate::http::state::AppState;
use crate::http::v1::run::RunState;
use runcell_agent::notebook::Notebooks;
use runcell_llm::catalog::Catalog;

/// Request bodies (server-function calls) above this are refused.
const MAX_BODY_BYTES: usize = 1024 * 1024;

/// The whole HTTP surface: one router per area, each with its own layers,
/// composed here.
pub fn router(state: AppState) -> Router {
    // Install the recorder before anything is recorded.
    if runcell_core::metrics::handle().is_none() {
        tracing::warn!("another metrics recorder is installed: /metrics will be empty");
    }
    let request_limit = Duration::from_secs(state.config.http.request_timeout_secs);
    let context = page_context(&state);

    // The pages and their routes: behind the sign-in gate, except signing
    // in and viewing a share link.
    let pages = with_time_limit(pages(&state, context.clone()), request_limit)
        .merge(uploads(
            request_limit.max(UPLOAD_TIME_LIMIT),
            ipynb::ImportGate::new(
                state.config.notebook.imports_in_flight as usize,
                usize::try_from(state.config.notebook.import_mib)
                    .unwrap_or(usize::MAX)
                    .saturating_mul(1024 * 1024)
                    .min(runcell_agent::notebook::MAX_IMPORT_BYTES),
            ),
        ))
        .layer(axum::middleware::from_fn_with_state(
            owner::ClientNotes::from_ref(&state),
            owner::note_client,
        ))
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            signin::gate,
        ))
        .merge(with_time_limit(open_pages(&state, context), request_limit))
        // Renders and server functions find their reactive owner in
        // thread-locals across awaits: each request keeps its own.
        .layer(axum::middleware::from_fn(reactive::own_reactive_scope))
        .layer(axum::middleware::from_fn_with_state(
            owner::OwnerState::from_ref(&state),
            owner::owner_layer,
        ))
        // Before a cookie is read or made: form posts, `/api/sessions` and
        // server functions come from this server's pages only.
        .layer(axum::middleware::from_fn_with_state(
            state.hosts.clone(),
            origin::refuse_cross_site,
        ));

    // Static files, the same for everyone: outside the sign-in gate and the
    // owner cookie, since the page's Python frame (an opaque origin) loads
    // them without cookies.
    let statics = with_time_limit(assets::site(&state.config.site_root), request_limit);

    let mut all = api(&state)
        .merge(pages)
        .merge(scrape(&state))
        .merge(statics);
    if state.config.serves_e2b() {
        // Requests that name a sandbox are E2B's data plane, whatever the path.
        all = all.layer(axum::middleware::from_fn_with_state(
            e2b::data_plane(
                Arc::clone(&state.e2b),
                Arc::clone(&state.spool),
                usize::try_from(state.config.sandbox.disk_mib * 1024 * 1024).unwrap_or(usize::MAX),
            ),
            e2b::dispatch,
        ));
    }
    // Before anything else: a request for another host name is refused
    // (DNS rebinding). Only `/healthz` answers whatever the name.
    if state.config.addr.ip().is_unspecified() && state.config.http.allowed_hosts.is_empty() {
        tracing::warn!(
            "listening on every address, but only loopback names are answered: list the names this server is reached by in RUNCELL_ALLOWED_HOSTS"
        );
    }
    let all = all.layer(axum::middleware::from_fn_with_state(
        state.hosts.clone(),
        host::refuse_other_hosts,
    ));
    let all = Router::new().route("/healthz", get(healthz)).merge(all);
    hygiene::with_security_headers(all)
        .layer(compress::layer())
        .layer(TraceLayer::new_for_http().make_span_with(request_span))
        .with_state(state)
}

/// What the page's server functions and renders find in their context:
/// the ports, all but the model list answered by the notebook service.
fn page_context(state: &AppState) -> impl Fn() + Clone + Send + Sync + 'static {
    let notebooks = Arc::new(page_ports::NotebookPorts(Arc::clone(&state.notebooks)));
    let logs: ArcSessionPages = notebooks.clone();
    let catalog: ArcModelCatalog = Arc::new(page_ports::ModelPort(Arc::clone(&state.models)));
    let sandboxes: ArcSandboxChoices = notebooks.clone();
    let upload_limit = UploadLimit(state.config.sandbox.upload_bytes() as u64);
    let link_files: ArcShareLinkFiles = notebooks;
    move || {
        provide_context(Arc::clone(&logs));
        provide_context(Arc::clone(&catalog));
        provide_context(Arc::clone(&sandboxes));
        provide_context(upload_limit);
        provide_context(Arc::clone(&link_files));
    }
}

/// The path of the shared page, `/s/{token}`, as Leptos lists it.
const SHARED_PAGE: &str = "/s/{token}";

/// The pages, their forms and JSON routes, the session socket and the
/// server functions; the fallback renders the page's "not found" or a file
/// of the site. All behind the sign-in gate (a layer the caller adds).
fn pages(state: &AppState, context: impl Fn() + Clone + Send + Sync + 'static) -> Router<AppState> {
    let leptos = state.leptos.clone();
    let routes = generate_route_list(App)
        .into_iter()
        .filter(|route| route.path() != SHARED_PAGE)
        .collect();
    Router::new()
        .route("/sessions", post(sessions::create_form))
        .route("/ws/sessions/{id}", get(ws::session_socket))
        .route("/api/models", get(models))
        .route("/api/sessions", post(sessions::create).get(sessions::list))
        .route(
            "/api/sessions/{id}",
            axum::routing::patch(sessions::rename).delete(sessions::delete),
        )
        .route("/api/kernels", get(kernels::list))
        .route(
            "/api/sessions/{id}/kernel",
            axum::routing::delete(kernels::close),
        )
        .route("/api/sessions/{id}/ask", post(turns::ask))
        .route("/api/sessions/{id}/run", post(turns::run))
        .route("/api/sessions/{id}/rerun", post(turns::rerun))
        .route("/api/sessions/{id}/stop", post(turns::stop))
        .route("/api/sessions/{id}/composing", post(turns::composing))
        .route("/api/sessions/{id}/events", get(turns::events))
        .route(
            "/api/sessions/{id}/share",
            post(sessions::share).delete(sessions::unshare),
        )
        .route("/theme", post(theme::set))
        .route("/sessions/{id}/ask", post(sessions::ask_form))
        .route("/sessions/{id}/rename", post(sessions::rename_form))
        .route("/sessions/{id}/delete", post(sessions::delete_form))
        .route("/sessions/{id}/share", post(sessions::share_form))
        .route("/sessions/{id}/unshare", post(sessions::unshare_form))
        .route("/s/{token}/fork", post(sessions::fork))
        .route("/terminal", post(terminal::offer))
        .route("/account", get(account::overview))
        .route("/account/keys", post(account::create))
        .route("/account/keys/{id}/revoke", post(account::revoke))
        .route("/admin", get(admin::overview))
        .route("/admin/users/{id}", get(admin::user_page))
        .route("/admin/users/{id}/role", post(admin::set_role))
        .route("/admin/users/{id}/limits", post(admin::set_limits))
        .route("/admin/users/{id}/status", post(admin::set_status))
        .route("/api/owner/join", post(terminal::join))
        .route("/sessions/{id}/figures/{name}", get(figures::owned))
        .route("/api/sessions/{id}/notebook.ipynb", get(ipynb::owned))
        .route("/s/{token}/figures/{name}", get(figures::shared))
        .leptos_routes_with_context(state, routes, context.clone(), move || {
            shell(leptos.clone())
        })
        .fallback(site_file_or_page(state, context))
        .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
}

/// The page context with the router's state too, as leptos_axum gives its
/// routes: for pages rendered outside them.
fn with_state(
    state: &AppState,
    context: impl Fn() + Clone + Send + Sync + 'static,
) -> impl Fn() + Clone + Send + Sync + 'static {
    let state = state.clone();
    move || {
        provide_context(state.clone());
        context();
    }
}

/// Any other path: a file of the site (the icon, say), else the page's
/// "not found".
///
/// Not leptos_axum's `file_and_error_handler`, which answers a file from
/// inside `Owner::new()`: a child of whatever reactive owner the worker
/// thread last made current. A page's render makes its own root owner
/// current and leaves it so (`Owner::new_root`), so a file answered on
/// that thread while the page was still rendering found the page's
/// `ResponseOptions` and moved its headers onto the file: the page went out
/// with the default `script-src 'none'`, its scripts nonce'd for a policy
/// it never got, and never came to life. A file here never meets the
/// reactive system.
fn site_file_or_page(
    state: &AppState,
    context: impl Fn() + Clone + Send + Sync + 'static,
) -> impl Fn(Request) -> BoxFuture<'static, Response> + Clone + Send + Sync + 'static {
    let files = ServeDir::new(&*state.leptos.site_root)
        .precompressed_br()
        .precompressed_gzip();
    let leptos = state.leptos.clone();
    let page = leptos_axum::render_app_async_with_context(with_state(state, context), move || {
        shell(leptos.clone())
    });
    move |request: Request| {
        let files = files.clone();
        let page = page.clone();
        Box::pin(async move {
            let (parts, body) = request.into_parts();
            if matches!(parts.method, Method::GET | Method::HEAD) {
                let Ok(file) = files
                    .oneshot(Request::from_parts(parts.clone(), Body::empty()))
                    .await;
                if file.status().is_success() || file.status() == StatusCode::NOT_MODIFIED {
                    return file.map(Body::new);
                }
            }
            let mut response = page(Request::from_parts(parts, body)).await;
            // The app's "not found" says 404 itself; whatever else came
            // to be rendered here is not a page of ours either.
            if response.status() == StatusCode::OK {
                *response.status_mut() = StatusCode::NOT_FOUND;
            }
            response
        })
    }
}

/// What needs no sign-in: signing in and out, and a share link's page and
/// files (the link is the permission). An unusual path (dot or empty
/// segments) is still gated, since the page renderer would resolve it to
/// another page.
fn open_pages(
    state: &AppState,
    context: impl Fn() + Clone + Send + Sync + 'static,
) -> Router<AppState> {
    let leptos = state.leptos.clone();
    Router::new()
        .route("/login", get(signin::form).post(signin::sign_in))
        .route("/logout", post(signin::sign_out))
        .route("/auth/oidc/start", get(oidc::start))
        .route(oidc::CALLBACK_PATH, get(oidc::callback))
        .route(
            SHARED_PAGE,
            get(leptos_axum::render_app_async_with_context(
                with_state(state, context),
                move || shell(leptos.clone()),
            )),
        )
        .route("/s/{token}/files", get(files::shared_get))
        .route("/s/{token}/notebook.ipynb", get(ipynb::shared))
        .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
        .route_layer(axum::middleware::from_fn_with_state(
            state.clone(),
            signin::gate_unusual,
        ))
}

/// Programs' routes: `/v1`, `/mcp` and E2B's control plane, with bearer
/// credentials and no cookies; a run's own wall time on top of the time
/// limit.
fn api(state: &AppState) -> Router<AppState> {
    let limit = state.config.http.request_timeout_secs + state.config.sandbox.max_timeout_secs;
    let mut api = v1::router(&state.config)
        .merge(jupyter::router())
        .nest_service(
            "/mcp",
            mcp::service(RunState::from_ref(state), &state.mcp_sessions),
        );
    if state.config.serves_e2b() {
        api = api.merge(e2b::control_plane());
    }
    let mut api = with_time_limit(api, Duration::from_secs(limit));
    // `/mcp` is not a handler of ours: it is authenticated here, and each
    // MCP session is bound to the key that opened it.
    api = api.layer(axum::middleware::from_fn_with_state(
        (Arc::clone(&state.auth), Arc::clone(&state.mcp_sessions)),
        mcp::authenticate,
    ));
    if let Some(cors) = hygiene::cors(&state.config.http.cors_origins) {
        api = api.layer(cors);
    }
    // Outermost, so that refusals and time-outs are counted too.
    api.layer(axum::middleware::from_fn(hygiene::count))
}

/// Scrapers: no cookie is made for them; a key when the pages need one.
fn scrape(state: &AppState) -> Router<AppState> {
    Router::new()
        .route("/metrics", get(metrics::render))
        .route_layer(axum::middleware::from_fn_with_state(
            state.clone(),
            metrics::gate,
        ))
}

/// A session's files: uploads are not held to the page's body limit
/// (`sandbox.upload_mib` bounds them as they stream in), and have `limit`
/// to arrive, since an upload's answer begins only once its body is in.
fn uploads(limit: Duration, imports: ipynb::ImportGate) -> Router<AppState> {
    let files = Router::new()
        .route(
            "/api/sessions/{id}/files",
            get(files::get)
                .put(files::put)
                .delete(files::delete)
                .layer(DefaultBodyLimit::disable()),
        )
        .route(
            "/api/sessions/import",
            post(ipynb::import).layer(axum::Extension(imports)),
        );
    with_time_limit(files, limit)
}

/// Answers 503 when a request has no answer within `limit`.
fn with_time_limit<S>(router: Router<S>, limit: Duration) -> Router<S>
where
    S: Clone + Send + Sync + 'static,
{
    router.layer(axum::middleware::from_fn(
        move |request: Request, next: axum::middleware::Next| {
            hygiene::time_limit(limit, request, next)
        },
    ))
}

/// How long a session's files request may take to be answered: an upload
/// of 50 MiB at about half a megabit a second.
const UPLOAD_TIME_LIMIT: Duration = Duration::from_secs(15 * 60);

/// One span per request, named by its route rather than its path, so that
/// session ids do not multiply the span names.
fn request_span(request: &axum::http::Request<Body>) -> tracing::Span {
    let route = request
        .extensions()
        .get::<MatchedPath>()
        .map_or("fallback", MatchedPath::as_str);
    tracing::info_span!("http", method = %request.method(), route)
}

async fn healthz(State(notebooks): State<Arc<Notebooks>>) -> impl IntoResponse {
    axum::Json(serde_json::json!({
        "status": "ok",
        "sessions": notebooks.open_count(),
    }))
}

/// `GET /api/models`: the models on offer, as the page's picker shows them.
async fn models(State(models): State<Arc<Catalog>>) -> impl IntoResponse {
    axum::Json(models.choices())
}

#[cfg(test)]
mod tests {
    use axum::body::Body;
    use axum::http::{Method, Request, StatusCode};
    use tower::ServiceExt;

    use super::*;
    use crate::config::AuthMode;

    /// Whether a request from a stranger (no cookie) was sent to sign in.
    async fn gated(app: &Router, method: Method, path: &str) -> bool {
        let request = Request::builder()
            .method(method)
            .uri(path)
            .header("host", "localhost:3000")
            .body(Body::empty())
            .expect("a request");
        let response = app.clone().oneshot(request).await.expect("a response");
        let to_login = response
            .headers()
            .get("location")
            .and_then(|v| v.to_str().ok())
            .is_some_and(|l| l.starts_with("/login"));
        response.status() == StatusCode::UNAUTHORIZED
            || (response.status() == StatusCode::SEE_OTHER && to_login)
    }

    #[tokio::test]
    async fn session_routes_are_gated_and_share_views_are_not() {
        let (state, _dir) = state::for_tests(|config| config.auth.mode = AuthMode::Required).await;
        let app = router(state);
        for (method, path) in [
            (Method::GET, "/"),
            (Method::GET, "/sessions/x"),
            (Method::POST, "/api/sessions"),
            (Method::GET, "/api/sessions/x/files"),
            (Method::GET, "/ws/sessions/x"),
            (Method::POST, "/s/token/fork"),
            (Method::GET, "/s/token/other"),
            (Method::GET, "/s//files"),
            (Method::POST, "/api/load_session"),
            (Method::GET, "/anything-else"),
            // Dot segments would be resolved by the page renderer.
            (Method::GET, "/x/../sessions/a"),
            (Method::GET, "/x/%2e%2e/sessions/a"),
            (Method::GET, "/%2E/sessions/a"),
            (Method::GET, "/./sessions/a"),
            (Method::GET, "/s/%2e%2e/sessions/a"),
            (Method::GET, "/s/a/../../sessions/b"),
            (Method::GET, "/s/%2e%2e"),
        ] {
            assert!(gated(&app, method.clone(), path).await, "{method} {path}");
        }
        for (method, path) in [
            (Method::GET, "/s/token"),
            (Method::GET, "/s/token/files"),
            (Method::GET, "/login"),
            (Method::GET, "/pkg/runcell.js"),
            (Method::GET, "/healthz"),
        ] {
            assert!(!gated(&app, method.clone(), path).await, "{method} {path}");
        }
    }

    #[test]
    fn the_shared_page_is_a_route_of_the_app() {
        assert!(
            generate_route_list(App)
                .iter()
                .any(|route| route.path() == SHARED_PAGE)
        );
    }
}
