//! The notebook's parts, one file per cohesive group. Each takes the page's
//! state from context (`crate::contexts`) and renders the same on the server
//! and in the browser; what only a browser can do (uploads, the clipboard)
//! is called from event handlers into `crate::browser`.

mod cells;
mod composer;
mod files;
mod header;
mod import;
mod indicators;
mod kernel_notice;
mod kernels;
mod page_title;
mod pickers;
mod problem;
mod refusal;
mod share;
mod sidebar;
mod theme;

pub use cells::{CellView, Cells};
pub use composer::Prompt;
pub use files::{FilesPanel, ShareLinkFiles};
pub use header::Header;
pub use indicators::{ConnectionIndicator, PythonIndicator, TurnAnnouncer};
pub use kernel_notice::KernelNotice;
pub use page_title::PageTitle;
#[cfg(feature = "ssr")]
pub(crate) use pickers::short_name as model_short_name;
pub use pickers::{BackendPicker, ModelPicker};
pub use problem::{LoadProblem, problem_of};
pub use share::ShareControls;
pub use sidebar::Sidebar;
pub use theme::{THEME_COOKIE, Theme, ThemeSwitch, current_theme, provide_theme, use_theme};

/// Copies `text` to the clipboard (in the browser; on the server nothing
/// is clicked).
pub(crate) fn copy_text(text: &str) {
    #[cfg(feature = "hydrate")]
    crate::browser::clipboard::copy_text(text);
    #[cfg(not(feature = "hydrate"))]
    let _ = text;
}

/// A `data:` URL, for downloads that work without JavaScript.
pub(crate) use crate::render::outputs::data_url;

/// Copies the absolute address of `path` on this site (in the browser).
pub(crate) fn copy_link(path: &str) {
    #[cfg(feature = "hydrate")]
    crate::browser::clipboard::copy_link(path);
    #[cfg(not(feature = "hydrate"))]
    let _ = path;
}
