//! Request hygiene: the `[http]` section of the server's configuration.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use axum::http::uri::Authority;
use serde::{Deserialize, Serialize};

use super::{ConfigError, bad, none_zero};

/// Request hygiene.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct HttpConfig {
    /// Seconds a request may take to be answered (a run's own wall time is
    /// added on the routes that run code; streams and sockets are not cut).
    pub request_timeout_secs: u64,
    /// Origins other sites' pages may call the API from (CORS); empty: none.
    pub cors_origins: Vec<String>,
    /// Host names this server answers to besides its own (`localhost`,
    /// `127.0.0.1`, `[::1]` and the address it listens on), at any port
    /// (`RUNCELL_ALLOWED_HOSTS`, comma-separated): the names people and
    /// proxies reach it by. A request naming another host is refused (421),
    /// which is what stops DNS rebinding.
    #[serde(deserialize_with = "names")]
    pub allowed_hosts: Vec<String>,
    /// A proxy in front ends TLS and says so in `X-Forwarded-Proto`
    /// (`RUNCELL_HTTP__TRUST_FORWARDED=true`): believed only then, for the
    /// scheme of share links and whether cookies are `Secure`. Off by
    /// default, since any client can send the header.
    pub trust_forwarded: bool,
    /// Connections open at once, from everyone; one more gets a `503`.
    pub max_connections: usize,
    /// Connections open at once from one client address (an IPv6
    /// client's /64); one more gets a `503`.
    pub max_connections_per_address: usize,
    /// Seconds a request's head may take to arrive whole, which is also how
    /// long a keep-alive connection may sit idle; then it is closed.
    pub header_read_timeout_secs: u64,
    /// Seconds a request body may go without a byte; then it is cut.
    pub body_idle_timeout_secs: u64,
    /// KiB of request head (start line and headers) one connection may send.
    pub max_header_kib: usize,
    /// Upload bodies (files, notebooks) being received at once, from
    /// everyone; each goes to a file under `<data_dir>/spool`, never to
    /// memory. One more is refused with 429 and `Retry-After`.
    pub uploads_in_flight: usize,
}

impl Default for HttpConfig {
    fn default() -> Self {
        Self {
            request_timeout_secs: 60,
            cors_origins: Vec::new(),
            allowed_hosts: Vec::new(),
            trust_forwarded: false,
            max_connections: 1024,
            max_connections_per_address: 256,
            header_read_timeout_secs: 10,
            body_idle_timeout_secs: 30,
            max_header_kib: 64,
            uploads_in_flight: 8,
        }
    }
}

impl HttpConfig {
    /// Whether these settings can be used: the limits and timeouts more
    /// than 0, the CORS origins real origins, the host names bare names.
    pub(super) fn validate(&self) -> Result<(), ConfigError> {
        none_zero(&[
            ("http.request_timeout_secs", self.request_timeout_secs),
            ("http.max_connections", self.max_connections as u64),
            (
                "http.max_connections_per_address",
                self.max_connections_per_address as u64,
            ),
            (
                "http.header_read_timeout_secs",
                self.header_read_timeout_secs,
            ),
            ("http.body_idle_timeout_secs", self.body_idle_timeout_secs),
            ("http.max_header_kib", self.max_header_kib as u64),
            ("http.uploads_in_flight", self.uploads_in_flight as u64),
        ])?;
        for origin in &self.cors_origins {
            if origin == "*" || !(origin.starts_with("http://") || origin.starts_with("https://")) {
                return Err(bad(
                    "http.cors_origins",
                    format!(
                        "`{origin}` is not an origin like https://example.org (`*` is not allowed)"
                    ),
                ));
            }
        }
        for host in &self.allowed_hosts {
            if configured_name(host).is_none() {
                return Err(bad(
                    "http.allowed_hosts",
                    format!(
                        "`{host}` is not a host name like runcell.example.org (no scheme, port or path; IPv6 in brackets)"
                    ),
                ));
            }
        }
        Ok(())
    }
}

/// A list of names, as a list or as one comma-separated string (the way an
/// environment variable gives it).
fn names<'de, D>(deserializer: D) -> Result<Vec<String>, D::Error>
where
    D: serde::Deserializer<'de>,
{
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Names {
        List(Vec<String>),
        Joined(String),
    }
    let names = match Names::deserialize(deserializer)? {
        Names::List(list) => list,
        Names::Joined(joined) => joined.split(',').map(str::to_string).collect(),
    };
    Ok(names
        .into_iter()
        .map(|name| name.trim().to_string())
        .filter(|name| !name.is_empty())
        // `[fd00::5]` in the environment reads as a list of one bare address.
        .map(|name| {
            if name.parse::<Ipv6Addr>().is_ok() {
                format!("[{name}]")
            } else {
                name
            }
        })
        .collect())
}

// Host names, as `allowed_hosts` holds them and requests name them.

/// An IP address as a host name: IPv6 in brackets.
pub(crate) fn ip_name(ip: &IpAddr) -> String {
    match ip {
        IpAddr::V4(v4) => v4.to_string(),
        IpAddr::V6(v6) => format!("[{v6}]"),
    }
}

/// The host of an authority (`host[:port]`), normalised; `None` if it is
/// not one (or carries credentials, which no browser sends in `Host`).
pub fn host_of(authority: &str) -> Option<String> {
    if authority.contains('@') {
        return None;
    }
    let parsed: Authority = authority.parse().ok()?;
    let host = parsed.host().trim_end_matches('.').to_ascii_lowercase();
    if host.is_empty() {
        return None;
    }
    let ip = match host.strip_prefix('[').and_then(|h| h.strip_suffix(']')) {
        Some(v6) => v6.parse::<Ipv6Addr>().ok().map(IpAddr::V6),
        None => host.parse::<Ipv4Addr>().ok().map(IpAddr::V4),
    };
    Some(ip.as_ref().map_or(host, ip_name))
}

/// A configured host name, normalised: a name or address alone, without a
/// scheme, port or path.
pub fn configured_name(name: &str) -> Option<String> {
    let parsed: Authority = name.trim().parse().ok()?;
    if parsed.port().is_some() {
        return None;
    }
    host_of(parsed.as_str())
}
