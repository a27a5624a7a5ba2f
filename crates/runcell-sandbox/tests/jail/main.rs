//! The jail's integration tests, against the real jail on this machine
//! (bubblewrap, seccomp, the sandbox's Python and Node environments): the
//! battery of hostile programs (`battery.rs`) and the stateful kernels
//! (`kernel.rs`). They build this crate alone, not the server.
#![expect(
    clippy::unwrap_used,
    reason = "a failed step should fail the test where it happened"
)]

mod battery;
mod front_end;
mod kernel;
