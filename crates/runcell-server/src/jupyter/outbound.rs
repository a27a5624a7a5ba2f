//! The frames on their way to one connection, in a queue of its own whose
//! bytes are charged to its budget: a reader too slow for what it asked for
//! is cut off, not buffered for.

use std::collections::VecDeque;
use std::sync::Arc;

use parking_lot::Mutex;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use super::budget::{BudgetError, Charge, ConnectionBudget, Share};

/// The frames waiting to be written to one connection.
#[derive(Debug)]
pub struct Outbound {
    budget: Arc<ConnectionBudget>,
    queue: Mutex<Queue>,
    ready: Notify,
    /// Cancelled when the connection is cut off, for whoever is stuck
    /// writing to it.
    cut: CancellationToken,
}

#[derive(Debug, Default)]
struct Queue {
    frames: VecDeque<Sending>,
    /// Why the connection is cut off (its frames are dropped then).
    overflowed: Option<BudgetError>,
}

/// A frame on its way out, its bytes charged until it is dropped (once
/// written).
#[derive(Debug)]
pub struct Sending {
    pub frame: Arc<str>,
    _charge: Charge,
}

/// What a connection writes next.
#[derive(Debug)]
pub enum Next {
    Frame(Sending),
    /// Its unsent frames went past its budget: close it.
    Overflowed(BudgetError),
}

impl Outbound {
    pub fn new(budget: Arc<ConnectionBudget>) -> Self {
        Self {
            budget,
            queue: Mutex::new(Queue::default()),
            ready: Notify::new(),
            cut: CancellationToken::new(),
        }
    }

    /// Queues a frame, charged to the budget; one that does not fit cuts the
    /// connection off (what it had queued is dropped with it).
    pub fn push(&self, frame: &Arc<str>) -> Result<(), BudgetError> {
        let mut queue = self.queue.lock();
        if let Some(why) = &queue.overflowed {
            return Err(why.clone());
        }
        match self.budget.charge(frame.len(), Share::Whole) {
            Ok(charge) => {
                queue.frames.push_back(Sending {
                    frame: Arc::clone(frame),
                    _charge: charge,
                });
                drop(queue);
                self.ready.notify_one();
                Ok(())
            }
            Err(why) => {
                queue.frames.clear();
                queue.overflowed = Some(why.clone());
                drop(queue);
                self.ready.notify_one();
                self.cut.cancel();
                Err(why)
            }
        }
    }

    /// Resolves once the connection has been cut off.
    pub async fn cut_off(&self) {
        self.cut.cancelled().await;
    }

    /// The next frame to write, once there is one (one reader at a time).
    pub async fn next(&self) -> Next {
        loop {
            {
                let mut queue = self.queue.lock();
                if let Some(why) = &queue.overflowed {
                    return Next::Overflowed(why.clone());
                }
                if let Some(sending) = queue.frames.pop_front() {
                    return Next::Frame(sending);
                }
            }
            self.ready.notified().await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::budget::Budgets;
    use super::*;

    #[tokio::test]
    async fn frames_come_out_in_order_and_one_past_the_budget_cuts_the_connection_off() {
        let budget = Budgets::new(1, 8).connection("k");
        let outbound = Outbound::new(Arc::clone(&budget));
        let small: Arc<str> = Arc::from("x".repeat(1000));
        outbound.push(&small).expect("fits");
        outbound.push(&Arc::from("second")).expect("fits");
        let Next::Frame(first) = outbound.next().await else {
            panic!("a frame")
        };
        assert_eq!(first.frame, small);
        assert_eq!(budget.used(), 1000 + 6, "charged until written");
        drop(first);
        assert_eq!(budget.used(), 6);

        let big: Arc<str> = Arc::from("y".repeat(1024 * 1024));
        assert!(outbound.push(&big).is_err());
        assert_eq!(budget.used(), 0, "what was queued is dropped");
        assert!(matches!(outbound.next().await, Next::Overflowed(_)));
        assert!(outbound.push(&small).is_err());
    }
}
