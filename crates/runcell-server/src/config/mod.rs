//! The server's settings: defaults, then `runcell.toml` in the data directory,
//! then `RUNCELL_*` environment variables, then command-line flags.

use std::net::SocketAddr;
use std::path::PathBuf;

use figment::Figment;
use figment::providers::{Env, Format, Serialized, Toml};
use runcell_core::REDACTED;
pub use runcell_core::{Secret, display_path};

pub mod auth;
pub mod http;
pub mod jupyter;

pub use self::auth::{AuthConfig, AuthMode, OidcConfig, UserLimits};
pub use self::http::HttpConfig;
pub use self::jupyter::JupyterConfig;
pub use runcell_llm::config::{
    DEFAULT_MODEL_FILE, LlmBackend, LlmConfig, ScriptedMode, StructuredOutputMode, shown_url,
};
pub use runcell_sandbox::config::{E2bConfig, SandboxConfig};
pub use runcell_sandbox::packages::PackagesConfig;
use serde::{Deserialize, Serialize};

/// The file, inside the data directory, that settings may come from.
pub const CONFIG_FILE: &str = "runcell.toml";

/// Settings read from the environment, as `RUNCELL_<NAME>` (a `__` stands
/// for a dot: `RUNCELL_SANDBOX__POOL_SIZE` is `sandbox.pool_size`).
const ENV_KEYS: [&str; 5] = ["addr", "data_dir", "site_root", "log", "database_url"];
/// Any `RUNCELL_SANDBOX__*` is read too; unknown ones are refused by name.
const ENV_SECTIONS: [&str; 9] = [
    "sandbox__",
    "packages__",
    "notebook__",
    "llm__",
    "auth__",
    "http__",
    "e2b__",
    "browser__",
    "jupyter__",
];
/// Conventional names read without the prefix, and where they go.
const ENV_ALIASES: [(&str, &str); 11] = [
    ("RUNCELL_AUTH", "auth.mode"),
    ("RUNCELL_ALLOWED_HOSTS", "http.allowed_hosts"),
    ("RUNCELL_LLM", "llm.backend"),
    ("RUNCELL_MODEL", "llm.model"),
    ("RUNCELL_MODEL_PATH", "llm.model_path"),
    ("OPENAI_BASE_URL", "llm.base_url"),
    ("OPENAI_API_KEY", "llm.api_key"),
    ("E2B_API_KEY", "e2b.api_key"),
    ("E2B_DOMAIN", "e2b.domain"),
    ("E2B_API_URL", "e2b.api_url"),
    ("E2B_SANDBOX_URL", "e2b.sandbox_url"),
];

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// Where the HTTP server listens.
    pub addr: SocketAddr,
    /// Where runcell keeps its files; `runcell.toml` is read from here.
    pub data_dir: PathBuf,
    /// A PostgreSQL server for sessions and keys
    /// (`postgres://user:password@host:port/database`), shared by every node
    /// that names it; empty: SQLite, `runcell.db` in the data directory.
    #[serde(default)]
    pub database_url: Secret,
    /// The built browser files (`pkg/runcell.js`, `.wasm`, `.css`), as
    /// `scripts/build.sh` lays them out.
    pub site_root: PathBuf,
    /// A `tracing` filter, e.g. `info` or `runcell=debug,tower_http=info`.
    pub log: String,
    #[serde(default)]
    pub sandbox: SandboxConfig,
    #[serde(default)]
    pub notebook: NotebookConfig,
    #[serde(default)]
    pub llm: LlmConfig,
    #[serde(default)]
    pub auth: AuthConfig,
    #[serde(default)]
    pub http: HttpConfig,
    #[serde(default)]
    pub e2b: E2bConfig,
    #[serde(default)]
    pub browser: BrowserConfig,
    #[serde(default)]
    pub jupyter: JupyterConfig,
    /// `pip install` in sessions, through runcell's own package index.
    #[serde(default)]
    pub packages: PackagesConfig,
}

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
            import_mib: 8,
            imports_in_flight: 2,
            max_sockets_per_session: 8,
            max_sockets_per_owner: 32,
        }
    }
}

/// The Browser sandbox: Python in the session's own page (offered when the
/// site carries Pyodide).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct BrowserConfig {
    /// How long a run waits for a page of its session to run it.
    pub attach_wait_secs: u64,
    /// How long a run whose page went away waits for it to come back.
    pub gone_grace_secs: u64,
    /// How long a page may take to start a program (its Python starting,
    /// the packages it imports loading) before the run's own wall time
    /// begins: a first `import sympy` on a slow device is not the program's
    /// time.
    pub prepare_wait_secs: u64,
}

impl Default for BrowserConfig {
    fn default() -> Self {
        Self {
            attach_wait_secs: 60,
            gone_grace_secs: 10,
            prepare_wait_secs: 180,
        }
    }
}

impl Config {
    /// Whether E2B's protocol is served here: asked for, and backed by a
    /// local jail.
    pub fn serves_e2b(&self) -> bool {
        self.e2b.serve && self.sandbox.jail
    }
}

impl Config {
    /// Whether the pages ask for an API key.
    pub fn pages_need_key(&self) -> bool {
        match self.auth.mode {
            AuthMode::Open => false,
            AuthMode::Required => true,
            AuthMode::Auto => !self.addr.ip().is_loopback(),
        }
    }
}

impl Default for Config {
    fn default() -> Self {
        Self {
            addr: SocketAddr::from(([127, 0, 0, 1], 3000)),
            data_dir: PathBuf::from("./data"),
            database_url: Secret::default(),
            site_root: PathBuf::from("target/site"),
            log: "info".into(),
            sandbox: SandboxConfig::default(),
            notebook: NotebookConfig::default(),
            llm: LlmConfig::default(),
            auth: AuthConfig::default(),
            http: HttpConfig::default(),
            e2b: E2bConfig::default(),
            browser: BrowserConfig::default(),
            jupyter: JupyterConfig::default(),
            packages: PackagesConfig::default(),
        }
    }
}

/// Settings given on the command line; they win over every other source.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Overrides {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub addr: Option<SocketAddr>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub data_dir: Option<PathBuf>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub database_url: Option<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// A source holds a value of the wrong type or an unknown setting.
    #[error("invalid configuration: {0}")]
    Source(String),
    #[error("invalid setting `{setting}`: {reason}")]
    Setting {
        setting: &'static str,
        reason: String,
    },
}

impl Config {
    /// The effective configuration from all sources.
    pub fn load(overrides: &Overrides) -> Result<Self, ConfigError> {
        // The data directory decides where the file is, so it is settled first.
        let data_dir = overrides
            .data_dir
            .clone()
            .or_else(|| std::env::var_os("RUNCELL_DATA_DIR").map(PathBuf::from))
            .unwrap_or_else(|| Self::default().data_dir);

        let mut config: Self = Figment::from(Serialized::defaults(Self::default()))
            .merge(Toml::file(data_dir.join(CONFIG_FILE)))
            .merge(
                Env::prefixed("RUNCELL_")
                    .filter(|key| {
                        let key = key.as_str().to_ascii_lowercase();
                        ENV_KEYS.contains(&key.as_str())
                            || ENV_SECTIONS.iter().any(|s| key.starts_with(s))
                    })
                    .split("__"),
            )
            .merge(
                Env::raw()
                    .only(&ENV_ALIASES.map(|(from, _)| from))
                    .map(|key| {
                        ENV_ALIASES
                            .iter()
                            .find(|(from, _)| key == *from)
                            .map_or_else(|| key.into(), |(_, to)| (*to).into())
                    }),
            )
            .merge(Serialized::defaults(overrides))
            .extract()
            .map_err(|e| ConfigError::Source(describe(e)))?;
        config.data_dir = data_dir;
        config.validate()?;
        Ok(config)
    }

    fn validate(&self) -> Result<(), ConfigError> {
        let sandbox = &self.sandbox;
        let positive = [
            ("sandbox.max_timeout_secs", sandbox.max_timeout_secs),
            ("sandbox.timeout_secs", sandbox.timeout_secs),
            ("sandbox.memory_mib", sandbox.memory_mib),
            ("sandbox.pids", u64::from(sandbox.pids)),
            ("sandbox.cpu_millis", u64::from(sandbox.cpu_millis)),
            ("sandbox.output_kib", sandbox.output_kib),
            ("sandbox.file_mib", sandbox.file_mib),
            ("sandbox.disk_mib", sandbox.disk_mib),
            ("sandbox.upload_mib", sandbox.upload_mib),
            ("packages.max_file_mib", self.packages.max_file_mib),
            ("packages.max_session_mib", self.packages.max_session_mib),
            ("llm.threads", self.llm.threads as u64),
            ("llm.context_tokens", self.llm.context_tokens as u64),
            ("llm.max_tokens", u64::from(self.llm.max_tokens)),
            ("llm.timeout_secs", self.llm.timeout_secs),
            ("llm.answer_timeout_secs", self.llm.answer_timeout_secs),
            ("auth.token_ttl_secs", self.auth.token_ttl_secs),
            ("auth.ui_session_secs", self.auth.ui_session_secs),
            ("auth.runs_per_minute", u64::from(self.auth.runs_per_minute)),
            ("auth.run_burst", u64::from(self.auth.run_burst)),
            (
                "auth.max_concurrent_runs",
                u64::from(self.auth.max_concurrent_runs),
            ),
            (
                "auth.max_live_sessions",
                u64::from(self.auth.max_live_sessions),
            ),
            (
                "sandbox.anonymous_share_percent",
                u64::from(sandbox.anonymous_share_percent),
            ),
            (
                "sandbox.anonymous_sessions_per_client",
                sandbox.anonymous_sessions_per_client as u64,
            ),
            (
                "auth.revocation_check_secs",
                self.auth.revocation_check_secs,
            ),
            (
                "auth.mcp_sessions_per_key",
                u64::from(self.auth.mcp_sessions_per_key),
            ),
            (
                "auth.mcp_session_idle_secs",
                self.auth.mcp_session_idle_secs,
            ),
            (
                "auth.user_limits.live_kernels",
                u64::from(self.auth.user_limits.live_kernels),
            ),
            (
                "auth.user_limits.sessions",
                u64::from(self.auth.user_limits.sessions),
            ),
            (
                "auth.user_limits.runs_per_minute",
                u64::from(self.auth.user_limits.runs_per_minute),
            ),
            (
                "auth.user_limits.model_seconds_per_day",
                u64::from(self.auth.user_limits.model_seconds_per_day),
            ),
            (
                "auth.user_limits.storage_mib",
                u64::from(self.auth.user_limits.storage_mib),
            ),
            ("http.request_timeout_secs", self.http.request_timeout_secs),
            ("http.max_connections", self.http.max_connections as u64),
            (
                "http.max_connections_per_address",
                self.http.max_connections_per_address as u64,
            ),
            (
                "http.header_read_timeout_secs",
                self.http.header_read_timeout_secs,
            ),
            (
                "http.body_idle_timeout_secs",
                self.http.body_idle_timeout_secs,
            ),
            ("http.max_header_kib", self.http.max_header_kib as u64),
            ("http.uploads_in_flight", self.http.uploads_in_flight as u64),
            ("e2b.sandbox_timeout_secs", self.e2b.sandbox_timeout_secs),
            (
                "e2b.max_sandbox_timeout_secs",
                self.e2b.max_sandbox_timeout_secs,
            ),
            ("browser.attach_wait_secs", self.browser.attach_wait_secs),
            ("browser.prepare_wait_secs", self.browser.prepare_wait_secs),
            (
                "jupyter.max_message_mib",
                self.jupyter.max_message_mib as u64,
            ),
            (
                "jupyter.connection_budget_mib",
                self.jupyter.connection_budget_mib as u64,
            ),
            ("jupyter.key_budget_mib", self.jupyter.key_budget_mib as u64),
            (
                "jupyter.max_queued_cells",
                self.jupyter.max_queued_cells as u64,
            ),
            (
                "jupyter.messages_per_second",
                u64::from(self.jupyter.messages_per_second),
            ),
            (
                "jupyter.restarts_per_minute",
                u64::from(self.jupyter.restarts_per_minute),
            ),
            ("browser.gone_grace_secs", self.browser.gone_grace_secs),
            (
                "notebook.sessions_per_hour",
                u64::from(self.notebook.sessions_per_hour),
            ),
            (
                "notebook.session_burst",
                u64::from(self.notebook.session_burst),
            ),
            (
                "notebook.anonymous_sessions_per_minute",
                u64::from(self.notebook.anonymous_sessions_per_minute),
            ),
            (
                "notebook.max_kernels_per_owner",
                u64::from(self.notebook.max_kernels_per_owner),
            ),
            ("notebook.import_mib", self.notebook.import_mib),
            (
                "notebook.imports_in_flight",
                u64::from(self.notebook.imports_in_flight),
            ),
            (
                "notebook.max_sockets_per_session",
                u64::from(self.notebook.max_sockets_per_session),
            ),
            (
                "notebook.max_sockets_per_owner",
                u64::from(self.notebook.max_sockets_per_owner),
            ),
        ];
        for (setting, value) in positive {
            if value == 0 {
                return Err(ConfigError::Setting {
                    setting,
                    reason: "must be more than 0".into(),
                });
            }
        }
        if self.llm.max_fixes > 10 {
            return Err(ConfigError::Setting {
                setting: "llm.max_fixes",
                reason: "must be at most 10".into(),
            });
        }
        if !sandbox.jail && !self.e2b.enabled() {
            return Err(ConfigError::Setting {
                setting: "sandbox.jail",
                reason: "a node without the local jail runs its sessions' code on E2B: set E2B_API_KEY (and E2B_DOMAIN or E2B_API_URL)".into(),
            });
        }
        if sandbox.anonymous_share_percent > 100 {
            return Err(ConfigError::Setting {
                setting: "sandbox.anonymous_share_percent",
                reason: "must be at most 100".into(),
            });
        }
        if sandbox.timeout_secs > sandbox.max_timeout_secs {
            return Err(ConfigError::Setting {
                setting: "sandbox.timeout_secs",
                reason: "must not be more than sandbox.max_timeout_secs".into(),
            });
        }
        let llm = &self.llm;
        if llm.effective_backend() == LlmBackend::Openai && llm.base_url.trim().is_empty() {
            return Err(ConfigError::Setting {
                setting: "llm.base_url",
                reason: "the openai backend needs a server address (OPENAI_BASE_URL)".into(),
            });
        }
        if llm.api_key.expose() == REDACTED {
            return Err(ConfigError::Setting {
                setting: "llm.api_key",
                reason: "is the placeholder `runcell config` prints; put the real key here".into(),
            });
        }
        let base_url = llm.base_url.trim();
        if !(base_url.is_empty()
            || base_url.starts_with("http://")
            || base_url.starts_with("https://"))
        {
            return Err(ConfigError::Setting {
                setting: "llm.base_url",
                reason: format!("`{}` is not an http:// or https:// address", llm.base_url),
            });
        }
        let database_url = self.database_url.expose().trim();
        if database_url == REDACTED {
            return Err(ConfigError::Setting {
                setting: "database_url",
                reason: "is the placeholder `runcell config` prints; put the real URL here".into(),
            });
        }
        if !(database_url.is_empty()
            || database_url.starts_with("postgres://")
            || database_url.starts_with("postgresql://"))
        {
            return Err(ConfigError::Setting {
                setting: "database_url",
                reason: "must be a postgres:// or postgresql:// URL (or empty, for SQLite in the data directory)".into(),
            });
        }
        tracing_subscriber::EnvFilter::try_new(&self.log).map_err(|e| ConfigError::Setting {
            setting: "log",
            reason: e.to_string(),
        })?;
        if self.auth.jwt_secret.expose() == REDACTED {
            return Err(ConfigError::Setting {
                setting: "auth.jwt_secret",
                reason: "is the placeholder `runcell config` prints; put the real secret here"
                    .into(),
            });
        }
        if self.auth.oidc.client_secret.expose() == REDACTED {
            return Err(ConfigError::Setting {
                setting: "auth.oidc.client_secret",
                reason: "is the placeholder `runcell config` prints; put the real secret here"
                    .into(),
            });
        }
        if !self.auth.jwt_secret.is_empty() && self.auth.jwt_secret.expose().len() < 32 {
            return Err(ConfigError::Setting {
                setting: "auth.jwt_secret",
                reason: "must be at least 32 bytes (or empty, to generate one)".into(),
            });
        }
        self.auth.check()?;
        for origin in &self.http.cors_origins {
            if origin == "*" || !(origin.starts_with("http://") || origin.starts_with("https://")) {
                return Err(ConfigError::Setting {
                    setting: "http.cors_origins",
                    reason: format!(
                        "`{origin}` is not an origin like https://example.org (`*` is not allowed)"
                    ),
                });
            }
        }
        for host in &self.http.allowed_hosts {
            if http::configured_name(host).is_none() {
                return Err(ConfigError::Setting {
                    setting: "http.allowed_hosts",
                    reason: format!(
                        "`{host}` is not a host name like runcell.example.org (no scheme, port or path; IPv6 in brackets)"
                    ),
                });
            }
        }
        if self.data_dir.as_os_str().is_empty() {
            return Err(ConfigError::Setting {
                setting: "data_dir",
                reason: "must not be empty".into(),
            });
        }
        Ok(())
    }

    /// The configuration as `runcell config` prints it, secrets redacted
    /// (every [`Secret`] serializes as whether it is set).
    pub fn to_toml(&self) -> String {
        let mut shown = self.clone();
        shown.llm.base_url = shown_url(&self.llm.base_url);
        toml::to_string_pretty(&shown).unwrap_or_else(|e| format!("# cannot print: {e}\n"))
    }

    /// Whether the browser bundle is where the pages will ask for it.
    pub fn bundle_path(&self) -> PathBuf {
        self.site_root
            .join("pkg")
            .join(format!("{}.js", app::OUTPUT_NAME))
    }

    pub fn config_file(&self) -> PathBuf {
        self.data_dir.join(CONFIG_FILE)
    }
}

/// Names each problem's setting and where its value came from, e.g.
/// ``setting `addr` (RUNCELL_ADDR): invalid socket address syntax``.
fn describe(errors: figment::Error) -> String {
    errors
        .into_iter()
        .map(|e| {
            let key = e.path.join(".").to_ascii_lowercase();
            let origin = match (&e.metadata, &e.profile) {
                (Some(meta), Some(_)) if !e.path.is_empty() => match &meta.source {
                    Some(figment::Source::File(file)) => {
                        format!("in {}", file.display())
                    }
                    _ if meta.name.contains("environment") => {
                        format!("RUNCELL_{}", key.to_ascii_uppercase().replace('.', "__"))
                    }
                    _ => meta.name.to_string(),
                },
                (Some(meta), _) => match &meta.source {
                    Some(figment::Source::File(file)) => file.display().to_string(),
                    _ => meta.name.to_string(),
                },
                _ => "defaults".to_string(),
            };
            if key.is_empty() {
                format!("{} ({origin})", e.kind)
            } else {
                format!("setting `{key}` ({origin}): {}", e.kind)
            }
        })
        .collect::<Vec<_>>()
        .join("; ")
}

#[cfg(test)]
#[expect(
    clippy::result_large_err,
    reason = "figment's Jail closures return its own large error type"
)]
mod tests {
    use std::path::Path;

    use figment::Jail;

    use super::*;

    fn load_in(jail: &Jail, overrides: Overrides) -> Result<Config, ConfigError> {
        let data_dir = jail.directory().join("data");
        std::fs::create_dir_all(&data_dir).map_err(|e| ConfigError::Setting {
            setting: "data_dir",
            reason: e.to_string(),
        })?;
        Config::load(&Overrides {
            data_dir: Some(overrides.data_dir.unwrap_or(data_dir)),
            ..overrides
        })
    }

    #[test]
    fn defaults_apply_without_any_source() {
        Jail::expect_with(|jail| {
            let config = load_in(jail, Overrides::default()).map_err(|e| e.to_string())?;
            assert_eq!(config.addr, Config::default().addr);
            assert_eq!(config.log, "info");
            Ok(())
        });
    }

    #[test]
    fn accounts_are_configured_from_the_environment_and_checked() {
        Jail::expect_with(|jail| {
            jail.set_env(
                "RUNCELL_AUTH__OIDC__ISSUER",
                "https://login.example.org/realms/team",
            );
            jail.set_env("RUNCELL_AUTH__OIDC__CLIENT_ID", "runcell");
            jail.set_env("RUNCELL_AUTH__OIDC__CLIENT_SECRET", "s3cret");
            jail.set_env("RUNCELL_AUTH__ADMINS", "ada@example.org, bob");
            jail.set_env("RUNCELL_AUTH__USER_LIMITS__LIVE_KERNELS", "2");
            let config = load_in(jail, Overrides::default()).map_err(|e| e.to_string())?;
            assert!(config.auth.oidc.enabled());
            assert_eq!(config.auth.oidc.client_secret.expose(), "s3cret");
            assert_eq!(config.auth.admins, ["ada@example.org", "bob"]);
            assert_eq!(config.auth.user_limits.live_kernels, 2);
            assert_eq!(
                config.auth.user_limits.sessions,
                UserLimits::default().sessions
            );

            jail.set_env("RUNCELL_AUTH__OIDC__CLIENT_ID", "");
            let err = load_in(jail, Overrides::default()).map(|_| ()).unwrap_err();
            assert!(err.to_string().contains("auth.oidc.client_id"), "{err}");
            jail.set_env("RUNCELL_AUTH__OIDC__CLIENT_ID", "runcell");
            jail.set_env("RUNCELL_AUTH__OIDC__ISSUER", "ftp://login.example.org");
            let err = load_in(jail, Overrides::default()).map(|_| ()).unwrap_err();
            assert!(err.to_string().contains("auth.oidc.issuer"), "{err}");
            jail.set_env("RUNCELL_AUTH__OIDC__ISSUER", "");

            // A trusted header needs the proxies it is believed from.
            jail.set_env("RUNCELL_AUTH__TRUSTED_HEADER", "X-Forwarded-User");
            let err = load_in(jail, Overrides::default()).map(|_| ()).unwrap_err();
            assert!(err.to_string().contains("auth.trusted_proxies"), "{err}");
            jail.set_env(
                "RUNCELL_AUTH__TRUSTED_PROXIES",
                "10.0.0.0/8, 127.0.0.1, ::1",
            );
            let config = load_in(jail, Overrides::default()).map_err(|e| e.to_string())?;
            assert_eq!(config.auth.trusted_proxies.len(), 3);
            jail.set_env("RUNCELL_AUTH__TRUSTED_PROXIES", "the proxy");
            let err = load_in(jail, Overrides::default()).map(|_| ()).unwrap_err();
            assert!(err.to_string().contains("the proxy"), "{err}");
            jail.set_env("RUNCELL_AUTH__TRUSTED_PROXIES", "127.0.0.1");
            jail.set_env("RUNCELL_AUTH__USER_LIMITS__SESSIONS", "0");
            let err = load_in(jail, Overrides::default()).map(|_| ()).unwrap_err();
            assert!(
                err.to_string().contains("auth.user_limits.sessions"),
                "{err}"
            );
            Ok(())
        });
    }

    #[test]
    fn an_addresss_anonymous_sessions_a_minute_are_set_and_checked() {
        Jail::expect_with(|jail| {
            let config = load_in(jail, Overrides::default()).map_err(|e| e.to_string())?;
            assert_eq!(config.notebook.anonymous_sessions_per_minute, 30);
            jail.set_env("RUNCELL_NOTEBOOK__ANONYMOUS_SESSIONS_PER_MINUTE", "120");
            let config = load_in(jail, Overrides::default()).map_err(|e| e.to_string())?;
            assert_eq!(config.notebook.anonymous_sessions_per_minute, 120);
            jail.set_env("RUNCELL_NOTEBOOK__ANONYMOUS_SESSIONS_PER_MINUTE", "0");
            let err = load_in(jail, Overrides::default()).map(|_| ()).unwrap_err();
            assert_eq!(
                err.to_string(),
                "invalid setting `notebook.anonymous_sessions_per_minute`: must be more than 0"
            );
            Ok(())
        });
    }

    #[test]
    fn auth_mode_follows_the_address_unless_set() {
        Jail::expect_with(|jail| {
            let config = load_in(jail, Overrides::default()).map_err(|e| e.to_string())?;
            assert!(!config.pages_need_key(), "loopback pages stay open");
            let wide = load_in(
                jail,
                Overrides {
                    addr: Some(SocketAddr::from(([0, 0, 0, 0], 3000))),
                    ..Overrides::default()
                },
            )
            .map_err(|e| e.to_string())?;
            assert!(
                wide.pages_need_key(),
                "beyond loopback the pages ask for a key"
            );
            jail.set_env("RUNCELL_AUTH", "required");
            jail.set_env("RUNCELL_AUTH__RUNS_PER_MINUTE", "3");
            jail.set_env("RUNCELL_HTTP__CORS_ORIGINS", "[\"https://a.example\"]");
            let config = load_in(jail, Overrides::default()).map_err(|e| e.to_string())?;
            assert!(config.pages_need_key());
            assert_eq!(config.auth.runs_per_minute, 3);
            assert_eq!(config.http.cors_origins, ["https://a.example"]);
            jail.set_env("RUNCELL_ALLOWED_HOSTS", "runcell.example, box.lan ,");
            let config = load_in(jail, Overrides::default()).map_err(|e| e.to_string())?;
            assert_eq!(config.http.allowed_hosts, ["runcell.example", "box.lan"]);
            jail.set_env("RUNCELL_ALLOWED_HOSTS", "https://runcell.example/");
            let err = load_in(jail, Overrides::default()).map(|_| ()).unwrap_err();
            assert!(err.to_string().contains("http.allowed_hosts"), "{err}");
            jail.set_env("RUNCELL_ALLOWED_HOSTS", "");
            jail.set_env("RUNCELL_AUTH__JWT_SECRET", "short");
            let err = load_in(jail, Overrides::default()).map(|_| ()).unwrap_err();
            assert!(err.to_string().contains("auth.jwt_secret"), "{err}");
            Ok(())
        });
    }

    #[test]
    fn later_sources_win() {
        Jail::expect_with(|jail| {
            jail.create_dir("data")?;
            jail.create_file(
                "data/runcell.toml",
                "addr = \"127.0.0.1:4000\"\nlog = \"debug\"\nsite_root = \"from-file\"\n",
            )?;
            jail.set_env("RUNCELL_LOG", "warn");
            let config = load_in(
                jail,
                Overrides {
                    addr: Some(SocketAddr::from(([127, 0, 0, 1], 5000))),
                    ..Overrides::default()
                },
            )
            .map_err(|e| e.to_string())?;
            assert_eq!(config.site_root, PathBuf::from("from-file"));
            assert_eq!(config.log, "warn");
            assert_eq!(config.addr.port(), 5000);
            Ok(())
        });
    }

    #[test]
    fn bad_values_name_the_setting_and_the_source() {
        struct Case {
            env: &'static [(&'static str, &'static str)],
            file: Option<&'static str>,
            says: &'static [&'static str],
        }
        let cases = [
            Case {
                env: &[("RUNCELL_ADDR", "not-an-address")],
                file: None,
                says: &["setting `addr`", "RUNCELL_ADDR"],
            },
            Case {
                env: &[],
                file: Some("adr = \"127.0.0.1:1\"\n"),
                says: &["setting `adr`", "runcell.toml"],
            },
            Case {
                env: &[],
                file: Some("addr = 1\n"),
                says: &["setting `addr`", "runcell.toml"],
            },
            Case {
                env: &[("RUNCELL_LOG", "runcell=[[[")],
                file: None,
                says: &["setting `log`"],
            },
            Case {
                env: &[("RUNCELL_SANDBOX__TIMEOUT_SECS", "500")],
                file: None,
                says: &["setting `sandbox.timeout_secs`", "max_timeout_secs"],
            },
            Case {
                env: &[("RUNCELL_SANDBOX__MEMORY_MB", "5")],
                file: None,
                says: &["memory_mb"],
            },
            Case {
                env: &[],
                file: Some("[sandbox]\npids = 0\n"),
                says: &["setting `sandbox.pids`"],
            },
            Case {
                env: &[("RUNCELL_LLM__STRUCTURED_OUTPUT", "xml")],
                file: None,
                says: &["setting `llm.structured_output`", "json_schema"],
            },
            Case {
                env: &[],
                file: Some("[llm]\nscripted_mode = \"chatty\"\n"),
                says: &["setting `llm.scripted_mode`", "runcell.toml", "fail_first"],
            },
        ];
        for Case { env, file, says } in cases {
            Jail::expect_with(|jail| {
                for (key, value) in env {
                    jail.set_env(key, value);
                }
                if let Some(text) = file {
                    jail.create_dir("data")?;
                    jail.create_file("data/runcell.toml", text)?;
                }
                let err = load_in(jail, Overrides::default())
                    .err()
                    .map(|e| e.to_string())
                    .unwrap_or_default();
                for want in says {
                    assert!(err.contains(want), "{err:?} should say {want:?}");
                }
                Ok(())
            });
        }
    }

    #[test]
    fn nested_settings_come_from_the_environment() {
        Jail::expect_with(|jail| {
            jail.set_env("RUNCELL_SANDBOX__POOL_SIZE", "5");
            jail.set_env("RUNCELL_UNRELATED", "ignored");
            let config = load_in(jail, Overrides::default()).map_err(|e| e.to_string())?;
            assert_eq!(config.sandbox.pool_size, 5);
            jail.set_env("RUNCELL_SANDBOX__MAX_SESSIONS", "lots");
            let err = load_in(jail, Overrides::default())
                .err()
                .map(|e| e.to_string())
                .unwrap_or_default();
            assert!(err.contains("RUNCELL_SANDBOX__MAX_SESSIONS"), "{err}");
            Ok(())
        });
    }

    #[test]
    fn the_data_dir_comes_from_the_flag_or_the_environment() {
        Jail::expect_with(|jail| {
            jail.set_env("RUNCELL_DATA_DIR", "from-env");
            let config = Config::load(&Overrides::default()).map_err(|e| e.to_string())?;
            assert_eq!(config.data_dir, PathBuf::from("from-env"));
            let config = Config::load(&Overrides {
                data_dir: Some("from-flag".into()),
                ..Overrides::default()
            })
            .map_err(|e| e.to_string())?;
            assert_eq!(config.data_dir, PathBuf::from("from-flag"));
            Ok(())
        });
    }

    #[test]
    fn conventional_llm_variables_are_read() {
        Jail::expect_with(|jail| {
            let config = load_in(jail, Overrides::default()).map_err(|e| e.to_string())?;
            assert_eq!(config.llm.effective_backend(), LlmBackend::Embedded);
            jail.set_env("OPENAI_BASE_URL", "http://127.0.0.1:8080/v1");
            jail.set_env("OPENAI_API_KEY", "sk-secret-value");
            jail.set_env("RUNCELL_MODEL", "qwen");
            jail.set_env("RUNCELL_LLM__MAX_RETRIES", "1");
            let config = load_in(jail, Overrides::default()).map_err(|e| e.to_string())?;
            assert_eq!(config.llm.effective_backend(), LlmBackend::Openai);
            assert_eq!(config.llm.base_url, "http://127.0.0.1:8080/v1");
            assert_eq!(config.llm.model, "qwen");
            assert_eq!(config.llm.max_retries, 1);
            assert!(!config.to_toml().contains("sk-secret-value"));
            jail.set_env(
                "OPENAI_BASE_URL",
                "https://user:pw@example.test/v1?api-key=k3y",
            );
            let config = load_in(jail, Overrides::default()).map_err(|e| e.to_string())?;
            for shown in [config.to_toml(), format!("{config:?}")] {
                assert!(!shown.contains("pw@") && !shown.contains("k3y"), "{shown}");
            }
            jail.set_env("OPENAI_BASE_URL", "http://127.0.0.1:8080/v1");
            jail.set_env("OPENAI_API_KEY", "<redacted>");
            let err = load_in(jail, Overrides::default())
                .err()
                .map(|e| e.to_string())
                .unwrap_or_default();
            assert!(err.contains("llm.api_key"), "{err}");
            jail.set_env("OPENAI_API_KEY", "sk-secret-value");
            assert!(!format!("{config:?}").contains("sk-secret-value"));
            jail.set_env("RUNCELL_LLM", "scripted");
            jail.set_env("RUNCELL_MODEL_PATH", "/models/x.gguf");
            let config = load_in(jail, Overrides::default()).map_err(|e| e.to_string())?;
            assert_eq!(config.llm.effective_backend(), LlmBackend::Scripted);
            assert_eq!(
                config.llm.model_file(Path::new("d")),
                PathBuf::from("/models/x.gguf")
            );
            jail.set_env("RUNCELL_LLM", "gpt");
            let err = load_in(jail, Overrides::default())
                .err()
                .map(|e| e.to_string())
                .unwrap_or_default();
            assert!(err.contains("llm.backend"), "{err}");
            jail.set_env("RUNCELL_LLM", "openai");
            jail.set_env("OPENAI_BASE_URL", "127.0.0.1:8080");
            let err = load_in(jail, Overrides::default())
                .err()
                .map(|e| e.to_string())
                .unwrap_or_default();
            assert!(err.contains("llm.base_url"), "{err}");
            Ok(())
        });
    }

    #[test]
    fn the_number_of_fixes_is_read_and_bounded() {
        Jail::expect_with(|jail| {
            assert_eq!(Config::default().llm.max_fixes, 2);
            jail.set_env("RUNCELL_LLM__MAX_FIXES", "0");
            let config = load_in(jail, Overrides::default()).map_err(|e| e.to_string())?;
            assert_eq!(config.llm.max_fixes, 0);
            jail.set_env("RUNCELL_LLM__MAX_FIXES", "11");
            let err = load_in(jail, Overrides::default())
                .err()
                .map(|e| e.to_string())
                .unwrap_or_default();
            assert!(err.contains("llm.max_fixes"), "{err}");
            Ok(())
        });
    }

    #[test]
    fn a_web_only_node_needs_e2b_and_serves_no_jail() {
        Jail::expect_with(|jail| {
            assert!(Config::default().sandbox.jail);
            jail.set_env("RUNCELL_SANDBOX__JAIL", "false");
            let err = load_in(jail, Overrides::default())
                .err()
                .map(|e| e.to_string())
                .unwrap_or_default();
            assert!(
                err.contains("sandbox.jail") && err.contains("E2B_API_KEY"),
                "{err}"
            );
            jail.set_env("E2B_API_KEY", "e2b_key");
            let config = load_in(jail, Overrides::default()).map_err(|e| e.to_string())?;
            assert!(!config.sandbox.jail);
            assert!(
                config.e2b.serve && !config.serves_e2b(),
                "no jail to serve E2B with"
            );
            Ok(())
        });
    }

    #[test]
    fn no_secret_is_printed_or_shown() {
        let mut config = Config::default();
        config.llm.api_key = "sk-llm-secret".into();
        config.e2b.api_key = "e2b_secret".into();
        config.auth.jwt_secret = "j".repeat(40).as_str().into();
        for shown in [config.to_toml(), format!("{config:?}")] {
            for secret in ["sk-llm-secret", "e2b_secret", "jjjjjjjj"] {
                assert!(!shown.contains(secret), "{secret} in {shown}");
            }
        }
        let printed: toml::Value = toml::from_str(&config.to_toml()).unwrap();
        assert_eq!(printed["e2b"]["api_key"].as_str(), Some(REDACTED));
        assert_eq!(printed["llm"]["api_key"].as_str(), Some(REDACTED));
        assert_eq!(printed["auth"]["jwt_secret"].as_str(), Some(REDACTED));
        assert_eq!(config.e2b.api_key.expose(), "e2b_secret");
        assert!(config.e2b.enabled());
        assert_eq!(Secret::from("a"), Secret::from("a"));
        assert_ne!(Secret::from("a"), Secret::from("b"));
        assert_ne!(Secret::from("a"), Secret::from("ab"));
    }

    #[test]
    fn printed_config_reads_back() {
        let config = Config::default();
        let back: Config = toml::from_str(&config.to_toml()).unwrap();
        assert_eq!(back, config);
    }
}
