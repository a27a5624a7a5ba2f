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
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use app::protocol::{Output, ServerMessage};
use parking_lot::Mutex;
use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;

use super::{
    Capabilities, ExecError, Language, RunEvent, RunOutcome, RunRequest, Sandbox, SandboxError,
    SandboxSession, fit, limit_error, now_ms,
};
use crate::session::SessionId;

/// The backend's name, in pickers and frames.
pub const BACKEND: &str = "browser";

/// Where the site keeps Pyodide: `<site>/pyodide/<version>-<hash>/`.
const RUNTIME_DIR: &str = "pyodide";

/// The URL path of the Pyodide runtime the build put in `site_root`, if it
/// did (`/pyodide/314.0.7-0123456789/`); the Browser sandbox is offered only
/// then. With several, the newest wins.
pub fn find_runtime(site_root: &Path) -> Option<String> {
    let entries = std::fs::read_dir(site_root.join(RUNTIME_DIR)).ok()?;
    entries
        .filter_map(Result::ok)
        .filter(|e| e.path().join("pyodide.mjs").is_file())
        .filter_map(|e| {
            let modified = e.metadata().and_then(|m| m.modified()).ok()?;
            let name = e.file_name().into_string().ok()?;
            Some((modified, name))
        })
        .max()
        .map(|(_, name)| format!("/{RUNTIME_DIR}/{name}/"))
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
}

impl Default for BrowserSettings {
    fn default() -> Self {
        Self {
            attach_wait: Duration::from_secs(60),
            gone_grace: Duration::from_secs(10),
            stop_grace: Duration::from_secs(3),
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

/// A page attached as a session's runner.
#[derive(Clone, Debug)]
struct Tab {
    link: TabLink,
    kernel: String,
}

/// What a page sends back about a run.
#[derive(Clone, Debug, PartialEq)]
pub enum Reply {
    Output(Output),
    Done { kernel: String },
}

#[derive(Default)]
struct SessionTabs {
    attached: Option<watch::Sender<Option<Tab>>>,
    /// Runs under way: id → where the page's replies go.
    runs: HashMap<u64, mpsc::Sender<Reply>>,
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

    fn watch(&self, session: SessionId) -> watch::Receiver<Option<Tab>> {
        let mut sessions = self.sessions.lock();
        sessions
            .entry(session)
            .or_default()
            .attached
            .get_or_insert_with(|| watch::channel(None).0)
            .subscribe()
    }

    /// `link`'s page runs `session`'s browser programs from now on, in the
    /// Python `kernel`.
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
        let tab = Tab {
            link: link.clone(),
            kernel: kernel.to_string(),
        };
        tabs.attached
            .get_or_insert_with(|| watch::channel(None).0)
            .send_replace(Some(tab));
        tracing::debug!(session.id = %session, conn = link.conn, "page attached as the browser runner");
        Ok(())
    }

    /// The connection `conn` closed: if it was `session`'s runner, the
    /// session has none until a page attaches again.
    pub fn detach(&self, session: SessionId, conn: u64) {
        let sessions = self.sessions.lock();
        if let Some(sender) = sessions.get(&session).and_then(|t| t.attached.as_ref()) {
            sender.send_if_modified(|tab| {
                if tab.as_ref().is_some_and(|t| t.link.conn == conn) {
                    *tab = None;
                    true
                } else {
                    false
                }
            });
        }
    }

    /// A frame about run `run` from connection `conn` of `session`: only the
    /// attached page may answer, and only about that session's runs.
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
            let attached = tabs
                .attached
                .as_ref()
                .and_then(|a| a.borrow().as_ref().map(|t| t.link.conn));
            if attached != Some(conn) {
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
        if let Some(tabs) = self.sessions.lock().get_mut(&session) {
            tabs.runs.remove(&run);
        }
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

fn capabilities() -> Capabilities {
    Capabilities {
        backend: BACKEND,
        languages: vec![Language::Python],
        stateful: true,
        files: false,
        interrupt: true,
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
        Ok(Box::new(BrowserSession {
            id: format!("browser-{}", uuid::Uuid::new_v4()),
            tabs: Arc::clone(&self.tabs),
            session: self.session,
            kernel: Mutex::new(None),
            fresh: AtomicBool::new(true),
        }))
    }
}

/// A kernel in a page: the first page Python it runs in. When the page's
/// Python is another one (the page was reloaded, or ended a program that
/// would not stop), its runs fail with `NotFound`, as a reaped session's do.
pub struct BrowserSession {
    id: String,
    tabs: Arc<BrowserTabs>,
    session: SessionId,
    kernel: Mutex<Option<String>>,
    /// The next run starts from empty globals.
    fresh: AtomicBool,
}

/// Why a run ended early, on the server's side.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Ending {
    Cancelled,
    Timeout,
    OutputLimit,
}

impl Ending {
    fn error(self, wall: Duration) -> ExecError {
        match self {
            Self::Cancelled => ExecError::new(limit_error::CANCELLED, "stopped"),
            Self::Timeout => ExecError::new(
                limit_error::TIMEOUT,
                format!("the program ran longer than {} s", wall.as_secs()),
            ),
            Self::OutputLimit => ExecError::new(
                limit_error::OUTPUT,
                "the program printed more than the output limit; it was stopped",
            ),
        }
    }
}

/// A run as it is collected.
struct Collected {
    outcome: RunOutcome,
    budget: usize,
}

impl Collected {
    /// Takes one of the page's outputs within the output budget; false when
    /// the budget ran out with it.
    async fn take(&mut self, output: Output, events: Option<&mpsc::Sender<RunEvent>>) -> bool {
        let ts_ms = now_ms();
        let event = match output {
            Output::Stdout { text } | Output::Stderr { text } if self.budget == 0 => {
                let _ = text;
                return false;
            }
            Output::Stdout { text } => {
                let kept = fit(&text, self.budget).to_string();
                self.budget -= kept.len();
                let over = kept.len() < text.len();
                self.outcome.stdout.push_str(&kept);
                send(events, RunEvent::Stdout { text: kept, ts_ms }).await;
                return !over;
            }
            Output::Stderr { text } => {
                let kept = fit(&text, self.budget).to_string();
                self.budget -= kept.len();
                let over = kept.len() < text.len();
                self.outcome.stderr.push_str(&kept);
                send(events, RunEvent::Stderr { text: kept, ts_ms }).await;
                return !over;
            }
            Output::Rich { data } => {
                let size: usize = data.iter().map(|(k, v)| k.len() + v.len()).sum();
                if size > self.budget {
                    self.budget = 0;
                    return false;
                }
                self.budget -= size;
                let data: serde_json::Map<String, serde_json::Value> = data
                    .into_iter()
                    .map(|(k, v)| (k, serde_json::Value::String(v)))
                    .collect();
                self.outcome.results.push(data.clone());
                RunEvent::Result {
                    data,
                    main: true,
                    ts_ms,
                }
            }
            Output::Error {
                name,
                value,
                traceback,
            } => {
                let error = ExecError {
                    name: fit(&name, 200).to_string(),
                    value: fit(&value, 64 * 1024).to_string(),
                    traceback: traceback
                        .into_iter()
                        .take(200)
                        .map(|l| fit(&l, 4096).to_string())
                        .collect(),
                };
                // Streamed when the run ends: a stop or a limit may replace it.
                self.outcome.error = Some(error);
                return true;
            }
        };
        send(events, event).await;
        true
    }
}

/// Streams an event; a closed receiver is not an error.
async fn send(events: Option<&mpsc::Sender<RunEvent>>, event: RunEvent) {
    if let Some(events) = events {
        let _ = events.send(event).await;
    }
}

impl BrowserSession {
    /// Waits for an attached page, for at most `attach_wait`.
    async fn page(
        &self,
        attached: &mut watch::Receiver<Option<Tab>>,
        cancel: &CancellationToken,
    ) -> Result<Option<Tab>, SandboxError> {
        let wait = self.tabs.settings.attach_wait;
        tokio::select! {
            () = cancel.cancelled() => Ok(None),
            found = tokio::time::timeout(wait, attached.wait_for(Option::is_some)) => match found {
                Ok(Ok(tab)) => Ok(tab.clone()),
                _ => Err(SandboxError::Unavailable(format!(
                    "no open page of this session runs Python in the browser (waited {} s): \
                     open the session and pick Browser, or pick another sandbox",
                    wait.as_secs()
                ))),
            },
        }
    }
}

#[async_trait::async_trait]
impl SandboxSession for BrowserSession {
    fn id(&self) -> &str {
        &self.id
    }

    async fn run(
        &self,
        request: &RunRequest,
        events: Option<&mpsc::Sender<RunEvent>>,
        cancel: &CancellationToken,
    ) -> Result<RunOutcome, SandboxError> {
        super::validate_code(&request.code)?;
        if request.language != Language::Python {
            return Err(SandboxError::InvalidInput(format!(
                "the browser sandbox runs Python only, not {}",
                request.language.name()
            )));
        }
        let started = Instant::now();
        let wall = request.limits.wall;
        let mut collected = Collected {
            outcome: RunOutcome {
                stdout: String::new(),
                stderr: String::new(),
                results: Vec::new(),
                error: None,
                exit_code: None,
                duration_ms: 0,
                truncated: false,
            },
            budget: request.limits.output_bytes,
        };
        let mut attached = self.tabs.watch(self.session);
        let Some(tab) = self.page(&mut attached, cancel).await? else {
            collected.outcome.error = Some(Ending::Cancelled.error(wall));
            return Ok(collected.outcome);
        };
        {
            let mut kernel = self.kernel.lock();
            match kernel.as_deref() {
                Some(k) if k != tab.kernel => {
                    return Err(SandboxError::NotFound(
                        "the page's Python started afresh since the last run".into(),
                    ));
                }
                Some(_) => {}
                None => *kernel = Some(tab.kernel.clone()),
            }
        }
        let (run, mut replies) = self.tabs.start_run(self.session);
        let fresh = self.fresh.swap(false, Ordering::Relaxed);
        let _end = EndRun {
            tabs: &self.tabs,
            session: self.session,
            run,
        };
        let sent = tab
            .link
            .tx
            .send(ServerMessage::BrowserRun {
                run,
                code: request.code.clone(),
                fresh,
                timeout_ms: crate::clock::millis(wall),
            })
            .await;
        if sent.is_err() {
            return Err(SandboxError::Unavailable(
                "the page that runs this session's Python went away".into(),
            ));
        }

        let deadline = tokio::time::Instant::now() + wall;
        // Set once the server has asked the page to stop.
        let mut ending: Option<(Ending, tokio::time::Instant)> = None;
        // Set while no page is attached.
        let mut gone_since: Option<tokio::time::Instant> = None;
        let stop = |ending: Ending| {
            let _ = tab.link.tx.try_send(ServerMessage::BrowserStop { run });
            Some((
                ending,
                tokio::time::Instant::now() + self.tabs.settings.stop_grace,
            ))
        };
        loop {
            let gone_at = gone_since.map(|t| t + self.tabs.settings.gone_grace);
            let ending_at = ending.map(|(_, at)| at);
            tokio::select! {
                reply = replies.recv() => match reply {
                    Some(Reply::Output(output)) => {
                        if ending.is_some_and(|(e, _)| e == Ending::OutputLimit) {
                            continue;
                        }
                        if !collected.take(output, events).await {
                            collected.outcome.truncated = true;
                            ending = stop(Ending::OutputLimit);
                        }
                    }
                    Some(Reply::Done { kernel }) => {
                        if kernel != tab.kernel {
                            tracing::debug!("a browser run ended in another Python than it began in");
                        }
                        break;
                    }
                    None => break,
                },
                () = cancel.cancelled(), if ending.is_none() => ending = stop(Ending::Cancelled),
                () = tokio::time::sleep_until(deadline), if ending.is_none() => ending = stop(Ending::Timeout),
                () = sleep_until_some(ending_at) => break,
                () = sleep_until_some(gone_at) => {
                    collected.outcome.error = Some(ExecError::new(
                        "BrowserGone",
                        "the page running this session's Python went away before the program finished",
                    ));
                    break;
                }
                changed = attached.changed() => {
                    if changed.is_err() {
                        continue;
                    }
                    let now = attached.borrow_and_update().clone();
                    match now {
                        None => gone_since = gone_since.or(Some(tokio::time::Instant::now())),
                        Some(t) if t.kernel == tab.kernel => gone_since = None,
                        Some(_) => {
                            collected.outcome.error = Some(ExecError::new(
                                "BrowserGone",
                                "the page's Python started afresh while the program ran",
                            ));
                            break;
                        }
                    }
                }
            }
        }
        if let Some((ending, _)) = ending {
            // The server's reason wins over whatever the page made of the stop
            // (a KeyboardInterrupt).
            collected.outcome.error = Some(ending.error(wall));
        }
        collected.outcome.duration_ms = crate::clock::millis(started.elapsed());
        if let Some(error) = &collected.outcome.error {
            let event = RunEvent::Error {
                error: error.clone(),
                ts_ms: now_ms(),
            };
            send(events, event).await;
        }
        Ok(collected.outcome)
    }

    async fn close(&self) {}
}

/// Forgets a run however it ended.
struct EndRun<'a> {
    tabs: &'a BrowserTabs,
    session: SessionId,
    run: u64,
}

impl Drop for EndRun<'_> {
    fn drop(&mut self) {
        self.tabs.end_run(self.session, self.run);
    }
}

async fn sleep_until_some(at: Option<tokio::time::Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sandbox::Limits;

    fn quick() -> BrowserSettings {
        BrowserSettings {
            attach_wait: Duration::from_millis(300),
            gone_grace: Duration::from_millis(300),
            stop_grace: Duration::from_millis(300),
        }
    }

    fn python(code: &str) -> RunRequest {
        RunRequest {
            code: code.into(),
            language: Language::Python,
            limits: Limits {
                wall: Duration::from_secs(5),
                ..Limits::default()
            },
        }
    }

    fn session_id() -> SessionId {
        SessionId::random()
    }

    async fn next_run(rx: &mut mpsc::Receiver<ServerMessage>) -> (u64, String) {
        match tokio::time::timeout(Duration::from_secs(5), rx.recv()).await {
            Ok(Some(ServerMessage::BrowserRun {
                run, code, fresh, ..
            })) => (run, if fresh { format!("fresh:{code}") } else { code }),
            other => panic!("expected a browser run, got {other:?}"),
        }
    }

    #[tokio::test]
    async fn a_run_goes_to_the_attached_page_and_its_replies_come_back() {
        let tabs = BrowserTabs::new(quick());
        let session = session_id();
        let (link, mut rx) = tabs.link();
        tabs.attach(session, &link, "k1").unwrap();
        let kernel = tabs.sandbox(session).open_session().await.unwrap();
        let (events_tx, mut events) = mpsc::channel(16);
        let page = {
            let tabs = Arc::clone(&tabs);
            tokio::spawn(async move {
                let (run, code) = next_run(&mut rx).await;
                assert_eq!(
                    code, "fresh:print(1)",
                    "a new kernel starts from empty globals"
                );
                let out = |output| Reply::Output(output);
                tabs.reply(
                    session,
                    link.conn(),
                    run,
                    out(Output::Stdout { text: "1\n".into() }),
                )
                .await
                .unwrap();
                tabs.reply(
                    session,
                    link.conn(),
                    run,
                    out(Output::Rich {
                        data: [("text/plain".to_string(), "2".to_string())].into(),
                    }),
                )
                .await
                .unwrap();
                tabs.reply(
                    session,
                    link.conn(),
                    run,
                    Reply::Done {
                        kernel: "k1".into(),
                    },
                )
                .await
                .unwrap();
                // The run is over: its id is not answerable any more.
                tokio::time::sleep(Duration::from_millis(50)).await;
                assert_eq!(
                    tabs.reply(
                        session,
                        link.conn(),
                        run,
                        Reply::Done {
                            kernel: "k1".into()
                        }
                    )
                    .await,
                    Err(BrowserError::UnknownRun(run))
                );
                (link, rx)
            })
        };
        let outcome = kernel
            .run(
                &python("print(1)"),
                Some(&events_tx),
                &CancellationToken::new(),
            )
            .await
            .unwrap();
        assert_eq!(outcome.stdout, "1\n");
        assert_eq!(outcome.results.len(), 1);
        assert!(outcome.error.is_none());
        assert!(
            matches!(events.recv().await, Some(RunEvent::Stdout { text, .. }) if text == "1\n")
        );
        assert!(matches!(
            events.recv().await,
            Some(RunEvent::Result { main: true, .. })
        ));
        let (link, mut rx) = page.await.unwrap();

        // The second run keeps the globals.
        let page = tokio::spawn({
            let tabs = Arc::clone(&tabs);
            async move {
                let (run, code) = next_run(&mut rx).await;
                assert_eq!(code, "x");
                tabs.reply(
                    session,
                    link.conn(),
                    run,
                    Reply::Done {
                        kernel: "k1".into(),
                    },
                )
                .await
                .unwrap();
            }
        });
        let outcome = kernel
            .run(&python("x"), None, &CancellationToken::new())
            .await
            .unwrap();
        assert!(outcome.error.is_none());
        page.await.unwrap();
    }

    #[tokio::test]
    async fn only_the_attached_page_may_answer() {
        let tabs = BrowserTabs::new(quick());
        let session = session_id();
        let (link, _rx) = tabs.link();
        let (other, _other_rx) = tabs.link();
        assert_eq!(
            tabs.attach(session, &link, ""),
            Err(BrowserError::BadKernel)
        );
        assert_eq!(
            tabs.attach(session, &link, "no spaces"),
            Err(BrowserError::BadKernel)
        );
        assert_eq!(
            tabs.reply(session, link.conn(), 1, Reply::Done { kernel: "k".into() })
                .await,
            Err(BrowserError::NotAttached)
        );
        tabs.attach(session, &link, "k").unwrap();
        assert_eq!(
            tabs.reply(session, other.conn(), 1, Reply::Done { kernel: "k".into() })
                .await,
            Err(BrowserError::NotAttached)
        );
        assert_eq!(
            tabs.reply(session, link.conn(), 99, Reply::Done { kernel: "k".into() })
                .await,
            Err(BrowserError::UnknownRun(99))
        );
        // Another session's run is not this page's to answer.
        let elsewhere = session_id();
        let (run, _replies) = tabs.start_run(elsewhere);
        assert_eq!(
            tabs.reply(
                session,
                link.conn(),
                run,
                Reply::Done { kernel: "k".into() }
            )
            .await,
            Err(BrowserError::UnknownRun(run))
        );
    }

    #[tokio::test]
    async fn with_no_page_a_run_fails_clearly() {
        let tabs = BrowserTabs::new(quick());
        let kernel = tabs.sandbox(session_id()).open_session().await.unwrap();
        let err = kernel
            .run(&python("1"), None, &CancellationToken::new())
            .await
            .unwrap_err();
        assert!(matches!(err, SandboxError::Unavailable(_)), "{err}");
        assert!(err.to_string().contains("pick Browser"), "{err}");
    }

    #[tokio::test]
    async fn a_page_that_goes_away_ends_the_run_after_the_grace() {
        let tabs = BrowserTabs::new(quick());
        let session = session_id();
        let (link, mut rx) = tabs.link();
        tabs.attach(session, &link, "k").unwrap();
        let kernel = tabs.sandbox(session).open_session().await.unwrap();
        let page = tokio::spawn({
            let tabs = Arc::clone(&tabs);
            async move {
                let _ = next_run(&mut rx).await;
                tabs.detach(session, link.conn());
            }
        });
        let outcome = kernel
            .run(&python("while True: pass"), None, &CancellationToken::new())
            .await
            .unwrap();
        page.await.unwrap();
        assert_eq!(outcome.error.unwrap().name, "BrowserGone");
    }

    #[tokio::test]
    async fn a_page_that_comes_back_finishes_the_run() {
        let tabs = BrowserTabs::new(quick());
        let session = session_id();
        let (link, mut rx) = tabs.link();
        tabs.attach(session, &link, "k").unwrap();
        let kernel = tabs.sandbox(session).open_session().await.unwrap();
        let page = tokio::spawn({
            let tabs = Arc::clone(&tabs);
            async move {
                let (run, _) = next_run(&mut rx).await;
                tabs.detach(session, link.conn());
                // The same Python reconnects on a new socket.
                let (again, _rx) = tabs.link();
                tabs.attach(session, &again, "k").unwrap();
                tabs.reply(
                    session,
                    again.conn(),
                    run,
                    Reply::Output(Output::Stdout {
                        text: "late\n".into(),
                    }),
                )
                .await
                .unwrap();
                tabs.reply(
                    session,
                    again.conn(),
                    run,
                    Reply::Done { kernel: "k".into() },
                )
                .await
                .unwrap();
            }
        });
        let outcome = kernel
            .run(&python("print('late')"), None, &CancellationToken::new())
            .await
            .unwrap();
        page.await.unwrap();
        assert!(outcome.error.is_none(), "{:?}", outcome.error);
        assert_eq!(outcome.stdout, "late\n");
    }

    #[tokio::test]
    async fn stop_and_the_time_limit_ask_the_page_to_stop() {
        let tabs = BrowserTabs::new(quick());
        let session = session_id();
        let (link, mut rx) = tabs.link();
        tabs.attach(session, &link, "k").unwrap();
        let kernel = tabs.sandbox(session).open_session().await.unwrap();
        let cancel = CancellationToken::new();
        let page = tokio::spawn({
            let tabs = Arc::clone(&tabs);
            let cancel = cancel.clone();
            async move {
                let (run, _) = next_run(&mut rx).await;
                cancel.cancel();
                let stop = rx.recv().await;
                assert_eq!(stop, Some(ServerMessage::BrowserStop { run }));
                tabs.reply(
                    session,
                    link.conn(),
                    run,
                    Reply::Output(Output::Error {
                        name: "KeyboardInterrupt".into(),
                        value: String::new(),
                        traceback: Vec::new(),
                    }),
                )
                .await
                .unwrap();
                tabs.reply(
                    session,
                    link.conn(),
                    run,
                    Reply::Done { kernel: "k".into() },
                )
                .await
                .unwrap();
                // A page that never confirms: the run ends anyway.
                let (run, _) = next_run(&mut rx).await;
                let stop = rx.recv().await;
                assert_eq!(stop, Some(ServerMessage::BrowserStop { run }));
            }
        });
        let outcome = kernel
            .run(&python("while True: pass"), None, &cancel)
            .await
            .unwrap();
        assert_eq!(outcome.error.unwrap().name, limit_error::CANCELLED);
        let mut quick_wall = python("while True: pass");
        quick_wall.limits.wall = Duration::from_millis(200);
        let outcome = kernel
            .run(&quick_wall, None, &CancellationToken::new())
            .await
            .unwrap();
        page.await.unwrap();
        assert_eq!(outcome.error.unwrap().name, limit_error::TIMEOUT);
    }

    #[tokio::test]
    async fn output_past_the_limit_is_cut_and_stops_the_run() {
        let tabs = BrowserTabs::new(quick());
        let session = session_id();
        let (link, mut rx) = tabs.link();
        tabs.attach(session, &link, "k").unwrap();
        let kernel = tabs.sandbox(session).open_session().await.unwrap();
        let page = tokio::spawn({
            let tabs = Arc::clone(&tabs);
            async move {
                let (run, _) = next_run(&mut rx).await;
                for _ in 0..3 {
                    tabs.reply(
                        session,
                        link.conn(),
                        run,
                        Reply::Output(Output::Stdout {
                            text: "x".repeat(60),
                        }),
                    )
                    .await
                    .unwrap();
                }
                assert_eq!(rx.recv().await, Some(ServerMessage::BrowserStop { run }));
                tabs.reply(
                    session,
                    link.conn(),
                    run,
                    Reply::Done { kernel: "k".into() },
                )
                .await
                .unwrap();
            }
        });
        let mut request = python("while True: print('x' * 60)");
        request.limits.output_bytes = 100;
        let outcome = kernel
            .run(&request, None, &CancellationToken::new())
            .await
            .unwrap();
        page.await.unwrap();
        assert_eq!(outcome.stdout.len(), 100);
        assert!(outcome.truncated);
        assert_eq!(outcome.error.unwrap().name, limit_error::OUTPUT);
    }

    #[tokio::test]
    async fn a_restarted_page_python_is_a_new_kernel() {
        let tabs = BrowserTabs::new(quick());
        let session = session_id();
        let (link, mut rx) = tabs.link();
        tabs.attach(session, &link, "first").unwrap();
        let kernel = tabs.sandbox(session).open_session().await.unwrap();
        let page = tokio::spawn({
            let tabs = Arc::clone(&tabs);
            async move {
                let (run, _) = next_run(&mut rx).await;
                tabs.reply(
                    session,
                    link.conn(),
                    run,
                    Reply::Done {
                        kernel: "first".into(),
                    },
                )
                .await
                .unwrap();
                tabs.attach(session, &link, "second").unwrap();
            }
        });
        kernel
            .run(&python("x = 1"), None, &CancellationToken::new())
            .await
            .unwrap();
        page.await.unwrap();
        let err = kernel
            .run(&python("x"), None, &CancellationToken::new())
            .await
            .unwrap_err();
        assert!(matches!(err, SandboxError::NotFound(_)), "{err}");
        let err = kernel
            .run(
                &RunRequest {
                    language: Language::Bash,
                    ..python("ls")
                },
                None,
                &CancellationToken::new(),
            )
            .await
            .unwrap_err();
        assert!(matches!(err, SandboxError::InvalidInput(_)), "{err}");
    }

    #[test]
    fn the_runtime_is_found_in_the_site() {
        let site = tempfile::tempdir().unwrap();
        assert_eq!(find_runtime(site.path()), None);
        let dir = site.path().join("pyodide/314.0.7-abc");
        std::fs::create_dir_all(&dir).unwrap();
        assert_eq!(find_runtime(site.path()), None, "no loader, no runtime");
        std::fs::write(dir.join("pyodide.mjs"), "export {}").unwrap();
        assert_eq!(
            find_runtime(site.path()).as_deref(),
            Some("/pyodide/314.0.7-abc/")
        );
    }
}
