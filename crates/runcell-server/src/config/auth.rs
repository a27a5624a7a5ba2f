//! Who may call and how much: the `[auth]` section of the server's
//! configuration.

use runcell_core::{REDACTED, Secret};
use serde::{Deserialize, Serialize};

use super::{ConfigError, bad, none_zero};

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
    /// Sign-in with the organisation's OpenID provider; off while
    /// `oidc.issuer` is empty.
    pub oidc: OidcConfig,
    /// A request header an authenticating proxy in front names the signed-in
    /// person by (e.g. `X-Forwarded-User`); empty: off. Honoured only on
    /// connections from `trusted_proxies`; anyone else's is ignored.
    pub trusted_header: String,
    /// The header the same proxy gives the person's email in (optional).
    pub trusted_email_header: String,
    /// The addresses (or networks, `10.0.0.0/8`) the proxy connects from.
    #[serde(deserialize_with = "list")]
    pub trusted_proxies: Vec<String>,
    /// People who are admins whenever they sign in: their provider's
    /// subject (preferred: the provider never lets a person choose it), or
    /// their email when the provider says it is verified
    /// (`email_verified: true`). Read again at every sign-in: taken off the
    /// list, a person is a member on their next sign-in, unless an admin
    /// made them an admin on the admin page. Admins may make others admins
    /// there.
    #[serde(deserialize_with = "list")]
    pub admins: Vec<String>,
    /// For providers that never send `email_verified`: let `admins`' emails
    /// name admins without it. The trade: anyone who can put that email on
    /// their account at the provider (self-registration without
    /// verification, an editable profile) becomes an admin here. Off by
    /// default; name admins by subject instead where you can.
    pub trust_unverified_admin_emails: bool,
    /// What each signed-in person may use unless an admin gives them
    /// other limits (`[auth.user_limits]`).
    pub user_limits: UserLimits,
    /// Live API keys one person may hold (made at `/account`). All of a
    /// person's keys share one key's budgets and count against the
    /// person's limits, so this only keeps the key table small.
    pub keys_per_person: u32,
    /// API keys one person may make an hour.
    pub keys_made_per_hour: u32,
}

/// A signed-in person's limits, by default.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct UserLimits {
    /// Kernels their notebooks hold at once (a new one closes their
    /// longest-idle kernel, or is refused while all of them run).
    pub live_kernels: u32,
    /// Notebooks they keep.
    pub sessions: u32,
    /// Turns (questions, re-runs, cells run) they start a minute.
    pub runs_per_minute: u32,
    /// Seconds of the model's time their turns take a day (UTC).
    pub model_seconds_per_day: u32,
    /// MiB of files kept in their notebooks.
    pub storage_mib: u32,
}

impl Default for UserLimits {
    fn default() -> Self {
        Self {
            live_kernels: 4,
            sessions: 500,
            runs_per_minute: 60,
            model_seconds_per_day: 4 * 3600,
            storage_mib: 2048,
        }
    }
}

/// An OpenID Connect provider (`[auth.oidc]`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct OidcConfig {
    /// The provider's issuer URL, as its discovery document says it
    /// (`https://login.example.org/realms/team`); empty: no OpenID sign-in.
    pub issuer: String,
    pub client_id: String,
    pub client_secret: Secret,
    /// The sign-in button's words: "Sign in with {name}".
    pub name: String,
    /// Scopes asked for besides `openid`.
    pub scopes: Vec<String>,
    /// Where the provider sends people back: empty means this server's own
    /// `/auth/oidc/callback` as the request reached it. Set it behind a
    /// proxy that rewrites the host; register exactly this URL at the
    /// provider.
    pub redirect_url: String,
    /// PEM certificates to trust for the provider beside the built-in roots
    /// (an internal authority); unset: `SSL_CERT_FILE`, else the system's.
    pub ca_file: Option<std::path::PathBuf>,
}

impl Default for OidcConfig {
    fn default() -> Self {
        Self {
            issuer: String::new(),
            client_id: String::new(),
            client_secret: Secret::default(),
            name: "your organisation".into(),
            scopes: vec!["email".into(), "profile".into()],
            redirect_url: String::new(),
            ca_file: None,
        }
    }
}

impl OidcConfig {
    pub fn enabled(&self) -> bool {
        !self.issuer.trim().is_empty()
    }
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
            oidc: OidcConfig::default(),
            trusted_header: String::new(),
            trusted_email_header: String::new(),
            trusted_proxies: Vec::new(),
            admins: Vec::new(),
            trust_unverified_admin_emails: false,
            user_limits: UserLimits::default(),
            keys_per_person: 10,
            keys_made_per_hour: 20,
        }
    }
}

/// A list, as a list or as one comma-separated string (the way an
/// environment variable gives it); blanks dropped.
fn list<'de, D>(deserializer: D) -> Result<Vec<String>, D::Error>
where
    D: serde::Deserializer<'de>,
{
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Items {
        List(Vec<String>),
        Joined(String),
    }
    let items = match Items::deserialize(deserializer)? {
        Items::List(list) => list,
        Items::Joined(joined) => joined.split(',').map(str::to_string).collect(),
    };
    Ok(items
        .into_iter()
        .map(|item| item.trim().to_string())
        .filter(|item| !item.is_empty())
        .collect())
}

/// A proxy address or network as `trusted_proxies` holds it.
pub fn proxy_network(text: &str) -> Option<ipnet::IpNet> {
    text.parse::<ipnet::IpNet>().ok().or_else(|| {
        text.parse::<std::net::IpAddr>()
            .ok()
            .map(ipnet::IpNet::from)
    })
}

impl AuthConfig {
    /// Whether these settings can be used: the limits more than 0, the
    /// secrets real ones, the sign-in provider and the trusted proxy fully
    /// said.
    pub(super) fn validate(&self) -> Result<(), ConfigError> {
        self.validate_limits()?;
        self.validate_secrets()?;
        self.validate_sign_in()
    }

    fn validate_limits(&self) -> Result<(), ConfigError> {
        let limits = &self.user_limits;
        none_zero(&[
            ("auth.token_ttl_secs", self.token_ttl_secs),
            ("auth.ui_session_secs", self.ui_session_secs),
            ("auth.runs_per_minute", u64::from(self.runs_per_minute)),
            ("auth.run_burst", u64::from(self.run_burst)),
            (
                "auth.max_concurrent_runs",
                u64::from(self.max_concurrent_runs),
            ),
            ("auth.max_live_sessions", u64::from(self.max_live_sessions)),
            ("auth.revocation_check_secs", self.revocation_check_secs),
            (
                "auth.mcp_sessions_per_key",
                u64::from(self.mcp_sessions_per_key),
            ),
            ("auth.mcp_session_idle_secs", self.mcp_session_idle_secs),
            (
                "auth.user_limits.live_kernels",
                u64::from(limits.live_kernels),
            ),
            ("auth.user_limits.sessions", u64::from(limits.sessions)),
            (
                "auth.user_limits.runs_per_minute",
                u64::from(limits.runs_per_minute),
            ),
            (
                "auth.user_limits.model_seconds_per_day",
                u64::from(limits.model_seconds_per_day),
            ),
            (
                "auth.user_limits.storage_mib",
                u64::from(limits.storage_mib),
            ),
        ])
    }

    /// The secrets are not the placeholder `runcell config` prints, and a
    /// signing secret given is long enough.
    fn validate_secrets(&self) -> Result<(), ConfigError> {
        for (setting, secret) in [
            ("auth.jwt_secret", &self.jwt_secret),
            ("auth.oidc.client_secret", &self.oidc.client_secret),
        ] {
            if secret.expose() == REDACTED {
                return Err(bad(
                    setting,
                    "is the placeholder `runcell config` prints; put the real secret here".into(),
                ));
            }
        }
        if !self.jwt_secret.is_empty() && self.jwt_secret.expose().len() < 32 {
            return Err(bad(
                "auth.jwt_secret",
                "must be at least 32 bytes (or empty, to generate one)".into(),
            ));
        }
        Ok(())
    }

    /// The sign-in provider, the trusted headers and their proxies.
    fn validate_sign_in(&self) -> Result<(), ConfigError> {
        if self.oidc.enabled() {
            let issuer = url::Url::parse(self.oidc.issuer.trim())
                .map_err(|e| bad("auth.oidc.issuer", format!("is not a URL: {e}")))?;
            if !matches!(issuer.scheme(), "https" | "http") {
                return Err(bad("auth.oidc.issuer", "must be an https:// URL".into()));
            }
            if self.oidc.client_id.trim().is_empty() {
                return Err(bad(
                    "auth.oidc.client_id",
                    "must be set when auth.oidc.issuer is (the id the provider gave this server)"
                        .into(),
                ));
            }
            if !self.oidc.redirect_url.is_empty() {
                url::Url::parse(&self.oidc.redirect_url)
                    .map_err(|e| bad("auth.oidc.redirect_url", format!("is not a URL: {e}")))?;
            }
        }
        for (setting, header) in [
            ("auth.trusted_header", &self.trusted_header),
            ("auth.trusted_email_header", &self.trusted_email_header),
        ] {
            if !header.is_empty() && axum::http::HeaderName::from_bytes(header.as_bytes()).is_err()
            {
                return Err(bad(setting, format!("`{header}` is not a header name")));
            }
        }
        if !self.trusted_header.is_empty() && self.trusted_proxies.is_empty() {
            return Err(bad(
                "auth.trusted_proxies",
                "must list the proxy's addresses when auth.trusted_header is set (anyone else could send the header)".into(),
            ));
        }
        for proxy in &self.trusted_proxies {
            if proxy_network(proxy).is_none() {
                return Err(bad(
                    "auth.trusted_proxies",
                    format!("`{proxy}` is not an address or a network like 10.0.0.0/8"),
                ));
            }
        }
        Ok(())
    }
}
