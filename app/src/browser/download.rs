//! Saving what a page already holds (a figure's bytes) as a file, without
//! a second copy of it in the page.

use leptos::prelude::*;
use wasm_bindgen::JsCast;

/// Saves `url` (a `data:` URL the page holds) under `name`.
pub fn save(name: &str, url: &str) {
    let document = document();
    let Ok(link) = document.create_element("a") else {
        return;
    };
    let Ok(link) = link.dyn_into::<web_sys::HtmlAnchorElement>() else {
        return;
    };
    link.set_href(url);
    link.set_download(name);
    link.click();
}
