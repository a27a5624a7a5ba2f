use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use app::api::ports::{LogError, SessionLogs};
use app::protocol::{CellId, EventBody, SessionEvent, TurnId};
use parking_lot::Mutex;
use tokio::sync::broadcast;
use tokio_util::sync::CancellationToken;

use super::SessionId;
use crate::clock::now_ms;

/// Live events a slow reader may fall behind by before it re-reads the history.
const LIVE_BUFFER: usize = 1024;

/// Turns a session may have running or waiting; more are refused as busy.
pub const MAX_PENDING_TURNS: usize = 8;

/// All sessions this server knows, in memory.
#[derive(Default)]
pub struct SessionHub {
    sessions: Mutex<HashMap<SessionId, Arc<SessionChannel>>>,
}

impl SessionHub {
    pub fn new() -> Self {
        Self::default()
    }

    /// The session's channel, made empty on first use.
    pub fn channel(&self, id: SessionId) -> Arc<SessionChannel> {
        self.sessions
            .lock()
            .entry(id)
            .or_insert_with(|| Arc::new(SessionChannel::new(id)))
            .clone()
    }

    /// The session's channel, if it has one.
    pub fn existing(&self, id: SessionId) -> Option<Arc<SessionChannel>> {
        self.sessions.lock().get(&id).cloned()
    }

    pub fn len(&self) -> usize {
        self.sessions.lock().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl SessionLogs for SessionHub {
    fn events(&self, session_id: &str) -> Result<Vec<SessionEvent>, LogError> {
        let id: SessionId = session_id.parse().map_err(|_| LogError::InvalidId)?;
        Ok(self
            .existing(id)
            .map(|channel| channel.events_after(0))
            .unwrap_or_default())
    }
}

/// One session's history and its live feed. Publishing and subscribing take the
/// same lock, so a subscriber sees every event exactly once: either in the
/// history it is handed or on the live feed.
pub struct SessionChannel {
    id: SessionId,
    inner: Mutex<History>,
    live: broadcast::Sender<SessionEvent>,
    /// Held for the length of a turn, so turns in one session run one at a time.
    pub turn: tokio::sync::Mutex<()>,
    pending: AtomicUsize,
    next_turn: AtomicU64,
    /// Cancelled by Stop; every turn started since the last Stop watches it.
    stop: Mutex<CancellationToken>,
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
    next_cell: u64,
}

impl SessionChannel {
    fn new(id: SessionId) -> Self {
        Self {
            id,
            inner: Mutex::new(History::default()),
            live: broadcast::channel(LIVE_BUFFER).0,
            turn: tokio::sync::Mutex::new(()),
            pending: AtomicUsize::new(0),
            next_turn: AtomicU64::new(1),
            stop: Mutex::new(CancellationToken::new()),
        }
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
        history.events.push(event.clone());
        // No subscriber is fine: the history keeps the event for later pages.
        let _ = self.live.send(event.clone());
        event
    }

    /// The events after `seq`, the newest `seq` now, and a feed of every
    /// later event.
    pub fn subscribe(
        &self,
        after: u64,
    ) -> (Vec<SessionEvent>, u64, broadcast::Receiver<SessionEvent>) {
        let history = self.inner.lock();
        let receiver = self.live.subscribe();
        let last_seq = history.events.len() as u64;
        (Self::after(&history, after), last_seq, receiver)
    }

    pub fn events_after(&self, after: u64) -> Vec<SessionEvent> {
        Self::after(&self.inner.lock(), after)
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
    use app::protocol::CellKind;

    use super::*;

    fn started(cell: u64) -> EventBody {
        EventBody::CellStarted {
            cell_id: CellId(cell),
            cell_kind: CellKind::Code,
            language: None,
            attempt: None,
            source: None,
        }
    }

    #[test]
    fn events_are_numbered_from_one_without_gaps() {
        let hub = SessionHub::new();
        let channel = hub.channel(SessionId::random());
        let seqs: Vec<u64> = (1..=5).map(|i| channel.publish(started(i)).seq).collect();
        assert_eq!(seqs, vec![1, 2, 3, 4, 5]);
        assert_eq!(channel.last_seq(), 5);
    }

    #[test]
    fn subscribers_get_each_event_once() {
        let hub = SessionHub::new();
        let channel = hub.channel(SessionId::random());
        channel.publish(started(1));
        channel.publish(started(2));
        let (history, last_seq, mut live) = channel.subscribe(1);
        assert_eq!(last_seq, 2);
        assert_eq!(history.iter().map(|e| e.seq).collect::<Vec<_>>(), vec![2]);
        channel.publish(started(3));
        assert_eq!(live.try_recv().map(|e| e.seq).ok(), Some(3));
        assert!(live.try_recv().is_err());
    }

    #[test]
    fn turn_places_are_bounded_and_given_back() {
        let hub = SessionHub::new();
        let channel = hub.channel(SessionId::random());
        let slots: Vec<TurnSlot> = (0..MAX_PENDING_TURNS)
            .map(|_| channel.reserve_turn())
            .collect::<Option<_>>()
            .unwrap();
        assert!(channel.reserve_turn().is_none());
        drop(slots);
        assert!(channel.reserve_turn().is_some());
    }

    #[test]
    fn resuming_past_the_end_gives_nothing() {
        let hub = SessionHub::new();
        let channel = hub.channel(SessionId::random());
        channel.publish(started(1));
        assert!(channel.events_after(1).is_empty());
        assert!(channel.events_after(u64::MAX).is_empty());
    }

    #[test]
    fn the_log_port_validates_ids_and_knows_empty_sessions() {
        let hub = SessionHub::new();
        assert_eq!(hub.events("nope"), Err(LogError::InvalidId));
        assert_eq!(hub.events(&SessionId::random().to_string()), Ok(vec![]));
        assert!(hub.is_empty(), "reading must not create sessions");
        let id = SessionId::random();
        hub.channel(id).publish(started(1));
        assert_eq!(hub.events(&id.to_string()).map(|e| e.len()), Ok(1));
    }
}
