//! What the abuse bench's attackers share: clients and connections from
//! other loopback addresses than the good users', and the tally of what
//! they were answered.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::Duration;

use parking_lot::Mutex;

use crate::{BenchError, fail};

/// What the attackers were answered, by kind and status.
#[derive(Default)]
pub(crate) struct Answers(Mutex<std::collections::BTreeMap<(&'static str, String), u64>>);

impl Answers {
    /// Every (attack, answer) with how many times, sorted.
    pub(crate) fn counts(&self) -> Vec<((&'static str, String), u64)> {
        self.0.lock().iter().map(|(k, v)| (k.clone(), *v)).collect()
    }

    pub(crate) fn note(&self, attack: &'static str, answer: impl Into<String>) {
        *self.0.lock().entry((attack, answer.into())).or_default() += 1;
    }

    pub(crate) fn note_status(
        &self,
        attack: &'static str,
        result: &Result<reqwest::Response, reqwest::Error>,
    ) {
        match result {
            Ok(response) => self.note(attack, response.status().as_u16().to_string()),
            Err(err) if err.is_timeout() => self.note(attack, "timed out"),
            Err(_) => self.note(attack, "connection refused or closed"),
        }
    }
}

/// A client whose connections come from `from`. It drops a keep-alive
/// connection after 5 s idle, before the server ends one at its header-read
/// timeout (10 s): otherwise a request sent on a connection at the moment
/// the server closes it fails, which a browser retries and reqwest does not
/// (seen once in a CI rehearsal: one of the signed-in page's loads "lost").
pub(crate) fn client_from(
    from: Ipv4Addr,
    timeout: Duration,
) -> Result<reqwest::Client, BenchError> {
    reqwest::Client::builder()
        .local_address(IpAddr::V4(from))
        .pool_idle_timeout(Duration::from_secs(5))
        .timeout(timeout)
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .map_err(fail)
}

pub(crate) fn attacker(n: u8) -> Ipv4Addr {
    Ipv4Addr::new(127, 0, 0, n)
}

/// A TCP connection from `from`.
pub(crate) async fn connect_from(
    from: Ipv4Addr,
    to: SocketAddr,
) -> std::io::Result<tokio::net::TcpStream> {
    let socket = tokio::net::TcpSocket::new_v4()?;
    socket.bind(SocketAddr::from((from, 0)))?;
    socket.connect(to).await
}

/// The `name=value` of cookie `name` in a response's `Set-Cookie`s.
pub(crate) fn cookie(response: &reqwest::Response, name: &str) -> Option<String> {
    response
        .headers()
        .get_all(reqwest::header::SET_COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .filter_map(|v| v.split(';').next())
        .find(|pair| pair.starts_with(&format!("{name}=")))
        .map(str::to_string)
}
