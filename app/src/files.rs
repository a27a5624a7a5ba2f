//! The Files panel: what is in the session's `/home/user` (uploads and what
//! the code wrote), with upload (button or drop), progress, download and
//! delete. The list is read after hydration and after every turn.

use leptos::prelude::*;
use serde::{Deserialize, Serialize};

use crate::components::SessionState;

/// A file or directory in the session's home, as the server lists it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileItem {
    /// `/home/user/…`
    pub path: String,
    pub name: String,
    /// `file`, `directory` or `symlink`.
    pub kind: String,
    pub size: u64,
    #[serde(default)]
    pub modified_ms: Option<u64>,
}

/// An upload under way, or one that failed.
#[derive(Clone, Debug, PartialEq)]
pub struct UploadItem {
    pub id: u64,
    pub name: String,
    pub sent: f64,
    pub total: f64,
    /// Why it failed.
    pub error: Option<String>,
    /// It failed because a file of that name is there: it may be replaced.
    pub conflict: bool,
}

/// The panel's state.
#[derive(Clone, Copy)]
pub struct FilesState {
    pub files: RwSignal<Vec<FileItem>>,
    pub uploads: RwSignal<Vec<UploadItem>>,
    /// Something is being dragged over the page.
    pub dragging: RwSignal<bool>,
    /// Why the list could not be read, if it could not.
    pub problem: RwSignal<Option<String>>,
    /// The largest file that may be uploaded, in bytes (0: not known).
    pub limit: u64,
}

impl FilesState {
    pub fn new(limit: u64) -> Self {
        Self {
            files: RwSignal::new(Vec::new()),
            uploads: RwSignal::new(Vec::new()),
            dragging: RwSignal::new(false),
            problem: RwSignal::new(None),
            limit,
        }
    }
}

/// `text` as a URL query value.
pub fn query_value(text: &str) -> String {
    text.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"-._~/".contains(&b) {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

/// `1.2 KB`, `3.4 MB`: sizes as people read them.
pub fn human_size(bytes: u64) -> String {
    const UNITS: [&str; 4] = ["B", "KB", "MB", "GB"];
    let mut value = bytes as f64;
    let mut unit = 0;
    while value >= 1000.0 && unit < UNITS.len() - 1 {
        value /= 1000.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{bytes} B")
    } else {
        format!("{value:.1} {}", UNITS[unit])
    }
}

/// When a file last changed, in the reader's own time (in the browser; the
/// list is only ever filled there).
fn modified_label(ms: Option<u64>) -> String {
    #[cfg(feature = "hydrate")]
    {
        ms.map(|ms| {
            let date = js_sys::Date::new(&wasm_bindgen::JsValue::from_f64(ms as f64));
            String::from(date.to_locale_string("en-GB", &wasm_bindgen::JsValue::UNDEFINED))
        })
        .unwrap_or_default()
    }
    #[cfg(not(feature = "hydrate"))]
    {
        let _ = ms;
        String::new()
    }
}

/// A limit as the server states it (`50 MiB`).
pub fn mib(bytes: u64) -> String {
    let mib = bytes as f64 / (1024.0 * 1024.0);
    if mib.fract() == 0.0 {
        format!("{mib:.0} MiB")
    } else {
        format!("{mib:.1} MiB")
    }
}

/// The panel.
#[component]
pub fn FilesPanel() -> impl IntoView {
    let state = expect_context::<SessionState>();
    let files = expect_context::<FilesState>();
    let session_for_rows = state.session_id.get_value();
    let shown = move || {
        files
            .files
            .get()
            .into_iter()
            .filter(|f| f.kind == "file")
            .collect::<Vec<_>>()
    };
    let empty = move || shown().is_empty() && files.uploads.with(Vec::is_empty);
    let in_page = move || state.backend.get() == "browser";
    view! {
        <section class="files js-only" aria-label="Files" class:dragging=move || files.dragging.get()>
            <div class="files-head">
                <h2>"Files"</h2>
                <span class="files-where">"in /home/user, where the code can read them"</span>
                <label class="button upload-button" hidden=in_page>
                    "Upload files"
                    <input
                        type="file"
                        multiple
                        disabled=in_page
                        aria-label="Upload files"
                        on:change=move |ev| {
                            #[cfg(feature = "hydrate")]
                            crate::files_client::upload_from_input(state, files, &ev);
                            #[cfg(not(feature = "hydrate"))]
                            let _ = ev;
                        }
                    />
                </label>
            </div>
            <Show when=move || empty() && !in_page()>
                <p class="files-empty">"No files yet: upload some, or drop them on the page."</p>
            </Show>
            <Show when=in_page>
                <p class="files-empty">"The page's own Python has no files: pick the local sandbox to upload and download them."</p>
            </Show>
            <p class="files-problem" role="alert">{move || files.problem.get()}</p>
            <ul class="upload-list">
                <For each=move || files.uploads.get() key=|u| (u.id, u.error.clone()) let:upload>
                    <UploadRow upload/>
                </For>
            </ul>
            <ul class="file-list">
                <For each=shown key=|f| (f.path.clone(), f.size, f.modified_ms) let:file>
                    <FileRow file session=session_for_rows.clone()/>
                </For>
            </ul>
        </section>
    }
}

#[component]
fn FileRow(file: FileItem, session: String) -> impl IntoView {
    let state = expect_context::<SessionState>();
    let files = expect_context::<FilesState>();
    let shown = file
        .path
        .strip_prefix("/home/user/")
        .unwrap_or(&file.path)
        .to_string();
    let href = format!(
        "/api/sessions/{session}/files?path={}",
        query_value(&file.path)
    );
    let path = file.path.clone();
    let delete = move |_| {
        #[cfg(feature = "hydrate")]
        crate::files_client::delete(state, files, &path);
        #[cfg(not(feature = "hydrate"))]
        let _ = (&path, state, files);
    };
    view! {
        <li class="file-row">
            <a class="file-name" href=href download=file.name.clone() title=format!("Download {shown}")>
                {shown.clone()}
            </a>
            <span class="file-size">{human_size(file.size)}</span>
            <span class="file-modified">{modified_label(file.modified_ms)}</span>
            <button type="button" class="file-delete" aria-label=format!("Delete {shown}") on:click=delete>
                "Delete"
            </button>
        </li>
    }
}

#[component]
fn UploadRow(upload: UploadItem) -> impl IntoView {
    let state = expect_context::<SessionState>();
    let files = expect_context::<FilesState>();
    let UploadItem {
        id,
        name,
        error,
        conflict,
        ..
    } = upload;
    let failed = error.is_some();
    // Progress changes without re-creating the row.
    let progress = move || {
        files.uploads.with(|u| {
            u.iter()
                .find(|x| x.id == id)
                .map_or((0.0, 1.0), |x| (x.sent, x.total))
        })
    };
    let replace = move |_| {
        #[cfg(feature = "hydrate")]
        crate::files_client::replace(state, files, id);
        #[cfg(not(feature = "hydrate"))]
        let _ = (id, state, files);
    };
    let dismiss = move |_| files.uploads.update(|u| u.retain(|x| x.id != id));
    view! {
        <li class="upload-row" class:failed=failed>
            <span class="file-name">{name.clone()}</span>
            {match error {
                None => view! {
                    <progress
                        max=move || progress().1
                        value=move || progress().0
                        aria-label=format!("Uploading {name}")
                    ></progress>
                }
                .into_any(),
                Some(error) => view! {
                    <span class="upload-error">{error}</span>
                    {conflict.then(|| view! {
                        <button type="button" on:click=replace>"Replace"</button>
                    })}
                    <button type="button" on:click=dismiss>"Dismiss"</button>
                }
                .into_any(),
            }}
        </li>
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_and_query_values() {
        assert_eq!(human_size(41), "41 B");
        assert_eq!(human_size(1_250), "1.2 KB");
        assert_eq!(human_size(52_428_800), "52.4 MB");
        assert_eq!(mib(52_428_800), "50 MiB");
        assert_eq!(mib(1_572_864), "1.5 MiB");
        assert_eq!(
            query_value("/home/user/a b&c.csv"),
            "/home/user/a%20b%26c.csv"
        );
        assert_eq!(query_value("é"), "%C3%A9");
    }
}
