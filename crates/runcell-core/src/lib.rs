//! runcell's smallest shared pieces, used by every layer above: the wall
//! clock as the wire carries it, the Prometheus metrics, secret settings, and
//! the few rules that several layers count limits by.

pub mod clock;
pub mod metrics;
mod secret;

use std::net::IpAddr;
use std::path::Path;
use std::time::Duration;

pub use secret::{REDACTED, Secret};

/// Where a relative path in the configuration points, for messages.
pub fn display_path(path: &Path) -> String {
    std::path::absolute(path)
        .unwrap_or_else(|_| path.to_path_buf())
        .display()
        .to_string()
}

/// A wait as the whole seconds of a `Retry-After` (rounded up, at least 1).
pub fn retry_after_secs(wait: Duration) -> u64 {
    wait.as_secs_f64().ceil().max(1.0) as u64
}

/// Something that holds live connections or sessions of API keys.
#[async_trait::async_trait]
pub trait HeldByKey: Send + Sync {
    /// What it is, for the log.
    fn what(&self) -> &'static str;
    /// Closes everything of `key_id`'s; how many were closed.
    async fn close_key(&self, key_id: &str) -> usize;
}

/// The address a client is counted under: itself, or for IPv6 its /64 (one
/// host's usual share, which it may fill with addresses at will).
pub fn address_key(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V4(_) => ip,
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => {
                let mut segments = v6.segments();
                segments[4..].fill(0);
                IpAddr::V6(segments.into())
            }
        },
    }
}
