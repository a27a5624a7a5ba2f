//! The pages' HTTP surface: the server functions (one file per page), the
//! error they fail with, and the ports on the server that they call. The
//! types they return are the protocol crate's ([`runcell_protocol::page`]).
//!
//! The server crate provides an implementation of each port as context; the
//! functions here only parse, call the port and map the result.

mod error;
#[cfg(feature = "ssr")]
pub mod ports;
mod session;
mod share_link;

pub use error::{LoadError, UNREACHABLE};
pub use runcell_protocol::ids::{
    InvalidOwnerId, InvalidSessionId, InvalidShareToken, OwnerId, SessionId, ShareToken,
};
pub use runcell_protocol::page::*;
pub use session::{LoadSession, SessionLoad, load_session};
pub use share_link::{LoadShareLink, load_share_link};
