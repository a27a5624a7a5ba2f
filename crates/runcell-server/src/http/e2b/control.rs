//! The control plane: sandboxes created, listed, kept alive and killed under
//! the caller's runcell API key (`X-API-Key`, or a bearer token).

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::Json;
use axum::extract::rejection::JsonRejection;
use axum::extract::{FromRef, FromRequestParts, Path, Query, State};
use axum::http::request::Parts;
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;

use super::{header, json_error, status_of};
use crate::auth::Auth;
use crate::auth::{Audience, Caller};
use crate::e2b::protocol::{self, ConnectBody, NewSandbox, TimeoutBody};
use crate::e2b::served::Served;
use crate::e2b::served::ServedError;

/// The caller, from `X-API-Key` (E2B's way) or `Authorization: Bearer`.
pub(super) struct KeyHolder(Caller);

impl<S> FromRequestParts<S> for KeyHolder
where
    Arc<Auth>: FromRef<S>,
    S: Send + Sync,
{
    type Rejection = Response;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Response> {
        let credential = header(&parts.headers, protocol::API_KEY_HEADER)
            .map(str::trim)
            .or_else(|| {
                header(&parts.headers, "authorization").and_then(crate::auth::token::bearer)
            });
        let Some(credential) = credential.filter(|c| !c.is_empty()) else {
            return Err(json_error(
                StatusCode::UNAUTHORIZED,
                "an API key is required in the X-API-Key header",
            ));
        };
        match Arc::<Auth>::from_ref(state)
            .authenticate(credential, Audience::Api)
            .await
        {
            Ok(caller) => Ok(Self(caller)),
            Err(e) => Err(json_error(StatusCode::UNAUTHORIZED, &e.to_string())),
        }
    }
}

fn failed(err: &ServedError) -> Response {
    let (status, message) = status_of(err);
    super::with_retry_after(json_error(status, &message), err)
}

#[expect(
    clippy::result_large_err,
    reason = "the error is the answer, built once on a refused request"
)]
fn body<T>(body: Result<Json<T>, JsonRejection>) -> Result<T, Response> {
    body.map(|Json(b)| b)
        .map_err(|e| json_error(StatusCode::BAD_REQUEST, &e.body_text()))
}

/// `POST /sandboxes` and `POST /v2/sandboxes` → 201 with the sandbox.
pub(super) async fn create(
    State(served): State<Arc<Served>>,
    KeyHolder(caller): KeyHolder,
    new: Result<Json<NewSandbox>, JsonRejection>,
) -> Response {
    let new = match body(new) {
        Ok(new) => new,
        Err(response) => return response,
    };
    match served.create(&caller, new).await {
        Ok(sandbox) => (StatusCode::CREATED, Json(sandbox.json())).into_response(),
        Err(e) => failed(&e),
    }
}

#[derive(Debug, Deserialize)]
pub(super) struct ListQuery {
    /// `k=v&k2=v2`, URL-encoded once more.
    metadata: Option<String>,
    /// `running`, `paused` or both: every served sandbox is running.
    state: Option<String>,
    limit: Option<usize>,
}

/// `GET /v2/sandboxes` (and the older `GET /sandboxes`).
pub(super) async fn list(
    State(served): State<Arc<Served>>,
    KeyHolder(caller): KeyHolder,
    query: Result<Query<ListQuery>, axum::extract::rejection::QueryRejection>,
) -> Response {
    let Ok(Query(query)) = query else {
        return json_error(StatusCode::BAD_REQUEST, "the query is malformed");
    };
    let metadata: BTreeMap<String, String> = query
        .metadata
        .as_deref()
        .map(|m| {
            form_urlencoded::parse(m.as_bytes())
                .map(|(k, v)| (k.into_owned(), v.into_owned()))
                .collect()
        })
        .unwrap_or_default();
    let wants_running = query
        .state
        .as_deref()
        .is_none_or(|s| s.split(',').any(|s| s.trim() == "running"));
    let sandboxes = if wants_running {
        served.list(&caller, &metadata)
    } else {
        Vec::new()
    };
    let limit = query.limit.unwrap_or(100).clamp(1, 100);
    let listed: Vec<_> = sandboxes
        .iter()
        .take(limit)
        .map(|s| s.listed(served.settings()))
        .collect();
    let mut headers = HeaderMap::new();
    headers.insert("x-total-running", HeaderValue::from(sandboxes.len()));
    (headers, Json(listed)).into_response()
}

/// `GET /sandboxes/{id}`.
pub(super) async fn detail(
    State(served): State<Arc<Served>>,
    KeyHolder(caller): KeyHolder,
    Path(id): Path<String>,
) -> Response {
    match served.get_own(&caller, &id) {
        Ok(sandbox) => {
            let mut detail =
                serde_json::to_value(sandbox.listed(served.settings())).unwrap_or_default();
            if let Some(map) = detail.as_object_mut() {
                map.insert("envdAccessToken".into(), sandbox.envd_token.clone().into());
                map.insert("domain".into(), serde_json::Value::Null);
                map.insert("allowInternetAccess".into(), false.into());
            }
            Json(detail).into_response()
        }
        Err(e) => failed(&e),
    }
}

/// `DELETE /sandboxes/{id}` → 204.
pub(super) async fn kill(
    State(served): State<Arc<Served>>,
    KeyHolder(caller): KeyHolder,
    Path(id): Path<String>,
) -> Response {
    match served.kill(&caller, &id).await {
        Ok(()) => StatusCode::NO_CONTENT.into_response(),
        Err(e) => failed(&e),
    }
}

/// `POST /sandboxes/{id}/timeout` `{"timeout": secs}` → 204.
pub(super) async fn set_timeout(
    State(served): State<Arc<Served>>,
    KeyHolder(caller): KeyHolder,
    Path(id): Path<String>,
    timeout: Result<Json<TimeoutBody>, JsonRejection>,
) -> Response {
    let timeout = match body(timeout) {
        Ok(t) => t,
        Err(response) => return response,
    };
    match served.set_timeout(&caller, &id, Some(timeout.timeout)) {
        Ok(_) => StatusCode::NO_CONTENT.into_response(),
        Err(e) => failed(&e),
    }
}

#[derive(Debug, Default, Deserialize)]
pub(super) struct Refresh {
    duration: Option<u64>,
}

/// `POST /sandboxes/{id}/refreshes` `{"duration": secs}` → 204.
pub(super) async fn refresh(
    State(served): State<Arc<Served>>,
    KeyHolder(caller): KeyHolder,
    Path(id): Path<String>,
    refresh: Option<Json<Refresh>>,
) -> Response {
    let secs = refresh.and_then(|Json(r)| r.duration);
    match served.set_timeout(&caller, &id, secs) {
        Ok(_) => StatusCode::NO_CONTENT.into_response(),
        Err(e) => failed(&e),
    }
}

/// `POST /sandboxes/{id}/connect` (and `/v2/…`): the sandbox again, its
/// timeout restarted → 200.
pub(super) async fn connect(
    State(served): State<Arc<Served>>,
    KeyHolder(caller): KeyHolder,
    Path(id): Path<String>,
    body: Result<Option<Json<ConnectBody>>, JsonRejection>,
) -> Response {
    let secs = match body {
        Ok(body) => body
            .and_then(|Json(b)| b.timeout)
            .unwrap_or(protocol::CONNECT_TIMEOUT_SECS),
        Err(e) => return json_error(StatusCode::BAD_REQUEST, &e.body_text()),
    };
    match served.set_timeout(&caller, &id, Some(secs)) {
        Ok(sandbox) => Json(sandbox.json()).into_response(),
        Err(e) => failed(&e),
    }
}
