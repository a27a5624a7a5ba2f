//! Sign-in with the organisation's OpenID provider (`openidconnect`):
//! discovery, the authorization code flow with PKCE, and the ID token
//! checked against the provider's published keys, issuer, audience, expiry
//! and the attempt's nonce.
//!
//! An attempt (state, nonce, PKCE verifier, where to go back to) is sealed
//! into a short-lived cookie, so the server keeps nothing for someone who
//! only starts signing in, and any node can finish what another began. A
//! finished attempt's state is remembered here until it expires, so the
//! same answer is not taken twice by this node (the provider's codes are
//! single-use too, which covers the other nodes).

use std::collections::HashMap;
use std::time::{Duration, Instant};

use openidconnect::core::{
    CoreAuthenticationFlow, CoreClient, CoreIdToken, CoreProviderMetadata, CoreUserInfoClaims,
};
use openidconnect::{
    AccessTokenHash, AuthorizationCode, ClientId, ClientSecret, CsrfToken, EndpointMaybeSet,
    EndpointNotSet, EndpointSet, IssuerUrl, Nonce, OAuth2TokenResponse, PkceCodeChallenge,
    PkceCodeVerifier, RedirectUrl, Scope, TokenResponse,
};
use serde::{Deserialize, Serialize};

use crate::config::OidcConfig;
use runcell_store::Identity;

/// What an attempt's sealed cookie is for.
pub const ATTEMPT_AUDIENCE: &str = "runcell-oidc-attempt";
/// How long a person has to sign in at the provider.
pub const ATTEMPT_SECS: u64 = 600;
/// How long the provider's discovery document (and its keys) is used
/// before it is read again; a token signed by a key not yet seen reads it
/// again at once.
const METADATA_TTL: Duration = Duration::from_secs(600);
/// How long the provider may take to answer one request.
const PROVIDER_TIMEOUT: Duration = Duration::from_secs(10);
/// Finished attempts remembered at most (each until its expiry); past
/// this the oldest are forgotten, which the provider's single-use codes
/// still cover.
const MAX_REMEMBERED: usize = 10_000;
/// Bytes of a name or email kept from a provider.
const MAX_CLAIM_BYTES: usize = 200;

/// The client as discovery makes it: the authorization endpoint set, the
/// token and user-info endpoints if the provider has them.
type Client = CoreClient<
    EndpointSet,
    EndpointNotSet,
    EndpointNotSet,
    EndpointNotSet,
    EndpointMaybeSet,
    EndpointMaybeSet,
>;

#[derive(Debug, thiserror::Error)]
pub enum OidcError {
    #[error("the identity provider cannot be reached or answered in a way runcell cannot use: {0}")]
    Provider(String),
    #[error("this sign-in attempt has expired or was never started here; sign in again")]
    NoAttempt,
    #[error("the provider's answer does not belong to this browser's sign-in attempt")]
    StateMismatch,
    #[error("this sign-in answer was already used; sign in again")]
    Replayed,
    #[error("the identity provider did not sign you in: {0}")]
    Refused(String),
    #[error("the identity provider's ID token is not valid: {0}")]
    InvalidToken(String),
}

/// A sign-in under way, sealed into the attempt cookie.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Attempt {
    iss: String,
    aud: String,
    exp: u64,
    /// The `state` sent to the provider, which its answer must carry.
    pub state: String,
    nonce: String,
    verifier: String,
    /// Where to go back to on this site.
    pub next: String,
    /// The redirect URI sent (the token request repeats it).
    redirect: String,
}

/// One configured provider.
pub struct Oidc {
    issuer: IssuerUrl,
    client_id: ClientId,
    client_secret: Option<ClientSecret>,
    scopes: Vec<String>,
    /// The button's words.
    pub name: String,
    /// The configured redirect URL, if any.
    pub redirect_url: Option<String>,
    http: reqwest::Client,
    metadata: tokio::sync::Mutex<Option<(CoreProviderMetadata, Instant)>>,
    used: parking_lot::Mutex<HashMap<String, u64>>,
}

impl std::fmt::Debug for Oidc {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Oidc")
            .field("issuer", &self.issuer.as_str())
            .finish_non_exhaustive()
    }
}

fn now_secs() -> u64 {
    runcell_core::clock::now_ms() / 1000
}

/// A provider's text cut to what a page shows, on a character boundary.
fn bounded(text: &str) -> String {
    let mut end = text.len().min(MAX_CLAIM_BYTES);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text[..end].trim().to_string()
}

impl Oidc {
    pub fn new(config: &OidcConfig) -> Result<Self, OidcError> {
        let issuer = IssuerUrl::new(config.issuer.trim().to_string())
            .map_err(|e| OidcError::Provider(format!("the issuer URL: {e}")))?;
        let mut http = reqwest::Client::builder()
            // A provider's redirects are not followed: that would let its
            // answers send this server anywhere.
            .redirect(reqwest::redirect::Policy::none())
            .timeout(PROVIDER_TIMEOUT)
            .connect_timeout(PROVIDER_TIMEOUT);
        for certificate in runcell_packages::trusted_certificates(config.ca_file.as_deref())
            .map_err(|e| OidcError::Provider(format!("auth.oidc.ca_file {e}")))?
        {
            http = http.add_root_certificate(certificate);
        }
        let http = http
            .build()
            .map_err(|e| OidcError::Provider(e.to_string()))?;
        let secret = config.client_secret.expose();
        Ok(Self {
            issuer,
            client_id: ClientId::new(config.client_id.trim().to_string()),
            client_secret: (!secret.is_empty()).then(|| ClientSecret::new(secret.to_string())),
            scopes: config.scopes.clone(),
            name: config.name.clone(),
            redirect_url: (!config.redirect_url.is_empty()).then(|| config.redirect_url.clone()),
            http,
            metadata: tokio::sync::Mutex::new(None),
            used: parking_lot::Mutex::new(HashMap::new()),
        })
    }

    /// The issuer as configured (accounts are kept under it).
    pub fn issuer(&self) -> &str {
        self.issuer.as_str()
    }

    /// The provider's discovery document and keys: the cached one unless
    /// it is stale or `fresh` is asked for.
    async fn metadata(&self, fresh: bool) -> Result<CoreProviderMetadata, OidcError> {
        let mut cached = self.metadata.lock().await;
        if !fresh
            && let Some((metadata, at)) = cached.as_ref()
            && at.elapsed() < METADATA_TTL
        {
            return Ok(metadata.clone());
        }
        // Discovery checks that the document names this issuer exactly.
        let metadata = CoreProviderMetadata::discover_async(self.issuer.clone(), &self.http)
            .await
            .map_err(|e| {
                OidcError::Provider(format!("discovery at {}: {e}", self.issuer.as_str()))
            })?;
        *cached = Some((metadata.clone(), Instant::now()));
        Ok(metadata)
    }

    fn client(&self, metadata: CoreProviderMetadata, redirect: &str) -> Result<Client, OidcError> {
        let redirect = RedirectUrl::new(redirect.to_string())
            .map_err(|e| OidcError::Provider(format!("the redirect URL: {e}")))?;
        Ok(CoreClient::from_provider_metadata(
            metadata,
            self.client_id.clone(),
            self.client_secret.clone(),
        )
        .set_redirect_uri(redirect))
    }

    /// Starts a sign-in: where to send the browser, and the attempt to seal
    /// into its cookie. `redirect` is this server's callback URL.
    pub async fn begin(&self, redirect: &str, next: &str) -> Result<(String, Attempt), OidcError> {
        let client = self.client(self.metadata(false).await?, redirect)?;
        let (challenge, verifier) = PkceCodeChallenge::new_random_sha256();
        let mut request = client.authorize_url(
            CoreAuthenticationFlow::AuthorizationCode,
            CsrfToken::new_random,
            Nonce::new_random,
        );
        for scope in &self.scopes {
            request = request.add_scope(Scope::new(scope.clone()));
        }
        let (url, state, nonce) = request.set_pkce_challenge(challenge).url();
        let attempt = Attempt {
            iss: crate::auth::token::ISSUER.into(),
            aud: ATTEMPT_AUDIENCE.into(),
            exp: now_secs() + ATTEMPT_SECS,
            state: state.secret().clone(),
            nonce: nonce.secret().clone(),
            verifier: verifier.secret().clone(),
            next: next.to_string(),
            redirect: redirect.to_string(),
        };
        Ok((url.to_string(), attempt))
    }

    /// Finishes a sign-in with the provider's answer (`state` and `code`
    /// from the callback's query): who the provider says signed in.
    pub async fn finish(
        &self,
        attempt: &Attempt,
        state: &str,
        code: &str,
    ) -> Result<Identity, OidcError> {
        use subtle::ConstantTimeEq;
        if !bool::from(state.as_bytes().ct_eq(attempt.state.as_bytes())) {
            return Err(OidcError::StateMismatch);
        }
        self.remember(&attempt.state, attempt.exp)?;
        let client = self.client(self.metadata(false).await?, &attempt.redirect)?;
        let response = client
            .exchange_code(AuthorizationCode::new(code.to_string()))
            .map_err(|e| OidcError::Provider(format!("the provider has no token endpoint: {e}")))?
            .set_pkce_verifier(PkceCodeVerifier::new(attempt.verifier.clone()))
            .request_async(&self.http)
            .await
            .map_err(|e| OidcError::Refused(token_error(&e)))?;
        let id_token = response
            .id_token()
            .ok_or_else(|| OidcError::InvalidToken("the answer has none".into()))?;
        let nonce = Nonce::new(attempt.nonce.clone());
        let checked = match identity_in(&client, id_token, &nonce) {
            // A key the cached document does not have: the provider may
            // have rotated its keys; read them again, once.
            Err(OidcError::InvalidToken(reason)) if reason.contains("ignature") => {
                let client = self.client(self.metadata(true).await?, &attempt.redirect)?;
                identity_in(&client, id_token, &nonce).map(|identity| (identity, client))
            }
            other => other.map(|identity| (identity, client)),
        };
        let (mut identity, client) = checked?;
        check_access_token_hash(&client, id_token, &nonce, response.access_token())?;
        // Providers that keep profile claims out of the ID token give them
        // at the user-info endpoint.
        if (identity.email.is_empty() || identity.name.is_empty())
            && let Ok(request) = client.user_info(
                response.access_token().clone(),
                Some(openidconnect::SubjectIdentifier::new(
                    identity.subject.clone(),
                )),
            )
        {
            let info: Result<CoreUserInfoClaims, _> = request.request_async(&self.http).await;
            match info {
                Ok(info) => {
                    if identity.email.is_empty()
                        && let Some(email) = info.email()
                    {
                        identity.email = bounded(email.as_str());
                        identity.email_verified = info.email_verified() == Some(true);
                    }
                    if identity.name.is_empty()
                        && let Some(name) = info.name().and_then(|n| n.get(None))
                    {
                        identity.name = bounded(name.as_str());
                    }
                }
                Err(err) => tracing::warn!(%err, "the provider's user info could not be read"),
            }
        }
        Ok(identity)
    }

    /// Notes that the attempt with `state` was answered; refuses a second.
    fn remember(&self, state: &str, exp: u64) -> Result<(), OidcError> {
        let now = now_secs();
        let mut used = self.used.lock();
        used.retain(|_, until| *until >= now);
        if used.contains_key(state) {
            return Err(OidcError::Replayed);
        }
        if used.len() >= MAX_REMEMBERED
            && let Some(oldest) = used
                .iter()
                .min_by_key(|(_, until)| **until)
                .map(|(k, _)| k.clone())
        {
            used.remove(&oldest);
        }
        used.insert(state.to_string(), exp);
        Ok(())
    }
}

/// What the token endpoint's refusal says, without the secrets of the
/// request.
fn token_error<E: std::error::Error>(err: &E) -> String {
    let mut text = err.to_string();
    let mut source = err.source();
    while let Some(inner) = source {
        text.push_str(": ");
        text.push_str(&inner.to_string());
        source = inner.source();
    }
    bounded(&text)
}

/// Who a checked ID token says signed in: its signature by one of the
/// provider's keys, its issuer, audience (this client), expiry and nonce
/// all checked by `openidconnect`.
pub fn identity_in(
    client: &Client,
    id_token: &CoreIdToken,
    nonce: &Nonce,
) -> Result<Identity, OidcError> {
    let verifier = client.id_token_verifier();
    let claims = id_token
        .claims(&verifier, nonce)
        .map_err(|e| OidcError::InvalidToken(e.to_string()))?;
    Ok(Identity {
        issuer: claims.issuer().as_str().to_string(),
        subject: bounded(claims.subject().as_str()),
        name: claims
            .name()
            .and_then(|n| n.get(None))
            .map(|n| bounded(n.as_str()))
            .unwrap_or_default(),
        email: claims
            .email()
            .map(|e| bounded(e.as_str()))
            .unwrap_or_default(),
        // Only an explicit `true` vouches for the email: absent is not.
        email_verified: claims.email().is_some() && claims.email_verified() == Some(true),
    })
}

/// The ID token's `at_hash`, when it has one, matches the access token
/// that came with it (so neither was swapped).
fn check_access_token_hash(
    client: &Client,
    id_token: &CoreIdToken,
    nonce: &Nonce,
    access_token: &openidconnect::AccessToken,
) -> Result<(), OidcError> {
    let verifier = client.id_token_verifier();
    let invalid = |e: String| OidcError::InvalidToken(e);
    let claims = id_token
        .claims(&verifier, nonce)
        .map_err(|e| invalid(e.to_string()))?;
    if let Some(expected) = claims.access_token_hash() {
        let actual = AccessTokenHash::from_token(
            access_token,
            id_token.signing_alg().map_err(|e| invalid(e.to_string()))?,
            id_token
                .signing_key(&verifier)
                .map_err(|e| invalid(e.to_string()))?,
        )
        .map_err(|e| invalid(e.to_string()))?;
        if actual != *expected {
            return Err(invalid(
                "its at_hash does not match the access token".into(),
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
#[path = "oidc_tests.rs"]
mod tests;
