//! The Browser sandbox: Python (Pyodide) in a Web Worker of the session's
//! own page. Nothing runs on the server: a run is sent to the page that
//! attached as the session's runner, over the session's WebSocket, and the
//! frames the page sends back become [`RunEvent`]s, so the agent cannot tell
//! it from any other sandbox.
//!
//! The page is as untrusted as a program: its frames are checked (only the
//! attached page may answer, only for its own session's runs), its output is
//! capped, and the server keeps the time limit itself. A page that goes away
//! mid-run ends the run after a grace period; one that never attaches ends
//! it with a clear error.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use parking_lot::Mutex;
use runcell_protocol::{Output, ServerMessage};
use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;

use super::{
    Capabilities, Language, RunEvent, RunOutcome, RunRequest, Sandbox, SandboxError, SandboxKind,
    SandboxSession,
};
use runcell_protocol::SessionId;

#[cfg(any(test, feature = "conformance"))]
mod scripted;
mod session;
#[cfg(test)]
mod suite;
#[cfg(test)]
mod tests;

#[cfg(any(test, feature = "conformance"))]
pub use scripted::ScriptedTab;
pub use session::BrowserSession;

/// Where the site keeps Pyodide: `<site>/pyodide/<version>-<hash>/`.
const RUNTIME_DIR: &str = "pyodide";

/// The Pyodide runtime the build put in the site.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Runtime {
    /// Its URL path: `/pyodide/314.0.7-0123456789/`.
    pub url: String,
    /// What the vendored packages let a program import (`sympy`, `bs4`...),
    /// from its lock file.
    pub imports: Vec<String>,
}

/// The Pyodide runtime the build put in `site_root`, if it did; the Browser
/// sandbox is offered only then. With several, the newest wins.
pub fn find_runtime(site_root: &Path) -> Option<Runtime> {
    let entries = std::fs::read_dir(site_root.join(RUNTIME_DIR)).ok()?;
    let (_, name) = entries
        .filter_map(Result::ok)
        .filter(|e| e.path().join("pyodide.mjs").is_file())
        .filter_map(|e| {
            let modified = e.metadata().and_then(|m| m.modified()).ok()?;
            let name = e.file_name().into_string().ok()?;
            Some((modified, name))
        })
        .max()?;
    let lock = std::fs::read(
        site_root
            .join(RUNTIME_DIR)
            .join(&name)
            .join("pyodide-lock.json"),
    )
    .ok()
    .and_then(|bytes| serde_json::from_slice::<serde_json::Value>(&bytes).ok());
    let mut imports: Vec<String> = lock
        .as_ref()
        .and_then(|lock| lock.get("packages")?.as_object().cloned())
        .into_iter()
        .flat_map(|packages| packages.into_iter())
        .filter_map(|(_, package)| package.get("imports")?.as_array().cloned())
        .flatten()
        .filter_map(|name| name.as_str().map(str::to_string))
        .collect();
    imports.sort();
    imports.dedup();
    Some(Runtime {
        url: format!("/{RUNTIME_DIR}/{name}/"),
        imports,
    })
}

/// How long the server waits on pages.
#[derive(Clone, Debug)]
pub struct BrowserSettings {
    /// A run with no page attached waits this long for one (a page whose
    /// Python is still loading, or reconnecting).
    pub attach_wait: Duration,
    /// A run whose page went away waits this long for it to come back.
    pub gone_grace: Duration,
    /// After a stop, how long the page has to confirm before the run ends
    /// anyway.
    pub stop_grace: Duration,
    /// How long the page may take to start the program (its Python and the
    /// packages the program imports loading) before the run's wall time
    /// begins anyway.
    pub prepare_wait: Duration,
}

impl Default for BrowserSettings {
    fn default() -> Self {
        Self {
            attach_wait: Duration::from_secs(60),
            gone_grace: Duration::from_secs(10),
            stop_grace: Duration::from_secs(3),
            prepare_wait: Duration::from_secs(180),
        }
    }
}

/// Why a page's frame was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BrowserError {
    #[error("a kernel id is 1 to 64 letters, digits, '-' or '_'")]
    BadKernel,
    #[error("this page does not run the session's browser programs: attach first")]
    NotAttached,
    #[error("no browser run {0} is under way in this session")]
    UnknownRun(u64),
}

/// One page's connection, as the Browser sandbox reaches it.
#[derive(Clone, Debug)]
pub struct TabLink {
    conn: u64,
    tx: mpsc::Sender<ServerMessage>,
}

impl TabLink {
    pub fn conn(&self) -> u64 {
        self.conn
    }
}

/// A page that attached for a session, in the Python `kernel`.
#[derive(Clone, Debug)]
struct Tab {
    link: TabLink,
    kernel: String,
}

/// What a page sends back about a run.
#[derive(Clone, Debug, PartialEq)]
pub enum Reply {
    /// The program itself began (the page's Python is up and its packages
    /// loaded): the run's wall time counts from here.
    Started,
    Output(Output),
    Done {
        kernel: String,
    },
}

/// The pages of one notebook session.
///
/// Every page that attached and is still connected is a candidate; one of
/// them is the runner. The runner keeps its place while its connection
/// lives: a page that attaches meanwhile (another tab of the session) waits
/// as a standby, and frames from it about runs are refused. When the
/// runner's connection closes, the standby that attached last takes over
/// (its Python is another one, so the next run says it started afresh),
/// unless a run is under way: the runner may come back within the grace,
/// and a standby is promoted only when the run is over.
struct SessionTabs {
    /// The runner, as runs see it.
    runner: watch::Sender<Option<Tab>>,
    /// The other candidates, the one that attached last at the end.
    standby: Vec<Tab>,
    /// Runs under way: id → where the page's replies go.
    runs: HashMap<u64, mpsc::Sender<Reply>>,
}

impl Default for SessionTabs {
    fn default() -> Self {
        Self {
            runner: watch::channel(None).0,
            standby: Vec::new(),
            runs: HashMap::new(),
        }
    }
}

impl SessionTabs {
    fn runner_conn(&self) -> Option<u64> {
        self.runner.borrow().as_ref().map(|t| t.link.conn)
    }

    /// With no runner and no run waiting for one to come back, the standby
    /// that attached last becomes the runner.
    fn promote(&mut self) {
        if self.runs.is_empty()
            && self.runner.borrow().is_none()
            && let Some(tab) = self.standby.pop()
        {
            tracing::debug!(
                conn = tab.link.conn,
                "a standby page became the browser runner"
            );
            self.runner.send_replace(Some(tab));
        }
    }

    /// Nothing attached, nothing under way, nobody waiting but the
    /// `leaving` watchers.
    fn is_idle(&self, leaving: usize) -> bool {
        self.runner.borrow().is_none()
            && self.standby.is_empty()
            && self.runs.is_empty()
            && self.runner.receiver_count() <= leaving
    }
}

/// The pages attached as runners, per notebook session, and their runs.
pub struct BrowserTabs {
    settings: BrowserSettings,
    sessions: Mutex<HashMap<SessionId, SessionTabs>>,
    next_conn: AtomicU64,
    next_run: AtomicU64,
}

impl std::fmt::Debug for BrowserTabs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BrowserTabs")
            .field("sessions", &self.sessions.lock().len())
            .finish_non_exhaustive()
    }
}

/// Drops a session's entry once nothing is left in it, so that the map
/// holds only sessions with a page, a run or someone waiting for a page;
/// `leaving` watchers are about to go.
fn tidy(sessions: &mut HashMap<SessionId, SessionTabs>, session: SessionId, leaving: usize) {
    if sessions
        .get(&session)
        .is_some_and(|tabs| tabs.is_idle(leaving))
    {
        sessions.remove(&session);
    }
}

/// A run's view of its session's runner; the session's entry is tidied
/// away when it is dropped.
struct Watching<'a> {
    tabs: &'a BrowserTabs,
    session: SessionId,
    runner: watch::Receiver<Option<Tab>>,
}

impl Drop for Watching<'_> {
    fn drop(&mut self) {
        tidy(&mut self.tabs.sessions.lock(), self.session, 1);
    }
}

impl BrowserTabs {
    pub fn new(settings: BrowserSettings) -> Arc<Self> {
        Arc::new(Self {
            settings,
            sessions: Mutex::new(HashMap::new()),
            next_conn: AtomicU64::new(1),
            next_run: AtomicU64::new(1),
        })
    }

    /// A new connection's link, and the frames it must send its page.
    pub fn link(&self) -> (TabLink, mpsc::Receiver<ServerMessage>) {
        let (tx, rx) = mpsc::channel(64);
        let conn = self.next_conn.fetch_add(1, Ordering::Relaxed);
        (TabLink { conn, tx }, rx)
    }

    fn watch(&self, session: SessionId) -> Watching<'_> {
        let runner = self
            .sessions
            .lock()
            .entry(session)
            .or_default()
            .runner
            .subscribe();
        Watching {
            tabs: self,
            session,
            runner,
        }
    }

    /// `link`'s page offers to run `session`'s browser programs in the
    /// Python `kernel`. It is the runner if there is none, if it is the
    /// runner already (its Python may be a new one), or if its Python is
    /// the runner's (the same page, reconnected); otherwise it waits as a
    /// standby.
    pub fn attach(
        &self,
        session: SessionId,
        link: &TabLink,
        kernel: &str,
    ) -> Result<(), BrowserError> {
        let valid = (1..=64).contains(&kernel.len())
            && kernel
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
        if !valid {
            return Err(BrowserError::BadKernel);
        }
        let mut sessions = self.sessions.lock();
        let tabs = sessions.entry(session).or_default();
        tabs.standby.retain(|t| t.link.conn != link.conn);
        let tab = Tab {
            link: link.clone(),
            kernel: kernel.to_string(),
        };
        let runner = tabs
            .runner
            .borrow()
            .as_ref()
            .map(|t| (t.link.conn, t.kernel.clone()));
        match runner {
            Some((conn, ref k)) if conn == link.conn && *k == kernel => {}
            Some((conn, ref k)) if conn == link.conn || *k == kernel => {
                tabs.runner.send_replace(Some(tab));
            }
            None => {
                tabs.runner.send_replace(Some(tab));
                tracing::debug!(session.id = %session, conn = link.conn, "page attached as the browser runner");
            }
            Some(_) => {
                tabs.standby.push(tab);
                tracing::debug!(session.id = %session, conn = link.conn, "page attached as a standby browser runner");
            }
        }
        Ok(())
    }

    /// The connection `conn` closed: it is no candidate any more, and if it
    /// was `session`'s runner, a standby takes over (see [`SessionTabs`]).
    pub fn detach(&self, session: SessionId, conn: u64) {
        let mut sessions = self.sessions.lock();
        let Some(tabs) = sessions.get_mut(&session) else {
            return;
        };
        tabs.standby.retain(|t| t.link.conn != conn);
        if tabs.runner_conn() == Some(conn) {
            tabs.runner.send_replace(None);
            tabs.promote();
        }
        tidy(&mut sessions, session, 0);
    }

    /// A frame about run `run` from connection `conn` of `session`: only the
    /// runner may answer, and only about that session's runs.
    pub async fn reply(
        &self,
        session: SessionId,
        conn: u64,
        run: u64,
        reply: Reply,
    ) -> Result<(), BrowserError> {
        let to = {
            let sessions = self.sessions.lock();
            let tabs = sessions.get(&session).ok_or(BrowserError::NotAttached)?;
            if tabs.runner_conn() != Some(conn) {
                return Err(BrowserError::NotAttached);
            }
            tabs.runs
                .get(&run)
                .cloned()
                .ok_or(BrowserError::UnknownRun(run))?
        };
        // The run may have just ended: its frames are not wanted any more.
        let _ = to.send(reply).await;
        Ok(())
    }

    fn start_run(&self, session: SessionId) -> (u64, mpsc::Receiver<Reply>) {
        let (tx, rx) = mpsc::channel(64);
        let run = self.next_run.fetch_add(1, Ordering::Relaxed);
        self.sessions
            .lock()
            .entry(session)
            .or_default()
            .runs
            .insert(run, tx);
        (run, rx)
    }

    fn end_run(&self, session: SessionId, run: u64) {
        let mut sessions = self.sessions.lock();
        if let Some(tabs) = sessions.get_mut(&session) {
            tabs.runs.remove(&run);
            // A runner that left during the run did not come back in time.
            tabs.promote();
        }
        tidy(&mut sessions, session, 0);
    }

    /// The Browser sandbox of notebook session `session`: its sessions run
    /// in whichever of that session's pages is attached.
    pub fn sandbox(self: &Arc<Self>, session: SessionId) -> BrowserSandbox {
        BrowserSandbox {
            tabs: Arc::clone(self),
            session,
        }
    }
}

/// [`Sandbox`] over the pages of one notebook session.
pub struct BrowserSandbox {
    tabs: Arc<BrowserTabs>,
    session: SessionId,
}

/// What a page's Python offers, and no more (the conformance suite skips
/// the rest, and checks that it is refused):
/// - Python only, in sessions that keep their variables; a run is stopped
///   through the page (`browser_stop`), and the server keeps the time and
///   output limits itself.
/// - No one-shot runs: a page has one Python, which keeps its state, so
///   there is no throw-away environment to run in.
/// - Sessions are not isolated from each other: every session of one
///   notebook session's sandbox runs in the same page, whose Python and
///   in-memory file system they share (a new session starts from empty
///   globals, not from an empty disk).
/// - No `Files`: the page's file system is in its worker, out of the
///   server's reach; no execution contexts.
/// - Memory, processes and disk are the browser's to limit, not runcell's,
///   and Pyodide has no network to deny beyond what the frame's policy
///   refuses: the suite has no check of these for any backend.
fn capabilities() -> Capabilities {
    Capabilities {
        backend: SandboxKind::Browser,
        languages: vec![Language::Python],
        stateful: true,
        files: false,
        interrupt: true,
        one_shot: false,
        isolated_sessions: false,
        contexts: false,
    }
}

#[async_trait::async_trait]
impl Sandbox for BrowserSandbox {
    fn capabilities(&self) -> Capabilities {
        capabilities()
    }

    /// A page has one Python, which keeps its state: there is no throw-away
    /// environment to run in.
    async fn run(
        &self,
        _request: RunRequest,
        _events: Option<mpsc::Sender<RunEvent>>,
        _cancel: CancellationToken,
    ) -> Result<RunOutcome, SandboxError> {
        Err(SandboxError::NotSupported(
            "the browser sandbox runs only a notebook session's kernel, in its page".into(),
        ))
    }

    async fn open_session(&self) -> Result<Box<dyn SandboxSession>, SandboxError> {
        Ok(Box::new(BrowserSession::new(
            Arc::clone(&self.tabs),
            self.session,
        )))
    }
}
