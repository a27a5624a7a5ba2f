//! The statements of the key store ([`crate::KeyStore`]) both databases
//! agree on.

use super::{Backend, Param};
use crate::StoreError;
use crate::keys::{KeyRecord, TOUCH_EVERY_MS};
use crate::rows::{KEY_COLUMNS, key_of, ms};

pub async fn create_key<B: Backend>(
    db: &B,
    key: &KeyRecord,
    digest: &str,
) -> Result<(), StoreError> {
    let inserted = db
        .execute(
            "INSERT INTO api_keys (id, name, digest, prefix, created_ms, user_id)
             VALUES ($1, $2, $3, $4, $5, $6)",
            vec![
                Param::Text(key.id.clone()),
                Param::Text(B::text(&key.name)),
                Param::Text(digest.to_string()),
                Param::Text(key.prefix.clone()),
                Param::Int(ms(key.created_ms)),
                Param::MaybeText(key.user_id.clone()),
            ],
        )
        .await;
    match inserted {
        Ok(_) => Ok(()),
        Err(sqlx::Error::Database(e)) if e.is_unique_violation() => {
            Err(StoreError::NameTaken(key.name.clone()))
        }
        Err(e) => Err(e.into()),
    }
}

/// Every key, oldest first: by time, then by `made_order`, the column
/// that says in which order the dialect stored them.
pub async fn keys(db: &impl Backend, made_order: &str) -> Result<Vec<KeyRecord>, StoreError> {
    db.fetch_all(
        &format!("SELECT {KEY_COLUMNS} FROM api_keys ORDER BY created_ms, {made_order}"),
        Vec::new(),
    )
    .await?
    .iter()
    .map(key_of)
    .collect()
}

pub async fn keys_of_user<B: Backend>(
    db: &B,
    user_id: &str,
    made_order: &str,
) -> Result<Vec<KeyRecord>, StoreError> {
    db.fetch_all(
        &format!(
            "SELECT {KEY_COLUMNS} FROM api_keys WHERE user_id = $1 ORDER BY created_ms, {made_order}"
        ),
        vec![Param::Text(B::text(user_id))],
    )
    .await?
    .iter()
    .map(key_of)
    .collect()
}

pub async fn keys_revoked_since(
    db: &impl Backend,
    since_ms: u64,
) -> Result<Vec<KeyRecord>, StoreError> {
    db.fetch_all(
        &format!(
            "SELECT {KEY_COLUMNS} FROM api_keys WHERE revoked_ms >= $1 ORDER BY revoked_ms, id"
        ),
        vec![Param::Int(ms(since_ms))],
    )
    .await?
    .iter()
    .map(key_of)
    .collect()
}

pub async fn key<B: Backend>(db: &B, id: &str) -> Result<Option<KeyRecord>, StoreError> {
    db.fetch_optional(
        &format!("SELECT {KEY_COLUMNS} FROM api_keys WHERE id = $1"),
        vec![Param::Text(B::text(id))],
    )
    .await?
    .as_ref()
    .map(key_of)
    .transpose()
}

pub async fn key_by_digest<B: Backend>(
    db: &B,
    digest: &str,
) -> Result<Option<KeyRecord>, StoreError> {
    db.fetch_optional(
        &format!("SELECT {KEY_COLUMNS} FROM api_keys WHERE digest = $1"),
        vec![Param::Text(B::text(digest))],
    )
    .await?
    .as_ref()
    .map(key_of)
    .transpose()
}

pub async fn revoke_key<B: Backend>(db: &B, name: &str, now_ms: u64) -> Result<bool, StoreError> {
    let revoked = db
        .execute(
            "UPDATE api_keys SET revoked_ms = $1
             WHERE name = $2 AND revoked_ms IS NULL AND user_id IS NULL",
            vec![Param::Int(ms(now_ms)), Param::Text(B::text(name))],
        )
        .await?;
    Ok(revoked > 0)
}

pub async fn revoke_key_id<B: Backend>(db: &B, id: &str, now_ms: u64) -> Result<bool, StoreError> {
    let revoked = db
        .execute(
            "UPDATE api_keys SET revoked_ms = $1 WHERE id = $2 AND revoked_ms IS NULL",
            vec![Param::Int(ms(now_ms)), Param::Text(B::text(id))],
        )
        .await?;
    Ok(revoked > 0)
}

pub async fn touch_key<B: Backend>(db: &B, id: &str, now_ms: u64) -> Result<(), StoreError> {
    db.execute(
        "UPDATE api_keys SET last_used_ms = $1
         WHERE id = $2 AND (last_used_ms IS NULL OR last_used_ms <= $3)",
        vec![
            Param::Int(ms(now_ms)),
            Param::Text(B::text(id)),
            // Due when a full minute has passed, as `KeyRecord::needs_touch` says.
            Param::Int(ms(now_ms.saturating_sub(TOUCH_EVERY_MS))),
        ],
    )
    .await?;
    Ok(())
}

// People.
