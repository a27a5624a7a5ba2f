//! [`KeyStore`] on PostgreSQL: the same queries as SQLite's, so that a key
//! made on one node works on every node sharing the database.

use async_trait::async_trait;

use super::StoreError;
use super::keys::{KeyRecord, KeyStore, TOUCH_EVERY_MS};
use super::postgres::{PostgresStore, text};
use super::rows::{KEY_COLUMNS, key_of, ms};

#[async_trait]
impl KeyStore for PostgresStore {
    async fn create_key(&self, key: &KeyRecord, digest: &str) -> Result<(), StoreError> {
        let inserted = sqlx::query(
            "INSERT INTO api_keys (id, name, digest, prefix, created_ms) VALUES ($1, $2, $3, $4, $5)",
        )
        .bind(&key.id)
        .bind(text(&key.name))
        .bind(digest)
        .bind(&key.prefix)
        .bind(ms(key.created_ms))
        .execute(&self.pool)
        .await;
        match inserted {
            Ok(_) => Ok(()),
            Err(sqlx::Error::Database(e)) if e.is_unique_violation() => {
                Err(StoreError::NameTaken(key.name.clone()))
            }
            Err(e) => Err(e.into()),
        }
    }

    async fn keys(&self) -> Result<Vec<KeyRecord>, StoreError> {
        sqlx::query(&format!(
            "SELECT {KEY_COLUMNS} FROM api_keys ORDER BY created_ms, serial"
        ))
        .fetch_all(&self.pool)
        .await?
        .iter()
        .map(key_of)
        .collect()
    }

    async fn key(&self, id: &str) -> Result<Option<KeyRecord>, StoreError> {
        sqlx::query(&format!("SELECT {KEY_COLUMNS} FROM api_keys WHERE id = $1"))
            .bind(text(id))
            .fetch_optional(&self.pool)
            .await?
            .as_ref()
            .map(key_of)
            .transpose()
    }

    async fn key_by_digest(&self, digest: &str) -> Result<Option<KeyRecord>, StoreError> {
        sqlx::query(&format!(
            "SELECT {KEY_COLUMNS} FROM api_keys WHERE digest = $1"
        ))
        .bind(text(digest))
        .fetch_optional(&self.pool)
        .await?
        .as_ref()
        .map(key_of)
        .transpose()
    }

    async fn revoke_key(&self, name: &str, now_ms: u64) -> Result<bool, StoreError> {
        let done = sqlx::query(
            "UPDATE api_keys SET revoked_ms = $1 WHERE name = $2 AND revoked_ms IS NULL",
        )
        .bind(ms(now_ms))
        .bind(text(name))
        .execute(&self.pool)
        .await?;
        Ok(done.rows_affected() > 0)
    }

    async fn touch_key(&self, id: &str, now_ms: u64) -> Result<(), StoreError> {
        sqlx::query(
            "UPDATE api_keys SET last_used_ms = $1 \
             WHERE id = $2 AND (last_used_ms IS NULL OR last_used_ms <= $3)",
        )
        .bind(ms(now_ms))
        .bind(text(id))
        .bind(ms(now_ms.saturating_sub(TOUCH_EVERY_MS)))
        .execute(&self.pool)
        .await?;
        Ok(())
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
