//! Integration tests: the real server on `127.0.0.1:0`, driven over HTTP and
//! WebSocket as a page would; and the real `runcell` binary.
#![expect(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a failed step should fail the test where it happened"
)]

mod accounts;
mod agent;
mod api;
mod bench_agent;
mod bench_dabench;
mod binary;
mod branches;
mod browser;
mod cluster;
mod e2b;
mod files;
mod jupyter;
mod kernels;
mod listener;
mod llm;
mod notebook_api;
mod oidc_provider;
mod packages;
mod peer;
mod refusal;
mod sessions;
mod support;
mod terminal;
mod web;
mod websocket;
