//! Supervision of a running jail: its output streamed through the run's
//! budget, and the wall-time limit, a cancel or too much output ending it.

use std::time::Duration;

use tokio::io::AsyncReadExt;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::{Limits, OutputBudget, OutputCollector, RunEvent, limit_error, now_ms};

/// How long the pipes may stay open after the jail's first process ended.
const DRAIN: Duration = Duration::from_secs(2);

/// What supervision saw.
pub(super) struct Supervised {
    pub stdout: String,
    pub stderr: String,
    pub status: Option<std::process::ExitStatus>,
    /// The limit (or cancel) that made the supervisor kill the jail.
    pub stopped_by: Option<&'static str>,
    /// What the output took of the run's budget; the error takes from it too.
    pub budget: OutputBudget,
}

pub(super) async fn supervise(
    child: &mut tokio::process::Child,
    limits: &Limits,
    events: Option<&mpsc::Sender<RunEvent>>,
    cancel: &CancellationToken,
) -> Supervised {
    let (Some(mut stdout), Some(mut stderr)) = (child.stdout.take(), child.stderr.take()) else {
        let _ = child.start_kill();
        return Supervised {
            stdout: String::new(),
            stderr: String::new(),
            status: None,
            stopped_by: None,
            budget: OutputBudget::new(limits.output_bytes),
        };
    };
    let mut out = OutputCollector::default();
    let mut err = OutputCollector::default();
    let mut budget = OutputBudget::new(limits.output_bytes);
    let (mut out_open, mut err_open) = (true, true);
    let mut status = None;
    let mut stopped_by = None;
    let mut obuf = vec![0u8; 16 * 1024];
    let mut ebuf = vec![0u8; 16 * 1024];
    let deadline = tokio::time::sleep(limits.wall);
    tokio::pin!(deadline);
    let drain = tokio::time::sleep(Duration::MAX);
    tokio::pin!(drain);

    while out_open || err_open || status.is_none() {
        let mut chunk: Option<(bool, usize)> = None;
        tokio::select! {
            read = stdout.read(&mut obuf), if out_open => match read {
                Ok(0) | Err(_) => out_open = false,
                Ok(n) => chunk = Some((true, n)),
            },
            read = stderr.read(&mut ebuf), if err_open => match read {
                Ok(0) | Err(_) => err_open = false,
                Ok(n) => chunk = Some((false, n)),
            },
            exited = child.wait(), if status.is_none() => {
                status = exited.ok();
                drain.as_mut().reset(tokio::time::Instant::now() + DRAIN);
            }
            () = &mut deadline, if stopped_by.is_none() && status.is_none() => {
                stopped_by = Some(limit_error::TIMEOUT);
                let _ = child.start_kill();
            }
            () = cancel.cancelled(), if stopped_by.is_none() && status.is_none() => {
                stopped_by = Some(limit_error::CANCELLED);
                let _ = child.start_kill();
            }
            () = &mut drain => break,
        }
        let Some((is_stdout, n)) = chunk else {
            continue;
        };
        let (collector, bytes) = if is_stdout {
            (&mut out, &obuf[..n])
        } else {
            (&mut err, &ebuf[..n])
        };
        let text = collector.push(bytes, &mut budget);
        if !text.is_empty()
            && let Some(events) = events
        {
            let ts_ms = now_ms();
            let event = if is_stdout {
                RunEvent::Stdout { text, ts_ms }
            } else {
                RunEvent::Stderr { text, ts_ms }
            };
            let _ = events.send(event).await;
        }
        if budget.overflowed() && stopped_by.is_none() {
            stopped_by = Some(limit_error::OUTPUT);
            let _ = child.start_kill();
        }
    }
    if status.is_none() {
        let _ = child.start_kill();
        status = child.wait().await.ok();
    }
    out.finish(&mut budget);
    err.finish(&mut budget);
    Supervised {
        stdout: out.into_text(),
        stderr: err.into_text(),
        status,
        stopped_by,
        budget,
    }
}
