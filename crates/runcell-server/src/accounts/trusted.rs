//! Sign-in by a trusted proxy's header (`auth.trusted_header`): a proxy in
//! front that has signed the person in names them in a header. Believed
//! only on connections from `auth.trusted_proxies` (the TCP peer, never a
//! forwarded address, which anyone can write); from anyone else the
//! header is ignored.

use std::net::SocketAddr;

use axum::http::{HeaderMap, HeaderName};
use ipnet::IpNet;

use crate::config::AuthConfig;
use crate::config::auth::proxy_network;
use runcell_store::Identity;

/// Bytes of a header value taken as a name or an email.
const MAX_VALUE_BYTES: usize = 200;

/// The configured header and the proxies it is believed from.
#[derive(Clone, Debug)]
pub struct TrustedHeader {
    header: HeaderName,
    email: Option<HeaderName>,
    proxies: Vec<IpNet>,
}

impl TrustedHeader {
    /// As the configuration says; `None` when it is off.
    pub fn from_config(config: &AuthConfig) -> Option<Self> {
        let header = HeaderName::from_bytes(config.trusted_header.trim().as_bytes()).ok()?;
        let email = HeaderName::from_bytes(config.trusted_email_header.trim().as_bytes()).ok();
        let proxies: Vec<IpNet> = config
            .trusted_proxies
            .iter()
            .filter_map(|p| proxy_network(p))
            .collect();
        (!proxies.is_empty()).then_some(Self {
            header,
            email,
            proxies,
        })
    }

    /// The issuer accounts signed in this way are kept under.
    pub fn issuer(&self) -> String {
        format!("header:{}", self.header.as_str())
    }

    /// Whether a connection from `peer` is one of the trusted proxies'.
    pub fn trusts(&self, peer: Option<SocketAddr>) -> bool {
        peer.is_some_and(|peer| {
            let ip = peer.ip().to_canonical();
            self.proxies.iter().any(|net| net.contains(&ip))
        })
    }

    /// Who the proxy says is signed in on this request: `None` without the
    /// header, with an empty, repeated, oversized or unprintable one, or
    /// when the connection is not a trusted proxy's.
    pub fn identity(&self, headers: &HeaderMap, peer: Option<SocketAddr>) -> Option<Identity> {
        if !self.trusts(peer) {
            return None;
        }
        let subject = single(headers, &self.header)?;
        let email = self
            .email
            .as_ref()
            .and_then(|name| single(headers, name))
            .unwrap_or_default();
        Some(Identity {
            issuer: self.issuer(),
            name: subject.clone(),
            subject,
            // The proxy signed the person in; what it says of them is
            // as good as its word on who they are.
            email_verified: !email.is_empty(),
            email,
        })
    }
}

/// The one value of `name` in `headers`, if it is printable text of a
/// sensible length.
fn single(headers: &HeaderMap, name: &HeaderName) -> Option<String> {
    let mut values = headers.get_all(name).iter();
    let value = values.next()?;
    if values.next().is_some() {
        return None;
    }
    let text = value.to_str().ok()?.trim();
    (!text.is_empty() && text.len() <= MAX_VALUE_BYTES && !text.chars().any(char::is_control))
        .then(|| text.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn trusted() -> TrustedHeader {
        let config = AuthConfig {
            trusted_header: "X-Forwarded-User".into(),
            trusted_email_header: "X-Forwarded-Email".into(),
            trusted_proxies: vec!["10.0.0.0/8".into(), "127.0.0.1".into()],
            ..AuthConfig::default()
        };
        TrustedHeader::from_config(&config).expect("configured")
    }

    fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.append(
                HeaderName::from_bytes(name.as_bytes()).expect("name"),
                value.parse().expect("value"),
            );
        }
        map
    }

    #[test]
    fn the_header_is_believed_from_the_proxies_only() {
        let trusted = trusted();
        let asked = headers(&[
            ("x-forwarded-user", "alice"),
            ("x-forwarded-email", "alice@example.test"),
        ]);
        let from = |addr: &str| Some(addr.parse::<SocketAddr>().expect("addr"));
        let alice = trusted
            .identity(&asked, from("10.1.2.3:5000"))
            .expect("from the proxy network");
        assert_eq!(alice.subject, "alice");
        assert_eq!(alice.email, "alice@example.test");
        assert_eq!(alice.issuer, "header:x-forwarded-user");
        assert!(trusted.identity(&asked, from("127.0.0.1:1")).is_some());
        assert!(
            trusted
                .identity(&asked, from("[::ffff:127.0.0.1]:1"))
                .is_some(),
            "an IPv4 peer seen as IPv6 is the same address"
        );
        for stranger in ["192.168.1.5:80", "127.0.0.2:1", "[::1]:1"] {
            assert!(
                trusted.identity(&asked, from(stranger)).is_none(),
                "{stranger}"
            );
        }
        assert!(trusted.identity(&asked, None).is_none());
    }

    #[test]
    fn odd_values_are_no_one() {
        let trusted = trusted();
        let peer = Some("10.0.0.1:1".parse().expect("addr"));
        for bad in [
            headers(&[]),
            headers(&[("x-forwarded-user", "")]),
            headers(&[("x-forwarded-user", "  ")]),
            headers(&[("x-forwarded-user", "a"), ("x-forwarded-user", "b")]),
            headers(&[("x-forwarded-user", &"x".repeat(201))]),
        ] {
            assert!(trusted.identity(&bad, peer).is_none(), "{bad:?}");
        }
        assert!(
            TrustedHeader::from_config(&AuthConfig::default()).is_none(),
            "off unless configured"
        );
    }
}
