//! Each notebook session's sandbox session: its Python kernel, where
//! variables live from one turn to the next, on the backend the session's
//! page picked (the jail unless another was chosen).

use std::collections::HashMap;

use parking_lot::Mutex;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::sandbox::backends::Backends;
use crate::sandbox::sessions::SessionError;
use crate::sandbox::{Language, RunEvent, RunOutcome, RunRequest, SandboxError};
use crate::session::SessionId;

/// Which sandbox session each notebook session runs in.
pub struct Kernels {
    backends: Backends,
    /// Each notebook session's kernel: its backend and sandbox session id.
    by_session: Mutex<HashMap<SessionId, (&'static str, String)>>,
    /// The backend each notebook session asked for last.
    chosen: Mutex<HashMap<SessionId, &'static str>>,
}

/// How a run went from the kernel's point of view.
pub struct KernelRun {
    pub outcome: RunOutcome,
    /// A new sandbox session was opened for this run although the notebook
    /// had one before (it was closed when idle): earlier variables are gone.
    pub restarted: bool,
    /// The run moved to this backend (another was picked): the earlier
    /// variables stay behind on the old one.
    pub moved_to: Option<&'static str>,
}

impl Kernels {
    pub fn new(backends: Backends) -> Self {
        Self {
            backends,
            by_session: Mutex::new(HashMap::new()),
            chosen: Mutex::new(HashMap::new()),
        }
    }

    /// The backends on offer, the default first.
    pub fn backends(&self) -> Vec<&'static str> {
        self.backends.names()
    }

    /// Runs the session's next programs on `backend` (a kernel there starts
    /// on the next run; the old one's variables are left behind).
    pub fn choose(&self, session: SessionId, backend: &str) -> Result<(), SandboxError> {
        let name = self.backends.get(Some(backend))?.backend();
        self.chosen.lock().insert(session, name);
        Ok(())
    }

    fn chosen(&self, session: SessionId) -> &'static str {
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
        if let Some((backend, id)) = known {
            self.close(backend, &id).await;
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
        let sandboxes = self.backends.get(Some(wanted))?;
        let known = self.by_session.lock().get(&session).cloned();
        match &known {
            Some((backend, id)) if *backend == wanted => {
                match sandboxes.run(id, request, Some(events), cancel).await {
                    Err(SessionError::NotFound(_)) => {}
                    other => {
                        return other.map(|outcome| KernelRun {
                            outcome,
                            restarted: false,
                            moved_to: None,
                        });
                    }
                }
            }
            // Another backend was picked: its kernel starts afresh.
            Some((backend, id)) => self.close(backend, id).await,
            None => {}
        }
        let info = sandboxes.create_for_notebook(Language::Python).await?;
        self.by_session
            .lock()
            .insert(session, (wanted, info.session_id.clone()));
        let outcome = sandboxes
            .run(&info.session_id, request, Some(events), cancel)
            .await?;
        Ok(KernelRun {
            outcome,
            restarted: known.is_some(),
            moved_to: known
                .filter(|(backend, _)| *backend != wanted)
                .map(|_| wanted),
        })
    }

    async fn close(&self, backend: &str, id: &str) {
        if let Ok(sandboxes) = self.backends.get(Some(backend))
            && let Err(err) = sandboxes.delete(id).await
        {
            tracing::debug!(%err, "the old kernel was already gone");
        }
    }
}
