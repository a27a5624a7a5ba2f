//! Real third-party clients against a live server: schemathesis and the
//! official MCP SDK (Python, from the venv `scripts/setup-api-clients.sh`
//! builds). A test binary of its own, so that cargo runs it after the
//! integration tests rather than beside their timing-sensitive streams: the
//! fuzz pass keeps both cores busy.
#![expect(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a failed step should fail the test where it happened"
)]

mod api_clients;
#[allow(dead_code)]
#[path = "../integration/peer.rs"]
mod peer;
#[allow(dead_code)]
#[path = "../integration/support.rs"]
mod support;
