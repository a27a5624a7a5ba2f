//! Where a request was sent: its scheme and host, read in one place. A
//! proxy in front that ends TLS says `X-Forwarded-Proto: https`; that is
//! believed only when `http.trust_forwarded` says such a proxy is there,
//! since anyone can send the header. `X-Forwarded-Host` is never believed:
//! the names this server answers to are `http.allowed_hosts`.

use axum::extract::{FromRef, FromRequestParts};
use axum::http::request::Parts;
use axum::http::uri::Scheme;
use axum::http::{HeaderMap, Uri};

use super::host::authority_of;
use crate::http::state::AppState;

/// Whether a proxy in front says which scheme the client used.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TrustForwarded(pub bool);

impl FromRef<AppState> for TrustForwarded {
    fn from_ref(state: &AppState) -> Self {
        Self(state.config.http.trust_forwarded)
    }
}

/// The scheme and host a request was sent to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RequestOrigin {
    https: bool,
    /// The authority (`host[:port]`) the request names, if it names one
    /// that is plain printable text.
    host: Option<String>,
}

impl RequestOrigin {
    pub fn read(uri: &Uri, headers: &HeaderMap, trust: TrustForwarded) -> Self {
        let forwarded_https = trust.0
            && headers
                .get("x-forwarded-proto")
                .and_then(|v| v.to_str().ok())
                .is_some_and(|v| v.trim().eq_ignore_ascii_case("https"));
        let host = authority_of(uri, headers)
            .filter(|h| !h.is_empty() && h.bytes().all(|b| b.is_ascii_graphic()));
        Self {
            https: uri.scheme() == Some(&Scheme::HTTPS) || forwarded_https,
            host,
        }
    }

    /// `scheme://host`, for absolute links (`localhost` when the request
    /// names no host).
    pub fn base_url(&self) -> String {
        let scheme = if self.https { "https" } else { "http" };
        format!("{scheme}://{}", self.host.as_deref().unwrap_or("localhost"))
    }

    /// Whether cookies set in answer to this request are `Secure`: only
    /// over HTTPS. Browsers would keep a `Secure` cookie on plain HTTP to
    /// loopback too, but other clients' cookie jars (Python's
    /// `http.cookiejar`, and so `requests`) never send one back over HTTP,
    /// and a cookie on loopback has no network to cross.
    pub fn cookies_secure(&self) -> bool {
        self.https
    }
}

/// The address of the client a request came from: the connection's peer,
/// or, where `trust` says a proxy is in front, the address that proxy
/// appended last to `X-Forwarded-For` (the earlier entries are whatever
/// the client sent). `None` when neither is known.
pub fn client_address(
    headers: &HeaderMap,
    peer: Option<std::net::SocketAddr>,
    trust: TrustForwarded,
) -> Option<std::net::IpAddr> {
    let forwarded = trust
        .0
        .then(|| {
            headers
                .get_all("x-forwarded-for")
                .iter()
                .filter_map(|v| v.to_str().ok())
                .flat_map(|v| v.split(','))
                .next_back()
                .and_then(|last| last.trim().parse().ok())
        })
        .flatten();
    forwarded.or_else(|| peer.map(|p| p.ip()))
}

impl<S> FromRequestParts<S> for RequestOrigin
where
    TrustForwarded: FromRef<S>,
    S: Send + Sync,
{
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        Ok(Self::read(
            &parts.uri,
            &parts.headers,
            TrustForwarded::from_ref(state),
        ))
    }
}

#[cfg(test)]
mod tests {
    use axum::http::HeaderValue;

    use super::*;

    fn origin(pairs: &[(&str, &str)], trust: bool) -> RequestOrigin {
        let mut headers = HeaderMap::new();
        for (name, value) in pairs {
            headers.append(
                axum::http::HeaderName::from_bytes(name.as_bytes()).unwrap(),
                HeaderValue::from_str(value).unwrap(),
            );
        }
        RequestOrigin::read(&"/x".parse().unwrap(), &headers, TrustForwarded(trust))
    }

    #[test]
    fn links_use_the_host_and_a_trusted_proxys_scheme() {
        let proxied = [("host", "runcell.example"), ("x-forwarded-proto", "https")];
        assert_eq!(origin(&proxied, true).base_url(), "https://runcell.example");
        assert_eq!(origin(&proxied, false).base_url(), "http://runcell.example");
        assert_eq!(origin(&[], true).base_url(), "http://localhost");
        assert_eq!(
            origin(&[("host", "a b")], false).base_url(),
            "http://localhost"
        );
        // A forwarded host is never believed.
        assert_eq!(
            origin(
                &[
                    ("host", "localhost:3000"),
                    ("x-forwarded-host", "evil.example")
                ],
                true
            )
            .base_url(),
            "http://localhost:3000"
        );
    }

    #[test]
    fn the_client_is_the_peer_or_what_a_trusted_proxy_appended_last() {
        let peer = Some("192.0.2.1:5000".parse().unwrap());
        let mut headers = HeaderMap::new();
        headers.append("x-forwarded-for", HeaderValue::from_static("6.6.6.6"));
        headers.append(
            "x-forwarded-for",
            HeaderValue::from_static("7.7.7.7, 203.0.113.9"),
        );
        let ip = |s: &str| Some(s.parse().unwrap());
        assert_eq!(
            client_address(&headers, peer, TrustForwarded(true)),
            ip("203.0.113.9")
        );
        assert_eq!(
            client_address(&headers, peer, TrustForwarded(false)),
            ip("192.0.2.1")
        );
        assert_eq!(
            client_address(&HeaderMap::new(), peer, TrustForwarded(true)),
            ip("192.0.2.1")
        );
        assert_eq!(
            client_address(&HeaderMap::new(), None, TrustForwarded(false)),
            None
        );
    }

    #[test]
    fn secure_cookies_on_https_only() {
        let secure = |pairs: &[(&str, &str)], trust| origin(pairs, trust).cookies_secure();
        assert!(!secure(&[("host", "127.0.0.1:3000")], false));
        assert!(!secure(&[("host", "localhost")], false));
        assert!(!secure(&[("host", "192.168.1.5:3000")], false));
        assert!(secure(
            &[("host", "runcell.example"), ("x-forwarded-proto", "https")],
            true
        ));
        assert!(!secure(
            &[("host", "runcell.example"), ("x-forwarded-proto", "https")],
            false
        ));
    }
}
