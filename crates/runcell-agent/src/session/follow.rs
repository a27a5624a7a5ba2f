//! Reading a session's events as they happen, for every reader (a page's
//! socket, a followed turn): each event after a given `seq` exactly once
//! and in order: from the history, a bounded page at a time, while the
//! reader is behind; from the live feed once it has caught up; and from the
//! history again when it falls behind the feed. No reader holds more than
//! a page of events it has not taken.

use std::sync::Arc;

use runcell_protocol::SessionEvent;
use tokio::sync::broadcast::{self, error::RecvError};

use super::SessionChannel;

/// Events read from the history at once, at most.
pub const PAGE_EVENTS: usize = 64;

/// One reader's place in a session's events.
pub struct Follower {
    channel: Arc<SessionChannel>,
    live: broadcast::Receiver<SessionEvent>,
    /// The newest `seq` given out.
    given: u64,
    /// The history holds events up to this `seq` that the live feed will
    /// not give (they came before the reader, or while it lagged).
    history_upto: u64,
}

impl Follower {
    /// Follows `channel` after `after`: the history's newest `seq` now, and
    /// the follower. A reader that claims more than the history holds
    /// follows from the newest event.
    pub fn after(channel: Arc<SessionChannel>, after: u64) -> (u64, Self) {
        let (last_seq, live) = channel.log().follow();
        let follower = Self {
            channel,
            live,
            given: after.min(last_seq),
            history_upto: last_seq,
        };
        (last_seq, follower)
    }

    /// Whether events of the history remain before the live feed.
    pub fn is_behind(&self) -> bool {
        self.given < self.history_upto
    }

    /// The newest `seq` given out.
    pub fn given(&self) -> u64 {
        self.given
    }

    /// The next events, oldest first: a page of the history while behind,
    /// else the next live event; `None` once the session's feed has
    /// closed. Cancel-safe: a dropped call loses nothing.
    pub async fn next(&mut self) -> Option<Vec<SessionEvent>> {
        loop {
            if self.is_behind() {
                let page = self.channel.log().page_after(self.given, PAGE_EVENTS);
                match page.last() {
                    Some(last) => {
                        self.given = last.seq;
                        return Some(page);
                    }
                    // The history is shorter than it was said to be.
                    None => self.history_upto = self.given,
                }
                continue;
            }
            match self.live.recv().await {
                Ok(event) if event.seq <= self.given => {}
                Ok(event) => {
                    self.given = event.seq;
                    return Some(vec![event]);
                }
                // Fell behind the live feed: the history has what it missed.
                Err(RecvError::Lagged(_)) => self.history_upto = self.channel.log().last_seq(),
                Err(RecvError::Closed) => return None,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use runcell_protocol::OwnerId;
    use runcell_protocol::{CellId, CellKind, EventBody};

    use super::*;
    use crate::session::SessionHub;

    fn started(cell: u64) -> EventBody {
        EventBody::CellStarted {
            cell_id: CellId(cell),
            cell_kind: CellKind::Code,
            language: None,
            attempt: None,
            source: None,
        }
    }

    async fn session(events: u64) -> (Arc<SessionChannel>, SessionHub, tempfile::TempDir) {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let store = runcell_store::SqliteStore::open_in(dir.path())
            .await
            .expect("a store");
        let hub = SessionHub::new(Arc::new(store));
        let channel = hub.create(OwnerId::random()).await.expect("a session");
        for cell in 1..=events {
            channel.log().publish(started(cell));
        }
        (channel, hub, dir)
    }

    /// Everything `follower` gives until it has caught up.
    async fn history(follower: &mut Follower) -> Vec<Vec<u64>> {
        let mut pages = Vec::new();
        while follower.is_behind() {
            let page = follower.next().await.expect("the feed is open");
            pages.push(page.iter().map(|e| e.seq).collect());
        }
        pages
    }

    #[tokio::test]
    async fn a_reader_behind_gets_the_history_a_page_at_a_time_then_the_live_feed() {
        let (channel, _hub, _dir) = session(150).await;
        let (last_seq, mut follower) = Follower::after(Arc::clone(&channel), 20);
        assert_eq!(last_seq, 150);
        let pages = history(&mut follower).await;
        assert!(pages.iter().all(|p| p.len() <= PAGE_EVENTS), "{pages:?}");
        let seqs: Vec<u64> = pages.into_iter().flatten().collect();
        assert_eq!(seqs, (21..=150).collect::<Vec<_>>());
        channel.log().publish(started(151));
        let next = follower.next().await.expect("the feed is open");
        assert_eq!(next.iter().map(|e| e.seq).collect::<Vec<_>>(), vec![151]);
    }

    #[tokio::test]
    async fn a_reader_that_claims_too_much_follows_from_now() {
        let (channel, _hub, _dir) = session(5).await;
        let (_, mut follower) = Follower::after(Arc::clone(&channel), 99);
        assert!(!follower.is_behind());
        channel.log().publish(started(6));
        let next = follower.next().await.expect("the feed is open");
        assert_eq!(next.iter().map(|e| e.seq).collect::<Vec<_>>(), vec![6]);
    }

    /// A reader that falls behind the live feed is not cut off and skips
    /// nothing: what the feed dropped comes from the history, and what the
    /// feed still holds twice is given once.
    #[tokio::test]
    async fn a_reader_that_lags_gets_every_event_once_in_order() {
        let (channel, _hub, _dir) = session(3).await;
        let (_, mut follower) = Follower::after(Arc::clone(&channel), 0);
        let mut seqs: Vec<u64> = history(&mut follower).await.into_iter().flatten().collect();
        for cell in 4..=3000 {
            channel.log().publish(started(cell));
        }
        while seqs.last() != Some(&3000) {
            let events = follower.next().await.expect("the feed is open");
            assert!(events.len() <= PAGE_EVENTS);
            seqs.extend(events.iter().map(|e| e.seq));
        }
        assert_eq!(seqs, (1..=3000).collect::<Vec<_>>());
    }
}
