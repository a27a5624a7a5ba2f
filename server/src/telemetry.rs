//! Logs: `tracing` to standard error, filtered by the `log` setting.

use tracing_subscriber::EnvFilter;

/// Installs the global subscriber; a second call (tests) changes nothing.
pub fn init(filter: &str) {
    let filter = EnvFilter::try_new(filter).unwrap_or_else(|_| EnvFilter::new("info"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_target(false)
        .try_init();
}
