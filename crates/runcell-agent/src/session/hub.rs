use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use parking_lot::Mutex;
use runcell_protocol::{EventBody, KernelLoss, SessionEvent};

use super::channel::SessionChannel;
use super::quota::{AddressRate, NewSessionRate, TooManySessions};
use super::writer::EventWriter;
use crate::cluster::Cluster;
use runcell_core::clock::now_ms;
use runcell_protocol::{OwnerId, SessionId, ShareToken};
use runcell_store::nodes::Lease;
use runcell_store::{SessionRecord, ShareRecord, Store, StoreError};

/// The sessions this server has open, in memory, each backed by the store:
/// every event published is queued for the store at once, and a session
/// not in memory (after a restart) is loaded from it on first use.
pub struct SessionHub {
    sessions: Mutex<HashMap<SessionId, Arc<SessionChannel>>>,
    store: Arc<dyn Store>,
    writer: EventWriter,
    /// Held while a session is read from the store, so it is read once.
    loading: tokio::sync::Mutex<()>,
    /// Past this many sessions in memory, those nobody holds are let go.
    memory_cap: usize,
    memory_bytes: usize,
    /// Sessions let go from memory by this process: their kernels may live
    /// on, so reloading one is not a restart.
    evicted: Mutex<HashSet<SessionId>>,
    /// How fast one owner may make new sessions...
    new_sessions: NewSessionRate,
    /// ...and the anonymous owners of one client address together.
    by_address: Option<AddressRate>,
    /// The other nodes on a shared database, if there are any: a session
    /// another node holds is followed here, not run.
    cluster: Option<Arc<Cluster>>,
}

/// Why a new session was not made.
#[derive(Debug, thiserror::Error)]
pub enum CreateError {
    #[error(transparent)]
    TooMany(#[from] TooManySessions),
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Sessions kept in memory before idle ones are let go (they reload from
/// the store when next used).
pub const MEMORY_CAP: usize = 256;

/// The histories kept in memory, in bytes, before idle sessions are let
/// go: anyone can make sessions of megabytes (an import, a long output),
/// so the count alone would let a few hundred of them hold gigabytes.
pub const MEMORY_BYTES: usize = 256 * 1024 * 1024;

impl SessionHub {
    /// A hub over `store`; starts the event writer on the current runtime.
    pub fn new(store: Arc<dyn Store>) -> Self {
        Self::with_memory_cap(store, MEMORY_CAP)
    }

    pub fn with_memory_cap(store: Arc<dyn Store>, memory_cap: usize) -> Self {
        Self::with_memory_caps(store, memory_cap, MEMORY_BYTES)
    }

    /// A hub that keeps at most `memory_cap` idle sessions, and at most
    /// `memory_bytes` of histories, in memory.
    pub fn with_memory_caps(store: Arc<dyn Store>, memory_cap: usize, memory_bytes: usize) -> Self {
        Self {
            memory_cap,
            memory_bytes,
            evicted: Mutex::new(HashSet::new()),
            sessions: Mutex::new(HashMap::new()),
            writer: EventWriter::spawn(Arc::clone(&store)),
            store,
            loading: tokio::sync::Mutex::new(()),
            new_sessions: NewSessionRate::unlimited(),
            by_address: None,
            cluster: None,
        }
    }

    /// Sessions held by other nodes of `cluster` are followed, not run.
    pub fn with_cluster(mut self, cluster: Arc<Cluster>) -> Self {
        self.cluster = Some(cluster);
        self
    }

    pub fn cluster(&self) -> Option<&Arc<Cluster>> {
        self.cluster.as_ref()
    }

    /// Each owner may make new sessions at `rate` only.
    pub fn with_new_session_rate(mut self, rate: NewSessionRate) -> Self {
        self.new_sessions = rate;
        self
    }

    /// The anonymous owners of one client address may make new sessions
    /// at `rate` only, together.
    pub fn with_address_rate(mut self, rate: AddressRate) -> Self {
        self.by_address = Some(rate);
        self
    }

    pub fn store(&self) -> &Arc<dyn Store> {
        &self.store
    }

    /// Takes one new session from `owner`'s budget, then from its
    /// address's: a client past its own cookie's budget does not use up
    /// its neighbours'.
    fn admit(&self, owner: OwnerId) -> Result<(), TooManySessions> {
        self.new_sessions.admit(owner)?;
        match &self.by_address {
            Some(rate) => rate.admit(owner),
            None => Ok(()),
        }
    }

    /// A new, empty session for `owner`, within the owner's rate.
    pub async fn create(&self, owner: OwnerId) -> Result<Arc<SessionChannel>, CreateError> {
        self.admit(owner)?;
        Ok(self.insert(owner, "", None, Vec::new()).await?)
    }

    /// A new session for `owner` holding a copy of `events` (a shared
    /// session's, up to its link's end): cells cut short are closed, and the
    /// kernel is marked lost, so "Re-run all" rebuilds it; `files_left_behind`
    /// when the original has files the link does not offer (the page says
    /// so beside Re-run all).
    pub async fn fork(
        &self,
        owner: OwnerId,
        title: &str,
        from: &ShareToken,
        events: Vec<SessionEvent>,
        files_left_behind: bool,
    ) -> Result<Arc<SessionChannel>, CreateError> {
        self.admit(owner)?;
        let channel = self
            .insert(owner, title, Some(from.to_string()), events)
            .await?;
        let reason = if files_left_behind {
            KernelLoss::ForkWithoutFiles
        } else {
            KernelLoss::Fork
        };
        channel.log().settle(reason);
        Ok(channel)
    }

    /// A new session of `owner`'s holding the cells of an imported notebook
    /// (`events`, numbered from 1), none of them run here.
    pub async fn import(
        &self,
        owner: OwnerId,
        title: &str,
        events: Vec<SessionEvent>,
    ) -> Result<Arc<SessionChannel>, CreateError> {
        self.admit(owner)?;
        let channel = self.insert(owner, title, None, events).await?;
        channel.log().settle(KernelLoss::Import);
        Ok(channel)
    }

    /// Records a new session holding `events` (queued for the store) and
    /// keeps it in memory.
    async fn insert(
        &self,
        owner: OwnerId,
        title: &str,
        forked_from: Option<String>,
        events: Vec<SessionEvent>,
    ) -> Result<Arc<SessionChannel>, StoreError> {
        let id = SessionId::random();
        let now = now_ms();
        self.store
            .create_session(&SessionRecord {
                id,
                owner,
                title: title.to_string(),
                created_ms: now,
                updated_ms: now,
                forked_from,
            })
            .await?;
        for event in &events {
            self.writer.write(id, event.clone());
        }
        // A copied history (an import, a fork) is stored before the session
        // is answered: the writer's queue is unbounded, and imports made
        // back to back outran the disk by hundreds of megabytes.
        if !events.is_empty() {
            self.writer.flush().await;
        }
        let channel = Arc::new(SessionChannel::new(id, owner, events, self.writer.clone()));
        if let Some(cluster) = &self.cluster {
            cluster.hold(&channel);
        }
        self.remember(&channel);
        Ok(channel)
    }

    /// Keeps `channel` in memory; past the cap, lets go of the sessions
    /// nobody holds (no page, no request, no turn: only this map).
    fn remember(&self, channel: &Arc<SessionChannel>) {
        let mut sessions = self.sessions.lock();
        sessions.insert(channel.id(), Arc::clone(channel));
        let over_bytes =
            || sessions.values().map(|c| c.log().bytes()).sum::<usize>() > self.memory_bytes;
        if sessions.len() > self.memory_cap || over_bytes() {
            let mut evicted = self.evicted.lock();
            sessions.retain(|id, c| {
                let held = Arc::strong_count(c) > 1 || self.writer.lost_events_of(*id);
                if !held {
                    evicted.insert(*id);
                }
                held
            });
            tracing::debug!(kept = sessions.len(), "idle sessions let go from memory");
        }
    }

    /// The session, from memory or else from the store; `None` if there is
    /// no such session.
    pub async fn open(&self, id: SessionId) -> Result<Option<Arc<SessionChannel>>, StoreError> {
        if let Some(channel) = self.existing(id) {
            return Ok(Some(channel));
        }
        let _loading = self.loading.lock().await;
        if let Some(channel) = self.existing(id) {
            return Ok(Some(channel));
        }
        // A session let go from memory may still have events queued.
        let evicted = self.evicted.lock().remove(&id);
        if evicted {
            self.writer.flush().await;
        }
        let Some(record) = self.store.session(id).await? else {
            return Ok(None);
        };
        let lease = match &self.cluster {
            Some(cluster) => cluster.acquire(id).await?,
            None => Lease::Mine { kept: true },
        };
        let events = self.store.events(id).await?;
        let channel = Arc::new(SessionChannel::new(
            id,
            record.owner,
            events,
            self.writer.clone(),
        ));
        match (lease, &self.cluster) {
            (Lease::Held(node), Some(cluster)) => {
                channel.set_holder(node);
                cluster.follow(&channel);
            }
            // Loaded after a restart, or taken over from a node that is
            // gone: what was cut short is closed.
            (Lease::Mine { kept }, cluster) => {
                if !evicted || !kept {
                    channel.log().settle(KernelLoss::ServerRestart);
                }
                if let Some(cluster) = cluster {
                    cluster.hold(&channel);
                }
            }
            (Lease::Held(_), None) => {}
        }
        self.remember(&channel);
        tracing::debug!(%id, events = channel.log().last_seq(), "session loaded from the store");
        Ok(Some(channel))
    }

    /// The session if `owner` owns it. Someone else's session is `None`,
    /// exactly like a session that does not exist.
    pub async fn open_owned(
        &self,
        id: SessionId,
        owner: OwnerId,
    ) -> Result<Option<Arc<SessionChannel>>, StoreError> {
        Ok(self.open(id).await?.filter(|c| c.owner() == owner))
    }

    /// Gives `from`'s sessions to `to`: in the store, and in memory in
    /// place (a running turn, a page, a kernel go on as they were). Under
    /// the loading lock, so that no load in between caches the old owner.
    /// Answers how many moved.
    pub async fn move_owner(&self, from: OwnerId, to: OwnerId) -> Result<u64, StoreError> {
        let _loading = self.loading.lock().await;
        let moved = self.store.move_sessions(from, to).await?;
        for channel in self.sessions.lock().values() {
            if channel.owner() == from {
                channel.set_owner(to);
            }
        }
        Ok(moved)
    }

    /// The sessions of `owner`'s in memory.
    pub fn in_memory_of(&self, owner: OwnerId) -> Vec<Arc<SessionChannel>> {
        self.sessions
            .lock()
            .values()
            .filter(|channel| channel.owner() == owner)
            .cloned()
            .collect()
    }

    /// The session if it is in memory.
    pub fn existing(&self, id: SessionId) -> Option<Arc<SessionChannel>> {
        let mut sessions = self.sessions.lock();
        let channel = sessions.get(&id)?;
        if channel.is_retired() {
            // Lost to another node: read afresh (as a follower) next time.
            sessions.remove(&id);
            return None;
        }
        Some(Arc::clone(channel))
    }

    /// Stops the session's turns and deletes it with its events and links.
    pub async fn delete(&self, id: SessionId) -> Result<bool, StoreError> {
        // No load of this session may run meanwhile and bring it back.
        let _loading = self.loading.lock().await;
        let removed = self.sessions.lock().remove(&id);
        if let Some(channel) = removed {
            // Pages and requests that still hold it can start nothing more.
            channel.close();
            channel.stop_turns();
        }
        // Events already queued would be dropped by the store anyway; flushing
        // first keeps the order of things plain.
        self.writer.flush().await;
        self.store.delete_session(id).await
    }

    /// What a live share link shows: the session's record and its events up
    /// to the link's end, cells cut short closed. `None` for a revoked or
    /// unknown link.
    pub async fn shared_events(
        &self,
        token: &ShareToken,
    ) -> Result<Option<(SessionRecord, Vec<SessionEvent>)>, StoreError> {
        match self.store.shared(token).await? {
            Some(share) => self.link_events(&share).await,
            None => Ok(None),
        }
    }

    /// What the live link `share` shows, as [`Self::shared_events`] does,
    /// for a caller that has read the link already. `None` if its session
    /// is gone.
    pub async fn link_events(
        &self,
        share: &ShareRecord,
    ) -> Result<Option<(SessionRecord, Vec<SessionEvent>)>, StoreError> {
        let Some(record) = self.store.session(share.session_id).await? else {
            return Ok(None);
        };
        let events = match self.existing(share.session_id) {
            Some(channel) => channel.log().events_after(0),
            None => self.store.events(share.session_id).await?,
        };
        // The session's first question, as it names a session, and where.
        let (asked_at, asked) = events
            .iter()
            .find_map(|e| match &e.event {
                EventBody::UserMessage { text, .. } => {
                    Some((e.seq, runcell_store::title_from(text)))
                }
                _ => None,
            })
            .unwrap_or_default();
        let events: Vec<SessionEvent> = events
            .into_iter()
            .filter(|e| e.seq <= share.upto_seq)
            .collect();
        // The title the link shows: the owner's name for the session, as it
        // is now (a rename reaches the link and its forks); else the first
        // question if the link's events hold it, never one asked after its
        // end.
        let renamed = !record.title.is_empty() && record.title != asked;
        let title = if renamed {
            record.title.clone()
        } else if asked_at <= share.upto_seq {
            asked
        } else {
            String::new()
        };
        Ok(Some((SessionRecord { title, ..record }, events)))
    }

    /// Resolves once every event published so far is stored.
    pub async fn flush(&self) {
        self.writer.flush().await;
    }

    pub fn len(&self) -> usize {
        self.sessions.lock().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use runcell_protocol::{CellKind, TurnKind};

    use super::*;
    use crate::session::{MAX_PENDING_TURNS, TurnSlot};
    use runcell_protocol::notebook::Notebook;
    use runcell_protocol::{CellId, TurnId};
    use runcell_store::SqliteStore;

    fn started(cell: u64) -> EventBody {
        EventBody::CellStarted {
            cell_id: CellId(cell),
            cell_kind: CellKind::Code,
            language: None,
            attempt: None,
            source: None,
        }
    }

    async fn hub() -> (SessionHub, tempfile::TempDir) {
        let dir = tempfile::tempdir().unwrap();
        let store = SqliteStore::open_in(dir.path()).await.unwrap();
        (SessionHub::new(Arc::new(store)), dir)
    }

    #[tokio::test]
    async fn events_are_numbered_from_one_without_gaps() {
        let (hub, _dir) = hub().await;
        let channel = hub.create(OwnerId::random()).await.unwrap();
        let seqs: Vec<u64> = (1..=5)
            .map(|i| channel.log().publish(started(i)).seq)
            .collect();
        assert_eq!(seqs, vec![1, 2, 3, 4, 5]);
        assert_eq!(channel.log().last_seq(), 5);
    }

    #[tokio::test]
    async fn subscribers_get_each_event_once() {
        let (hub, _dir) = hub().await;
        let channel = hub.create(OwnerId::random()).await.unwrap();
        channel.log().publish(started(1));
        channel.log().publish(started(2));
        let (last_seq, mut live) = channel.log().follow();
        assert_eq!(last_seq, 2);
        let history = channel.log().page_after(1, 64);
        assert_eq!(history.iter().map(|e| e.seq).collect::<Vec<_>>(), vec![2]);
        channel.log().publish(started(3));
        assert_eq!(live.try_recv().map(|e| e.seq).ok(), Some(3));
        assert!(live.try_recv().is_err());
    }

    #[tokio::test]
    async fn turn_places_are_bounded_and_given_back() {
        let (hub, _dir) = hub().await;
        let channel = hub.create(OwnerId::random()).await.unwrap();
        let slots: Vec<TurnSlot> = (0..MAX_PENDING_TURNS)
            .map(|_| channel.reserve_turn())
            .collect::<Option<_>>()
            .unwrap();
        assert!(channel.reserve_turn().is_none());
        drop(slots);
        assert!(channel.reserve_turn().is_some());
    }

    #[tokio::test]
    async fn history_is_read_a_bounded_page_at_a_time() {
        let (hub, _dir) = hub().await;
        let channel = hub.create(OwnerId::random()).await.unwrap();
        for cell in 1..=150 {
            channel.log().publish(started(cell));
        }
        let seqs = |page: Vec<SessionEvent>| page.iter().map(|e| e.seq).collect::<Vec<_>>();
        assert_eq!(
            seqs(channel.log().page_after(0, 64)),
            (1..=64).collect::<Vec<_>>()
        );
        assert_eq!(
            seqs(channel.log().page_after(128, 64)),
            (129..=150).collect::<Vec<_>>()
        );
        assert!(channel.log().page_after(150, 64).is_empty());
        assert!(channel.log().page_after(u64::MAX, 64).is_empty());
    }

    #[tokio::test]
    async fn resuming_past_the_end_gives_nothing() {
        let (hub, _dir) = hub().await;
        let channel = hub.create(OwnerId::random()).await.unwrap();
        channel.log().publish(started(1));
        assert!(channel.log().events_after(1).is_empty());
        assert!(channel.log().events_after(u64::MAX).is_empty());
    }

    #[tokio::test]
    async fn sessions_are_stored_and_reloaded_with_what_was_cut_short_closed() {
        let dir = tempfile::tempdir().unwrap();
        let owner = OwnerId::random();
        let (id, before) = {
            let store = Arc::new(SqliteStore::open_in(dir.path()).await.unwrap());
            let hub = SessionHub::new(store.clone());
            let channel = hub.create(owner).await.unwrap();
            channel.log().publish(EventBody::TurnStarted {
                turn: TurnId(1),
                turn_kind: TurnKind::Run,
                alternative_to: None,
            });
            channel.log().publish(started(1));
            channel.log().publish(EventBody::CellStarted {
                cell_id: CellId(2),
                cell_kind: CellKind::Result,
                language: None,
                attempt: None,
                source: Some(CellId(1)),
            });
            hub.flush().await;
            store.close().await;
            (channel.id(), channel.log().events_after(0))
        };
        let (hub, _) = (
            SessionHub::new(Arc::new(SqliteStore::open_in(dir.path()).await.unwrap())),
            (),
        );
        assert!(
            hub.open_owned(id, OwnerId::random())
                .await
                .unwrap()
                .is_none(),
            "not yours"
        );
        let channel = hub.open_owned(id, owner).await.unwrap().expect("stored");
        let events = channel.log().events_after(0);
        assert_eq!(events[..3], before[..]);
        let notebook = Notebook::from_events(&events);
        assert_eq!(notebook.unfinished(), (vec![], None), "{events:#?}");
        assert_eq!(notebook.kernel_lost(), Some(KernelLoss::ServerRestart));
        assert_eq!(
            channel.log().next_cell_id(),
            CellId(3),
            "ids go on from the stored ones"
        );
        assert_eq!(channel.next_turn_id(), TurnId(2));
        // Loading again (from memory) adds nothing.
        let again = hub.open(id).await.unwrap().expect("open");
        assert_eq!(again.log().last_seq(), channel.log().last_seq());
        assert!(hub.open(SessionId::random()).await.unwrap().is_none());
    }

    #[tokio::test]
    async fn idle_sessions_leave_memory_and_come_back_whole_without_a_restart_note() {
        let dir = tempfile::tempdir().unwrap();
        let store = SqliteStore::open_in(dir.path()).await.unwrap();
        let hub = SessionHub::with_memory_cap(Arc::new(store), 2);
        let owner = OwnerId::random();
        let held = hub.create(owner).await.unwrap();
        let idle = hub.create(owner).await.unwrap().id();
        {
            let channel = hub.existing(idle).unwrap();
            channel.log().publish(EventBody::TurnStarted {
                turn: TurnId(1),
                turn_kind: TurnKind::Run,
                alternative_to: None,
            });
            channel.log().publish(EventBody::CellStarted {
                cell_id: CellId(1),
                cell_kind: CellKind::Result,
                language: None,
                attempt: None,
                source: None,
            });
        }
        let third = hub.create(owner).await.unwrap();
        assert!(hub.existing(idle).is_none(), "nobody held it");
        assert!(hub.existing(held.id()).is_some() && hub.existing(third.id()).is_some());
        // Its events were still queued; it comes back whole, mid-turn as it
        // was, with no restart recorded (its kernel may be alive).
        let back = hub.open(idle).await.unwrap().expect("reloaded");
        assert_eq!(back.log().last_seq(), 2);
        assert!(Notebook::from_events(&back.log().events_after(0)).is_busy());
        assert_eq!(back.log().next_cell_id(), CellId(2));
    }

    /// Issue 40: a few sessions of megabytes (imports, long outputs)
    /// are let go from memory by their size, well before the count cap.
    #[tokio::test]
    async fn big_idle_sessions_leave_memory_by_their_size() {
        let dir = tempfile::tempdir().unwrap();
        let store = SqliteStore::open_in(dir.path()).await.unwrap();
        let hub = SessionHub::with_memory_caps(Arc::new(store), 100, 1024 * 1024);
        let owner = OwnerId::random();
        let mut idle = Vec::new();
        for _ in 0..2 {
            let channel = hub.create(owner).await.unwrap();
            channel.log().publish(EventBody::CellOutput {
                cell_id: CellId(1),
                output: runcell_protocol::Output::Stdout {
                    text: "x".repeat(600 * 1024),
                },
            });
            assert!(channel.log().bytes() > 600 * 1024);
            idle.push(channel.id());
        }
        hub.flush().await;
        // 1.2 MiB of idle histories: the next session lets them go.
        let held = hub.create(owner).await.unwrap();
        for id in &idle {
            assert!(hub.existing(*id).is_none(), "an idle big session stayed");
        }
        assert!(hub.existing(held.id()).is_some());
        // And each comes back whole when next used.
        let back = hub.open(idle[0]).await.unwrap().expect("reloaded");
        assert_eq!(back.log().last_seq(), 1);
    }

    #[tokio::test]
    async fn a_fork_says_its_kernel_is_a_fork_even_after_a_restart_note() {
        let (hub, _dir) = hub().await;
        let owner = OwnerId::random();
        let events = SessionEvent::numbered(
            [
                EventBody::CellStarted {
                    cell_id: CellId(1),
                    cell_kind: CellKind::Result,
                    language: None,
                    attempt: None,
                    source: None,
                },
                EventBody::KernelLost {
                    reason: KernelLoss::ServerRestart,
                },
            ],
            1,
        );
        let fork = hub
            .fork(owner, "t", &ShareToken::random(), events, false)
            .await
            .unwrap();
        let notebook = Notebook::from_events(&fork.log().events_after(0));
        assert_eq!(notebook.kernel_lost(), Some(KernelLoss::Fork));
        assert_eq!(notebook.unfinished(), (vec![], None));
    }

    #[tokio::test]
    async fn deleting_stops_turns_and_forgets_the_session() {
        let (hub, _dir) = hub().await;
        let channel = hub.create(OwnerId::random()).await.unwrap();
        let stop = channel.stop_token();
        channel.log().publish(started(1));
        assert!(hub.delete(channel.id()).await.unwrap());
        assert!(stop.is_cancelled());
        assert!(hub.open(channel.id()).await.unwrap().is_none());
        assert!(!hub.delete(channel.id()).await.unwrap());
    }
}
