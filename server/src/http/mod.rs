//! HTTP: routes, pages and the WebSocket. Handlers parse, call the domain, map.

mod assets;
mod e2b;
pub mod error;
mod files;
pub mod host;
mod hygiene;
mod mcp;
mod metrics;
mod notebook;
mod origin;
pub mod owner;
mod sessions;
mod signin;
mod upload;
mod v1;
mod ws;

use std::sync::Arc;

use app::api::ports::{ArcModelCatalog, ArcSessionLogs};
use app::{App, shell};
use axum::Router;
use axum::extract::{DefaultBodyLimit, MatchedPath, State};
use axum::http::header;
use axum::response::{IntoResponse, Redirect};
use axum::routing::{get, post};
use leptos::prelude::provide_context;
use leptos_axum::{LeptosRoutes, file_and_error_handler_with_context, generate_route_list};
use std::time::Duration;
use tower_http::trace::TraceLayer;

pub use error::ApiError;
pub use v1::openapi;

use crate::state::AppState;
use owner::Owner;

/// Request bodies (server-function calls) above this are refused.
const MAX_BODY_BYTES: usize = 1024 * 1024;

/// The whole HTTP surface.
pub fn router(state: AppState) -> Router {
    // Install the recorder before anything is recorded.
    if crate::metrics::handle().is_none() {
        tracing::warn!("another metrics recorder is installed: /metrics will be empty");
    }
    let routes = generate_route_list(App);
    let logs: ArcSessionLogs = state.sessions.clone();
    let catalog: ArcModelCatalog = state.models.clone();
    let sandboxes: app::api::ports::ArcSandboxChoices = Arc::new(SandboxPicks {
        runner: Arc::clone(&state.runner),
        pyodide: state.pyodide.as_ref().map(|runtime| runtime.url.clone()),
    });
    let upload_limit = app::api::ports::UploadLimit(state.config.sandbox.upload_bytes() as u64);
    let link_files: app::api::ports::ArcShareLinkFiles = Arc::new(files::LinkFiles(state.clone()));
    let context = move || {
        provide_context(Arc::clone(&logs));
        provide_context(Arc::clone(&catalog));
        provide_context(Arc::clone(&sandboxes));
        provide_context(upload_limit);
        provide_context(Arc::clone(&link_files));
    };
    let leptos = state.leptos.clone();

    let pages = Router::new()
        .route("/", get(new_session))
        .route("/ws/sessions/{id}", get(ws::session_socket))
        .route("/api/models", get(models))
        .route("/api/sessions", post(notebook::create).get(sessions::list))
        .route(
            "/api/sessions/{id}",
            axum::routing::patch(sessions::rename).delete(sessions::delete),
        )
        .route("/api/sessions/{id}/ask", post(notebook::ask))
        .route("/api/sessions/{id}/run", post(notebook::run))
        .route("/api/sessions/{id}/rerun", post(notebook::rerun))
        .route("/api/sessions/{id}/stop", post(notebook::stop))
        .route("/api/sessions/{id}/events", get(notebook::events))
        .route(
            "/api/sessions/{id}/files",
            get(files::get)
                .put(files::put)
                .delete(files::delete)
                // Uploads keep their own limit (`sandbox.upload_mib`).
                .layer(DefaultBodyLimit::disable()),
        )
        .route(
            "/api/sessions/{id}/share",
            post(sessions::share).delete(sessions::unshare),
        )
        .route("/sessions/{id}/rename", post(sessions::rename_form))
        .route("/sessions/{id}/delete", post(sessions::delete_form))
        .route("/sessions/{id}/share", post(sessions::share_form))
        .route("/sessions/{id}/unshare", post(sessions::unshare_form))
        .route("/s/{token}/fork", post(sessions::fork))
        .route("/s/{token}/files", get(files::shared_get))
        .route("/login", get(signin::form).post(signin::sign_in))
        .route("/logout", post(signin::sign_out))
        .leptos_routes_with_context(&state, routes, context.clone(), move || {
            shell(leptos.clone())
        })
        .fallback(file_and_error_handler_with_context::<AppState, _>(
            context, shell,
        ))
        .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            signin::gate,
        ))
        .layer(axum::middleware::from_fn(owner::owner_layer))
        // Before a cookie is read or made: form posts, `/api/sessions` and
        // server functions come from this server's pages only.
        .layer(axum::middleware::from_fn_with_state(
            state.hosts.clone(),
            origin::refuse_cross_site,
        ));
    let pages = with_time_limit(pages, state.config.http.request_timeout_secs);

    // Static files, the same for everyone: outside the sign-in gate and the
    // owner cookie, since the page's Python frame (an opaque origin) loads
    // them without cookies.
    let statics = assets::site(&state.config.site_root);
    let statics = with_time_limit(statics, state.config.http.request_timeout_secs);

    // Programs' routes: bearer credentials, no cookies; a run's own wall
    // time on top of the time limit.
    let api_limit = state.config.http.request_timeout_secs + state.config.sandbox.max_timeout_secs;
    let mut api = v1::router(&state.config).nest_service("/mcp", mcp::service(state.clone()));
    if state.config.e2b.serve {
        api = api.merge(e2b::control_plane());
    }
    let mut api = with_time_limit(api, api_limit);
    // `/mcp` is not a handler of ours: it is authenticated here, and each
    // MCP session is bound to the key that opened it.
    api = api.layer(axum::middleware::from_fn_with_state(
        (state.clone(), mcp::Bindings::default()),
        mcp::authenticate,
    ));
    if let Some(cors) = hygiene::cors(&state.config.http.cors_origins) {
        api = api.layer(cors);
    }
    // Outermost, so that refusals and time-outs are counted too.
    api = api.layer(axum::middleware::from_fn(hygiene::count));

    // Scrapers: no cookie is made for them; a key when the pages need one.
    let scrape = Router::new()
        .route("/metrics", get(metrics::render))
        .route_layer(axum::middleware::from_fn_with_state(
            state.clone(),
            metrics::gate,
        ));

    let mut all = api.merge(pages).merge(scrape).merge(statics);
    if state.config.e2b.serve {
        // Requests that name a sandbox are E2B's data plane, whatever the path.
        all = all.layer(axum::middleware::from_fn_with_state(
            e2b::data_plane(state.clone()),
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
        .layer(TraceLayer::new_for_http().make_span_with(request_span))
        .with_state(state)
}

/// Answers 503 when a request has no answer within `secs`.
fn with_time_limit<S>(router: Router<S>, secs: u64) -> Router<S>
where
    S: Clone + Send + Sync + 'static,
{
    let limit = Duration::from_secs(secs);
    let upload_limit = limit.max(UPLOAD_TIME_LIMIT);
    router.layer(axum::middleware::from_fn(
        move |request: axum::extract::Request, next: axum::middleware::Next| {
            // An upload's answer begins only once its body is in, which on
            // a slow link takes longer than any other request.
            let upload = request.method() == axum::http::Method::PUT
                && request.uri().path().ends_with("/files");
            hygiene::time_limit(if upload { upload_limit } else { limit }, request, next)
        },
    ))
}

/// How long an upload (`PUT …/files`) may take: 50 MiB at about half a
/// megabit a second.
const UPLOAD_TIME_LIMIT: Duration = Duration::from_secs(15 * 60);

/// One span per request, named by its route rather than its path, so that
/// session ids do not multiply the span names.
fn request_span(request: &axum::http::Request<axum::body::Body>) -> tracing::Span {
    let route = request
        .extensions()
        .get::<MatchedPath>()
        .map_or("fallback", MatchedPath::as_str);
    tracing::info_span!("http", method = %request.method(), route)
}

/// The page's view of where code may run: the notebook's backends, each
/// session's pick, and where Pyodide is.
struct SandboxPicks {
    runner: Arc<crate::agent::TurnRunner>,
    pyodide: Option<String>,
}

impl app::api::ports::SandboxChoices for SandboxPicks {
    fn backends(&self) -> Vec<String> {
        let kernels = self.runner.agent().kernels();
        kernels.backends().into_iter().map(str::to_string).collect()
    }

    fn chosen(&self, session_id: &str) -> Option<String> {
        let id = session_id.parse().ok()?;
        Some(self.runner.agent().kernels().chosen(id).to_string())
    }

    fn pyodide_url(&self) -> Option<String> {
        self.pyodide.clone()
    }
}

async fn healthz(State(state): State<AppState>) -> impl IntoResponse {
    axum::Json(serde_json::json!({
        "status": "ok",
        "sessions": state.sessions.len(),
    }))
}

/// `GET /api/models`: the models on offer, as the page's picker shows them.
async fn models(State(state): State<AppState>) -> impl IntoResponse {
    use app::api::ports::ModelCatalog;
    axum::Json(state.models.choices())
}

/// `/` opens a new, empty session of the visitor's.
async fn new_session(
    State(state): State<AppState>,
    Owner(owner): Owner,
) -> Result<impl IntoResponse, ApiError> {
    let channel = state.sessions.create(owner).await?;
    Ok((
        [(header::CACHE_CONTROL, "no-store")],
        Redirect::to(&format!("/sessions/{}", channel.id())),
    ))
}
