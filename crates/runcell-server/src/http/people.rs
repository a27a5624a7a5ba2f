//! What the admin and account pages share: the signed-in person of a
//! request, their pages' frame, and how times and amounts are written.

use std::sync::Arc;

use app::render::markdown::escape;
use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use axum::http::{Method, StatusCode};
use axum::response::{IntoResponse, Redirect, Response};

use super::document::server_page;
use super::signin::{Signed, next_query};
use crate::accounts::SignedIn;
use runcell_store::{Role, UserRecord};

/// The person signed in on the request. A page asked for by someone who is
/// not signed in as a person goes to the sign-in page (a form post gets a
/// 401 page).
pub struct Person(pub Arc<UserRecord>);

impl<S: Send + Sync> FromRequestParts<S> for Person {
    type Rejection = Response;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, Self::Rejection> {
        match parts.extensions.get::<Signed>() {
            Some(Signed(SignedIn::Person(user))) => Ok(Self(Arc::clone(user))),
            _ if parts.method == Method::GET => {
                let back = parts.uri.path_and_query().map_or("/", |p| p.as_str());
                Err(Redirect::to(&format!("/login?{}", next_query(back))).into_response())
            }
            _ => Err(page(
                "Sign in first",
                "<p role=\"alert\">Sign in as a person to do this.</p>",
                StatusCode::UNAUTHORIZED,
            )),
        }
    }
}

/// An admin signed in on the request; anyone else is refused with a page
/// that says why.
pub struct Admin(pub Arc<UserRecord>);

impl<S: Send + Sync> FromRequestParts<S> for Admin {
    type Rejection = Response;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        let Person(user) = Person::from_request_parts(parts, state).await?;
        if user.role == Role::Admin {
            Ok(Self(user))
        } else {
            Err(page(
                "Admins only",
                "<p role=\"alert\">This page is for the admins of this runcell.</p>",
                StatusCode::FORBIDDEN,
            ))
        }
    }
}

/// A whole page of the account area: `title`, and `body` (already
/// escaped HTML) in its `main`. Server-rendered, no scripts.
pub fn page(title: &str, body: &str, status: StatusCode) -> Response {
    let main = format!(
        "<p class=\"people-back\"><a href=\"/\">← runcell</a></p>\n<h1>{}</h1>\n{body}",
        escape(title)
    );
    server_page(title, "people", &main, status)
}

/// A time as people read it in a table: UTC, to the minute.
pub fn when(ms: u64) -> String {
    let at = time::OffsetDateTime::from_unix_timestamp(i64::try_from(ms / 1000).unwrap_or(0))
        .unwrap_or(time::OffsetDateTime::UNIX_EPOCH);
    format!(
        "{:04}-{:02}-{:02} {:02}:{:02} UTC",
        at.year(),
        u8::from(at.month()),
        at.day(),
        at.hour(),
        at.minute()
    )
}

/// A time that may not have happened yet.
pub fn maybe_when(ms: Option<u64>) -> String {
    ms.map_or_else(|| "never".to_string(), when)
}

/// Milliseconds as minutes and seconds.
pub fn duration(ms: u64) -> String {
    let secs = ms / 1000;
    if secs < 60 {
        format!("{secs} s")
    } else if secs < 3600 {
        format!("{} min {} s", secs / 60, secs % 60)
    } else {
        format!("{} h {} min", secs / 3600, (secs % 3600) / 60)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_and_durations_read_plainly() {
        assert_eq!(when(0), "1970-01-01 00:00 UTC");
        assert_eq!(when(1_764_000_000_000), "2025-11-24 16:00 UTC");
        assert_eq!(maybe_when(None), "never");
        assert_eq!(duration(59_999), "59 s");
        assert_eq!(duration(61_000), "1 min 1 s");
        assert_eq!(duration(3_723_000), "1 h 2 min");
    }
}
