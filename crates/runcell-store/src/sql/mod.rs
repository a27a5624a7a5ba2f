//! The SQL both dialects agree on, written once. sqlx's SQLite driver reads
//! `$N` placeholders as PostgreSQL does, and both databases hold the same
//! tables under the same names (INTEGER in SQLite, BIGINT in PostgreSQL,
//! both read as `i64`), so a statement here runs on either. A store runs
//! them through [`Backend`], which binds each [`Param`] in its database's
//! types; what the dialects say differently (the event insert, the newest
//! time of a session, the order of keys, leases and NOTIFY) stays beside
//! each backend, with the reason.

use std::collections::HashMap;

use runcell_protocol::{EventBody, SessionEvent};
use sqlx::query::Query;
use sqlx::{Database, Encode, QueryBuilder, Type};

use super::rows::{
    AUDIT_COLUMNS, SESSION_COLUMNS, SHARE_COLUMNS, StoreRow, USER_COLUMNS, audit_of, kind_of, ms,
    session_of, share_of, unsigned, user_of,
};
use super::users::{
    AuditEntry, Identity, LimitOverrides, Role, SEEN_EVERY_MS, SignedInUser, UserRecord,
};
use super::{SessionRecord, ShareRecord, StoreError, title_from};
use runcell_protocol::{OwnerId, SessionId, ShareToken};

mod keys;
pub use keys::{
    create_key, key, key_by_digest, keys, keys_of_user, keys_revoked_since, revoke_key,
    revoke_key_id, touch_key,
};

/// A statement's parameter, bound by each database in its own types.
pub enum Param {
    Text(String),
    MaybeText(Option<String>),
    Int(i64),
    MaybeInt(Option<i64>),
    Flag(bool),
}

/// `query` with `params` bound in order (as `$1`, `$2`, …).
pub fn bind<'q, DB>(
    query: Query<'q, DB, DB::Arguments<'q>>,
    params: Vec<Param>,
) -> Query<'q, DB, DB::Arguments<'q>>
where
    DB: Database,
    String: Encode<'q, DB> + Type<DB>,
    Option<String>: Encode<'q, DB> + Type<DB>,
    i64: Encode<'q, DB> + Type<DB>,
    Option<i64>: Encode<'q, DB> + Type<DB>,
    bool: Encode<'q, DB> + Type<DB>,
{
    params.into_iter().fold(query, |query, param| match param {
        Param::Text(value) => query.bind(value),
        Param::MaybeText(value) => query.bind(value),
        Param::Int(value) => query.bind(value),
        Param::MaybeInt(value) => query.bind(value),
        Param::Flag(value) => query.bind(value),
    })
}

/// What the statements written once need of a store: a statement run on
/// its pool with parameters bound in its database's types, its rows, and
/// text as its database can hold it.
pub trait Backend: Sync {
    type Row: StoreRow + Send;

    /// Text a person wrote (a title, a name), as this database keeps it.
    fn text(s: &str) -> String;

    /// Runs `statement`; how many rows it changed.
    fn execute(
        &self,
        statement: &str,
        params: Vec<Param>,
    ) -> impl Future<Output = Result<u64, sqlx::Error>> + Send;

    fn fetch_optional(
        &self,
        statement: &str,
        params: Vec<Param>,
    ) -> impl Future<Output = Result<Option<Self::Row>, sqlx::Error>> + Send;

    fn fetch_all(
        &self,
        statement: &str,
        params: Vec<Param>,
    ) -> impl Future<Output = Result<Vec<Self::Row>, sqlx::Error>> + Send;
}

/// The statements' part of [`Backend`] for a store with a `pool`: the same
/// for either database, in its own types (sqlx's query results share no
/// trait that says how many rows changed).
macro_rules! run_on_pool {
    () => {
        async fn execute(
            &self,
            statement: &str,
            params: Vec<$crate::sql::Param>,
        ) -> Result<u64, sqlx::Error> {
            let done = $crate::sql::bind(sqlx::query(statement), params)
                .execute(&self.pool)
                .await?;
            Ok(done.rows_affected())
        }

        async fn fetch_optional(
            &self,
            statement: &str,
            params: Vec<$crate::sql::Param>,
        ) -> Result<Option<Self::Row>, sqlx::Error> {
            $crate::sql::bind(sqlx::query(statement), params)
                .fetch_optional(&self.pool)
                .await
        }

        async fn fetch_all(
            &self,
            statement: &str,
            params: Vec<$crate::sql::Param>,
        ) -> Result<Vec<Self::Row>, sqlx::Error> {
            $crate::sql::bind(sqlx::query(statement), params)
                .fetch_all(&self.pool)
                .await
        }
    };
}
pub(crate) use run_on_pool;

// Sessions.

/// A new session; nothing if its id is taken (the caller answers
/// [`StoreError::Exists`]). PostgreSQL runs it in a transaction with the
/// session's lease.
pub const INSERT_SESSION: &str =
    "INSERT INTO sessions (id, owner, title, created_ms, updated_ms, forked_from)
     VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (id) DO NOTHING";

pub fn session_params<B: Backend>(session: &SessionRecord) -> Vec<Param> {
    vec![
        Param::Text(session.id.to_string()),
        Param::Text(session.owner.to_string()),
        Param::Text(B::text(&session.title)),
        Param::Int(ms(session.created_ms)),
        Param::Int(ms(session.updated_ms)),
        Param::MaybeText(session.forked_from.as_deref().map(B::text)),
    ]
}

pub async fn session(
    db: &impl Backend,
    id: SessionId,
) -> Result<Option<SessionRecord>, StoreError> {
    db.fetch_optional(
        &format!("SELECT {SESSION_COLUMNS} FROM sessions WHERE id = $1"),
        vec![Param::Text(id.to_string())],
    )
    .await?
    .as_ref()
    .map(session_of)
    .transpose()
}

pub async fn sessions_of(
    db: &impl Backend,
    owner: OwnerId,
) -> Result<Vec<SessionRecord>, StoreError> {
    db.fetch_all(
        &format!(
            "SELECT {SESSION_COLUMNS} FROM sessions s WHERE owner = $1
               AND EXISTS (SELECT 1 FROM events e WHERE e.session_id = s.id)
             ORDER BY updated_ms DESC, created_ms DESC"
        ),
        vec![Param::Text(owner.to_string())],
    )
    .await?
    .iter()
    .map(session_of)
    .collect()
}

pub async fn count_sessions_of(db: &impl Backend, owner: OwnerId) -> Result<u64, StoreError> {
    let row = db
        .fetch_optional(
            "SELECT COUNT(*) AS held FROM sessions WHERE owner = $1",
            vec![Param::Text(owner.to_string())],
        )
        .await?
        .ok_or(sqlx::Error::RowNotFound)?;
    Ok(u64::try_from(row.int("held")?).unwrap_or(0))
}

pub async fn move_sessions(
    db: &impl Backend,
    from: OwnerId,
    to: OwnerId,
) -> Result<u64, StoreError> {
    Ok(db
        .execute(
            "UPDATE sessions SET owner = $1 WHERE owner = $2",
            vec![Param::Text(to.to_string()), Param::Text(from.to_string())],
        )
        .await?)
}

pub async fn rename_session<B: Backend>(
    db: &B,
    id: SessionId,
    title: &str,
) -> Result<bool, StoreError> {
    let renamed = db
        .execute(
            "UPDATE sessions SET title = $1 WHERE id = $2",
            vec![
                Param::Text(B::text(&title_from(title))),
                Param::Text(id.to_string()),
            ],
        )
        .await?;
    Ok(renamed > 0)
}

pub async fn delete_session(db: &impl Backend, id: SessionId) -> Result<bool, StoreError> {
    // Events and shares go with it (ON DELETE CASCADE).
    let deleted = db
        .execute(
            "DELETE FROM sessions WHERE id = $1",
            vec![Param::Text(id.to_string())],
        )
        .await?;
    Ok(deleted > 0)
}

pub async fn prune_empty(db: &impl Backend, before_ms: u64) -> Result<u64, StoreError> {
    Ok(db
        .execute(
            "DELETE FROM sessions WHERE created_ms < $1
               AND NOT EXISTS (SELECT 1 FROM events e WHERE e.session_id = sessions.id)",
            vec![Param::Int(ms(before_ms))],
        )
        .await?)
}

// Events.

/// Rows per event `INSERT`: 5 parameters each, far below SQLite's limit
/// (32,766) and PostgreSQL's (65,535).
pub const ROWS_PER_INSERT: usize = 400;

/// An event as its row holds it.
pub struct EventRow {
    session: String,
    seq: i64,
    ts_ms: i64,
    kind: &'static str,
    body: String,
}

/// The rows of `events`; an event that cannot be written as JSON is
/// [`StoreError::Corrupt`].
pub fn event_rows(events: &[(SessionId, SessionEvent)]) -> Result<Vec<EventRow>, StoreError> {
    events
        .iter()
        .map(|(session, event)| {
            let body =
                serde_json::to_string(&event.event).map_err(|source| StoreError::Corrupt {
                    session: session.to_string(),
                    seq: ms(event.seq),
                    source,
                })?;
            Ok(EventRow {
                session: session.to_string(),
                seq: ms(event.seq),
                ts_ms: ms(event.ts_ms),
                kind: kind_of(&event.event),
                body,
            })
        })
        .collect()
}

/// `VALUES (session_id, seq, ts_ms, kind, body), …` for `rows`: the part of
/// an event insert both dialects write alike.
pub fn push_event_values<'args, DB>(insert: &mut QueryBuilder<'args, DB>, rows: Vec<EventRow>)
where
    DB: Database,
    String: Encode<'args, DB> + Type<DB>,
    i64: Encode<'args, DB> + Type<DB>,
    &'static str: Encode<'args, DB> + Type<DB>,
{
    insert.push_values(rows, |mut row, event| {
        row.push_bind(event.session)
            .push_bind(event.seq)
            .push_bind(event.ts_ms)
            .push_bind(event.kind)
            .push_bind(event.body);
    });
}

/// A session's first question names it, if it has no title yet: run with
/// each of [`names`].
pub const NAME_SESSION: &str = "UPDATE sessions SET title = $1 WHERE id = $2 AND title = ''";

/// [`NAME_SESSION`]'s parameters for each question among `events`.
pub fn names<B: Backend>(events: &[(SessionId, SessionEvent)]) -> Vec<Vec<Param>> {
    events
        .iter()
        .filter_map(|(session, event)| match &event.event {
            EventBody::UserMessage { text, .. } => Some(vec![
                Param::Text(B::text(&title_from(text))),
                Param::Text(session.to_string()),
            ]),
            _ => None,
        })
        .collect()
}

/// The newest event time of each session of `events`.
pub fn newest_by_session(events: &[(SessionId, SessionEvent)]) -> HashMap<SessionId, u64> {
    let mut newest: HashMap<SessionId, u64> = HashMap::new();
    for (session, event) in events {
        let ts = newest.entry(*session).or_default();
        *ts = (*ts).max(event.ts_ms);
    }
    newest
}

/// A session's events after `after`, oldest first (`seq` counts from 1, so
/// after 0 is all of them).
pub async fn events_after(
    db: &impl Backend,
    id: SessionId,
    after: u64,
) -> Result<Vec<SessionEvent>, StoreError> {
    let session = id.to_string();
    let rows = db
        .fetch_all(
            "SELECT seq, ts_ms, body FROM events WHERE session_id = $1 AND seq > $2 ORDER BY seq",
            vec![Param::Text(session.clone()), Param::Int(ms(after))],
        )
        .await?;
    rows.iter()
        .map(|row| {
            let seq = row.int("seq")?;
            let event =
                serde_json::from_str(&row.text("body")?).map_err(|source| StoreError::Corrupt {
                    session: session.clone(),
                    seq,
                    source,
                })?;
            Ok(SessionEvent {
                seq: unsigned(seq),
                ts_ms: unsigned(row.int("ts_ms")?),
                event,
            })
        })
        .collect()
}

// Share links.

pub async fn share(
    db: &impl Backend,
    id: SessionId,
    upto_seq: u64,
    files: bool,
    now_ms: u64,
) -> Result<ShareRecord, StoreError> {
    // One statement: a new token, or the session's existing link moved on.
    let row = db
        .fetch_optional(
            &format!(
                "INSERT INTO shares (token, session_id, upto_seq, files, created_ms, updated_ms)
                 VALUES ($1, $2, $3, $4, $5, $5)
                 ON CONFLICT (session_id) DO UPDATE
                   SET upto_seq = excluded.upto_seq, files = excluded.files,
                       updated_ms = excluded.updated_ms
                 RETURNING {SHARE_COLUMNS}"
            ),
            vec![
                Param::Text(ShareToken::random().to_string()),
                Param::Text(id.to_string()),
                Param::Int(ms(upto_seq)),
                Param::Flag(files),
                Param::Int(ms(now_ms)),
            ],
        )
        .await?
        .ok_or(sqlx::Error::RowNotFound)?;
    share_of(&row)
}

pub async fn share_of_session(
    db: &impl Backend,
    id: SessionId,
) -> Result<Option<ShareRecord>, StoreError> {
    // At most one: `session_id` is unique in both schemas.
    db.fetch_optional(
        &format!("SELECT {SHARE_COLUMNS} FROM shares WHERE session_id = $1 LIMIT 1"),
        vec![Param::Text(id.to_string())],
    )
    .await?
    .as_ref()
    .map(share_of)
    .transpose()
}

pub async fn revoke_shares(db: &impl Backend, id: SessionId) -> Result<u64, StoreError> {
    Ok(db
        .execute(
            "DELETE FROM shares WHERE session_id = $1",
            vec![Param::Text(id.to_string())],
        )
        .await?)
}

pub async fn shared(
    db: &impl Backend,
    token: &ShareToken,
) -> Result<Option<ShareRecord>, StoreError> {
    db.fetch_optional(
        &format!("SELECT {SHARE_COLUMNS} FROM shares WHERE token = $1"),
        vec![Param::Text(token.as_str().to_string())],
    )
    .await?
    .as_ref()
    .map(share_of)
    .transpose()
}

// API keys.

pub async fn sign_in_user<B: Backend>(
    db: &B,
    identity: &Identity,
    owner: OwnerId,
    listed: bool,
    now_ms: u64,
) -> Result<SignedInUser, StoreError> {
    let limits = serde_json::to_string(&LimitOverrides::default())
        .map_err(|e| StoreError::Database(sqlx::Error::Encode(e.into())))?;
    let role_before = db
        .fetch_optional(
            &format!("SELECT {USER_COLUMNS} FROM users WHERE issuer = $1 AND subject = $2"),
            vec![
                Param::Text(B::text(&identity.issuer)),
                Param::Text(B::text(&identity.subject)),
            ],
        )
        .await?
        .as_ref()
        .map(user_of)
        .transpose()?
        .map(|user| user.role);
    let role = if listed { Role::Admin } else { Role::Member };
    // Listed: an admin (the list's, unless an admin's promotion came
    // first). Not listed: the list's admin role goes back to member; an
    // admin's choice stays.
    let row = db
        .fetch_optional(
            &format!(
                "INSERT INTO users (id, issuer, subject, name, email, role, role_by, owner, limits, created_ms, last_seen_ms)
                 VALUES ($1, $2, $3, $4, $5, $6, 'list', $7, $8, $9, $9)
                 ON CONFLICT (issuer, subject) DO UPDATE SET
                     name = excluded.name, email = excluded.email, last_seen_ms = excluded.last_seen_ms,
                     role = CASE WHEN excluded.role = 'admin' THEN 'admin'
                                 WHEN users.role_by = 'list' THEN 'member'
                                 ELSE users.role END,
                     role_by = CASE WHEN excluded.role = 'admin' AND users.role <> 'admin' THEN 'list'
                                    ELSE users.role_by END
                 RETURNING {USER_COLUMNS}"
            ),
            vec![
                Param::Text(uuid::Uuid::new_v4().to_string()),
                Param::Text(B::text(&identity.issuer)),
                Param::Text(B::text(&identity.subject)),
                Param::Text(B::text(&identity.name)),
                Param::Text(B::text(&identity.email)),
                Param::Text(role.as_str().to_string()),
                Param::Text(owner.to_string()),
                Param::Text(limits),
                Param::Int(ms(now_ms)),
            ],
        )
        .await?;
    let user = row
        .as_ref()
        .map(user_of)
        .transpose()?
        .ok_or_else(|| StoreError::Database(sqlx::Error::RowNotFound))?;
    Ok(SignedInUser { user, role_before })
}

pub async fn user<B: Backend>(db: &B, id: &str) -> Result<Option<UserRecord>, StoreError> {
    db.fetch_optional(
        &format!("SELECT {USER_COLUMNS} FROM users WHERE id = $1"),
        vec![Param::Text(B::text(id))],
    )
    .await?
    .as_ref()
    .map(user_of)
    .transpose()
}

pub async fn users(db: &impl Backend) -> Result<Vec<UserRecord>, StoreError> {
    db.fetch_all(
        &format!("SELECT {USER_COLUMNS} FROM users ORDER BY created_ms, id"),
        Vec::new(),
    )
    .await?
    .iter()
    .map(user_of)
    .collect()
}

pub async fn disabled_users(db: &impl Backend) -> Result<Vec<(String, OwnerId)>, StoreError> {
    db.fetch_all(
        &format!("SELECT {USER_COLUMNS} FROM users WHERE disabled_ms IS NOT NULL"),
        Vec::new(),
    )
    .await?
    .iter()
    .map(|row| user_of(row).map(|user| (user.id, user.owner)))
    .collect()
}

pub async fn set_user_column<B: Backend>(
    db: &B,
    id: &str,
    column: UserColumn,
    value: Param,
) -> Result<bool, StoreError> {
    // A role set here is an admin's, which the admins list never takes back.
    let column = match column {
        UserColumn::Role => "role_by = 'admin', role",
        UserColumn::Limits => "limits",
        UserColumn::Disabled => "disabled_ms",
    };
    let changed = db
        .execute(
            &format!("UPDATE users SET {column} = $1 WHERE id = $2"),
            vec![value, Param::Text(B::text(id))],
        )
        .await?;
    Ok(changed > 0)
}

/// The columns an admin changes.
#[derive(Clone, Copy, Debug)]
pub enum UserColumn {
    Role,
    Limits,
    Disabled,
}

pub async fn touch_user<B: Backend>(db: &B, id: &str, now_ms: u64) -> Result<(), StoreError> {
    db.execute(
        "UPDATE users SET last_seen_ms = $1
         WHERE id = $2 AND (last_seen_ms IS NULL OR last_seen_ms <= $3)",
        vec![
            Param::Int(ms(now_ms)),
            Param::Text(B::text(id)),
            Param::Int(ms(now_ms.saturating_sub(SEEN_EVERY_MS))),
        ],
    )
    .await?;
    Ok(())
}

pub async fn add_usage<B: Backend>(
    db: &B,
    id: &str,
    runs: u64,
    model_ms: u64,
    day: u64,
) -> Result<(), StoreError> {
    db.execute(
        "UPDATE users SET runs = runs + $1, model_ms = model_ms + $2,
             model_day_ms = CASE WHEN model_day = $4 THEN model_day_ms + $2 ELSE $2 END,
             model_day = $4
         WHERE id = $3",
        vec![
            Param::Int(ms(runs)),
            Param::Int(ms(model_ms)),
            Param::Text(B::text(id)),
            Param::Int(ms(day)),
        ],
    )
    .await?;
    Ok(())
}

pub async fn revoke_keys_of<B: Backend>(
    db: &B,
    user_id: &str,
    now_ms: u64,
) -> Result<u64, StoreError> {
    Ok(db
        .execute(
            "UPDATE api_keys SET revoked_ms = $1 WHERE user_id = $2 AND revoked_ms IS NULL",
            vec![Param::Int(ms(now_ms)), Param::Text(B::text(user_id))],
        )
        .await?)
}

pub async fn audit<B: Backend>(db: &B, entry: &AuditEntry) -> Result<(), StoreError> {
    db.execute(
        "INSERT INTO audit_log (at_ms, actor, action, subject, detail) VALUES ($1, $2, $3, $4, $5)",
        vec![
            Param::Int(ms(entry.at_ms)),
            Param::MaybeText(entry.actor.as_deref().map(B::text)),
            Param::Text(B::text(&entry.action)),
            Param::MaybeText(entry.subject.as_deref().map(B::text)),
            Param::Text(B::text(&entry.detail)),
        ],
    )
    .await?;
    Ok(())
}

pub async fn audit_log(
    db: &impl Backend,
    before: Option<i64>,
    limit: u32,
) -> Result<Vec<AuditEntry>, StoreError> {
    db.fetch_all(
        &format!("SELECT {AUDIT_COLUMNS} FROM audit_log WHERE id < $1 ORDER BY id DESC LIMIT $2"),
        vec![
            Param::Int(before.unwrap_or(i64::MAX)),
            Param::Int(i64::from(limit)),
        ],
    )
    .await?
    .iter()
    .map(audit_of)
    .collect()
}
