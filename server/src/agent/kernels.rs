//! Each notebook session's sandbox session: its Python kernel, where
//! variables live from one turn to the next.

use std::collections::HashMap;
use std::sync::Arc;

use parking_lot::Mutex;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::sandbox::sessions::{SessionError, Sessions};
use crate::sandbox::{Language, RunEvent, RunOutcome, RunRequest};
use crate::session::SessionId;

/// Which sandbox session each notebook session runs in.
pub struct Kernels {
    sandboxes: Arc<Sessions>,
    by_session: Mutex<HashMap<SessionId, String>>,
}

/// How a run went from the kernel's point of view.
pub struct KernelRun {
    pub outcome: RunOutcome,
    /// A new sandbox session was opened for this run although the notebook
    /// had one before (it was closed when idle): earlier variables are gone.
    pub restarted: bool,
}

impl Kernels {
    pub fn new(sandboxes: Arc<Sessions>) -> Self {
        Self {
            sandboxes,
            by_session: Mutex::new(HashMap::new()),
        }
    }

    /// Closes the session's sandbox session, if it has one: the next run
    /// starts a fresh kernel (and is not reported as a restart).
    pub async fn reset(&self, session: SessionId) {
        let known = self.by_session.lock().remove(&session);
        if let Some(id) = known
            && let Err(err) = self.sandboxes.delete(&id).await
        {
            tracing::debug!(%err, "the old kernel was already gone");
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
        let known = self.by_session.lock().get(&session).cloned();
        if let Some(id) = &known {
            match self.sandboxes.run(id, request, Some(events), cancel).await {
                Err(SessionError::NotFound(_)) => {}
                other => {
                    return other.map(|outcome| KernelRun {
                        outcome,
                        restarted: false,
                    });
                }
            }
        }
        let info = self.sandboxes.create_for_notebook(Language::Python).await?;
        self.by_session
            .lock()
            .insert(session, info.session_id.clone());
        let outcome = self
            .sandboxes
            .run(&info.session_id, request, Some(events), cancel)
            .await?;
        Ok(KernelRun {
            outcome,
            restarted: known.is_some(),
        })
    }
}
