//! Starting and stopping the HTTP server.

use std::time::Duration;

use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::auth::revocation::{self, HeldByKey};
use crate::config::{Config, display_path};
use crate::http::router;
use crate::http::state::AppState;
use std::sync::Arc;

/// Sessions that never got an event are deleted at start once this old.
const EMPTY_SESSION_TTL_MS: u64 = 24 * 60 * 60 * 1000;

/// How long running turns get to finish once shutdown begins.
const DRAIN: Duration = Duration::from_secs(5);

#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        addr: std::net::SocketAddr,
        source: std::io::Error,
    },
    #[error(transparent)]
    Open(#[from] crate::http::state::OpenError),
    #[error("the session store cannot be used: {0}")]
    Store(#[from] runcell_store::StoreError),
    #[error("the server stopped: {0}")]
    Io(#[from] std::io::Error),
}

/// Serves on `config.addr` until SIGINT or SIGTERM.
pub async fn serve(config: Config) -> Result<(), ServeError> {
    let listener = TcpListener::bind(config.addr)
        .await
        .map_err(|source| ServeError::Bind {
            addr: config.addr,
            source,
        })?;
    let shutdown = CancellationToken::new();
    tokio::spawn(cancel_on_signal(shutdown.clone()));
    launch_with_listener(config, listener, shutdown).await
}

/// Serves on a listener the caller bound (tests bind `127.0.0.1:0`) until
/// `shutdown` is cancelled, then closes live connections and drains turns.
pub async fn launch_with_listener(
    config: Config,
    listener: TcpListener,
    shutdown: CancellationToken,
) -> Result<(), ServeError> {
    if !config.bundle_path().is_file() {
        tracing::warn!(
            missing = %display_path(&config.bundle_path()),
            "the browser bundle is missing: pages render but stay static; build with scripts/build.sh or set RUNCELL_SITE_ROOT"
        );
    }
    let addr = listener.local_addr()?;
    // The address bound (a test binds port 0), as the node's address too.
    let config = Config { addr, ..config };
    let limits = crate::http::ConnectionLimits::from(&config.http);
    let engine = Engine::start(config, shutdown.clone()).await?;
    let app = router(engine.state.clone());
    tracing::info!("runcell listening on http://{addr}");

    crate::http::serve_connections(listener, app, limits, shutdown.clone()).await;
    engine.stop().await;
    tracing::info!("runcell stopped");
    Ok(())
}

/// Everything but HTTP: the store, the sandboxes, the models and the
/// notebooks, with their background tasks. `runcell serve` puts the router
/// in front of it; `runcell chat --embedded` uses it directly.
pub struct Engine {
    pub state: AppState,
    database: runcell_store::Database,
    shutdown: CancellationToken,
    cluster_tasks: Option<tokio::task::JoinHandle<()>>,
}

impl Engine {
    /// Opens the store and starts the background work; it runs until
    /// `shutdown` is cancelled, and [`Self::stop`] is called.
    pub async fn start(config: Config, shutdown: CancellationToken) -> Result<Self, ServeError> {
        runcell_sandbox::jail::remove_stale_sessions();
        let (database_url, data_dir) = (config.database_url.clone(), config.data_dir.clone());
        let (state, database) = AppState::open(config, shutdown.clone()).await?;
        let db = database.describe(database_url.expose(), &data_dir);
        // On a shared database: the heartbeat, the followed sessions, the
        // calls from other nodes.
        let cluster_tasks = state.cluster.as_ref().map(|cluster| {
            let tasks = cluster.spawn(shutdown.clone());
            tokio::spawn(runcell_agent::notebook::serve_calls(
                Arc::clone(cluster),
                Arc::clone(&state.notebooks),
                shutdown.clone(),
            ));
            tasks
        });
        let pruned = database
            .store()
            .prune_empty(runcell_core::clock::now_ms().saturating_sub(EMPTY_SESSION_TTL_MS))
            .await?;
        tracing::info!(
            %db,
            pruned,
            "session store open"
        );
        state.models.keep_fresh(shutdown.clone());
        for backend in state.backends.all() {
            backend.spawn_maintenance(&state.turns, shutdown.clone());
        }
        state.gateway.spawn_maintenance(shutdown.clone());
        state.mcp_sessions.spawn_maintenance(shutdown.clone());
        // Revoked keys' live connections are closed: the Jupyter kernels
        // first (their sockets), then sandboxes, MCP sessions and sessions.
        let mut holders: Vec<Arc<dyn HeldByKey>> = vec![
            state.gateway.clone(),
            state.e2b.clone(),
            state.mcp_sessions.clone(),
        ];
        for backend in state.backends.all() {
            holders.push(Arc::clone(backend) as Arc<dyn HeldByKey>);
        }
        // A disabled account's pages, turns and kernels are closed, here at
        // once when the admin is on this node, by the watch otherwise.
        state.accounts.hold(vec![
            state.sockets.clone() as Arc<dyn crate::accounts::HeldByOwner>,
            state.notebooks.clone(),
        ]);
        state.accounts.spawn_watch(
            Duration::from_secs(state.config.auth.revocation_check_secs),
            shutdown.clone(),
        );
        revocation::spawn_watch(
            Arc::clone(&state.auth),
            holders,
            Duration::from_secs(state.config.auth.revocation_check_secs),
            shutdown.clone(),
        );
        Ok(Self {
            state,
            database,
            shutdown,
            cluster_tasks,
        })
    }

    /// Stops the background work, gives running turns [`DRAIN`] to finish,
    /// stores what they published and closes the store.
    pub async fn stop(self) {
        self.shutdown.cancel();
        let state = self.state;
        state.turns.close();
        if tokio::time::timeout(DRAIN, state.turns.wait())
            .await
            .is_err()
        {
            tracing::warn!("some turns did not finish in time");
        }
        // What the turns published on their way out is stored before we go.
        state.notebooks.flush().await;
        // The heartbeat ends with the shutdown; the leases are given up after
        // its last beat, so that no beat renews them.
        if let Some(tasks) = self.cluster_tasks {
            let _ = tasks.await;
        }
        if let Some(cluster) = &state.cluster {
            cluster.leave().await;
        }
        self.database.close().await;
    }
}

async fn cancel_on_signal(shutdown: CancellationToken) {
    let ctrl_c = async {
        if let Err(err) = tokio::signal::ctrl_c().await {
            tracing::error!(%err, "cannot listen for SIGINT");
            std::future::pending::<()>().await;
        }
    };
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(err) => {
                tracing::error!(%err, "cannot listen for SIGTERM");
                std::future::pending::<()>().await;
            }
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => {}
        () = terminate => {}
    }
    tracing::info!("shutting down");
    shutdown.cancel();
}
