//! [`KeyStore`] on PostgreSQL: the same statements as SQLite's ([`sql`]), so
//! that a key made on one node works on every node sharing the database.

use async_trait::async_trait;

use super::keys::{KeyRecord, KeyStore};
use super::sql;
use super::{PostgresStore, StoreError};

/// The order keys were made in, after their time: a `serial` column
/// (SQLite's store uses its `rowid`, which PostgreSQL has not).
const MADE_ORDER: &str = "serial";

/// The statements both dialects agree on are in `sql.rs`; PostgreSQL's own
/// are the order of keys and the shared token secret.
#[async_trait]
impl KeyStore for PostgresStore {
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

    async fn shared_token_secret(&self, fresh: &str) -> Result<Option<String>, StoreError> {
        // Two statements, each its own snapshot: the insert waits for any
        // node inserting at the same moment, and the read then sees whichever
        // committed first.
        sqlx::query(
            "INSERT INTO secrets (name, value) VALUES ('token', $1) ON CONFLICT (name) DO NOTHING",
        )
        .bind(fresh)
        .execute(&self.pool)
        .await?;
        let kept: String = sqlx::query_scalar("SELECT value FROM secrets WHERE name = 'token'")
            .fetch_one(&self.pool)
            .await?;
        Ok(Some(kept))
    }
}
