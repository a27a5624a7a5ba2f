//! API keys: made from 256 random bits, shown once, kept as a SHA-256 digest.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use rand::RngCore;
use sha2::{Digest, Sha256};

/// Every key starts with this, so that a key is recognisable in a config
/// file or a leaked log, and told apart from an access token.
pub const KEY_PREFIX: &str = "rc_";
/// Characters of a key kept for lists (`rc_` and four more).
const SHOWN: usize = 7;
/// `rc_` and 43 base64url characters.
const KEY_LEN: usize = 3 + 43;
const MAX_NAME_CHARS: usize = 64;

/// A whole API key. Printed once by `runcell keys create`; never stored.
#[derive(Clone, PartialEq, Eq)]
pub struct ApiKey(String);

impl std::fmt::Debug for ApiKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ApiKey({}…)", self.prefix())
    }
}

impl ApiKey {
    /// A new key from the operating system's random source.
    pub fn generate() -> Self {
        let mut bytes = [0u8; 32];
        rand::rng().fill_bytes(&mut bytes);
        Self(format!("{KEY_PREFIX}{}", URL_SAFE_NO_PAD.encode(bytes)))
    }

    /// A key as a client sent it, if it has a key's shape.
    pub fn parse(text: &str) -> Option<Self> {
        let body = text.strip_prefix(KEY_PREFIX)?;
        (text.len() == KEY_LEN
            && body
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_'))
        .then(|| Self(text.to_string()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// What is stored and looked up: the hex SHA-256 of the whole key.
    pub fn digest(&self) -> String {
        Sha256::digest(self.0.as_bytes())
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect()
    }

    /// The first characters, for lists.
    pub fn prefix(&self) -> &str {
        &self.0[..SHOWN]
    }
}

/// A key's name: 1 to 64 letters, digits, spaces, `.`, `_` or `-`, not
/// starting or ending with a space ("work laptop" is a name people give).
/// ASCII only: a name is read in logs and the admin's audit, where look-alike
/// letters would mislead.
pub fn check_name(name: &str) -> Result<(), String> {
    let ok = !name.is_empty()
        && name.chars().count() <= MAX_NAME_CHARS
        && name.trim() == name
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, ' ' | '.' | '_' | '-'));
    if ok {
        Ok(())
    } else {
        Err(format!(
            "a key name is 1 to {MAX_NAME_CHARS} letters, digits, spaces, '.', '_' or '-', not starting or ending with a space (got {name:?})"
        ))
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn generated_keys_parse_and_differ() {
        let a = ApiKey::generate();
        let b = ApiKey::generate();
        assert_ne!(a, b);
        assert_eq!(ApiKey::parse(a.as_str()), Some(a.clone()));
        assert!(a.as_str().starts_with("rc_"));
        assert_eq!(a.digest().len(), 64);
        assert_ne!(a.digest(), b.digest());
        assert!(
            !format!("{a:?}").contains(&a.as_str()[8..]),
            "Debug hides the key"
        );
    }

    #[test]
    fn names_are_checked() {
        assert!(check_name("ci-bot.v2").is_ok());
        assert!(check_name("work laptop").is_ok());
        for bad in [
            "",
            " leading",
            "trailing ",
            "tab\there",
            "ünïcode",
            &"x".repeat(65),
            "a/b",
        ] {
            assert!(check_name(bad).is_err(), "{bad:?}");
        }
    }

    proptest! {
        #[test]
        fn parse_accepts_only_the_key_shape(text in ".{0,80}") {
            if let Some(key) = ApiKey::parse(&text) {
                prop_assert_eq!(key.as_str(), text.as_str());
                prop_assert!(text.starts_with(KEY_PREFIX) && text.len() == KEY_LEN);
            }
        }

        #[test]
        fn a_changed_character_is_another_key(index in 3usize..KEY_LEN, c in "[A-Za-z0-9_-]") {
            let key = ApiKey::generate();
            let mut text = key.as_str().to_string();
            text.replace_range(index..=index, &c);
            let other = ApiKey::parse(&text).expect("still key-shaped");
            prop_assert_eq!(other == key, other.digest() == key.digest());
        }
    }
}
