//! Who may call and how much: the `[auth]` section of the server's
//! configuration.

use runcell_core::Secret;
use serde::{Deserialize, Serialize};

/// Who may use the API and the pages, and how much.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AuthConfig {
    /// Whether the pages ask for an API key (`RUNCELL_AUTH`): `auto` (only
    /// when listening beyond loopback), `open` or `required`. The `/v1` API
    /// and `/mcp` always need a key.
    pub mode: AuthMode,
    /// The secret access tokens are signed with (HS256, at least 32 bytes);
    /// empty: one is generated into `<data_dir>/auth-secret` on first start.
    pub jwt_secret: Secret,
    /// Seconds an access token from `POST /v1/auth/token` lasts.
    pub token_ttl_secs: u64,
    /// Seconds a page sign-in lasts (when the pages ask for a key).
    pub ui_session_secs: u64,
    /// Runs each key may start a minute, on average (default: 12,000 per
    /// core, more than the machine can run)...
    pub runs_per_minute: u32,
    /// ...and at once after a quiet spell (default: 100 per core).
    pub run_burst: u32,
    /// Runs of one key under way at once, at most (default: two per core,
    /// at least 4).
    pub max_concurrent_runs: u32,
    /// Sandbox sessions one key may hold open at once: a quarter of
    /// `sandbox.max_sessions` by default, so that one key and the
    /// anonymous pages' share together still leave slots for everyone else.
    pub max_live_sessions: u32,
    /// Seconds between looks at the key store for revoked keys, whose live
    /// connections (Jupyter sockets and kernels, MCP sessions, E2B
    /// sandboxes, `/v1` sessions) are then closed.
    pub revocation_check_secs: u64,
    /// MCP sessions one key may hold open at once; one more is refused.
    pub mcp_sessions_per_key: u32,
    /// Seconds an MCP session may go unused before it is closed.
    pub mcp_session_idle_secs: u64,
}

/// Whether the pages ask for a key.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AuthMode {
    #[default]
    Auto,
    Open,
    Required,
}

/// Runs a minute per core a key may start by default: a one-shot run costs
/// at least ~5 ms of a core (a fresh jail and the smallest program), so a
/// machine cannot run faster than this, and on one's own machine the key's
/// limit is never what holds an evaluation harness back: the machine is.
const RUNS_PER_MINUTE_PER_CORE: u32 = 12_000;
/// Runs at once after a quiet spell, per core.
const RUN_BURST_PER_CORE: u32 = 100;

/// The cores this process may use (its cgroup's quota counted).
fn cores() -> u32 {
    std::thread::available_parallelism().map_or(1, |n| u32::try_from(n.get()).unwrap_or(u32::MAX))
}

impl Default for AuthConfig {
    fn default() -> Self {
        let cores = cores();
        Self {
            mode: AuthMode::Auto,
            jwt_secret: Secret::default(),
            token_ttl_secs: 3600,
            ui_session_secs: 7 * 24 * 3600,
            runs_per_minute: RUNS_PER_MINUTE_PER_CORE.saturating_mul(cores),
            run_burst: RUN_BURST_PER_CORE.saturating_mul(cores),
            // Enough to keep every core busy with runs that wait on I/O.
            max_concurrent_runs: cores.saturating_mul(2).max(4),
            max_live_sessions: 8,
            revocation_check_secs: 5,
            mcp_sessions_per_key: 16,
            mcp_session_idle_secs: 600,
        }
    }
}
