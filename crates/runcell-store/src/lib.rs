//! Where sessions last: the [`Store`] trait and its SQLite implementation.
//!
//! A session is a row (owner, title, times) and its event log; turns, cells
//! and outputs are folded from the log by `runcell_protocol::notebook::Notebook`, the same
//! fold the page uses, so what was stored is exactly what was shown. Share
//! links are rows of their own. [`story`] is the behaviour every
//! implementation must have, written once; [`key_story`] the same for
//! [`KeyStore`].

mod database;
#[cfg(any(test, feature = "conformance"))]
#[allow(
    clippy::expect_used,
    reason = "a story is test code: a failed step panics where it happened \
              (allow, not expect: clippy sees it as test code in some builds only)"
)]
pub mod key_story;
pub mod keys;
pub mod nodes;
mod postgres;
mod postgres_keys;
mod rows;
#[cfg(any(test, feature = "conformance"))]
#[allow(
    clippy::expect_used,
    reason = "test code: a database that cannot be made fails the test where it happened"
)]
pub mod scratch;
mod sql;
mod sqlite;
mod sqlite_keys;
#[cfg(any(test, feature = "conformance"))]
#[allow(
    clippy::expect_used,
    reason = "a story is test code: a failed step panics where it happened \
              (allow, not expect: clippy sees it as test code in some builds only)"
)]
pub mod story;
#[cfg(any(test, feature = "conformance"))]
#[allow(
    clippy::expect_used,
    reason = "a story is test code: a failed step panics where it happened"
)]
pub mod user_story;
pub mod users;
mod users_sql;

use async_trait::async_trait;
use runcell_protocol::SessionEvent;

pub use database::Database;
pub use keys::{KeyRecord, KeyStore};
pub use postgres::{
    EVENTS_CHANNEL, PostgresStore, parse_event_note, redact as redact_database_url,
};
pub use sqlite::{DB_FILE, SqliteStore};
pub use users::{
    AuditEntry, Identity, LimitOverrides, Role, RoleBy, SignedInUser, UserRecord, UserStore,
};

use runcell_protocol::{OwnerId, SessionId, ShareToken};

/// Why the store could not do what was asked.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("cannot open the database {path}: {source}")]
    Open { path: String, source: sqlx::Error },
    #[error("cannot bring the database up to date: {0}")]
    Migrate(#[from] sqlx::migrate::MigrateError),
    #[error("the database failed: {0}")]
    Database(#[from] sqlx::Error),
    #[error("a stored event cannot be read (session {session}, seq {seq}): {source}")]
    Corrupt {
        session: String,
        seq: i64,
        source: serde_json::Error,
    },
    #[error("that session already exists")]
    Exists,
    #[error("a live API key is already named `{0}`; revoke it first or pick another name")]
    NameTaken(String),
}

/// A session as lists show it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SessionRecord {
    pub id: SessionId,
    pub owner: OwnerId,
    /// The first question, or what the owner renamed it to; empty before the
    /// first question.
    pub title: String,
    pub created_ms: u64,
    pub updated_ms: u64,
    /// The share link this session was forked from, if it was.
    pub forked_from: Option<String>,
}

/// A live share link.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ShareRecord {
    pub token: ShareToken,
    pub session_id: SessionId,
    /// The link shows the session's events up to this one: what there was
    /// when it was shared (sharing again moves it on).
    pub upto_seq: u64,
    /// The link also offers the session's files, as they were when it was
    /// shared.
    pub files: bool,
    pub created_ms: u64,
    pub updated_ms: u64,
}

/// Persistent sessions. Every method is one transaction.
#[async_trait]
pub trait Store: Send + Sync + 'static {
    /// Records a new, empty session; [`StoreError::Exists`] if the id is taken.
    async fn create_session(&self, session: &SessionRecord) -> Result<(), StoreError>;

    async fn session(&self, id: SessionId) -> Result<Option<SessionRecord>, StoreError>;

    /// The owner's sessions that have at least one event, the most recently
    /// active first.
    async fn sessions_of(&self, owner: OwnerId) -> Result<Vec<SessionRecord>, StoreError>;

    /// How many sessions the owner holds, begun or still empty: the rows a
    /// cap on what one keeps bounds.
    async fn count_sessions_of(&self, owner: OwnerId) -> Result<u64, StoreError>;

    /// Gives every session of `from` to `to` (a terminal joining a
    /// browser's owner brings its sessions along); answers how many moved.
    async fn move_sessions(&self, from: OwnerId, to: OwnerId) -> Result<u64, StoreError>;

    /// Renames a session; false if there is no such session.
    async fn rename_session(&self, id: SessionId, title: &str) -> Result<bool, StoreError>;

    /// Deletes a session with its events and share links; false if there was
    /// no such session.
    async fn delete_session(&self, id: SessionId) -> Result<bool, StoreError>;

    /// Appends events, in order, in one transaction (they may belong to
    /// several sessions). A session's first user message becomes its title
    /// if it has none; its `updated_ms` moves to its newest event. Events of
    /// sessions that no longer exist are dropped.
    async fn append_events(&self, events: &[(SessionId, SessionEvent)]) -> Result<(), StoreError>;

    /// A session's events, oldest first.
    async fn events(&self, id: SessionId) -> Result<Vec<SessionEvent>, StoreError>;

    /// The session's share link, made if it has none, showing events up to
    /// `upto_seq` (moved on if it already existed), and its files when
    /// `files`.
    async fn share(
        &self,
        id: SessionId,
        upto_seq: u64,
        files: bool,
        now_ms: u64,
    ) -> Result<ShareRecord, StoreError>;

    /// The session's live share link, if any.
    async fn share_of(&self, id: SessionId) -> Result<Option<ShareRecord>, StoreError>;

    /// Revokes the session's share links; how many there were.
    async fn revoke_shares(&self, id: SessionId) -> Result<u64, StoreError>;

    /// The share behind a token, if it is live.
    async fn shared(&self, token: &ShareToken) -> Result<Option<ShareRecord>, StoreError>;

    /// Deletes sessions created before `before_ms` that never got an event
    /// (every visit to `/` makes one); how many.
    async fn prune_empty(&self, before_ms: u64) -> Result<u64, StoreError>;
}

/// A title from a question (shared with the page, which shows the same
/// title before the list is read again).
pub use runcell_protocol::page::{MAX_TITLE_CHARS, title_from};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn titles_are_the_first_line_cut_short() {
        assert_eq!(
            title_from("  plot the primes\nbelow 1000"),
            "plot the primes"
        );
        assert_eq!(title_from(""), "");
        assert_eq!(title_from("```python\nprint(1)\n```"), "print(1)");
        assert_eq!(title_from("\n\n  hello  \n"), "hello");
        let long = "é".repeat(200);
        let title = title_from(&long);
        assert_eq!(title.chars().count(), MAX_TITLE_CHARS);
        assert!(title.ends_with('…'));
    }
}
