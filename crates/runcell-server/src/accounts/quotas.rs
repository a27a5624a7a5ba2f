//! A signed-in person's limits, as the notebook service asks for them
//! ([`OwnerQuotas`]): their turns a minute (a token bucket per person on
//! this node), the model's time a day (kept in the store, so it holds
//! across restarts and nodes), their notebooks and live kernels. An owner
//! who is nobody's account (an anonymous browser) gets `None`: the
//! anonymous budgets hold for them.

use std::collections::HashMap;
use std::num::NonZeroU32;
use std::sync::Arc;

use app::api::OwnerId;
use governor::{DefaultDirectRateLimiter, Quota, RateLimiter};

use super::Accounts;
use crate::config::UserLimits;
use runcell_agent::session::quota::{OverQuota, OwnerQuotas};
use runcell_store::{LimitOverrides, UserRecord};

/// Milliseconds in a day: the model's time is counted per UTC day.
const DAY_MS: u64 = 24 * 3600 * 1000;

/// Today, as the store counts days (since 1970, UTC).
pub fn today() -> u64 {
    runcell_core::clock::now_ms() / DAY_MS
}

/// A person's limits: their overrides, else the configured defaults.
pub fn effective(defaults: &UserLimits, overrides: &LimitOverrides) -> UserLimits {
    UserLimits {
        live_kernels: overrides.live_kernels.unwrap_or(defaults.live_kernels),
        sessions: overrides.sessions.unwrap_or(defaults.sessions),
        runs_per_minute: overrides
            .runs_per_minute
            .unwrap_or(defaults.runs_per_minute),
        model_seconds_per_day: overrides
            .model_seconds_per_day
            .unwrap_or(defaults.model_seconds_per_day),
        storage_mib: overrides.storage_mib.unwrap_or(defaults.storage_mib),
    }
}

/// The per-person state of the limits on this node.
#[derive(Default)]
pub struct Meters {
    /// Each person's turn bucket, with the rate it was made for.
    turns: parking_lot::Mutex<HashMap<String, (u32, DefaultDirectRateLimiter)>>,
    /// The model's time today per person, as far as this node knows: the
    /// store's count when read, plus what this node has added since.
    model_today: parking_lot::Mutex<HashMap<String, (u64, u64)>>,
}

/// People kept in the meters at most; past it they start over.
const MAX_METERED: usize = 10_000;

impl Accounts {
    /// The account whose notebooks `owner` holds, as this node last saw it
    /// signed in.
    fn account_of(&self, owner: OwnerId) -> Option<Arc<UserRecord>> {
        let id = self.owners.read().get(&owner).cloned()?;
        self.people
            .lock()
            .get(&id)
            .map(|(user, _)| Arc::clone(user))
    }

    /// A person's limits now.
    pub fn limits_of(&self, user: &UserRecord) -> UserLimits {
        effective(&self.defaults, &user.limits)
    }

    /// The model's time `user` has had today, in milliseconds.
    pub fn model_ms_today(&self, user: &UserRecord) -> u64 {
        let day = today();
        let stored = user.model_ms_on(day);
        let local = self
            .meters
            .model_today
            .lock()
            .get(&user.id)
            .filter(|(on, _)| *on == day)
            .map_or(0, |(_, ms)| *ms);
        stored.max(local)
    }
}

impl OwnerQuotas for Accounts {
    fn admit_turn(&self, owner: OwnerId) -> Result<(), OverQuota> {
        let Some(user) = self.account_of(owner) else {
            return Ok(());
        };
        let limits = self.limits_of(&user);
        let allowed_ms = u64::from(limits.model_seconds_per_day) * 1000;
        if self.model_ms_today(&user) >= allowed_ms {
            return Err(OverQuota(format!(
                "your account's model time for today ({} minutes) is used up; it starts again at midnight UTC",
                limits.model_seconds_per_day / 60
            )));
        }
        let rate = limits.runs_per_minute.max(1);
        let mut turns = self.meters.turns.lock();
        if turns.len() >= MAX_METERED {
            turns.clear();
        }
        let entry = turns
            .entry(user.id.clone())
            .or_insert_with(|| (0, bucket(rate)));
        if entry.0 != rate {
            *entry = (rate, bucket(rate));
        }
        entry.1.check().map_err(|_| {
            OverQuota(format!(
                "your account may start {rate} turns a minute; wait a moment and ask again"
            ))
        })
    }

    fn turn_used(&self, owner: OwnerId, model_ms: u64) {
        let Some(user) = self.account_of(owner) else {
            return;
        };
        let day = today();
        {
            let mut today_of = self.meters.model_today.lock();
            if today_of.len() >= MAX_METERED {
                today_of.clear();
            }
            let stored = user.model_ms_on(day);
            let entry = today_of.entry(user.id.clone()).or_insert((day, stored));
            if entry.0 != day {
                *entry = (day, 0);
            }
            entry.1 = entry.1.max(stored) + model_ms;
        }
        let users = Arc::clone(&self.users);
        let id = user.id.clone();
        tokio::spawn(async move {
            if let Err(err) = users.add_usage(&id, 1, model_ms, day).await {
                tracing::warn!(%err, "cannot add to a person's usage");
            }
        });
    }

    fn session_cap(&self, owner: OwnerId) -> Option<usize> {
        let user = self.account_of(owner)?;
        usize::try_from(self.limits_of(&user).sessions).ok()
    }

    fn kernel_cap(&self, owner: OwnerId) -> Option<usize> {
        let user = self.account_of(owner)?;
        // What their keys' sessions hold is taken from their notebooks'.
        let limit = usize::try_from(self.limits_of(&user).live_kernels).ok()?;
        Some(limit.saturating_sub(self.key_sessions_of(&user.id)))
    }

    fn storage_cap(&self, owner: OwnerId) -> Option<u64> {
        let user = self.account_of(owner)?;
        Some(u64::from(self.limits_of(&user).storage_mib) * 1024 * 1024)
    }
}

/// A bucket of `per_minute` turns, all of them at once after a quiet spell.
fn bucket(per_minute: u32) -> DefaultDirectRateLimiter {
    let rate = NonZeroU32::new(per_minute).unwrap_or(NonZeroU32::MIN);
    RateLimiter::direct(Quota::per_minute(rate))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overrides_replace_the_defaults_one_by_one() {
        let defaults = UserLimits::default();
        let mine = effective(
            &defaults,
            &LimitOverrides {
                live_kernels: Some(1),
                model_seconds_per_day: Some(60),
                ..LimitOverrides::default()
            },
        );
        assert_eq!(mine.live_kernels, 1);
        assert_eq!(mine.model_seconds_per_day, 60);
        assert_eq!(mine.sessions, defaults.sessions);
        assert_eq!(mine.runs_per_minute, defaults.runs_per_minute);
        assert_eq!(mine.storage_mib, defaults.storage_mib);
    }

    #[test]
    fn a_bucket_gives_its_minute_at_once_then_refuses() {
        let bucket = bucket(3);
        for _ in 0..3 {
            assert!(bucket.check().is_ok());
        }
        assert!(bucket.check().is_err());
    }
}
