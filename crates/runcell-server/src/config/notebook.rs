//! What one owner and one address may take of the notebook's resources:
//! the `[notebook]` section of the server's configuration.

use serde::{Deserialize, Serialize};

use super::{ConfigError, none_zero};

/// What one browser (an owner cookie) may take of the notebook's resources:
/// new sessions (rows) at a rate, and kernels (memory) at once; and what
/// the anonymous pages of one client address may make together, since an
/// owner cookie is free to drop and make anew.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct NotebookConfig {
    /// Sessions one owner may create an hour, on average (`GET /`,
    /// `POST /api/sessions`, forks)...
    pub sessions_per_hour: u32,
    /// ...and at once after a quiet spell.
    pub session_burst: u32,
    /// Sessions the anonymous pages (not signed in, no key) of one client
    /// address may create a minute together, whatever owner cookies they
    /// carry or drop: all of them at once after a quiet minute, then one
    /// every `60 / n` seconds; one more is refused with 429 and
    /// `Retry-After`. The address is the one the per-address sandbox cap
    /// uses (the peer's, or the last `X-Forwarded-For` hop when
    /// `http.trust_forwarded`; one IPv6 /64 is one address); loopback
    /// counts too. A person on their own machine meets their cookie's
    /// `session_burst` first.
    pub anonymous_sessions_per_minute: u32,
    /// Kernels one owner's sessions may hold at once; a new one closes the
    /// owner's longest-idle kernel, or is refused while all of them run.
    pub max_kernels_per_owner: u32,
    /// A single-person install: anonymous pages from this machine itself
    /// (loopback) count as known, so the per-address and anonymous-share
    /// caps of the sandbox slots do not hold them, only
    /// `max_kernels_per_owner` (which closes their longest-idle kernel).
    /// Unset: on when the server listens on a loopback address only. Turn
    /// it off when a reverse proxy on the same machine forwards other
    /// people's requests without `http.trust_forwarded`, since they all
    /// arrive from loopback.
    pub single_person: Option<bool>,
    /// MiB of `.ipynb` one import may send; a bigger one is refused as it
    /// streams in.
    pub import_mib: u64,
    /// Notebook imports read at once, from everyone; one more gets 429.
    pub imports_in_flight: u32,
    /// Sockets open at once on one session; one more is closed (1013).
    pub max_sockets_per_session: u32,
    /// Sockets one owner may have open at once, on all its sessions and
    /// share links together; one more is closed (1013).
    pub max_sockets_per_owner: u32,
}

impl Default for NotebookConfig {
    fn default() -> Self {
        Self {
            sessions_per_hour: 120,
            session_burst: 30,
            anonymous_sessions_per_minute: 30,
            max_kernels_per_owner: 4,
            single_person: None,
            import_mib: 8,
            imports_in_flight: 2,
            max_sockets_per_session: 8,
            max_sockets_per_owner: 32,
        }
    }
}

impl NotebookConfig {
    /// Whether these settings can be used: every rate and cap more than 0.
    pub(super) fn validate(&self) -> Result<(), ConfigError> {
        none_zero(&[
            (
                "notebook.sessions_per_hour",
                u64::from(self.sessions_per_hour),
            ),
            ("notebook.session_burst", u64::from(self.session_burst)),
            (
                "notebook.anonymous_sessions_per_minute",
                u64::from(self.anonymous_sessions_per_minute),
            ),
            (
                "notebook.max_kernels_per_owner",
                u64::from(self.max_kernels_per_owner),
            ),
            ("notebook.import_mib", self.import_mib),
            (
                "notebook.imports_in_flight",
                u64::from(self.imports_in_flight),
            ),
            (
                "notebook.max_sockets_per_session",
                u64::from(self.max_sockets_per_session),
            ),
            (
                "notebook.max_sockets_per_owner",
                u64::from(self.max_sockets_per_owner),
            ),
        ])
    }
}
