//! The Browser sandbox's waits: the `[browser]` section of the server's
//! configuration.

use serde::{Deserialize, Serialize};

use super::{ConfigError, none_zero};

/// The Browser sandbox: Python in the session's own page (offered when the
/// site carries Pyodide).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct BrowserConfig {
    /// How long a run waits for a page of its session to run it.
    pub attach_wait_secs: u64,
    /// How long a run whose page went away waits for it to come back.
    pub gone_grace_secs: u64,
    /// How long a page may take to start a program (its Python starting,
    /// the packages it imports loading) before the run's own wall time
    /// begins: a first `import sympy` on a slow device is not the program's
    /// time.
    pub prepare_wait_secs: u64,
}

impl Default for BrowserConfig {
    fn default() -> Self {
        Self {
            attach_wait_secs: 60,
            gone_grace_secs: 10,
            prepare_wait_secs: 180,
        }
    }
}

impl BrowserConfig {
    /// Whether these settings can be used: every wait more than 0.
    pub(super) fn validate(&self) -> Result<(), ConfigError> {
        none_zero(&[
            ("browser.attach_wait_secs", self.attach_wait_secs),
            ("browser.prepare_wait_secs", self.prepare_wait_secs),
            ("browser.gone_grace_secs", self.gone_grace_secs),
        ])
    }
}
