//! Events reach the store through one writer task: publishing never waits for
//! the disk, events keep their order, and whatever has queued up while a
//! transaction ran goes in the next one (a streaming turn's hundreds of token
//! events cost a few commits, not hundreds).

use std::sync::Arc;
use std::time::Duration;

use runcell_protocol::SessionEvent;
use tokio::sync::{mpsc, oneshot};

use runcell_protocol::SessionId;
use runcell_store::Store;

/// The most events one transaction takes.
const MAX_BATCH: usize = 2048;

/// Waits between tries when the database refuses a batch.
const RETRIES: [Duration; 3] = [
    Duration::from_millis(50),
    Duration::from_millis(500),
    Duration::from_secs(2),
];

enum Write {
    Event(SessionId, SessionEvent),
    Flush(oneshot::Sender<()>),
}

/// The sending side; cheap to clone.
#[derive(Clone)]
pub struct EventWriter {
    tx: mpsc::UnboundedSender<Write>,
    unstored: Unstored,
}

/// Sessions some of whose events the store refused for good: their memory
/// is the only full copy, so they must not be let go from it.
pub type Unstored = Arc<parking_lot::Mutex<std::collections::HashSet<SessionId>>>;

impl EventWriter {
    /// Starts the writer task on the current runtime.
    pub fn spawn(store: Arc<dyn Store>) -> Self {
        let (tx, rx) = mpsc::unbounded_channel();
        let unstored = Unstored::default();
        tokio::spawn(write_loop(store, rx, Arc::clone(&unstored)));
        Self { tx, unstored }
    }

    /// Whether the store refused some of `session`'s events for good.
    pub fn lost_events_of(&self, session: SessionId) -> bool {
        self.unstored.lock().contains(&session)
    }

    /// Queues an event; it is stored after every event queued before it.
    pub fn write(&self, session: SessionId, event: SessionEvent) {
        if self.tx.send(Write::Event(session, event)).is_err() {
            tracing::error!(%session, "the event writer has stopped; an event is not stored");
        }
    }

    /// Resolves once every event queued before the call is stored (or given
    /// up on).
    pub async fn flush(&self) {
        let (done, wait) = oneshot::channel();
        if self.tx.send(Write::Flush(done)).is_ok() {
            let _ = wait.await;
        }
    }
}

async fn write_loop(
    store: Arc<dyn Store>,
    mut rx: mpsc::UnboundedReceiver<Write>,
    unstored: Unstored,
) {
    let mut batch = Vec::new();
    let mut waiting = Vec::new();
    while let Some(first) = rx.recv().await {
        let mut next = Some(first);
        while let Some(write) = next.take() {
            match write {
                Write::Event(session, event) => batch.push((session, event)),
                Write::Flush(done) => waiting.push(done),
            }
            if batch.len() < MAX_BATCH {
                next = rx.try_recv().ok();
            }
        }
        if !store_batch(store.as_ref(), &batch).await {
            unstored
                .lock()
                .extend(batch.iter().map(|(session, _)| *session));
        }
        batch.clear();
        for done in waiting.drain(..) {
            let _ = done.send(());
        }
    }
}

/// Stores a batch, trying again a few times; false if it was given up on.
async fn store_batch(store: &dyn Store, batch: &[(SessionId, SessionEvent)]) -> bool {
    if batch.is_empty() {
        return true;
    }
    let mut last_error = None;
    for wait in std::iter::once(Duration::ZERO).chain(RETRIES) {
        tokio::time::sleep(wait).await;
        match store.append_events(batch).await {
            Ok(()) => return true,
            Err(err) => {
                tracing::warn!(%err, events = batch.len(), "storing events failed; trying again");
                last_error = Some(err);
            }
        }
    }
    if let Some(err) = last_error {
        tracing::error!(%err, events = batch.len(), "events could not be stored: they live in memory until the server stops");
    }
    false
}
