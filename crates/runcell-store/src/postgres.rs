//! The PostgreSQL store, for several runcell nodes on one database: the same
//! tables as SQLite's, migrations from `crates/runcell-store/migrations_postgres` embedded
//! in the binary, chosen by `--database-url postgres://…`. The statements
//! both dialects agree on are `sql.rs`'s; here are PostgreSQL's own: the
//! lease of a new session, the fenced event insert, NOTIFY, and the
//! database's clock that `nodes.rs` builds on.

use std::collections::HashSet;
use std::time::Duration;

use async_trait::async_trait;
use runcell_protocol::SessionEvent;
use sqlx::postgres::{PgConnectOptions, PgPool, PgPoolOptions, PgRow};
use sqlx::{Postgres, QueryBuilder, Row, Transaction};

use super::rows::ms;
use super::sql::{self, Backend, bind, run_on_pool};
use super::{SessionRecord, ShareRecord, Store, StoreError};
use runcell_protocol::{OwnerId, SessionId, ShareToken};

pub struct PostgresStore {
    pub(super) pool: PgPool,
    /// This process's node id once it has joined the database's nodes
    /// (`runcell serve`): the sessions it makes are leased to it, and it
    /// stores events only of the sessions it holds (a node that was taken
    /// over cannot write into the new holder's log), announcing them with
    /// NOTIFY. Unset (tools, tests of the store alone), neither happens.
    pub(super) node: std::sync::OnceLock<String>,
}

/// The channel on which a node announces the events it stored:
/// `<session id> <newest seq>`.
pub const EVENTS_CHANNEL: &str = "runcell_events";

/// Connections per node: the writer, page loads, key checks.
const MAX_CONNECTIONS: u32 = 8;

impl PostgresStore {
    /// Connects to `url` and applies the migrations it lacks (under an
    /// advisory lock, so nodes starting together do not race).
    pub async fn open(url: &str) -> Result<Self, StoreError> {
        let options: PgConnectOptions = url.parse().map_err(|source| StoreError::Open {
            path: redact(url),
            source,
        })?;
        let pool = PgPoolOptions::new()
            .max_connections(MAX_CONNECTIONS)
            .acquire_timeout(Duration::from_secs(10))
            .connect_with(options)
            .await
            .map_err(|source| StoreError::Open {
                path: redact(url),
                source,
            })?;
        sqlx::migrate!("./migrations_postgres").run(&pool).await?;
        Ok(Self {
            pool,
            node: std::sync::OnceLock::new(),
        })
    }

    /// A session's events after `after`, oldest first (what a node that
    /// follows a session reads when the holder announces more).
    pub async fn events_after(
        &self,
        id: SessionId,
        after: u64,
    ) -> Result<Vec<SessionEvent>, StoreError> {
        sql::events_after(self, id, after).await
    }

    /// Waits for every connection to finish and closes them.
    pub async fn close(&self) {
        self.pool.close().await;
    }

    pub fn pool(&self) -> &PgPool {
        &self.pool
    }
}

/// A database URL for messages: without its password.
pub fn redact(url: &str) -> String {
    match url::Url::parse(url) {
        Ok(mut parsed) => {
            if parsed.password().is_some() {
                let _ = parsed.set_password(Some("***"));
            }
            parsed.to_string()
        }
        Err(_) => "(an unreadable database URL)".into(),
    }
}

/// The database's clock in milliseconds: every node reads the same one
/// (SQLite's store has one machine and is given its times).
pub const NOW_MS: &str = "(EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::BIGINT";

/// The statements of `sql.rs` run on the pool.
impl Backend for PostgresStore {
    type Row = PgRow;

    /// PostgreSQL's text cannot hold NUL: a title or name that has one keeps
    /// the rest.
    fn text(s: &str) -> String {
        s.replace('\0', "")
    }

    run_on_pool!();
}

/// PostgreSQL refuses a notification payload of 8,000 bytes or more.
const MAX_NOTE_BYTES: usize = 7_900;

/// One note per session of a batch: `<session id> <newest seq>`, then on
/// the next line the batch's events of that session as JSON when they fit
/// in a notification (a follower then needs no read). Parsed by
/// [`parse_event_note`]. Only events this transaction `stored` are
/// announced (not those its lease fenced off, nor those stored already).
fn event_notes(
    events: &[(SessionId, SessionEvent)],
    stored: &HashSet<(String, i64)>,
) -> Vec<String> {
    let mut by_session: Vec<(SessionId, Vec<&SessionEvent>)> = Vec::new();
    for (session, event) in events {
        if !stored.contains(&(session.to_string(), ms(event.seq))) {
            continue;
        }
        match by_session.iter_mut().find(|(s, _)| s == session) {
            Some((_, list)) => list.push(event),
            None => by_session.push((*session, vec![event])),
        }
    }
    by_session
        .into_iter()
        .map(|(session, list)| {
            let newest = list.iter().map(|e| e.seq).max().unwrap_or_default();
            let head = format!("{session} {newest}");
            match serde_json::to_string(&list) {
                Ok(json) if head.len() + 1 + json.len() < MAX_NOTE_BYTES => {
                    format!("{head}\n{json}")
                }
                _ => head,
            }
        })
        .collect()
}

/// A note on [`EVENTS_CHANNEL`]: the session, its newest stored `seq`, and
/// the events when they came along. Any node (or anyone with access to the
/// database) can send one, so it is parsed as untrusted: `None` if it is
/// not one; events that do not parse are left out (they are read back from
/// the store instead).
pub fn parse_event_note(note: &str) -> Option<(SessionId, u64, Vec<SessionEvent>)> {
    let (head, json) = note.split_once('\n').unwrap_or((note, ""));
    let (id, seq) = head.split_once(' ')?;
    let events = if json.is_empty() {
        Vec::new()
    } else {
        serde_json::from_str(json).unwrap_or_default()
    };
    Some((id.parse().ok()?, seq.parse().ok()?, events))
}

/// Inserts events as SQLite's store does (multi-row statements, events of
/// sessions that no longer exist dropped, sessions named after their first
/// question), but fenced when this store is a node's, and answering which
/// events were stored, to announce them.
async fn insert_events(
    tx: &mut Transaction<'_, Postgres>,
    events: &[(SessionId, SessionEvent)],
    node: Option<&str>,
) -> Result<HashSet<(String, i64)>, StoreError> {
    let mut stored = HashSet::new();
    for chunk in events.chunks(sql::ROWS_PER_INSERT) {
        // PostgreSQL names a VALUES list's columns `AS v (…)` (SQLite's are
        // `column1`, `column2`, …), and says which rows it stored with
        // RETURNING.
        let mut insert = QueryBuilder::<Postgres>::new(
            "INSERT INTO events (session_id, seq, ts_ms, kind, body) \
             SELECT v.session_id, v.seq, v.ts_ms, v.kind, v.body FROM (",
        );
        sql::push_event_values(&mut insert, sql::event_rows(chunk)?);
        insert.push(
            ") AS v (session_id, seq, ts_ms, kind, body) \
             WHERE EXISTS (SELECT 1 FROM sessions WHERE id = v.session_id) ",
        );
        if let Some(node) = node {
            // Fenced: only the holder of a session writes its log.
            insert.push(
                "AND EXISTS (SELECT 1 FROM session_leases l \
                 WHERE l.session_id = v.session_id AND l.node_id = ",
            );
            insert.push_bind(node.to_string());
            insert.push(") ");
        }
        insert.push("ON CONFLICT (session_id, seq) DO NOTHING RETURNING session_id, seq");
        for row in insert.build().fetch_all(&mut **tx).await? {
            stored.insert((row.try_get("session_id")?, row.try_get("seq")?));
        }
    }
    for params in sql::names::<PostgresStore>(events) {
        bind(sqlx::query(sql::NAME_SESSION), params)
            .execute(&mut **tx)
            .await?;
    }
    Ok(stored)
}

/// The statements both dialects agree on are in `sql.rs`; PostgreSQL's own
/// are the lease of a new session, the event insert, the sessions' newest
/// times and NOTIFY.
#[async_trait]
impl Store for PostgresStore {
    async fn create_session(&self, session: &SessionRecord) -> Result<(), StoreError> {
        let mut tx = self.pool.begin().await?;
        let inserted = bind(
            sqlx::query(sql::INSERT_SESSION),
            sql::session_params::<Self>(session),
        )
        .execute(&mut *tx)
        .await?;
        if inserted.rows_affected() == 0 {
            return Err(StoreError::Exists);
        }
        // A node holds the sessions it makes.
        if let Some(node) = self.node.get() {
            sqlx::query(&format!(
                "INSERT INTO session_leases (session_id, node_id, since_ms) VALUES ($1, $2, {NOW_MS})"
            ))
            .bind(session.id.to_string())
            .bind(node)
            .execute(&mut *tx)
            .await?;
        }
        tx.commit().await?;
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
        let node = self.node.get().map(String::as_str);
        let mut tx = self.pool.begin().await?;
        let stored = insert_events(&mut tx, events, node).await?;
        // One statement for every session of the batch (in id order, so
        // that two nodes' batches lock rows in the same order), with arrays
        // SQLite does not have.
        let mut newest: Vec<(String, i64)> = sql::newest_by_session(events)
            .into_iter()
            .map(|(session, ts)| (session.to_string(), ms(ts)))
            .collect();
        newest.sort_unstable();
        let (ids, times): (Vec<String>, Vec<i64>) = newest.into_iter().unzip();
        sqlx::query(
            "UPDATE sessions AS s SET updated_ms = GREATEST(s.updated_ms, v.ts)
             FROM UNNEST($1::text[], $2::bigint[]) AS v (id, ts) WHERE s.id = v.id",
        )
        .bind(ids)
        .bind(times)
        .execute(&mut *tx)
        .await?;
        if node.is_some() {
            // Delivered at commit, when the events they announce are
            // readable; one statement for every session of the batch.
            sqlx::query("SELECT pg_notify($1, note) FROM UNNEST($2::text[]) AS note")
                .bind(EVENTS_CHANNEL)
                .bind(event_notes(events, &stored))
                .execute(&mut *tx)
                .await?;
        }
        tx.commit().await?;
        Ok(())
    }

    async fn events(&self, id: SessionId) -> Result<Vec<SessionEvent>, StoreError> {
        self.events_after(id, 0).await
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
    use super::super::scratch::ScratchDatabase;
    use super::*;
    use runcell_protocol::EventBody;

    #[test]
    fn event_notes_carry_what_was_stored_and_what_fits() {
        let (a, b) = (SessionId::random(), SessionId::random());
        let event = |seq, text: &str| SessionEvent {
            seq,
            ts_ms: 7,
            event: EventBody::CellDelta {
                cell_id: runcell_protocol::CellId(1),
                text: text.into(),
                highlight: None,
            },
        };
        let events = vec![
            (a, event(1, "x")),
            (b, event(4, &"y".repeat(MAX_NOTE_BYTES))),
            (a, event(2, "z")),
            (a, event(3, "fenced off")),
        ];
        let stored: HashSet<_> = [(a, 1), (a, 2), (b, 4)]
            .into_iter()
            .map(|(s, q)| (s.to_string(), q))
            .collect();
        let notes = event_notes(&events, &stored);
        assert_eq!(notes.len(), 2);
        assert!(notes.iter().all(|n| n.len() < 8000));
        let (id, seq, carried) = parse_event_note(&notes[0]).unwrap();
        assert_eq!((id, seq), (a, 2));
        assert_eq!(
            carried,
            vec![event(1, "x"), event(2, "z")],
            "not the fenced one"
        );
        // Too big to carry: the follower reads it from the store.
        assert_eq!(parse_event_note(&notes[1]), Some((b, 4, vec![])));
        // Hostile notes.
        assert_eq!(parse_event_note("garbage"), None);
        assert_eq!(parse_event_note(&format!("{a} -1")), None);
        assert_eq!(
            parse_event_note(&format!("{a} 3\n[{{\"seq\":")),
            Some((a, 3, vec![]))
        );
    }

    #[tokio::test]
    async fn the_story_holds_for_postgres() {
        let Some(db) = ScratchDatabase::create("story").await else {
            return;
        };
        let store = PostgresStore::open(&db.url).await.unwrap();
        super::super::story::run(&store).await;
        store.close().await;
        // A second open finds its migrations applied and everything kept.
        let reopened = PostgresStore::open(&db.url).await.unwrap();
        super::super::story::after_reopen(&reopened).await;
        reopened.close().await;
        db.drop_now().await;
    }

    #[tokio::test]
    async fn the_key_story_holds_for_postgres() {
        let Some(db) = ScratchDatabase::create("keys").await else {
            return;
        };
        let store = PostgresStore::open(&db.url).await.unwrap();
        super::super::key_story::run(&store).await;
        store.close().await;
        let reopened = PostgresStore::open(&db.url).await.unwrap();
        super::super::key_story::after_reopen(&reopened).await;
        reopened.close().await;
        db.drop_now().await;
    }

    #[tokio::test]
    async fn the_user_story_holds_for_postgres() {
        let Some(db) = ScratchDatabase::create("users").await else {
            return;
        };
        let store = PostgresStore::open(&db.url).await.unwrap();
        super::super::user_story::run(&store).await;
        store.close().await;
        db.drop_now().await;
    }

    #[tokio::test]
    async fn nodes_starting_together_migrate_once() {
        let Some(db) = ScratchDatabase::create("migrate").await else {
            return;
        };
        let (a, b, c) = tokio::join!(
            PostgresStore::open(&db.url),
            PostgresStore::open(&db.url),
            PostgresStore::open(&db.url)
        );
        for store in [a.unwrap(), b.unwrap(), c.unwrap()] {
            store.close().await;
        }
        db.drop_now().await;
    }

    #[tokio::test]
    async fn nodes_share_the_first_token_secret_made() {
        use super::super::KeyStore;
        let Some(db) = ScratchDatabase::create("secret").await else {
            return;
        };
        let (a, b) = tokio::join!(PostgresStore::open(&db.url), PostgresStore::open(&db.url));
        let (a, b) = (a.unwrap(), b.unwrap());
        let (first, second) = tokio::join!(
            a.shared_token_secret("made by node a, at least 32 bytes long"),
            b.shared_token_secret("made by node b, at least 32 bytes long")
        );
        let first = first.unwrap().unwrap();
        assert_eq!(Some(first.clone()), second.unwrap());
        assert_eq!(a.shared_token_secret("another").await.unwrap(), Some(first));
        a.close().await;
        b.close().await;
        db.drop_now().await;
    }

    #[tokio::test]
    async fn text_with_nul_is_kept_without_it() {
        let Some(db) = ScratchDatabase::create("nul").await else {
            return;
        };
        let store = PostgresStore::open(&db.url).await.unwrap();
        let id: SessionId = "5e55a000-0000-4000-8000-0000000000aa".parse().unwrap();
        let owner: OwnerId = "0123456789abcdef0123456789abcdef".parse().unwrap();
        store
            .create_session(&SessionRecord {
                id,
                owner,
                title: "a\0b".into(),
                created_ms: 1,
                updated_ms: 1,
                forked_from: None,
            })
            .await
            .unwrap();
        assert!(store.rename_session(id, "plot\0 it").await.unwrap());
        assert_eq!(store.session(id).await.unwrap().unwrap().title, "plot it");
        store.close().await;
        db.drop_now().await;
    }

    #[tokio::test]
    async fn an_unreachable_server_is_a_clear_error_without_the_password() {
        // A port nothing listens on (bound, then closed).
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let url = format!("postgres://runcell:hunter2@127.0.0.1:{port}/runcell");
        let Err(err) = PostgresStore::open(&url).await else {
            panic!("connected to nothing");
        };
        let message = err.to_string();
        assert!(message.contains("127.0.0.1"), "{message}");
        assert!(!message.contains("hunter2"), "{message}");
        let Err(err) = PostgresStore::open("postgres://[::1").await else {
            panic!("a broken URL opened");
        };
        assert!(!err.to_string().contains("[::1"), "{err}");
    }
}
