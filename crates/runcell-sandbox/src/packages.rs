//! What runcell's package index told a run: each file it handed to the
//! program (pip installing it) or refused, as a rich result of its own MIME
//! type ([`PACKAGE_MIME`]) with a line of text beside it, so that every
//! surface passes it on as it passes on a display: the notebook shows it as
//! an install line, Jupyter clients as its text, E2B commands as a line of
//! their error stream.

use std::sync::Arc;

use serde_json::{Map, Value, json};
use tokio::sync::mpsc;

pub use runcell_packages::{
    Account, JAIL_PORT, Mode, Notice, PackageIndex, PackagesConfig, default_index_url,
};

use crate::{RunEvent, now_ms};

/// The index jails get under `config`, its cache in `data_dir/packages`;
/// `None` when installing is off, or when the index cannot be made (said
/// in the log: sessions then run without it).
pub fn index_for_jails(
    config: &PackagesConfig,
    data_dir: &std::path::Path,
) -> Option<Arc<PackageIndex>> {
    if config.mode == Mode::Off {
        return None;
    }
    let mut config = config.clone();
    // Asked of pip once a process (servers in tests start by the dozen).
    static PIPS: std::sync::OnceLock<Option<String>> = std::sync::OnceLock::new();
    let pips = || PIPS.get_or_init(default_index_url).clone();
    let upstream = match config.index_url.clone().or_else(pips) {
        Some(url) => url,
        None => {
            tracing::warn!(
                "no upstream package index is set (packages.index_url) and pip names none: sessions install only what runcell's cache holds"
            );
            config.offline = true;
            String::new()
        }
    };
    match PackageIndex::new(config, data_dir.join("packages"), upstream) {
        Ok(index) => {
            tracing::info!(
                upstream = index.upstream(),
                "sessions install packages through runcell's index"
            );
            Some(index)
        }
        Err(err) => {
            tracing::warn!(%err, "the package index cannot start: sessions cannot install packages");
            None
        }
    }
}

/// The MIME type of an install's (or a refusal's) result.
pub const PACKAGE_MIME: &str = "application/vnd.runcell.package+json";

/// One install or refusal, as the notebook keeps it.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct PackageNote {
    pub project: String,
    #[serde(default)]
    pub version: String,
    #[serde(default)]
    pub size: u64,
    #[serde(default)]
    pub cached: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refused: Option<String>,
}

impl PackageNote {
    pub fn of(notice: Notice) -> Self {
        match notice {
            Notice::Served {
                project,
                version,
                bytes,
                cached,
                ..
            } => Self {
                project,
                version,
                size: bytes,
                cached,
                refused: None,
            },
            Notice::Refused { project, reason } => Self {
                project,
                version: String::new(),
                size: 0,
                cached: false,
                refused: Some(reason),
            },
        }
    }

    /// The line a person reads.
    pub fn text(&self) -> String {
        match &self.refused {
            Some(reason) => format!("runcell did not install {}: {reason}", self.project),
            None => format!(
                "runcell's package index served {} {} ({} KB, {})",
                self.project,
                self.version,
                self.size.div_ceil(1000),
                if self.cached {
                    "from its cache"
                } else {
                    "downloaded and checked"
                }
            ),
        }
    }

    /// As a result's MIME bundle.
    pub fn bundle(&self) -> Map<String, Value> {
        let mut data = Map::new();
        data.insert(PACKAGE_MIME.into(), json!(self));
        data.insert("text/plain".into(), Value::String(self.text()));
        data
    }

    /// The note a result's bundle holds, if it is one.
    pub fn from_bundle(data: &Map<String, Value>) -> Option<Self> {
        serde_json::from_value(data.get(PACKAGE_MIME)?.clone()).ok()
    }
}

/// Sends what `account`'s index tells while a run is under way to the
/// run's `events` as it happens, and keeps it for the run's outcome
/// ([`Notices::into_outcome`]); the account tells no one once the returned
/// value is dropped.
pub fn notices_to(account: &Arc<Account>, events: Option<&mpsc::Sender<RunEvent>>) -> Notices {
    let kept = Arc::new(parking_lot::Mutex::new(Vec::new()));
    let events = events.cloned();
    let keep = kept.clone();
    account.set_sink(Some(Box::new(move |notice| {
        let note = PackageNote::of(notice);
        if let Some(events) = &events {
            // A full channel drops the live note; the outcome keeps it.
            let _ = events.try_send(RunEvent::Result {
                data: note.bundle(),
                main: false,
                metadata: Map::new(),
                display_id: None,
                ts_ms: now_ms(),
            });
        }
        let mut kept = keep.lock();
        if kept.len() < MAX_NOTES {
            kept.push(note);
        }
    })));
    Notices {
        account: account.clone(),
        kept,
    }
}

/// The most notes one run's outcome keeps (an install of many small
/// wheels still fits).
const MAX_NOTES: usize = 200;

/// What the index told during one run.
pub struct Notices {
    account: Arc<Account>,
    kept: Arc<parking_lot::Mutex<Vec<PackageNote>>>,
}

impl Notices {
    /// The run's results gain a result for each note.
    pub fn into_outcome(self, outcome: &mut crate::RunOutcome) {
        self.account.set_sink(None);
        outcome
            .results
            .extend(self.kept.lock().drain(..).map(|note| note.bundle()));
    }
}

impl Drop for Notices {
    fn drop(&mut self) {
        self.account.set_sink(None);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_note_goes_into_a_bundle_and_back() {
        let note = PackageNote::of(Notice::Served {
            project: "humanize".into(),
            version: "4.9.0".into(),
            filename: "humanize-4.9.0-py3-none-any.whl".into(),
            bytes: 126_820,
            cached: true,
        });
        let bundle = note.bundle();
        assert_eq!(PackageNote::from_bundle(&bundle), Some(note));
        assert_eq!(
            bundle["text/plain"],
            "runcell's package index served humanize 4.9.0 (127 KB, from its cache)"
        );
        let refused = PackageNote::of(Notice::Refused {
            project: "evil".into(),
            reason: "runcell's package policy does not allow 'evil' (packages.deny)".into(),
        });
        assert!(refused.text().starts_with("runcell did not install evil: "));
        assert_eq!(PackageNote::from_bundle(&Map::new()), None);
    }
}
