//! What every handler shares.

use std::sync::Arc;

use axum::extract::FromRef;
use leptos::config::LeptosOptions;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::accounts::Accounts;
use crate::auth::{Auth, KeyLimits};
use crate::code_api::CodeApi;
use crate::config::Config;
use crate::e2b::served::{Served, ServedSettings};
use crate::http::host::AllowedHosts;
use crate::http::mcp_sessions::McpSessions;
use crate::person_keys::{KeySessions, PersonRoom};
use runcell_agent::agent::BrowserOffer;
use runcell_agent::agent::{Agent, AgentSettings, Kernels, TurnRunner};
use runcell_agent::cluster::Cluster;
use runcell_agent::notebook::Notebooks;
use runcell_agent::session::SessionHub;
use runcell_agent::session::clients::Clients;
use runcell_agent::session::quota::{AddressRate, NewSessionRate, OwnerQuotas};
use runcell_agent::session::uploads::Uploads;
use runcell_llm::Llm;
use runcell_llm::catalog::Catalog;
use runcell_sandbox::Sandbox;
use runcell_sandbox::backends::Backends;
use runcell_sandbox::browser::{BrowserSettings, BrowserTabs, Runtime, find_runtime};
use runcell_sandbox::jail::{JailConfig, JailSandbox};
use runcell_sandbox::sessions::{SandboxSessions, SessionSettings};
use runcell_store::nodes::Node;
use runcell_store::{Database, Store};

/// Why the shared state could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    #[error("cannot create the data directory {path}: {source}")]
    DataDir {
        path: String,
        source: std::io::Error,
    },
    #[error("access tokens cannot be signed: {0}")]
    Auth(#[from] crate::auth::token::SecretError),
    #[error("the session store cannot be used: {0}")]
    Store(#[from] runcell_store::StoreError),
    #[error("sign-in with the identity provider cannot be set up: {0}")]
    Oidc(#[from] crate::accounts::OidcError),
    #[error(
        "sandbox.jail is off and E2B cannot be used (see the error above): this node would have no sandbox"
    )]
    NoSandbox,
}

#[derive(Clone, FromRef)]
pub struct AppState {
    pub config: Arc<Config>,
    /// The host names this server answers to.
    pub hosts: AllowedHosts,
    pub leptos: LeptosOptions,
    /// The notebook service: what every way of using a notebook session
    /// calls (the page's socket and forms, the NDJSON routes, the server
    /// functions).
    pub notebooks: Arc<Notebooks>,
    /// The language model that answers.
    pub llm: Arc<dyn Llm>,
    /// The models on offer, kept fresh in the background.
    pub models: Arc<Catalog>,
    /// Where code runs: the local jail.
    pub sandbox: Arc<dyn Sandbox>,
    /// Open sessions of the local jail (the run API's `session_id`s).
    pub sandbox_sessions: Arc<SandboxSessions>,
    /// Every sandbox backend on offer with its sessions: the jail, and E2B
    /// when configured.
    pub backends: Backends,
    /// API keys and access tokens.
    pub auth: Arc<Auth>,
    /// People: accounts, sign-in with a provider or a proxy's header, admins.
    pub accounts: Arc<Accounts>,
    /// The code-interpreter service of `/v1` and `/mcp`, per key.
    pub code_api: Arc<CodeApi>,
    /// The sandboxes served through E2B's protocol.
    pub e2b: Arc<Served>,
    /// Jupyter's kernels API (`/jupyter`) on the key's sandbox sessions.
    pub gateway: Arc<crate::jupyter::Gateway>,
    /// The pages that run their sessions' Python (the Browser sandbox).
    pub browser: Arc<BrowserTabs>,
    /// The Pyodide runtime pages load, when the site carries it; the
    /// Browser sandbox is offered only then.
    pub pyodide: Option<Runtime>,
    /// Turns run as tasks of their own, so a page that goes away does not stop
    /// them; this tracks them for a clean shutdown.
    pub turns: TaskTracker,
    /// Cancelled when the server begins to shut down.
    pub shutdown: CancellationToken,
    /// Where each notebook owner was last seen from, and whether signed
    /// in: anonymous owners' kernels take from a share of the slots.
    pub clients: Arc<Clients>,
    /// The MCP sessions of `/mcp`, each bound to its key.
    pub mcp_sessions: Arc<McpSessions>,
    /// The other nodes on a shared (PostgreSQL) database.
    pub cluster: Option<Arc<Cluster>>,
    /// Where upload bodies wait on disk while they arrive.
    pub spool: Arc<crate::http::Spool>,
    /// The session sockets open, per session and per owner.
    pub sockets: Arc<runcell_agent::session::sockets::OpenSockets>,
}

impl AppState {
    /// Everything the handlers share over the database the configuration
    /// names (SQLite in `config.data_dir`, made if missing, or PostgreSQL)
    /// and its keys: what the server, the stream bench and unit tests all
    /// start from. Also returns the database, for what the caller does with
    /// it beside the handlers.
    pub async fn open(
        config: Config,
        shutdown: CancellationToken,
    ) -> Result<(Self, Database), OpenError> {
        std::fs::create_dir_all(&config.data_dir).map_err(|source| OpenError::DataDir {
            path: config.data_dir.display().to_string(),
            source,
        })?;
        if !config.sandbox.jail && e2b_sessions(&config).is_none() {
            return Err(OpenError::NoSandbox);
        }
        let database = Database::open(config.database_url.expose(), &config.data_dir).await?;
        let auth = Arc::new(Auth::open(&config, database.keys()).await?);
        // On a shared database this process is one of its nodes.
        let cluster = match &database {
            Database::Postgres(pg) => {
                let node = Node::of_data_dir(&config.data_dir, &config.addr.to_string()).map_err(
                    |source| OpenError::DataDir {
                        path: config.data_dir.display().to_string(),
                        source,
                    },
                )?;
                Some(Cluster::join(Arc::clone(pg), node).await?)
            }
            Database::Sqlite(_) => None,
        };
        let accounts = Arc::new(Accounts::new(
            database.users(),
            Arc::clone(&auth),
            &config.auth,
        )?);
        let state = Self::with_cluster(config, shutdown, database.store(), auth, accounts, cluster);
        Ok((state, database))
    }

    /// Everything the handlers share, over an open store, as a node of
    /// `cluster` when there is one: sessions other nodes hold are followed
    /// and their turns asked of the holder. Needs a runtime (the hub starts
    /// its event writer).
    pub fn with_cluster(
        config: Config,
        shutdown: CancellationToken,
        store: Arc<dyn Store>,
        auth: Arc<Auth>,
        accounts: Arc<Accounts>,
        cluster: Option<Arc<Cluster>>,
    ) -> Self {
        let spool = Arc::new(crate::http::Spool::of_config(&config));
        let sockets = runcell_agent::session::sockets::OpenSockets::new(
            config.notebook.max_sockets_per_session as usize,
            config.notebook.max_sockets_per_owner as usize,
        );
        let leptos = LeptosOptions::builder()
            .output_name(app::OUTPUT_NAME)
            .site_root(config.site_root.to_string_lossy().to_string())
            .site_pkg_dir("pkg")
            .site_addr(config.addr)
            .build();
        let mut jail_config = JailConfig::from_settings(&config.sandbox);
        jail_config.packages =
            runcell_sandbox::packages::index_for_jails(&config.packages, &config.data_dir)
                .map(runcell_sandbox::jail::JailPackages);
        let sandbox: Arc<dyn Sandbox> = JailSandbox::new(jail_config.clone());
        let sandbox_sessions = SandboxSessions::new(
            Arc::clone(&sandbox),
            SessionSettings {
                pool_size: config.sandbox.pool_size,
                idle_ttl: std::time::Duration::from_secs(config.sandbox.session_idle_secs),
                max_sessions: config.sandbox.max_sessions,
                anonymous_share_percent: config.sandbox.anonymous_share_percent,
                anonymous_per_client: config.sandbox.anonymous_sessions_per_client,
                limits: jail_config.max_limits,
            },
        );
        let backends = match (config.sandbox.jail, e2b_sessions(&config)) {
            (true, Some(e2b)) => Backends::new(Arc::clone(&sandbox_sessions)).with(e2b),
            // A web-only node: E2B is the only backend.
            (false, Some(e2b)) => Backends::new(e2b),
            // (`open` refuses a node with no jail and no E2B.)
            (_, None) => Backends::new(Arc::clone(&sandbox_sessions)),
        };
        let browser = BrowserTabs::new(BrowserSettings {
            attach_wait: std::time::Duration::from_secs(config.browser.attach_wait_secs),
            gone_grace: std::time::Duration::from_secs(config.browser.gone_grace_secs),
            prepare_wait: std::time::Duration::from_secs(config.browser.prepare_wait_secs),
            ..BrowserSettings::default()
        });
        let pyodide = find_runtime(&config.site_root);
        if pyodide.is_none() {
            tracing::info!(
                site = %config.site_root.display(),
                "no Pyodide in the site: the browser sandbox is not offered"
            );
        }
        let clients = Arc::new(Clients::new(
            config
                .notebook
                .single_person
                .unwrap_or_else(|| config.addr.ip().is_loopback()),
        ));
        let llm = runcell_llm::from_settings(
            &config.llm,
            &config.data_dir,
            runcell_embedded::from_settings,
        );
        let models = Catalog::new(Arc::clone(&llm), config.llm.model.clone());
        let agent = Agent::new(
            Arc::clone(&llm),
            Kernels::new(
                backends.clone(),
                pyodide.as_ref().map(|runtime| BrowserOffer {
                    tabs: Arc::clone(&browser),
                    imports: runtime.imports.clone(),
                }),
                Uploads::new(&config.data_dir)
                    .with_quota(config.sandbox.default_limits().home_bytes()),
            )
            .with_owner_cap(config.notebook.max_kernels_per_owner as usize)
            .with_quotas(Arc::clone(&accounts) as Arc<dyn OwnerQuotas>)
            .with_clients(Arc::clone(&clients)),
            AgentSettings {
                max_tokens: config.llm.max_tokens,
                answer_timeout: std::time::Duration::from_secs(config.llm.answer_timeout_secs),
                max_fixes: config.llm.max_fixes,
                context_tokens: u32::try_from(config.llm.context_tokens).unwrap_or(u32::MAX),
                limits: config.sandbox.default_limits(),
                install_missing: jail_config.packages.is_some(),
            },
        );
        let code_api = Arc::new(CodeApi::new(
            backends.clone(),
            Arc::new(KeyLimits::new(&config.auth)),
        ));
        // A person's keys and notebooks share the person's live kernels.
        code_api.count_people_with(Arc::clone(&accounts) as Arc<dyn PersonRoom>);
        accounts.count_key_sessions_with(&(Arc::clone(&code_api) as Arc<dyn KeySessions>));
        let e2b = Arc::new(Served::new(
            Arc::clone(&code_api),
            Arc::clone(&sandbox_sessions),
            ServedSettings {
                max_timeout: std::time::Duration::from_secs(config.e2b.max_sandbox_timeout_secs),
                limits: config.sandbox.max_limits(),
                memory_mb: config.sandbox.memory_mib,
                disk_mb: config.sandbox.disk_mib,
                cpu_count: config.sandbox.cpu_millis.div_ceil(1000).max(1),
            },
        ));
        let turns = TaskTracker::new();
        let gateway = crate::jupyter::Gateway::new(
            Arc::clone(&code_api),
            config.sandbox.max_limits(),
            &config.jupyter,
            turns.clone(),
        );
        let runner = Arc::new(
            TurnRunner::new(Arc::new(agent), turns.clone(), shutdown.clone())
                .with_quotas(Arc::clone(&accounts) as Arc<dyn OwnerQuotas>),
        );
        let mut hub = SessionHub::new(store)
            .with_new_session_rate(NewSessionRate::new(
                config.notebook.sessions_per_hour,
                config.notebook.session_burst,
            ))
            .with_address_rate(AddressRate::new(
                config.notebook.anonymous_sessions_per_minute,
                Arc::clone(&clients),
            ));
        if let Some(cluster) = &cluster {
            hub = hub.with_cluster(Arc::clone(cluster));
        }
        let sessions = Arc::new(hub);
        let notebooks = Arc::new(
            Notebooks::new(
                sessions,
                runner,
                shutdown.clone(),
                pyodide.as_ref().map(|runtime| runtime.url.clone()),
            )
            .with_quotas(Arc::clone(&accounts) as Arc<dyn OwnerQuotas>),
        );
        let mcp_sessions = McpSessions::from_config(&config.auth);
        Self {
            hosts: AllowedHosts::from_config(&config),
            config: Arc::new(config),
            leptos,
            notebooks,
            llm,
            models,
            sandbox,
            sandbox_sessions,
            backends,
            auth,
            accounts,
            code_api,
            e2b,
            gateway,
            browser,
            pyodide,
            turns,
            shutdown,
            clients,
            mcp_sessions,
            cluster,
            spool,
            sockets,
        }
    }
}

/// E2B's sessions, when an E2B key is configured: no warm pool (a waiting
/// cloud sandbox costs money), the jail's idle time and cap.
fn e2b_sessions(config: &Config) -> Option<Arc<SandboxSessions>> {
    if !config.e2b.enabled() {
        return None;
    }
    let settings = runcell_sandbox::e2b::client::E2bSettings::from_config(&config.e2b);
    match runcell_sandbox::e2b::E2bSandbox::new(settings) {
        Ok(e2b) => Some(SandboxSessions::new(
            e2b,
            SessionSettings {
                pool_size: 0,
                idle_ttl: std::time::Duration::from_secs(config.sandbox.session_idle_secs),
                max_sessions: config.sandbox.max_sessions,
                anonymous_share_percent: config.sandbox.anonymous_share_percent,
                anonymous_per_client: config.sandbox.anonymous_sessions_per_client,
                limits: config.sandbox.max_limits(),
            },
        )),
        Err(e) => {
            tracing::error!(%e, "E2B is configured but cannot be offered");
            None
        }
    }
}

/// A whole [`AppState`] for unit tests: a temporary data directory, a real
/// SQLite store, the scripted model, no warm jails.
#[cfg(test)]
pub(crate) async fn for_tests(
    configure: impl FnOnce(&mut Config),
) -> (AppState, tempfile::TempDir) {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let mut config = Config {
        data_dir: dir.path().join("data"),
        site_root: dir.path().join("site"),
        ..Config::default()
    };
    config.sandbox.pool_size = 0;
    config.llm.backend = crate::config::LlmBackend::Scripted;
    configure(&mut config);
    let (state, _) = AppState::open(config, CancellationToken::new())
        .await
        .expect("the state over a new data directory");
    (state, dir)
}
