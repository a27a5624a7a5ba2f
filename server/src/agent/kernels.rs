//! Each notebook session's sandbox session: its Python kernel, where
//! variables live from one turn to the next, on the backend the session's
//! page picked (the jail unless another was chosen): one of the shared
//! backends, or the Browser sandbox (the session's own page).

use std::collections::HashMap;
use std::sync::Arc;

use parking_lot::Mutex;
use tokio::sync::Mutex as AsyncMutex;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::profile::{self, Format, NoteFile, Profile, ProfileCache};
use crate::sandbox::backends::Backends;
use crate::sandbox::browser::{self, BrowserTabs};
use crate::sandbox::files::{FileEntry, FileKind, Files, HOME};
use crate::sandbox::sessions::SessionError;
use crate::sandbox::{
    Language, Limits, RunEvent, RunOutcome, RunRequest, Sandbox, SandboxError, SandboxSession,
};
use crate::session::uploads::Uploads;
use crate::session::{OwnerId, SessionId};

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
    /// What each session keeps (uploads, what its code wrote), beyond any
    /// one kernel.
    uploads: Uploads,
    /// The copies of those that share links offer, where the owner asked.
    shared: Uploads,
    /// Each notebook session's kernel.
    by_session: Mutex<HashMap<SessionId, Kernel>>,
    /// The backend each notebook session asked for last.
    chosen: Mutex<HashMap<SessionId, &'static str>>,
    /// Held while a session's files change: an upload or delete, the
    /// kernel being filled with the kept files, the files being kept after
    /// a run. So that none of these sees the others half done.
    file_locks: Mutex<HashMap<SessionId, Arc<AsyncMutex<()>>>>,
    /// The kept files each session's kernel was filled with when it
    /// started, and their times there: not written by a run, and not to be
    /// kept again, while they stay as they were.
    restored: Mutex<HashMap<SessionId, HashMap<String, Option<u64>>>>,
    /// Whose each notebook's kernel is, and how it is used: one owner's
    /// notebooks hold at most `max_per_owner` kernels of the shared
    /// backends (a kernel in the page costs the server nothing).
    holders: Mutex<Holders>,
    max_per_owner: usize,
    /// The files' profiles the model was told, while the files are as
    /// they were.
    profiles: ProfileCache,
    /// Sessions whose kernel was replaced by work of the server's own (a
    /// profile of the files) since their last run, and the backend it
    /// moved to if it moved: their next run says so, as if it had
    /// replaced it itself.
    reopened: Mutex<HashMap<SessionId, Option<&'static str>>>,
}

#[derive(Default)]
struct Holders {
    by_session: HashMap<SessionId, Holder>,
    /// Kernels being opened, per owner: counted with the open ones, so
    /// that runs started at once cannot all pass the cap.
    opening: HashMap<OwnerId, usize>,
}

struct Holder {
    owner: OwnerId,
    last_used: std::time::Instant,
    /// Runs under way in it.
    running: usize,
}

/// A run under way in a notebook's kernel; when it ends, the kernel was
/// last used now.
struct Running<'a> {
    holders: &'a Mutex<Holders>,
    session: SessionId,
}

impl Drop for Running<'_> {
    fn drop(&mut self) {
        if let Some(holder) = self.holders.lock().by_session.get_mut(&self.session) {
            holder.running = holder.running.saturating_sub(1);
            holder.last_used = std::time::Instant::now();
        }
    }
}

/// A kernel of `owner`'s being opened, counted until it is open or not.
struct Opening<'a> {
    holders: &'a Mutex<Holders>,
    owner: OwnerId,
}

impl Drop for Opening<'_> {
    fn drop(&mut self) {
        let mut holders = self.holders.lock();
        if let Some(pending) = holders.opening.get_mut(&self.owner) {
            *pending = pending.saturating_sub(1);
            if *pending == 0 {
                holders.opening.remove(&self.owner);
            }
        }
    }
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
/// The most files a listing gives, and that are kept after a run.
const MAX_FILES: usize = 1000;
/// Text files up to this size show the model their first lines.
const PEEK_MAX_BYTES: u64 = 256 * 1024;
/// How many lines of a text file the model sees.
const PEEK_LINES: usize = 5;
/// How many text files the model sees the first lines of.
const PEEK_FILES: usize = 10;

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

/// `path` as the sandbox shows it (`/home/user/…`), or as given when it
/// cannot be confined.
fn shown_path(path: &str) -> String {
    crate::sandbox::files::confine(path)
        .map(|relative| crate::sandbox::files::sandbox_path(&relative))
        .unwrap_or_else(|_| path.to_string())
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
            shared: uploads.sibling("shared-files"),
            uploads,
            by_session: Mutex::new(HashMap::new()),
            chosen: Mutex::new(HashMap::new()),
            file_locks: Mutex::new(HashMap::new()),
            restored: Mutex::new(HashMap::new()),
            holders: Mutex::new(Holders::default()),
            max_per_owner: usize::MAX,
            profiles: ProfileCache::default(),
            reopened: Mutex::new(HashMap::new()),
        }
    }

    /// One owner's notebooks hold at most `max` kernels of the shared
    /// backends at once.
    pub fn with_owner_cap(mut self, max: usize) -> Self {
        self.max_per_owner = max.max(1);
        self
    }

    /// Counts a run of `owner`'s in `session`'s kernel until it is dropped.
    fn running(&self, session: SessionId, owner: OwnerId) -> Running<'_> {
        let mut holders = self.holders.lock();
        let holder = holders.by_session.entry(session).or_insert(Holder {
            owner,
            last_used: std::time::Instant::now(),
            running: 0,
        });
        holder.running += 1;
        Running {
            holders: &self.holders,
            session,
        }
    }

    /// Whether a kernel is still open (the idle reaper may have closed it).
    fn is_live(&self, kernel: &Kernel) -> bool {
        match kernel {
            Kernel::Pooled { backend, id } => self
                .backends
                .get(Some(backend))
                .is_ok_and(|sessions| sessions.contains(id)),
            Kernel::Browser(_) => false,
        }
    }

    /// Makes room for one more kernel of `owner`'s (for `session`, on a
    /// shared backend): while the owner's other live kernels and those
    /// being opened reach the cap, the longest-idle one is closed (its
    /// notebook gets a fresh kernel, with its kept files, on its next run,
    /// and says so); if all of them are running, the run is refused.
    async fn make_room(
        &self,
        session: SessionId,
        owner: OwnerId,
    ) -> Result<Opening<'_>, SessionError> {
        let victims = {
            let kernels = self.by_session.lock();
            let mut holders = self.holders.lock();
            let mut mine: Vec<(std::time::Instant, bool, &Kernel)> = kernels
                .iter()
                .filter(|(id, kernel)| **id != session && self.is_live(kernel))
                .filter_map(|(id, kernel)| {
                    let holder = holders.by_session.get(id)?;
                    (holder.owner == owner).then_some((
                        holder.last_used,
                        holder.running > 0,
                        kernel,
                    ))
                })
                .collect();
            let opening = holders.opening.get(&owner).copied().unwrap_or(0);
            // Running ones first, then the idle ones, the longest idle last.
            mine.sort_by_key(|(used, running, _)| (!*running, std::cmp::Reverse(*used)));
            let mut victims = Vec::new();
            while mine.len() + opening >= self.max_per_owner {
                match mine.pop() {
                    Some((_, false, kernel)) => victims.push(kernel.clone()),
                    _ => return Err(SessionError::OwnerFull(self.max_per_owner)),
                }
            }
            *holders.opening.entry(owner).or_insert(0) += 1;
            victims
        };
        for kernel in &victims {
            tracing::info!("closing an owner's longest-idle kernel to make room");
            self.close(kernel).await;
        }
        Ok(Opening {
            holders: &self.holders,
            owner,
        })
    }

    /// Whether `entry` is a kept file as the kernel was filled with it.
    fn is_restored(&self, session: SessionId, entry: &FileEntry) -> bool {
        self.restored
            .lock()
            .get(&session)
            .and_then(|files| files.get(&entry.path))
            .is_some_and(|modified| *modified == entry.modified_ms)
    }

    fn file_lock(&self, session: SessionId) -> Arc<AsyncMutex<()>> {
        Arc::clone(self.file_locks.lock().entry(session).or_default())
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
        self.reopened.lock().remove(&session);
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
        owner: OwnerId,
        request: &RunRequest,
        events: &mpsc::Sender<RunEvent>,
        cancel: &CancellationToken,
    ) -> Result<KernelRun, SessionError> {
        let _running = self.running(session, owner);
        let wanted = self.chosen(session);
        let known = self.by_session.lock().get(&session).cloned();
        match &known {
            Some(kernel) if kernel.backend() == wanted => {
                match self.run_in(kernel, request, Some(events), cancel).await {
                    Err(
                        SessionError::NotFound(_)
                        | SessionError::Sandbox(SandboxError::NotFound(_)),
                    ) => {}
                    other => {
                        self.keep_files(session, kernel).await;
                        let reopened = self.reopened.lock().remove(&session);
                        return other.map(|outcome| KernelRun {
                            outcome,
                            backend: wanted,
                            restarted: reopened.is_some(),
                            moved_to: reopened.flatten(),
                        });
                    }
                }
            }
            // Another backend was picked: its kernel starts afresh.
            Some(kernel) => self.close(kernel).await,
            None => {}
        }
        let reopened = self.reopened.lock().remove(&session);
        let kernel = self.start(session, owner, wanted).await?;
        let outcome = self.run_in(&kernel, request, Some(events), cancel).await?;
        self.keep_files(session, &kernel).await;
        Ok(KernelRun {
            outcome,
            backend: wanted,
            restarted: known.is_some(),
            moved_to: known
                .filter(|kernel| kernel.backend() != wanted)
                .map(|_| wanted)
                .or(reopened.flatten()),
        })
    }

    /// Opens the session's kernel on `wanted`, making room for it among
    /// the owner's, and makes it the session's.
    async fn start(
        &self,
        session: SessionId,
        owner: OwnerId,
        wanted: &'static str,
    ) -> Result<Kernel, SessionError> {
        let room = if wanted == browser::BACKEND {
            None
        } else {
            Some(self.make_room(session, owner).await?)
        };
        let kernel = self.open(session, wanted).await?;
        self.by_session.lock().insert(session, kernel.clone());
        drop(room);
        Ok(kernel)
    }

    /// The session's live kernel on one of the shared backends, opened as
    /// its next run would open it when it has none; `None` on the Browser
    /// sandbox, which has no files.
    async fn attach(
        &self,
        session: SessionId,
        owner: OwnerId,
    ) -> Result<Option<Kernel>, SessionError> {
        let wanted = self.chosen(session);
        if wanted == browser::BACKEND {
            return Ok(None);
        }
        let known = self.by_session.lock().get(&session).cloned();
        if let Some(kernel) = &known {
            if kernel.backend() == wanted && self.is_live(kernel) {
                return Ok(Some(kernel.clone()));
            }
            self.close(kernel).await;
        }
        let kernel = self.start(session, owner, wanted).await?;
        if let Some(old) = known {
            // Its next run tells the person what this cost them.
            let moved_to = (old.backend() != wanted).then_some(wanted);
            self.reopened.lock().entry(session).or_insert(moved_to);
        }
        Ok(Some(kernel))
    }

    /// Runs `request` in the session's kernel (opened if it has none) for
    /// the server's own use: nothing of it reaches the notebook, and the
    /// files are not kept after it. `None` when it could not run.
    async fn run_quietly(
        &self,
        session: SessionId,
        owner: OwnerId,
        request: &RunRequest,
    ) -> Option<RunOutcome> {
        let _running = self.running(session, owner);
        let kernel = match self.attach(session, owner).await {
            Ok(kernel) => kernel?,
            Err(err) => {
                tracing::debug!(%err, "no kernel for a quiet run");
                return None;
            }
        };
        match self
            .run_in(&kernel, request, None, &CancellationToken::new())
            .await
        {
            Ok(outcome) => Some(outcome),
            Err(err) => {
                tracing::debug!(%err, "a quiet run failed");
                None
            }
        }
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
        // The session's kept files come back into every new kernel.
        if let Some(kernel) = sessions.session(&info.session_id)
            && let Some(files) = kernel.files()
        {
            let lock = self.file_lock(session);
            let _held = lock.lock().await;
            let mut restored = HashMap::new();
            for entry in self.uploads.list(session).await? {
                let put = match self.uploads.read(session, &entry.path).await {
                    Ok(bytes) => files.write(&entry.path, bytes).await,
                    Err(err) => Err(err),
                };
                match put {
                    Ok(written) => {
                        restored.insert(written.path, written.modified_ms);
                    }
                    Err(err) => {
                        tracing::warn!(%err, path = entry.path, "a kept file could not be put back");
                    }
                }
            }
            self.restored.lock().insert(session, restored);
        }
        Ok(Kernel::Pooled {
            backend,
            id: info.session_id,
        })
    }

    /// The session's live kernel on the backend it picked, with its files;
    /// `None` when it has none now (the kept files stand in for it: they are
    /// what the next kernel starts with). File calls never start a kernel.
    fn live_files(
        &self,
        session: SessionId,
    ) -> Result<Option<Arc<dyn SandboxSession>>, FilesError> {
        let wanted = self.chosen(session);
        if wanted == browser::BACKEND {
            return Err(SandboxError::NotSupported(
                "the browser sandbox has no files: pick the local sandbox to upload and download files".into(),
            )
            .into());
        }
        let known = self.by_session.lock().get(&session).cloned();
        match known {
            Some(Kernel::Pooled { backend, id }) if backend == wanted => {
                Ok(self.backends.get(Some(backend))?.session(&id))
            }
            _ => Ok(None),
        }
    }

    /// The files in the session's home: its kernel's, or the kept ones
    /// while it has none. Dot-files and what is not a plain file or
    /// directory are left out; at most [`MAX_FILES`].
    pub async fn list_files(&self, session: SessionId) -> Result<Vec<FileEntry>, FilesError> {
        // The page's own Python has no files to list.
        if self.chosen(session) == browser::BACKEND {
            return Ok(Vec::new());
        }
        let mut entries = match self.live_files(session)? {
            Some(kernel) => files_of(&*kernel)?.list(HOME, MAX_LIST_DEPTH).await?,
            None => self.uploads.list(session).await?,
        };
        // The kernel's own dot-files (`.ipython`...) are not the person's.
        entries.retain(|e| {
            !is_hidden(&e.path) && matches!(e.kind, FileKind::File | FileKind::Directory)
        });
        entries.truncate(MAX_FILES);
        Ok(entries)
    }

    pub async fn read_file(
        &self,
        session: SessionId,
        path: &str,
    ) -> Result<(FileEntry, Vec<u8>), FilesError> {
        if let Some(kernel) = self.live_files(session)? {
            let files = files_of(&*kernel)?;
            let entry = files.stat(path).await?;
            return Ok((entry, files.read(path).await?));
        }
        let entry = self.uploads.stat(session, path).await?;
        Ok((entry, self.uploads.read(session, path).await?))
    }

    /// Puts an uploaded file into the session: kept for every kernel it
    /// will have, and written into the one it has. An existing file is
    /// replaced only when `overwrite`.
    pub async fn upload(
        &self,
        session: SessionId,
        path: &str,
        bytes: Vec<u8>,
        overwrite: bool,
    ) -> Result<FileEntry, FilesError> {
        let live = self.live_files(session)?;
        let lock = self.file_lock(session);
        let _held = lock.lock().await;
        let shown = || shown_path(path);
        let Some(kernel) = live else {
            if !self
                .uploads
                .save(session, path, bytes, overwrite, None)
                .await?
            {
                return Err(FilesError::Exists(shown()));
            }
            return Ok(self.uploads.stat(session, path).await?);
        };
        let files = files_of(&*kernel)?;
        // Nothing goes into the kernel that could not be kept.
        self.uploads
            .check_room(session, path, bytes.len() as u64)
            .await?;
        let entry = if overwrite {
            files.write(path, bytes.clone()).await?
        } else {
            files
                .create(path, bytes.clone())
                .await?
                .ok_or_else(|| FilesError::Exists(shown()))?
        };
        if let Err(err) = self
            .uploads
            .save(session, path, bytes, true, entry.modified_ms)
            .await
        {
            // The kernel has it; the next run keeps it again.
            tracing::warn!(%err, "an upload is in the kernel but not kept yet");
        }
        Ok(entry)
    }

    /// Removes a file (or a directory) from the kernel's home and from
    /// what is kept, whichever has it.
    pub async fn delete_file(&self, session: SessionId, path: &str) -> Result<(), FilesError> {
        let live = self.live_files(session)?;
        let lock = self.file_lock(session);
        let _held = lock.lock().await;
        let shown = shown_path(path);
        let inside = format!("{shown}/");
        let kept = self
            .uploads
            .list(session)
            .await?
            .iter()
            .any(|e| e.path == shown || e.path.starts_with(&inside));
        if let Some(kernel) = live {
            match files_of(&*kernel)?.remove(path).await {
                Err(SandboxError::NotFound(_)) if kept => {}
                other => other?,
            }
        } else if !kept {
            return Err(SandboxError::NotFound(format!("'{shown}' does not exist")).into());
        }
        self.uploads.remove(session, path).await?;
        Ok(())
    }

    /// What the model is told about the session's files: a profile of
    /// each data file (columns, dtypes, rows; JSON's shape; text's lines),
    /// computed in the session's kernel, which is opened for it if it has
    /// none, as the question's program would; each other file's path and
    /// size. When no profile can be had (the kernel cannot run it, or it
    /// failed), the first lines of small text files instead. `None` when
    /// the session has no files.
    pub async fn files_note(&self, session: SessionId, owner: OwnerId) -> Option<String> {
        let mut entries = self.list_files(session).await.ok()?;
        let is_profiled = |entries: &[FileEntry]| {
            entries
                .iter()
                .any(|e| e.kind == FileKind::File && Format::of(&e.name).is_some())
        };
        // The profiles are the kernel's view of the files: with their times
        // there, a profile is kept while its kernel is.
        if is_profiled(&entries) && !matches!(self.live_files(session), Ok(Some(_))) {
            if self.attach(session, owner).await.ok().flatten().is_none() {
                return self.first_lines_note(session, &entries).await;
            }
            entries = self.list_files(session).await.ok()?;
        }
        let files: Vec<&FileEntry> = entries
            .iter()
            .filter(|e| e.kind == FileKind::File)
            .collect();
        if files.is_empty() {
            return None;
        }
        let mut known: HashMap<&str, Profile> = HashMap::new();
        let mut missing = Vec::new();
        for entry in files.iter().filter(|e| Format::of(&e.name).is_some()) {
            if known.len() + missing.len() == profile::MAX_PROFILED {
                break;
            }
            match self.profiles.get(session, entry) {
                Some(found) => {
                    known.insert(&entry.path, found);
                }
                None => missing.push(*entry),
            }
        }
        if !missing.is_empty() {
            match self.profile_files(session, owner, &missing).await {
                Some(found) => {
                    let present: Vec<&str> = files.iter().map(|e| e.path.as_str()).collect();
                    for (entry, found) in missing.iter().zip(found) {
                        if let Some(found) = found {
                            self.profiles.put(session, entry, found.clone(), &present);
                            known.insert(&entry.path, found);
                        }
                    }
                }
                // The profile could not run: today's note, for all of them.
                None => return self.first_lines_note(session, &entries).await,
            }
        }
        let shown: Vec<NoteFile> = files
            .iter()
            .map(|e| NoteFile {
                path: &e.path,
                size: e.size,
                profile: known.get(e.path.as_str()),
            })
            .collect();
        profile::note(&shown)
    }

    /// Profiles `files` in the session's kernel: one for each, in order
    /// (`None` for one it did not get to); `None` when the run failed.
    async fn profile_files(
        &self,
        session: SessionId,
        owner: OwnerId,
        files: &[&FileEntry],
    ) -> Option<Vec<Option<Profile>>> {
        let asked: Vec<(String, Format)> = files
            .iter()
            .filter_map(|e| Some((e.path.clone(), Format::of(&e.name)?)))
            .collect();
        let request = RunRequest {
            code: profile::program(&asked),
            language: Language::Python,
            limits: Limits {
                wall: profile::WALL,
                output_bytes: profile::MAX_OUTPUT_BYTES,
                ..Limits::default()
            },
        };
        let started = std::time::Instant::now();
        let outcome = self.run_quietly(session, owner, &request).await?;
        let ms = crate::clock::millis(started.elapsed());
        if let Some(error) = &outcome.error {
            tracing::info!(error = %error.name, ms, "the files could not be profiled");
            return None;
        }
        let profiles = profile::parse(&outcome.stdout, asked.len());
        if profiles.is_none() {
            tracing::info!(ms, "the files' profiler said nothing readable");
        }
        tracing::debug!(ms, files = asked.len(), "files profiled");
        profiles
    }

    /// Today's note without a kernel: each file's path and size, and the
    /// first lines of small text files.
    async fn first_lines_note(&self, session: SessionId, entries: &[FileEntry]) -> Option<String> {
        let live = self.live_files(session).ok()?;
        let mut peeks = Vec::new();
        let mut peeked = 0;
        for entry in entries.iter().filter(|e| e.kind == FileKind::File) {
            // Only the first few are read: the note has room for little.
            let head =
                if peeked < PEEK_FILES && entry.size <= PEEK_MAX_BYTES && is_text(&entry.name) {
                    peeked += 1;
                    let bytes = match &live {
                        Some(kernel) => match kernel.files() {
                            Some(files) => files.read(&entry.path).await.ok(),
                            None => None,
                        },
                        None => self.uploads.read(session, &entry.path).await.ok(),
                    };
                    bytes.map(|b| first_lines(&b))
                } else {
                    None
                };
            peeks.push((entry.path.clone(), entry.size, head));
        }
        let note = super::prompt::files_note(&peeks)?;
        Some(format!("{note}\n\n{}", profile::SHOW_THE_TABLE))
    }

    /// What a run wrote that the person may want: images and tables
    /// written or rewritten in the home since `since_ms`, a few at most.
    pub async fn written_since(&self, session: SessionId, since_ms: u64) -> Vec<FileEntry> {
        let Ok(Some(kernel)) = self.live_files(session) else {
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
                    && !self.is_restored(session, e)
            })
            .take(MAX_OFFERS)
            .collect()
    }

    /// After a run: what the home now holds is what the session keeps (new
    /// and changed files copied, removed ones forgotten), so that it
    /// outlives this kernel. Plain files that are not dot-files, the first
    /// [`MAX_FILES`]; what does not fit the quota stays in this kernel only.
    async fn keep_files(&self, session: SessionId, kernel: &Kernel) {
        let Kernel::Pooled { backend, id } = kernel else {
            return;
        };
        let Some(live) = self
            .backends
            .get(Some(backend))
            .ok()
            .and_then(|s| s.session(id))
        else {
            return;
        };
        let Some(files) = live.files() else {
            return;
        };
        let lock = self.file_lock(session);
        let _held = lock.lock().await;
        let Ok(entries) = files.list(HOME, MAX_LIST_DEPTH).await else {
            return;
        };
        let home: HashMap<String, FileEntry> = entries
            .into_iter()
            .filter(|e| e.kind == FileKind::File && !is_hidden(&e.path))
            .take(MAX_FILES)
            .map(|e| (e.path.clone(), e))
            .collect();
        let kept = match self.uploads.list(session).await {
            Ok(kept) => kept,
            Err(err) => {
                tracing::warn!(%err, "the session's kept files could not be read");
                return;
            }
        };
        let mut kept_at = HashMap::new();
        for entry in kept {
            if home.contains_key(&entry.path) {
                kept_at.insert(entry.path, (entry.size, entry.modified_ms));
            } else if let Err(err) = self.uploads.remove(session, &entry.path).await {
                tracing::warn!(%err, "a file the program removed stayed kept");
            }
        }
        for (path, entry) in home {
            let unchanged = self.is_restored(session, &entry)
                || kept_at.get(&path).is_some_and(|&(size, modified)| {
                    size == entry.size && modified >= entry.modified_ms
                });
            if unchanged {
                continue;
            }
            let saved = match files.read(&path).await {
                Ok(bytes) => {
                    self.uploads
                        .save(session, &path, bytes, true, entry.modified_ms)
                        .await
                }
                Err(err) => Err(err),
            };
            if let Err(err) = saved {
                tracing::debug!(%err, path, "a file the program wrote is not kept");
            }
        }
    }

    /// What the session's share link offers from now on: a copy of its
    /// files as they are (with what the live kernel holds kept first), or
    /// nothing.
    pub async fn share_files(&self, session: SessionId, include: bool) -> Result<(), FilesError> {
        if !include {
            self.shared.forget(session).await;
            return Ok(());
        }
        let known = self.by_session.lock().get(&session).cloned();
        if let Some(kernel) = known {
            self.keep_files(session, &kernel).await;
        }
        let lock = self.file_lock(session);
        let _held = lock.lock().await;
        self.uploads.copy_to(session, &self.shared, session).await?;
        Ok(())
    }

    /// The files a share link of the session offers.
    pub async fn shared_files(&self, session: SessionId) -> Vec<FileEntry> {
        self.shared.list(session).await.unwrap_or_else(|err| {
            tracing::warn!(%err, "a share's files could not be listed");
            Vec::new()
        })
    }

    pub async fn read_shared_file(
        &self,
        session: SessionId,
        path: &str,
    ) -> Result<(FileEntry, Vec<u8>), FilesError> {
        let entry = self.shared.stat(session, path).await?;
        Ok((entry, self.shared.read(session, path).await?))
    }

    /// A fork starts with the files the link it was forked from offers.
    pub async fn fork_files(&self, from: SessionId, to: SessionId) -> Result<(), FilesError> {
        let lock = self.file_lock(to);
        let _held = lock.lock().await;
        self.shared.copy_to(from, &self.uploads, to).await?;
        Ok(())
    }

    /// Forgets everything of a deleted session: its kernel and its uploads.
    pub async fn forget(&self, session: SessionId) {
        self.reset(session).await;
        self.chosen.lock().remove(&session);
        self.restored.lock().remove(&session);
        self.reopened.lock().remove(&session);
        self.profiles.forget(session);
        self.holders.lock().by_session.remove(&session);
        let lock = self.file_lock(session);
        let held = lock.lock().await;
        self.uploads.forget(session).await;
        self.shared.forget(session).await;
        drop(held);
        self.file_locks.lock().remove(&session);
    }

    async fn run_in(
        &self,
        kernel: &Kernel,
        request: &RunRequest,
        events: Option<&mpsc::Sender<RunEvent>>,
        cancel: &CancellationToken,
    ) -> Result<RunOutcome, SessionError> {
        match kernel {
            Kernel::Pooled { backend, id } => {
                self.backends
                    .get(Some(backend))?
                    .run(id, request, events, cancel)
                    .await
            }
            Kernel::Browser(session) => Ok(session.run(request, events, cancel).await?),
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
