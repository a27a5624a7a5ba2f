//! A result cell: the program runs in the session's kernel and its output
//! streams into the cell as it is produced.

use std::collections::BTreeMap;
use std::time::Instant;

use runcell_protocol::{CellError, CellId, CellKind, CellStatus, EventBody, KernelCap, Output};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::kernels::{KernelRun, Kernels};
use super::prompt;
use crate::session::SessionLog;
use runcell_sandbox::packages::PackageNote;
use runcell_sandbox::sessions::SandboxSessionError;
use runcell_sandbox::{
    Language, Limits, RunEvent, RunOutcome, RunRequest, SandboxError, SandboxKind, limit_error,
};

/// How a run ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RunEnd {
    /// It ran to the end without an error.
    Ok,
    /// It raised an error or exited non-zero (a fix may help).
    Failed,
    /// It was stopped.
    Cancelled,
    /// The sandbox could not run the program at all (it is unavailable,
    /// its page went away): no change to the program can help.
    Unavailable,
    /// No kernel was free: every one a limit allows is held. The program
    /// did not run and no result cell shows it; the page says what to do.
    Refused,
}

/// What a run left for the next step.
pub struct Ran {
    /// The outputs as text for the model.
    pub report: String,
    pub end: RunEnd,
}

impl Ran {
    /// It ended in an error of the program's or of the sandbox's.
    pub fn failed(&self) -> bool {
        matches!(
            self.end,
            RunEnd::Failed | RunEnd::Unavailable | RunEnd::Refused
        )
    }
}

/// A program to run, and the code cell that shows it.
pub struct Program<'a> {
    pub code_cell: CellId,
    pub attempt: Option<u32>,
    pub language: Language,
    pub code: &'a str,
}

/// Runs the program and streams its outputs into a new result cell; when
/// no kernel is free for it, says so in a `kernel_refused` event instead,
/// and no result cell is made.
pub async fn run_into_cell(
    kernels: &Kernels,
    session: &SessionLog,
    program: Program<'_>,
    limits: &Limits,
    cancel: &CancellationToken,
) -> Ran {
    let Program {
        code_cell,
        attempt,
        language,
        code,
    } = program;
    let started = Instant::now();
    let ready = kernels.ready(session.id(), session.owner()).await;
    if let Err(error) = &ready
        && let Some((cap, held)) = refusal(error)
    {
        tracing::info!(%error, "no kernel free for the program");
        session.publish(EventBody::KernelRefused {
            cell_id: code_cell,
            cap,
            held,
        });
        return Ran {
            report: format!("(The program did not run: {error}.)\n"),
            end: RunEnd::Refused,
        };
    }
    let mut cell = ResultCell {
        session,
        cell_id: session.next_cell_id(),
        outputs: Vec::new(),
        clear_pending: false,
    };
    session.publish(EventBody::CellStarted {
        cell_id: cell.cell_id,
        cell_kind: CellKind::Result,
        language: None,
        attempt,
        source: Some(code_cell),
    });
    let request = RunRequest {
        code: code.to_string(),
        language,
        limits: limits.clone(),
        env: Vec::new(),
        cwd: None,
    };
    let started_ms = runcell_core::clock::now_ms();
    let result = match ready {
        Ok(()) => run_streaming(kernels, &request, cancel, &mut cell).await,
        Err(error) => Err(error),
    };
    // Images and tables the program wrote are offered from the cell.
    if result.is_ok() {
        for entry in kernels.written_since(session.id(), started_ms).await {
            cell.show(Output::File {
                path: entry.path,
                name: entry.name,
                size: entry.size,
            });
        }
    }
    let unavailable = result.as_ref().err().is_some_and(is_outage);
    let (status, error) = match result {
        Ok(run) => {
            if run.restarted {
                cell.show_first(Output::Stderr {
                    text: restart_note(run.moved_to, run.backend),
                });
            }
            cell_status(&run.outcome)
        }
        Err(e) => {
            tracing::warn!(error = %e, "the sandbox could not run the program");
            cell.show(Output::Error {
                name: "SandboxError".into(),
                value: e.to_string(),
                traceback: Vec::new(),
            });
            (
                CellStatus::Error,
                Some(CellError {
                    code: "sandbox_unavailable".into(),
                    message: e.to_string(),
                }),
            )
        }
    };
    let end = match status {
        _ if unavailable => RunEnd::Unavailable,
        CellStatus::Error => RunEnd::Failed,
        CellStatus::Cancelled => RunEnd::Cancelled,
        _ => RunEnd::Ok,
    };
    let mut report = prompt::report(&cell.outputs);
    if let Some(CellError { message, .. }) = error.as_ref().filter(|e| e.code == "exit_code") {
        report.push_str(&format!("({message})\n"));
    }
    session.publish(EventBody::CellFinished {
        cell_id: cell.cell_id,
        status,
        elapsed_ms: runcell_core::clock::millis(started.elapsed()),
        error,
    });
    Ran {
        report: prompt::cut(&report, prompt::MAX_REPORT_BYTES),
        end,
    }
}

/// The result cell being written: each output it shows is published and
/// kept for the model's report.
struct ResultCell<'a> {
    session: &'a SessionLog,
    cell_id: CellId,
    outputs: Vec<Output>,
    /// A `clear_output(wait=True)` clears the report at the next output.
    clear_pending: bool,
}

impl ResultCell<'_> {
    fn show(&mut self, output: Output) {
        self.publish(&output);
        if std::mem::take(&mut self.clear_pending) {
            self.outputs.clear();
        }
        self.outputs.push(output);
    }

    /// A run's event: an output shown, or what a clear or a display's
    /// update does to the cell (and to the report, as the page shows it).
    fn take(&mut self, event: RunEvent) {
        match event {
            RunEvent::Clear { wait, .. } => {
                self.session.publish(EventBody::CellCleared {
                    cell_id: self.cell_id,
                    wait,
                });
                if wait {
                    self.clear_pending = true;
                } else {
                    self.outputs.clear();
                    self.clear_pending = false;
                }
            }
            RunEvent::Update {
                display_id,
                data,
                metadata,
                ts_ms,
            } => {
                let shown = output_of(RunEvent::Result {
                    data,
                    main: false,
                    metadata,
                    display_id: None,
                    ts_ms,
                });
                if let Some(output) = shown {
                    runcell_protocol::notebook::update_display(
                        &mut self.outputs,
                        &display_id,
                        &output,
                    );
                    self.session
                        .publish(EventBody::DisplayUpdated { display_id, output });
                }
            }
            event => {
                if let Some(output) = output_of(event) {
                    self.show(output);
                }
            }
        }
    }

    /// Shows `output`, and puts it first in the report.
    fn show_first(&mut self, output: Output) {
        self.publish(&output);
        self.outputs.insert(0, output);
    }

    fn publish(&self, output: &Output) {
        self.session.publish(EventBody::CellOutput {
            cell_id: self.cell_id,
            output: output.clone(),
        });
    }
}

/// Runs `request` in the session's kernel, showing its output in `cell` as
/// it comes.
async fn run_streaming(
    kernels: &Kernels,
    request: &RunRequest,
    cancel: &CancellationToken,
    cell: &mut ResultCell<'_>,
) -> Result<KernelRun, SandboxSessionError> {
    let session = cell.session;
    let (tx, mut rx) = mpsc::channel::<RunEvent>(256);
    let mut publish = |event: RunEvent| cell.take(event);
    let result = {
        let run = kernels.run(session.id(), session.owner(), request, &tx, cancel);
        tokio::pin!(run);
        loop {
            tokio::select! {
                biased;
                Some(event) = rx.recv() => publish_queued(event, &mut rx, &mut publish),
                result = &mut run => break result,
            }
        }
    };
    drop(tx);
    if let Ok(event) = rx.try_recv() {
        publish_queued(event, &mut rx, &mut publish);
    }
    result
}

/// What a run in a kernel that was not the one before says first: where it
/// ran, and that earlier variables are not there.
fn restart_note(moved_to: Option<SandboxKind>, backend: SandboxKind) -> String {
    match (moved_to, backend) {
        (Some(backend), _) => format!(
            "(This code ran in a new kernel {}, as picked; variables from earlier turns stayed behind.)\n",
            match backend {
                SandboxKind::E2b => "on the E2B sandbox",
                SandboxKind::Browser => "in this page's Python (the Browser sandbox)",
                SandboxKind::Jail => "on the local sandbox",
            }
        ),
        (None, SandboxKind::Browser) => "(This page's Python started afresh (the page was reloaded, or a program that would not stop was ended), so variables from earlier turns are gone.)\n".into(),
        (None, _) => "(The session's kernel had stopped (it sat idle, or your other sessions needed the room); a new one ran this code, so variables from earlier turns are gone.)\n".into(),
    }
}

/// The status and error a run's `outcome` gives its cell: cancelled, an
/// error (its own, or a non-zero exit), or fine.
fn cell_status(outcome: &RunOutcome) -> (CellStatus, Option<CellError>) {
    match &outcome.error {
        Some(e) if e.name == limit_error::CANCELLED => (CellStatus::Cancelled, None),
        Some(e) => (
            CellStatus::Error,
            Some(CellError {
                code: e.name.clone(),
                message: format!("{}: {}", e.name, e.value),
            }),
        ),
        None if outcome.exit_code.is_some_and(|c| c != 0) => (
            CellStatus::Error,
            Some(CellError {
                code: "exit_code".into(),
                message: format!(
                    "the program exited with code {}",
                    outcome.exit_code.unwrap_or(-1)
                ),
            }),
        ),
        None => (CellStatus::Ok, None),
    }
}

/// Publishes `event` and whatever is queued behind it, text of one stream
/// that follows text of the same stream joined into one output: a program
/// that flushes a byte at a time makes as few `cell_output` events as the
/// page can take, not one per flush. Nothing waits to be joined.
fn publish_queued(
    event: RunEvent,
    rx: &mut mpsc::Receiver<RunEvent>,
    publish: &mut impl FnMut(RunEvent),
) {
    let mut event = event;
    while let Ok(next) = rx.try_recv() {
        if let Some(next) = join(&mut event, next) {
            publish(std::mem::replace(&mut event, next));
        }
    }
    publish(event);
}

/// Joins `next` onto `event` if both are text of the same stream; gives
/// `next` back if not.
fn join(event: &mut RunEvent, next: RunEvent) -> Option<RunEvent> {
    match (event, next) {
        (RunEvent::Stdout { text, .. }, RunEvent::Stdout { text: more, .. })
        | (RunEvent::Stderr { text, .. }, RunEvent::Stderr { text: more, .. }) => {
            text.push_str(&more);
            None
        }
        (_, next) => Some(next),
    }
}

/// The limit that refused a run for want of room, and how many kernels it
/// allows (all held); `None` for every other failure.
fn refusal(error: &SandboxSessionError) -> Option<(KernelCap, u32)> {
    let (cap, held) = match error {
        SandboxSessionError::OwnerFull(held) => (KernelCap::Owner, held),
        SandboxSessionError::TooMany(held) => (KernelCap::Server, held),
        SandboxSessionError::AnonymousFull(held) => (KernelCap::Anonymous, held),
        SandboxSessionError::ClientFull(held) => (KernelCap::Client, held),
        _ => return None,
    };
    Some((cap, u32::try_from(*held).unwrap_or(u32::MAX)))
}

/// Whether the sandbox itself failed, whatever the program: it is missing
/// or unreachable (no page attached, the page gone, E2B down), broke while
/// setting the run up, or has no room for another session. Refusals of the
/// program (a language the backend lacks...) are not outages.
fn is_outage(error: &SandboxSessionError) -> bool {
    matches!(
        error,
        SandboxSessionError::TooMany(_)
            | SandboxSessionError::AnonymousFull(_)
            | SandboxSessionError::ClientFull(_)
            | SandboxSessionError::OwnerFull(_)
            | SandboxSessionError::Sandbox(
                SandboxError::Unavailable(_) | SandboxError::Internal(_)
            )
    )
}

/// The page's form of a sandbox event; MIME values that are not text (JSON
/// objects) are left out, but for interactive charts' (kept as JSON text).
fn output_of(event: RunEvent) -> Option<Output> {
    Some(match event {
        RunEvent::Stdout { text, .. } => Output::Stdout { text },
        RunEvent::Stderr { text, .. } => Output::Stderr { text },
        RunEvent::Result {
            mut data,
            main,
            metadata,
            display_id,
            ..
        } => {
            // What runcell's package index served or refused (the kernel
            // cannot send one: the jail drops them from its displays).
            if let Some(note) = PackageNote::from_bundle(&data) {
                return Some(Output::Package {
                    project: note.project,
                    version: note.version,
                    size: note.size,
                    cached: note.cached,
                    refused: note.refused,
                });
            }
            let table_data = data
                .remove(runcell_sandbox::TABLE_DATA_MIME)
                .and_then(|value| super::tables::from_data(&value));
            let data: BTreeMap<String, String> = data
                .into_iter()
                .filter_map(|(mime, value)| match value {
                    serde_json::Value::String(s) => Some((mime, s)),
                    serde_json::Value::Object(_)
                        if runcell_protocol::chart_kind(&mime).is_some() =>
                    {
                        Some((mime, value.to_string()))
                    }
                    // Jupyter may split text values into a list of lines.
                    serde_json::Value::Array(lines) => Some((
                        mime,
                        lines.iter().filter_map(|l| l.as_str()).collect::<String>(),
                    )),
                    _ => None,
                })
                .collect();
            if data.is_empty() {
                return None;
            }
            // A data frame becomes a table of the page's own: from its data
            // when the kernel gave it (all of its rows, up to a bound), else
            // from a plain frame's HTML (the rows pandas printed). Its HTML
            // is then not needed (and not sent twice).
            let table = (!data.keys().any(|k| k.starts_with("image/")))
                .then(|| {
                    table_data.or_else(|| {
                        data.get("text/html")
                            .and_then(|html| super::tables::read(html))
                    })
                })
                .flatten();
            match table {
                Some(table) => Output::Table {
                    table,
                    text: data.get("text/plain").cloned().unwrap_or_default(),
                    main,
                },
                None => Output::Rich {
                    data,
                    main,
                    metadata: if metadata.is_empty() {
                        String::new()
                    } else {
                        serde_json::Value::Object(metadata).to_string()
                    },
                    display_id,
                },
            }
        }
        // The pager's help (`zip?`): its text, as the kernel printed it.
        RunEvent::Page { data, .. } => Output::Stdout {
            text: data.get("text/plain")?.as_str()?.to_string(),
        },
        // Not outputs: what they do to the cell is the notebook's.
        RunEvent::Clear { .. } | RunEvent::Update { .. } => return None,
        RunEvent::Error { error, .. } => Output::Error {
            name: error.name,
            value: error.value,
            traceback: error.traceback,
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bundle(text: &str) -> serde_json::Map<String, serde_json::Value> {
        [("text/plain".to_string(), serde_json::Value::from(text))]
            .into_iter()
            .collect()
    }

    fn rich(text: &str, display_id: Option<&str>) -> Output {
        Output::Rich {
            data: [("text/plain".to_string(), text.to_string())].into(),
            main: false,
            metadata: String::new(),
            display_id: display_id.map(str::to_string),
        }
    }

    /// A run's clear and display update reach the page as events of their
    /// own, and the model's report shows what the page shows.
    #[tokio::test]
    async fn a_clear_and_an_update_are_published_and_kept_as_shown() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let store = runcell_store::SqliteStore::open_in(dir.path())
            .await
            .expect("a store");
        let hub = crate::session::SessionHub::new(std::sync::Arc::new(store));
        let channel = hub
            .create(runcell_protocol::OwnerId::random())
            .await
            .expect("a session");
        let mut cell = ResultCell {
            session: channel.log(),
            cell_id: CellId(7),
            outputs: Vec::new(),
            clear_pending: false,
        };
        let shown = |text: &str, id: Option<&str>| RunEvent::Result {
            data: bundle(text),
            main: false,
            metadata: serde_json::Map::new(),
            display_id: id.map(str::to_string),
            ts_ms: 1,
        };
        for event in [
            out("a\n"),
            RunEvent::Clear {
                wait: false,
                ts_ms: 1,
            },
            shown("v1", Some("d")),
            out("b\n"),
            RunEvent::Update {
                display_id: "d".into(),
                data: bundle("v2"),
                metadata: serde_json::Map::new(),
                ts_ms: 1,
            },
            RunEvent::Clear {
                wait: true,
                ts_ms: 1,
            },
        ] {
            cell.take(event);
        }
        assert_eq!(
            cell.outputs,
            vec![rich("v2", Some("d")), Output::Stdout { text: "b\n".into() }]
        );
        cell.take(out("c\n"));
        assert_eq!(cell.outputs, vec![Output::Stdout { text: "c\n".into() }]);
        let published: Vec<EventBody> = channel
            .log()
            .events_after(0)
            .into_iter()
            .map(|e| e.event)
            .collect();
        let cell_id = CellId(7);
        assert_eq!(
            published,
            vec![
                EventBody::CellOutput {
                    cell_id,
                    output: Output::Stdout { text: "a\n".into() }
                },
                EventBody::CellCleared {
                    cell_id,
                    wait: false
                },
                EventBody::CellOutput {
                    cell_id,
                    output: rich("v1", Some("d"))
                },
                EventBody::CellOutput {
                    cell_id,
                    output: Output::Stdout { text: "b\n".into() }
                },
                EventBody::DisplayUpdated {
                    display_id: "d".into(),
                    output: rich("v2", None)
                },
                EventBody::CellCleared {
                    cell_id,
                    wait: true
                },
                EventBody::CellOutput {
                    cell_id,
                    output: Output::Stdout { text: "c\n".into() }
                },
            ]
        );
    }

    #[test]
    fn the_pagers_help_is_shown_as_its_text() {
        let page = RunEvent::Page {
            data: bundle("Init signature: zip(*iterables)"),
            ts_ms: 1,
        };
        assert_eq!(
            output_of(page),
            Some(Output::Stdout {
                text: "Init signature: zip(*iterables)".into()
            })
        );
        let no_text = RunEvent::Page {
            data: serde_json::Map::new(),
            ts_ms: 1,
        };
        assert_eq!(output_of(no_text), None);
    }

    fn out(text: &str) -> RunEvent {
        RunEvent::Stdout {
            text: text.into(),
            ts_ms: 1,
        }
    }

    fn err(text: &str) -> RunEvent {
        RunEvent::Stderr {
            text: text.into(),
            ts_ms: 1,
        }
    }

    #[test]
    fn a_charts_json_is_kept_as_text_and_other_json_is_left_out() {
        let mut data = serde_json::Map::new();
        data.insert(
            "application/vnd.plotly.v1+json".into(),
            serde_json::json!({"data": [{"y": [1, 3]}]}),
        );
        data.insert(
            "application/vnd.other+json".into(),
            serde_json::json!({"x": 1}),
        );
        data.insert("text/plain".into(), "Figure".into());
        let Some(Output::Rich { data, .. }) = output_of(RunEvent::Result {
            data,
            main: false,
            metadata: serde_json::Map::new(),
            display_id: None,
            ts_ms: 1,
        }) else {
            panic!("a rich output")
        };
        assert_eq!(
            data.get("application/vnd.plotly.v1+json")
                .map(String::as_str),
            Some(r#"{"data":[{"y":[1,3]}]}"#)
        );
        assert!(!data.contains_key("application/vnd.other+json"));
        assert_eq!(data.get("text/plain").map(String::as_str), Some("Figure"));
    }

    /// Queued events → what is published.
    #[test]
    fn queued_text_of_one_stream_is_joined() {
        let cases: [(Vec<RunEvent>, Vec<RunEvent>); 3] = [
            (vec![out("a"), out("b"), out("c")], vec![out("abc")]),
            (
                vec![out("a"), err("b"), err("c"), out("d")],
                vec![out("a"), err("bc"), out("d")],
            ),
            (vec![err("x")], vec![err("x")]),
        ];
        for (queued, expect) in cases {
            let (tx, mut rx) = mpsc::channel(16);
            let mut queued = queued.into_iter();
            let first = queued.next().unwrap();
            for event in queued {
                tx.try_send(event).unwrap();
            }
            let mut published = Vec::new();
            publish_queued(first, &mut rx, &mut |e| published.push(e));
            assert_eq!(published, expect);
        }
    }
}
