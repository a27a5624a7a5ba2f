//! The server's settings: defaults, then `runcell.toml` in the data directory,
//! then `RUNCELL_*` environment variables, then command-line flags.

use std::net::SocketAddr;
use std::path::PathBuf;

use figment::Figment;
use figment::providers::{Env, Format, Serialized, Toml};
use runcell_core::REDACTED;
pub use runcell_core::{Secret, display_path};
use runcell_llm::config::LlmConfigError;
use runcell_packages::config::PackagesConfigError;
use runcell_sandbox::config::SandboxConfigError;

pub mod auth;
pub mod browser;
pub mod http;
pub mod jupyter;
pub mod notebook;

pub use self::auth::{AuthConfig, AuthMode, OidcConfig, UserLimits};
pub use self::browser::BrowserConfig;
pub use self::http::HttpConfig;
pub use self::jupyter::JupyterConfig;
pub use self::notebook::NotebookConfig;
pub use runcell_llm::config::{
    DEFAULT_MODEL_FILE, LlmBackend, LlmConfig, ScriptedMode, StructuredOutputMode, shown_url,
};
pub use runcell_packages::PackagesConfig;
pub use runcell_sandbox::config::{E2bConfig, SandboxConfig};
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
    /// A setting of the server's own that cannot be used.
    #[error("invalid setting `{setting}`: {reason}")]
    Setting {
        setting: &'static str,
        reason: String,
    },
    /// The `[sandbox]` or `[e2b]` section refused itself.
    #[error(transparent)]
    Sandbox(#[from] SandboxConfigError),
    /// The `[llm]` section refused itself.
    #[error(transparent)]
    Llm(#[from] LlmConfigError),
    /// The `[packages]` section refused itself.
    #[error(transparent)]
    Packages(#[from] PackagesConfigError),
}

/// `setting` refused, saying why.
fn bad(setting: &'static str, reason: String) -> ConfigError {
    ConfigError::Setting { setting, reason }
}

/// The first of `settings` that is 0, refused.
fn none_zero(settings: &[(&'static str, u64)]) -> Result<(), ConfigError> {
    match settings.iter().find(|(_, value)| *value == 0) {
        Some((setting, _)) => Err(bad(setting, "must be more than 0".into())),
        None => Ok(()),
    }
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

    /// Whether the settings can be used: each section's own checks, in
    /// their crates (the sandbox's, the model's, the package index's) or
    /// beside their types here, then what spans sections and the server's
    /// own top-level settings. The first problem found is said.
    fn validate(&self) -> Result<(), ConfigError> {
        self.sandbox.validate()?;
        self.e2b.validate()?;
        self.packages.validate()?;
        self.llm.validate()?;
        self.auth.validate()?;
        self.http.validate()?;
        self.browser.validate()?;
        self.jupyter.validate()?;
        self.notebook.validate()?;
        // Across sections: where a node without the jail runs code.
        if !self.sandbox.jail && !self.e2b.enabled() {
            return Err(bad(
                "sandbox.jail",
                "a node without the local jail runs its sessions' code on E2B: set E2B_API_KEY (and E2B_DOMAIN or E2B_API_URL)".into(),
            ));
        }
        self.validate_database_url()?;
        tracing_subscriber::EnvFilter::try_new(&self.log).map_err(|e| bad("log", e.to_string()))?;
        if self.data_dir.as_os_str().is_empty() {
            return Err(bad("data_dir", "must not be empty".into()));
        }
        Ok(())
    }

    /// Empty (SQLite in the data directory) or a PostgreSQL URL, not the
    /// placeholder `runcell config` prints.
    fn validate_database_url(&self) -> Result<(), ConfigError> {
        let database_url = self.database_url.expose().trim();
        if database_url == REDACTED {
            return Err(bad(
                "database_url",
                "is the placeholder `runcell config` prints; put the real URL here".into(),
            ));
        }
        if !(database_url.is_empty()
            || database_url.starts_with("postgres://")
            || database_url.starts_with("postgresql://"))
        {
            return Err(bad(
                "database_url",
                "must be a postgres:// or postgresql:// URL (or empty, for SQLite in the data directory)".into(),
            ));
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
                env: &[("RUNCELL_SANDBOX__MEMORY_MB", "5")],
                file: None,
                says: &["memory_mb"],
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
    fn each_sections_refusal_is_said_as_it_says_it() {
        assert_eq!(
            Config::default().validate().map_err(|e| e.to_string()),
            Ok(())
        );
        // One setting of each section, from the environment or the file;
        // the sections' own tests go through all of theirs.
        let cases = [
            (
                "RUNCELL_SANDBOX__TIMEOUT_SECS=500",
                "invalid setting `sandbox.timeout_secs`: must not be more than sandbox.max_timeout_secs",
            ),
            (
                "[sandbox]\npids = 0\n",
                "invalid setting `sandbox.pids`: must be more than 0",
            ),
            (
                "RUNCELL_E2B__MAX_SANDBOX_TIMEOUT_SECS=0",
                "invalid setting `e2b.max_sandbox_timeout_secs`: must be more than 0",
            ),
            (
                "RUNCELL_PACKAGES__MAX_SESSION_MIB=0",
                "invalid setting `packages.max_session_mib`: must be more than 0",
            ),
            (
                "RUNCELL_LLM__MAX_FIXES=11",
                "invalid setting `llm.max_fixes`: must be at most 10",
            ),
            (
                "RUNCELL_AUTH__RUN_BURST=0",
                "invalid setting `auth.run_burst`: must be more than 0",
            ),
            (
                "RUNCELL_AUTH__JWT_SECRET=<redacted>",
                "invalid setting `auth.jwt_secret`: is the placeholder `runcell config` prints; put the real secret here",
            ),
            (
                "RUNCELL_HTTP__MAX_HEADER_KIB=0",
                "invalid setting `http.max_header_kib`: must be more than 0",
            ),
            (
                "RUNCELL_BROWSER__GONE_GRACE_SECS=0",
                "invalid setting `browser.gone_grace_secs`: must be more than 0",
            ),
            (
                "RUNCELL_JUPYTER__MAX_QUEUED_CELLS=0",
                "invalid setting `jupyter.max_queued_cells`: must be more than 0",
            ),
            (
                "RUNCELL_NOTEBOOK__IMPORT_MIB=0",
                "invalid setting `notebook.import_mib`: must be more than 0",
            ),
            (
                "database_url = \"mysql://db\"\n",
                "invalid setting `database_url`: must be a postgres:// or postgresql:// URL (or empty, for SQLite in the data directory)",
            ),
        ];
        for (source, says) in cases {
            Jail::expect_with(|jail| {
                match source.split_once('=') {
                    Some((key, value)) if key.starts_with("RUNCELL_") => jail.set_env(key, value),
                    _ => {
                        jail.create_dir("data")?;
                        jail.create_file("data/runcell.toml", source)?;
                    }
                }
                let said = load_in(jail, Overrides::default())
                    .map(|_| ())
                    .map_err(|e| e.to_string());
                assert_eq!(said, Err(says.to_string()), "{source}");
                Ok(())
            });
        }
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
