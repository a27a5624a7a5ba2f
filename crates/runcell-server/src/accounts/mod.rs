//! People: accounts made on their first sign-in (with the organisation's
//! OpenID provider, or named by a trusted proxy's header), who is signed in
//! on a request, and what admins do to accounts (roles, limits, disabling),
//! each written to the audit log. No HTTP here; `http::signin` and
//! `http::admin` map to pages and statuses.

pub mod keys;
pub mod oidc;
pub mod quotas;
pub mod trusted;

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use app::api::OwnerId;
use parking_lot::{Mutex, RwLock};

use crate::auth::{Auth, AuthError, Issued, PageSubject};
use crate::config::AuthConfig;
use runcell_store::{
    AuditEntry, Identity, LimitOverrides, Role, StoreError, UserRecord, UserStore,
};

pub use oidc::{Oidc, OidcError};
pub use trusted::TrustedHeader;

/// How long an account read from the store is used for a request before it
/// is read again (its role, its name; whether it is disabled is known at
/// once on this node and within `auth.revocation_check_secs` on others).
const PERSON_TTL: Duration = Duration::from_secs(5);
/// How long a trusted header's person is remembered before the store is
/// asked again (and `last_seen` written).
const HEADER_TTL: Duration = Duration::from_secs(60);
/// A trusted header's sign-in is written to the audit log when the person
/// was not seen by this node for this long.
const HEADER_AUDIT_GAP: Duration = Duration::from_secs(3600);
/// People remembered at most in each cache; past it the cache starts over.
const MAX_CACHED: usize = 10_000;

#[derive(Debug, thiserror::Error)]
pub enum AccountError {
    #[error("this account has been disabled; ask an admin of this runcell")]
    Disabled,
    #[error("no such account")]
    NotFound,
    #[error("{0}")]
    Refused(String),
    /// A key was not made: the person's key caps.
    #[error("{0}")]
    KeyRefused(keys::KeyRefusal),
    #[error(transparent)]
    Key(#[from] AuthError),
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Something that holds a person's live things: page sockets, turns and
/// kernels. A disabled account's are closed.
#[async_trait::async_trait]
pub trait HeldByOwner: Send + Sync {
    /// What it is, for the log.
    fn what(&self) -> &'static str;
    /// Closes everything of `owner`'s here; how many were closed.
    async fn close_owner(&self, owner: OwnerId) -> usize;
    /// The kernels of `owner`'s it holds here (what counts against a
    /// person's `live_kernels`).
    fn kernels_of(&self, owner: OwnerId) -> usize {
        let _ = owner;
        0
    }
}

/// Who a request is signed in as.
#[derive(Clone, Debug)]
pub enum SignedIn {
    /// With an API key, at the key sign-in form.
    Key(crate::auth::Caller),
    /// A person.
    Person(Arc<UserRecord>),
}

/// The accounts service.
pub struct Accounts {
    users: Arc<dyn UserStore>,
    auth: Arc<Auth>,
    /// Emails and subjects (lower case) that are admins on sign-in.
    admins: Vec<String>,
    /// Whether a listed email counts without the provider vouching for it.
    trust_unverified_emails: bool,
    /// How long a sign-in lasts.
    lasts: Duration,
    oidc: Option<Oidc>,
    trusted: Option<TrustedHeader>,
    people: Mutex<HashMap<String, (Arc<UserRecord>, Instant)>>,
    /// A trusted header's subject → (account id, read at, audited at).
    by_header: Mutex<HashMap<String, (String, Instant, Instant)>>,
    /// The owners of disabled accounts: their cookies and sign-ins are
    /// refused and what they hold is closed.
    disabled: RwLock<HashSet<OwnerId>>,
    holders: OnceLock<Vec<Arc<dyn HeldByOwner>>>,
    /// Whose account each owner seen signed in here is (turns run after
    /// their request, so the limits find the person by their owner).
    owners: RwLock<HashMap<OwnerId, String>>,
    /// The limits' counters on this node.
    meters: quotas::Meters,
    /// A person's limits unless an admin set others.
    defaults: crate::config::UserLimits,
    /// The caps on making keys.
    key_making: keys::KeyMaking,
    /// What people's keys hold (the code API), once set.
    key_sessions: OnceLock<std::sync::Weak<dyn crate::person_keys::KeySessions>>,
}

impl std::fmt::Debug for Accounts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Accounts")
            .field("oidc", &self.oidc)
            .field("trusted", &self.trusted)
            .finish_non_exhaustive()
    }
}

fn now_ms() -> u64 {
    runcell_core::clock::now_ms()
}

impl Accounts {
    pub fn new(
        users: Arc<dyn UserStore>,
        auth: Arc<Auth>,
        config: &AuthConfig,
    ) -> Result<Self, OidcError> {
        let oidc = if config.oidc.enabled() {
            Some(Oidc::new(&config.oidc)?)
        } else {
            None
        };
        Ok(Self {
            users,
            auth,
            admins: config.admins.iter().map(|a| a.to_lowercase()).collect(),
            trust_unverified_emails: config.trust_unverified_admin_emails,
            lasts: Duration::from_secs(config.ui_session_secs),
            oidc,
            trusted: TrustedHeader::from_config(config),
            people: Mutex::new(HashMap::new()),
            by_header: Mutex::new(HashMap::new()),
            disabled: RwLock::new(HashSet::new()),
            holders: OnceLock::new(),
            owners: RwLock::new(HashMap::new()),
            meters: quotas::Meters::default(),
            defaults: config.user_limits,
            key_making: keys::KeyMaking::new(config),
            key_sessions: OnceLock::new(),
        })
    }

    /// What closes a disabled person's live things; set once at start.
    pub fn hold(&self, holders: Vec<Arc<dyn HeldByOwner>>) {
        if self.holders.set(holders).is_err() {
            tracing::warn!("the accounts' holders were set twice; the first stand");
        }
    }

    pub fn oidc(&self) -> Option<&Oidc> {
        self.oidc.as_ref()
    }

    pub fn trusted(&self) -> Option<&TrustedHeader> {
        self.trusted.as_ref()
    }

    /// How long a sign-in lasts.
    pub fn lasts(&self) -> Duration {
        self.lasts
    }

    /// Whether the admins list names `identity`: by its subject, or by an
    /// email the provider vouches for (`email_verified`), or any email when
    /// `auth.trust_unverified_admin_emails` says so.
    fn listed(&self, identity: &Identity) -> bool {
        let named = |s: &str| !s.is_empty() && self.admins.contains(&s.to_lowercase());
        named(&identity.subject)
            || (named(&identity.email) && (identity.email_verified || self.trust_unverified_emails))
    }

    /// The store's sign-in of `identity`, with the list's role read again;
    /// a role the list gave or took is written to the audit log.
    async fn account_for(&self, identity: &Identity) -> Result<UserRecord, AccountError> {
        let listed = self.listed(identity);
        let signed = self
            .users
            .sign_in_user(identity, OwnerId::random(), listed, now_ms())
            .await?;
        let user = signed.user;
        let changed = match signed.role_before {
            Some(before) => before != user.role,
            None => user.role == Role::Admin,
        };
        if changed {
            let why = if listed {
                "auth.admins names them"
            } else {
                "auth.admins no longer names them"
            };
            self.note(
                None,
                "role_changed",
                Some(&user.id),
                format!(
                    "{} is now {} on signing in: {why}",
                    user.display_name(),
                    role_words(user.role)
                ),
            )
            .await;
        }
        Ok(user)
    }

    /// Signs `identity` in (`how`: "OpenID", "the trusted header"): their
    /// account, made on the first sign-in; a disabled account is refused.
    /// Both are written to the audit log.
    pub async fn sign_in(
        &self,
        identity: &Identity,
        how: &str,
    ) -> Result<UserRecord, AccountError> {
        let user = self.account_for(identity).await?;
        if user.is_disabled() {
            self.note(
                Some(&user.id),
                "sign_in_refused",
                Some(&user.id),
                format!(
                    "{} tried to sign in with {how}; the account is disabled",
                    user.display_name()
                ),
            )
            .await;
            return Err(AccountError::Disabled);
        }
        self.note(
            Some(&user.id),
            "sign_in",
            Some(&user.id),
            format!("{} signed in with {how}", user.display_name()),
        )
        .await;
        self.people
            .lock()
            .insert(user.id.clone(), (Arc::new(user.clone()), Instant::now()));
        Ok(user)
    }

    /// A sign-in attempt sealed for its cookie.
    pub fn seal_attempt(&self, attempt: &oidc::Attempt) -> String {
        self.auth.tokens().seal(attempt)
    }

    /// The attempt a cookie holds, if this server sealed it and it has not
    /// expired.
    pub fn unseal_attempt(&self, sealed: &str) -> Option<oidc::Attempt> {
        self.auth
            .tokens()
            .unseal(sealed, oidc::ATTEMPT_AUDIENCE)
            .ok()
    }

    /// A pages sign-in with an API key: a person's key signs the person in
    /// (the account must not be disabled; written to the audit log), a
    /// server's key signs in as the key, as before accounts.
    pub async fn sign_in_with_key(
        &self,
        api_key: &str,
    ) -> Result<(Issued, Option<Arc<UserRecord>>), AuthError> {
        let caller = self.auth.key_caller(api_key).await?;
        let Some(user_id) = caller.user_id else {
            return Ok((self.auth.sign_in(api_key, self.lasts).await?, None));
        };
        let user = match self.person(&user_id).await {
            Ok(Some(user)) => user,
            Ok(None) => return Err(AuthError::Revoked),
            Err(AccountError::Store(err)) => return Err(AuthError::Store(err)),
            Err(_) => return Err(AuthError::Revoked),
        };
        self.note(
            Some(&user.id),
            "sign_in",
            Some(&user.id),
            format!(
                "{} signed in with the API key {}",
                user.display_name(),
                caller.key_name
            ),
        )
        .await;
        Ok((self.token(&user), Some(user)))
    }

    /// The pages sign-in token for `user`.
    pub fn token(&self, user: &UserRecord) -> Issued {
        self.auth.sign_in_person(&user.id, self.lasts)
    }

    /// The account `id`, as the store said at most [`PERSON_TTL`] ago;
    /// `None` if there is none or it is disabled.
    pub async fn person(&self, id: &str) -> Result<Option<Arc<UserRecord>>, AccountError> {
        let cached = self
            .people
            .lock()
            .get(id)
            .filter(|(_, at)| at.elapsed() < PERSON_TTL)
            .map(|(user, _)| Arc::clone(user));
        let user = match cached {
            Some(user) => user,
            None => {
                let Some(user) = self.users.user(id).await? else {
                    return Ok(None);
                };
                let user = Arc::new(user);
                let mut people = self.people.lock();
                if people.len() >= MAX_CACHED {
                    people.clear();
                }
                people.insert(id.to_string(), (Arc::clone(&user), Instant::now()));
                user
            }
        };
        if user.is_disabled() || self.is_disabled_owner(user.owner) {
            return Ok(None);
        }
        {
            let mut owners = self.owners.write();
            if owners.len() >= MAX_CACHED {
                owners.clear();
            }
            owners.insert(user.owner, user.id.clone());
        }
        if user
            .last_seen_ms
            .is_none_or(|seen| now_ms().saturating_sub(seen) >= runcell_store::users::SEEN_EVERY_MS)
            && let Err(err) = self.users.touch_user(&user.id, now_ms()).await
        {
            tracing::warn!(%err, "cannot note that a person was seen");
        }
        Ok(Some(user))
    }

    /// Who the pages sign-in `token` is for: a live key, or a person whose
    /// account is not disabled.
    pub async fn signed_in(&self, token: &str) -> Result<SignedIn, AuthError> {
        match self.auth.page_subject(token).await? {
            PageSubject::Key(caller) => Ok(SignedIn::Key(caller)),
            PageSubject::Person(id) => match self.person(&id).await {
                Ok(Some(user)) => Ok(SignedIn::Person(user)),
                Ok(None) => Err(AuthError::Revoked),
                Err(AccountError::Store(err)) => Err(AuthError::Store(err)),
                Err(_) => Err(AuthError::Revoked),
            },
        }
    }

    /// The person a trusted proxy names on a request from `peer`, signed
    /// in (the account made on first sight); `None` when the header is off,
    /// absent or not from a trusted proxy, or the account is disabled.
    pub async fn from_header(
        &self,
        headers: &axum::http::HeaderMap,
        peer: Option<std::net::SocketAddr>,
    ) -> Result<Option<Arc<UserRecord>>, AccountError> {
        let Some(identity) = self
            .trusted
            .as_ref()
            .and_then(|t| t.identity(headers, peer))
        else {
            return Ok(None);
        };
        let known = self
            .by_header
            .lock()
            .get(&identity.subject)
            .filter(|(_, read, _)| read.elapsed() < HEADER_TTL)
            .map(|(id, _, _)| id.clone());
        if let Some(id) = known {
            return self.person(&id).await;
        }
        let audited = self
            .by_header
            .lock()
            .get(&identity.subject)
            .map(|(_, _, audited)| *audited)
            .filter(|audited| audited.elapsed() < HEADER_AUDIT_GAP);
        let user = match audited {
            // Seen lately: refreshed quietly.
            Some(_) => {
                let user = self.account_for(&identity).await?;
                if user.is_disabled() {
                    return Ok(None);
                }
                user
            }
            None => match self.sign_in(&identity, "the trusted header").await {
                Ok(user) => user,
                Err(AccountError::Disabled) => return Ok(None),
                Err(err) => return Err(err),
            },
        };
        {
            let mut by_header = self.by_header.lock();
            if by_header.len() >= MAX_CACHED {
                by_header.clear();
            }
            by_header.insert(
                identity.subject.clone(),
                (
                    user.id.clone(),
                    Instant::now(),
                    audited.unwrap_or_else(Instant::now),
                ),
            );
        }
        self.person(&user.id).await
    }

    /// Whether `owner` is a disabled account's.
    pub fn is_disabled_owner(&self, owner: OwnerId) -> bool {
        self.disabled.read().contains(&owner)
    }

    /// Reads the disabled accounts from the store (another node's admin
    /// may have disabled someone) and closes what they hold here.
    pub async fn close_disabled(&self) -> Result<(), AccountError> {
        let disabled = self.users.disabled_users().await?;
        let owners: HashSet<OwnerId> = disabled.iter().map(|(_, owner)| *owner).collect();
        let newly: Vec<OwnerId> = {
            let mut known = self.disabled.write();
            let newly = owners.difference(&known).copied().collect();
            *known = owners;
            newly
        };
        for owner in newly {
            self.close_owner(owner).await;
        }
        Ok(())
    }

    /// Reads the disabled accounts every `every` until `shutdown` (an
    /// admin on another node, or the command line, may disable someone)
    /// and closes what they hold here. Their keys were revoked with them:
    /// the key watch closes what those hold.
    pub fn spawn_watch(
        self: &Arc<Self>,
        every: Duration,
        shutdown: tokio_util::sync::CancellationToken,
    ) -> tokio::task::JoinHandle<()> {
        let accounts = Arc::clone(self);
        crate::auth::revocation::spawn_every(every, shutdown, move || {
            let accounts = Arc::clone(&accounts);
            async move {
                if let Err(err) = accounts.close_disabled().await {
                    tracing::warn!(%err, "cannot read the disabled accounts");
                }
            }
        })
    }

    async fn close_owner(&self, owner: OwnerId) {
        for holder in self.holders.get().map_or(&[][..], Vec::as_slice) {
            let closed = holder.close_owner(owner).await;
            if closed > 0 {
                tracing::info!(
                    closed,
                    what = holder.what(),
                    "closed what a disabled account held"
                );
            }
        }
    }

    /// Every account, oldest first.
    pub async fn users(&self) -> Result<Vec<UserRecord>, AccountError> {
        Ok(self.users.users().await?)
    }

    pub async fn user(&self, id: &str) -> Result<UserRecord, AccountError> {
        self.users.user(id).await?.ok_or(AccountError::NotFound)
    }

    /// Disables or enables `id`'s account, as `actor`. Disabling revokes
    /// their keys (whose connections the key watch closes) and closes their
    /// pages, turns and kernels here at once; other nodes within
    /// `auth.revocation_check_secs`.
    pub async fn set_disabled(
        &self,
        actor: &UserRecord,
        id: &str,
        disabled: bool,
    ) -> Result<UserRecord, AccountError> {
        if disabled && actor.id == id {
            return Err(AccountError::Refused(
                "you cannot disable your own account".into(),
            ));
        }
        let user = self.user(id).await?;
        let now = now_ms();
        self.users.set_disabled(id, disabled.then_some(now)).await?;
        self.people.lock().remove(id);
        if disabled {
            let revoked = self.users.revoke_keys_of(id, now).await?;
            self.disabled.write().insert(user.owner);
            self.close_owner(user.owner).await;
            self.note(
                Some(&actor.id),
                "user_disabled",
                Some(id),
                format!(
                    "{} disabled {} ({revoked} key{} revoked)",
                    actor.display_name(),
                    user.display_name(),
                    if revoked == 1 { "" } else { "s" }
                ),
            )
            .await;
        } else {
            self.disabled.write().remove(&user.owner);
            self.note(
                Some(&actor.id),
                "user_enabled",
                Some(id),
                format!("{} enabled {}", actor.display_name(), user.display_name()),
            )
            .await;
        }
        self.user(id).await
    }

    /// Gives `id` the role `role`, as `actor`.
    pub async fn set_role(
        &self,
        actor: &UserRecord,
        id: &str,
        role: Role,
    ) -> Result<UserRecord, AccountError> {
        if actor.id == id && role != Role::Admin {
            return Err(AccountError::Refused(
                "you cannot take your own admin role; ask another admin".into(),
            ));
        }
        let user = self.user(id).await?;
        self.users.set_role(id, role).await?;
        self.people.lock().remove(id);
        self.note(
            Some(&actor.id),
            "role_changed",
            Some(id),
            format!(
                "{} made {} {}",
                actor.display_name(),
                user.display_name(),
                role_words(role)
            ),
        )
        .await;
        self.user(id).await
    }

    /// Sets `id`'s limits, as `actor`.
    pub async fn set_limits(
        &self,
        actor: &UserRecord,
        id: &str,
        limits: &LimitOverrides,
    ) -> Result<UserRecord, AccountError> {
        let user = self.user(id).await?;
        self.users.set_limits(id, limits).await?;
        self.people.lock().remove(id);
        self.note(
            Some(&actor.id),
            "limits_changed",
            Some(id),
            format!(
                "{} set {}'s limits to {}",
                actor.display_name(),
                user.display_name(),
                serde_json::to_string(limits).unwrap_or_default()
            ),
        )
        .await;
        self.user(id).await
    }

    /// Up to `limit` audit entries before `before`, newest first.
    pub async fn audit_log(
        &self,
        before: Option<i64>,
        limit: u32,
    ) -> Result<Vec<AuditEntry>, AccountError> {
        Ok(self.users.audit_log(before, limit).await?)
    }

    /// Writes an audit entry; a store that cannot is logged, not fatal to
    /// what was done.
    pub async fn note(
        &self,
        actor: Option<&str>,
        action: &str,
        subject: Option<&str>,
        detail: String,
    ) {
        let entry = AuditEntry {
            id: 0,
            at_ms: now_ms(),
            actor: actor.map(str::to_string),
            action: action.to_string(),
            subject: subject.map(str::to_string),
            detail,
        };
        if let Err(err) = self.users.audit(&entry).await {
            tracing::error!(%err, action, "cannot write to the audit log");
        }
    }
}

fn role_words(role: Role) -> &'static str {
    match role {
        Role::Admin => "an admin",
        Role::Member => "a member",
    }
}

#[async_trait::async_trait]
impl HeldByOwner for runcell_agent::session::sockets::OpenSockets {
    fn what(&self) -> &'static str {
        "page sockets"
    }

    async fn close_owner(&self, owner: OwnerId) -> usize {
        runcell_agent::session::sockets::OpenSockets::close_owner(self, owner)
    }
}

#[async_trait::async_trait]
impl HeldByOwner for runcell_agent::notebook::Notebooks {
    fn what(&self) -> &'static str {
        "turns and kernels"
    }

    async fn close_owner(&self, owner: OwnerId) -> usize {
        runcell_agent::notebook::Notebooks::close_owner(self, owner).await
    }

    fn kernels_of(&self, owner: OwnerId) -> usize {
        runcell_agent::notebook::Notebooks::kernels_of(self, owner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use runcell_store::SqliteStore;

    async fn accounts(admins: &[&str]) -> (Accounts, tempfile::TempDir) {
        accounts_with(admins, false).await
    }

    async fn accounts_with(
        admins: &[&str],
        trust_unverified_admin_emails: bool,
    ) -> (Accounts, tempfile::TempDir) {
        let dir = tempfile::tempdir().expect("temp dir");
        let store = Arc::new(SqliteStore::open_in(dir.path()).await.expect("store"));
        let auth = Arc::new(Auth::new(
            store.clone(),
            b"0123456789abcdef0123456789abcdef",
            Duration::from_secs(60),
        ));
        let config = AuthConfig {
            admins: admins.iter().map(|a| (*a).to_string()).collect(),
            trust_unverified_admin_emails,
            ..AuthConfig::default()
        };
        let accounts = Accounts::new(store, auth, &config).expect("accounts");
        (accounts, dir)
    }

    fn identity(subject: &str, email: &str) -> Identity {
        Identity {
            issuer: "https://idp.example.test".into(),
            subject: subject.into(),
            name: String::new(),
            email: email.into(),
            email_verified: true,
        }
    }

    #[tokio::test]
    async fn admins_are_named_by_email_or_subject_in_any_case() {
        let (accounts, _dir) = accounts(&["Ada@Example.org", "ops-bot"]).await;
        let ada = accounts
            .sign_in(&identity("a1", "ada@example.org"), "OpenID Connect")
            .await
            .expect("ada");
        assert_eq!(ada.role, Role::Admin);
        let bot = accounts
            .sign_in(&identity("ops-bot", ""), "OpenID Connect")
            .await
            .expect("bot");
        assert_eq!(bot.role, Role::Admin);
        assert_eq!(bot.display_name(), "ops-bot");
        let bob = accounts
            .sign_in(&identity("b1", "bob@example.org"), "OpenID Connect")
            .await
            .expect("bob");
        assert_eq!(bob.role, Role::Member);
    }

    fn unverified(subject: &str, email: &str) -> Identity {
        Identity {
            email_verified: false,
            ..identity(subject, email)
        }
    }

    #[tokio::test]
    async fn an_email_the_provider_does_not_vouch_for_makes_no_admin() {
        let (accounts, _dir) = accounts(&["ada@example.org", "ops-bot"]).await;
        // Anyone may type ada's address at a provider that does not check it.
        let typed = accounts
            .sign_in(&unverified("mallory", "ada@example.org"), "OpenID Connect")
            .await
            .expect("mallory");
        assert_eq!(typed.role, Role::Member);
        // A subject is the provider's own word, verified email or not.
        let bot = accounts
            .sign_in(&unverified("ops-bot", ""), "OpenID Connect")
            .await
            .expect("bot");
        assert_eq!(bot.role, Role::Admin);
        // The operator who names the trade gets the old behaviour.
        let (trusting, _dir) = accounts_with(&["ada@example.org"], true).await;
        let typed = trusting
            .sign_in(&unverified("mallory", "ada@example.org"), "OpenID Connect")
            .await
            .expect("mallory");
        assert_eq!(typed.role, Role::Admin);
    }

    #[tokio::test]
    async fn the_lists_role_is_read_again_and_an_admins_choice_stays() {
        let (listed, dir) = accounts(&["ada@example.org", "bob@example.org"]).await;
        let ada = listed
            .sign_in(&identity("a1", "ada@example.org"), "OpenID Connect")
            .await
            .expect("ada");
        let bob = listed
            .sign_in(&identity("b1", "bob@example.org"), "OpenID Connect")
            .await
            .expect("bob");
        let carol = listed
            .sign_in(&identity("c1", "carol@example.org"), "OpenID Connect")
            .await
            .expect("carol");
        listed
            .set_role(&ada, &carol.id, Role::Admin)
            .await
            .expect("carol promoted by ada");
        // The same store with ada alone on the list: bob, the list's
        // admin, is a member on his next sign-in; carol, ada's, stays.
        let store = Arc::new(SqliteStore::open_in(dir.path()).await.expect("store"));
        let auth = Arc::new(Auth::new(
            store.clone(),
            b"0123456789abcdef0123456789abcdef",
            Duration::from_secs(60),
        ));
        let config = AuthConfig {
            admins: vec!["ada@example.org".into()],
            ..AuthConfig::default()
        };
        let relisted = Accounts::new(store, auth, &config).expect("accounts");
        let bob_again = relisted
            .sign_in(&identity("b1", "bob@example.org"), "OpenID Connect")
            .await
            .expect("bob again");
        assert_eq!(bob_again.id, bob.id);
        assert_eq!(bob_again.role, Role::Member);
        let carol_again = relisted
            .sign_in(&identity("c1", "carol@example.org"), "OpenID Connect")
            .await
            .expect("carol again");
        assert_eq!(carol_again.role, Role::Admin);
        let log = relisted.audit_log(None, 20).await.expect("log");
        let changes: Vec<_> = log
            .iter()
            .filter(|e| e.action == "role_changed")
            .map(|e| (e.actor.is_none(), e.detail.as_str()))
            .collect();
        assert_eq!(
            changes,
            [
                (
                    true,
                    "bob@example.org is now a member on signing in: auth.admins no longer names them"
                ),
                (false, "ada@example.org made carol@example.org an admin"),
                (
                    true,
                    "bob@example.org is now an admin on signing in: auth.admins names them"
                ),
                (
                    true,
                    "ada@example.org is now an admin on signing in: auth.admins names them"
                ),
            ]
        );
    }

    #[tokio::test]
    async fn a_disabled_person_is_refused_and_their_token_stops_working() {
        let (accounts, _dir) = accounts(&["ada@example.org"]).await;
        let ada = accounts
            .sign_in(&identity("a1", "ada@example.org"), "OpenID Connect")
            .await
            .expect("ada");
        let bob = accounts
            .sign_in(&identity("b1", "bob@example.org"), "OpenID Connect")
            .await
            .expect("bob");
        let token = accounts.token(&bob).token;
        assert!(matches!(
            accounts.signed_in(&token).await,
            Ok(SignedIn::Person(user)) if user.id == bob.id
        ));
        assert!(matches!(
            accounts.set_disabled(&ada, &ada.id, true).await,
            Err(AccountError::Refused(_))
        ));
        accounts
            .set_disabled(&ada, &bob.id, true)
            .await
            .expect("disabled");
        assert!(accounts.is_disabled_owner(bob.owner));
        assert!(accounts.signed_in(&token).await.is_err());
        assert!(matches!(
            accounts
                .sign_in(&identity("b1", "bob@example.org"), "OpenID Connect")
                .await,
            Err(AccountError::Disabled)
        ));
        let log = accounts.audit_log(None, 10).await.expect("log");
        assert_eq!(
            log.iter().map(|e| e.action.as_str()).collect::<Vec<_>>(),
            [
                "sign_in_refused",
                "user_disabled",
                "sign_in",
                "sign_in",
                "role_changed"
            ]
        );
        accounts
            .set_disabled(&ada, &bob.id, false)
            .await
            .expect("enabled");
        assert!(!accounts.is_disabled_owner(bob.owner));
        assert!(accounts.signed_in(&token).await.is_ok());
    }
}
