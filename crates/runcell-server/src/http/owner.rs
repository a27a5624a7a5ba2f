//! The anonymous owner: every browser gets a random owner id in a cookie on
//! its first request, and owns the sessions it creates. Handlers read it as
//! an [`Owner`] extractor; the page's server functions as a
//! [`Viewer`](app::api::ports::Viewer) in the request's extensions.

use app::api::AccountMenu;
use app::api::ports::{Viewer, ViewerAccount};
use axum::extract::{FromRequestParts, Request, State};
use axum::http::request::Parts;
use axum::http::{HeaderMap, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use std::sync::Arc;

use axum::extract::FromRef;

use super::ApiError;
use super::cookies::{cookie_in, set_cookie, site_cookie};
use super::request_origin::{RequestOrigin, TrustForwarded, client_address};
use crate::accounts::{AccountError, Accounts, SignedIn};
use crate::auth::AuthError;
use crate::http::state::AppState;
use runcell_agent::session::clients::Clients;
use runcell_protocol::OwnerId;
use runcell_store::Role;

/// The cookie's name.
pub const OWNER_COOKIE: &str = "runcell_owner";

/// The pages' sign-in cookie: a signed token of a key or a person.
pub const SIGNIN_COOKIE: &str = "runcell_signin";

/// Who the request is signed in as, as the owner layer found it: the
/// sign-in cookie's key or person, or the person a trusted proxy names.
#[derive(Clone, Debug)]
pub struct Signed(pub SignedIn);

/// How long a browser keeps its owner id (400 days, the most browsers allow).
const MAX_AGE_DAYS: i64 = 400;

/// The owner of the request, as the middleware found or made it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Owner(pub OwnerId);

impl<S: Send + Sync> FromRequestParts<S> for Owner {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, Self::Rejection> {
        parts
            .extensions
            .get::<Owner>()
            .copied()
            .ok_or_else(|| ApiError::Internal("the owner middleware did not run".into()))
    }
}

/// The owner id in the request's cookies, if there is a valid one.
pub fn owner_in(headers: &HeaderMap) -> Option<OwnerId> {
    cookie_in(headers, OWNER_COOKIE).and_then(|value| value.parse().ok())
}

/// The `Set-Cookie` value that gives a browser `owner`.
pub fn owner_cookie(owner: OwnerId, secure: bool) -> String {
    site_cookie(
        OWNER_COOKIE,
        &owner.to_string(),
        secure,
        time::Duration::days(MAX_AGE_DAYS),
    )
}

/// What finding a request's owner needs.
#[derive(Clone)]
pub struct OwnerState {
    trust: TrustForwarded,
    accounts: Arc<Accounts>,
    /// A sign-in with an identity provider is offered.
    sign_in_offered: bool,
}

impl FromRef<AppState> for OwnerState {
    fn from_ref(state: &AppState) -> Self {
        Self {
            trust: TrustForwarded::from_ref(state),
            accounts: Arc::clone(&state.accounts),
            sign_in_offered: state.accounts.oidc().is_some(),
        }
    }
}

/// Finds the request's owner: a signed-in person's (from the sign-in
/// cookie, or a trusted proxy's header), else the browser's anonymous owner
/// from its cookie, made and set if missing. A disabled account's owner
/// is nobody's: its cookie is treated as absent.
pub async fn owner_layer(
    State(state): State<OwnerState>,
    mut request: Request,
    next: Next,
) -> Response {
    let found = owner_in(request.headers()).filter(|o| !state.accounts.is_disabled_owner(*o));
    let peer = super::peer_of(&request);
    let signed = match signed_in_on(&state.accounts, request.headers(), peer).await {
        Ok(signed) => signed,
        Err(err) => return err.into_response(),
    };
    let anonymous = found.unwrap_or_else(OwnerId::random);
    let person = match &signed {
        Some(SignedIn::Person(user)) => Some(Arc::clone(user)),
        _ => None,
    };
    let owner = person.as_ref().map_or(anonymous, |user| user.owner);
    let secure =
        RequestOrigin::read(request.uri(), request.headers(), state.trust).cookies_secure();
    request.extensions_mut().insert(Owner(owner));
    request.extensions_mut().insert(Viewer(owner));
    request.extensions_mut().insert(Anonymous(anonymous));
    request.extensions_mut().insert(ViewerAccount(AccountMenu {
        name: person.as_ref().map(|user| user.display_name().to_string()),
        admin: person.as_ref().is_some_and(|user| user.role == Role::Admin),
        sign_in: state.sign_in_offered,
    }));
    if let Some(signed) = signed {
        request.extensions_mut().insert(Signed(signed));
    }
    let mut response = next.run(request).await;
    // A handler may have set the owner itself (a join): that one stands.
    let set_already = response
        .headers()
        .get_all(header::SET_COOKIE)
        .iter()
        .any(|v| {
            v.as_bytes()
                .starts_with(format!("{OWNER_COOKIE}=").as_bytes())
        });
    // The cookie always holds the browser's own anonymous owner, never a
    // person's (which a browser is given only through a sign-in).
    if found.is_none() && !set_already {
        set_cookie(&mut response, &owner_cookie(anonymous, secure));
    }
    response
}

/// The browser's own anonymous owner, whoever is signed in (what a sign-in
/// moves to the person).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Anonymous(pub OwnerId);

impl<S: Send + Sync> FromRequestParts<S> for Anonymous {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, Self::Rejection> {
        parts
            .extensions
            .get::<Anonymous>()
            .copied()
            .ok_or_else(|| ApiError::Internal("the owner middleware did not run".into()))
    }
}

/// Who the request is signed in as: the sign-in cookie's key or person,
/// else a person a trusted proxy names. A store that cannot answer is a
/// 503, not an anonymous page that shows none of the person's sessions.
async fn signed_in_on(
    accounts: &Accounts,
    headers: &HeaderMap,
    peer: Option<std::net::SocketAddr>,
) -> Result<Option<SignedIn>, ApiError> {
    if let Some(token) = cookie_in(headers, SIGNIN_COOKIE) {
        match accounts.signed_in(&token).await {
            Ok(signed) => return Ok(Some(signed)),
            Err(AuthError::Store(err)) => return Err(err.into()),
            // Expired, revoked or disabled: not signed in.
            Err(_) => {}
        }
    }
    match accounts.from_header(headers, peer).await {
        Ok(person) => Ok(person.map(SignedIn::Person)),
        Err(AccountError::Store(err)) => Err(err.into()),
        Err(err) => {
            tracing::warn!(%err, "a trusted header's person could not be signed in");
            Ok(None)
        }
    }
}

/// What noting a request's client needs.
#[derive(Clone)]
pub struct ClientNotes {
    clients: Arc<Clients>,
    trust: TrustForwarded,
    /// Whether the pages ask for a sign-in (then everyone past the gate
    /// is signed in).
    pages_need_key: bool,
}

impl FromRef<AppState> for ClientNotes {
    fn from_ref(state: &AppState) -> Self {
        Self {
            clients: Arc::clone(&state.clients),
            trust: TrustForwarded::from_ref(state),
            pages_need_key: state.config.pages_need_key(),
        }
    }
}

/// Notes where the request's owner is, and whether it is signed in, for
/// the share of the sandbox slots its kernels take (see
/// [`Clients`]). A layer inside the sign-in gate: when the pages need a
/// key, whoever passed it is signed in.
pub async fn note_client(
    State(notes): State<ClientNotes>,
    request: Request,
    next: Next,
) -> Response {
    if let Some(Owner(owner)) = request.extensions().get::<Owner>().copied() {
        let client = client_address(request.headers(), super::peer_of(&request), notes.trust);
        let signed_in = notes.pages_need_key || request.extensions().get::<Signed>().is_some();
        notes.clients.note(owner, client, signed_in);
    }
    next.run(request).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    /// Behind a proxy that is trusted to say the scheme.
    fn secure_context(headers: &HeaderMap) -> bool {
        RequestOrigin::read(&"/".parse().unwrap(), headers, TrustForwarded(true)).cookies_secure()
    }

    fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.append(
                axum::http::HeaderName::from_bytes(name.as_bytes()).unwrap(),
                HeaderValue::from_str(value).unwrap(),
            );
        }
        map
    }

    #[test]
    fn the_owner_is_read_from_any_cookie_header_and_bad_ones_are_ignored() {
        let owner = OwnerId::random();
        let cookie = format!("a=b; {OWNER_COOKIE}={owner}; c=d");
        assert_eq!(
            owner_in(&headers(&[("cookie", "x=1"), ("cookie", &cookie)])),
            Some(owner)
        );
        assert_eq!(
            owner_in(&headers(&[("cookie", "runcell_owner=../../etc")])),
            None
        );
        assert_eq!(owner_in(&headers(&[("cookie", "runcell_owner=")])), None);
        assert_eq!(owner_in(&headers(&[])), None);
    }

    #[test]
    fn the_cookie_is_http_only_lax_and_secure_over_https() {
        let owner = OwnerId::random();
        let cookie = owner_cookie(owner, true);
        for part in ["HttpOnly", "SameSite=Lax", "Secure", "Path=/", "Max-Age="] {
            assert!(cookie.contains(part), "{cookie}");
        }
        assert!(!owner_cookie(owner, false).contains("Secure"));
        // Plain HTTP, loopback included: every cookie jar sends it back.
        assert!(!secure_context(&headers(&[("host", "127.0.0.1:3000")])));
        assert!(!secure_context(&headers(&[("host", "localhost")])));
        assert!(secure_context(&headers(&[
            ("host", "box.lan"),
            ("x-forwarded-proto", "https")
        ])));
        assert!(!secure_context(&headers(&[("host", "192.168.1.5:3000")])));
    }
}
