//! Signing in to the pages, when they ask for a key (`RUNCELL_AUTH=required`,
//! or by default when listening beyond loopback): a form at `/login` takes an
//! API key and leaves a signed token in an HttpOnly cookie; a middleware
//! sends requests without one there. Share links stay viewable by whoever
//! has them (the link is the permission); forking one needs a sign-in.

use app::render::markdown::escape;
use axum::Form;
use axum::extract::{Query, Request, State};
use axum::http::{HeaderMap, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Redirect, Response};
use serde::Deserialize;

use super::ApiError;
use super::cookies::{cookie_in, set_cookie, site_cookie};
use super::document::server_page;
use super::owner::Anonymous;
use super::request_origin::RequestOrigin;
use runcell_agent::notebook::Notebooks;
use std::sync::Arc;

use axum::extract::FromRef;

use crate::accounts::{Accounts, SignedIn};
use crate::auth::{Auth, AuthError};
use crate::http::state::AppState;

/// What signing in uses: the keys, the accounts, and the settings that
/// shape it.
#[derive(Clone)]
pub struct SignIn {
    pub auth: Arc<Auth>,
    pub accounts: Arc<Accounts>,
    /// Where a person's key sign-in moves the browser's sessions.
    pub notebooks: Arc<Notebooks>,
    /// Whether the pages ask for a key at all.
    pub pages_need_key: bool,
}

impl FromRef<AppState> for SignIn {
    fn from_ref(state: &AppState) -> Self {
        Self {
            auth: Arc::clone(&state.auth),
            accounts: Arc::clone(&state.accounts),
            notebooks: Arc::clone(&state.notebooks),
            pages_need_key: state.config.pages_need_key(),
        }
    }
}

pub use super::owner::{SIGNIN_COOKIE, Signed};

/// Whether a path is not in its one plain form: `.` or `..` segments, raw
/// or percent-encoded (the page renderer would resolve such a path to
/// another page), or an empty segment.
fn unusual(path: &str) -> bool {
    path.to_ascii_lowercase().contains("%2e")
        || path.contains("//")
        || path
            .split('/')
            .any(|segment| segment == "." || segment == "..")
}

/// Where to come back to after signing in: a path of this site only (no
/// other host, no control characters or spaces that browsers drop).
pub(super) fn local_path(next: Option<&str>) -> &str {
    match next {
        Some(path)
            if path.starts_with('/')
                && !path.starts_with("//")
                && !path
                    .bytes()
                    .any(|b| b == b'\\' || b.is_ascii_control() || b == b' ') =>
        {
            path
        }
        _ => "/",
    }
}

/// Who the sign-in cookie in `headers` says is signed in: a valid token of
/// a live key, or of a person whose account is not disabled.
pub async fn signed_in(accounts: &Accounts, headers: &HeaderMap) -> Result<SignedIn, AuthError> {
    match cookie_in(headers, SIGNIN_COOKIE) {
        Some(token) => accounts.signed_in(&token).await,
        None => Err(AuthError::Missing),
    }
}

/// Lets a request through if the pages are open or it is signed in (the
/// owner layer, outside this one, found a key, a person or a trusted
/// proxy's person). A layer on the routes that need a sign-in (every page
/// route but signing in and share links).
pub async fn gate(State(state): State<SignIn>, request: Request, next: Next) -> Response {
    if !state.pages_need_key {
        return next.run(request).await;
    }
    let signed = match request.extensions().get::<Signed>() {
        Some(_) => Ok(()),
        None => signed_in(&state.accounts, request.headers())
            .await
            .map(|_| ()),
    };
    match signed {
        Ok(()) => next.run(request).await,
        Err(AuthError::Store(err)) => ApiError::from(err).into_response(),
        Err(_) if request.method() == Method::GET && !request.uri().path().starts_with("/api/") => {
            let back = request
                .uri()
                .path_and_query()
                .map_or("/", |p| p.as_str())
                .to_string();
            let query = next_query(&back);
            Redirect::to(&format!("/login?{query}")).into_response()
        }
        Err(_) => {
            ApiError::Unauthorized("sign in at /login with an API key".into()).into_response()
        }
    }
}

/// On the routes open to everyone: an unusual path (dot or empty
/// segments) goes through the [`gate`] all the same.
pub async fn gate_unusual(state: State<SignIn>, request: Request, next: Next) -> Response {
    if unusual(request.uri().path()) {
        gate(state, request, next).await
    } else {
        next.run(request).await
    }
}

/// What the way back escapes in a query value: everything but letters,
/// digits, `-._~` and `/`.
const NEXT_VALUE: &percent_encoding::AsciiSet = &percent_encoding::NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'_')
    .remove(b'.')
    .remove(b'~')
    .remove(b'/');

pub(super) fn next_query(back: &str) -> String {
    format!(
        "next={}",
        percent_encoding::utf8_percent_encode(back, NEXT_VALUE)
    )
}

#[derive(Debug, Deserialize)]
pub struct LoginQuery {
    next: Option<String>,
}

#[derive(Debug, Deserialize)]
pub struct LoginForm {
    api_key: String,
    next: Option<String>,
}

/// `GET /login`: the sign-in form.
pub async fn form(State(state): State<SignIn>, Query(query): Query<LoginQuery>) -> Response {
    page(
        &state,
        local_path(query.next.as_deref()),
        None,
        StatusCode::OK,
    )
}

/// `POST /login`: signs in with an API key and goes back where it came from.
/// A person's key signs the person in, and the sessions this browser made
/// become theirs.
pub async fn sign_in(
    State(state): State<SignIn>,
    Anonymous(anonymous): Anonymous,
    origin: RequestOrigin,
    Form(form): Form<LoginForm>,
) -> Response {
    let next = local_path(form.next.as_deref()).to_string();
    match state.accounts.sign_in_with_key(&form.api_key).await {
        Ok((issued, person)) => {
            if let Some(user) = person
                && let Err(err) = state.notebooks.adopt(anonymous, user.owner).await
            {
                tracing::warn!(%err, "a browser's sessions could not move to the person who signed in");
            }
            let ttl = issued.expires_in;
            let cookie = site_cookie(
                SIGNIN_COOKIE,
                &issued.token,
                origin.cookies_secure(),
                time::Duration::seconds(i64::try_from(ttl.as_secs()).unwrap_or(i64::MAX)),
            );
            let mut response = Redirect::to(&next).into_response();
            set_cookie(&mut response, &cookie);
            response
        }
        Err(AuthError::Store(err)) => ApiError::from(err).into_response(),
        Err(err) => page(
            &state,
            &next,
            Some(&err.to_string()),
            StatusCode::UNAUTHORIZED,
        ),
    }
}

/// `POST /logout`: forgets the sign-in, and goes to the sign-in page (or,
/// where the pages are open, to a new anonymous session).
pub async fn sign_out(State(state): State<SignIn>) -> Response {
    let to = if state.pages_need_key { "/login" } else { "/" };
    let mut response = Redirect::to(to).into_response();
    set_cookie(
        &mut response,
        &site_cookie(SIGNIN_COOKIE, "", false, time::Duration::ZERO),
    );
    response
}

fn page(state: &SignIn, next: &str, error: Option<&str>, status: StatusCode) -> Response {
    let provider = state.accounts.oidc().map_or(String::new(), |oidc| {
        format!(
            "<p><a class=\"signin-provider\" href=\"/auth/oidc/start?{query}\">Sign in with {name}</a></p>\n<p class=\"signin-or\">or with an API key:</p>",
            query = escape(&next_query(next)),
            name = escape(&oidc.name),
        )
    });
    let open = if state.pages_need_key {
        ""
    } else if state.accounts.oidc().is_some() {
        "<p class=\"signin-note\">This server's pages are open: you may use runcell without signing in, and what you make before signing in becomes yours when you do.</p>"
    } else {
        "<p class=\"signin-note\">This server's pages are open; signing in is not needed.</p>"
    };
    let error = error.map_or(String::new(), |e| {
        format!("<p class=\"signin-error\" role=\"alert\">{}</p>", escape(e))
    });
    let main = format!(
        r#"<h1>runcell</h1>
{provider}
<form method="post" action="/login" class="signin-form">
<label for="api_key">API key</label>
<input id="api_key" name="api_key" type="password" autocomplete="current-password" required placeholder="rc_…" autofocus>
<input type="hidden" name="next" value="{next}">
<button type="submit">Sign in</button>
</form>
{error}{open}
<p class="signin-help">Make a key on the server with <code>runcell keys create --name NAME</code>.</p>"#,
        next = escape(next),
    );
    server_page("Sign in", "signin", &main, status)
}

/// A small page of its own (a sign-in that did not happen, an account
/// page's answer): `title`, and `html` (already escaped) as its message.
pub fn notice_page(title: &str, html: &str, status: StatusCode) -> Response {
    let main = format!(
        "<h1>{}</h1>\n<p role=\"alert\">{html}</p>\n<p><a href=\"/\">Back to runcell</a></p>",
        escape(title)
    );
    server_page(title, "signin", &main, status)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_local_paths_are_returned_to() {
        assert_eq!(local_path(Some("/sessions/abc?x=1")), "/sessions/abc?x=1");
        for bad in [
            "//evil.example/",
            "https://evil.example/",
            "/\\evil",
            "",
            "evil",
        ] {
            assert_eq!(local_path(Some(bad)), "/", "{bad}");
        }
        assert_eq!(local_path(None), "/");
    }

    #[test]
    fn dot_and_empty_segments_are_unusual() {
        for path in [
            "/x/../sessions/a",
            "/x/%2e%2e/sessions/a",
            "/%2E/sessions/a",
            "/./sessions/a",
            "/s/%2e%2e/sessions/a",
            "/s/a/../../sessions/b",
            "/s//files",
        ] {
            assert!(unusual(path), "{path}");
        }
        for path in ["/s/token", "/s/token/files", "/login", "/s/a.b"] {
            assert!(!unusual(path), "{path}");
        }
    }

    #[test]
    fn the_way_back_is_percent_encoded() {
        assert_eq!(
            next_query("/sessions/a?b=c&d"),
            "next=/sessions/a%3Fb%3Dc%26d"
        );
        assert_eq!(next_query("/s/é x+%~._-"), "next=/s/%C3%A9%20x%2B%25~._-");
    }
}
