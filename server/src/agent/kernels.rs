//! Each notebook session's sandbox session: its Python kernel, where
//! variables live from one turn to the next, on the backend the session's
//! page picked (the jail unless another was chosen): one of the shared
//! backends, or the Browser sandbox (the session's own page).

use std::collections::HashMap;
use std::sync::Arc;

use parking_lot::Mutex;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::sandbox::backends::Backends;
use crate::sandbox::browser::{self, BrowserTabs};
use crate::sandbox::files::{FileEntry, FileKind, Files, HOME};
use crate::sandbox::sessions::SessionError;
use crate::sandbox::{
    Language, RunEvent, RunOutcome, RunRequest, Sandbox, SandboxError, SandboxSession,
};
use crate::session::SessionId;
use crate::session::uploads::Uploads;

/// The Browser sandbox, when the site carries Pyodide.
pub struct BrowserOffer {
    pub tabs: Arc<BrowserTabs>,
    /// What its vendored packages let a program import.
    pub imports: Vec<String>,
}

/// Why a notebook session's file could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum FilesError {
    /// A file is there already and replacing it was not asked for.
    #[error("{0} exists already")]
    Exists(String),
    #[error(transparent)]
    Session(#[from] SessionError),
    #[error(transparent)]
    Sandbox(#[from] SandboxError),
}

/// Which sandbox session each notebook session runs in.
pub struct Kernels {
    backends: Backends,
    browser: Option<BrowserOffer>,
    /// What people uploaded, kept beyond any one kernel.
    uploads: Uploads,
    /// Each notebook session's kernel.
    by_session: Mutex<HashMap<SessionId, Kernel>>,
    /// The backend each notebook session asked for last.
    chosen: Mutex<HashMap<SessionId, &'static str>>,
}

/// A notebook session's kernel.
#[derive(Clone)]
enum Kernel {
    /// A session of one of the shared backends, by id.
    Pooled { backend: &'static str, id: String },
    /// A kernel in the session's page.
    Browser(Arc<dyn SandboxSession>),
}

/// How deep a listing goes below the home.
const MAX_LIST_DEPTH: u32 = 8;
/// Text files up to this size show the model their first lines.
const PEEK_MAX_BYTES: u64 = 256 * 1024;
/// How many lines of a text file the model sees.
const PEEK_LINES: usize = 5;

fn files_of(session: &dyn SandboxSession) -> Result<&dyn Files, SandboxError> {
    session
        .files()
        .ok_or_else(|| SandboxError::NotSupported("this kernel's sandbox has no files".into()))
}

/// The most files one result cell offers.
const MAX_OFFERS: usize = 8;

/// Images and tables: what a result cell offers when a run writes them.
fn is_offered(name: &str) -> bool {
    let extension = name.rsplit_once('.').map(|(_, e)| e.to_ascii_lowercase());
    matches!(
        extension.as_deref(),
        Some("png" | "jpg" | "jpeg" | "gif" | "webp" | "svg" | "csv" | "tsv" | "xlsx" | "json")
    )
}

/// Whether a path is, or is inside, a dot-file.
fn is_hidden(path: &str) -> bool {
    path.split('/').any(|part| part.starts_with('.'))
}

fn is_text(name: &str) -> bool {
    let extension = name.rsplit_once('.').map(|(_, e)| e.to_ascii_lowercase());
    matches!(
        extension.as_deref(),
        Some(
            "csv"
                | "tsv"
                | "txt"
                | "json"
                | "jsonl"
                | "md"
                | "py"
                | "log"
                | "xml"
                | "yaml"
                | "yml"
                | "ini"
                | "toml"
                | "html"
                | "sql"
        )
    )
}

/// The first lines of a text file, each cut to 200 bytes.
fn first_lines(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes)
        .lines()
        .take(PEEK_LINES)
        .map(|line| crate::sandbox::fit(line, 200).to_string())
        .collect::<Vec<_>>()
        .join("\n")
}

impl Kernel {
    fn backend(&self) -> &'static str {
        match self {
            Self::Pooled { backend, .. } => backend,
            Self::Browser(_) => browser::BACKEND,
        }
    }
}

/// How a run went from the kernel's point of view.
pub struct KernelRun {
    pub outcome: RunOutcome,
    /// The backend it ran on.
    pub backend: &'static str,
    /// A new sandbox session was opened for this run although the notebook
    /// had one before (it was closed when idle, or the page's Python
    /// started afresh): earlier variables are gone.
    pub restarted: bool,
    /// The run moved to this backend (another was picked): the earlier
    /// variables stay behind on the old one.
    pub moved_to: Option<&'static str>,
}

impl Kernels {
    pub fn new(backends: Backends, browser: Option<BrowserOffer>, uploads: Uploads) -> Self {
        Self {
            backends,
            browser,
            uploads,
            by_session: Mutex::new(HashMap::new()),
            chosen: Mutex::new(HashMap::new()),
        }
    }

    /// The backends a notebook may pick, the default first.
    pub fn backends(&self) -> Vec<&'static str> {
        let mut names = self.backends.names();
        if self.browser.is_some() {
            names.push(browser::BACKEND);
        }
        names
    }

    /// Runs the session's next programs on `backend` (a kernel there starts
    /// on the next run; the old one's variables are left behind).
    pub fn choose(&self, session: SessionId, backend: &str) -> Result<(), SandboxError> {
        let name = if backend.trim() == browser::BACKEND {
            if self.browser.is_none() {
                return Err(SandboxError::InvalidInput(
                    "the browser sandbox is not on offer here: this server's site was built without Pyodide (run scripts/build.sh)".into(),
                ));
            }
            browser::BACKEND
        } else {
            self.backends.get(Some(backend))?.backend()
        };
        self.chosen.lock().insert(session, name);
        Ok(())
    }

    /// What the model must know about where the session's programs run,
    /// when it differs from the jail's full Python.
    pub fn environment_note(&self, session: SessionId) -> Option<String> {
        let offer = self.browser.as_ref()?;
        (self.chosen(session) == browser::BACKEND)
            .then(|| super::prompt::browser_note(&offer.imports))
    }

    /// The backend the session's next program runs on.
    pub fn chosen(&self, session: SessionId) -> &'static str {
        self.chosen
            .lock()
            .get(&session)
            .copied()
            .unwrap_or_else(|| self.backends.default_backend().backend())
    }

    /// Closes the session's sandbox session, if it has one: the next run
    /// starts a fresh kernel (and is not reported as a restart).
    pub async fn reset(&self, session: SessionId) {
        let known = self.by_session.lock().remove(&session);
        if let Some(kernel) = known {
            self.close(&kernel).await;
        }
    }

    /// Runs `request` in the session's sandbox session, opening one if it
    /// has none or if its old one was closed.
    pub async fn run(
        &self,
        session: SessionId,
        request: &RunRequest,
        events: &mpsc::Sender<RunEvent>,
        cancel: &CancellationToken,
    ) -> Result<KernelRun, SessionError> {
        let wanted = self.chosen(session);
        let known = self.by_session.lock().get(&session).cloned();
        match &known {
            Some(kernel) if kernel.backend() == wanted => {
                match self.run_in(kernel, request, events, cancel).await {
                    Err(
                        SessionError::NotFound(_)
                        | SessionError::Sandbox(SandboxError::NotFound(_)),
                    ) => {}
                    other => {
                        return other.map(|outcome| KernelRun {
                            outcome,
                            backend: wanted,
                            restarted: false,
                            moved_to: None,
                        });
                    }
                }
            }
            // Another backend was picked: its kernel starts afresh.
            Some(kernel) => self.close(kernel).await,
            None => {}
        }
        let kernel = self.open(session, wanted).await?;
        self.by_session.lock().insert(session, kernel.clone());
        let outcome = self.run_in(&kernel, request, events, cancel).await?;
        Ok(KernelRun {
            outcome,
            backend: wanted,
            restarted: known.is_some(),
            moved_to: known
                .filter(|kernel| kernel.backend() != wanted)
                .map(|_| wanted),
        })
    }

    async fn open(
        &self,
        session: SessionId,
        backend: &'static str,
    ) -> Result<Kernel, SessionError> {
        if backend == browser::BACKEND {
            let offer = self.browser.as_ref().ok_or_else(|| {
                SandboxError::InvalidInput("the browser sandbox is not on offer here".into())
            })?;
            let kernel = offer.tabs.sandbox(session).open_session().await?;
            return Ok(Kernel::Browser(Arc::from(kernel)));
        }
        let sessions = self.backends.get(Some(backend))?;
        let info = sessions.create_for_notebook(Language::Python).await?;
        // What was uploaded comes back into every new kernel.
        if let Some(kernel) = sessions.session(&info.session_id)
            && let Some(files) = kernel.files()
        {
            for (path, bytes) in self.uploads.all(session).await? {
                if let Err(err) = files.write(&path, bytes).await {
                    tracing::warn!(%err, path, "an upload could not be put back");
                }
            }
        }
        Ok(Kernel::Pooled {
            backend,
            id: info.session_id,
        })
    }

    /// The session's kernel with its files: the one it has, or a new one on
    /// the backend picked (with the uploads put back). `open` false: only an
    /// existing kernel, or one the uploads call for.
    async fn with_files(
        &self,
        session: SessionId,
        open: bool,
    ) -> Result<Option<Arc<dyn SandboxSession>>, FilesError> {
        let wanted = self.chosen(session);
        if wanted == browser::BACKEND {
            return Err(SandboxError::NotSupported(
                "the browser sandbox has no files: pick the local sandbox to upload and download files".into(),
            )
            .into());
        }
        let known = self.by_session.lock().get(&session).cloned();
        if let Some(Kernel::Pooled { backend, id }) = &known
            && *backend == wanted
            && let Some(live) = self.backends.get(Some(backend))?.session(id)
        {
            return Ok(Some(live));
        }
        if !open && self.uploads.all(session).await?.is_empty() {
            return Ok(None);
        }
        if let Some(old) = &known {
            self.close(old).await;
        }
        let kernel = self.open(session, wanted).await?;
        self.by_session.lock().insert(session, kernel.clone());
        match kernel {
            Kernel::Pooled { backend, id } => Ok(self.backends.get(Some(backend))?.session(&id)),
            Kernel::Browser(_) => Ok(None),
        }
    }

    /// The files in the session's home (none before it has a kernel).
    pub async fn list_files(&self, session: SessionId) -> Result<Vec<FileEntry>, FilesError> {
        // The page's own Python has no files to list.
        if self.chosen(session) == browser::BACKEND {
            return Ok(Vec::new());
        }
        let Some(kernel) = self.with_files(session, false).await? else {
            return Ok(Vec::new());
        };
        let files = files_of(&*kernel)?;
        let mut entries = files.list(HOME, MAX_LIST_DEPTH).await?;
        // The kernel's own dot-files (`.ipython`...) are not the person's.
        entries.retain(|e| !is_hidden(&e.path));
        Ok(entries)
    }

    pub async fn read_file(
        &self,
        session: SessionId,
        path: &str,
    ) -> Result<(FileEntry, Vec<u8>), FilesError> {
        let kernel = self
            .with_files(session, false)
            .await?
            .ok_or_else(|| SandboxError::NotFound(format!("no file {path}")))?;
        let files = files_of(&*kernel)?;
        let entry = files.stat(path).await?;
        Ok((entry, files.read(path).await?))
    }

    /// Puts an uploaded file into the session's home (starting its kernel
    /// if it has none) and keeps it for the kernels after this one. An
    /// existing file is replaced only when `overwrite`.
    pub async fn upload(
        &self,
        session: SessionId,
        path: &str,
        bytes: Vec<u8>,
        overwrite: bool,
    ) -> Result<FileEntry, FilesError> {
        let kernel = self
            .with_files(session, true)
            .await?
            .ok_or_else(|| SandboxError::Unavailable("the session has no kernel".into()))?;
        let files = files_of(&*kernel)?;
        match files.stat(path).await {
            Ok(entry) if !overwrite => return Err(FilesError::Exists(entry.path)),
            Ok(_) | Err(SandboxError::NotFound(_)) => {}
            Err(err) => return Err(err.into()),
        }
        let entry = files.write(path, bytes.clone()).await?;
        self.uploads.save(session, path, bytes).await?;
        Ok(entry)
    }

    pub async fn delete_file(&self, session: SessionId, path: &str) -> Result<(), FilesError> {
        if let Some(kernel) = self.with_files(session, false).await? {
            files_of(&*kernel)?.remove(path).await?;
        }
        self.uploads.remove(session, path).await?;
        Ok(())
    }

    /// What the model is told about the session's files: each file's path
    /// and size, and the first lines of small text files. `None` when the
    /// session has no kernel or no files.
    pub async fn files_note(&self, session: SessionId) -> Option<String> {
        let kernel = self.with_files(session, false).await.ok()??;
        let files = kernel.files()?;
        let entries = files.list(HOME, MAX_LIST_DEPTH).await.ok()?;
        let mut peeks = Vec::new();
        for entry in entries
            .iter()
            .filter(|e| e.kind == FileKind::File && !is_hidden(&e.path))
        {
            let head = if entry.size <= PEEK_MAX_BYTES && is_text(&entry.name) {
                files.read(&entry.path).await.ok().map(|b| first_lines(&b))
            } else {
                None
            };
            peeks.push((entry.path.clone(), entry.size, head));
        }
        super::prompt::files_note(&peeks)
    }

    /// What a run wrote that the person may want: images and tables
    /// written or rewritten in the home since `since_ms`, a few at most.
    pub async fn written_since(&self, session: SessionId, since_ms: u64) -> Vec<FileEntry> {
        let Ok(Some(kernel)) = self.with_files(session, false).await else {
            return Vec::new();
        };
        let Some(files) = kernel.files() else {
            return Vec::new();
        };
        let Ok(entries) = files.list(HOME, MAX_LIST_DEPTH).await else {
            return Vec::new();
        };
        entries
            .into_iter()
            .filter(|e| {
                e.kind == FileKind::File
                    && !is_hidden(&e.path)
                    && is_offered(&e.name)
                    && e.modified_ms.is_some_and(|m| m >= since_ms)
            })
            .take(MAX_OFFERS)
            .collect()
    }

    /// Forgets everything of a deleted session: its kernel and its uploads.
    pub async fn forget(&self, session: SessionId) {
        self.reset(session).await;
        self.chosen.lock().remove(&session);
        self.uploads.forget(session).await;
    }

    async fn run_in(
        &self,
        kernel: &Kernel,
        request: &RunRequest,
        events: &mpsc::Sender<RunEvent>,
        cancel: &CancellationToken,
    ) -> Result<RunOutcome, SessionError> {
        match kernel {
            Kernel::Pooled { backend, id } => {
                self.backends
                    .get(Some(backend))?
                    .run(id, request, Some(events), cancel)
                    .await
            }
            Kernel::Browser(session) => Ok(session.run(request, Some(events), cancel).await?),
        }
    }

    async fn close(&self, kernel: &Kernel) {
        match kernel {
            Kernel::Pooled { backend, id } => {
                if let Ok(sandboxes) = self.backends.get(Some(backend))
                    && let Err(err) = sandboxes.delete(id).await
                {
                    tracing::debug!(%err, "the old kernel was already gone");
                }
            }
            Kernel::Browser(session) => session.close().await,
        }
    }
}
