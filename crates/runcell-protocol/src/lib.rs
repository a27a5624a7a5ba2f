//! runcell's wire, at the bottom of the workspace: what the server and the
//! browser say to each other, defined once, and the pure functions both
//! sides apply to it. No UI, no web framework, no runcell crate beneath it.
//!
//! - the crate root ([`wire`]): the WebSocket frames, the events a session's
//!   history is made of and the outputs a cell holds (serde), and the names
//!   their variants travel by ([`Named`], [`EventKind`]...), one list each.
//! - [`ids`]: a session's id, a share link's token, an owner's id.
//! - [`page`]: what a page's server functions return (a session's log, a
//!   share link's, the sidebar's lists) and the names of files and titles.
//! - [`notebook`]: the pure fold from events to cells that both sides render.
//! - [`reader`]: the page's reading of the frames, by hand (no serde code in
//!   the bundle), held to the serde definitions by its tests.
//! - [`render`]: markdown, ANSI and tables to safe HTML; sizes and PNGs.
//!
//! Features: `server` (making new ids, math as MathML) and `schema` (the
//! OpenAPI and JSON Schema derives), both off in the browser's bundle.

pub mod ids;
pub mod notebook;
pub mod page;
pub mod reader;
pub mod render;
pub mod wire;

pub use ids::{
    InvalidOwnerId, InvalidSessionId, InvalidShareToken, OwnerId, SessionId, ShareToken,
};
pub use wire::*;
