//! Logs: `tracing` to standard error, filtered by the `log` setting.

use std::io::IsTerminal;

use tracing_subscriber::EnvFilter;

/// Installs the global subscriber; a second call (tests) changes nothing.
pub fn init(filter: &str) {
    let filter = EnvFilter::try_new(filter).unwrap_or_else(|_| EnvFilter::new("info"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        // Colours for a person at a terminal, plain text for files and CI logs.
        .with_ansi(std::io::stderr().is_terminal())
        // Its report of a failed write is an `eprintln!`, which panics when
        // standard error itself is gone (a log reader that died): that would
        // panic every task that logs. A lost log line stays lost instead.
        .log_internal_errors(false)
        .with_target(false)
        .try_init();
}
