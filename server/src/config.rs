//! The server's settings: defaults, then `runcell.toml` in the data directory,
//! then `RUNCELL_*` environment variables, then command-line flags.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use figment::Figment;
use figment::providers::{Env, Format, Serialized, Toml};
use serde::{Deserialize, Serialize};

/// The file, inside the data directory, that settings may come from.
pub const CONFIG_FILE: &str = "runcell.toml";

/// Settings read from the environment, as `RUNCELL_<NAME>` (a `__` stands
/// for a dot: `RUNCELL_SANDBOX__POOL_SIZE` is `sandbox.pool_size`).
const ENV_KEYS: [&str; 4] = ["addr", "data_dir", "site_root", "log"];
/// Any `RUNCELL_SANDBOX__*` is read too; unknown ones are refused by name.
const ENV_SECTIONS: [&str; 1] = ["sandbox__"];

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// Where the HTTP server listens.
    pub addr: SocketAddr,
    /// Where runcell keeps its files; `runcell.toml` is read from here.
    pub data_dir: PathBuf,
    /// The built browser files (`pkg/runcell.js`, `.wasm`, `.css`), as
    /// `scripts/build.sh` lays them out.
    pub site_root: PathBuf,
    /// A `tracing` filter, e.g. `info` or `runcell=debug,tower_http=info`.
    pub log: String,
    #[serde(default)]
    pub sandbox: SandboxConfig,
}

/// The local sandbox's sessions.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SandboxConfig {
    /// Python sessions kept started, so that a new one is ready at once.
    pub pool_size: usize,
    /// Seconds a session may sit unused before it is closed.
    pub session_idle_secs: u64,
    /// Sandbox sessions open at once, at most.
    pub max_sessions: usize,
    /// Wall time a run gets unless it asks for less or more.
    pub timeout_secs: u64,
    /// The most wall time a run may ask for.
    pub max_timeout_secs: u64,
    /// The rest are the most a run may use (and what it gets by default).
    pub memory_mib: u64,
    pub pids: u32,
    /// CPU quota in thousandths of a core.
    pub cpu_millis: u32,
    pub output_kib: u64,
    pub file_mib: u64,
    /// `/home/user` and `/tmp` together.
    pub disk_mib: u64,
}

impl SandboxConfig {
    /// The most any run may use.
    pub fn max_limits(&self) -> crate::sandbox::Limits {
        crate::sandbox::Limits {
            wall: std::time::Duration::from_secs(self.max_timeout_secs),
            memory_bytes: self.memory_mib * 1024 * 1024,
            pids: self.pids,
            cpu_millis: self.cpu_millis,
            output_bytes: usize::try_from(self.output_kib * 1024).unwrap_or(usize::MAX),
            file_bytes: self.file_mib * 1024 * 1024,
            disk_bytes: self.disk_mib * 1024 * 1024,
        }
    }

    /// What a run gets when it asks for nothing.
    pub fn default_limits(&self) -> crate::sandbox::Limits {
        crate::sandbox::Limits {
            wall: std::time::Duration::from_secs(self.timeout_secs.min(self.max_timeout_secs)),
            ..self.max_limits()
        }
    }
}

impl Default for SandboxConfig {
    fn default() -> Self {
        Self {
            pool_size: 2,
            session_idle_secs: 15 * 60,
            max_sessions: 32,
            timeout_secs: 30,
            max_timeout_secs: 300,
            memory_mib: 512,
            pids: 128,
            cpu_millis: 1000,
            output_kib: 1024,
            file_mib: 10,
            disk_mib: 256,
        }
    }
}

impl Default for Config {
    fn default() -> Self {
        Self {
            addr: SocketAddr::from(([127, 0, 0, 1], 3000)),
            data_dir: PathBuf::from("./data"),
            site_root: PathBuf::from("target/site"),
            log: "info".into(),
            sandbox: SandboxConfig::default(),
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
        ];
        for (setting, value) in positive {
            if value == 0 {
                return Err(ConfigError::Setting {
                    setting,
                    reason: "must be more than 0".into(),
                });
            }
        }
        if sandbox.timeout_secs > sandbox.max_timeout_secs {
            return Err(ConfigError::Setting {
                setting: "sandbox.timeout_secs",
                reason: "must not be more than sandbox.max_timeout_secs".into(),
            });
        }
        tracing_subscriber::EnvFilter::try_new(&self.log).map_err(|e| ConfigError::Setting {
            setting: "log",
            reason: e.to_string(),
        })?;
        if self.data_dir.as_os_str().is_empty() {
            return Err(ConfigError::Setting {
                setting: "data_dir",
                reason: "must not be empty".into(),
            });
        }
        Ok(())
    }

    /// The configuration as `runcell config` prints it. Secrets, once there are
    /// any, are redacted here.
    pub fn to_toml(&self) -> String {
        toml::to_string_pretty(self).unwrap_or_else(|e| format!("# cannot print: {e}\n"))
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

/// Where a relative path in the configuration points, for messages.
pub fn display_path(path: &Path) -> String {
    std::path::absolute(path)
        .unwrap_or_else(|_| path.to_path_buf())
        .display()
        .to_string()
}

#[cfg(test)]
#[expect(
    clippy::result_large_err,
    reason = "figment's Jail closures return its own large error type"
)]
mod tests {
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
    fn printed_config_reads_back() {
        let config = Config::default();
        let back: Config = toml::from_str(&config.to_toml()).unwrap();
        assert_eq!(back, config);
    }
}
