//! Text to safe HTML, the same on the server and in the browser: pure
//! functions of their input, with no state and no view.
//!
//! - [`markdown`]: explanations (sanitised pulldown-cmark) and [`markdown::escape`].
//! - [`ansi`]: tracebacks' colours to spans, or stripped for the model.
//! - [`sizes`]: byte counts as people read them.
//! - [`table`]: a table's numeric columns, sort order, CSV and TSV.

pub mod ansi;
pub mod markdown;
pub mod png;
pub mod sizes;
pub mod table;
