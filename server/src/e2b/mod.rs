//! E2B's protocol as runcell serves it: the registry behind runcell's own
//! E2B-compatible endpoints ([`served`]), which serve the official SDKs from
//! the local jail, and E2B's wire formats ([`protocol`]).
//!
//! The other direction, runcell running code on E2B's sandboxes, is a
//! sandbox backend like the jail: [`crate::sandbox::e2b`]. It speaks the
//! same formats, so it imports [`protocol`], which depends on nothing else
//! in the crate (Architecture Invariant: `protocol` stays a leaf, so the
//! backend never reaches into the served side, nor the served side into
//! the backend).

pub mod protocol;
pub mod served;
