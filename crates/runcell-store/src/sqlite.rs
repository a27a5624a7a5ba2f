//! The SQLite store: one file under the data dir, WAL mode, migrations from
//! `crates/runcell-store/migrations` embedded in the binary. The statements
//! both dialects agree on are `sql.rs`'s; here are SQLite's own.

use std::path::Path;
use std::time::Duration;

use async_trait::async_trait;
use runcell_protocol::SessionEvent;
use sqlx::sqlite::{
    SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteRow,
    SqliteSynchronous,
};
use sqlx::{QueryBuilder, Sqlite, Transaction};

use super::rows::ms;
use super::sql::{self, Backend, bind, run_on_pool};
use super::{SessionRecord, ShareRecord, Store, StoreError};
use runcell_protocol::{OwnerId, SessionId, ShareToken};

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

/// The statements of `sql.rs` run on the pool. SQLite's text holds
/// anything, so text is kept as written.
impl Backend for SqliteStore {
    type Row = SqliteRow;

    fn text(s: &str) -> String {
        s.to_string()
    }

    run_on_pool!();
}

/// Inserts events in multi-row statements (a streaming turn writes hundreds
/// of small events; one statement per event would cost most of the time),
/// dropping those of sessions that no longer exist, then names sessions
/// after their first question.
async fn insert_events(
    tx: &mut Transaction<'_, Sqlite>,
    events: &[(SessionId, SessionEvent)],
) -> Result<(), StoreError> {
    for chunk in events.chunks(sql::ROWS_PER_INSERT) {
        // SQLite names a VALUES list's columns `column1`, `column2`, … and
        // takes no list of names for them (PostgreSQL's `AS v (…)`).
        let mut insert = QueryBuilder::<Sqlite>::new(
            "INSERT INTO events (session_id, seq, ts_ms, kind, body) \
             SELECT v.column1, v.column2, v.column3, v.column4, v.column5 FROM (",
        );
        sql::push_event_values(&mut insert, sql::event_rows(chunk)?);
        insert.push(
            ") AS v WHERE EXISTS (SELECT 1 FROM sessions WHERE id = v.column1) \
             ON CONFLICT (session_id, seq) DO NOTHING",
        );
        insert.build().execute(&mut **tx).await?;
    }
    for params in sql::names::<SqliteStore>(events) {
        bind(sqlx::query(sql::NAME_SESSION), params)
            .execute(&mut **tx)
            .await?;
    }
    Ok(())
}

/// The statements both dialects agree on are in `sql.rs`; SQLite's own are
/// the event insert and the sessions' newest times.
#[async_trait]
impl Store for SqliteStore {
    async fn create_session(&self, session: &SessionRecord) -> Result<(), StoreError> {
        let inserted = self
            .execute(sql::INSERT_SESSION, sql::session_params::<Self>(session))
            .await?;
        if inserted == 0 {
            return Err(StoreError::Exists);
        }
        Ok(())
    }

    async fn session(&self, id: SessionId) -> Result<Option<SessionRecord>, StoreError> {
        sql::session(self, id).await
    }

    async fn sessions_of(&self, owner: OwnerId) -> Result<Vec<SessionRecord>, StoreError> {
        sql::sessions_of(self, owner).await
    }

    async fn count_sessions_of(&self, owner: OwnerId) -> Result<u64, StoreError> {
        sql::count_sessions_of(self, owner).await
    }

    async fn move_sessions(&self, from: OwnerId, to: OwnerId) -> Result<u64, StoreError> {
        sql::move_sessions(self, from, to).await
    }

    async fn rename_session(&self, id: SessionId, title: &str) -> Result<bool, StoreError> {
        sql::rename_session(self, id, title).await
    }

    async fn delete_session(&self, id: SessionId) -> Result<bool, StoreError> {
        sql::delete_session(self, id).await
    }

    async fn append_events(&self, events: &[(SessionId, SessionEvent)]) -> Result<(), StoreError> {
        if events.is_empty() {
            return Ok(());
        }
        let mut tx = self.pool.begin().await?;
        insert_events(&mut tx, events).await?;
        // One statement per session: SQLite has no arrays to pass them in
        // one (PostgreSQL's UNNEST), and its two-argument MAX is
        // PostgreSQL's GREATEST.
        for (session, ts) in sql::newest_by_session(events) {
            sqlx::query("UPDATE sessions SET updated_ms = MAX(updated_ms, $1) WHERE id = $2")
                .bind(ms(ts))
                .bind(session.to_string())
                .execute(&mut *tx)
                .await?;
        }
        tx.commit().await?;
        Ok(())
    }

    async fn events(&self, id: SessionId) -> Result<Vec<SessionEvent>, StoreError> {
        sql::events_after(self, id, 0).await
    }

    async fn share(
        &self,
        id: SessionId,
        upto_seq: u64,
        files: bool,
        now_ms: u64,
    ) -> Result<ShareRecord, StoreError> {
        sql::share(self, id, upto_seq, files, now_ms).await
    }

    async fn share_of(&self, id: SessionId) -> Result<Option<ShareRecord>, StoreError> {
        sql::share_of_session(self, id).await
    }

    async fn revoke_shares(&self, id: SessionId) -> Result<u64, StoreError> {
        sql::revoke_shares(self, id).await
    }

    async fn shared(&self, token: &ShareToken) -> Result<Option<ShareRecord>, StoreError> {
        sql::shared(self, token).await
    }

    async fn prune_empty(&self, before_ms: u64) -> Result<u64, StoreError> {
        sql::prune_empty(self, before_ms).await
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
