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
use crate::sandbox::sessions::SessionError;
use crate::sandbox::{
    Language, RunEvent, RunOutcome, RunRequest, Sandbox, SandboxError, SandboxSession,
};
use crate::session::SessionId;

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
    pub fn new(backends: Backends, browser: Option<BrowserOffer>) -> Self {
        Self {
            backends,
            browser,
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
        let info = self
            .backends
            .get(Some(backend))?
            .create_for_notebook(Language::Python)
            .await?;
        Ok(Kernel::Pooled {
            backend,
            id: info.session_id,
        })
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
