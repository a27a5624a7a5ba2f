//! API keys as stored: a record per key and its digest, never the key.

use async_trait::async_trait;

use super::StoreError;

/// An API key as lists show it (the key itself is never stored).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeyRecord {
    /// A hyphenated UUID; access tokens carry it as their subject.
    pub id: String,
    pub name: String,
    /// The key's first characters, so that a person can tell keys apart.
    pub prefix: String,
    pub created_ms: u64,
    pub last_used_ms: Option<u64>,
    pub revoked_ms: Option<u64>,
    /// The person it belongs to; `None` for a key made on the server's
    /// command line.
    pub user_id: Option<String>,
}

/// `last_used_ms` is written at most this often per key.
pub const TOUCH_EVERY_MS: u64 = 60_000;

impl KeyRecord {
    pub fn is_live(&self) -> bool {
        self.revoked_ms.is_none()
    }

    /// Whether `last_used_ms` is stale enough at `now_ms` to be written.
    pub fn needs_touch(&self, now_ms: u64) -> bool {
        self.last_used_ms
            .is_none_or(|used| now_ms.saturating_sub(used) >= TOUCH_EVERY_MS)
    }
}

/// Where API keys are kept.
#[async_trait]
pub trait KeyStore: Send + Sync + 'static {
    /// Records a new key by its digest; [`StoreError::NameTaken`] if a live
    /// key already has the name.
    async fn create_key(&self, key: &KeyRecord, digest: &str) -> Result<(), StoreError>;

    /// Every key, revoked ones too, oldest first.
    async fn keys(&self) -> Result<Vec<KeyRecord>, StoreError>;

    async fn key(&self, id: &str) -> Result<Option<KeyRecord>, StoreError>;

    /// The person `user_id`'s keys, revoked ones too, oldest first.
    async fn keys_of_user(&self, user_id: &str) -> Result<Vec<KeyRecord>, StoreError>;

    /// The keys revoked at or after `since_ms`, in the order they were
    /// revoked: what the revocation watch reads, instead of every key.
    async fn keys_revoked_since(&self, since_ms: u64) -> Result<Vec<KeyRecord>, StoreError>;

    async fn key_by_digest(&self, digest: &str) -> Result<Option<KeyRecord>, StoreError>;

    /// Revokes the live key of that name made on the command line (a
    /// person's keys are revoked by id); false if there is none.
    async fn revoke_key(&self, name: &str, now_ms: u64) -> Result<bool, StoreError>;

    /// Revokes the live key `id`; false if there is none.
    async fn revoke_key_id(&self, id: &str, now_ms: u64) -> Result<bool, StoreError>;

    /// Notes that the key was used (at most once a minute is written).
    async fn touch_key(&self, id: &str, now_ms: u64) -> Result<(), StoreError>;

    /// The access-token signing secret every node sharing this store uses:
    /// `fresh` is kept if there is none yet, and whichever was kept first is
    /// returned. `None` for a store of one machine's (SQLite), whose server
    /// keeps its secret in the data directory.
    async fn shared_token_secret(&self, fresh: &str) -> Result<Option<String>, StoreError> {
        let _ = fresh;
        Ok(None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_use_is_written_once_a_minute_at_most() {
        let mut key = KeyRecord {
            id: "k".into(),
            name: "n".into(),
            prefix: "rc_abcd".into(),
            created_ms: 0,
            last_used_ms: None,
            revoked_ms: None,
            user_id: None,
        };
        assert!(key.needs_touch(1_000));
        key.last_used_ms = Some(1_000);
        assert!(!key.needs_touch(1_000 + TOUCH_EVERY_MS - 1));
        assert!(key.needs_touch(1_000 + TOUCH_EVERY_MS));
    }
}
