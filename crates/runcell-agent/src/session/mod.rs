//! Sessions: the sequenced event history every page of a session follows,
//! their owners' quota and uploads. Their ids (session, owner, share link)
//! are the pages' too, defined once in `app::api` and re-exported here.

pub mod clients;
mod follow;
mod hub;
pub mod quota;
pub mod sockets;
pub mod uploads;
mod writer;

pub use app::api::{
    InvalidOwnerId, InvalidSessionId, InvalidShareToken, OwnerId, SessionId, ShareToken,
};
pub use follow::{Follower, PAGE_EVENTS};
pub use hub::{
    CreateError, MAX_PENDING_TURNS, SessionChannel, SessionHub, TurnSlot, settle_lost_kernel,
};
