//! The index end to end: a fake upstream on 127.0.0.1, the index served on
//! its own listener, and a client standing in for the jail's pip.
#![expect(
    clippy::expect_used,
    reason = "a failed step should fail the test where it happened"
)]

mod cache;
mod files;
mod listener;
mod pages;
mod routes;
mod support;
