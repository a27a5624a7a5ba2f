//! A scripted tab: a test double of the page that runs a session's Python,
//! with a real Python behind it, so that the Browser sandbox can be checked
//! like any backend (the conformance suite, hostile programs) without a
//! browser.
//!
//! The tab is one connection of a notebook session's, attached as its
//! runner. Its page and Pyodide worker are played by a `python3` child
//! running `scripted_tab.py`, which speaks the page's socket frames, one
//! JSON object a line: what the server sends the page goes to its stdin,
//! and what it writes on stdout is read as `http::ws` reads a page's
//! frames: at most [`MAX_FRAME_BYTES`] of UTF-8 each (a longer one, or
//! bytes that are not UTF-8, close the connection, as they close the
//! socket), parsed as a [`ClientMessage`], and handed to
//! [`BrowserTabs::attach`] or [`BrowserTabs::reply`] as the socket hands
//! them, a refusal going back as an error frame. Nothing is believed
//! because it comes from a test: the server's bounds are the ones a page
//! meets.
//!
//! Like a page, the tab starts another Python (a new kernel, attached
//! again) when its Python ends: after a program that would not stop, or a
//! crash, answering first every run the old one left unanswered.
//!
//! The child runs the tests' own programs on the host, with the test's
//! rights (in a temporary directory, with an empty environment): test
//! code, compiled only into tests and the `conformance` feature, never into
//! runcell.

use std::collections::HashSet;
use std::io;
use std::path::Path;
use std::process::Stdio;
use std::sync::Arc;

use runcell_protocol::{ClientMessage, ErrorCode, Output, ServerMessage};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::{BrowserError, BrowserTabs, Reply, TabLink};
use runcell_protocol::MAX_FRAME_BYTES;
use runcell_protocol::SessionId;

/// The page and worker every scripted tab's Python runs.
const DRIVER: &str = include_str!("scripted_tab.py");

/// A tab starts at most this many Pythons; then it closes.
const MAX_PYTHONS: u32 = 16;

/// The Python the driver runs on: Debian's, which `scripts/setup.sh`
/// installs, or the first `python3` on the `PATH`.
fn python_program() -> &'static str {
    if Path::new("/usr/bin/python3").is_file() {
        "/usr/bin/python3"
    } else {
        "python3"
    }
}

/// A page of a notebook session, attached as its runner, whose Python is a
/// real one. Closing it (or dropping it) closes its connection and ends its
/// Python.
pub struct ScriptedTab {
    closed: CancellationToken,
    task: Option<JoinHandle<()>>,
}

impl std::fmt::Debug for ScriptedTab {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ScriptedTab").finish_non_exhaustive()
    }
}

impl ScriptedTab {
    /// Opens a connection of `session`'s, starts its Python and attaches
    /// it as the session's runner (a standby if another page runs it).
    /// Called within a Tokio runtime, which serves the tab until it closes.
    pub fn open(tabs: &Arc<BrowserTabs>, session: SessionId) -> io::Result<Self> {
        let (link, frames) = tabs.link();
        let python = Python::start(link.conn(), 1)?;
        tabs.attach(session, &link, &python.kernel)
            .map_err(io::Error::other)?;
        let page = Page {
            tabs: Arc::clone(tabs),
            session,
            link,
            python,
            unanswered: HashSet::new(),
            pythons: 1,
        };
        let closed = CancellationToken::new();
        let task = tokio::spawn(page.serve(frames, closed.clone()));
        Ok(Self {
            closed,
            task: Some(task),
        })
    }

    /// Closes the tab and waits until its connection is gone.
    pub async fn close(mut self) {
        self.closed.cancel();
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
    }
}

impl Drop for ScriptedTab {
    fn drop(&mut self) {
        self.closed.cancel();
    }
}

/// What the Python wrote, a line at a time.
enum Written {
    Line(Vec<u8>),
    /// A line longer than a socket frame may be.
    TooLong,
    /// Its stdout closed: the Python ended.
    Ended,
}

/// One Python: the driver in a child process, in a directory of its own.
struct Python {
    kernel: String,
    stdin: ChildStdin,
    written: mpsc::Receiver<Written>,
    /// Killed when the Python is dropped.
    _child: Child,
    _home: tempfile::TempDir,
}

impl Python {
    fn start(conn: u64, nth: u32) -> io::Result<Self> {
        let home = tempfile::Builder::new()
            .prefix("runcell-scripted-tab-")
            .tempdir()?;
        let kernel = format!("scripted-{conn}-{nth}");
        let mut child = Command::new(python_program())
            .arg("-I")
            .arg("-c")
            .arg(DRIVER)
            .arg(&kernel)
            .current_dir(home.path())
            .env_clear()
            .env("PATH", "/usr/local/bin:/usr/bin:/bin")
            .env("HOME", home.path())
            .env("LANG", "C.UTF-8")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()?;
        let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
            return Err(io::Error::other("the scripted tab's Python has no pipes"));
        };
        let (lines, written) = mpsc::channel(16);
        tokio::spawn(read_lines(stdout, lines));
        Ok(Self {
            kernel,
            stdin,
            written,
            _child: child,
            _home: home,
        })
    }
}

/// Reads `stdout` a line at a time, each within a socket frame's bound,
/// until it ends or a line is too long.
async fn read_lines(stdout: ChildStdout, lines: mpsc::Sender<Written>) {
    let mut reader = BufReader::new(stdout);
    loop {
        let mut line = Vec::new();
        let limit = u64::try_from(MAX_FRAME_BYTES).unwrap_or(u64::MAX) + 1;
        let read = (&mut reader).take(limit).read_until(b'\n', &mut line).await;
        let written = match read {
            Ok(0) | Err(_) => Written::Ended,
            Ok(_) if line.ends_with(b"\n") => {
                line.pop();
                Written::Line(line)
            }
            Ok(_) if line.len() > MAX_FRAME_BYTES => Written::TooLong,
            // The last line, without its newline.
            Ok(_) => Written::Line(line),
        };
        let last = !matches!(written, Written::Line(_));
        if lines.send(written).await.is_err() || last {
            return;
        }
    }
}

/// The tab's side of its connection.
struct Page {
    tabs: Arc<BrowserTabs>,
    session: SessionId,
    link: TabLink,
    python: Python,
    /// Runs sent to the Python that it has not said are done.
    unanswered: HashSet<u64>,
    /// How many Pythons the tab started.
    pythons: u32,
}

impl Page {
    async fn serve(mut self, mut frames: mpsc::Receiver<ServerMessage>, closed: CancellationToken) {
        loop {
            tokio::select! {
                () = closed.cancelled() => break,
                frame = frames.recv() => match frame {
                    Some(frame) => self.send_python(&frame).await,
                    None => break,
                },
                written = self.python.written.recv() => match written {
                    Some(Written::Line(line)) => {
                        if !self.read_python(&line).await {
                            break;
                        }
                    }
                    Some(Written::TooLong) => {
                        tracing::debug!("the scripted tab's Python wrote a frame over the bound: its connection closes");
                        break;
                    }
                    Some(Written::Ended) | None => {
                        if let Err(e) = self.restart().await {
                            tracing::warn!(%e, "the scripted tab cannot start another Python: it closes");
                            break;
                        }
                    }
                },
            }
        }
        self.tabs.detach(self.session, self.link.conn());
    }

    /// Sends a frame for the page to its Python.
    async fn send_python(&mut self, frame: &ServerMessage) {
        if let ServerMessage::BrowserRun { run, .. } = frame {
            self.unanswered.insert(*run);
        }
        let Ok(mut line) = serde_json::to_vec(frame) else {
            return;
        };
        line.push(b'\n');
        // A Python that ended: its end is read next.
        let _ = self.python.stdin.write_all(&line).await;
    }

    /// Reads a frame from the page as the socket reads it; false when the
    /// socket would close.
    async fn read_python(&mut self, line: &[u8]) -> bool {
        let Ok(text) = std::str::from_utf8(line) else {
            tracing::debug!(
                "the scripted tab's Python wrote bytes that are not UTF-8: its connection closes"
            );
            return false;
        };
        let refusal = match serde_json::from_str::<ClientMessage>(text) {
            Err(e) => Some(format!("unreadable frame: {e}")),
            Ok(ClientMessage::BrowserAttach { kernel }) => self
                .tabs
                .attach(self.session, &self.link, &kernel)
                .err()
                .map(|e| e.to_string()),
            Ok(ClientMessage::BrowserStarted { run }) => self.reply(run, Reply::Started).await,
            Ok(ClientMessage::BrowserOutput { run, output }) => {
                self.reply(run, Reply::Output(output)).await
            }
            Ok(ClientMessage::BrowserDone { run, kernel }) => {
                self.unanswered.remove(&run);
                self.reply(run, Reply::Done { kernel }).await
            }
            Ok(_) => Some("a scripted tab starts no turns".to_string()),
        };
        if let Some(message) = refusal {
            let error = ServerMessage::Error {
                code: ErrorCode::BadFrame,
                message,
            };
            self.send_python(&error).await;
        }
        true
    }

    async fn reply(&self, run: u64, reply: Reply) -> Option<String> {
        match self
            .tabs
            .reply(self.session, self.link.conn(), run, reply)
            .await
        {
            Ok(()) => None,
            // A frame for a run that is over: dropped quietly, as the
            // socket drops it.
            Err(BrowserError::UnknownRun(_)) => None,
            Err(e) => Some(e.to_string()),
        }
    }

    /// The Python ended: the runs it left are answered, as a page answers
    /// those of a worker it lost, and another Python attaches.
    async fn restart(&mut self) -> io::Result<()> {
        let old = self.python.kernel.clone();
        let mut left: Vec<u64> = self.unanswered.drain().collect();
        left.sort_unstable();
        for run in left {
            let ended = Output::Error {
                name: "BrowserError".into(),
                value: "this page's Python ended before the program finished".into(),
                traceback: Vec::new(),
            };
            self.reply(run, Reply::Output(ended)).await;
            self.reply(
                run,
                Reply::Done {
                    kernel: old.clone(),
                },
            )
            .await;
        }
        if self.pythons >= MAX_PYTHONS {
            return Err(io::Error::other(format!(
                "{MAX_PYTHONS} Pythons ended in this tab"
            )));
        }
        self.pythons += 1;
        self.python = Python::start(self.link.conn(), self.pythons)?;
        self.tabs
            .attach(self.session, &self.link, &self.python.kernel)
            .map_err(io::Error::other)
    }
}
