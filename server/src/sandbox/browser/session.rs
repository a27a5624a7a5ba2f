//! A kernel in a page: one run at a time sent to the attached page, its
//! replies collected within the limits the server keeps.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use app::protocol::{Output, ServerMessage};
use parking_lot::Mutex;
use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;

use super::{BrowserTabs, Reply, Tab};
use crate::sandbox::{
    ExecError, Language, RunEvent, RunOutcome, RunRequest, SandboxError, SandboxSession, fit,
    limit_error, now_ms,
};
use crate::session::SessionId;

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
            // Files are the server's to offer, never a page's.
            Output::File { .. } => return true,
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
        crate::sandbox::validate_code(&request.code)?;
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
