//! Secret settings (keys, signing secrets) that never print.

use secrecy::{ExposeSecret, SecretString};
use serde::{Deserialize, Serialize};

/// What `runcell config` prints for a secret that is set.
pub const REDACTED: &str = "<redacted>";

/// A secret setting (a key, a signing secret): read like any string, shown
/// only as whether it is set (`Debug` is secrecy's `[REDACTED]`; serialized,
/// as `runcell config` prints it, it is empty or [`REDACTED`]), and read in
/// full only where it is used, through [`Secret::expose`].
///
/// A newtype over [`SecretString`] rather than the bare type because a
/// setting also needs what secrecy leaves out on purpose for `str`:
/// `Serialize` (here, never the secret itself) and equality (here, in
/// constant time).
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(from = "String")]
pub struct Secret(SecretString);

impl Secret {
    /// The secret itself, for the one place that uses it.
    pub fn expose(&self) -> &str {
        self.0.expose_secret()
    }

    /// Whether no secret is set.
    pub fn is_empty(&self) -> bool {
        self.expose().is_empty()
    }
}

impl From<String> for Secret {
    fn from(secret: String) -> Self {
        Self(secret.into())
    }
}

impl From<&str> for Secret {
    fn from(secret: &str) -> Self {
        Self(secret.into())
    }
}

impl PartialEq for Secret {
    fn eq(&self, other: &Self) -> bool {
        use subtle::ConstantTimeEq;
        self.expose()
            .as_bytes()
            .ct_eq(other.expose().as_bytes())
            .into()
    }
}

impl Eq for Secret {}

/// Whether it is set, never what it is: what a printed configuration holds.
impl Serialize for Secret {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(if self.is_empty() { "" } else { REDACTED })
    }
}
