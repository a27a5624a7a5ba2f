//! The `runcell` program's library: the command line and the terminal
//! client, over the crates that make the server and its benches (each
//! named by its own name: `runcell_server`, `runcell_agent`,
//! `runcell_sandbox`, `runcell_bench`, …).

pub mod cli;
pub mod telemetry;
pub mod terminal;

/// The integration tests still name the benches `runcell::bench::…`;
/// they live in the `runcell-bench` crate. To go once those tests name
/// `runcell_bench::…` themselves.
#[doc(hidden)]
pub use runcell_bench as bench;
