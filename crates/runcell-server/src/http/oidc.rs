//! Sign-in with the organisation's identity provider (`accounts::oidc`):
//! `GET /auth/oidc/start` sends the browser to the provider with the
//! attempt sealed in a cookie; `GET /auth/oidc/callback` checks the
//! provider's answer, signs the person in, moves the sessions this browser
//! made anonymously to them and goes back where they were.

use std::sync::Arc;

use axum::extract::{FromRef, Query, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;

use super::ApiError;
use super::cookies::{cookie_in, path_cookie, set_cookie, site_cookie};
use super::owner::{Anonymous, owner_cookie};
use super::request_origin::RequestOrigin;
use super::signin::{SIGNIN_COOKIE, local_path, notice_page};
use crate::accounts::oidc::{ATTEMPT_SECS, Attempt};
use crate::accounts::{AccountError, Accounts, OidcError};
use crate::http::state::AppState;
use runcell_agent::notebook::Notebooks;
use runcell_protocol::OwnerId;

/// The cookie an attempt is sealed in, sent only to the callback.
pub const ATTEMPT_COOKIE: &str = "runcell_oidc";
const ATTEMPT_PATH: &str = "/auth/oidc";
/// The callback's path, as registered at the provider.
pub const CALLBACK_PATH: &str = "/auth/oidc/callback";

/// What the two routes use.
#[derive(Clone)]
pub struct OidcState {
    accounts: Arc<Accounts>,
    notebooks: Arc<Notebooks>,
}

impl FromRef<AppState> for OidcState {
    fn from_ref(state: &AppState) -> Self {
        Self {
            accounts: Arc::clone(&state.accounts),
            notebooks: Arc::clone(&state.notebooks),
        }
    }
}

#[derive(Debug, Deserialize)]
pub struct StartQuery {
    next: Option<String>,
}

fn not_configured() -> Response {
    ApiError::NotFound("sign-in with an identity provider is not configured on this server".into())
        .into_response()
}

/// `GET /auth/oidc/start?next=/path`: to the provider.
pub async fn start(
    State(state): State<OidcState>,
    origin: RequestOrigin,
    Query(query): Query<StartQuery>,
) -> Response {
    let Some(oidc) = state.accounts.oidc() else {
        return not_configured();
    };
    let redirect = oidc
        .redirect_url
        .clone()
        .unwrap_or_else(|| format!("{}{CALLBACK_PATH}", origin.base_url()));
    let next = local_path(query.next.as_deref());
    match oidc.begin(&redirect, next).await {
        Ok((url, attempt)) => {
            let sealed = state.accounts.seal_attempt(&attempt);
            let mut response = (
                StatusCode::SEE_OTHER,
                [
                    (header::LOCATION, url),
                    (header::CACHE_CONTROL, "no-store".into()),
                ],
            )
                .into_response();
            set_cookie(
                &mut response,
                &path_cookie(
                    ATTEMPT_COOKIE,
                    &sealed,
                    ATTEMPT_PATH,
                    origin.cookies_secure(),
                    time::Duration::seconds(i64::try_from(ATTEMPT_SECS).unwrap_or(600)),
                ),
            );
            response
        }
        Err(err) => {
            tracing::warn!(%err, "a sign-in could not start");
            failed(&err, next)
        }
    }
}

#[derive(Debug, Deserialize)]
pub struct Answer {
    code: Option<String>,
    state: Option<String>,
    error: Option<String>,
    error_description: Option<String>,
}

/// `GET /auth/oidc/callback?code&state` (or `?error`): back from the
/// provider.
pub async fn callback(
    State(state): State<OidcState>,
    Anonymous(anonymous): Anonymous,
    origin: RequestOrigin,
    headers: HeaderMap,
    Query(answer): Query<Answer>,
) -> Response {
    let Some(oidc) = state.accounts.oidc() else {
        return not_configured();
    };
    let attempt = cookie_in(&headers, ATTEMPT_COOKIE)
        .and_then(|sealed| state.accounts.unseal_attempt(&sealed));
    let next = attempt
        .as_ref()
        .map_or("/", |a| a.next.as_str())
        .to_string();
    let identity = async {
        if let Some(error) = answer.error {
            let said = answer.error_description.unwrap_or(error);
            return Err(OidcError::Refused(said.chars().take(200).collect()));
        }
        let attempt: &Attempt = attempt.as_ref().ok_or(OidcError::NoAttempt)?;
        let (Some(code), Some(answered)) = (answer.code, answer.state) else {
            return Err(OidcError::StateMismatch);
        };
        oidc.finish(attempt, &answered, &code).await
    }
    .await;
    let mut response = match identity {
        Err(err) => {
            tracing::info!(%err, "a sign-in with the identity provider was refused");
            failed(&err, &next)
        }
        Ok(identity) => match state.accounts.sign_in(&identity, "OpenID Connect").await {
            Ok(user) => signed_in(&state, &user, anonymous, &next, &origin).await,
            Err(AccountError::Disabled) => notice_page(
                "Account disabled",
                &app::render::markdown::escape(&AccountError::Disabled.to_string()),
                StatusCode::FORBIDDEN,
            ),
            Err(AccountError::Store(err)) => ApiError::from(err).into_response(),
            Err(err) => ApiError::Internal(err.to_string()).into_response(),
        },
    };
    // The attempt is spent, whatever came of it.
    set_cookie(
        &mut response,
        &path_cookie(
            ATTEMPT_COOKIE,
            "",
            ATTEMPT_PATH,
            origin.cookies_secure(),
            time::Duration::ZERO,
        ),
    );
    response
}

/// The answer to a good sign-in: this browser's anonymous sessions become
/// the person's, the sign-in cookie is set, the browser gets a fresh
/// anonymous owner for after it signs out, and goes back to `next`.
async fn signed_in(
    state: &OidcState,
    user: &runcell_store::UserRecord,
    anonymous: OwnerId,
    next: &str,
    origin: &RequestOrigin,
) -> Response {
    if let Err(err) = state.notebooks.adopt(anonymous, user.owner).await {
        // Signed in all the same; the sessions stay where they were.
        tracing::warn!(%err, "a browser's sessions could not move to the person who signed in");
    }
    let issued = state.accounts.token(user);
    let secure = origin.cookies_secure();
    let mut response = (
        StatusCode::SEE_OTHER,
        [
            (header::LOCATION, next.to_string()),
            (header::CACHE_CONTROL, "no-store".into()),
        ],
    )
        .into_response();
    set_cookie(
        &mut response,
        &site_cookie(
            SIGNIN_COOKIE,
            &issued.token,
            secure,
            time::Duration::seconds(i64::try_from(issued.expires_in.as_secs()).unwrap_or(i64::MAX)),
        ),
    );
    set_cookie(&mut response, &owner_cookie(OwnerId::random(), secure));
    response
}

/// A page saying why a sign-in did not happen, with a way to try again.
fn failed(err: &OidcError, next: &str) -> Response {
    let status = match err {
        OidcError::Provider(_) => StatusCode::BAD_GATEWAY,
        OidcError::Refused(_) | OidcError::InvalidToken(_) => StatusCode::UNAUTHORIZED,
        OidcError::NoAttempt | OidcError::StateMismatch | OidcError::Replayed => {
            StatusCode::BAD_REQUEST
        }
    };
    let again = format!(
        "{} <a href=\"/login?{}\">Sign in again</a>.",
        app::render::markdown::escape(&err.to_string()),
        super::signin::next_query(next)
    );
    notice_page("Not signed in", &again, status)
}
