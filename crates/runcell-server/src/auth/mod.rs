//! Who is calling: API keys, the access tokens issued for them, and the
//! limits each key runs under. No HTTP here; `http::auth` maps to statuses.

pub mod key;
pub mod limits;
pub mod revocation;
pub mod token;

use std::sync::Arc;
use std::time::Duration;

pub use key::ApiKey;
pub use limits::{KeyLimits, Limited, RunPermit};
pub use token::{Audience, Issued, TokenError, Tokens};

use runcell_store::{KeyRecord, KeyStore, StoreError};

#[derive(Debug, thiserror::Error)]
pub enum AuthError {
    #[error("missing credentials: send `Authorization: Bearer <token>`")]
    Missing,
    #[error(transparent)]
    Token(#[from] TokenError),
    #[error("unknown API key")]
    UnknownKey,
    #[error("this API key has been revoked")]
    Revoked,
    #[error("{0}")]
    BadName(String),
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// An authenticated caller: the key it holds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Caller {
    pub key_id: String,
    pub key_name: String,
    /// The person the key belongs to; `None` for a server's key.
    pub user_id: Option<String>,
}

impl Caller {
    /// Whose budgets the caller's work is counted in: a person's keys all
    /// share the person's (one key's runs a minute, runs under way, sandbox
    /// sessions and MCP sessions, for all of them together), so making
    /// more keys buys no more; a server's key has its own.
    pub fn budget(&self) -> String {
        match &self.user_id {
            Some(user) => format!("{PERSON_PREFIX}{user}"),
            None => self.key_id.clone(),
        }
    }

    fn of(key: &KeyRecord) -> Self {
        Self {
            key_id: key.id.clone(),
            key_name: key.name.clone(),
            user_id: key.user_id.clone(),
        }
    }
}

/// A pages sign-in's subject names a person with this prefix (a key's is
/// its bare id).
const PERSON_PREFIX: &str = "user:";

/// Who a pages sign-in is for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PageSubject {
    /// Signed in with an API key.
    Key(Caller),
    /// A person, by account id.
    Person(String),
}

/// Issues and checks credentials against the key store.
pub struct Auth {
    keys: Arc<dyn KeyStore>,
    tokens: Tokens,
    token_ttl: Duration,
}

impl std::fmt::Debug for Auth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Auth")
            .field("token_ttl", &self.token_ttl)
            .finish_non_exhaustive()
    }
}

fn now_secs() -> u64 {
    runcell_core::clock::now_ms() / 1000
}

impl Auth {
    pub fn new(keys: Arc<dyn KeyStore>, secret: &[u8], token_ttl: Duration) -> Self {
        Self {
            keys,
            tokens: Tokens::new(secret),
            token_ttl,
        }
    }

    /// As the configuration says, with the secret it names, else the one
    /// every node sharing the key store uses (PostgreSQL's, made by the
    /// first node), else the data dir's (made on first start).
    pub async fn open(
        config: &crate::config::Config,
        keys: Arc<dyn KeyStore>,
    ) -> Result<Self, token::SecretError> {
        let configured = config.auth.jwt_secret.expose();
        let shared = if configured.is_empty() {
            keys.shared_token_secret(&token::fresh_secret())
                .await
                .map_err(|e| token::SecretError::Store(e.to_string()))?
        } else {
            None
        };
        let secret = match shared {
            Some(secret) => secret.into_bytes(),
            None => token::load_secret(configured, &config.data_dir)?,
        };
        Ok(Self::new(
            keys,
            &secret,
            Duration::from_secs(config.auth.token_ttl_secs),
        ))
    }

    /// `POST /v1/auth/token`: an access token for a live key.
    pub async fn exchange(&self, api_key: &str) -> Result<Issued, AuthError> {
        let key = self.live_key(api_key).await?;
        Ok(self
            .tokens
            .issue(&key.id, Audience::Api, now_secs(), self.token_ttl))
    }

    /// The caller a live API key is.
    pub async fn key_caller(&self, api_key: &str) -> Result<Caller, AuthError> {
        Ok(Caller::of(&self.live_key(api_key).await?))
    }

    /// A token for the pages' sign-in, lasting `ttl`.
    pub async fn sign_in(&self, api_key: &str, ttl: Duration) -> Result<Issued, AuthError> {
        let key = self.live_key(api_key).await?;
        Ok(self.tokens.issue(&key.id, Audience::Pages, now_secs(), ttl))
    }

    /// The tokens this server signs (sign-ins, sealed sign-in attempts).
    pub fn tokens(&self) -> &Tokens {
        &self.tokens
    }

    /// A pages sign-in of the person `user_id`, lasting `ttl`.
    pub fn sign_in_person(&self, user_id: &str, ttl: Duration) -> Issued {
        self.tokens.issue(
            &format!("{PERSON_PREFIX}{user_id}"),
            Audience::Pages,
            now_secs(),
            ttl,
        )
    }

    /// Who a pages sign-in token names: a live key, or a person (whose
    /// account the caller checks).
    pub async fn page_subject(&self, token: &str) -> Result<PageSubject, AuthError> {
        let claims = self.tokens.verify(token, Audience::Pages)?;
        match claims.sub.strip_prefix(PERSON_PREFIX) {
            Some(user_id) => Ok(PageSubject::Person(user_id.to_string())),
            None => self
                .authenticate(token, Audience::Pages)
                .await
                .map(PageSubject::Key),
        }
    }

    /// The caller behind a bearer credential: an access token for
    /// `audience`, or (for the API) the API key itself, as clients with only
    /// static headers (MCP clients) send it. The key must still be live.
    pub async fn authenticate(
        &self,
        credential: &str,
        audience: Audience,
    ) -> Result<Caller, AuthError> {
        let key = if audience == Audience::Api && credential.starts_with(key::KEY_PREFIX) {
            self.live_key(credential).await?
        } else {
            let claims = self.tokens.verify(credential, audience)?;
            let key = self
                .keys
                .key(&claims.sub)
                .await?
                .ok_or(AuthError::Revoked)?;
            if !key.is_live() {
                return Err(AuthError::Revoked);
            }
            key
        };
        // Only a stale time is written: no write on the hot path otherwise.
        let now = runcell_core::clock::now_ms();
        if key.needs_touch(now)
            && let Err(err) = self.keys.touch_key(&key.id, now).await
        {
            tracing::warn!(%err, "cannot note an API key's use");
        }
        Ok(Caller::of(&key))
    }

    /// The keys of the person `user_id`, revoked ones too, oldest first.
    pub async fn keys_of(&self, user_id: &str) -> Result<Vec<KeyRecord>, AuthError> {
        Ok(self.keys.keys_of_user(user_id).await?)
    }

    /// Makes a key named `name` for the person `user_id`; the key is
    /// returned once and never stored.
    pub async fn create_key_for(
        &self,
        user_id: &str,
        name: &str,
    ) -> Result<(ApiKey, KeyRecord), AuthError> {
        create_key_of(self.keys.as_ref(), name, Some(user_id)).await
    }

    /// Revokes the person `user_id`'s key `key_id`; false if they have no
    /// such live key.
    pub async fn revoke_key_of(&self, user_id: &str, key_id: &str) -> Result<bool, AuthError> {
        match self.keys.key(key_id).await? {
            Some(key) if key.user_id.as_deref() == Some(user_id) && key.is_live() => Ok(self
                .keys
                .revoke_key_id(key_id, runcell_core::clock::now_ms())
                .await?),
            _ => Ok(false),
        }
    }

    /// The ids of the keys revoked at or after `since_ms`.
    pub async fn revoked_key_ids_since(&self, since_ms: u64) -> Result<Vec<String>, AuthError> {
        Ok(self
            .keys
            .keys_revoked_since(since_ms)
            .await?
            .into_iter()
            .map(|key| key.id)
            .collect())
    }

    async fn live_key(&self, text: &str) -> Result<KeyRecord, AuthError> {
        let key = ApiKey::parse(text.trim()).ok_or(AuthError::UnknownKey)?;
        let record = self
            .keys
            .key_by_digest(&key.digest())
            .await?
            .ok_or(AuthError::UnknownKey)?;
        if record.is_live() {
            Ok(record)
        } else {
            Err(AuthError::Revoked)
        }
    }
}

/// Makes a key named `name`; the key is returned once and never stored.
pub async fn create_key(keys: &dyn KeyStore, name: &str) -> Result<(ApiKey, KeyRecord), AuthError> {
    create_key_of(keys, name, None).await
}

/// Makes a key named `name` belonging to the person `user_id` (`None`: to
/// nobody, a server's key); the key is returned once and never stored.
pub async fn create_key_of(
    keys: &dyn KeyStore,
    name: &str,
    user_id: Option<&str>,
) -> Result<(ApiKey, KeyRecord), AuthError> {
    key::check_name(name).map_err(AuthError::BadName)?;
    let key = ApiKey::generate();
    let record = KeyRecord {
        id: uuid::Uuid::new_v4().to_string(),
        name: name.to_string(),
        prefix: key.prefix().to_string(),
        created_ms: runcell_core::clock::now_ms(),
        last_used_ms: None,
        revoked_ms: None,
        user_id: user_id.map(str::to_string),
    };
    keys.create_key(&record, &key.digest()).await?;
    Ok((key, record))
}

#[cfg(test)]
mod tests {
    use super::*;
    use runcell_store::SqliteStore;

    async fn auth() -> (Auth, Arc<SqliteStore>, tempfile::TempDir) {
        let dir = tempfile::tempdir().expect("temp dir");
        let store = Arc::new(SqliteStore::open_in(dir.path()).await.expect("store"));
        let auth = Auth::new(
            store.clone(),
            b"0123456789abcdef0123456789abcdef",
            Duration::from_secs(60),
        );
        (auth, store, dir)
    }

    #[tokio::test]
    async fn a_key_gets_a_token_that_stops_working_when_the_key_is_revoked() {
        let (auth, store, _dir) = auth().await;
        let (key, record) = create_key(store.as_ref(), "ci").await.expect("key");
        let issued = auth.exchange(key.as_str()).await.expect("token");
        let caller = auth
            .authenticate(&issued.token, Audience::Api)
            .await
            .expect("valid");
        assert_eq!(
            caller,
            Caller {
                key_id: record.id.clone(),
                key_name: "ci".into(),
                user_id: None,
            }
        );
        assert_eq!(
            auth.authenticate(key.as_str(), Audience::Api)
                .await
                .expect("the key itself")
                .key_id,
            record.id
        );
        assert!(matches!(
            auth.authenticate(key.as_str(), Audience::Pages).await,
            Err(AuthError::Token(TokenError::Invalid))
        ));
        let used = store.key(&record.id).await.expect("read").expect("exists");
        assert!(used.last_used_ms.is_some());

        assert!(
            store
                .revoke_key("ci", runcell_core::clock::now_ms())
                .await
                .expect("revoke")
        );
        assert!(matches!(
            auth.authenticate(&issued.token, Audience::Api).await,
            Err(AuthError::Revoked)
        ));
        assert!(matches!(
            auth.exchange(key.as_str()).await,
            Err(AuthError::Revoked)
        ));
        assert!(matches!(
            auth.exchange(ApiKey::generate().as_str()).await,
            Err(AuthError::UnknownKey)
        ));
        assert!(matches!(
            auth.exchange("nonsense").await,
            Err(AuthError::UnknownKey)
        ));
        assert!(matches!(
            create_key(store.as_ref(), "bad/name").await,
            Err(AuthError::BadName(_))
        ));
    }
}
