//! One session as this node has it open: its [`SessionLog`], the turns
//! queued on it, Stop, and whether this node or another holds it.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};

use parking_lot::Mutex;
use runcell_protocol::{KernelLoss, SessionEvent, TurnId};
use tokio_util::sync::CancellationToken;

use super::log::SessionLog;
use super::writer::EventWriter;
use crate::cluster::Replica;
use runcell_protocol::{OwnerId, SessionId};
use runcell_store::nodes::Node;

/// Turns a session may have running or waiting; more are refused as busy.
pub const MAX_PENDING_TURNS: usize = 8;

/// One open session: its log, its turn queue and its place in the cluster.
pub struct SessionChannel {
    log: SessionLog,
    /// Held for the length of a turn, so turns in one session run one at a time.
    pub turn: tokio::sync::Mutex<()>,
    pending: AtomicUsize,
    next_turn: AtomicU64,
    /// Set when the session is deleted: no turn starts any more.
    closed: AtomicBool,
    /// Cancelled by Stop; every turn started since the last Stop watches it.
    stop: Mutex<CancellationToken>,
    /// Cancelled when this node finds it no longer holds the session (it
    /// was silent long enough to be taken over): its turns stop, its pages
    /// are disconnected, and the next open reads the session afresh.
    retired: CancellationToken,
    /// The node that holds the session when it is another than this one:
    /// its events then come from the store ([`Replica::mirror`]) and its
    /// turns are asked of that node.
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

impl SessionChannel {
    /// A session whose history so far is `events` (already stored).
    pub(super) fn new(
        id: SessionId,
        owner: OwnerId,
        events: Vec<SessionEvent>,
        writer: EventWriter,
    ) -> Self {
        let (log, next_turn) = SessionLog::new(id, owner, events, writer);
        Self {
            log,
            turn: tokio::sync::Mutex::new(()),
            pending: AtomicUsize::new(0),
            next_turn: AtomicU64::new(next_turn.0),
            closed: AtomicBool::new(false),
            stop: Mutex::new(CancellationToken::new()),
            holder: Mutex::new(None),
            retired: CancellationToken::new(),
        }
    }

    pub fn id(&self) -> SessionId {
        self.log.id()
    }

    /// The session's history: what a turn reads and adds to.
    pub fn log(&self) -> &SessionLog {
        &self.log
    }

    pub fn owner(&self) -> OwnerId {
        self.log.owner()
    }

    pub(super) fn set_owner(&self, owner: OwnerId) {
        self.log.set_owner(owner);
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

    /// Another node holds this session (a take-over makes it this one's).
    pub fn set_holder(&self, node: Node) {
        *self.holder.lock() = Some(node);
    }

    /// The other node that holds this session, if another does.
    pub fn remote_holder(&self) -> Option<Node> {
        self.holder.lock().clone()
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
}

impl Replica for SessionChannel {
    fn session(&self) -> SessionId {
        self.id()
    }

    fn last_seq(&self) -> u64 {
        self.log.last_seq()
    }

    fn mirror(&self, events: Vec<SessionEvent>) {
        self.log.mirror(events);
    }

    fn take_over(&self, events: Vec<SessionEvent>) {
        let next_turn = self.log.take_over(events);
        self.next_turn.fetch_max(next_turn.0, Ordering::AcqRel);
        *self.holder.lock() = None;
        self.log.settle(KernelLoss::ServerRestart);
    }

    fn holder(&self) -> Option<Node> {
        self.remote_holder()
    }

    fn set_holder(&self, node: Node) {
        SessionChannel::set_holder(self, node);
    }

    fn retire(&self) {
        SessionChannel::retire(self);
    }
}
