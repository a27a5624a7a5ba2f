//! The `runcell` program's library: the command line, the terminal client
//! and the benchmarks, over the crates that make the server (re-exported
//! here under the paths the program, its tests and other programs use).

pub mod bench;
pub mod cli;
pub mod telemetry;
pub mod terminal;

pub use runcell_agent::{agent, cluster, highlight, notebook, session};
pub use runcell_core::{clock, metrics};
pub use runcell_embedded as embedded;
pub use runcell_llm as llm;
pub use runcell_sandbox as sandbox;
pub use runcell_server::{
    Config, Overrides, ServeError, auth, code_api, config, e2b, http, jupyter,
    launch_with_listener, serve, server,
};
pub use runcell_store as store;
