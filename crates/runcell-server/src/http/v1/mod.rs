//! `/v1`: the API for programs. Every route but `POST /v1/auth/token` needs
//! `Authorization: Bearer <token>` (an access token, or the API key itself);
//! the OpenAPI document is generated from the handlers below (utoipa) and
//! served at `/v1/openapi.json`, with a reference page at `/v1/docs/`.

mod docs;
mod files;
pub(super) mod run;
mod sessions;
mod token;

use axum::Router;
use axum::extract::{DefaultBodyLimit, FromRequestParts};
use axum::http::header;
use axum::http::request::Parts;
use axum::response::{Html, Redirect};
use axum::routing::get;
use bytes::Bytes;
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::{Modify, OpenApi};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::ApiError;
use serde_json::json;

use std::sync::Arc;

use axum::extract::FromRef;

use crate::auth::{Audience, Auth, Caller, token::bearer};
use crate::config::Config;
use crate::http::state::AppState;
use runcell_sandbox::asked::Limit;

pub use run::MAX_RUN_BODY;

#[derive(OpenApi)]
#[openapi(
    info(
        title = "runcell",
        description = "Run code in runcell's sandboxes: one-shot runs, stateful sessions per API key. \
Get an access token with `POST /v1/auth/token` and an API key from `runcell keys create`, \
then send `Authorization: Bearer <token>`. Errors are `{\"error\": {\"code\", \"message\"}}`.",
        license(name = "MIT OR Apache-2.0"),
    ),
    modifiers(&BearerAuth),
    tags(
        (name = "auth", description = "Access tokens"),
        (name = "code_interpreter", description = "Runs and sessions"),
    )
)]
struct ApiDoc;

struct BearerAuth;

impl Modify for BearerAuth {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "bearer",
            SecurityScheme::Http(
                HttpBuilder::new()
                    .scheme(HttpAuthScheme::Bearer)
                    .bearer_format("JWT")
                    .description(Some(
                        "An access token from POST /v1/auth/token, or the API key itself",
                    ))
                    .build(),
            ),
        );
    }
}

/// The OpenAPI document of every `/v1` route.
pub fn openapi() -> utoipa::openapi::OpenApi {
    split().1
}

fn split() -> (Router<AppState>, utoipa::openapi::OpenApi) {
    let (public, mut doc) = OpenApiRouter::with_openapi(ApiDoc::openapi())
        .routes(routes!(token::token))
        .split_for_parts();
    // Each of these takes a `Caller`, which authenticates the request.
    let (protected, protected_doc) = OpenApiRouter::new()
        .routes(routes!(run::run))
        .routes(routes!(sessions::create_session, sessions::list_sessions))
        .routes(routes!(sessions::get_session, sessions::delete_session))
        .split_for_parts();
    // Uploads keep their own limit (`sandbox.upload_mib`, per file).
    let (files, files_doc) = OpenApiRouter::new()
        .routes(routes!(
            files::get_files,
            files::put_files,
            files::delete_file
        ))
        .layer(DefaultBodyLimit::disable())
        .split_for_parts();
    let protected = protected.merge(files);
    doc.merge(files_doc);
    doc.merge(protected_doc);
    (public.merge(protected), doc)
}

/// The OpenAPI document with this server's bounds filled in: a run's most
/// wall time and limits are settings, so the schema says what this server
/// accepts rather than what any server might.
pub fn document(config: &Config) -> serde_json::Value {
    let mut doc = serde_json::to_value(openapi()).unwrap_or_default();
    let schemas = &mut doc["components"]["schemas"];
    let run = &mut schemas["RunBody"]["properties"];
    run["timeout"]["exclusiveMinimum"] = json!(0);
    run["timeout"]["maximum"] = json!(config.sandbox.max_timeout_secs);
    run["code"]["maxLength"] = json!(runcell_sandbox::MAX_CODE_BYTES);
    run["code"]["pattern"] = json!("^[^\\x00]*$");
    for limit in Limit::ALL {
        let schema = &mut schemas["RequestLimits"]["properties"][limit.name()];
        schema["minimum"] = json!(limit.least());
        schema["maximum"] = json!(limit.most(&config.sandbox));
    }
    doc
}

/// The `/v1` routes, the OpenAPI document and the reference page.
pub fn router(config: &Config) -> Router<AppState> {
    let (routes, _) = split();
    let document = document(config);
    // Both depend on the configuration only: made once, served as bytes.
    let page = Bytes::from(docs::page(&document));
    tracing::debug!(bytes = page.len(), "API reference page rendered");
    let document = Bytes::from(serde_json::to_vec(&document).unwrap_or_default());
    routes
        .layer(DefaultBodyLimit::max(MAX_RUN_BODY))
        .route(
            "/v1/openapi.json",
            get(move || {
                let document = document.clone();
                async move { ([(header::CONTENT_TYPE, "application/json")], document) }
            }),
        )
        .route(
            "/v1/docs/",
            get(move || {
                let page = page.clone();
                async move { Html(page) }
            }),
        )
        // The address without the slash, as Swagger UI answered it before.
        .route("/v1/docs", get(|| async { Redirect::to("/v1/docs/") }))
        .route("/v1/{*rest}", axum::routing::any(not_found))
        .method_not_allowed_fallback(method_not_allowed)
}

async fn method_not_allowed(method: axum::http::Method) -> ApiError {
    ApiError::MethodNotAllowed(format!(
        "{method} is not allowed here; see /v1/openapi.json"
    ))
}

async fn not_found() -> ApiError {
    ApiError::NotFound("no such API route; see /v1/openapi.json".into())
}

/// The caller behind the request's bearer credential.
pub async fn authenticate(auth: &Auth, parts: &Parts) -> Result<Caller, ApiError> {
    let value = parts
        .headers
        .get(header::AUTHORIZATION)
        .ok_or_else(|| ApiError::from(crate::auth::AuthError::Missing))?;
    let credential = value.to_str().ok().and_then(bearer).ok_or_else(|| {
        ApiError::Unauthorized("the Authorization header must be `Bearer <token>`".into())
    })?;
    Ok(auth.authenticate(credential, Audience::Api).await?)
}

impl<S> FromRequestParts<S> for Caller
where
    Arc<Auth>: FromRef<S>,
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        if let Some(caller) = parts.extensions.get::<Caller>() {
            return Ok(caller.clone());
        }
        let caller = authenticate(&Arc::<Auth>::from_ref(state), parts).await?;
        parts.extensions.insert(caller.clone());
        Ok(caller)
    }
}
