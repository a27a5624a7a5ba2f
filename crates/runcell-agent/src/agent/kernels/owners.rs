//! How many kernels of the shared backends one owner's notebooks hold: a
//! cap, with the longest-idle kernel closed to make room.

use std::collections::HashMap;

use parking_lot::Mutex;

use super::{Kernels, NotebookKernel};
use runcell_protocol::{OwnerId, SessionId};
use runcell_sandbox::SandboxKind;
use runcell_sandbox::sessions::SandboxSessionError;

#[derive(Default)]
pub(super) struct HeldKernels {
    by_session: HashMap<SessionId, HeldKernel>,
    /// Kernels being opened, per owner: counted with the open ones, so
    /// that runs started at once cannot all pass the cap.
    opening: HashMap<OwnerId, usize>,
}

struct HeldKernel {
    owner: OwnerId,
    last_used: std::time::Instant,
    /// Runs under way in it.
    running: usize,
}

/// A run under way in a notebook's kernel; when it ends, the kernel was
/// last used now.
pub(super) struct Running<'a> {
    holders: &'a Mutex<HeldKernels>,
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
pub(super) struct Opening<'a> {
    holders: &'a Mutex<HeldKernels>,
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

/// A kernel one of an owner's notebooks holds on a shared backend.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HeldKernelInfo {
    pub session: SessionId,
    pub backend: SandboxKind,
    /// A run is under way in it.
    pub running: bool,
    /// Since its last run ended (0 while one runs).
    pub idle_ms: u64,
}

/// What closing a notebook's kernel did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KernelClose {
    Closed,
    /// It had no live kernel.
    NoKernel,
    /// A program is running in it: stop it first.
    Running,
}

impl Kernels {
    /// The live kernels `owner`'s notebooks hold on the shared backends,
    /// the most recently used first.
    pub fn held_of(&self, owner: OwnerId) -> Vec<HeldKernelInfo> {
        let sessions = self.sessions.lock();
        let holders = self.holders.lock();
        let mut held: Vec<HeldKernelInfo> = sessions
            .iter()
            .filter_map(|(id, s)| Some((id, holders.by_session.get(id)?, s.kernel.as_ref()?)))
            .filter(|(_, holder, kernel)| holder.owner == owner && self.is_live(kernel))
            .map(|(id, holder, kernel)| HeldKernelInfo {
                session: *id,
                backend: kernel.backend(),
                running: holder.running > 0,
                idle_ms: if holder.running > 0 {
                    0
                } else {
                    runcell_core::clock::millis(holder.last_used.elapsed())
                },
            })
            .collect();
        held.sort_by_key(|k| (!k.running, k.idle_ms));
        held
    }

    /// The most kernels `owner`'s notebooks may hold at once.
    pub fn cap_for(&self, owner: OwnerId) -> usize {
        self.cap_of(owner)
    }

    /// Closes the session's kernel if it is live and no run is under way in
    /// it (its variables are gone; its kept files come back into the next
    /// one, whose run says so).
    pub async fn close_idle(&self, session: SessionId) -> KernelClose {
        let running = self
            .holders
            .lock()
            .by_session
            .get(&session)
            .is_some_and(|holder| holder.running > 0);
        if running {
            return KernelClose::Running;
        }
        match self.kernel_of(session) {
            Some(kernel) if self.is_live(&kernel) => {
                self.close(&kernel).await;
                KernelClose::Closed
            }
            _ => KernelClose::NoKernel,
        }
    }

    /// Forgets whose the session's kernel was (the session was deleted).
    pub(super) fn forget_holder(&self, session: SessionId) {
        self.holders.lock().by_session.remove(&session);
    }

    /// The live kernels `owner`'s notebooks hold here, with those being
    /// opened.
    pub fn held_by(&self, owner: OwnerId) -> usize {
        let sessions = self.sessions.lock();
        let holders = self.holders.lock();
        let live = sessions
            .iter()
            .filter_map(|(id, s)| Some((id, s.kernel.as_ref()?)))
            .filter(|(id, kernel)| {
                holders
                    .by_session
                    .get(id)
                    .is_some_and(|holder| holder.owner == owner)
                    && self.is_live(kernel)
            })
            .count();
        live + holders.opening.get(&owner).copied().unwrap_or(0)
    }

    /// `owner`'s live kernel that has been idle longest, not `session`'s
    /// and not running.
    pub(super) fn longest_idle_of(
        &self,
        owner: OwnerId,
        session: SessionId,
    ) -> Option<NotebookKernel> {
        let sessions = self.sessions.lock();
        let holders = self.holders.lock();
        sessions
            .iter()
            .filter(|(id, _)| **id != session)
            .filter_map(|(id, s)| Some((holders.by_session.get(id)?, s.kernel.as_ref()?)))
            .filter(|(holder, kernel)| {
                holder.owner == owner && holder.running == 0 && self.is_live(kernel)
            })
            .min_by_key(|(holder, _)| holder.last_used)
            .map(|(_, kernel)| kernel.clone())
    }

    /// Counts a run of `owner`'s in `session`'s kernel until it is dropped.
    pub(super) fn running(&self, session: SessionId, owner: OwnerId) -> Running<'_> {
        let mut holders = self.holders.lock();
        let holder = holders.by_session.entry(session).or_insert(HeldKernel {
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

    /// Makes room for one more kernel of `owner`'s (for `session`, on a
    /// shared backend): while the owner's other live kernels and those
    /// being opened reach the cap, the longest-idle one is closed (its
    /// notebook gets a fresh kernel, with its kept files, on its next run,
    /// and says so); if all of them are running, the run is refused.
    pub(super) async fn make_room(
        &self,
        session: SessionId,
        owner: OwnerId,
    ) -> Result<Opening<'_>, SandboxSessionError> {
        let cap = self.cap_of(owner);
        let victims = {
            let sessions = self.sessions.lock();
            let mut holders = self.holders.lock();
            let mut mine: Vec<(std::time::Instant, bool, &NotebookKernel)> = sessions
                .iter()
                .filter_map(|(id, s)| Some((id, s.kernel.as_ref()?)))
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
            while mine.len() + opening >= cap {
                match mine.pop() {
                    Some((_, false, kernel)) => victims.push(kernel.clone()),
                    _ => return Err(SandboxSessionError::OwnerFull(cap)),
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
}
