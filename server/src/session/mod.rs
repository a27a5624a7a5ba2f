//! Sessions: their identity and the sequenced event history every page of a
//! session follows.

mod hub;
mod id;

pub use hub::{MAX_PENDING_TURNS, SessionChannel, SessionHub, TurnSlot};
pub use id::{InvalidSessionId, SessionId};
