//! [`KeyStore`] on SQLite (table `api_keys`, migration 0003): the same
//! statements as PostgreSQL's ([`sql`]).

use async_trait::async_trait;

use super::keys::{KeyRecord, KeyStore};
use super::sql;
use super::{SqliteStore, StoreError};

/// The order keys were made in, after their time: SQLite's `rowid`
/// (PostgreSQL has none, and counts in a `serial` column).
const MADE_ORDER: &str = "rowid";

/// The statements both dialects agree on are in `sql.rs`; SQLite's own is the
/// order of keys, and it keeps no token secret (the server keeps one in its
/// data directory).
#[async_trait]
impl KeyStore for SqliteStore {
    async fn create_key(&self, key: &KeyRecord, digest: &str) -> Result<(), StoreError> {
        sql::create_key(self, key, digest).await
    }

    async fn keys(&self) -> Result<Vec<KeyRecord>, StoreError> {
        sql::keys(self, MADE_ORDER).await
    }

    async fn key(&self, id: &str) -> Result<Option<KeyRecord>, StoreError> {
        sql::key(self, id).await
    }

    async fn keys_of_user(&self, user_id: &str) -> Result<Vec<KeyRecord>, StoreError> {
        sql::keys_of_user(self, user_id, MADE_ORDER).await
    }

    async fn keys_revoked_since(&self, since_ms: u64) -> Result<Vec<KeyRecord>, StoreError> {
        sql::keys_revoked_since(self, since_ms).await
    }

    async fn key_by_digest(&self, digest: &str) -> Result<Option<KeyRecord>, StoreError> {
        sql::key_by_digest(self, digest).await
    }

    async fn revoke_key(&self, name: &str, now_ms: u64) -> Result<bool, StoreError> {
        sql::revoke_key(self, name, now_ms).await
    }

    async fn revoke_key_id(&self, id: &str, now_ms: u64) -> Result<bool, StoreError> {
        sql::revoke_key_id(self, id, now_ms).await
    }

    async fn touch_key(&self, id: &str, now_ms: u64) -> Result<(), StoreError> {
        sql::touch_key(self, id, now_ms).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(id: &str, name: &str, created_ms: u64) -> KeyRecord {
        KeyRecord {
            id: id.into(),
            name: name.into(),
            prefix: "rc_abcd".into(),
            created_ms,
            last_used_ms: None,
            revoked_ms: None,
            user_id: None,
        }
    }

    #[tokio::test]
    async fn the_key_story_holds_for_sqlite() {
        let dir = tempfile::tempdir().expect("temp dir");
        let store = SqliteStore::open_in(dir.path()).await.expect("store");
        super::super::key_story::run(&store).await;
        store.close().await;
        let reopened = SqliteStore::open_in(dir.path()).await.expect("reopen");
        super::super::key_story::after_reopen(&reopened).await;
    }

    #[tokio::test]
    async fn the_user_story_holds_for_sqlite() {
        let dir = tempfile::tempdir().expect("temp dir");
        let store = SqliteStore::open_in(dir.path()).await.expect("store");
        super::super::user_story::run(&store).await;
    }

    #[tokio::test]
    async fn keys_are_found_by_digest_revoked_by_name_and_names_are_reusable() {
        let dir = tempfile::tempdir().expect("temp dir");
        let store = SqliteStore::open_in(dir.path()).await.expect("store");
        store
            .create_key(&record("k1", "ci", 1), "d1")
            .await
            .expect("first key");
        let taken = store.create_key(&record("k2", "ci", 2), "d2").await;
        assert!(matches!(taken, Err(StoreError::NameTaken(name)) if name == "ci"));

        let found = store.key_by_digest("d1").await.expect("lookup");
        assert_eq!(found.map(|k| k.id), Some("k1".into()));
        assert_eq!(store.key_by_digest("nope").await.expect("lookup"), None);

        store.touch_key("k1", 100_000).await.expect("touch");
        store.touch_key("k1", 100_500).await.expect("touch");
        let key = store.key("k1").await.expect("key").expect("exists");
        assert_eq!(
            key.last_used_ms,
            Some(100_000),
            "written at most once a minute"
        );

        assert!(store.revoke_key("ci", 5).await.expect("revoke"));
        assert!(!store.revoke_key("ci", 6).await.expect("revoke again"));
        let key = store.key("k1").await.expect("key").expect("exists");
        assert_eq!(key.revoked_ms, Some(5));
        assert!(!key.is_live());

        // The name is free again once its key is revoked.
        store
            .create_key(&record("k3", "ci", 7), "d3")
            .await
            .expect("a new key under the old name");
        let all = store.keys().await.expect("list");
        assert_eq!(
            all.iter().map(|k| k.id.as_str()).collect::<Vec<_>>(),
            ["k1", "k3"]
        );
        // The digest stays unique even across revoked keys.
        assert!(
            store
                .create_key(&record("k4", "other", 8), "d1")
                .await
                .is_err()
        );
    }
}
