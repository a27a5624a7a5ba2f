//! envd's `Process.Start` as a lifecycle apart from HTTP: a command of a
//! served sandbox runs as a task whose steps (started, output, keep-alive
//! pings, its end, or why it could not run) arrive on a channel. The task
//! stops the command when the reader goes away; the HTTP side only turns
//! steps into Connect envelopes.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use base64::Engine;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::{Command, Served, ServedError, ServedSandbox};
use crate::e2b::protocol::{ProcessEnd, ProcessEvent, StartRequest};
use runcell_sandbox::packages::PackageNote;
use runcell_sandbox::{RunEvent, RunOutcome};

/// Process ids handed out by `Start` (the jail's own pids are not visible).
static NEXT_PID: AtomicU32 = AtomicU32::new(1000);

/// How often a silent command is reported alive when the client names no
/// interval.
pub const DEFAULT_KEEPALIVE: Duration = Duration::from_secs(90);

/// One step of a started process, in order: `Event(Start)`, any number of
/// output and keep-alive events, then `Event(End)` or `Failed`.
#[derive(Debug)]
pub enum ProcessStep {
    Event(ProcessEvent),
    /// The command could not be run at all (unknown sandbox, over a limit…).
    Failed(ServedError),
}

/// How a client asked a process to run.
#[derive(Clone, Copy, Debug)]
pub struct ProcessOptions {
    /// Its time limit (at most the server's).
    pub wall: Option<Duration>,
    /// How often to ping while nothing is printed; at least a second.
    pub keepalive: Duration,
}

/// The script a `Start` request runs: `bash -l -c SCRIPT` as the SDK sends
/// it, or the command and its arguments quoted.
pub fn script(request: &StartRequest) -> String {
    let process = &request.process;
    let is_bash = matches!(
        process.cmd.as_str(),
        "/bin/bash" | "bash" | "/bin/sh" | "sh"
    );
    if is_bash
        && let Some(i) = process.args.iter().position(|a| a == "-c")
        && let Some(script) = process.args.get(i + 1)
    {
        return script.clone();
    }
    std::iter::once(&process.cmd)
        .chain(&process.args)
        .map(|word| runcell_sandbox::jail::shell_quote(word))
        .collect::<Vec<_>>()
        .join(" ")
}

fn data(stream: &str, text: &str) -> ProcessEvent {
    let encoded = base64::engine::general_purpose::STANDARD.encode(text.as_bytes());
    ProcessEvent::Data([(stream.to_string(), encoded)].into())
}

fn output(event: RunEvent) -> Option<ProcessEvent> {
    match event {
        RunEvent::Stdout { text, .. } => Some(data("stdout", &text)),
        RunEvent::Stderr { text, .. } => Some(data("stderr", &text)),
        // What runcell's package index served or refused, a line of the
        // command's error stream (pip's own output says little of a
        // refusal).
        RunEvent::Result { data: bundle, .. } => PackageNote::from_bundle(&bundle)
            .map(|note| data("stderr", &format!("{}\n", note.text()))),
        RunEvent::Clear { .. }
        | RunEvent::Update { .. }
        | RunEvent::Page { .. }
        | RunEvent::Error { .. } => None,
    }
}

/// A finished run as envd reports it: a limit that stopped the command is
/// a kill with the limit's error, not an exit status.
fn end_of(outcome: &RunOutcome) -> ProcessEnd {
    let limit = outcome
        .error
        .as_ref()
        .filter(|_| outcome.exit_code.is_none())
        .map(|e| format!("{}: {}", e.name, e.value));
    let exit_code = outcome.exit_code.unwrap_or(-1);
    ProcessEnd {
        exit_code,
        exited: outcome.exit_code.is_some(),
        status: match &limit {
            Some(_) => "signal: killed".into(),
            None => format!("exit status {exit_code}"),
        },
        error: limit,
    }
}

impl Served {
    /// Starts `request` in `sandbox` as a task of its own; its steps arrive
    /// on the returned channel. Dropping the receiver stops the command.
    pub fn start_process(
        self: &Arc<Self>,
        sandbox: Arc<ServedSandbox>,
        request: &StartRequest,
        options: ProcessOptions,
    ) -> mpsc::Receiver<ProcessStep> {
        let (steps, receiver) = mpsc::channel::<ProcessStep>(64);
        let command = Command {
            script: script(request),
            env: request.process.envs.clone(),
            cwd: request.process.cwd.clone(),
            wall: options.wall,
        };
        let keepalive = options.keepalive.max(Duration::from_secs(1));
        let served = Arc::clone(self);
        let pid = NEXT_PID.fetch_add(1, Ordering::Relaxed);
        tokio::spawn(async move {
            let send = |event: ProcessEvent| {
                let steps = steps.clone();
                async move { steps.send(ProcessStep::Event(event)).await.is_ok() }
            };
            send(ProcessEvent::Start { pid }).await;
            let cancel = CancellationToken::new();
            let (events, mut received) = mpsc::channel(256);
            let run = served.run_command(&sandbox, command, events, cancel.clone());
            tokio::pin!(run);
            let outcome = loop {
                tokio::select! {
                    outcome = &mut run => break outcome,
                    Some(event) = received.recv() => {
                        if let Some(event) = output(event) && !send(event).await {
                            cancel.cancel();
                        }
                    }
                    () = steps.closed(), if !cancel.is_cancelled() => cancel.cancel(),
                    () = tokio::time::sleep(keepalive) => {
                        if !send(ProcessEvent::Keepalive {}).await {
                            cancel.cancel();
                        }
                    }
                }
            };
            while let Ok(event) = received.try_recv() {
                if let Some(event) = output(event) {
                    send(event).await;
                }
            }
            let last = match outcome {
                Ok(outcome) => ProcessStep::Event(ProcessEvent::End(end_of(&outcome))),
                Err(e) => ProcessStep::Failed(e),
            };
            let _ = steps.send(last).await;
        });
        receiver
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::e2b::protocol::ProcessConfig;
    use runcell_sandbox::ExecError;

    fn start(cmd: &str, args: &[&str]) -> StartRequest {
        StartRequest {
            process: ProcessConfig {
                cmd: cmd.into(),
                args: args.iter().map(|a| (*a).to_string()).collect(),
                ..ProcessConfig::default()
            },
            stdin: false,
        }
    }

    #[test]
    fn commands_become_scripts() {
        assert_eq!(
            script(&start("/bin/bash", &["-l", "-c", "echo out; echo err >&2"])),
            "echo out; echo err >&2"
        );
        assert_eq!(
            script(&start("/usr/bin/ls", &["-la", "it's here"])),
            "'/usr/bin/ls' '-la' 'it'\\''s here'"
        );
    }

    #[test]
    fn an_exit_and_a_limit_end_differently() {
        let exited = RunOutcome {
            exit_code: Some(3),
            ..RunOutcome::default()
        };
        let end = end_of(&exited);
        assert_eq!((end.exit_code, end.exited), (3, true));
        assert_eq!(end.status, "exit status 3");
        assert_eq!(end.error, None);

        let killed = RunOutcome {
            exit_code: None,
            error: Some(ExecError::new("TimeoutError", "over 1 s")),
            ..RunOutcome::default()
        };
        let end = end_of(&killed);
        assert_eq!((end.exit_code, end.exited), (-1, false));
        assert_eq!(end.status, "signal: killed");
        assert_eq!(end.error.as_deref(), Some("TimeoutError: over 1 s"));
    }
}
