//! The `runcell` program's library: the command line and the terminal
//! client, over the crates that make the server and its benches (each
//! named by its own name: `runcell_server`, `runcell_agent`,
//! `runcell_sandbox`, `runcell_bench`, …).

pub mod cli;
pub mod telemetry;
pub mod terminal;
