//! Text to safe HTML, the same on the server and in the browser: pure
//! functions of their input, with no state and no view.
//!
//! - [`markdown`]: explanations and questions (sanitised pulldown-cmark, on
//!   the server only) and [`markdown::escape`].
//! - [`for_pages`]: a session's events as a page is sent them, with the
//!   markdown's markup (server only).
//! - [`ansi`]: tracebacks' colours to spans, or stripped for the model.
//! - [`sizes`]: byte counts as people read them.
//! - [`outputs`]: a result cell's outputs as the page shows them.
//! - [`table`]: a table's numeric columns, sort order, CSV and TSV;
//!   [`table_markup`]: its markup, a window of its rows at a time.

pub mod ansi;
#[cfg(feature = "server")]
pub mod for_pages;
pub mod markdown;
pub mod outputs;
pub mod png;
pub mod sizes;
pub mod table;
pub mod table_markup;
