//! How a run ended: a limit, a cancel, a failed compile, or the program's
//! own error (named from a Python traceback where there is one).

use std::time::Instant;

use super::RunGroup;
use super::supervise::Supervised;
use crate::{ExecError, Language, Limits, OutputBudget, RunOutcome, limit_error};

/// The outcome of a supervised run.
pub(super) fn classify(
    run: Supervised,
    group: &RunGroup,
    limits: &Limits,
    language: Language,
    marker: &str,
    started: Instant,
) -> RunOutcome {
    let exit_code = run.status.and_then(|s| s.code());
    let mut budget = run.budget;
    let mut stderr = run.stderr;
    let failed = exit_code != Some(0);
    let error = match stop_error(run.stopped_by, limits, &budget) {
        Some(error) => Some(error),
        _ if group.oom_killed() => Some(ExecError::new(
            limit_error::MEMORY,
            format!(
                "the run used more than {} MiB of memory",
                limits.memory_bytes / (1024 * 1024)
            ),
        )),
        _ if failed && group.pids_exhausted() => Some(ExecError::new(
            limit_error::PROCESSES,
            format!("the run tried to have more than {} processes", limits.pids),
        )),
        _ if language == Language::C && stderr.contains(marker) => {
            stderr = stderr
                .replace(&format!("\n{marker}\n"), "")
                .replace(marker, "");
            Some(ExecError {
                name: limit_error::COMPILE.into(),
                value: "the C program did not compile".into(),
                traceback: stderr.lines().map(str::to_string).collect(),
            })
        }
        _ if failed
            && (exit_code == Some(128 + libc::SIGXFSZ)
                || stderr.contains("No space left on device")
                || stderr.contains("File too large")) =>
        {
            Some(ExecError::new(
                limit_error::DISK,
                format!(
                    "the run wrote more than allowed ({} MiB a file, {} MiB in all)",
                    limits.file_bytes / (1024 * 1024),
                    limits.disk_bytes / (1024 * 1024)
                ),
            ))
        }
        _ if failed => Some(program_error(language, exit_code, &stderr)),
        _ => None,
    };
    // A traceback read from stderr repeats it: it draws from what the
    // output left, so the outcome holds no more than the budget allows.
    let error = error.map(|e| budget.take_error(e));
    RunOutcome {
        stdout: run.stdout,
        stderr,
        results: Vec::new(),
        error,
        exit_code,
        duration_ms: runcell_core::clock::millis(started.elapsed()),
        truncated: budget.truncated(),
    }
}

/// The error for a run the supervisor stopped (a limit, or a cancel); for
/// the output limit, the run's budget says what it refused.
pub(crate) fn stop_error(
    stopped_by: Option<&'static str>,
    limits: &Limits,
    budget: &OutputBudget,
) -> Option<ExecError> {
    let value = match stopped_by? {
        limit_error::TIMEOUT => {
            format!("the run was stopped after {} s", limits.wall.as_secs_f64())
        }
        limit_error::OUTPUT => return budget.limit_error(),
        limit_error::CANCELLED => "the run was cancelled".to_string(),
        other => format!("the run was stopped: {other}"),
    };
    Some(ExecError::new(stopped_by?, value))
}

/// The program's own failure, named as its language names it where possible.
fn program_error(language: Language, exit_code: Option<i32>, stderr: &str) -> ExecError {
    if language == Language::Python
        && let Some(error) = python_error(stderr)
    {
        return error;
    }
    match exit_code {
        Some(code) if code > 128 && code < 128 + 65 => ExecError::new(
            "Signal",
            format!("the program was killed by signal {}", code - 128),
        ),
        Some(code) => ExecError::new("ExitCode", format!("the program exited with status {code}")),
        None => ExecError::new("Signal", "the program was killed"),
    }
}

/// `NameError: name 'x' is not defined` from a Python traceback.
fn python_error(stderr: &str) -> Option<ExecError> {
    let start = stderr.rfind("Traceback (most recent call last):")?;
    let traceback: Vec<String> = stderr[start..].lines().map(str::to_string).collect();
    let last = traceback
        .iter()
        .rev()
        .find(|l| !l.trim().is_empty())?
        .clone();
    let (name, value) = match last.split_once(": ") {
        Some((name, value)) => (name.trim(), value.trim()),
        None => (last.trim(), ""),
    };
    let plausible = !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '.');
    plausible.then(|| ExecError {
        name: name.rsplit('.').next().unwrap_or(name).to_string(),
        value: value.to_string(),
        traceback,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn python_errors_are_named_from_the_traceback() {
        let stderr = "Traceback (most recent call last):\n  File \"main.py\", line 1, in <module>\n    x\nNameError: name 'x' is not defined\n";
        let error = python_error(stderr).unwrap();
        assert_eq!(error.name, "NameError");
        assert_eq!(error.value, "name 'x' is not defined");
        assert_eq!(error.traceback.len(), 4);
        let error =
            python_error("Traceback (most recent call last):\nKeyboardInterrupt\n").unwrap();
        assert_eq!(error.name, "KeyboardInterrupt");
        let error = python_error(
            "Traceback (most recent call last):\nnumpy.linalg.LinAlgError: Singular matrix\n",
        )
        .unwrap();
        assert_eq!(error.name, "LinAlgError");
        assert!(python_error("just some text\n").is_none());
    }
}
