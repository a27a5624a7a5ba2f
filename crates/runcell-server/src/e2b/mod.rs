//! E2B's protocol as runcell serves it: the registry behind runcell's own
//! E2B-compatible endpoints ([`served`]), which serve the official SDKs from
//! the local jail.
//!
//! The other direction, runcell running code on E2B's sandboxes, is a
//! sandbox backend like the jail: [`runcell_sandbox::e2b`]. Both speak E2B's
//! wire formats, [`protocol`], which live with the backend (the lower
//! layer) and depend on nothing else there, so the served side reads them
//! without reaching into the backend's client.

pub use runcell_sandbox::e2b::protocol;
pub mod served;
