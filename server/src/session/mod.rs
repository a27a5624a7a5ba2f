//! Sessions: their identity and the sequenced event history every page of a
//! session follows.

mod hub;
mod id;

pub use hub::{SessionChannel, SessionHub};
pub use id::{InvalidSessionId, SessionId};
