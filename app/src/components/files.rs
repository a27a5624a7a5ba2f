//! The Files panel: what is in the session's `/home/user` (uploads and what
//! the code wrote), with upload (button or drop), progress, download and
//! delete. The list is read after hydration and after every turn (by
//! `browser::files`). And a share link's files, read-only.

use leptos::prelude::*;

use crate::api::{FileItem, session_file_url};
use crate::contexts::{UploadItem, use_files, use_session, use_share_link_offer};
use crate::render::sizes::human_size;

/// When a file last changed, in the reader's own time (in the browser; the
/// list is only ever filled there).
fn modified_label(ms: Option<u64>) -> String {
    #[cfg(feature = "hydrate")]
    {
        ms.map(|ms| {
            let date = js_sys::Date::new(&wasm_bindgen::JsValue::from_f64(ms as f64));
            // In the reader's own language and format.
            let language = window()
                .navigator()
                .language()
                .unwrap_or_else(|| "en".into());
            String::from(date.to_locale_string(&language, &wasm_bindgen::JsValue::UNDEFINED))
        })
        .unwrap_or_default()
    }
    #[cfg(not(feature = "hydrate"))]
    {
        let _ = ms;
        String::new()
    }
}

/// A file's name in pieces that each end at a separator (`_`, `-`, `.`,
/// `/`, a space): a narrow row breaks the name there, never inside
/// "sales" or "2024", and keeps it whole where it fits.
fn name_pieces(name: &str) -> Vec<&str> {
    let mut pieces = Vec::new();
    let mut start = 0;
    for (at, c) in name.char_indices() {
        let end = at + c.len_utf8();
        if matches!(c, '_' | '-' | '.' | '/' | ' ') && end < name.len() && at > start {
            pieces.push(&name[start..end]);
            start = end;
        }
    }
    if start < name.len() {
        pieces.push(&name[start..]);
    }
    pieces
}

/// A file's name, with the places it may break at.
fn breakable_name(name: &str) -> impl IntoView + use<> {
    name_pieces(name)
        .into_iter()
        .map(|piece| {
            let piece = piece.to_string();
            view! { {piece}<wbr/> }
        })
        .collect_view()
}

/// The panel.
#[component]
pub fn FilesPanel() -> impl IntoView {
    let state = use_session();
    let files = use_files();
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
    let in_page = move || state.runs_in_page();
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
                            crate::browser::files::upload_from_input(state, files, &ev);
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
    let state = use_session();
    let files = use_files();
    let shown = file
        .path
        .strip_prefix("/home/user/")
        .unwrap_or(&file.path)
        .to_string();
    let href = session_file_url(&session, &file.path);
    let path = file.path.clone();
    let delete = move |_| {
        #[cfg(feature = "hydrate")]
        crate::browser::files::delete(state, files, &path);
        #[cfg(not(feature = "hydrate"))]
        let _ = (&path, state, files);
    };
    view! {
        <li class="file-row">
            <a class="file-name" href=href download=file.name.clone() title=format!("Download {shown}")>
                {breakable_name(&shown)}
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
    let state = use_session();
    let files = use_files();
    let UploadItem {
        id,
        name,
        error,
        conflict,
        ..
    } = upload;
    let failed = error.is_some();
    // Progress changes without re-creating the row. In whole bytes: an
    // `f64` attribute would bring float printing into the bundle.
    let progress = move || {
        files.uploads.with(|u| {
            u.iter()
                .find(|x| x.id == id)
                .map_or((0, 1), |x| (x.sent as u64, x.total as u64))
        })
    };
    let replace = move |_| {
        #[cfg(feature = "hydrate")]
        crate::browser::files::replace(state, files, id);
        #[cfg(not(feature = "hydrate"))]
        let _ = (id, state, files);
    };
    let dismiss = move |_| files.uploads.update(|u| u.retain(|x| x.id != id));
    view! {
        <li class="upload-row" class:failed=failed>
            <span class="file-name">{breakable_name(&name)}</span>
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

/// The files a share link offers, as they were when it was shared.
#[component]
pub fn ShareLinkFiles(files: Vec<FileItem>) -> impl IntoView {
    let offer = use_share_link_offer();
    let rows = files
        .into_iter()
        .map(|file| {
            let shown = file
                .path
                .strip_prefix("/home/user/")
                .unwrap_or(&file.path)
                .to_string();
            let href = offer
                .as_ref()
                .and_then(|offer| offer.href(&file.path))
                .unwrap_or_default();
            view! {
                <li class="file-row">
                    <a class="file-name" href=href download=file.name.clone() title=format!("Download {shown}")>
                        {breakable_name(&shown)}
                    </a>
                    <span class="file-size">{human_size(file.size)}</span>
                </li>
            }
        })
        .collect_view();
    view! {
        <section class="files shared-files" aria-label="Files">
            <div class="files-head">
                <h2>"Files"</h2>
                <span class="files-where">"as they were when the session was shared"</span>
            </div>
            <ul class="file-list">{rows}</ul>
        </section>
    }
}

#[cfg(test)]
mod tests {
    use super::name_pieces;

    #[test]
    fn a_name_breaks_only_after_its_separators() {
        let cases: [(&str, &[&str]); 7] = [
            ("sales_2024.csv", &["sales_", "2024.", "csv"]),
            ("data/raw-v2.parquet", &["data/", "raw-", "v2.", "parquet"]),
            ("README", &["README"]),
            (".hidden", &[".hidden"]),
            ("a__b", &["a_", "_b"]),
            ("ends_", &["ends_"]),
            ("", &[]),
        ];
        for (name, expected) in cases {
            assert_eq!(name_pieces(name), expected, "{name}");
        }
    }
}
