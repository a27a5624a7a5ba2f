//! One session's event log: its history in memory, numbered from 1 without
//! gaps, each event queued for the store as it is recorded and sent to
//! every follower. Recording and subscribing take the same lock, so a
//! follower sees every event exactly once: either in the history it reads
//! or on the live feed.
//!
//! This is all a turn is handed of its session: it reads the history and
//! adds to it; turn slots, stops and which node holds the session are the
//! [`SessionChannel`](super::SessionChannel)'s.

use parking_lot::Mutex;
use runcell_core::clock::now_ms;
use runcell_protocol::notebook::Notebook;
use runcell_protocol::{
    CellError, CellId, CellStatus, EventBody, KernelLoss, SessionEvent, TurnId, TurnStatus,
};
use tokio::sync::broadcast;

use super::writer::EventWriter;
use runcell_protocol::{OwnerId, SessionId};

/// Live events a slow reader may fall behind by before it re-reads the history.
const LIVE_BUFFER: usize = 1024;

/// One session's history and its live feed.
pub struct SessionLog {
    id: SessionId,
    /// Changes only when a terminal joins a browser's owner.
    owner: Mutex<OwnerId>,
    inner: Mutex<History>,
    writer: EventWriter,
    live: broadcast::Sender<SessionEvent>,
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

    fn after(&self, after: u64) -> &[SessionEvent] {
        let start = usize::try_from(after)
            .unwrap_or(usize::MAX)
            .min(self.events.len());
        &self.events[start..]
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

impl SessionLog {
    /// A log whose history so far is `events` (already stored), and the
    /// next turn id that history leaves (one fold of it gives both).
    pub(super) fn new(
        id: SessionId,
        owner: OwnerId,
        events: Vec<SessionEvent>,
        writer: EventWriter,
    ) -> (Self, TurnId) {
        let notebook = Notebook::from_events(&events);
        let log = Self {
            id,
            owner: Mutex::new(owner),
            inner: Mutex::new(History {
                bytes: events.iter().map(json_bytes).sum(),
                events,
                next_cell: notebook.max_cell_id(),
            }),
            writer,
            live: broadcast::channel(LIVE_BUFFER).0,
        };
        (log, TurnId(notebook.max_turn_id() + 1))
    }

    pub fn id(&self) -> SessionId {
        self.id
    }

    pub fn owner(&self) -> OwnerId {
        *self.owner.lock()
    }

    pub(super) fn set_owner(&self, owner: OwnerId) {
        *self.owner.lock() = owner;
    }

    /// What the session's history holds in memory (its events as JSON).
    pub fn bytes(&self) -> usize {
        self.inner.lock().bytes
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

    /// Appends events the holding node stored (read back from the store)
    /// and sends them to every subscriber: those already here are skipped,
    /// and a gap ends the batch (the next read fills it). How many were new.
    pub(super) fn mirror(&self, events: Vec<SessionEvent>) -> usize {
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

    /// Appends the store's events after this node took the session over,
    /// and goes on numbering cells from them; the next turn id they leave.
    pub(super) fn take_over(&self, events: Vec<SessionEvent>) -> TurnId {
        self.mirror(events);
        let mut history = self.inner.lock();
        let notebook = Notebook::from_events(&history.events);
        history.next_cell = history.next_cell.max(notebook.max_cell_id());
        TurnId(notebook.max_turn_id() + 1)
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
        let events = history.after(after);
        events[..limit.min(events.len())].to_vec()
    }

    pub fn events_after(&self, after: u64) -> Vec<SessionEvent> {
        self.inner.lock().after(after).to_vec()
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

    /// Closes what a history cut short left open (the server stopped
    /// mid-turn, or a link was shared mid-turn), and records that the kernel
    /// which ran its code is gone.
    pub fn settle(&self, reason: KernelLoss) {
        let notebook = Notebook::from_events(&self.events_after(0));
        let (cells, turn) = notebook.unfinished();
        let message = match reason {
            KernelLoss::ServerRestart => "The server stopped before this cell finished.",
            KernelLoss::Fork | KernelLoss::ForkWithoutFiles => {
                "This cell had not finished when the session was shared."
            }
            KernelLoss::Import => "This cell was not finished in the imported notebook.",
        };
        for cell_id in cells {
            self.publish(EventBody::CellFinished {
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
            self.publish(EventBody::TurnFinished {
                turn,
                status: TurnStatus::Cancelled,
                elapsed_ms: 0,
                final_cell: None,
            });
        }
        // A fork has no kernel at all, even when the original had already
        // lost its own; a restart matters only if code ran since the last
        // loss.
        let lost = match reason {
            KernelLoss::Fork | KernelLoss::ForkWithoutFiles => {
                notebook.kernel_used() || notebook.kernel_lost().is_some()
            }
            // Nothing of an imported notebook ran here.
            KernelLoss::Import => true,
            KernelLoss::ServerRestart => notebook.kernel_used(),
        };
        if lost {
            self.publish(EventBody::KernelLost { reason });
        }
    }
}
