//! The runcell server: configuration, HTTP and WebSocket routes, sessions and
//! the responder that answers them. `main.rs` is a thin shell over this.

// The notebook page's view type is deep; rendering it on the server needs
// more than the default 128.
#![recursion_limit = "256"]

pub mod agent;
pub mod auth;
pub mod bench;
pub mod cli;
pub mod clock;
pub mod cluster;
pub mod code_api;
pub mod config;
pub mod e2b;
pub mod highlight;
pub mod http;
pub mod jupyter;
pub mod llm;
pub mod metrics;
pub mod notebook;
pub mod sandbox;
pub mod server;
pub mod session;
pub mod state;
pub mod store;
pub mod telemetry;
pub mod terminal;

pub use config::{Config, Overrides};
pub use server::{ServeError, launch_with_listener, serve};
