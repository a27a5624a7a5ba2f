//! What every handler shares.

use std::sync::Arc;

use axum::extract::FromRef;
use leptos::config::LeptosOptions;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::agent::EchoResponder;
use crate::config::Config;
use crate::sandbox::Sandbox;
use crate::sandbox::jail::{JailConfig, JailSandbox};
use crate::session::SessionHub;

#[derive(Clone, FromRef)]
pub struct AppState {
    pub config: Arc<Config>,
    pub leptos: LeptosOptions,
    pub sessions: Arc<SessionHub>,
    pub responder: Arc<EchoResponder>,
    /// Where code runs: the local jail.
    pub sandbox: Arc<dyn Sandbox>,
    /// Turns run as tasks of their own, so a page that goes away does not stop
    /// them; this tracks them for a clean shutdown.
    pub turns: TaskTracker,
    /// Cancelled when the server begins to shut down.
    pub shutdown: CancellationToken,
}

impl AppState {
    pub fn new(config: Config, shutdown: CancellationToken) -> Self {
        let leptos = LeptosOptions::builder()
            .output_name(app::OUTPUT_NAME)
            .site_root(config.site_root.to_string_lossy().to_string())
            .site_pkg_dir("pkg")
            .site_addr(config.addr)
            .build();
        Self {
            config: Arc::new(config),
            leptos,
            sessions: Arc::new(SessionHub::new()),
            responder: Arc::new(EchoResponder::default()),
            sandbox: Arc::new(JailSandbox::new(JailConfig::default())),
            turns: TaskTracker::new(),
            shutdown,
        }
    }
}
