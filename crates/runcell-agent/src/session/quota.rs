//! How fast one owner (a browser's cookie) may make new notebook sessions:
//! each is a row in the store and, once it runs code, a kernel. GCRA, as
//! the keys' run rate: a burst after a quiet spell, then a steady rate.
//! (The kernels one owner's sessions hold at once are capped where they are
//! opened, in `agent::Kernels`.)

use std::num::NonZeroU32;
use std::time::Duration;

use governor::clock::{Clock, DefaultClock};
use governor::state::keyed::DefaultKeyedStateStore;
use governor::{Quota, RateLimiter};

use super::OwnerId;

/// Owners remembered before those with a full budget again are forgotten.
const REMEMBERED: usize = 10_000;

/// Too many sessions made lately.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TooManySessions {
    pub burst: u32,
    pub retry_after: Duration,
}

impl std::fmt::Display for TooManySessions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "you made {} sessions in a short time, the most allowed; retry in {}s",
            self.burst,
            self.retry_after_secs()
        )
    }
}

impl std::error::Error for TooManySessions {}

impl TooManySessions {
    /// Whole seconds to wait (at least 1).
    pub fn retry_after_secs(&self) -> u64 {
        runcell_core::retry_after_secs(self.retry_after)
    }
}

pub struct NewSessionRate {
    limiter: RateLimiter<OwnerId, DefaultKeyedStateStore<OwnerId>, DefaultClock>,
    burst: u32,
}

impl std::fmt::Debug for NewSessionRate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NewSessionRate")
            .field("burst", &self.burst)
            .finish_non_exhaustive()
    }
}

impl NewSessionRate {
    pub fn new(per_hour: u32, burst: u32) -> Self {
        let per_hour = NonZeroU32::new(per_hour).unwrap_or(NonZeroU32::MIN);
        let burst = NonZeroU32::new(burst).unwrap_or(NonZeroU32::MIN);
        Self {
            limiter: RateLimiter::keyed(Quota::per_hour(per_hour).allow_burst(burst)),
            burst: burst.get(),
        }
    }

    /// As many as anyone could want (tests, benches).
    pub fn unlimited() -> Self {
        Self::new(u32::MAX, u32::MAX)
    }

    /// Takes one new session from `owner`'s budget.
    pub fn admit(&self, owner: OwnerId) -> Result<(), TooManySessions> {
        if self.limiter.len() > REMEMBERED {
            self.limiter.retain_recent();
        }
        self.limiter
            .check_key(&owner)
            .map_err(|not_until| TooManySessions {
                burst: self.burst,
                retry_after: not_until.wait_time_from(DefaultClock::default().now()),
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_owner_has_a_burst_then_waits() {
        let rate = NewSessionRate::new(1, 3);
        let owner = OwnerId::random();
        for _ in 0..3 {
            rate.admit(owner).expect("within the burst");
        }
        let refused = rate.admit(owner).expect_err("past the burst");
        assert!(refused.retry_after_secs() > 60, "{refused:?}");
        assert!(refused.to_string().contains("retry in"), "{refused}");
        assert!(rate.admit(OwnerId::random()).is_ok(), "another owner");
        assert!(NewSessionRate::unlimited().admit(owner).is_ok());
    }
}

/// A person's limits, beyond the server's own caps: their turns a minute,
/// the model's time a day, their notebooks and live kernels. The server
/// implements it for signed-in people; an owner it does not know (an
/// anonymous browser) has none of these (the anonymous budgets hold).
pub trait OwnerQuotas: Send + Sync {
    /// Before a turn of `owner`'s starts: why not, when over a limit.
    fn admit_turn(&self, owner: OwnerId) -> Result<(), OverQuota>;
    /// After a turn: the model's time it took.
    fn turn_used(&self, owner: OwnerId, model_ms: u64);
    /// The most notebooks `owner` may keep, if they have a limit.
    fn session_cap(&self, owner: OwnerId) -> Option<usize>;
    /// The most kernels `owner`'s notebooks may hold at once, if they have
    /// a limit of their own.
    fn kernel_cap(&self, owner: OwnerId) -> Option<usize>;
    /// The most bytes `owner`'s notebooks may keep in files, if they have a
    /// limit.
    fn storage_cap(&self, owner: OwnerId) -> Option<u64>;
}

/// A limit of a person's was reached; the message says which and until when.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct OverQuota(pub String);
