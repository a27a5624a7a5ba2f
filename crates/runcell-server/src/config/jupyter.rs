//! The Jupyter gateway's settings: the `[jupyter]` section of the server's
//! configuration.

use serde::{Deserialize, Serialize};

use super::{ConfigError, none_zero};

/// What one Jupyter gateway client (`/jupyter`) may make the server hold:
/// bytes per connection and per key, queued cells, messages and restarts.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct JupyterConfig {
    /// MiB one kernel WebSocket frame may be; a bigger one closes the
    /// socket (1009) before it is read whole.
    pub max_message_mib: usize,
    /// MiB one kernel connection may hold: its queued cells' code and its
    /// frames not yet sent. Cells take at most half (so replies have room);
    /// a cell beyond is refused, and a connection whose unsent frames go
    /// beyond is closed (1008) as a reader too slow to keep.
    pub connection_budget_mib: usize,
    /// MiB all the kernel connections of one key may hold together, on the
    /// same terms.
    pub key_budget_mib: usize,
    /// Cells one kernel may have waiting to run; more are refused.
    pub max_queued_cells: usize,
    /// Messages a connection may send a second (bursts of this many, or of
    /// `max_queued_cells` if more); past it each is answered with an error.
    pub messages_per_second: u32,
    /// Restarts a kernel may go through a minute (restarts asked for while
    /// one is under way join it); past it a restart is refused (`429` with
    /// `Retry-After`, or an error `shutdown_reply`).
    pub restarts_per_minute: u32,
}

impl Default for JupyterConfig {
    fn default() -> Self {
        Self {
            max_message_mib: 4,
            connection_budget_mib: 32,
            key_budget_mib: 128,
            max_queued_cells: 256,
            messages_per_second: 200,
            restarts_per_minute: 6,
        }
    }
}

impl JupyterConfig {
    /// Whether these settings can be used: every budget and rate more than 0.
    pub(super) fn validate(&self) -> Result<(), ConfigError> {
        none_zero(&[
            ("jupyter.max_message_mib", self.max_message_mib as u64),
            (
                "jupyter.connection_budget_mib",
                self.connection_budget_mib as u64,
            ),
            ("jupyter.key_budget_mib", self.key_budget_mib as u64),
            ("jupyter.max_queued_cells", self.max_queued_cells as u64),
            (
                "jupyter.messages_per_second",
                u64::from(self.messages_per_second),
            ),
            (
                "jupyter.restarts_per_minute",
                u64::from(self.restarts_per_minute),
            ),
        ])
    }
}
