//! The browser bundle: hydrates the page the server rendered.

#[wasm_bindgen::prelude::wasm_bindgen]
pub fn hydrate() {
    console_error_panic_hook::set_once();
    app::hydrate();
}
