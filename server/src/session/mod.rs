//! Sessions: their identity, owner, share links and the sequenced event
//! history every page of a session follows.

mod hub;
mod id;
mod owner;
pub mod quota;
mod share;
pub mod uploads;
mod writer;

pub use hub::{CreateError, MAX_PENDING_TURNS, SessionChannel, SessionHub, TurnSlot};
pub use id::{InvalidSessionId, SessionId};
pub use owner::{InvalidOwnerId, OwnerId};
pub use share::{InvalidShareToken, ShareToken};
