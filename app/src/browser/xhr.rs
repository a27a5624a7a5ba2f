//! What the page's `XMLHttpRequest`s share: sending with a callback at the
//! end (with or without a JSON body), and reading an answer's field or an
//! error body.

use std::cell::Cell;

use wasm_bindgen::JsCast;
use wasm_bindgen::closure::Closure;
use web_sys::XmlHttpRequest;

/// The answer's body as JSON, if it is some.
pub(super) fn json_of(xhr: &XmlHttpRequest) -> Option<serde_json::Value> {
    xhr.response_text()
        .ok()
        .flatten()
        .and_then(|body| serde_json::from_str(&body).ok())
}

/// The message of an error body (`{"error":{"code","message"}}`), or the
/// status.
pub(super) fn message_of(xhr: &XmlHttpRequest) -> String {
    let status = xhr.status().unwrap_or(0);
    json_of(xhr)
        .and_then(|body| body["error"]["message"].as_str().map(str::to_string))
        .unwrap_or_else(|| format!("the server answered {status}"))
}

/// The string `field` of a JSON answer, if it has one.
pub(super) fn string_field(xhr: &XmlHttpRequest, field: &str) -> Option<String> {
    json_of(xhr).and_then(|body| body[field].as_str().map(str::to_string))
}

/// Sends `method url` (with `json` as its body, if given) and calls `done`
/// with the request when it ends; false when it could not be sent.
pub(super) fn send(
    method: &str,
    url: &str,
    json: Option<&str>,
    done: impl FnOnce(&XmlHttpRequest) + 'static,
) -> bool {
    let Ok(xhr) = XmlHttpRequest::new() else {
        return false;
    };
    if xhr.open(method, url).is_err()
        || json.is_some()
            && xhr
                .set_request_header("Content-Type", "application/json")
                .is_err()
    {
        return false;
    }
    on_end(&xhr, done);
    xhr.send_with_opt_str(json).is_ok()
}

/// Sends `xhr` and calls `done` with it when it ends (also when it fails).
pub(super) fn on_end(xhr: &XmlHttpRequest, done: impl FnOnce(&XmlHttpRequest) + 'static) {
    let done = Cell::new(Some(done));
    let this = xhr.clone();
    let handler = Closure::<dyn FnMut()>::new(move || {
        if let Some(done) = done.take() {
            done(&this);
        }
    });
    xhr.set_onloadend(Some(handler.as_ref().unchecked_ref()));
    // Lives until the request ends; one small closure per request.
    handler.forget();
}
