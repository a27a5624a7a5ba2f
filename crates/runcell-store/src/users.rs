//! People as stored: an account per person (made on their first sign-in),
//! their role, limits and usage, and the audit log of what was done to
//! accounts and keys.

use std::fmt;
use std::str::FromStr;

use async_trait::async_trait;
use runcell_protocol::OwnerId;
use serde::{Deserialize, Serialize};

use super::StoreError;

/// What a person may do beyond using runcell.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// Sees every account, changes limits and roles, disables people.
    Admin,
    Member,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Admin => "admin",
            Self::Member => "member",
        }
    }
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Role {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "admin" => Ok(Self::Admin),
            "member" => Ok(Self::Member),
            other => Err(format!("no role is called `{other}` (admin, member)")),
        }
    }
}

/// Who gave a person their current role.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RoleBy {
    /// The configured admins list (`auth.admins`), read again at every
    /// sign-in: off the list is a member again on the next sign-in.
    List,
    /// An admin on the admin page; the list never takes it back.
    Admin,
}

impl RoleBy {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::List => "list",
            Self::Admin => "admin",
        }
    }
}

impl FromStr for RoleBy {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "list" => Ok(Self::List),
            "admin" => Ok(Self::Admin),
            other => Err(format!("no one called `{other}` gives roles (list, admin)")),
        }
    }
}

/// One person's limits where they differ from the configured defaults
/// (`None`: the default holds).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LimitOverrides {
    /// Kernels (sandbox sessions) alive at once.
    pub live_kernels: Option<u32>,
    /// Notebooks kept.
    pub sessions: Option<u32>,
    /// Runs started a minute.
    pub runs_per_minute: Option<u32>,
    /// Seconds of the model's time a day.
    pub model_seconds_per_day: Option<u32>,
    /// Files kept in their sessions, MiB.
    pub storage_mib: Option<u32>,
}

/// A person's account.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UserRecord {
    /// A hyphenated UUID; the pages' sign-in tokens carry it.
    pub id: String,
    /// The OpenID provider's issuer URL, or `header:<name>` for a person a
    /// trusted proxy named.
    pub issuer: String,
    /// Who the issuer says they are (`sub`, or the header's value).
    pub subject: String,
    pub name: String,
    pub email: String,
    pub role: Role,
    /// Who gave them `role`.
    pub role_by: RoleBy,
    /// The owner their notebooks are kept under; never sent to a browser.
    pub owner: OwnerId,
    pub limits: LimitOverrides,
    pub created_ms: u64,
    pub last_seen_ms: Option<u64>,
    pub disabled_ms: Option<u64>,
    /// Runs started for them, all time.
    pub runs: u64,
    /// The model's time on their turns, all time.
    pub model_ms: u64,
    /// The day (since 1970, UTC) `model_day_ms` counts...
    pub model_day: u64,
    /// ...and the model's time on their turns that day.
    pub model_day_ms: u64,
}

impl UserRecord {
    /// The model's time on their turns on `day` (since 1970, UTC).
    pub fn model_ms_on(&self, day: u64) -> u64 {
        if self.model_day == day {
            self.model_day_ms
        } else {
            0
        }
    }

    pub fn is_disabled(&self) -> bool {
        self.disabled_ms.is_some()
    }

    /// Their name, else their email, else who the issuer says they are.
    pub fn display_name(&self) -> &str {
        [&self.name, &self.email, &self.subject]
            .into_iter()
            .find(|s| !s.trim().is_empty())
            .map_or("", |s| s.as_str())
    }
}

/// Who a sign-in says someone is, as the provider or proxy said it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Identity {
    pub issuer: String,
    pub subject: String,
    pub name: String,
    pub email: String,
    /// Whether whoever named the person vouches for `email` (an OpenID
    /// provider's `email_verified: true`; a trusted proxy's header). Not
    /// kept: it decides whether the email may make an admin.
    pub email_verified: bool,
}

/// A sign-in as the store saw it: the account after it, and the role it
/// had before (`None`: made by this sign-in).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SignedInUser {
    pub user: UserRecord,
    pub role_before: Option<Role>,
}

/// An entry of the audit log.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AuditEntry {
    /// Increasing; 0 for an entry not yet written.
    pub id: i64,
    pub at_ms: u64,
    /// The user who did it; `None` for the server or its command line.
    pub actor: Option<String>,
    /// What was done, as a word: `sign_in`, `sign_in_refused`,
    /// `key_created`, `key_revoked`, `user_disabled`, `user_enabled`,
    /// `role_changed`, `limits_changed`.
    pub action: String,
    /// The user or key it was done to.
    pub subject: Option<String>,
    /// In words, for people reading the log.
    pub detail: String,
}

/// `last_seen_ms` is written at most this often per person.
pub const SEEN_EVERY_MS: u64 = 60_000;

/// Where accounts and the audit log are kept.
#[async_trait]
pub trait UserStore: Send + Sync + 'static {
    /// The account of `identity`, made on its first sign-in with `owner`;
    /// an existing one gets the identity's current name and email and
    /// `last_seen_ms`. `listed`: the configured admins list names this
    /// (verified) identity. Listed, the person is an admin; not listed, a
    /// role the list gave ([`RoleBy::List`]) goes back to member, and a
    /// role an admin gave ([`RoleBy::Admin`]) stays.
    async fn sign_in_user(
        &self,
        identity: &Identity,
        owner: OwnerId,
        listed: bool,
        now_ms: u64,
    ) -> Result<SignedInUser, StoreError>;

    async fn user(&self, id: &str) -> Result<Option<UserRecord>, StoreError>;

    /// Every account, oldest first.
    async fn users(&self) -> Result<Vec<UserRecord>, StoreError>;

    /// The ids of the disabled accounts and their owners.
    async fn disabled_users(&self) -> Result<Vec<(String, OwnerId)>, StoreError>;

    /// Gives `id` `role`, as an admin on the admin page ([`RoleBy::Admin`]);
    /// false if there is no such account.
    async fn set_role(&self, id: &str, role: Role) -> Result<bool, StoreError>;

    async fn set_limits(&self, id: &str, limits: &LimitOverrides) -> Result<bool, StoreError>;

    /// Disables (`Some(now)`) or enables (`None`) an account.
    async fn set_disabled(&self, id: &str, disabled_ms: Option<u64>) -> Result<bool, StoreError>;

    /// Notes that the person was seen (written at most once a minute).
    async fn touch_user(&self, id: &str, now_ms: u64) -> Result<(), StoreError>;

    /// Adds to a person's usage: runs, and the model's time on `day`
    /// (since 1970, UTC).
    async fn add_usage(
        &self,
        id: &str,
        runs: u64,
        model_ms: u64,
        day: u64,
    ) -> Result<(), StoreError>;

    /// Revokes every live key of the person; how many.
    async fn revoke_keys_of(&self, user_id: &str, now_ms: u64) -> Result<u64, StoreError>;

    /// Writes an entry (its `id` is ignored).
    async fn audit(&self, entry: &AuditEntry) -> Result<(), StoreError>;

    /// Up to `limit` entries before `before` (an entry's id; `None`: the
    /// newest), newest first.
    async fn audit_log(
        &self,
        before: Option<i64>,
        limit: u32,
    ) -> Result<Vec<AuditEntry>, StoreError>;
}
