//! Who a session belongs to.

use std::fmt;
use std::str::FromStr;

use rand::Rng;

/// An owner: 128 random bits, written as 32 lowercase hex digits. The
/// anonymous owner of a browser lives in its `runcell_owner` cookie.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct OwnerId([u8; 16]);

#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("not an owner id (expected 32 hex digits)")]
pub struct InvalidOwnerId;

impl OwnerId {
    pub fn random() -> Self {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_refuses_other_spellings() {
        let owner = OwnerId::random();
        assert_eq!(owner.to_string().len(), 32);
        assert_eq!(owner.to_string().parse::<OwnerId>(), Ok(owner));
        assert_ne!(OwnerId::random(), owner);
        for bad in [
            "",
            "x",
            &"A".repeat(32),
            &"0".repeat(31),
            &"g".repeat(32),
            &"é".repeat(16),
        ] {
            assert_eq!(bad.parse::<OwnerId>(), Err(InvalidOwnerId), "{bad:?}");
        }
    }
}
