//! The SQLite store: one file under the data dir, WAL mode, migrations from
//! `crates/runcell-store/migrations` embedded in the binary.

use std::collections::HashMap;
use std::path::Path;
use std::time::Duration;

use app::protocol::{EventBody, SessionEvent};
use async_trait::async_trait;
use sqlx::sqlite::{
    SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteSynchronous,
};
use sqlx::{QueryBuilder, Row, Sqlite, Transaction};

use super::rows::{SESSION_COLUMNS, SHARE_COLUMNS, kind_of, ms, session_of, share_of, unsigned};
use super::{SessionRecord, ShareRecord, Store, StoreError, title_from};
use app::api::{OwnerId, SessionId, ShareToken};

/// The database's file name under the data dir.
pub const DB_FILE: &str = "runcell.db";

pub struct SqliteStore {
    pub(super) pool: SqlitePool,
}

impl SqliteStore {
    /// Opens (creating if needed) the database at `path` and applies the
    /// migrations it lacks.
    pub async fn open(path: &Path) -> Result<Self, StoreError> {
        let options = SqliteConnectOptions::new()
            .filename(path)
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            // With WAL, NORMAL loses at most the last commits on a power cut,
            // never the database; a crashed process loses nothing committed.
            .synchronous(SqliteSynchronous::Normal)
            .foreign_keys(true)
            .busy_timeout(Duration::from_secs(10));
        let pool = SqlitePoolOptions::new()
            .max_connections(4)
            .connect_with(options)
            .await
            .map_err(|source| StoreError::Open {
                path: runcell_core::display_path(path),
                source,
            })?;
        sqlx::migrate!("./migrations").run(&pool).await?;
        Ok(Self { pool })
    }

    /// Opens `runcell.db` in the data dir.
    pub async fn open_in(data_dir: &Path) -> Result<Self, StoreError> {
        Self::open(&data_dir.join(DB_FILE)).await
    }

    /// Waits for every connection to finish and closes the file.
    pub async fn close(&self) {
        self.pool.close().await;
    }
}

/// Rows per `INSERT` (5 parameters each, far below SQLite's limit).
const ROWS_PER_INSERT: usize = 400;

/// Inserts events in multi-row statements (a streaming turn writes hundreds
/// of small events; one statement per event would cost most of the time),
/// dropping those of sessions that no longer exist, then names sessions
/// after their first question.
async fn insert_events(
    tx: &mut Transaction<'_, Sqlite>,
    events: &[(SessionId, SessionEvent)],
) -> Result<(), StoreError> {
    for chunk in events.chunks(ROWS_PER_INSERT) {
        let rows = chunk
            .iter()
            .map(|(session, event)| {
                let body =
                    serde_json::to_string(&event.event).map_err(|source| StoreError::Corrupt {
                        session: session.to_string(),
                        seq: ms(event.seq),
                        source,
                    })?;
                Ok((session.to_string(), event, body))
            })
            .collect::<Result<Vec<_>, StoreError>>()?;
        let mut insert = QueryBuilder::<Sqlite>::new(
            "INSERT INTO events (session_id, seq, ts_ms, kind, body) \
             SELECT v.column1, v.column2, v.column3, v.column4, v.column5 FROM (",
        );
        insert.push_values(rows, |mut row, (session, event, body)| {
            row.push_bind(session)
                .push_bind(ms(event.seq))
                .push_bind(ms(event.ts_ms))
                .push_bind(kind_of(&event.event))
                .push_bind(body);
        });
        insert.push(
            ") AS v WHERE EXISTS (SELECT 1 FROM sessions WHERE id = v.column1) \
             ON CONFLICT (session_id, seq) DO NOTHING",
        );
        insert.build().execute(&mut **tx).await?;
    }
    for (session, event) in events {
        if let EventBody::UserMessage { text, .. } = &event.event {
            sqlx::query("UPDATE sessions SET title = ?2 WHERE id = ?1 AND title = ''")
                .bind(session.to_string())
                .bind(title_from(text))
                .execute(&mut **tx)
                .await?;
        }
    }
    Ok(())
}

#[async_trait]
impl Store for SqliteStore {
    async fn create_session(&self, session: &SessionRecord) -> Result<(), StoreError> {
        let result = sqlx::query(
            "INSERT INTO sessions (id, owner, title, created_ms, updated_ms, forked_from)
             VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (id) DO NOTHING",
        )
        .bind(session.id.to_string())
        .bind(session.owner.to_string())
        .bind(&session.title)
        .bind(ms(session.created_ms))
        .bind(ms(session.updated_ms))
        .bind(&session.forked_from)
        .execute(&self.pool)
        .await?;
        if result.rows_affected() == 0 {
            return Err(StoreError::Exists);
        }
        Ok(())
    }

    async fn session(&self, id: SessionId) -> Result<Option<SessionRecord>, StoreError> {
        sqlx::query(&format!(
            "SELECT {SESSION_COLUMNS} FROM sessions WHERE id = ?"
        ))
        .bind(id.to_string())
        .fetch_optional(&self.pool)
        .await?
        .as_ref()
        .map(session_of)
        .transpose()
    }

    async fn sessions_of(&self, owner: OwnerId) -> Result<Vec<SessionRecord>, StoreError> {
        sqlx::query(&format!(
            "SELECT {SESSION_COLUMNS} FROM sessions s WHERE owner = ?
               AND EXISTS (SELECT 1 FROM events e WHERE e.session_id = s.id)
             ORDER BY updated_ms DESC, created_ms DESC"
        ))
        .bind(owner.to_string())
        .fetch_all(&self.pool)
        .await?
        .iter()
        .map(session_of)
        .collect()
    }

    async fn move_sessions(&self, from: OwnerId, to: OwnerId) -> Result<u64, StoreError> {
        let result = sqlx::query("UPDATE sessions SET owner = ? WHERE owner = ?")
            .bind(to.to_string())
            .bind(from.to_string())
            .execute(&self.pool)
            .await?;
        Ok(result.rows_affected())
    }

    async fn rename_session(&self, id: SessionId, title: &str) -> Result<bool, StoreError> {
        let result = sqlx::query("UPDATE sessions SET title = ? WHERE id = ?")
            .bind(title_from(title))
            .bind(id.to_string())
            .execute(&self.pool)
            .await?;
        Ok(result.rows_affected() > 0)
    }

    async fn delete_session(&self, id: SessionId) -> Result<bool, StoreError> {
        // Events and shares go with it (ON DELETE CASCADE).
        let result = sqlx::query("DELETE FROM sessions WHERE id = ?")
            .bind(id.to_string())
            .execute(&self.pool)
            .await?;
        Ok(result.rows_affected() > 0)
    }

    async fn append_events(&self, events: &[(SessionId, SessionEvent)]) -> Result<(), StoreError> {
        if events.is_empty() {
            return Ok(());
        }
        let mut newest: HashMap<SessionId, u64> = HashMap::new();
        for (session, event) in events {
            let ts = newest.entry(*session).or_default();
            *ts = (*ts).max(event.ts_ms);
        }
        let mut tx = self.pool.begin().await?;
        insert_events(&mut tx, events).await?;
        for (session, ts) in newest {
            sqlx::query("UPDATE sessions SET updated_ms = MAX(updated_ms, ?) WHERE id = ?")
                .bind(ms(ts))
                .bind(session.to_string())
                .execute(&mut *tx)
                .await?;
        }
        tx.commit().await?;
        Ok(())
    }

    async fn events(&self, id: SessionId) -> Result<Vec<SessionEvent>, StoreError> {
        let session = id.to_string();
        let rows =
            sqlx::query("SELECT seq, ts_ms, body FROM events WHERE session_id = ? ORDER BY seq")
                .bind(&session)
                .fetch_all(&self.pool)
                .await?;
        rows.iter()
            .map(|row| {
                let seq: i64 = row.try_get("seq")?;
                let body: String = row.try_get("body")?;
                let event = serde_json::from_str(&body).map_err(|source| StoreError::Corrupt {
                    session: session.clone(),
                    seq,
                    source,
                })?;
                Ok(SessionEvent {
                    seq: unsigned(seq),
                    ts_ms: unsigned(row.try_get("ts_ms")?),
                    event,
                })
            })
            .collect()
    }

    async fn share(
        &self,
        id: SessionId,
        upto_seq: u64,
        files: bool,
        now_ms: u64,
    ) -> Result<ShareRecord, StoreError> {
        // One statement: a new token, or the session's existing link moved on.
        let row = sqlx::query(&format!(
            "INSERT INTO shares (token, session_id, upto_seq, files, created_ms, updated_ms)
             VALUES (?, ?, ?, ?, ?, ?)
             ON CONFLICT (session_id) DO UPDATE
               SET upto_seq = excluded.upto_seq, files = excluded.files,
                   updated_ms = excluded.updated_ms
             RETURNING {SHARE_COLUMNS}"
        ))
        .bind(ShareToken::random().to_string())
        .bind(id.to_string())
        .bind(ms(upto_seq))
        .bind(files)
        .bind(ms(now_ms))
        .bind(ms(now_ms))
        .fetch_one(&self.pool)
        .await?;
        share_of(&row)
    }

    async fn share_of(&self, id: SessionId) -> Result<Option<ShareRecord>, StoreError> {
        sqlx::query(&format!(
            "SELECT {SHARE_COLUMNS} FROM shares WHERE session_id = ? LIMIT 1"
        ))
        .bind(id.to_string())
        .fetch_optional(&self.pool)
        .await?
        .as_ref()
        .map(share_of)
        .transpose()
    }

    async fn revoke_shares(&self, id: SessionId) -> Result<u64, StoreError> {
        let result = sqlx::query("DELETE FROM shares WHERE session_id = ?")
            .bind(id.to_string())
            .execute(&self.pool)
            .await?;
        Ok(result.rows_affected())
    }

    async fn prune_empty(&self, before_ms: u64) -> Result<u64, StoreError> {
        let result = sqlx::query(
            "DELETE FROM sessions WHERE created_ms < ?
               AND NOT EXISTS (SELECT 1 FROM events e WHERE e.session_id = sessions.id)",
        )
        .bind(ms(before_ms))
        .execute(&self.pool)
        .await?;
        Ok(result.rows_affected())
    }

    async fn shared(&self, token: &ShareToken) -> Result<Option<ShareRecord>, StoreError> {
        sqlx::query(&format!(
            "SELECT {SHARE_COLUMNS} FROM shares WHERE token = ?"
        ))
        .bind(token.as_str())
        .fetch_optional(&self.pool)
        .await?
        .as_ref()
        .map(share_of)
        .transpose()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_story_holds_for_sqlite() {
        let dir = tempfile::tempdir().unwrap();
        let store = SqliteStore::open_in(dir.path()).await.unwrap();
        super::super::story::run(&store).await;
        store.close().await;
        // The file is real and reopens with everything in it.
        let reopened = SqliteStore::open_in(dir.path()).await.unwrap();
        super::super::story::after_reopen(&reopened).await;
    }

    #[tokio::test]
    async fn the_database_is_in_wal_mode_and_migrations_are_idempotent() {
        let dir = tempfile::tempdir().unwrap();
        let store = SqliteStore::open_in(dir.path()).await.unwrap();
        let mode: String = sqlx::query_scalar("PRAGMA journal_mode")
            .fetch_one(&store.pool)
            .await
            .unwrap();
        assert_eq!(mode, "wal");
        store.close().await;
        SqliteStore::open_in(dir.path()).await.unwrap();
    }

    #[tokio::test]
    async fn a_file_that_is_not_a_database_is_a_clear_error() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(DB_FILE), vec![b'x'; 4096]).unwrap();
        let Err(err) = SqliteStore::open_in(dir.path()).await else {
            panic!("a garbage file opened as a database");
        };
        assert!(
            err.to_string().contains("runcell.db") || err.to_string().contains("database"),
            "{err}"
        );
    }
}
