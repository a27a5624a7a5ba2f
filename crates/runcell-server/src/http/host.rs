//! The host names that mean this server. Every request must name one of
//! them in `Host` (HTTP/1) or `:authority` (HTTP/2), at any port, or it is
//! refused with `421 Misdirected Request` before anything else sees it.
//!
//! This is what stops DNS rebinding: a page of another site whose name was
//! made to resolve to this server's address is same-origin with itself, so
//! the browser lets it read the answers, but its requests still carry its
//! own name. `X-Forwarded-Host` is never read here: behind a proxy, list the
//! public name in `http.allowed_hosts`.
//!
//! E2B's data plane needs nothing more: the SDKs reach it through one base
//! URL (`E2B_SANDBOX_URL`) that names this server, and say which sandbox and
//! port in headers, never in a `{port}-{id}.{domain}` host name.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{HeaderMap, Uri, Version, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::ApiError;
use crate::config::Config;
use crate::config::http::ip_name;
pub use crate::config::http::{configured_name, host_of};

/// The names this server answers to, each lower-case, without a port or a
/// final dot, IP addresses in their usual form (IPv6 in brackets).
#[derive(Clone, Debug)]
pub struct AllowedHosts {
    names: Arc<[String]>,
    /// The names that were configured (not the built-in ones): another
    /// port of these is still this server (a proxy in front of it).
    configured: Arc<[String]>,
}

impl AllowedHosts {
    /// The loopback names, the address `addr` unless it is a wildcard, and
    /// `configured`.
    pub fn new(addr: SocketAddr, configured: &[String]) -> Self {
        let mut names: Vec<String> = [
            IpAddr::V4(Ipv4Addr::LOCALHOST),
            IpAddr::V6(Ipv6Addr::LOCALHOST),
        ]
        .iter()
        .map(ip_name)
        .collect();
        names.push("localhost".into());
        if !addr.ip().is_unspecified() {
            names.push(ip_name(&addr.ip()));
        }
        let configured: Vec<String> = configured
            .iter()
            .filter_map(|name| configured_name(name))
            .collect();
        names.extend(configured.iter().cloned());
        names.sort();
        names.dedup();
        Self {
            names: names.into(),
            configured: configured.into(),
        }
    }

    pub fn from_config(config: &Config) -> Self {
        Self::new(config.addr, &config.http.allowed_hosts)
    }

    /// Whether `authority` (`host[:port]`) names this server.
    pub fn allows(&self, authority: &str) -> bool {
        host_of(authority).is_some_and(|host| self.names.contains(&host))
    }

    /// Whether `authority` names a configured host, at any port.
    pub fn is_configured(&self, authority: &str) -> bool {
        host_of(authority).is_some_and(|host| self.configured.contains(&host))
    }
}

/// The authorities a request names: its URI's (HTTP/2's `:authority`, or
/// an absolute-form HTTP/1 target) and its `Host` header. `None` if a
/// header is not text.
fn named(uri: &Uri, headers: &HeaderMap) -> Option<Vec<String>> {
    let mut names: Vec<String> = uri.authority().map(|a| a.to_string()).into_iter().collect();
    for value in headers.get_all(header::HOST) {
        names.push(value.to_str().ok()?.to_string());
    }
    Some(names)
}

/// The authority the request was sent to: `Host`, else the URI's.
pub fn authority_of(uri: &Uri, headers: &HeaderMap) -> Option<String> {
    headers
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .map(str::to_string)
        .or_else(|| uri.authority().map(|a| a.to_string()))
}

/// Whether every name the request gives is this server's, and it gives
/// one; only HTTP/1.0, which has no `Host` (and which no browser speaks),
/// may give none.
fn is_for_us(hosts: &AllowedHosts, version: Version, uri: &Uri, headers: &HeaderMap) -> bool {
    named(uri, headers).is_some_and(|names| {
        (!names.is_empty() || version <= Version::HTTP_10)
            && names.iter().all(|name| hosts.allows(name))
    })
}

/// Refuses, with 421, a request that names another host than this server.
pub async fn refuse_other_hosts(
    State(hosts): State<AllowedHosts>,
    request: Request,
    next: Next,
) -> Response {
    if is_for_us(&hosts, request.version(), request.uri(), request.headers()) {
        return next.run(request).await;
    }
    ApiError::Misdirected(
        "this server does not answer to the host name in this request; \
         its operator can add the name to http.allowed_hosts (RUNCELL_ALLOWED_HOSTS)"
            .into(),
    )
    .into_response()
}

#[cfg(test)]
mod tests {
    use axum::http::HeaderValue;

    use super::*;

    fn loopback() -> AllowedHosts {
        AllowedHosts::new("127.0.0.1:3000".parse().unwrap(), &[])
    }

    #[test]
    fn loopback_names_are_allowed_at_any_port() {
        let hosts = loopback();
        for name in [
            "localhost",
            "LOCALHOST:8080",
            "localhost.:3000",
            "127.0.0.1",
            "127.0.0.1:3000",
            "[::1]:3000",
            "[0:0:0:0:0:0:0:1]",
        ] {
            assert!(hosts.allows(name), "{name}");
        }
        for name in [
            "evil.example",
            "evil.example:3000",
            "127.0.0.1.evil.example",
            "localhost.evil.example",
            "user@localhost",
            "",
            "127.0.0.2",
            "0.0.0.0:3000",
            "local host",
        ] {
            assert!(!hosts.allows(name), "{name}");
        }
    }

    #[test]
    fn the_bound_address_and_configured_names_are_allowed() {
        let hosts = AllowedHosts::new(
            "192.168.1.5:3000".parse().unwrap(),
            &[
                "Runcell.Example".into(),
                "fd00::5".into(),
                "[fd00::6]".into(),
            ],
        );
        assert!(hosts.allows("192.168.1.5:3000"));
        assert!(hosts.allows("runcell.example"));
        assert!(hosts.allows("[fd00::6]:443"));
        assert!(hosts.is_configured("runcell.example:443"));
        assert!(!hosts.is_configured("localhost:3000"));
        assert!(!hosts.allows("sub.runcell.example"));
        // A wildcard address names no one host: only loopback and the
        // configured names.
        let wide = AllowedHosts::new("0.0.0.0:3000".parse().unwrap(), &[]);
        assert!(wide.allows("localhost:3000"));
        assert!(!wide.allows("0.0.0.0:3000"));
        assert!(!wide.allows("192.168.1.5:3000"));
        let wide6 = AllowedHosts::new("[::]:3000".parse().unwrap(), &["box.lan".into()]);
        assert!(wide6.allows("box.lan:3000"));
        assert!(!wide6.allows("[::]:3000"));
    }

    #[test]
    fn configured_names_have_no_scheme_port_or_path() {
        assert_eq!(configured_name("Box.Lan").as_deref(), Some("box.lan"));
        assert_eq!(configured_name("[::1]").as_deref(), Some("[::1]"));
        for bad in [
            "https://box.lan",
            "box.lan:3000",
            "box.lan/x",
            "a@box.lan",
            "",
            "::1",
        ] {
            assert_eq!(configured_name(bad), None, "{bad}");
        }
    }

    #[test]
    fn every_name_a_request_gives_must_be_ours() {
        let hosts = loopback();
        let with_host = |host: &str| {
            let mut headers = HeaderMap::new();
            headers.insert(header::HOST, HeaderValue::from_str(host).unwrap());
            headers
        };
        let path: Uri = "/".parse().unwrap();
        assert!(is_for_us(
            &hosts,
            Version::HTTP_11,
            &path,
            &with_host("localhost:3000")
        ));
        assert!(!is_for_us(
            &hosts,
            Version::HTTP_11,
            &path,
            &with_host("evil.example")
        ));
        assert!(!is_for_us(
            &hosts,
            Version::HTTP_11,
            &path,
            &HeaderMap::new()
        ));
        // HTTP/2: `:authority` alone.
        let h2: Uri = "http://localhost:3000/".parse().unwrap();
        assert!(is_for_us(&hosts, Version::HTTP_11, &h2, &HeaderMap::new()));
        let h2_other: Uri = "http://evil.example/".parse().unwrap();
        assert!(!is_for_us(
            &hosts,
            Version::HTTP_11,
            &h2_other,
            &with_host("localhost")
        ));
        assert!(!is_for_us(
            &hosts,
            Version::HTTP_11,
            &h2,
            &with_host("evil.example")
        ));
        // HTTP/1.0 may name no host (no browser speaks it); 1.1 must.
        assert!(is_for_us(
            &hosts,
            Version::HTTP_10,
            &path,
            &HeaderMap::new()
        ));
        assert!(!is_for_us(
            &hosts,
            Version::HTTP_10,
            &path,
            &with_host("evil.example")
        ));
        // A second Host header is looked at too.
        let mut two = with_host("localhost");
        two.append(header::HOST, HeaderValue::from_static("evil.example"));
        assert!(!is_for_us(&hosts, Version::HTTP_11, &path, &two));
    }
}
