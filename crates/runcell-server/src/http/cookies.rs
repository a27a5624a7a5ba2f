//! runcell's cookies, read and written: the whole site, out of scripts'
//! reach, not sent with other sites' requests.

use axum::http::{HeaderMap, HeaderValue, header};
use axum::response::Response;
use cookie::{Cookie, SameSite};

/// The value of the cookie `name`, from any `Cookie` header.
pub fn cookie_in(headers: &HeaderMap, name: &str) -> Option<String> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(Cookie::split_parse)
        .filter_map(Result::ok)
        .find(|c| c.name() == name)
        .map(|c| c.value().to_string())
}

/// A `Set-Cookie` value for runcell's cookies: the whole site, out of
/// scripts' reach, not sent with other sites' requests; `Secure` where the
/// browser will keep it.
pub fn site_cookie(name: &str, value: &str, secure: bool, max_age: time::Duration) -> String {
    path_cookie(name, value, "/", secure, max_age)
}

/// As [`site_cookie`], sent only under `path`.
pub fn path_cookie(
    name: &str,
    value: &str,
    path: &str,
    secure: bool,
    max_age: time::Duration,
) -> String {
    Cookie::build((name, value))
        .path(path.to_string())
        .http_only(true)
        .same_site(SameSite::Lax)
        .secure(secure)
        .max_age(max_age)
        .build()
        .to_string()
}

/// Adds a `Set-Cookie` header to `response`.
pub fn set_cookie(response: &mut Response, cookie: &str) {
    match HeaderValue::from_str(cookie) {
        Ok(value) => {
            response.headers_mut().append(header::SET_COOKIE, value);
        }
        Err(err) => tracing::error!(%err, "cannot write a cookie"),
    }
}
