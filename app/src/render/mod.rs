//! Text to safe HTML and numbers as people read them: the protocol crate's
//! pure helpers ([`runcell_protocol::render`]), and the page's own dates.

pub use runcell_protocol::render::*;

pub mod dates;
