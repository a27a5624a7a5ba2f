//! Each notebook session's sandbox session: its Python kernel, where
//! variables live from one turn to the next, on the backend the session's
//! page picked (the jail unless another was chosen): one of the shared
//! backends, or the Browser sandbox (the session's own page).

mod files;
mod notes;
mod owners;
mod packages;

use std::collections::HashMap;
use std::sync::Arc;

use parking_lot::Mutex;
use tokio::sync::Mutex as AsyncMutex;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

pub use files::FilesError;
use owners::HeldKernels;
pub use owners::{HeldKernelInfo, KernelClose};

use super::profile::ProfileCache;
use crate::session::clients::Clients;
use crate::session::uploads::Uploads;
use runcell_protocol::{OwnerId, SessionId};
use runcell_sandbox::backends::Backends;
use runcell_sandbox::browser::BrowserTabs;
use runcell_sandbox::files::FileEntry;
use runcell_sandbox::sessions::SandboxSessionError;
use runcell_sandbox::slots::Claim;
use runcell_sandbox::{
    Language, RunEvent, RunOutcome, RunRequest, Sandbox, SandboxError, SandboxKind, SandboxSession,
};

/// The Browser sandbox, when the site carries Pyodide.
pub struct BrowserOffer {
    pub tabs: Arc<BrowserTabs>,
    /// What its vendored packages let a program import.
    pub imports: Vec<String>,
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
    /// What is held for each notebook session's kernel, from its first
    /// run or pick until the session is deleted.
    sessions: Mutex<HashMap<SessionId, SessionKernel>>,
    /// Held while a session's files change: an upload or delete, the
    /// kernel being filled with the kept files, the files being kept after
    /// a run. So that none of these sees the others half done.
    file_locks: Mutex<HashMap<SessionId, Arc<AsyncMutex<()>>>>,
    /// Whose each notebook's kernel is, and how it is used: one owner's
    /// notebooks hold at most `max_per_owner` kernels of the shared
    /// backends (a kernel in the page costs the server nothing).
    holders: Mutex<HeldKernels>,
    max_per_owner: usize,
    /// A person's own cap, where they have one.
    quotas: Option<Arc<dyn crate::session::quota::OwnerQuotas>>,
    /// Where each owner was seen from, and whether signed in: anonymous
    /// owners' kernels take from a share of the slots. `None`: every owner
    /// counts as known (no pages in front).
    clients: Option<Arc<Clients>>,
    /// The files' profiles the model was told, while the files are as
    /// they were.
    profiles: ProfileCache,
}

/// What is held for one notebook session's kernel.
#[derive(Default)]
struct SessionKernel {
    /// Its kernel, once it has had one (the idle reaper may have closed it
    /// since: its next run then says the variables are gone).
    kernel: Option<NotebookKernel>,
    /// The backend it asked for last; `None` for the default.
    chosen: Option<SandboxKind>,
    /// The kept files its kernel was filled with when it started, and their
    /// times there: not written by a run, and not to be kept again, while
    /// they stay as they were.
    restored: HashMap<String, Option<u64>>,
    /// Set when its kernel was replaced by work of the server's own (a
    /// profile of the files) since its last run, with the backend it moved
    /// to if it moved: its next run says so, as if it had replaced it
    /// itself.
    reopened: Option<Option<SandboxKind>>,
}

/// A notebook session's kernel.
#[derive(Clone)]
enum NotebookKernel {
    /// A session of one of the shared backends, by id.
    Pooled { backend: SandboxKind, id: String },
    /// A kernel in the session's page.
    Browser(Arc<dyn SandboxSession>),
}

impl NotebookKernel {
    fn backend(&self) -> SandboxKind {
        match self {
            Self::Pooled { backend, .. } => *backend,
            Self::Browser(_) => SandboxKind::Browser,
        }
    }
}

/// How a run went from the kernel's point of view.
pub struct KernelRun {
    pub outcome: RunOutcome,
    /// The backend it ran on.
    pub backend: SandboxKind,
    /// A new sandbox session was opened for this run although the notebook
    /// had one before (it was closed when idle, or the page's Python
    /// started afresh): earlier variables are gone.
    pub restarted: bool,
    /// The run moved to this backend (another was picked): the earlier
    /// variables stay behind on the old one.
    pub moved_to: Option<SandboxKind>,
}

impl Kernels {
    pub fn new(backends: Backends, browser: Option<BrowserOffer>, uploads: Uploads) -> Self {
        Self {
            backends,
            browser,
            shared: uploads.sibling("shared-files"),
            uploads,
            sessions: Mutex::new(HashMap::new()),
            file_locks: Mutex::new(HashMap::new()),
            holders: Mutex::new(HeldKernels::default()),
            max_per_owner: usize::MAX,
            quotas: None,
            clients: None,
            profiles: ProfileCache::default(),
        }
    }

    /// One owner's notebooks hold at most `max` kernels of the shared
    /// backends at once.
    pub fn with_owner_cap(mut self, max: usize) -> Self {
        self.max_per_owner = max.max(1);
        self
    }

    /// A person's notebooks hold at most their own cap of kernels, where
    /// `quotas` gives one.
    pub fn with_quotas(mut self, quotas: Arc<dyn crate::session::quota::OwnerQuotas>) -> Self {
        self.quotas = Some(quotas);
        self
    }

    /// Bytes `session` keeps (its uploads and what its code wrote).
    pub async fn kept_bytes(&self, session: SessionId) -> Result<u64, SandboxError> {
        self.uploads.used(session).await
    }

    /// The size of the file `path` the session keeps, 0 if none.
    pub async fn kept_file_bytes(&self, session: SessionId, path: &str) -> u64 {
        self.uploads
            .stat(session, path)
            .await
            .map_or(0, |entry| entry.size)
    }

    /// The most kernels `owner`'s notebooks may hold at once.
    fn cap_of(&self, owner: OwnerId) -> usize {
        self.quotas
            .as_ref()
            .and_then(|quotas| quotas.kernel_cap(owner))
            .unwrap_or(self.max_per_owner)
            .max(1)
    }

    /// Counts each owner's kernels as `clients` says they are: anonymous
    /// ones from their address, or known.
    pub fn with_clients(mut self, clients: Arc<Clients>) -> Self {
        self.clients = Some(clients);
        self
    }

    /// Whose a kernel of `owner`'s is, to the sandbox slots.
    pub(crate) fn claim_of(&self, owner: OwnerId) -> Claim {
        self.clients
            .as_ref()
            .map_or(Claim::Known, |clients| clients.claim_of(owner))
    }

    /// Whether a kernel is still open (the idle reaper may have closed it).
    fn is_live(&self, kernel: &NotebookKernel) -> bool {
        match kernel {
            NotebookKernel::Pooled { backend, id } => self
                .backends
                .get(Some(*backend))
                .is_ok_and(|sessions| sessions.contains(id)),
            NotebookKernel::Browser(_) => false,
        }
    }

    /// Whether `entry` is a kept file as the kernel was filled with it.
    fn is_restored(&self, session: SessionId, entry: &FileEntry) -> bool {
        self.sessions
            .lock()
            .get(&session)
            .and_then(|s| s.restored.get(&entry.path))
            .is_some_and(|modified| *modified == entry.modified_ms)
    }

    /// The session's kernel, if it has had one.
    fn kernel_of(&self, session: SessionId) -> Option<NotebookKernel> {
        self.sessions
            .lock()
            .get(&session)
            .and_then(|s| s.kernel.clone())
    }

    /// Takes what says the session's kernel was replaced by the server's
    /// own work since its last run.
    fn take_reopened(&self, session: SessionId) -> Option<Option<SandboxKind>> {
        self.sessions
            .lock()
            .get_mut(&session)
            .and_then(|s| s.reopened.take())
    }

    fn file_lock(&self, session: SessionId) -> Arc<AsyncMutex<()>> {
        Arc::clone(self.file_locks.lock().entry(session).or_default())
    }

    /// The backends a notebook may pick, the default first.
    pub fn backends(&self) -> Vec<SandboxKind> {
        let mut kinds = self.backends.kinds();
        if self.browser.is_some() {
            kinds.push(SandboxKind::Browser);
        }
        kinds
    }

    /// Runs the session's next programs on `backend` (a kernel there starts
    /// on the next run; the old one's variables are left behind).
    pub fn choose(&self, session: SessionId, backend: SandboxKind) -> Result<(), SandboxError> {
        if backend == SandboxKind::Browser {
            if self.browser.is_none() {
                return Err(SandboxError::InvalidInput(
                    "the browser sandbox is not on offer here: this server's site was built without Pyodide (run scripts/build.sh)".into(),
                ));
            }
        } else {
            self.backends.get(Some(backend))?;
        }
        self.sessions.lock().entry(session).or_default().chosen = Some(backend);
        Ok(())
    }

    /// What the model must know about where the session's programs run,
    /// when it differs from the jail's full Python.
    pub fn environment_note(&self, session: SessionId) -> Option<String> {
        let offer = self.browser.as_ref()?;
        (self.chosen(session) == SandboxKind::Browser)
            .then(|| super::prompt::browser_note(&offer.imports))
    }

    /// What a program may import in the Browser sandbox, when that is where
    /// the session's programs run; `None` elsewhere.
    pub fn browser_imports(&self, session: SessionId) -> Option<Vec<String>> {
        let offer = self.browser.as_ref()?;
        (self.chosen(session) == SandboxKind::Browser).then(|| offer.imports.clone())
    }

    /// The backend the session's next program runs on.
    pub fn chosen(&self, session: SessionId) -> SandboxKind {
        self.sessions
            .lock()
            .get(&session)
            .and_then(|s| s.chosen)
            .unwrap_or_else(|| self.backends.default_backend().backend())
    }

    /// Closes the session's sandbox session, if it has one: the next run
    /// starts a fresh kernel (and is not reported as a restart).
    pub async fn reset(&self, session: SessionId) {
        let known = self.sessions.lock().get_mut(&session).and_then(|s| {
            s.reopened = None;
            s.kernel.take()
        });
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
    ) -> Result<KernelRun, SandboxSessionError> {
        let _running = self.running(session, owner);
        let wanted = self.chosen(session);
        let known = self.kernel_of(session);
        match &known {
            Some(kernel) if kernel.backend() == wanted => {
                match self.run_in(kernel, request, Some(events), cancel).await {
                    Err(
                        SandboxSessionError::NotFound(_)
                        | SandboxSessionError::Sandbox(SandboxError::NotFound(_)),
                    ) => {}
                    other => {
                        self.keep_files(session, kernel).await;
                        let reopened = self.take_reopened(session);
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
        let reopened = self.take_reopened(session);
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

    /// Makes sure the session has a kernel for its next run, opening one
    /// (and making room for it) when it has none: a run refused for want
    /// of room is refused here, before any cell shows it as running.
    pub(crate) async fn ready(
        &self,
        session: SessionId,
        owner: OwnerId,
    ) -> Result<(), SandboxSessionError> {
        let _running = self.running(session, owner);
        self.attach(session, owner).await.map(|_| ())
    }

    /// Opens the session's kernel on `wanted`, making room for it among
    /// the owner's, and makes it the session's.
    async fn start(
        &self,
        session: SessionId,
        owner: OwnerId,
        wanted: SandboxKind,
    ) -> Result<NotebookKernel, SandboxSessionError> {
        let room = if wanted == SandboxKind::Browser {
            None
        } else {
            Some(self.make_room(session, owner).await?)
        };
        let kernel = self.open(session, owner, wanted).await?;
        self.sessions.lock().entry(session).or_default().kernel = Some(kernel.clone());
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
    ) -> Result<Option<NotebookKernel>, SandboxSessionError> {
        let wanted = self.chosen(session);
        if wanted == SandboxKind::Browser {
            return Ok(None);
        }
        let known = self.kernel_of(session);
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
            let mut sessions = self.sessions.lock();
            let entry = sessions.entry(session).or_default();
            entry.reopened.get_or_insert(moved_to);
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
        owner: OwnerId,
        backend: SandboxKind,
    ) -> Result<NotebookKernel, SandboxSessionError> {
        if backend == SandboxKind::Browser {
            let offer = self.browser.as_ref().ok_or_else(|| {
                SandboxError::InvalidInput("the browser sandbox is not on offer here".into())
            })?;
            let kernel = offer.tabs.sandbox(session).open_session().await?;
            return Ok(NotebookKernel::Browser(Arc::from(kernel)));
        }
        let sessions = self.backends.get(Some(backend))?;
        // A cap of the slots (the address's, the anonymous pages', all of
        // them) gives way to the owner's own longest-idle kernels first: a
        // person's notebooks take each other's room before they are refused.
        let info = loop {
            match sessions
                .create_for_notebook(Language::Python, self.claim_of(owner))
                .await
            {
                Err(
                    refused @ (SandboxSessionError::ClientFull(_)
                    | SandboxSessionError::AnonymousFull(_)
                    | SandboxSessionError::TooMany(_)),
                ) => match self.longest_idle_of(owner, session) {
                    Some(idle) => {
                        tracing::info!(%refused, "closing an owner's longest-idle kernel to make room");
                        self.close(&idle).await;
                    }
                    None => return Err(refused),
                },
                other => break other?,
            }
        };
        // The session's kept files come back into every new kernel.
        if let Some(kernel) = sessions.session(&info.session_id)
            && let Some(files) = kernel.files()
        {
            let lock = self.file_lock(session);
            let _held = lock.lock().await;
            let mut restored = HashMap::new();
            for entry in self.uploads.list(session).await? {
                let put = match self.uploads.read(session, &entry.path).await {
                    Ok(bytes) => files.write(&entry.path, bytes.into()).await,
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
            let installs = restored.contains_key(packages::MANIFEST);
            self.sessions.lock().entry(session).or_default().restored = restored;
            if installs {
                packages::reinstall(&*kernel).await;
            }
        }
        Ok(NotebookKernel::Pooled {
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
        if wanted == SandboxKind::Browser {
            return Err(SandboxError::NotSupported(
                "the browser sandbox has no files: pick the local sandbox to upload and download files".into(),
            )
            .into());
        }
        let known = self.kernel_of(session);
        match known {
            Some(NotebookKernel::Pooled { backend, id }) if backend == wanted => {
                Ok(self.backends.get(Some(backend))?.session(&id))
            }
            _ => Ok(None),
        }
    }

    /// Forgets everything of a deleted session: its kernel and its uploads.
    pub async fn forget(&self, session: SessionId) {
        self.reset(session).await;
        self.sessions.lock().remove(&session);
        self.profiles.forget(session);
        self.forget_holder(session);
        let lock = self.file_lock(session);
        let held = lock.lock().await;
        self.uploads.forget(session).await;
        self.shared.forget(session).await;
        drop(held);
        self.file_locks.lock().remove(&session);
    }

    async fn run_in(
        &self,
        kernel: &NotebookKernel,
        request: &RunRequest,
        events: Option<&mpsc::Sender<RunEvent>>,
        cancel: &CancellationToken,
    ) -> Result<RunOutcome, SandboxSessionError> {
        match kernel {
            NotebookKernel::Pooled { backend, id } => {
                self.backends
                    .get(Some(*backend))?
                    .run(id, request, events, cancel)
                    .await
            }
            NotebookKernel::Browser(session) => Ok(session.run(request, events, cancel).await?),
        }
    }

    async fn close(&self, kernel: &NotebookKernel) {
        match kernel {
            NotebookKernel::Pooled { backend, id } => {
                if let Ok(sandboxes) = self.backends.get(Some(*backend))
                    && let Err(err) = sandboxes.delete(id).await
                {
                    tracing::debug!(%err, "the old kernel was already gone");
                }
            }
            NotebookKernel::Browser(session) => session.close().await,
        }
    }
}
