//! The `runcell` program's library: the command line, the terminal client
//! and the benchmarks, over the crates that make the server (each named by
//! its own name: `runcell_server`, `runcell_agent`, `runcell_sandbox`, …).

pub mod bench;
pub mod cli;
pub mod telemetry;
pub mod terminal;
