//! The Files panel's requests, made with `XMLHttpRequest`
//! because only it reports an upload's progress.

use leptos::prelude::*;
use wasm_bindgen::JsCast;
use wasm_bindgen::closure::Closure;
use web_sys::{File, ProgressEvent, XmlHttpRequest};

use super::xhr::{json_of, message_of, on_end, send};
use crate::contexts::{FilesState, SessionState, UploadItem};
use crate::protocol::SandboxKind;
use crate::render::sizes::{human_size, mib};

fn files_url(state: SessionState, query: &str) -> String {
    format!(
        "/api/sessions/{}/files{query}",
        state.session_id.get_value()
    )
}

/// Reads the list again.
pub fn refresh(state: SessionState, files: FilesState) {
    if state.picked_backend() == Some(SandboxKind::Browser) {
        // The page's own Python has no files (nor their problems).
        files.files.set(Vec::new());
        files.problem.set(None);
        return;
    }
    send("GET", &files_url(state, ""), None, move |xhr| {
        if xhr.status().unwrap_or(0) != 200 {
            files.problem.set(Some(format!(
                "The file list could not be read: {}",
                message_of(xhr)
            )));
            return;
        }
        let list = json_of(xhr).and_then(|body| crate::reader::file_items(&body).ok());
        if let Some(list) = list {
            files.problem.set(None);
            files.files.set(list);
        }
    });
}

/// Uploads the files picked in an `<input type=file>`, then clears it.
pub fn upload_from_input(state: SessionState, files: FilesState, ev: &leptos::ev::Event) {
    let Some(input) = ev
        .target()
        .and_then(|t| t.dyn_into::<web_sys::HtmlInputElement>().ok())
    else {
        return;
    };
    if let Some(list) = input.files() {
        upload_all(state, files, &list);
    }
    input.set_value("");
}

/// Uploads every file of a list (a picker's or a drop's).
pub fn upload_all(state: SessionState, files: FilesState, list: &web_sys::FileList) {
    if state.picked_backend() == Some(SandboxKind::Browser) {
        files.problem.set(Some(
            "The page's own Python has no files: pick the local sandbox to upload them.".into(),
        ));
        return;
    }
    for i in 0..list.length() {
        if let Some(file) = list.get(i) {
            upload(state, files, &file, false);
        }
    }
}

/// Uploads the refused file `id` again, replacing the one of its name.
pub fn replace(state: SessionState, files: FilesState, id: u64) {
    let file = files.take_refused(id);
    files.uploads.update(|u| u.retain(|x| x.id != id));
    if let Some(file) = file {
        upload(state, files, &file, true);
    }
}

/// An upload refused before anything was sent, shown with why (and, for a
/// name that is taken, a Replace button).
fn refused(files: FilesState, id: u64, name: String, error: String, conflict: bool) {
    files.uploads.update(|u| {
        u.push(UploadItem {
            id,
            name,
            sent: 0.0,
            total: 1.0,
            error: Some(error),
            conflict,
        });
    });
}

fn upload(state: SessionState, files: FilesState, file: &File, overwrite: bool) {
    let id = files.next_upload_id();
    let name = file.name();
    // Too big: said at once rather than after sending it (the server
    // refuses it too).
    if files.limit > 0 && file.size() > files.limit as f64 {
        let error = format!(
            "{name} is {}: a file may be at most {}.",
            human_size(file.size() as u64),
            mib(files.limit)
        );
        refused(files, id, name, error, false);
        return;
    }
    // A name that is taken is asked about before anything is sent (the
    // server refuses it too).
    let taken = files
        .files
        .with_untracked(|f| f.iter().any(|x| x.path == format!("/home/user/{name}")));
    if taken && !overwrite {
        files.keep_refused(id, file.clone());
        let error = format!("{name} is there already.");
        refused(files, id, name, error, true);
        return;
    }
    files.uploads.update(|u| {
        u.push(UploadItem {
            id,
            name: name.clone(),
            sent: 0.0,
            total: file.size().max(1.0),
            error: None,
            conflict: false,
        });
    });
    let fail = move |error: String, conflict: bool| {
        files.uploads.update(|u| {
            if let Some(item) = u.iter_mut().find(|x| x.id == id) {
                item.error = Some(error);
                item.conflict = conflict;
            }
        });
    };
    let Ok(xhr) = XmlHttpRequest::new() else {
        fail("this browser cannot upload".into(), false);
        return;
    };
    let query = format!(
        "?path={}{}",
        String::from(js_sys::encode_uri_component(&name)),
        if overwrite { "&overwrite=true" } else { "" }
    );
    if xhr.open("PUT", &files_url(state, &query)).is_err() {
        fail("the upload could not start".into(), false);
        return;
    }
    if let Ok(progress) = xhr.upload() {
        let on_progress = Closure::<dyn FnMut(ProgressEvent)>::new(move |ev: ProgressEvent| {
            files.uploads.update(|u| {
                if let Some(item) = u.iter_mut().find(|x| x.id == id) {
                    item.sent = ev.loaded();
                    if ev.length_computable() {
                        item.total = ev.total().max(1.0);
                    }
                }
            });
        });
        progress.set_onprogress(Some(on_progress.as_ref().unchecked_ref()));
        on_progress.forget();
    }
    let kept = file.clone();
    on_end(&xhr, move |xhr| match xhr.status().unwrap_or(0) {
        201 => {
            files.uploads.update(|u| u.retain(|x| x.id != id));
            refresh(state, files);
            // The next question will read this file's profile: the server
            // may read it (and the conversation) ahead now.
            state.send_frame(crate::protocol::ClientMessage::Composing {
                model: state.picked_model(),
            });
        }
        409 => {
            files.keep_refused(id, kept);
            fail(format!("{name} is there already."), true);
        }
        0 => fail("the upload broke off (is the server up?)".into(), false),
        _ => fail(message_of(xhr), false),
    });
    if xhr.send_with_opt_blob(Some(file)).is_err() {
        fail("the upload could not start".into(), false);
    }
}

/// Deletes a file, then reads the list again.
pub fn delete(state: SessionState, files: FilesState, path: &str) {
    let query = format!("?path={}", String::from(js_sys::encode_uri_component(path)));
    send("DELETE", &files_url(state, &query), None, move |xhr| {
        if xhr.status().unwrap_or(0) != 204 {
            files
                .problem
                .set(Some(format!("Not deleted: {}", message_of(xhr))));
        }
        refresh(state, files);
    });
}

/// Reads the list once the page is live and again after every turn, and
/// takes files dropped anywhere on the page.
pub fn watch(state: SessionState, files: FilesState) {
    Effect::new(move |was_busy: Option<bool>| {
        let busy = state.notebook.with(crate::notebook::Notebook::is_busy);
        if !busy && was_busy != Some(false) {
            refresh(state, files);
        }
        busy
    });
    // Another sandbox has other files (or none): what was said of the
    // last one's no longer holds.
    Effect::new(move |_| {
        state.backend.track();
        files.problem.set(None);
        refresh(state, files);
    });
}

/// The page's drag-and-drop handlers.
pub fn on_drag_over(files: FilesState, ev: &web_sys::DragEvent) {
    if carries_files(ev) {
        ev.prevent_default();
        files.dragging.set(true);
    }
}

pub fn on_drop(state: SessionState, files: FilesState, ev: &web_sys::DragEvent) {
    files.dragging.set(false);
    if !carries_files(ev) {
        return;
    }
    ev.prevent_default();
    if let Some(list) = ev.data_transfer().and_then(|d| d.files()) {
        upload_all(state, files, &list);
    }
}

fn carries_files(ev: &web_sys::DragEvent) -> bool {
    ev.data_transfer()
        .map(|d| {
            d.types()
                .iter()
                .any(|t| t.as_string().as_deref() == Some("Files"))
        })
        .unwrap_or(false)
}
