use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use app::notebook::Notebook;
use app::protocol::{
    CellError, CellId, CellStatus, EventBody, KernelLoss, SessionEvent, TurnId, TurnStatus,
};
use parking_lot::Mutex;
use tokio::sync::broadcast;
use tokio_util::sync::CancellationToken;

use super::quota::{NewSessionRate, TooManySessions};
use super::writer::EventWriter;
use super::{OwnerId, SessionId, ShareToken};
use crate::cluster::Cluster;
use crate::store::nodes::{Lease, Node};
use crate::store::{SessionRecord, ShareRecord, Store, StoreError};
use runcell_core::clock::now_ms;

/// Live events a slow reader may fall behind by before it re-reads the history.
const LIVE_BUFFER: usize = 1024;

/// Turns a session may have running or waiting; more are refused as busy.
pub const MAX_PENDING_TURNS: usize = 8;

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
    /// How fast one owner may make new sessions.
    new_sessions: NewSessionRate,
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

    pub fn store(&self) -> &Arc<dyn Store> {
        &self.store
    }

    /// A new, empty session for `owner`, within the owner's rate.
    pub async fn create(&self, owner: OwnerId) -> Result<Arc<SessionChannel>, CreateError> {
        self.new_sessions.admit(owner)?;
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
        self.new_sessions.admit(owner)?;
        let channel = self
            .insert(owner, title, Some(from.to_string()), events)
            .await?;
        let reason = if files_left_behind {
            KernelLoss::ForkWithoutFiles
        } else {
            KernelLoss::Fork
        };
        settle(&channel, reason);
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
        self.new_sessions.admit(owner)?;
        let channel = self.insert(owner, title, None, events).await?;
        settle(&channel, KernelLoss::Import);
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
        let over_bytes = || sessions.values().map(|c| c.bytes()).sum::<usize>() > self.memory_bytes;
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
                    settle(&channel, KernelLoss::ServerRestart);
                }
                if let Some(cluster) = cluster {
                    cluster.hold(&channel);
                }
            }
            (Lease::Held(_), None) => {}
        }
        self.remember(&channel);
        tracing::debug!(%id, events = channel.last_seq(), "session loaded from the store");
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
            Some(channel) => channel.events_after(0),
            None => self.store.events(share.session_id).await?,
        };
        // The session's first question, as it names a session, and where.
        let (asked_at, asked) = events
            .iter()
            .find_map(|e| match &e.event {
                EventBody::UserMessage { text, .. } => {
                    Some((e.seq, crate::store::title_from(text)))
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

/// Closes what the node that held `channel` cut short when it stopped, and
/// records that its kernel is gone.
pub fn settle_lost_kernel(channel: &SessionChannel) {
    settle(channel, KernelLoss::ServerRestart);
}

/// Closes what a history cut short left open (the server stopped mid-turn,
/// or a link was shared mid-turn), and records that the kernel which ran its
/// code is gone.
fn settle(channel: &SessionChannel, reason: KernelLoss) {
    let notebook = Notebook::from_events(&channel.events_after(0));
    let (cells, turn) = notebook.unfinished();
    let message = match reason {
        KernelLoss::ServerRestart => "The server stopped before this cell finished.",
        KernelLoss::Fork | KernelLoss::ForkWithoutFiles => {
            "This cell had not finished when the session was shared."
        }
        KernelLoss::Import => "This cell was not finished in the imported notebook.",
    };
    for cell_id in cells {
        channel.publish(EventBody::CellFinished {
            cell_id,
            status: CellStatus::Error,
            elapsed_ms: 0,
            error: Some(CellError {
                code: "interrupted".into(),
                message: message.into(),
            }),
        });
    }
    if let Some(turn) = turn {
        channel.publish(EventBody::TurnFinished {
            turn,
            status: TurnStatus::Cancelled,
            elapsed_ms: 0,
            final_cell: None,
        });
    }
    // A fork has no kernel at all, even when the original had already lost
    // its own; a restart matters only if code ran since the last loss.
    let lost = match reason {
        KernelLoss::Fork | KernelLoss::ForkWithoutFiles => {
            notebook.kernel_used() || notebook.kernel_lost().is_some()
        }
        // Nothing of an imported notebook ran here.
        KernelLoss::Import => true,
        KernelLoss::ServerRestart => notebook.kernel_used(),
    };
    if lost {
        channel.publish(EventBody::KernelLost { reason });
    }
}

/// One session's history and its live feed. Publishing and subscribing take the
/// same lock, so a subscriber sees every event exactly once: either in the
/// history it is handed or on the live feed.
pub struct SessionChannel {
    id: SessionId,
    /// Changes only when a terminal joins a browser's owner.
    owner: Mutex<OwnerId>,
    inner: Mutex<History>,
    writer: EventWriter,
    live: broadcast::Sender<SessionEvent>,
    /// Held for the length of a turn, so turns in one session run one at a time.
    pub turn: tokio::sync::Mutex<()>,
    pending: AtomicUsize,
    next_turn: AtomicU64,
    /// Set when the session is deleted: no turn starts any more.
    closed: std::sync::atomic::AtomicBool,
    /// Cancelled by Stop; every turn started since the last Stop watches it.
    stop: Mutex<CancellationToken>,
    /// Cancelled when this node finds it no longer holds the session (it
    /// was silent long enough to be taken over): its turns stop, its pages
    /// are disconnected, and the next open reads the session afresh.
    retired: CancellationToken,
    /// The node that holds the session when it is another than this one:
    /// its events then come from the store ([`Self::mirror`]) and its turns
    /// are asked of that node.
    holder: Mutex<Option<Node>>,
}

/// A place in a session's turn queue; dropping it gives the place back.
pub struct TurnSlot(Arc<SessionChannel>);

impl TurnSlot {
    pub fn channel(&self) -> &SessionChannel {
        &self.0
    }
}

impl Drop for TurnSlot {
    fn drop(&mut self) {
        self.0.pending.fetch_sub(1, Ordering::AcqRel);
    }
}

#[derive(Default)]
struct History {
    events: Vec<SessionEvent>,
    /// The events' size as JSON: what the session holds in memory, near
    /// enough to share a budget by.
    bytes: usize,
    next_cell: u64,
}

impl History {
    fn push(&mut self, event: SessionEvent) {
        self.bytes = self.bytes.saturating_add(json_bytes(&event));
        self.events.push(event);
    }
}

/// `event`'s size as JSON, counted without writing it anywhere.
fn json_bytes(event: &SessionEvent) -> usize {
    struct Count(usize);
    impl std::io::Write for Count {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0 += bytes.len();
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut count = Count(0);
    let _ = serde_json::to_writer(&mut count, event);
    count.0
}

impl SessionChannel {
    /// A session whose history so far is `events` (already stored).
    fn new(id: SessionId, owner: OwnerId, events: Vec<SessionEvent>, writer: EventWriter) -> Self {
        let notebook = Notebook::from_events(&events);
        Self {
            id,
            owner: Mutex::new(owner),
            inner: Mutex::new(History {
                bytes: events.iter().map(json_bytes).sum(),
                events,
                next_cell: notebook.max_cell_id(),
            }),
            writer,
            live: broadcast::channel(LIVE_BUFFER).0,
            turn: tokio::sync::Mutex::new(()),
            pending: AtomicUsize::new(0),
            next_turn: AtomicU64::new(notebook.max_turn_id() + 1),
            closed: std::sync::atomic::AtomicBool::new(false),
            stop: Mutex::new(CancellationToken::new()),
            holder: Mutex::new(None),
            retired: CancellationToken::new(),
        }
    }

    /// This node lost the session to another (see `retired`).
    pub fn retire(&self) {
        self.stop_turns();
        self.retired.cancel();
    }

    pub fn is_retired(&self) -> bool {
        self.retired.is_cancelled()
    }

    /// Resolves when the session is retired here.
    pub async fn retired(&self) {
        self.retired.cancelled().await;
    }

    /// Another node holds this session (`take_over` makes it this one's).
    pub fn set_holder(&self, node: Node) {
        *self.holder.lock() = Some(node);
    }

    /// The other node that holds this session, if another does.
    pub fn remote_holder(&self) -> Option<Node> {
        self.holder.lock().clone()
    }

    /// Appends events the holding node stored (read back from the store)
    /// and sends them to every subscriber: those already here are skipped,
    /// and a gap ends the batch (the next read fills it). How many were new.
    pub fn mirror(&self, events: Vec<SessionEvent>) -> usize {
        let mut history = self.inner.lock();
        let mut added = 0;
        for event in events {
            let next = history.events.len() as u64 + 1;
            if event.seq < next {
                continue;
            }
            if event.seq > next {
                tracing::warn!(session = %self.id, seq = event.seq, next, "a gap in a followed session's events");
                break;
            }
            history.push(event.clone());
            let _ = self.live.send(event);
            added += 1;
        }
        added
    }

    /// This node now holds the session: `events` (the store's, after its
    /// last holder stopped) are appended, and the next ids go on from them.
    pub fn take_over(&self, events: Vec<SessionEvent>) {
        self.mirror(events);
        let mut history = self.inner.lock();
        let notebook = Notebook::from_events(&history.events);
        history.next_cell = history.next_cell.max(notebook.max_cell_id());
        self.next_turn
            .fetch_max(notebook.max_turn_id() + 1, Ordering::AcqRel);
        *self.holder.lock() = None;
    }

    pub fn owner(&self) -> OwnerId {
        *self.owner.lock()
    }

    /// What the session's history holds in memory (its events as JSON).
    pub fn bytes(&self) -> usize {
        self.inner.lock().bytes
    }

    fn set_owner(&self, owner: OwnerId) {
        *self.owner.lock() = owner;
    }

    /// Marks the session deleted.
    pub fn close(&self) {
        self.closed.store(true, Ordering::Release);
    }

    /// Whether the session was deleted (a page may still hold it).
    pub fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }

    /// A fresh turn id for this session.
    pub fn next_turn_id(&self) -> TurnId {
        TurnId(self.next_turn.fetch_add(1, Ordering::Relaxed))
    }

    /// The token that the next Stop cancels.
    pub fn stop_token(&self) -> CancellationToken {
        self.stop.lock().clone()
    }

    /// Cancels the turns started so far; later turns are not affected.
    pub fn stop_turns(&self) {
        let old = std::mem::replace(&mut *self.stop.lock(), CancellationToken::new());
        old.cancel();
    }

    /// Takes a place for one more turn, unless [`MAX_PENDING_TURNS`] are
    /// already running or waiting.
    pub fn reserve_turn(self: &Arc<Self>) -> Option<TurnSlot> {
        self.pending
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < MAX_PENDING_TURNS).then_some(n + 1)
            })
            .ok()
            .map(|_| TurnSlot(Arc::clone(self)))
    }

    pub fn id(&self) -> SessionId {
        self.id
    }

    /// A fresh cell id for this session.
    pub fn next_cell_id(&self) -> CellId {
        let mut history = self.inner.lock();
        history.next_cell += 1;
        CellId(history.next_cell)
    }

    /// Records an event as the next in the history and sends it to every
    /// subscriber.
    pub fn publish(&self, event: EventBody) -> SessionEvent {
        let mut history = self.inner.lock();
        let event = SessionEvent {
            seq: history.events.len() as u64 + 1,
            ts_ms: now_ms(),
            event,
        };
        history.push(event.clone());
        // Queued under the lock, so the store gets events in `seq` order.
        self.writer.write(self.id, event.clone());
        // No subscriber is fine: the history keeps the event for later pages.
        let _ = self.live.send(event.clone());
        event
    }

    /// The newest `seq` now, and a feed of every later event. What came
    /// before is read a page at a time ([`Self::page_after`]), so that no
    /// follower holds a copy of the whole history.
    pub fn follow(&self) -> (u64, broadcast::Receiver<SessionEvent>) {
        let history = self.inner.lock();
        let receiver = self.live.subscribe();
        (history.events.len() as u64, receiver)
    }

    /// At most `limit` events after `seq`, oldest first.
    pub fn page_after(&self, after: u64, limit: usize) -> Vec<SessionEvent> {
        let history = self.inner.lock();
        let start = usize::try_from(after)
            .unwrap_or(usize::MAX)
            .min(history.events.len());
        let end = start.saturating_add(limit).min(history.events.len());
        history.events[start..end].to_vec()
    }

    pub fn events_after(&self, after: u64) -> Vec<SessionEvent> {
        Self::after(&self.inner.lock(), after)
    }

    /// The newest `seq` at which no turn was under way: where a share link
    /// made now ends, so that it never shows half a turn.
    pub fn settled_seq(&self) -> u64 {
        let history = self.inner.lock();
        let mut open = false;
        let mut settled = 0;
        for event in &history.events {
            match event.event {
                EventBody::TurnStarted { .. } => open = true,
                EventBody::TurnFinished { .. } => {
                    open = false;
                    settled = event.seq;
                }
                _ if !open => settled = event.seq,
                _ => {}
            }
        }
        settled
    }

    pub fn last_seq(&self) -> u64 {
        self.inner.lock().events.len() as u64
    }

    fn after(history: &History, after: u64) -> Vec<SessionEvent> {
        let start = usize::try_from(after)
            .unwrap_or(usize::MAX)
            .min(history.events.len());
        history.events[start..].to_vec()
    }
}

#[cfg(test)]
mod tests {
    use app::protocol::{CellKind, TurnKind};

    use super::*;
    use crate::store::SqliteStore;

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
        let seqs: Vec<u64> = (1..=5).map(|i| channel.publish(started(i)).seq).collect();
        assert_eq!(seqs, vec![1, 2, 3, 4, 5]);
        assert_eq!(channel.last_seq(), 5);
    }

    #[tokio::test]
    async fn subscribers_get_each_event_once() {
        let (hub, _dir) = hub().await;
        let channel = hub.create(OwnerId::random()).await.unwrap();
        channel.publish(started(1));
        channel.publish(started(2));
        let (last_seq, mut live) = channel.follow();
        assert_eq!(last_seq, 2);
        let history = channel.page_after(1, 64);
        assert_eq!(history.iter().map(|e| e.seq).collect::<Vec<_>>(), vec![2]);
        channel.publish(started(3));
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
            channel.publish(started(cell));
        }
        let seqs = |page: Vec<SessionEvent>| page.iter().map(|e| e.seq).collect::<Vec<_>>();
        assert_eq!(
            seqs(channel.page_after(0, 64)),
            (1..=64).collect::<Vec<_>>()
        );
        assert_eq!(
            seqs(channel.page_after(128, 64)),
            (129..=150).collect::<Vec<_>>()
        );
        assert!(channel.page_after(150, 64).is_empty());
        assert!(channel.page_after(u64::MAX, 64).is_empty());
    }

    #[tokio::test]
    async fn resuming_past_the_end_gives_nothing() {
        let (hub, _dir) = hub().await;
        let channel = hub.create(OwnerId::random()).await.unwrap();
        channel.publish(started(1));
        assert!(channel.events_after(1).is_empty());
        assert!(channel.events_after(u64::MAX).is_empty());
    }

    #[tokio::test]
    async fn sessions_are_stored_and_reloaded_with_what_was_cut_short_closed() {
        let dir = tempfile::tempdir().unwrap();
        let owner = OwnerId::random();
        let (id, before) = {
            let store = Arc::new(SqliteStore::open_in(dir.path()).await.unwrap());
            let hub = SessionHub::new(store.clone());
            let channel = hub.create(owner).await.unwrap();
            channel.publish(EventBody::TurnStarted {
                turn: TurnId(1),
                turn_kind: TurnKind::Run,
                alternative_to: None,
            });
            channel.publish(started(1));
            channel.publish(EventBody::CellStarted {
                cell_id: CellId(2),
                cell_kind: CellKind::Result,
                language: None,
                attempt: None,
                source: Some(CellId(1)),
            });
            hub.flush().await;
            store.close().await;
            (channel.id(), channel.events_after(0))
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
        let events = channel.events_after(0);
        assert_eq!(events[..3], before[..]);
        let notebook = Notebook::from_events(&events);
        assert_eq!(notebook.unfinished(), (vec![], None), "{events:#?}");
        assert_eq!(notebook.kernel_lost(), Some(KernelLoss::ServerRestart));
        assert_eq!(
            channel.next_cell_id(),
            CellId(3),
            "ids go on from the stored ones"
        );
        assert_eq!(channel.next_turn_id(), TurnId(2));
        // Loading again (from memory) adds nothing.
        let again = hub.open(id).await.unwrap().expect("open");
        assert_eq!(again.last_seq(), channel.last_seq());
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
            channel.publish(EventBody::TurnStarted {
                turn: TurnId(1),
                turn_kind: TurnKind::Run,
                alternative_to: None,
            });
            channel.publish(EventBody::CellStarted {
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
        assert_eq!(back.last_seq(), 2);
        assert!(Notebook::from_events(&back.events_after(0)).is_busy());
        assert_eq!(back.next_cell_id(), CellId(2));
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
            channel.publish(EventBody::CellOutput {
                cell_id: CellId(1),
                output: app::protocol::Output::Stdout {
                    text: "x".repeat(600 * 1024),
                },
            });
            assert!(channel.bytes() > 600 * 1024);
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
        assert_eq!(back.last_seq(), 1);
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
        let notebook = Notebook::from_events(&fork.events_after(0));
        assert_eq!(notebook.kernel_lost(), Some(KernelLoss::Fork));
        assert_eq!(notebook.unfinished(), (vec![], None));
    }

    #[tokio::test]
    async fn deleting_stops_turns_and_forgets_the_session() {
        let (hub, _dir) = hub().await;
        let channel = hub.create(OwnerId::random()).await.unwrap();
        let stop = channel.stop_token();
        channel.publish(started(1));
        assert!(hub.delete(channel.id()).await.unwrap());
        assert!(stop.is_cancelled());
        assert!(hub.open(channel.id()).await.unwrap().is_none());
        assert!(!hub.delete(channel.id()).await.unwrap());
    }
}
