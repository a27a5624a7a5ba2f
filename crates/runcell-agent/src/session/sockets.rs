//! The sockets open on sessions, counted per session and per owner, so that
//! no one session and no one owner can hold more than its share of them
//! (each costs a task, buffers and a page of history in flight).

use std::collections::HashMap;
use std::sync::Arc;

use parking_lot::Mutex;
use tokio_util::sync::CancellationToken;

use runcell_protocol::{OwnerId, SessionId};

/// Why a socket is refused: which cap it met.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SocketRefusal {
    #[error("this session has {0} pages open already; close one and try again")]
    Session(usize),
    #[error("you have {0} session pages open already; close one and try again")]
    Owner(usize),
}

/// The caps and the counts.
pub struct OpenSockets {
    per_session: usize,
    per_owner: usize,
    counts: Mutex<Counts>,
}

#[derive(Default)]
struct Counts {
    by_session: HashMap<SessionId, usize>,
    by_owner: HashMap<OwnerId, usize>,
    /// Cancelled when the owner's sockets are to close (a disabled account).
    closers: HashMap<OwnerId, CancellationToken>,
}

/// One open socket; dropping it frees its place.
#[must_use]
pub struct SocketSlot {
    sockets: Arc<OpenSockets>,
    session: SessionId,
    owner: OwnerId,
    closed: CancellationToken,
}

impl SocketSlot {
    /// Resolves when the owner's sockets are closed by
    /// [`OpenSockets::close_owner`].
    pub async fn closed(&self) {
        self.closed.cancelled().await;
    }
}

impl OpenSockets {
    pub fn new(per_session: usize, per_owner: usize) -> Arc<Self> {
        Arc::new(Self {
            per_session,
            per_owner,
            counts: Mutex::new(Counts::default()),
        })
    }

    /// A place for `owner`'s socket on `session`, or the cap it meets.
    pub fn admit(
        self: &Arc<Self>,
        session: SessionId,
        owner: OwnerId,
    ) -> Result<SocketSlot, SocketRefusal> {
        let mut counts = self.counts.lock();
        if counts.by_session.get(&session).copied().unwrap_or(0) >= self.per_session {
            return Err(SocketRefusal::Session(self.per_session));
        }
        if counts.by_owner.get(&owner).copied().unwrap_or(0) >= self.per_owner {
            return Err(SocketRefusal::Owner(self.per_owner));
        }
        *counts.by_session.entry(session).or_insert(0) += 1;
        *counts.by_owner.entry(owner).or_insert(0) += 1;
        let closed = counts.closers.entry(owner).or_default().clone();
        Ok(SocketSlot {
            sockets: Arc::clone(self),
            session,
            owner,
            closed,
        })
    }

    /// Closes every socket `owner` has open; how many there were.
    pub fn close_owner(&self, owner: OwnerId) -> usize {
        let mut counts = self.counts.lock();
        let open = counts.by_owner.get(&owner).copied().unwrap_or(0);
        if let Some(closer) = counts.closers.remove(&owner) {
            closer.cancel();
        }
        open
    }

    /// Sockets open on `session`.
    pub fn on_session(&self, session: SessionId) -> usize {
        self.counts
            .lock()
            .by_session
            .get(&session)
            .copied()
            .unwrap_or(0)
    }
}

impl Drop for SocketSlot {
    fn drop(&mut self) {
        let mut counts = self.sockets.counts.lock();
        release(&mut counts.by_session, &self.session);
        release(&mut counts.by_owner, &self.owner);
        if !counts.by_owner.contains_key(&self.owner) {
            counts.closers.remove(&self.owner);
        }
    }
}

fn release<K: std::hash::Hash + Eq>(map: &mut HashMap<K, usize>, key: &K) {
    if let Some(count) = map.get_mut(key) {
        *count = count.saturating_sub(1);
        if *count == 0 {
            map.remove(key);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sockets_are_capped_per_session_and_per_owner_and_freed_on_drop() {
        let sockets = OpenSockets::new(2, 3);
        let (one, two) = (SessionId::random(), SessionId::random());
        let owner = OwnerId::random();
        let a = sockets.admit(one, owner).unwrap();
        let _b = sockets.admit(one, owner).unwrap();
        assert_eq!(
            sockets.admit(one, OwnerId::random()).err(),
            Some(SocketRefusal::Session(2))
        );
        let _c = sockets.admit(two, owner).unwrap();
        assert_eq!(
            sockets.admit(two, owner).err(),
            Some(SocketRefusal::Owner(3))
        );
        assert!(sockets.admit(two, OwnerId::random()).is_ok());
        drop(a);
        assert_eq!(sockets.on_session(one), 1);
        assert!(
            sockets.admit(two, owner).is_ok(),
            "a closed socket frees its place"
        );
    }

    #[tokio::test]
    async fn an_owners_sockets_are_closed_together_and_later_ones_are_not() {
        let sockets = OpenSockets::new(4, 4);
        let (owner, other) = (OwnerId::random(), OwnerId::random());
        let a = sockets.admit(SessionId::random(), owner).unwrap();
        let b = sockets.admit(SessionId::random(), owner).unwrap();
        let c = sockets.admit(SessionId::random(), other).unwrap();
        assert_eq!(sockets.close_owner(owner), 2);
        a.closed().await;
        b.closed().await;
        assert!(!c.closed.is_cancelled(), "another owner's stays open");
        let later = sockets.admit(SessionId::random(), owner).unwrap();
        assert!(!later.closed.is_cancelled());
        assert_eq!(sockets.close_owner(OwnerId::random()), 0);
    }
}
