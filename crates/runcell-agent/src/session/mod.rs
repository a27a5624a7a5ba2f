//! Sessions: the sequenced event history every page of a session follows,
//! their owners' quota and uploads. Their ids (session, owner, share link)
//! are the pages' too, defined once in `app::api` and re-exported here.

mod channel;
pub mod clients;
mod follow;
mod hub;
mod log;
pub mod quota;
pub mod sockets;
pub mod uploads;
mod writer;

pub use channel::{MAX_PENDING_TURNS, SessionChannel, TurnSlot};
pub use follow::{Follower, PAGE_EVENTS};
pub use hub::{CreateError, SessionHub};
pub use log::SessionLog;
