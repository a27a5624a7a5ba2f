//! Rows to records, for every database: the stores read the same columns
//! under the same names, so one mapper serves SQLite and PostgreSQL.

use std::str::FromStr;

use sqlx::Row;

use super::keys::KeyRecord;
use super::users::{AuditEntry, Role, RoleBy, UserRecord};
use super::{SessionRecord, ShareRecord, StoreError};
use runcell_protocol::{OwnerId, SessionId, ShareToken};

pub const SESSION_COLUMNS: &str = "id, owner, title, created_ms, updated_ms, forked_from";
pub const SHARE_COLUMNS: &str = "token, session_id, upto_seq, files, created_ms, updated_ms";
pub const KEY_COLUMNS: &str = "id, name, prefix, created_ms, last_used_ms, revoked_ms, user_id";
pub const USER_COLUMNS: &str = "id, issuer, subject, name, email, role, role_by, owner, limits, \
     created_ms, last_seen_ms, disabled_ms, runs, model_ms, model_day, model_day_ms";
pub const AUDIT_COLUMNS: &str = "id, at_ms, actor, action, subject, detail";

/// A time or a count as the databases store it (signed 64 bits).
pub fn ms(value: u64) -> i64 {
    i64::try_from(value).unwrap_or(i64::MAX)
}

pub fn unsigned(value: i64) -> u64 {
    u64::try_from(value).unwrap_or(0)
}

/// The column types the stores read, for either database's rows.
pub trait StoreRow {
    fn text(&self, column: &str) -> Result<String, sqlx::Error>;
    fn maybe_text(&self, column: &str) -> Result<Option<String>, sqlx::Error>;
    fn int(&self, column: &str) -> Result<i64, sqlx::Error>;
    fn maybe_int(&self, column: &str) -> Result<Option<i64>, sqlx::Error>;
    fn flag(&self, column: &str) -> Result<bool, sqlx::Error>;
}

macro_rules! store_row {
    ($row:ty) => {
        impl StoreRow for $row {
            fn text(&self, column: &str) -> Result<String, sqlx::Error> {
                self.try_get(column)
            }
            fn maybe_text(&self, column: &str) -> Result<Option<String>, sqlx::Error> {
                self.try_get(column)
            }
            fn int(&self, column: &str) -> Result<i64, sqlx::Error> {
                self.try_get(column)
            }
            fn maybe_int(&self, column: &str) -> Result<Option<i64>, sqlx::Error> {
                self.try_get(column)
            }
            fn flag(&self, column: &str) -> Result<bool, sqlx::Error> {
                self.try_get(column)
            }
        }
    };
}

store_row!(sqlx::sqlite::SqliteRow);
store_row!(sqlx::postgres::PgRow);

fn corrupt(what: &str) -> StoreError {
    StoreError::Database(sqlx::Error::Decode(what.to_string().into()))
}

pub fn session_of(row: &impl StoreRow) -> Result<SessionRecord, StoreError> {
    Ok(SessionRecord {
        id: SessionId::from_str(&row.text("id")?).map_err(|_| corrupt("a stored session id"))?,
        owner: OwnerId::from_str(&row.text("owner")?).map_err(|_| corrupt("a stored owner id"))?,
        title: row.text("title")?,
        created_ms: unsigned(row.int("created_ms")?),
        updated_ms: unsigned(row.int("updated_ms")?),
        forked_from: row.maybe_text("forked_from")?,
    })
}

pub fn share_of(row: &impl StoreRow) -> Result<ShareRecord, StoreError> {
    Ok(ShareRecord {
        token: ShareToken::from_str(&row.text("token")?)
            .map_err(|_| corrupt("a stored share token"))?,
        session_id: SessionId::from_str(&row.text("session_id")?)
            .map_err(|_| corrupt("a stored session id"))?,
        upto_seq: unsigned(row.int("upto_seq")?),
        files: row.flag("files")?,
        created_ms: unsigned(row.int("created_ms")?),
        updated_ms: unsigned(row.int("updated_ms")?),
    })
}

pub fn key_of(row: &impl StoreRow) -> Result<KeyRecord, StoreError> {
    Ok(KeyRecord {
        id: row.text("id")?,
        name: row.text("name")?,
        prefix: row.text("prefix")?,
        created_ms: unsigned(row.int("created_ms")?),
        last_used_ms: row.maybe_int("last_used_ms")?.map(unsigned),
        revoked_ms: row.maybe_int("revoked_ms")?.map(unsigned),
        user_id: row.maybe_text("user_id")?,
    })
}

pub fn user_of(row: &impl StoreRow) -> Result<UserRecord, StoreError> {
    Ok(UserRecord {
        id: row.text("id")?,
        issuer: row.text("issuer")?,
        subject: row.text("subject")?,
        name: row.text("name")?,
        email: row.text("email")?,
        role: Role::from_str(&row.text("role")?).map_err(|_| corrupt("a stored role"))?,
        role_by: RoleBy::from_str(&row.text("role_by")?)
            .map_err(|_| corrupt("who gave a stored role"))?,
        owner: OwnerId::from_str(&row.text("owner")?).map_err(|_| corrupt("a stored owner id"))?,
        // Limits an older or newer server wrote that this one cannot read
        // are the defaults, not an account nobody can sign in to.
        limits: serde_json::from_str(&row.text("limits")?).unwrap_or_default(),
        created_ms: unsigned(row.int("created_ms")?),
        last_seen_ms: row.maybe_int("last_seen_ms")?.map(unsigned),
        disabled_ms: row.maybe_int("disabled_ms")?.map(unsigned),
        runs: unsigned(row.int("runs")?),
        model_ms: unsigned(row.int("model_ms")?),
        model_day: unsigned(row.int("model_day")?),
        model_day_ms: unsigned(row.int("model_day_ms")?),
    })
}

pub fn audit_of(row: &impl StoreRow) -> Result<AuditEntry, StoreError> {
    Ok(AuditEntry {
        id: row.int("id")?,
        at_ms: unsigned(row.int("at_ms")?),
        actor: row.maybe_text("actor")?,
        action: row.text("action")?,
        subject: row.maybe_text("subject")?,
        detail: row.text("detail")?,
    })
}

/// The `kind` column: the event's serde tag.
pub fn kind_of(event: &runcell_protocol::EventBody) -> &'static str {
    use runcell_protocol::Named;
    event.kind().name()
}
