//! A kernel in a page: one run at a time sent to the attached page, its
//! replies collected within the limits the server keeps.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use runcell_protocol::{Output, ServerMessage};
use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;

use super::{BrowserTabs, Reply, Tab};
use crate::{
    ExecError, Language, OutputBudget, RunEvent, RunOutcome, RunRequest, SandboxError,
    SandboxSession, limit_error, now_ms,
};
use runcell_protocol::SessionId;

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

impl BrowserSession {
    pub(super) fn new(tabs: Arc<BrowserTabs>, session: SessionId) -> Self {
        Self {
            id: format!("browser-{}", uuid::Uuid::new_v4()),
            tabs,
            session,
            kernel: Mutex::new(None),
            fresh: AtomicBool::new(true),
        }
    }
}

/// Why a run ended early, on the server's side.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Ending {
    Cancelled,
    Timeout,
    /// The page did not start the program (its Python and packages still
    /// loading) within the prepare wait and the wall time together.
    SlowStart(Duration),
    OutputLimit,
}

impl Ending {
    fn error(self, wall: Duration, budget: &OutputBudget) -> ExecError {
        match self {
            Self::Cancelled => ExecError::new(limit_error::CANCELLED, "stopped"),
            Self::Timeout => ExecError::new(
                limit_error::TIMEOUT,
                format!("the program ran longer than {} s", wall.as_secs()),
            ),
            Self::SlowStart(waited) => ExecError::new(
                limit_error::TIMEOUT,
                format!(
                    "the page's Python did not start the program within {} s \
                     (it was still starting, or loading the packages the program imports)",
                    waited.as_secs()
                ),
            ),
            Self::OutputLimit => budget.limit_error().unwrap_or_else(|| {
                ExecError::new(
                    limit_error::OUTPUT,
                    "the program printed more than the output limit; it was stopped",
                )
            }),
        }
    }
}

/// A run as it is collected: the page's outputs within the run's budget.
struct Collected {
    outcome: RunOutcome,
    budget: OutputBudget,
}

impl Collected {
    /// Takes one of the page's outputs within the output budget; false when
    /// the budget refused it (the run must stop).
    async fn take(&mut self, output: Output, events: Option<&mpsc::Sender<RunEvent>>) -> bool {
        let ts_ms = now_ms();
        let event = match output {
            Output::Stdout { text } => RunEvent::Stdout { text, ts_ms },
            Output::Stderr { text } => RunEvent::Stderr { text, ts_ms },
            // Files are the server's to offer, never a page's; tables are
            // read by the server from a result's data or HTML, images by
            // address are the server's pages' alone, and packages are what
            // the server's own index served (a page's Python has none).
            Output::File { .. }
            | Output::Table { .. }
            | Output::Image { .. }
            | Output::Package { .. } => return true,
            Output::Rich { data, .. } => RunEvent::Result {
                data: result_data(data),
                main: true,
                metadata: serde_json::Map::new(),
                display_id: None,
                ts_ms,
            },
            // Kept, and streamed when the run ends: a stop or a limit may
            // replace it.
            Output::Error {
                name,
                value,
                traceback,
            } => RunEvent::Error {
                error: ExecError {
                    name,
                    value,
                    traceback,
                },
                ts_ms,
            },
        };
        if let Some(event) = self.budget.record(&mut self.outcome, event) {
            send(events, event).await;
        }
        !self.budget.overflowed()
    }
}

/// A page's result as a kernel's: every value text, but a data frame's data
/// ([`crate::TABLE_DATA_MIME`]), which the page's Python sends as JSON text
/// and a kernel as JSON. Data that is not a JSON object is left out (the
/// frame is then read from its HTML); what the object holds is checked
/// where it is read, as any kernel's.
pub(super) fn result_data(
    data: std::collections::BTreeMap<String, String>,
) -> serde_json::Map<String, serde_json::Value> {
    data.into_iter()
        .filter_map(|(mime, text)| {
            if mime != crate::TABLE_DATA_MIME {
                return Some((mime, serde_json::Value::String(text)));
            }
            match serde_json::from_str::<serde_json::Value>(&text) {
                Ok(value @ serde_json::Value::Object(_)) => Some((mime, value)),
                _ => None,
            }
        })
        .collect()
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
        crate::validate_code(&request.code)?;
        if request.language != Language::Python {
            return Err(SandboxError::InvalidInput(format!(
                "the browser sandbox runs Python only, not {}",
                request.language.name()
            )));
        }
        let started = Instant::now();
        let wall = request.limits.wall;
        let mut collected = Collected {
            outcome: RunOutcome::default(),
            budget: OutputBudget::new(request.limits.output_bytes),
        };
        let mut attached = self.tabs.watch(self.session);
        let Some(tab) = self.page(&mut attached.runner, cancel).await? else {
            collected.outcome.error = Some(Ending::Cancelled.error(wall, &collected.budget));
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
        // Where the run's frames go: the page's connection, or the one it
        // comes back on.
        let Tab { mut link, kernel } = tab;
        let sent = link
            .tx
            .send(ServerMessage::BrowserRun {
                run,
                code: request.code.clone(),
                fresh,
                timeout_ms: runcell_core::clock::millis(wall),
                prepare_ms: runcell_core::clock::millis(self.tabs.settings.prepare_wait),
            })
            .await;
        if sent.is_err() {
            return Err(SandboxError::Unavailable(
                "the page that runs this session's Python went away".into(),
            ));
        }

        // The program's wall time counts from the page's `browser_started`;
        // until then the page's Python and the program's packages load, for
        // at most the prepare wait (and the wall time on top of it).
        let sent_at = tokio::time::Instant::now();
        let mut started_at: Option<tokio::time::Instant> = None;
        let mut deadline = sent_at + self.tabs.settings.prepare_wait + wall;
        // Set once the server has asked the page to stop.
        let mut ending: Option<(Ending, tokio::time::Instant)> = None;
        // A stop not yet handed to `link`: it waits for room on a busy
        // connection, and goes again on a connection the page comes back on.
        let mut stop_owed = false;
        // Set while no page is attached.
        let mut gone_since: Option<tokio::time::Instant> = None;
        // Why the page can no longer finish the run.
        let mut lost: Option<&str> = None;
        let stop_grace = self.tabs.settings.stop_grace;
        let stop = |ending: Ending| Some((ending, tokio::time::Instant::now() + stop_grace));
        loop {
            let gone_at = gone_since.map(|t| t + self.tabs.settings.gone_grace);
            let ending_at = ending.map(|(_, at)| at);
            tokio::select! {
                reply = replies.recv() => match reply {
                    Some(Reply::Started) => {
                        if started_at.is_none() {
                            let now = tokio::time::Instant::now();
                            started_at = Some(now);
                            deadline = deadline.min(now + wall);
                        }
                    }
                    Some(Reply::Output(output)) => {
                        if ending.is_some_and(|(e, _)| e == Ending::OutputLimit) {
                            continue;
                        }
                        if !collected.take(output, events).await {
                            ending = stop(Ending::OutputLimit);
                            stop_owed = true;
                        }
                    }
                    Some(Reply::Done { kernel: done_in }) => {
                        if done_in != kernel {
                            tracing::debug!("a browser run ended in another Python than it began in");
                        }
                        break;
                    }
                    None => break,
                },
                () = cancel.cancelled(), if ending.is_none() => {
                    ending = stop(Ending::Cancelled);
                    stop_owed = true;
                }
                () = tokio::time::sleep_until(deadline), if ending.is_none() => {
                    ending = stop(match started_at {
                        Some(_) => Ending::Timeout,
                        None => Ending::SlowStart(deadline - sent_at),
                    });
                    stop_owed = true;
                }
                permit = link.tx.clone().reserve_owned(), if stop_owed => {
                    stop_owed = false;
                    // A closed connection: the page is gone, and the stop
                    // goes again if it comes back.
                    if let Ok(permit) = permit {
                        permit.send(ServerMessage::BrowserStop { run });
                    }
                }
                () = sleep_until_some(ending_at) => break,
                () = sleep_until_some(gone_at) => {
                    lost = Some("the page running this session's Python went away before the program finished");
                    break;
                }
                changed = attached.runner.changed() => {
                    if changed.is_err() {
                        // The session's entry never goes while it is watched.
                        lost = Some("the session's pages are gone");
                        break;
                    }
                    let now = attached.runner.borrow_and_update().clone();
                    match now {
                        None => gone_since = gone_since.or(Some(tokio::time::Instant::now())),
                        Some(t) if t.kernel == kernel => {
                            gone_since = None;
                            if t.link.conn != link.conn {
                                // The same Python on a new connection: what
                                // the run sends from now on goes there, a
                                // stop already asked for too.
                                link = t.link;
                                stop_owed = ending.is_some();
                            }
                        }
                        Some(_) => {
                            lost = Some("the page's Python started afresh while the program ran");
                            break;
                        }
                    }
                }
            }
        }
        if lost.is_some() {
            // The page's frames are passed on in order, before it goes or
            // attaches another Python: those already here still count, and
            // a run they finish is not lost.
            while let Ok(reply) = replies.try_recv() {
                match reply {
                    Reply::Started => {}
                    Reply::Output(_) if ending.is_some_and(|(e, _)| e == Ending::OutputLimit) => {}
                    Reply::Output(output) => {
                        if !collected.take(output, events).await {
                            ending = ending.or(stop(Ending::OutputLimit));
                        }
                    }
                    Reply::Done { .. } => {
                        lost = None;
                        break;
                    }
                }
            }
        }
        match (ending, lost) {
            // The server's reason wins over whatever the page made of the
            // stop (a KeyboardInterrupt), or over a page that went away
            // while it stopped.
            (Some((ending, _)), _) => {
                collected.outcome.error = Some(ending.error(wall, &collected.budget));
            }
            // Not the program's doing: no change to it would help.
            (None, Some(lost)) => return Err(SandboxError::Unavailable(lost.into())),
            (None, None) => {}
        }
        collected.outcome.truncated = collected.budget.truncated();
        collected.outcome.duration_ms = runcell_core::clock::millis(started.elapsed());
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
