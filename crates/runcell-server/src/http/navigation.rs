//! A refusal answered to what asked: a browser's navigation (a link
//! followed, a form posted without scripts) gets a page it can read, with
//! the refusal's status and headers (`Retry-After`); a program gets
//! [`ApiError`]'s JSON.

use app::render::markdown::escape;
use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use axum::http::{HeaderMap, header};
use axum::response::{IntoResponse, Response};

use super::ApiError;
use super::document::server_page;

/// Whether the request is a browser's navigation: `Sec-Fetch-Mode:
/// navigate`, or, from a browser that does not send it, an `Accept` that
/// asks for HTML. A program's `*/*` (curl, reqwest) is not one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Navigation(pub bool);

impl Navigation {
    pub fn of(headers: &HeaderMap) -> Self {
        let navigate = headers
            .get("sec-fetch-mode")
            .is_some_and(|mode| mode.as_bytes().eq_ignore_ascii_case(b"navigate"));
        let wants_html = headers
            .get_all(header::ACCEPT)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(','))
            .any(|media| {
                let media = media.split(';').next().unwrap_or_default().trim();
                media.eq_ignore_ascii_case("text/html")
            });
        Self(navigate || wants_html)
    }

    /// `answered`, with its refusal as a page for a navigation.
    pub fn answer(self, answered: Result<Response, ApiError>) -> Response {
        match answered {
            Ok(response) => response,
            Err(err) if self.0 => page_of(err),
            Err(err) => err.into_response(),
        }
    }
}

impl<S: Send + Sync> FromRequestParts<S> for Navigation {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, Self::Rejection> {
        Ok(Self::of(&parts.headers))
    }
}

/// `err` as a small page: its title, its message and the way back, with
/// the status and headers its JSON answer has.
fn page_of(err: ApiError) -> Response {
    let title = match &err {
        ApiError::TooManySessions(_) => "Too many new sessions",
        ApiError::NoRoom(_) | ApiError::Unavailable(_) => "Not now",
        _ => "That did not work",
    };
    let message = err.to_string();
    // Logged, and its headers made, as the JSON answer is.
    let (parts, _) = err.into_response().into_parts();
    let main = format!(
        "<h1>{}</h1>\n<p role=\"alert\">{}</p>\n<p><a href=\"/\">Back to runcell</a></p>",
        escape(title),
        escape(&message)
    );
    let mut page = server_page(title, "signin", &main, parts.status);
    for (name, value) in &parts.headers {
        if name != header::CONTENT_TYPE && name != header::CONTENT_LENGTH {
            page.headers_mut().insert(name.clone(), value.clone());
        }
    }
    page
}

#[cfg(test)]
mod tests {
    use axum::http::{HeaderValue, StatusCode};

    use super::*;
    use runcell_agent::session::quota::{Budget, TooManySessions};

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.append(*name, HeaderValue::from_static(value));
        }
        map
    }

    #[test]
    fn a_navigation_is_told_by_its_fetch_mode_or_its_accept() {
        for (pairs, navigation) in [
            (vec![("sec-fetch-mode", "navigate")], true),
            (
                vec![("accept", "text/html,application/xhtml+xml;q=0.9")],
                true,
            ),
            (
                vec![
                    ("accept", "application/json"),
                    ("accept", "TEXT/HTML; q=0.8"),
                ],
                true,
            ),
            (vec![("accept", "*/*")], false),
            (vec![("accept", "application/json")], false),
            (vec![("sec-fetch-mode", "cors"), ("accept", "*/*")], false),
            (vec![], false),
        ] {
            assert_eq!(
                Navigation::of(&headers(&pairs)),
                Navigation(navigation),
                "{pairs:?}"
            );
        }
    }

    #[tokio::test]
    async fn a_refusal_is_a_page_for_a_navigation_with_its_status_and_wait() {
        let refusal = || {
            Err(ApiError::TooManySessions(TooManySessions {
                burst: 30,
                retry_after: std::time::Duration::from_secs(2),
                budget: Budget::Address,
            }))
        };
        let page = Navigation(true).answer(refusal());
        assert_eq!(page.status(), StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(page.headers()[header::RETRY_AFTER], "2");
        assert_eq!(
            page.headers()[header::CONTENT_TYPE],
            "text/html; charset=utf-8"
        );
        let body = axum::body::to_bytes(page.into_body(), usize::MAX)
            .await
            .unwrap_or_default();
        let html = String::from_utf8_lossy(&body);
        assert!(
            html.contains("<h1>Too many new sessions</h1>\n<p role=\"alert\">pages from your address made 30 new sessions this minute, the most anonymous pages may; sign in, or try again within a minute</p>"),
            "{html}"
        );
        let json = Navigation(false).answer(refusal());
        assert_eq!(json.status(), StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(json.headers()[header::RETRY_AFTER], "2");
        assert_eq!(json.headers()[header::CONTENT_TYPE], "application/json");
    }
}
