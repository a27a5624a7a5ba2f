//! runcell's server: its configuration, every transport over the notebook
//! service (the pages' HTTP and WebSocket routes, the `/v1` API and MCP,
//! Jupyter's protocol, E2B's protocol served from the local jail), who may
//! call (keys, tokens, limits), and the process that serves them all.

// The notebook page's view type is deep; rendering it on the server needs
// more than the default 128.
#![recursion_limit = "256"]

pub mod accounts;
pub mod auth;
pub mod code_api;
pub mod config;
pub mod e2b;
pub mod http;
pub mod jupyter;
pub mod person_keys;
pub mod server;

pub use config::{Config, Overrides};
pub use server::{ServeError, launch_with_listener, serve};
