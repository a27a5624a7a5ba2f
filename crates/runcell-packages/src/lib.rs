//! The package index runcell serves to its jails.
//!
//! Jailed sessions have no network. For each jail runcell binds a listener
//! on `127.0.0.1:3141` inside the jail's own network namespace and hands it
//! to [`PackageIndex::serve`], which answers a PEP 503/691 "simple" index
//! there: project pages from a configured upstream index, filtered by the
//! policy (`packages.mode`, `allow`, `deny`, `sdists`) and rewritten so that
//! every file comes through this index, and files checked against their
//! listed sha256 and the size caps, kept in a content-addressed cache that
//! all sessions share.
//!
//! Invariants: a jail never reaches upstream itself; a file is served only
//! if a cached page of its project lists it with that sha256, and only from
//! a blob whose content was hashed on the way in; nothing a jail sends names
//! a path (names and hashes are checked before they touch the disk).

mod account;
mod cache;
pub mod config;
mod error;
mod http;
mod index;
pub mod name;
mod page;
mod upstream;

use std::collections::HashSet;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

pub use account::{Account, Notice};
pub use config::{Mode, PackagesConfig};
pub use error::PackagesError;
pub use http::ResponseBody;

use cache::Cache;
use upstream::Upstream;

/// The port the index listens on inside every jail.
pub const JAIL_PORT: u16 = 3141;

/// The index: its settings, the shared cache and the upstream client.
pub struct PackageIndex {
    config: PackagesConfig,
    upstream_url: String,
    allow: HashSet<String>,
    deny: HashSet<String>,
    cache: Cache,
    upstream: Upstream,
    /// Upstream fetches in flight over every session (`max_fetches`).
    fetches: Arc<tokio::sync::Semaphore>,
}

impl std::fmt::Debug for PackageIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PackageIndex")
            .field("config", &self.config)
            .field("upstream", &self.upstream_url)
            .field("cache", &self.cache.root())
            .finish_non_exhaustive()
    }
}

impl PackageIndex {
    /// `cache_dir`: e.g. `<data_dir>/packages` (made if missing);
    /// `upstream`: the resolved upstream simple index URL.
    pub fn new(
        config: PackagesConfig,
        cache_dir: PathBuf,
        upstream: String,
    ) -> Result<Arc<Self>, PackagesError> {
        let normalised =
            |names: &[String]| names.iter().map(|n| name::normalize(n.trim())).collect();
        Ok(Arc::new(Self {
            allow: normalised(&config.allow),
            deny: normalised(&config.deny),
            cache: Cache::open(cache_dir, config.max_cache_mib.saturating_mul(1024 * 1024))?,
            upstream: Upstream::new(
                &upstream,
                trusted_certificates(config.ca_file.as_deref())
                    .map_err(PackagesError::Certificates)?,
            )?,
            upstream_url: upstream,
            fetches: Arc::new(tokio::sync::Semaphore::new(
                usize::try_from(config.max_fetches.max(1)).unwrap_or(1),
            )),
            config,
        }))
    }

    pub fn config(&self) -> &PackagesConfig {
        &self.config
    }

    pub fn upstream(&self) -> &str {
        &self.upstream_url
    }

    /// The environment every jailed process gets when the index is on
    /// (the caller adds `PIP_PREFIX` and `PYTHONPATH` itself).
    pub fn jail_env(&self) -> Vec<(String, String)> {
        let mut env = vec![(
            "PIP_INDEX_URL",
            format!("http://127.0.0.1:{JAIL_PORT}/simple/"),
        )];
        if !self.config.sdists {
            env.push(("PIP_ONLY_BINARY", ":all:".into()));
        }
        for (key, value) in [
            ("PIP_NO_CACHE_DIR", "1"),
            ("PIP_DISABLE_PIP_VERSION_CHECK", "1"),
            ("PIP_NO_INPUT", "1"),
            ("PIP_ROOT_USER_ACTION", "ignore"),
            ("PIP_PROGRESS_BAR", "off"),
            ("PIP_DEFAULT_TIMEOUT", "60"),
        ] {
            env.push((key, value.into()));
        }
        env.into_iter().map(|(k, v)| (k.to_string(), v)).collect()
    }

    /// Serves the jail-facing index on `listener` for `account` until the
    /// future is dropped or the listener fails.
    pub async fn serve(self: Arc<Self>, listener: tokio::net::TcpListener, account: Arc<Account>) {
        http::serve(self, listener, account).await;
    }

    /// The answer to one request from `account`'s jail, without a socket:
    /// what `serve` sends for each request (tests call it too). The
    /// request's body is not read.
    pub async fn answer<B>(
        &self,
        account: &Account,
        request: ::http::Request<B>,
    ) -> ::http::Response<ResponseBody> {
        http::answer(self, account, request).await
    }

    /// Projects the cache holds pages for (normalised names), sorted.
    pub fn cached_projects(&self) -> Vec<String> {
        self.cache.projects()
    }
}

/// The system's certificate bundle, on Debian and its kind.
const SYSTEM_BUNDLE: &str = "/etc/ssl/certs/ca-certificates.crt";

/// The certificates trusted beside the built-in roots: `ca_file`'s, else
/// `SSL_CERT_FILE`'s or the system bundle's (when there is one). A file
/// set in the configuration must be readable; the error says which and why.
/// Every client of runcell's that reaches a server of the organisation's
/// (the package upstream, the identity provider) trusts the same.
pub fn trusted_certificates(
    ca_file: Option<&std::path::Path>,
) -> Result<Vec<reqwest::Certificate>, String> {
    let (path, required) = match ca_file {
        Some(path) => (path.to_path_buf(), true),
        None => match std::env::var_os("SSL_CERT_FILE") {
            Some(path) => (PathBuf::from(path), false),
            None => (PathBuf::from(SYSTEM_BUNDLE), false),
        },
    };
    let read = std::fs::read(&path)
        .map_err(|e| e.to_string())
        .and_then(|pem| reqwest::Certificate::from_pem_bundle(&pem).map_err(|e| e.to_string()));
    match read {
        Ok(certificates) => Ok(certificates),
        Err(reason) if required => Err(format!("{}: {reason}", path.display())),
        Err(_) => Ok(Vec::new()),
    }
}

/// What asks the host's pip for its index URL: the configured one (the
/// environment first, then the `install` and `global` sections, as pip
/// ranks them), else pip's own default.
const PIP_INDEX_PROGRAM: &str = r#"
import sys
try:
    from pip._internal.configuration import Configuration
    c = Configuration(isolated=False)
    c.load()
    for key in (":env:.index-url", "install.index-url", "global.index-url"):
        try:
            value = c.get_value(key)
        except Exception:
            value = None
        if value:
            print(value)
            sys.exit(0)
except Exception:
    pass
from pip._internal.models.index import PyPI
print(PyPI.simple_url)
"#;

/// How long the host's python may take to answer.
const PIP_QUERY_TIMEOUT: Duration = Duration::from_secs(20);

/// The upstream the host's pip is configured with, else pip's own default,
/// as runcell's bundled python (or `python3`) says; `None` if neither answers.
pub fn default_index_url() -> Option<String> {
    ["/opt/runcell/python/bin/python3", "python3"]
        .into_iter()
        .find_map(ask_pip)
}

fn ask_pip(python: &str) -> Option<String> {
    let mut child = std::process::Command::new(python)
        .args(["-c", PIP_INDEX_PROGRAM])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .ok()?;
    let started = std::time::Instant::now();
    loop {
        match child.try_wait() {
            Ok(Some(_)) => break,
            Ok(None) if started.elapsed() < PIP_QUERY_TIMEOUT => {
                std::thread::sleep(Duration::from_millis(20));
            }
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                tracing::warn!(python, "asking pip for its index URL took too long");
                return None;
            }
        }
    }
    let output = child.wait_with_output().ok()?;
    let url = String::from_utf8(output.stdout).ok()?.trim().to_string();
    let ok = output.status.success() && (url.starts_with("http://") || url.starts_with("https://"));
    ok.then_some(url)
}
