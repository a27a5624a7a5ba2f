//! Importing a Jupyter notebook: the file goes to `POST
//! /api/sessions/import` as it is, and the page moves to the new session.

use wasm_bindgen::JsCast;
use web_sys::{File, XmlHttpRequest};

use super::xhr::{message_of, on_end, string_field};
use leptos::prelude::*;

/// The largest notebook the server reads; bigger ones are refused here,
/// before they are sent.
const MAX_BYTES: f64 = 20.0 * 1024.0 * 1024.0;

/// Imports the first file of `list`; what went wrong goes to `problem`.
pub fn import_first(list: &web_sys::FileList, problem: RwSignal<Option<String>>) {
    if let Some(file) = list.get(0) {
        import(&file, problem);
    }
}

/// Imports the file picked in an `<input type=file>`, then clears it.
pub fn import_from_input(ev: &leptos::ev::Event, problem: RwSignal<Option<String>>) {
    let Some(input) = ev
        .target()
        .and_then(|t| t.dyn_into::<web_sys::HtmlInputElement>().ok())
    else {
        return;
    };
    if let Some(list) = input.files() {
        import_first(&list, problem);
    }
    input.set_value("");
}

fn import(file: &File, problem: RwSignal<Option<String>>) {
    let name = file.name();
    if !name.to_ascii_lowercase().ends_with(".ipynb") {
        problem.set(Some(format!("{name} is not a Jupyter notebook (.ipynb)")));
        return;
    }
    if file.size() > MAX_BYTES {
        problem.set(Some(format!("{name} is larger than 20 MiB")));
        return;
    }
    problem.set(Some(format!("Importing {name}…")));
    let Ok(xhr) = XmlHttpRequest::new() else {
        problem.set(Some("this browser cannot upload".into()));
        return;
    };
    if xhr.open("POST", "/api/sessions/import").is_err()
        || xhr
            .set_request_header("Content-Type", "application/x-ipynb+json")
            .is_err()
    {
        problem.set(Some("the import could not start".into()));
        return;
    }
    on_end(&xhr, move |xhr| match xhr.status().unwrap_or(0) {
        201 => match string_field(xhr, "url") {
            Some(url) => {
                let _ = window().location().set_href(&url);
            }
            None => problem.set(Some("the server answered without the new session".into())),
        },
        0 => problem.set(Some("the server could not be reached".into())),
        _ => problem.set(Some(format!(
            "{name} was not imported: {}",
            message_of(xhr)
        ))),
    });
    if xhr.send_with_opt_blob(Some(file)).is_err() {
        problem.set(Some("the import could not be sent".into()));
    }
}
