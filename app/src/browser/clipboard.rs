//! The clipboard.

use leptos::prelude::*;

/// Copies `text` to the clipboard.
pub fn copy_text(text: &str) {
    let _ = window().navigator().clipboard().write_text(text);
}

/// Copies the absolute address of `path` on this site.
pub fn copy_link(path: &str) {
    let origin = window().location().origin().unwrap_or_default();
    copy_text(&format!("{origin}{path}"));
}
