//! One session's (or one-shot run's) use of the index: what it was served,
//! where its notices go, and how many connections it may hold.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::Mutex;
use tokio::sync::Semaphore;

/// Connections one account's jail may have served at once; more wait.
pub(crate) const MAX_CONNECTIONS: usize = 8;

type Sink = Arc<dyn Fn(Notice) + Send + Sync>;

/// What the index tells a run about its packages.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Notice {
    /// A file was handed to the jail.
    Served {
        project: String,
        version: String,
        filename: String,
        bytes: u64,
        cached: bool,
    },
    /// The index refused a project or a file; `reason` is a plain sentence
    /// for a person, naming the setting.
    Refused { project: String, reason: String },
}

/// One session's (or one-shot run's) use of the index.
pub struct Account {
    label: String,
    bytes: AtomicU64,
    sink: Mutex<Option<Sink>>,
    installed: Mutex<Vec<(String, String)>>,
    pub(crate) connections: Arc<Semaphore>,
}

impl std::fmt::Debug for Account {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Account")
            .field("label", &self.label)
            .field("bytes_served", &self.bytes_served())
            .finish_non_exhaustive()
    }
}

impl Account {
    /// `label` names the account in logs.
    pub fn new(label: impl Into<String>) -> Arc<Self> {
        Arc::new(Self {
            label: label.into(),
            bytes: AtomicU64::new(0),
            sink: Mutex::new(None),
            installed: Mutex::new(Vec::new()),
            connections: Arc::new(Semaphore::new(MAX_CONNECTIONS)),
        })
    }

    pub fn label(&self) -> &str {
        &self.label
    }

    /// Bytes of files served to this account so far.
    pub fn bytes_served(&self) -> u64 {
        self.bytes.load(Ordering::SeqCst)
    }

    /// Where notices go while a run is under way (`None`: dropped).
    pub fn set_sink(&self, sink: Option<Box<dyn Fn(Notice) + Send + Sync>>) {
        *self.sink.lock() = sink.map(Sink::from);
    }

    /// Projects installed through this account so far, in order, as (project, version).
    pub fn installed(&self) -> Vec<(String, String)> {
        self.installed.lock().clone()
    }

    /// Hands `notice` to the sink, if there is one (called without a lock held).
    pub(crate) fn notify(&self, notice: Notice) {
        let sink = self.sink.lock().clone();
        if let Some(sink) = sink {
            sink(notice);
        }
    }

    /// Counts `bytes` as served unless that would pass `cap`; whether it did.
    pub(crate) fn try_charge(&self, bytes: u64, cap: u64) -> bool {
        self.bytes
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |served| {
                served.checked_add(bytes).filter(|total| *total <= cap)
            })
            .is_ok()
    }

    /// Notes `project` `version` as installed (once).
    pub(crate) fn record(&self, project: &str, version: &str) {
        let mut installed = self.installed.lock();
        if !installed.iter().any(|(p, v)| p == project && v == version) {
            installed.push((project.to_string(), version.to_string()));
        }
    }
}
