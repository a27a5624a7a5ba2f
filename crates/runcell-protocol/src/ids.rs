//! The ids that cross between the pages and the server: a session's id, a
//! share link's token and the owner a request is made for. Each parses
//! only the one spelling the server issues, so that a thing has one
//! address, and travels as a plain string (in JSON, in URLs).
//!
//! Making new ones (`random`) is the server's business: it is there only
//! with the `server` feature.

use std::fmt;
use std::str::FromStr;

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use uuid::Uuid;

/// A session's identity: a random UUID, written in its hyphenated form.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct SessionId(Uuid);

#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("not a session id (expected a hyphenated UUID)")]
pub struct InvalidSessionId;

impl SessionId {
    #[cfg(feature = "server")]
    pub fn random() -> Self {
        Self(Uuid::new_v4())
    }
}

impl FromStr for SessionId {
    type Err = InvalidSessionId;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        // Only the one spelling, so that one session has one address.
        if s.len() != 36 {
            return Err(InvalidSessionId);
        }
        let id = Uuid::try_parse(s).map_err(|_| InvalidSessionId)?;
        Ok(Self(id))
    }
}

impl fmt::Display for SessionId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.hyphenated().fmt(f)
    }
}

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
    #[cfg(feature = "server")]
    pub fn random() -> Self {
        use rand::Rng;

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

/// An owner: 128 random bits, written as 32 lowercase hex digits. The
/// anonymous owner of a browser lives in its `runcell_owner` cookie.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct OwnerId([u8; 16]);

#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("not an owner id (expected 32 hex digits)")]
pub struct InvalidOwnerId;

impl OwnerId {
    #[cfg(feature = "server")]
    pub fn random() -> Self {
        use rand::Rng;

        Self(rand::rng().random())
    }
}

impl FromStr for OwnerId {
    type Err = InvalidOwnerId;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bytes = s.as_bytes();
        if bytes.len() != 32 {
            return Err(InvalidOwnerId);
        }
        let mut out = [0u8; 16];
        for (i, pair) in bytes.chunks_exact(2).enumerate() {
            let hex = std::str::from_utf8(pair).map_err(|_| InvalidOwnerId)?;
            if !hex
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
            {
                return Err(InvalidOwnerId);
            }
            out[i] = u8::from_str_radix(hex, 16).map_err(|_| InvalidOwnerId)?;
        }
        Ok(Self(out))
    }
}

impl fmt::Display for OwnerId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.iter().try_for_each(|b| write!(f, "{b:02x}"))
    }
}

/// Serde as the plain string `Display` writes; reading refuses what
/// `FromStr` refuses.
macro_rules! serde_as_string {
    ($($id:ty),*) => {$(
        impl serde::Serialize for $id {
            fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                serializer.collect_str(self)
            }
        }

        impl<'de> serde::Deserialize<'de> for $id {
            fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                let text = String::deserialize(deserializer)?;
                text.parse().map_err(serde::de::Error::custom)
            }
        }
    )*};
}

serde_as_string!(SessionId, ShareToken, OwnerId);

#[cfg(test)]
mod tests {
    use super::*;

    const SESSION: &str = "0e3c5e4a-5b0f-4c5e-9d3a-2b1c0d9e8f7a";
    const TOKEN: &str = "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8";
    const OWNER: &str = "000102030405060708090a0b0c0d0e0f";

    #[test]
    fn session_ids_parse_only_hyphenated_uuids() {
        let id: SessionId = SESSION.parse().unwrap();
        assert_eq!(id.to_string(), SESSION);
        // Either case reads as the same session; it is written lowercase.
        assert_eq!(SESSION.to_uppercase().parse::<SessionId>(), Ok(id));
        for bad in [
            "",
            "x",
            "not-a-session",
            "0e3c5e4a5b0f4c5e9d3a2b1c0d9e8f7a",
            "{0e3c5e4a-5b0f-4c5e-9d3a-2b1c0d9e8f7a}",
            "urn:uuid:0e3c5e4a-5b0f-4c5e-9d3a-2b1c0d9e8f7a",
            "0e3c5e4a-5b0f-4c5e-9d3a-2b1c0d9e8f7g",
            "0e3c5e4a-5b0f-4c5e-9d3a-2b1c0d9e8f7a ",
            "../../etc/passwd-aaaaaaaaaaaaaaaaaaaa",
        ] {
            assert_eq!(bad.parse::<SessionId>(), Err(InvalidSessionId), "{bad:?}");
        }
    }

    #[test]
    fn share_tokens_are_43_characters_of_base64url_for_256_bits() {
        let token: ShareToken = TOKEN.parse().unwrap();
        assert_eq!(token.as_str(), TOKEN);
        assert_eq!(token.to_string(), TOKEN);
        assert_eq!(token.path(), format!("/s/{TOKEN}"));
        assert!(!format!("{token:?}").contains(TOKEN));
        for bad in [
            "",
            "abc",
            &"=".repeat(43),
            &"a".repeat(44),
            // Standard base64's alphabet, not the URL's.
            "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh+",
            // Bits past the 256th must be zero.
            "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh9",
            "../../../../../../../../../../../etc/passwd",
        ] {
            assert_eq!(bad.parse::<ShareToken>(), Err(InvalidShareToken), "{bad:?}");
        }
    }

    #[test]
    fn owner_ids_are_32_lowercase_hex_digits() {
        let owner: OwnerId = OWNER.parse().unwrap();
        assert_eq!(owner.to_string(), OWNER);
        for bad in [
            "",
            "x",
            &OWNER.to_uppercase(),
            &"0".repeat(31),
            &"g".repeat(32),
            &"é".repeat(16),
        ] {
            assert_eq!(bad.parse::<OwnerId>(), Err(InvalidOwnerId), "{bad:?}");
        }
    }

    #[test]
    fn serde_is_the_plain_string_and_refuses_what_parsing_refuses() {
        let id: SessionId = SESSION.parse().unwrap();
        let token: ShareToken = TOKEN.parse().unwrap();
        let owner: OwnerId = OWNER.parse().unwrap();
        assert_eq!(
            serde_json::to_string(&id).unwrap(),
            format!("\"{SESSION}\"")
        );
        assert_eq!(
            serde_json::to_string(&token).unwrap(),
            format!("\"{TOKEN}\"")
        );
        assert_eq!(
            serde_json::to_string(&owner).unwrap(),
            format!("\"{OWNER}\"")
        );
        assert_eq!(
            serde_json::from_str::<SessionId>(&format!("\"{SESSION}\"")).unwrap(),
            id
        );
        assert_eq!(
            serde_json::from_str::<ShareToken>(&format!("\"{TOKEN}\"")).unwrap(),
            token
        );
        assert_eq!(
            serde_json::from_str::<OwnerId>(&format!("\"{OWNER}\"")).unwrap(),
            owner
        );
        for bad in ["\"not-a-session\"", "42", "null", "[]"] {
            assert!(serde_json::from_str::<SessionId>(bad).is_err(), "{bad}");
            assert!(serde_json::from_str::<ShareToken>(bad).is_err(), "{bad}");
            assert!(serde_json::from_str::<OwnerId>(bad).is_err(), "{bad}");
        }
        let refused = serde_json::from_str::<SessionId>("\"x\"").unwrap_err();
        assert!(
            refused.to_string().contains("not a session id"),
            "{refused}"
        );
    }

    #[cfg(feature = "server")]
    #[test]
    fn new_ids_parse_back_and_differ() {
        let id = SessionId::random();
        assert_eq!(id.to_string().parse::<SessionId>(), Ok(id));
        assert_ne!(SessionId::random(), id);
        let token = ShareToken::random();
        assert_eq!(token.as_str().len(), TOKEN_CHARS);
        assert_eq!(token.as_str().parse::<ShareToken>(), Ok(token.clone()));
        assert_ne!(ShareToken::random(), token);
        let owner = OwnerId::random();
        assert_eq!(owner.to_string().len(), 32);
        assert_eq!(owner.to_string().parse::<OwnerId>(), Ok(owner));
        assert_ne!(OwnerId::random(), owner);
    }
}
