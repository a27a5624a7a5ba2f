//! Access tokens: HS256 JWTs naming the API key they were issued for.

use std::path::Path;
use std::time::Duration;

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use jsonwebtoken::errors::ErrorKind;
use jsonwebtoken::{Algorithm, DecodingKey, EncodingKey, Header, Validation};
use rand::RngCore;
use serde::{Deserialize, Serialize};

/// The secret's file under the data dir, when the configuration has none.
pub const SECRET_FILE: &str = "auth-secret";
pub const ISSUER: &str = "runcell";
/// Clock skew tolerated on `exp`, in seconds.
const LEEWAY_SECS: u64 = 5;

/// Who a token is for: the API (`/v1`, `/mcp`) or the pages' sign-in. A token
/// of one kind is refused by the other.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Audience {
    Api,
    Pages,
}

impl Audience {
    fn as_str(self) -> &'static str {
        match self {
            Self::Api => "runcell-api",
            Self::Pages => "runcell-pages",
        }
    }
}

#[derive(Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Claims {
    /// The API key's id.
    pub sub: String,
    pub iss: String,
    pub aud: String,
    pub iat: u64,
    pub exp: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TokenError {
    #[error("the access token has expired; get a new one from POST /v1/auth/token")]
    Expired,
    #[error("the access token is not valid")]
    Invalid,
}

#[derive(Debug, thiserror::Error)]
pub enum SecretError {
    #[error("cannot read or write the token secret {path}: {source}")]
    Io {
        path: String,
        source: std::io::Error,
    },
    #[error("the token secret in {0} is shorter than 32 bytes; delete it to make a new one")]
    TooShort(String),
    #[error("cannot read or keep the token secret in the database: {0}")]
    Store(String),
}

/// A freshly issued token.
#[derive(Debug, Clone)]
pub struct Issued {
    pub token: String,
    pub expires_in: Duration,
}

/// Issues and checks tokens with one secret.
pub struct Tokens {
    encoding: EncodingKey,
    decoding: DecodingKey,
}

impl std::fmt::Debug for Tokens {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Tokens(..)")
    }
}

impl Tokens {
    pub fn new(secret: &[u8]) -> Self {
        Self {
            encoding: EncodingKey::from_secret(secret),
            decoding: DecodingKey::from_secret(secret),
        }
    }

    /// A token for the key `key_id`, valid for `ttl` from `now_secs`.
    pub fn issue(&self, key_id: &str, audience: Audience, now_secs: u64, ttl: Duration) -> Issued {
        let claims = Claims {
            sub: key_id.to_string(),
            iss: ISSUER.into(),
            aud: audience.as_str().into(),
            iat: now_secs,
            exp: now_secs + ttl.as_secs(),
        };
        let token = jsonwebtoken::encode(&Header::new(Algorithm::HS256), &claims, &self.encoding)
            // HS256 over a struct of strings and numbers cannot fail.
            .unwrap_or_default();
        Issued {
            token,
            expires_in: ttl,
        }
    }

    /// Any claims signed with this secret: a sealed value only this server
    /// (and the nodes sharing its secret) can make. The claims must carry
    /// `iss` = [`ISSUER`], their own `aud` and an `exp`.
    pub fn seal<T: Serialize>(&self, claims: &T) -> String {
        jsonwebtoken::encode(&Header::new(Algorithm::HS256), claims, &self.encoding)
            // Claims are plain structs of strings and numbers.
            .unwrap_or_default()
    }

    /// What [`Tokens::seal`] sealed for `audience`, unexpired and unchanged.
    pub fn unseal<T: serde::de::DeserializeOwned>(
        &self,
        token: &str,
        audience: &str,
    ) -> Result<T, TokenError> {
        let mut validation = Validation::new(Algorithm::HS256);
        validation.leeway = LEEWAY_SECS;
        validation.set_issuer(&[ISSUER]);
        validation.set_audience(&[audience]);
        validation.set_required_spec_claims(&["exp", "iss", "aud"]);
        match jsonwebtoken::decode::<T>(token, &self.decoding, &validation) {
            Ok(data) => Ok(data.claims),
            Err(e) if matches!(e.kind(), ErrorKind::ExpiredSignature) => Err(TokenError::Expired),
            Err(_) => Err(TokenError::Invalid),
        }
    }

    /// The claims of a token this server issued for `audience`, unexpired.
    pub fn verify(&self, token: &str, audience: Audience) -> Result<Claims, TokenError> {
        let mut validation = Validation::new(Algorithm::HS256);
        validation.leeway = LEEWAY_SECS;
        validation.set_issuer(&[ISSUER]);
        validation.set_audience(&[audience.as_str()]);
        validation.set_required_spec_claims(&["exp", "iss", "aud", "sub"]);
        match jsonwebtoken::decode::<Claims>(token, &self.decoding, &validation) {
            Ok(data) => Ok(data.claims),
            Err(e) if matches!(e.kind(), ErrorKind::ExpiredSignature) => Err(TokenError::Expired),
            Err(_) => Err(TokenError::Invalid),
        }
    }
}

/// The signing secret: the configured one, else the one in the data dir,
/// else a new one written there (readable by the owner only).
/// A new signing secret: 384 random bits, base64url.
pub fn fresh_secret() -> String {
    let mut bytes = [0u8; 48];
    rand::rng().fill_bytes(&mut bytes);
    URL_SAFE_NO_PAD.encode(bytes)
}

pub fn load_secret(configured: &str, data_dir: &Path) -> Result<Vec<u8>, SecretError> {
    if !configured.is_empty() {
        return Ok(configured.as_bytes().to_vec());
    }
    let path = data_dir.join(SECRET_FILE);
    let shown = crate::config::display_path(&path);
    let io = |source| SecretError::Io {
        path: shown.clone(),
        source,
    };
    match std::fs::read_to_string(&path) {
        Ok(text) => {
            let secret = text.trim().as_bytes().to_vec();
            if secret.len() < 32 {
                return Err(SecretError::TooShort(shown));
            }
            Ok(secret)
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let secret = fresh_secret();
            std::fs::create_dir_all(data_dir).map_err(io)?;
            write_private(&path, &secret).map_err(io)?;
            tracing::info!(path = %shown, "generated the access-token secret");
            // Two starts at once: whoever wrote first wins; read it back.
            load_secret("", data_dir)
        }
        Err(e) => Err(io(e)),
    }
}

fn write_private(path: &Path, text: &str) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    match std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
    {
        Ok(mut file) => {
            file.write_all(text.as_bytes())?;
            file.sync_all()
        }
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
        Err(e) => Err(e),
    }
}

/// The token in an `Authorization` header's value: `Bearer <token>`, the
/// scheme in any case, one or more spaces. `None` for anything else.
pub fn bearer(header: &str) -> Option<&str> {
    let (scheme, rest) = header.split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("bearer") {
        return None;
    }
    let token = rest.trim_matches(' ');
    (!token.is_empty() && !token.contains(' ')).then_some(token)
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    const SECRET: &[u8] = b"0123456789abcdef0123456789abcdef";

    fn now() -> u64 {
        runcell_core::clock::now_ms() / 1000
    }

    #[test]
    fn a_token_names_its_key_until_it_expires() {
        let tokens = Tokens::new(SECRET);
        let issued = tokens.issue("key-1", Audience::Api, now(), Duration::from_secs(60));
        let claims = tokens.verify(&issued.token, Audience::Api).expect("valid");
        assert_eq!(claims.sub, "key-1");
        assert_eq!(
            tokens.verify(&issued.token, Audience::Pages),
            Err(TokenError::Invalid),
            "a token for the API does not sign in the pages"
        );
        let old = tokens.issue(
            "key-1",
            Audience::Api,
            now() - 3600,
            Duration::from_secs(60),
        );
        assert_eq!(
            tokens.verify(&old.token, Audience::Api),
            Err(TokenError::Expired)
        );
        let other = Tokens::new(b"another secret, also thirty-two bytes");
        assert_eq!(
            other.verify(&issued.token, Audience::Api),
            Err(TokenError::Invalid)
        );
    }

    #[test]
    fn an_unsigned_or_differently_signed_token_is_refused() {
        let tokens = Tokens::new(SECRET);
        let issued = tokens.issue("key-1", Audience::Api, now(), Duration::from_secs(60));
        let parts: Vec<&str> = issued.token.split('.').collect();
        // alg "none", same claims, no signature.
        let none = format!(
            "{}.{}.",
            URL_SAFE_NO_PAD.encode(r#"{"alg":"none","typ":"JWT"}"#),
            parts[1]
        );
        assert_eq!(
            tokens.verify(&none, Audience::Api),
            Err(TokenError::Invalid)
        );
        let hs512 = jsonwebtoken::encode(
            &Header::new(Algorithm::HS512),
            &Claims {
                sub: "key-1".into(),
                iss: ISSUER.into(),
                aud: "runcell-api".into(),
                iat: now(),
                exp: now() + 60,
            },
            &EncodingKey::from_secret(SECRET),
        )
        .expect("encode");
        assert_eq!(
            tokens.verify(&hs512, Audience::Api),
            Err(TokenError::Invalid)
        );
    }

    #[test]
    fn the_secret_is_made_once_and_kept() {
        let dir = tempfile::tempdir().expect("temp dir");
        let first = load_secret("", dir.path()).expect("made");
        let again = load_secret("", dir.path()).expect("read");
        assert_eq!(first, again);
        assert!(first.len() >= 32);
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(dir.path().join(SECRET_FILE))
            .expect("file")
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        std::fs::write(dir.path().join(SECRET_FILE), "short").expect("write");
        assert!(matches!(
            load_secret("", dir.path()),
            Err(SecretError::TooShort(_))
        ));
        assert_eq!(
            load_secret("configured-secret-of-enough-length!", dir.path()).expect("configured"),
            b"configured-secret-of-enough-length!"
        );
    }

    #[test]
    fn bearer_headers_are_read_strictly() {
        assert_eq!(bearer("Bearer abc"), Some("abc"));
        assert_eq!(bearer("bearer  abc "), Some("abc"));
        assert_eq!(bearer("Basic abc"), None);
        assert_eq!(bearer("Bearer"), None);
        assert_eq!(bearer("Bearer "), None);
        assert_eq!(bearer("Bearer a b"), None);
    }

    proptest! {
        #[test]
        fn verify_refuses_any_other_text(text in ".{0,300}") {
            let tokens = Tokens::new(SECRET);
            prop_assert!(tokens.verify(&text, Audience::Api).is_err());
        }

        #[test]
        fn verify_refuses_any_changed_character(seed in 0usize..10_000, c in "[A-Za-z0-9_.-]") {
            let tokens = Tokens::new(SECRET);
            let token = tokens.issue("key-1", Audience::Api, now(), Duration::from_secs(60)).token;
            let index = seed % token.len();
            let mut changed = token.clone();
            changed.replace_range(index..=index, &c);
            // A changed character is refused, except where base64url's last
            // character carries unused bits that decode to the same bytes.
            if changed != token && tokens.verify(&changed, Audience::Api).is_ok() {
                let (a, b) = (token.as_bytes(), changed.as_bytes());
                let part_end = token[index..].find('.').map_or(token.len(), |i| index + i);
                prop_assert_eq!(index + 1, part_end, "only a part's last character may alias");
                prop_assert_ne!(a[index], b[index]);
            }
        }

        #[test]
        fn bearer_never_panics_and_never_returns_spaces(text in ".{0,200}") {
            if let Some(token) = bearer(&text) {
                prop_assert!(!token.is_empty() && !token.contains(' '));
            }
        }
    }
}
