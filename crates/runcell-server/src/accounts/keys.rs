//! A person's own API keys, made at `/account`: at most
//! `auth.keys_per_person` live at once, and at most
//! `auth.keys_made_per_hour` made an hour. Every key a person makes shares
//! their budgets (see `auth::limits`), so more keys buy no more work; these
//! caps keep the key table, the account page and each node's revocation
//! watch small as well.

use std::num::NonZeroU32;
use std::sync::Arc;
use std::time::Duration;

use governor::clock::{Clock, DefaultClock};
use governor::state::keyed::DefaultKeyedStateStore;
use governor::{Quota, RateLimiter};

use super::{AccountError, Accounts};
use crate::auth::ApiKey;
use crate::config::AuthConfig;
use crate::person_keys::{KeySessions, PersonRoom};
use runcell_store::{KeyRecord, UserRecord};

type PersonLimiter = RateLimiter<String, DefaultKeyedStateStore<String>, DefaultClock>;

/// The caps on making keys, on this node.
pub(crate) struct KeyMaking {
    live: u32,
    per_hour: u32,
    made: PersonLimiter,
    /// Held from counting a person's keys to storing the new one, so that
    /// keys made at once cannot each see room for themselves.
    one_at_a_time: tokio::sync::Mutex<()>,
}

impl KeyMaking {
    pub(crate) fn new(config: &AuthConfig) -> Self {
        let per_hour = NonZeroU32::new(config.keys_made_per_hour).unwrap_or(NonZeroU32::MIN);
        Self {
            live: config.keys_per_person,
            per_hour: per_hour.get(),
            made: RateLimiter::keyed(Quota::per_hour(per_hour)),
            one_at_a_time: tokio::sync::Mutex::new(()),
        }
    }
}

/// Why a key was not made, for the person.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeyRefusal {
    /// They hold the most live keys.
    TooMany { live: u32 },
    /// They made the most keys this hour.
    TooFast {
        per_hour: u32,
        retry_after: Duration,
    },
}

impl KeyRefusal {
    pub fn retry_after_secs(&self) -> u64 {
        match self {
            Self::TooMany { .. } => 0,
            Self::TooFast { retry_after, .. } => {
                crate::auth::limits::retry_after_secs(*retry_after)
            }
        }
    }
}

impl std::fmt::Display for KeyRefusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::TooMany { live } => write!(
                f,
                "you have {live} live API keys, the most a person may hold (auth.keys_per_person); revoke one first"
            ),
            Self::TooFast { per_hour, .. } => write!(
                f,
                "you made {per_hour} API keys within the hour, the most a person may (auth.keys_made_per_hour); try again in {} s",
                self.retry_after_secs()
            ),
        }
    }
}

impl Accounts {
    /// Makes a key named `name` for `me`, within their caps; the key is
    /// returned once and never stored. Written to the audit log.
    pub async fn make_key(
        &self,
        me: &UserRecord,
        name: &str,
    ) -> Result<(ApiKey, KeyRecord), AccountError> {
        let making = &self.key_making;
        let _one = making.one_at_a_time.lock().await;
        let live = self
            .auth
            .keys_of(&me.id)
            .await?
            .iter()
            .filter(|key| key.is_live())
            .count();
        if live >= making.live as usize {
            return Err(AccountError::KeyRefused(KeyRefusal::TooMany {
                live: making.live,
            }));
        }
        if let Err(not_until) = making.made.check_key(&me.id) {
            return Err(AccountError::KeyRefused(KeyRefusal::TooFast {
                per_hour: making.per_hour,
                retry_after: not_until.wait_time_from(DefaultClock::default().now()),
            }));
        }
        let (key, record) = self.auth.create_key_for(&me.id, name).await?;
        self.note(
            Some(&me.id),
            "key_created",
            Some(&record.id),
            format!("{} made the API key {}", me.display_name(), record.name),
        )
        .await;
        Ok((key, record))
    }
}

impl Accounts {
    /// Counts what people's keys hold against their `live_kernels`; set
    /// once at start (held weakly: the code API holds the accounts).
    pub fn count_key_sessions_with(&self, sessions: &Arc<dyn KeySessions>) {
        if self.key_sessions.set(Arc::downgrade(sessions)).is_err() {
            tracing::warn!("the accounts' key sessions were set twice; the first stand");
        }
    }

    /// The sandbox sessions `user_id`'s keys hold here.
    pub(crate) fn key_sessions_of(&self, user_id: &str) -> usize {
        self.key_sessions
            .get()
            .and_then(std::sync::Weak::upgrade)
            .map_or(0, |sessions| sessions.held_by_person(user_id))
    }

    /// The kernels `owner`'s notebooks hold here.
    fn notebook_kernels_of(&self, owner: app::api::OwnerId) -> usize {
        self.holders
            .get()
            .map_or(&[][..], Vec::as_slice)
            .iter()
            .map(|holder| holder.kernels_of(owner))
            .sum()
    }
}

#[async_trait::async_trait]
impl PersonRoom for Accounts {
    async fn room_for_keys(&self, user_id: &str) -> (usize, u32) {
        let user = match self.person(user_id).await {
            Ok(Some(user)) => user,
            Ok(None) => return (0, 0),
            Err(err) => {
                tracing::warn!(%err, "cannot read a key's person; its session is refused");
                return (0, 0);
            }
        };
        let limit = self.limits_of(&user).live_kernels;
        let room = usize::try_from(limit)
            .unwrap_or(usize::MAX)
            .saturating_sub(self.notebook_kernels_of(user.owner));
        (room, limit)
    }
}
