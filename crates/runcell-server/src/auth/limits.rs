//! Per-key limits: a run rate (GCRA, burst after a quiet spell), runs under
//! way at once, and sandbox sessions held open.

use std::collections::HashMap;
use std::num::NonZeroU32;
use std::sync::Arc;
use std::time::Duration;

use governor::clock::{Clock, DefaultClock};
use governor::middleware::StateInformationMiddleware;
use governor::state::keyed::DefaultKeyedStateStore;
use governor::{Quota, RateLimiter};
use parking_lot::Mutex;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::config::AuthConfig;

type KeyedLimiter =
    RateLimiter<String, DefaultKeyedStateStore<String>, DefaultClock, StateInformationMiddleware>;

/// Why a request of a key was refused for now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Limited {
    /// Too many runs started lately.
    Rate { limit: u32, retry_after: Duration },
    /// Too many runs under way.
    Concurrency { limit: u32 },
    /// Too many sandbox sessions open.
    SandboxSessions { limit: u32 },
    /// The person the key belongs to holds their most kernels (their
    /// notebooks' and their keys' sessions together).
    PersonKernels { limit: u32 },
}

impl Limited {
    /// The limit that was hit, as `X-RateLimit-Limit` states it.
    pub fn limit(&self) -> u32 {
        match self {
            Self::Rate { limit, .. }
            | Self::Concurrency { limit }
            | Self::SandboxSessions { limit }
            | Self::PersonKernels { limit } => *limit,
        }
    }

    /// Whole seconds to wait before trying again (at least 1).
    pub fn retry_after_secs(&self) -> u64 {
        match self {
            Self::Rate { retry_after, .. } => retry_after_secs(*retry_after),
            Self::Concurrency { .. } => 1,
            // A session frees up only when one is closed or idles out.
            Self::SandboxSessions { .. } | Self::PersonKernels { .. } => 10,
        }
    }

    pub fn message(&self) -> String {
        match self {
            Self::Rate { limit, .. } => format!(
                "this key started runs faster than allowed (bursts of {limit}); retry in {}s",
                self.retry_after_secs()
            ),
            Self::Concurrency { limit } => {
                format!("this key has {limit} runs under way, its most; retry when one ends")
            }
            Self::SandboxSessions { limit } => {
                format!("this key has {limit} sandbox sessions open, its most; close one first")
            }
            Self::PersonKernels { limit } => format!(
                "the account this key belongs to may hold {limit} live kernels, its notebooks' and its keys' together, and holds them all; close one first"
            ),
        }
    }
}

/// What a started run may tell its caller about the rate limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RateState {
    pub limit: u32,
    pub remaining: u32,
}

/// Held while a run is under way; dropping it frees the slot.
#[derive(Debug)]
pub struct RunPermit {
    _slot: OwnedSemaphorePermit,
    pub rate: RateState,
}

pub struct KeyLimits {
    rate: KeyedLimiter,
    burst: u32,
    concurrent: u32,
    sessions: u32,
    running: Mutex<HashMap<String, Arc<Semaphore>>>,
}

impl std::fmt::Debug for KeyLimits {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KeyLimits")
            .field("burst", &self.burst)
            .field("concurrent", &self.concurrent)
            .field("sessions", &self.sessions)
            .finish_non_exhaustive()
    }
}

impl KeyLimits {
    pub fn new(config: &AuthConfig) -> Self {
        let one = NonZeroU32::MIN;
        let per_minute = NonZeroU32::new(config.runs_per_minute).unwrap_or(one);
        let burst = NonZeroU32::new(config.run_burst).unwrap_or(one);
        let quota = Quota::per_minute(per_minute).allow_burst(burst);
        Self {
            rate: RateLimiter::keyed(quota).with_middleware::<StateInformationMiddleware>(),
            burst: burst.get(),
            concurrent: config.max_concurrent_runs.max(1),
            sessions: config.max_live_sessions.max(1),
            running: Mutex::new(HashMap::new()),
        }
    }

    /// Admits one run of `key`: a free slot first (so that a refused run
    /// costs no rate), then the rate.
    pub fn start_run(&self, key: &str) -> Result<RunPermit, Limited> {
        let slots = Arc::clone(
            self.running
                .lock()
                .entry(key.to_string())
                .or_insert_with(|| Arc::new(Semaphore::new(self.concurrent as usize))),
        );
        let slot = slots
            .try_acquire_owned()
            .map_err(|_| Limited::Concurrency {
                limit: self.concurrent,
            })?;
        match self.rate.check_key(&key.to_string()) {
            Ok(snapshot) => Ok(RunPermit {
                _slot: slot,
                rate: RateState {
                    limit: self.burst,
                    remaining: snapshot.remaining_burst_capacity(),
                },
            }),
            Err(not_until) => Err(Limited::Rate {
                limit: self.burst,
                retry_after: not_until.wait_time_from(DefaultClock::default().now()),
            }),
        }
    }

    /// Whether `key` may open another session while holding `open` ones.
    pub fn admit_session(&self, open: usize) -> Result<(), Limited> {
        if open >= self.sessions as usize {
            Err(Limited::SandboxSessions {
                limit: self.sessions,
            })
        } else {
            Ok(())
        }
    }

    pub fn max_sessions(&self) -> u32 {
        self.sessions
    }
}

pub use runcell_core::retry_after_secs;

#[cfg(test)]
mod tests {
    use super::*;

    /// One run a minute comes back: no test waits that long.
    fn limits(runs_per_minute: u32, burst: u32, concurrent: u32) -> KeyLimits {
        KeyLimits::new(&AuthConfig {
            runs_per_minute,
            run_burst: burst,
            max_concurrent_runs: concurrent,
            max_live_sessions: 2,
            ..AuthConfig::default()
        })
    }

    #[test]
    fn a_burst_is_allowed_then_the_rate_applies_per_key() {
        let limits = limits(1, 3, 100);
        let permits: Vec<RunPermit> = (0..3)
            .map(|_| limits.start_run("a").expect("within the burst"))
            .collect();
        assert_eq!(
            permits[0].rate,
            RateState {
                limit: 3,
                remaining: 2
            }
        );
        assert_eq!(permits[2].rate.remaining, 0);
        let refused = limits.start_run("a").expect_err("past the burst");
        assert!(matches!(refused, Limited::Rate { limit: 3, .. }));
        assert!(refused.retry_after_secs() >= 1);
        assert!(
            limits.start_run("b").is_ok(),
            "another key has its own budget"
        );
    }

    #[test]
    fn runs_under_way_are_capped_and_freed_when_done() {
        let limits = limits(60_000, 1000, 2);
        let first = limits.start_run("a").expect("one");
        let _second = limits.start_run("a").expect("two");
        assert_eq!(
            limits.start_run("a").expect_err("three"),
            Limited::Concurrency { limit: 2 }
        );
        drop(first);
        assert!(
            limits.start_run("a").is_ok(),
            "a finished run frees its slot"
        );
    }

    #[test]
    fn sessions_are_capped() {
        let limits = limits(1, 1, 1);
        assert!(limits.admit_session(1).is_ok());
        assert_eq!(
            limits.admit_session(2),
            Err(Limited::SandboxSessions { limit: 2 })
        );
    }
}
