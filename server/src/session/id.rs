use std::fmt;
use std::str::FromStr;

use uuid::Uuid;

/// A session's identity: a random UUID, written in its hyphenated form.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct SessionId(Uuid);

#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("not a session id (expected a hyphenated UUID)")]
pub struct InvalidSessionId;

impl SessionId {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_only_hyphenated_uuids() {
        let id = SessionId::random();
        assert_eq!(id.to_string().parse::<SessionId>(), Ok(id));
        let upper = id.to_string().to_uppercase();
        assert_eq!(upper.parse::<SessionId>(), Ok(id));
        for bad in [
            "",
            "x",
            "0e3c5e4a5b0f4c5e9d3a2b1c0d9e8f7a",
            "{0e3c5e4a-5b0f-4c5e-9d3a-2b1c0d9e8f7a}",
            "0e3c5e4a-5b0f-4c5e-9d3a-2b1c0d9e8f7g",
            "../../etc/passwd-aaaaaaaaaaaaaaaaaaaa",
        ] {
            assert_eq!(bad.parse::<SessionId>(), Err(InvalidSessionId), "{bad:?}");
        }
    }
}
