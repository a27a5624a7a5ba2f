//! The Files panel's state: what is in the session's `/home/user`, the
//! uploads under way, and the files kept for "Replace".

use leptos::prelude::*;

use crate::api::FileItem;

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
    /// The id the next upload gets.
    next_upload: StoredValue<u64>,
    /// Files whose upload was refused because the name is taken, kept so
    /// that "Replace" can send them again (browser handles: page-local).
    #[cfg(feature = "hydrate")]
    refused: StoredValue<Vec<(u64, web_sys::File)>, LocalStorage>,
}

impl FilesState {
    pub fn new(limit: u64) -> Self {
        Self {
            files: RwSignal::new(Vec::new()),
            uploads: RwSignal::new(Vec::new()),
            dragging: RwSignal::new(false),
            problem: RwSignal::new(None),
            limit,
            next_upload: StoredValue::new(1),
            #[cfg(feature = "hydrate")]
            refused: StoredValue::new_local(Vec::new()),
        }
    }

    /// A new id for an upload.
    pub fn next_upload_id(self) -> u64 {
        let id = self.next_upload.get_value();
        self.next_upload.set_value(id + 1);
        id
    }

    /// Keeps a refused file for "Replace".
    #[cfg(feature = "hydrate")]
    pub fn keep_refused(self, id: u64, file: web_sys::File) {
        self.refused.update_value(|r| r.push((id, file)));
    }

    /// Takes the refused file `id` back, if it was kept.
    #[cfg(feature = "hydrate")]
    pub fn take_refused(self, id: u64) -> Option<web_sys::File> {
        self.refused
            .try_update_value(|refused| {
                let at = refused.iter().position(|(i, _)| *i == id)?;
                Some(refused.remove(at).1)
            })
            .flatten()
    }
}

/// Makes a new Files panel state the page's; returns it.
pub fn provide_files(limit: u64) -> FilesState {
    let files = FilesState::new(limit);
    provide_context(files);
    files
}

/// The page's Files panel state.
pub fn use_files() -> FilesState {
    expect_context::<FilesState>()
}
