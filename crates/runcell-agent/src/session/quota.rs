//! How fast one owner (a browser's cookie) may make new notebook sessions:
//! each is a row in the store and, once it runs code, a kernel. GCRA, as
//! the keys' run rate: a burst after a quiet spell, then a steady rate.
//! A cookie is free to drop, so the anonymous owners of one client address
//! also share one budget a minute ([`AddressRate`]). (The kernels one
//! owner's sessions hold at once are capped where they are opened, in
//! `agent::Kernels`.)

use std::net::IpAddr;
use std::num::NonZeroU32;
use std::sync::Arc;
use std::time::Duration;

use governor::clock::{Clock, DefaultClock};
use governor::state::keyed::DefaultKeyedStateStore;
use governor::{Quota, RateLimiter};

use super::clients::Clients;
use runcell_protocol::OwnerId;
use runcell_sandbox::slots::Claim;

/// Owners remembered before those with a full budget again are forgotten.
const REMEMBERED: usize = 10_000;

/// Whose budget of new sessions was used up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Budget {
    /// The owner's (its cookie's).
    Owner,
    /// The anonymous pages' of one client address, together.
    Address,
}

/// Too many sessions made lately.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TooManySessions {
    pub burst: u32,
    pub retry_after: Duration,
    pub budget: Budget,
}

impl std::fmt::Display for TooManySessions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.budget {
            Budget::Owner => write!(
                f,
                "you made {} sessions in a short time, the most allowed; retry in {}s",
                self.burst,
                self.retry_after_secs()
            ),
            // At most a minute: the budget is a minute's.
            Budget::Address => write!(
                f,
                "pages from your address made {} new sessions this minute, the most anonymous pages may; sign in, or try again within a minute",
                self.burst
            ),
        }
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
                budget: Budget::Owner,
            })
    }
}

/// How fast the anonymous owners (not signed in) of one client address may
/// make new sessions together: without it, a client that drops its cookie
/// is a new owner with a fresh budget at every request. The address is the
/// one [`Clients`] noted for the owner, as the sandbox slots count it; an
/// owner signed in, or from an address not known, is not held to it.
pub struct AddressRate {
    limiter: RateLimiter<IpAddr, DefaultKeyedStateStore<IpAddr>, DefaultClock>,
    per_minute: u32,
    clients: Arc<Clients>,
}

impl std::fmt::Debug for AddressRate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AddressRate")
            .field("per_minute", &self.per_minute)
            .finish_non_exhaustive()
    }
}

impl AddressRate {
    /// `per_minute` sessions a minute from each address, all of them at
    /// once after a quiet minute.
    pub fn new(per_minute: u32, clients: Arc<Clients>) -> Self {
        let per_minute = NonZeroU32::new(per_minute).unwrap_or(NonZeroU32::MIN);
        Self {
            limiter: RateLimiter::keyed(Quota::per_minute(per_minute)),
            per_minute: per_minute.get(),
            clients,
        }
    }

    /// Takes one new session of `owner`'s from its address's budget, when
    /// `owner` is anonymous from a known address.
    pub fn admit(&self, owner: OwnerId) -> Result<(), TooManySessions> {
        let Claim::Anonymous {
            client: Some(client),
        } = self.clients.claim_of(owner)
        else {
            return Ok(());
        };
        if self.limiter.len() > REMEMBERED {
            self.limiter.retain_recent();
        }
        self.limiter
            .check_key(&client)
            .map_err(|not_until| TooManySessions {
                burst: self.per_minute,
                retry_after: not_until.wait_time_from(DefaultClock::default().now()),
                budget: Budget::Address,
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

    #[test]
    fn the_anonymous_owners_of_one_address_share_a_budget() {
        let clients = Arc::new(Clients::default());
        let rate = AddressRate::new(2, Arc::clone(&clients));
        let here = IpAddr::from([198, 51, 100, 7]);
        let there = IpAddr::from([198, 51, 100, 8]);
        let owners: Vec<OwnerId> = (0..3).map(|_| OwnerId::random()).collect();
        for owner in &owners {
            clients.note(*owner, Some(here), false);
        }
        rate.admit(owners[0]).expect("the first");
        rate.admit(owners[1]).expect("another owner, the second");
        let refused = rate
            .admit(owners[2])
            .expect_err("a third owner, same address");
        assert_eq!((refused.burst, refused.budget), (2, Budget::Address));
        // A minute's budget: one comes back every 30 s.
        assert!(
            (29..=30).contains(&refused.retry_after_secs()),
            "{refused:?}"
        );
        assert_eq!(
            refused.to_string(),
            "pages from your address made 2 new sessions this minute, the most anonymous pages may; sign in, or try again within a minute"
        );
        // Another address, a person signed in, and an owner whose address
        // is not known are not held to it.
        let elsewhere = OwnerId::random();
        clients.note(elsewhere, Some(there), false);
        let person = OwnerId::random();
        clients.note(person, Some(here), true);
        let unknown = OwnerId::random();
        clients.note(unknown, None, false);
        for owner in [elsewhere, person, person, unknown, unknown] {
            assert_eq!(rate.admit(owner), Ok(()));
        }
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
