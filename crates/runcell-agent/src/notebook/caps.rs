//! A person's caps that are counted by asking the store (their notebooks,
//! the bytes their files keep): the count is awaited, and so is what it
//! admits, so two requests at once would both see room for one. Each owner
//! has a lock here, held from the count until what it admitted is done:
//! one step per owner on this node. (Nodes of a cluster each hold their
//! own: one person's requests at once to two nodes may still pass a cap
//! by one each.)

use std::collections::HashMap;
use std::sync::Arc;

use parking_lot::Mutex;
use tokio::sync::{Mutex as AsyncMutex, OwnedMutexGuard};

use super::{NotebookError, Notebooks};
use runcell_protocol::OwnerId;

/// One lock per owner with a request under way; forgotten when nobody
/// holds or waits for it.
#[derive(Default)]
pub(super) struct OwnerLocks {
    locks: Mutex<HashMap<OwnerId, Arc<AsyncMutex<()>>>>,
}

impl OwnerLocks {
    /// `owner`'s lock, once the requests before this one are done.
    pub(super) async fn lock(&self, owner: OwnerId) -> OwnedMutexGuard<()> {
        let lock = {
            let mut locks = self.locks.lock();
            locks.retain(|_, lock| Arc::strong_count(lock) > 1);
            Arc::clone(locks.entry(owner).or_default())
        };
        lock.lock_owned().await
    }

    /// Owners whose locks are remembered now.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.locks.lock().len()
    }
}

impl Notebooks {
    /// Room for one more notebook of `owner`'s (new, forked or imported),
    /// held until the guard is dropped, which is after its row is made:
    /// every notebook the owner holds counts, begun or still empty (an
    /// empty one is a row too, and becomes a kept notebook with its first
    /// question). `None`: the owner has no cap.
    pub(super) async fn notebook_room(
        &self,
        owner: OwnerId,
    ) -> Result<Option<OwnedMutexGuard<()>>, NotebookError> {
        let Some(cap) = self.quotas.as_ref().and_then(|q| q.session_cap(owner)) else {
            return Ok(None);
        };
        let held = self.notebook_locks.lock(owner).await;
        let kept = self.store().count_sessions_of(owner).await?;
        if kept >= u64::try_from(cap).unwrap_or(u64::MAX) {
            return Err(NotebookError::OverQuota(format!(
                "you keep {kept} notebooks (new empty ones count too), the most your account allows ({cap}); delete some to make new ones"
            )));
        }
        Ok(Some(held))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn an_owners_requests_take_turns_and_the_lock_is_forgotten_after() {
        let locks = OwnerLocks::default();
        let (me, other) = (OwnerId::random(), OwnerId::random());
        let first = locks.lock(me).await;
        // Another owner is not held up.
        let theirs = locks.lock(other).await;
        let second = locks.lock(me);
        tokio::pin!(second);
        assert!(
            futures::poll!(second.as_mut()).is_pending(),
            "the second waits for the first"
        );
        drop(first);
        let second = second.await;
        drop((second, theirs));
        // The next request forgets the locks nobody holds.
        let _third = locks.lock(me).await;
        assert_eq!(locks.len(), 1);
    }
}
