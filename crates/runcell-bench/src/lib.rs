//! The benchmarks behind `runcell bench`: speed and memory on this machine,
//! measured and printed side by side with the targets. A command, not a
//! test: these machines are too noisy for timed assertions.
//!
//! Each bench is a module with a `run(options)` that the `runcell` binary's
//! command line calls. Those that measure a server of their own start the
//! binary they run in (`runcell serve`, `runcell keys create`: see
//! `own_server`), so they run only from `runcell bench`; the harnesses the
//! integration tests check against a test server (`agent::run_task`,
//! `dabench::run_question`, `stream::run_cluster`) take a server's URL.

pub mod abuse;
mod abuse_attacks;
mod abuse_surfaces;
pub mod agent;
mod attackers;
pub mod dabench;
pub mod heuristics;
pub mod llm;
mod llm_eval;
mod own_server;
pub mod sandbox;
pub mod stream;
pub mod throughput;
pub mod tokens;

#[derive(Debug, thiserror::Error)]
#[error("bench: {0}")]
pub struct BenchError(String);

impl BenchError {
    pub fn new(message: impl Into<String>) -> Self {
        Self(message.into())
    }
}

fn fail(e: impl std::fmt::Display) -> BenchError {
    BenchError(e.to_string())
}
