//! `runcell bench`: speed and memory on this machine, measured and printed
//! side by side with the targets. A command, not a test: these machines are
//! too noisy for timed assertions.

pub mod abuse;
mod abuse_surfaces;
pub mod agent;
mod attackers;
pub mod dabench;
pub mod heuristics;
pub mod llm;
pub mod llm_eval;
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
