//! E2B, both ways: a client that runs code on E2B's sandboxes (a second
//! [`Sandbox`](crate::sandbox::Sandbox) backend) and the registry behind
//! runcell's own E2B-compatible endpoints, which serve the official SDKs
//! from the local jail. Both speak the formats in [`protocol`].

pub mod backend;
pub mod client;
pub mod protocol;
pub mod served;
