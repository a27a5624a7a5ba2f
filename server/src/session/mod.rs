//! Sessions: their identity, owner, share links and the sequenced event
//! history every page of a session follows.

mod hub;
mod id;
mod logs;
mod owner;
mod share;
pub mod uploads;
mod writer;

pub use hub::{MAX_PENDING_TURNS, SessionChannel, SessionHub, TurnSlot};
pub use id::{InvalidSessionId, SessionId};
pub use owner::{InvalidOwnerId, OwnerId};
pub use share::{InvalidShareToken, ShareToken};
