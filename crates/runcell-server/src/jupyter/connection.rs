//! One client's connection to a kernel: its frames' queue, and the pace its
//! messages are taken at.

use std::num::NonZeroU32;
use std::sync::Arc;

use governor::{DefaultDirectRateLimiter, Quota, RateLimiter};

use super::budget::{BudgetError, ConnectionBudget};
use super::kernel::{Asked, JupyterKernel, ReplyTo};
use super::message::Incoming;
use super::outbound::{Next, Outbound};

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
    pub kernel: Arc<JupyterKernel>,
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
    /// A new connection to `kernel`, its frames charged to `budget`;
    /// counted among the kernel's until it is dropped or cut off.
    pub fn open(kernel: Arc<JupyterKernel>, budget: Arc<ConnectionBudget>) -> Self {
        let outbound = Arc::new(Outbound::new(Arc::clone(&budget)));
        let id = kernel.attach(Arc::clone(&outbound));
        let settings = kernel.settings();
        let (per_second, burst) = (settings.messages_per_second, settings.max_queued_cells);
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

    /// The next frame to write to the client.
    pub async fn next(&self) -> Next {
        self.outbound.next().await
    }

    /// Resolves once the connection is cut off (its unsent frames went
    /// past its budget), with why.
    pub async fn cut_off(&self) -> BudgetError {
        loop {
            self.outbound.cut_off().await;
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
            return self.kernel.handle(message, self.id, &self.budget);
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
    use super::*;

    #[test]
    fn messages_beyond_the_rate_and_its_burst_are_not_allowed() {
        let rate = MessageRate::new(2, 5);
        let allowed = (0..20).filter(|_| rate.allow()).count();
        assert!((5..=6).contains(&allowed), "{allowed}");
    }
}
