//! Share links: `/s/{token}`.

use std::fmt;
use std::str::FromStr;

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use rand::Rng;

/// A share link's secret: 256 random bits, base64url without padding
/// (43 characters). Whoever has it can read the session, nothing more.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct ShareToken(String);

#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("not a share token")]
pub struct InvalidShareToken;

const TOKEN_BYTES: usize = 32;
const TOKEN_CHARS: usize = 43;

impl ShareToken {
    pub fn random() -> Self {
        let bytes: [u8; TOKEN_BYTES] = rand::rng().random();
        Self(URL_SAFE_NO_PAD.encode(bytes))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The link's path on this server.
    pub fn path(&self) -> String {
        format!("/s/{}", self.0)
    }
}

impl FromStr for ShareToken {
    type Err = InvalidShareToken;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if s.len() != TOKEN_CHARS {
            return Err(InvalidShareToken);
        }
        match URL_SAFE_NO_PAD.decode(s) {
            Ok(bytes) if bytes.len() == TOKEN_BYTES => Ok(Self(s.to_string())),
            _ => Err(InvalidShareToken),
        }
    }
}

impl fmt::Display for ShareToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Tokens are secrets: logs show only their start.
impl fmt::Debug for ShareToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ShareToken({}…)", &self.0[..6])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_carry_256_random_bits_and_parse_back() {
        let token = ShareToken::random();
        assert_eq!(token.as_str().len(), TOKEN_CHARS);
        assert_eq!(token.as_str().parse::<ShareToken>(), Ok(token.clone()));
        assert_ne!(ShareToken::random(), token);
        assert!(token.path().starts_with("/s/"));
        assert!(!format!("{token:?}").contains(token.as_str()));
        for bad in [
            "",
            "abc",
            &"=".repeat(43),
            &"a".repeat(44),
            "../../../../../../../../../../../etc/passwd",
        ] {
            assert_eq!(bad.parse::<ShareToken>(), Err(InvalidShareToken), "{bad:?}");
        }
    }
}
