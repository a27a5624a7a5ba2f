//! The page's state, provided as Leptos context by the route that owns it
//! and read by components with the `use_*` accessors. Nothing here renders;
//! nothing here needs a browser.
//!
//! - [`session`]: one notebook's reactive state ([`SessionState`]).
//! - [`files`]: the Files panel's list and uploads ([`FilesState`]).
//! - [`share_link`]: what a share link's page may link to ([`ShareLinkOffer`]).

pub mod files;
pub mod session;
pub mod share_link;

pub use files::{FilesState, UploadItem, provide_files, use_files};
pub use session::{ConnState, PyStatus, Sender, SessionState, provide_session, use_session};
pub use share_link::{ShareLinkOffer, provide_share_link_offer, use_share_link_offer};
