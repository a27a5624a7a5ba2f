//! A kernel's restarts: one at a time, a restart asked for while one is under
//! way joins it (forty requests at once are one restart), and at most
//! `jupyter.restarts_per_minute` begun a minute; past it, one is refused
//! with the time to wait.

use std::num::NonZeroU32;
use std::time::Duration;

use governor::clock::{Clock, DefaultClock};
use governor::{DefaultDirectRateLimiter, Quota, RateLimiter};
use parking_lot::Mutex;
use tokio::sync::watch;

/// A restart that did not happen.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RestartError {
    #[error(
        "this kernel was restarted {per_minute} times in a minute, its most (jupyter.restarts_per_minute); retry in {}s",
        retry_after_secs(*.retry_after)
    )]
    TooMany {
        per_minute: u32,
        retry_after: Duration,
    },
    #[error("the kernel could not be restarted: {0}")]
    Failed(String),
    #[error("the restart was abandoned (the server is stopping)")]
    Abandoned,
}

impl RestartError {
    /// Whole seconds to wait before asking again, if waiting helps.
    pub fn retry_after_secs(&self) -> Option<u64> {
        match self {
            Self::TooMany { retry_after, .. } => Some(retry_after_secs(*retry_after)),
            Self::Failed(_) | Self::Abandoned => None,
        }
    }
}

fn retry_after_secs(wait: Duration) -> u64 {
    crate::auth::limits::retry_after_secs(wait)
}

type Outcome = Option<Result<(), RestartError>>;

/// One kernel's restarts.
pub struct Restarts {
    per_minute: u32,
    rate: DefaultDirectRateLimiter,
    /// The restart under way, or the last one (done once it holds a result).
    last: Mutex<Option<watch::Receiver<Outcome>>>,
}

impl std::fmt::Debug for Restarts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Restarts")
            .field("per_minute", &self.per_minute)
            .finish_non_exhaustive()
    }
}

/// What asking for a restart comes to.
#[derive(Debug)]
pub enum Begin {
    /// Do it, and say how it went through the ticket.
    Lead(Ticket),
    /// One is under way: its outcome is this one's.
    Join(Joined),
    Refused(RestartError),
}

/// The restart this caller is to do; dropped unfinished, it is abandoned.
#[derive(Debug)]
pub struct Ticket(watch::Sender<Outcome>);

/// A restart's outcome, to wait for.
#[derive(Debug)]
pub struct Joined(watch::Receiver<Outcome>);

impl Restarts {
    pub fn new(per_minute: u32) -> Self {
        let quota = Quota::per_minute(NonZeroU32::new(per_minute).unwrap_or(NonZeroU32::MIN));
        Self {
            per_minute,
            rate: RateLimiter::direct(quota),
            last: Mutex::new(None),
        }
    }

    pub fn begin(&self) -> Begin {
        let mut last = self.last.lock();
        if let Some(running) = last.as_ref()
            && running.borrow().is_none()
            && running.has_changed().is_ok()
        {
            return Begin::Join(Joined(running.clone()));
        }
        if let Err(not_until) = self.rate.check() {
            return Begin::Refused(RestartError::TooMany {
                per_minute: self.per_minute,
                retry_after: not_until.wait_time_from(DefaultClock::default().now()),
            });
        }
        let (done, running) = watch::channel(None);
        *last = Some(running);
        Begin::Lead(Ticket(done))
    }
}

impl Ticket {
    /// The outcome, for the leader to wait for too.
    pub fn joined(&self) -> Joined {
        Joined(self.0.subscribe())
    }

    pub fn finish(self, outcome: Result<(), RestartError>) {
        // No one waiting is fine.
        let _ = self.0.send(Some(outcome));
    }
}

impl Joined {
    pub async fn outcome(mut self) -> Result<(), RestartError> {
        loop {
            if let Some(outcome) = self.0.borrow_and_update().clone() {
                return outcome;
            }
            if self.0.changed().await.is_err() {
                return Err(RestartError::Abandoned);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn restarts_asked_for_during_one_join_it_and_a_minute_allows_so_many() {
        let restarts = Restarts::new(2);
        let Begin::Lead(ticket) = restarts.begin() else {
            panic!("the first leads")
        };
        let joiners: Vec<Joined> = (0..40)
            .map(|_| match restarts.begin() {
                Begin::Join(joined) => joined,
                other => panic!("{other:?}"),
            })
            .collect();
        ticket.finish(Ok(()));
        for joined in joiners {
            assert_eq!(joined.outcome().await, Ok(()));
        }
        let Begin::Lead(second) = restarts.begin() else {
            panic!("a second, once the first is done")
        };
        // Abandoned: whoever joined hears so, and the next may begin.
        let joined = second.joined();
        drop(second);
        assert_eq!(joined.outcome().await, Err(RestartError::Abandoned));
        match restarts.begin() {
            Begin::Refused(error) => {
                assert!(error.retry_after_secs().is_some_and(|s| s >= 1));
                assert!(error.to_string().contains("restarts_per_minute"));
            }
            other => panic!("a third within the minute: {other:?}"),
        }
    }
}
