//! runcell's notebooks as a service, with no HTTP in it: sessions (the
//! sequenced event history every page of a session follows, their owners'
//! quota and uploads), the agent that answers a turn (the model's program,
//! its run, the fixes, the explanation), the notebook service the
//! transports call (share, fork, delete, re-run), the cluster of nodes on
//! one PostgreSQL database, and code highlighting.
//!
//! Below it are the sandboxes, the models and the store; above it, the
//! server's transports.

pub mod agent;
pub mod cluster;
pub mod highlight;
pub mod notebook;
pub mod session;
