//! The anonymous owner: every browser gets a random owner id in a cookie on
//! its first request, and owns the sessions it creates. Handlers read it as
//! an [`Owner`] extractor; the page's server functions as a
//! [`Viewer`](app::api::ports::Viewer) in the request's extensions.

use app::api::ports::Viewer;
use axum::extract::{FromRequestParts, Request, State};
use axum::http::request::Parts;
use axum::http::{HeaderMap, header};
use axum::middleware::Next;
use axum::response::Response;

use std::sync::Arc;

use axum::extract::FromRef;

use super::ApiError;
use super::cookies::{cookie_in, set_cookie, site_cookie};
use super::request_origin::{RequestOrigin, TrustForwarded, client_address};
use super::signin::{SIGNIN_COOKIE, SignIn, signed_in};
use crate::http::state::AppState;
use crate::session::OwnerId;
use crate::session::clients::Clients;

/// The cookie's name.
pub const OWNER_COOKIE: &str = "runcell_owner";

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

/// Finds the request's owner, or makes one and sets its cookie.
pub async fn owner_layer(
    State(trust): State<TrustForwarded>,
    mut request: Request,
    next: Next,
) -> Response {
    let found = owner_in(request.headers());
    let owner = found.unwrap_or_else(OwnerId::random);
    let secure = RequestOrigin::read(request.uri(), request.headers(), trust).cookies_secure();
    request.extensions_mut().insert(Owner(owner));
    request.extensions_mut().insert(Viewer(owner));
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
    if found.is_none() && !set_already {
        set_cookie(&mut response, &owner_cookie(owner, secure));
    }
    response
}

/// What noting a request's client needs.
#[derive(Clone)]
pub struct ClientNotes {
    clients: Arc<Clients>,
    trust: TrustForwarded,
    sign_in: SignIn,
}

impl FromRef<AppState> for ClientNotes {
    fn from_ref(state: &AppState) -> Self {
        Self {
            clients: Arc::clone(&state.clients),
            trust: TrustForwarded::from_ref(state),
            sign_in: SignIn::from_ref(state),
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
        let signed_in = notes.sign_in.pages_need_key
            || (cookie_in(request.headers(), SIGNIN_COOKIE).is_some()
                && signed_in(&notes.sign_in.auth, request.headers())
                    .await
                    .is_ok());
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
