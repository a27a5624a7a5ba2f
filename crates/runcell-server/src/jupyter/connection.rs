//! One client's connection to a kernel: the frames on their way to it, in a
//! queue of its own whose bytes are charged to its budget (a reader too slow
//! for what it asked for is cut off, not buffered for), and the pace its
//! messages are taken at.

use std::collections::VecDeque;
use std::num::NonZeroU32;
use std::sync::Arc;

use governor::{DefaultDirectRateLimiter, Quota, RateLimiter};
use parking_lot::Mutex;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use super::budget::{BudgetError, Charge, ConnectionBudget, Share};
use super::kernel::{Asked, Kernel, ReplyTo};
use super::message::Incoming;

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

/// How fast one connection's messages are taken.
struct MessageRate(DefaultDirectRateLimiter);

impl MessageRate {
    /// `per_second`, in bursts of as many, or of `burst` if more (a client
    /// may always send a full queue of cells at once: "Run all").
    fn new(per_second: u32, burst: usize) -> Self {
        let rate = NonZeroU32::new(per_second).unwrap_or(NonZeroU32::MIN);
        let burst = NonZeroU32::new(u32::try_from(burst).unwrap_or(u32::MAX))
            .unwrap_or(NonZeroU32::MIN)
            .max(rate);
        Self(RateLimiter::direct(
            Quota::per_second(rate).allow_burst(burst),
        ))
    }

    fn allow(&self) -> bool {
        self.0.check().is_ok()
    }
}

/// A connection to a kernel: its frames come through [`Self::next`]; it is
/// among the kernel's connections until it is dropped or cut off.
pub struct Connection {
    id: ReplyTo,
    pub kernel: Arc<Kernel>,
    outbound: Arc<Outbound>,
    budget: Arc<ConnectionBudget>,
    rate: MessageRate,
    per_second: u32,
}

impl Drop for Connection {
    fn drop(&mut self) {
        self.kernel.detach(self.id);
    }
}

impl Connection {
    pub(super) fn new(
        id: ReplyTo,
        kernel: Arc<Kernel>,
        outbound: Arc<Outbound>,
        budget: Arc<ConnectionBudget>,
        per_second: u32,
        burst: usize,
    ) -> Self {
        Self {
            id,
            kernel,
            outbound,
            budget,
            rate: MessageRate::new(per_second, burst),
            per_second,
        }
    }

    pub fn id(&self) -> ReplyTo {
        self.id
    }

    pub(super) fn budget(&self) -> &Arc<ConnectionBudget> {
        &self.budget
    }

    /// The next frame to write to the client.
    pub async fn next(&self) -> Next {
        self.outbound.next().await
    }

    /// Resolves once the connection is cut off (its unsent frames went
    /// past its budget), with why.
    pub async fn cut_off(&self) -> BudgetError {
        loop {
            self.outbound.cut.cancelled().await;
            if let Next::Overflowed(why) = self.outbound.next().await {
                return why;
            }
        }
    }

    /// Takes a client's message: the kernel handles it, unless the
    /// connection sends faster than `jupyter.messages_per_second`, when it
    /// is answered with an error (`RateLimited`) instead. A restart or
    /// shutdown it asks for is the caller's to do.
    pub fn receive(&self, message: Incoming) -> Option<Asked> {
        if self.rate.allow() {
            return self.kernel.handle(message, self);
        }
        tracing::debug!(kernel = %self.kernel.id, msg_type = %message.msg_type, "a Jupyter message over the rate is refused");
        self.kernel.refuse(
            &message,
            self.id,
            "RateLimited",
            &format!(
                "this connection sent more than {} messages a second (jupyter.messages_per_second); this one was not taken",
                self.per_second
            ),
        );
        None
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

    #[test]
    fn messages_beyond_the_rate_and_its_burst_are_not_allowed() {
        let rate = MessageRate::new(2, 5);
        let allowed = (0..20).filter(|_| rate.allow()).count();
        assert!((5..=6).contains(&allowed), "{allowed}");
    }
}
