//! The kernels a person's notebooks hold on this node, and closing one:
//! what the page's "Kernels in use" list shows, so that a person whose
//! notebooks hold as many kernels as they may can free one themselves.

use std::sync::Arc;

use super::{NotebookError, Notebooks};
use crate::agent::KernelClose;
use crate::session::SessionChannel;
use runcell_protocol::{OwnerId, SessionId};
use runcell_sandbox::SandboxKind;

/// A kernel one of the owner's notebooks holds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HeldKernel {
    pub session: SessionId,
    /// The notebook's title (empty before its first question).
    pub title: String,
    pub backend: SandboxKind,
    pub running: bool,
    pub idle_ms: u64,
}

/// The owner's kernels and how many they may hold.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HeldKernels {
    pub kernels: Vec<HeldKernel>,
    pub cap: usize,
}

impl Notebooks {
    /// The kernels `owner`'s notebooks hold on this node, the running and
    /// most recently used first.
    pub async fn held_kernels(&self, owner: OwnerId) -> Result<HeldKernels, NotebookError> {
        let held = self.kernels().held_of(owner);
        let titles: std::collections::HashMap<SessionId, String> = if held.is_empty() {
            Default::default()
        } else {
            self.store()
                .sessions_of(owner)
                .await?
                .into_iter()
                .map(|record| (record.id, record.title))
                .collect()
        };
        Ok(HeldKernels {
            kernels: held
                .into_iter()
                .map(|kernel| HeldKernel {
                    title: titles.get(&kernel.session).cloned().unwrap_or_default(),
                    session: kernel.session,
                    backend: kernel.backend,
                    running: kernel.running,
                    idle_ms: kernel.idle_ms,
                })
                .collect(),
            cap: self.kernels().cap_for(owner),
        })
    }

    /// Closes the session's kernel unless a program runs in it.
    pub async fn close_kernel(&self, channel: &Arc<SessionChannel>) -> KernelClose {
        self.kernels().close_idle(channel.id()).await
    }
}
