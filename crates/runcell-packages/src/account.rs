//! One session's (or one-shot run's) use of the index: what it was served
//! (bytes reserved before a download starts), which projects it asked for,
//! where its notices go, and how many connections and upstream fetches it
//! may hold.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::Mutex;
use tokio::sync::Semaphore;

/// Connections one account's jail may have served at once; more wait.
/// Each is HTTP/1 (one request at a time), so this bounds its requests too.
pub(crate) const MAX_CONNECTIONS: usize = 8;
/// Projects remembered as asked for, at most (the `/simple/` listing).
const MAX_ASKED: usize = 1000;

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
    /// The projects whose pages it was served: all `/simple/` lists for it.
    asked: Mutex<BTreeSet<String>>,
    pub(crate) connections: Arc<Semaphore>,
    /// Upstream fetches (pages and files) it may have in flight at once;
    /// sized by the index's `max_session_fetches` on first use.
    fetches: std::sync::OnceLock<Arc<Semaphore>>,
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
            asked: Mutex::new(BTreeSet::new()),
            connections: Arc::new(Semaphore::new(MAX_CONNECTIONS)),
            fetches: std::sync::OnceLock::new(),
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
    fn try_charge(&self, bytes: u64, cap: u64) -> bool {
        self.bytes
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |served| {
                served.checked_add(bytes).filter(|total| *total <= cap)
            })
            .is_ok()
    }

    /// Reserves `bytes` of the account's `cap` before a file is fetched or
    /// sent: `None` when they do not fit. Given back when the reservation
    /// is dropped unkept.
    pub(crate) fn reserve(&self, bytes: u64, cap: u64) -> Option<Reservation<'_>> {
        // Made only once charged: an unkept one gives its bytes back.
        self.try_charge(bytes, cap).then(|| Reservation {
            account: self,
            bytes,
            cap,
            kept: false,
        })
    }

    /// The semaphore of its upstream fetches (`per_account` permits).
    pub(crate) fn fetches(&self, per_account: usize) -> Arc<Semaphore> {
        Arc::clone(
            self.fetches
                .get_or_init(|| Arc::new(Semaphore::new(per_account.max(1)))),
        )
    }

    /// Notes that it was served `project`'s page.
    pub(crate) fn asked_for(&self, project: &str) {
        let mut asked = self.asked.lock();
        if asked.len() < MAX_ASKED {
            asked.insert(project.to_string());
        }
    }

    /// The projects whose pages it was served, sorted.
    pub(crate) fn asked(&self) -> Vec<String> {
        self.asked.lock().iter().cloned().collect()
    }

    /// Notes `project` `version` as installed (once).
    pub(crate) fn record(&self, project: &str, version: &str) {
        let mut installed = self.installed.lock();
        if !installed.iter().any(|(p, v)| p == project && v == version) {
            installed.push((project.to_string(), version.to_string()));
        }
    }
}

/// Bytes of an account's budget held for a file on its way: grown as a
/// download of unknown size comes in, settled to the file's size, and
/// given back if the file is never served.
pub(crate) struct Reservation<'a> {
    account: &'a Account,
    bytes: u64,
    cap: u64,
    kept: bool,
}

impl Reservation<'_> {
    /// Holds `total` bytes in all (more than now); false, holding what it
    /// held, if that would pass the account's cap.
    pub fn grow_to(&mut self, total: u64) -> bool {
        if total <= self.bytes {
            return true;
        }
        if self.account.try_charge(total - self.bytes, self.cap) {
            self.bytes = total;
            true
        } else {
            false
        }
    }

    /// Settles on exactly `total` bytes; false if they do not fit.
    pub fn settle(&mut self, total: u64) -> bool {
        if total >= self.bytes {
            return self.grow_to(total);
        }
        self.account
            .bytes
            .fetch_sub(self.bytes - total, Ordering::SeqCst);
        self.bytes = total;
        true
    }

    /// The file was served: the bytes stay counted.
    pub fn keep(mut self) {
        self.kept = true;
    }
}

impl Drop for Reservation<'_> {
    fn drop(&mut self) {
        if !self.kept {
            self.account.bytes.fetch_sub(self.bytes, Ordering::SeqCst);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reservation_is_held_grown_settled_and_given_back() {
        let account = Account::new("t");
        let mut first = account.reserve(60, 100).expect("fits");
        assert!(account.reserve(50, 100).is_none(), "60 + 50 is over 100");
        assert!(first.grow_to(90));
        assert!(!first.grow_to(101), "past the cap");
        assert_eq!(account.bytes_served(), 90);
        assert!(first.settle(70));
        assert_eq!(account.bytes_served(), 70);
        first.keep();
        let second = account.reserve(30, 100).expect("70 + 30 fits");
        drop(second);
        assert_eq!(
            account.bytes_served(),
            70,
            "an unkept reservation is given back"
        );
    }
}
