//! Requests that change something on a cookie's say-so must come from this
//! server's own pages: browsers send cookies with other sites' form posts
//! and fetches too. Programs (no `Origin`, no `Sec-Fetch-Site`) hold their
//! own cookie and pass; `/v1`, `/mcp` and E2B's routes take bearer keys and
//! are not behind this.

use axum::extract::{Request, State};
use axum::http::{HeaderMap, Method, Uri, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::ApiError;
use super::host::{AllowedHosts, authority_of};

/// Whether a request was sent by a page of this server, or by no page at
/// all. With an `Origin` (every browser sends one with a POST, and with a
/// WebSocket handshake), it must be the origin the request was sent to, or
/// a configured host name (the public name of a proxy in front). `null`
/// says only that the browser would not tell: a sandboxed frame (an HTML
/// output, the page's Python) sends it, and so does Chromium for this
/// site's own form posts, since its pages ask for no referrer. Then
/// `Sec-Fetch-Site` decides, which a page cannot forge: it must be sent
/// and say `same-origin`. Without an `Origin`, `Sec-Fetch-Site`, if sent,
/// must say `same-origin` or `none` (typed by the person).
pub fn from_this_site(hosts: &AllowedHosts, uri: &Uri, headers: &HeaderMap) -> bool {
    let fetch_site = headers.get("sec-fetch-site");
    if let Some(origin) = headers.get(header::ORIGIN) {
        if origin == "null" {
            return fetch_site.is_some_and(|site| site == "same-origin");
        }
        let Some(authority) = origin
            .to_str()
            .ok()
            .and_then(|o| o.split_once("://"))
            .filter(|(scheme, _)| matches!(*scheme, "http" | "https"))
            .map(|(_, rest)| rest)
        else {
            return false;
        };
        if authority.contains('/') {
            return false;
        }
        let sent_to = authority_of(uri, headers);
        return sent_to.is_some_and(|to| to.eq_ignore_ascii_case(authority))
            || hosts.is_configured(authority);
    }
    fetch_site.is_none_or(|site| site == "same-origin" || site == "none")
}

/// Whether `method` may change something.
fn changes(method: &Method) -> bool {
    !matches!(*method, Method::GET | Method::HEAD | Method::OPTIONS)
}

/// Refuses, with 403, a request that may change something and that another
/// site's page sent.
pub async fn refuse_cross_site(
    State(hosts): State<AllowedHosts>,
    request: Request,
    next: Next,
) -> Response {
    if !changes(request.method()) || from_this_site(&hosts, request.uri(), request.headers()) {
        return next.run(request).await;
    }
    ApiError::Forbidden("this request must come from runcell's own pages".into()).into_response()
}

#[cfg(test)]
mod tests {
    use axum::http::HeaderValue;

    use super::*;

    fn check(pairs: &[(&str, &str)]) -> bool {
        let hosts = AllowedHosts::new(
            "127.0.0.1:3000".parse().unwrap(),
            &["runcell.example".into()],
        );
        let mut headers = HeaderMap::new();
        for (name, value) in pairs {
            headers.append(
                axum::http::HeaderName::from_bytes(name.as_bytes()).unwrap(),
                HeaderValue::from_str(value).unwrap(),
            );
        }
        from_this_site(&hosts, &"/x".parse().unwrap(), &headers)
    }

    #[test]
    fn only_this_servers_pages_and_programs_pass() {
        let cases: &[(&[(&str, &str)], bool)] = &[
            (&[("host", "localhost:3000")], true),
            (
                &[
                    ("host", "localhost:3000"),
                    ("origin", "http://localhost:3000"),
                ],
                true,
            ),
            (
                &[
                    ("host", "LOCALHOST:3000"),
                    ("origin", "http://localhost:3000"),
                ],
                true,
            ),
            // Another port of the same name is another site's page.
            (
                &[
                    ("host", "localhost:3000"),
                    ("origin", "http://localhost:8080"),
                ],
                false,
            ),
            (
                &[
                    ("host", "localhost:3000"),
                    ("origin", "http://evil.example"),
                ],
                false,
            ),
            (&[("host", "localhost:3000"), ("origin", "null")], false),
            // `null` from a sandboxed frame: the browser says cross-site.
            (
                &[
                    ("host", "localhost:3000"),
                    ("origin", "null"),
                    ("sec-fetch-site", "cross-site"),
                ],
                false,
            ),
            // `null` from this site's own form (its pages ask for no
            // referrer): the browser says same-origin.
            (
                &[
                    ("host", "localhost:3000"),
                    ("origin", "null"),
                    ("sec-fetch-site", "same-origin"),
                ],
                true,
            ),
            (
                &[
                    ("host", "localhost:3000"),
                    ("origin", "null"),
                    ("sec-fetch-site", "none"),
                ],
                false,
            ),
            (
                &[
                    ("host", "localhost:3000"),
                    ("origin", "http://localhost:3000.evil"),
                ],
                false,
            ),
            (
                &[
                    ("host", "localhost:3000"),
                    ("origin", "http://localhost:3000/x"),
                ],
                false,
            ),
            // A proxy's public name, whatever the Host it forwards.
            (
                &[
                    ("host", "127.0.0.1:3000"),
                    ("origin", "https://runcell.example"),
                ],
                true,
            ),
            // A forwarded host is not believed.
            (
                &[
                    ("host", "localhost:3000"),
                    ("x-forwarded-host", "evil.example"),
                    ("origin", "http://evil.example"),
                ],
                false,
            ),
            (
                &[
                    ("host", "localhost:3000"),
                    ("sec-fetch-site", "same-origin"),
                ],
                true,
            ),
            (
                &[("host", "localhost:3000"), ("sec-fetch-site", "none")],
                true,
            ),
            (
                &[("host", "localhost:3000"), ("sec-fetch-site", "cross-site")],
                false,
            ),
            (
                &[("host", "localhost:3000"), ("sec-fetch-site", "same-site")],
                false,
            ),
        ];
        for (headers, passes) in cases {
            assert_eq!(check(headers), *passes, "{headers:?}");
        }
    }
}
