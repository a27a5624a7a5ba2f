//! `runcell bench agent`: how often the agent's answers are right, through
//! a running runcell's own API, the way a person's questions go. Each task
//! opens a fresh session, uploads the files it is about, asks its questions
//! in order (follow-ups in the same session), reads the turn's events as
//! they stream, and checks:
//!
//! - right: the final program ran, and the known answer appears in what it
//!   printed
//!   (a number as a figure of the output; a name on the answer line; an
//!   image shown), never only in the explanation;
//! - ran: the final program ran without an error;
//! - invented: the explanation that stands names a figure that neither the
//!   output nor the question shows (and how many were withdrawn for that
//!   before it, and how many turns fell back to quoting the output);
//! - the turn's time, and the time to the first token of code.
//!
//! The server is whatever `--url` names, so the same tasks measure the
//! embedded model, another embedded model, or an OpenAI-compatible server.

mod client;
mod judge;
mod report;
pub mod tasks;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use serde::Serialize;

pub use self::client::AgentClient;
pub use self::judge::{LastTurn, is_right, judge};
use self::report::print_task;
pub use self::report::{Report, median};
use self::tasks::Task;
use crate::{BenchError, fail};

pub struct AgentBenchOptions {
    /// The runcell to ask, e.g. `http://127.0.0.1:3000`.
    pub url: String,
    /// The model to ask for; `None`: the server's default.
    pub model: Option<String>,
    /// Only the tasks whose id contains one of these.
    pub only: Vec<String>,
    /// Where to write every turn's details as JSON.
    pub out: Option<PathBuf>,
    /// The longest one turn may take before it is stopped.
    pub turn_timeout: Duration,
}

/// What one turn gave.
#[derive(Clone, Debug, Default, Serialize)]
pub struct TurnResult {
    pub question: String,
    pub right: bool,
    pub ran: bool,
    /// Figures of the standing explanation found in neither the output nor
    /// the question.
    pub invented: Vec<String>,
    /// Explanations withdrawn for invented figures before one stood.
    pub withdrawn: usize,
    /// The standing explanation is the server's, not the model's: both of
    /// the model's were withdrawn (or it is the plain statement quoting the
    /// output).
    pub fallback: bool,
    /// Of a fallback: the second explanation's grounded sentences stood.
    pub pruned: bool,
    /// Programs written (1 + fixes).
    pub attempts: usize,
    /// The programs before the final one (in `--out` only).
    pub earlier_attempts: Vec<String>,
    pub seconds: f64,
    /// From the question to the first token of code.
    pub first_code_seconds: Option<f64>,
    pub code: String,
    pub output: String,
    pub explanation: String,
    /// The explanations withdrawn before it, as written.
    pub withdrawn_texts: Vec<String>,
    pub problem: Option<String>,
}

#[derive(Clone, Debug, Serialize)]
pub struct TaskResult {
    pub id: String,
    pub category: String,
    pub turns: Vec<TurnResult>,
    /// The agent's heuristics that fired in the task's turns, with how
    /// often (read from the server's `/metrics`).
    pub heuristics: BTreeMap<String, u64>,
}

impl TaskResult {
    pub fn right(&self) -> bool {
        !self.turns.is_empty() && self.turns.iter().all(|t| t.right)
    }
    pub fn ran(&self) -> bool {
        !self.turns.is_empty() && self.turns.iter().all(|t| t.ran)
    }
    pub fn invented(&self) -> bool {
        self.turns.iter().any(|t| !t.invented.is_empty())
    }
}

/// Runs every task against `options.url` and prints the report.
pub async fn run(options: AgentBenchOptions) -> Result<(), BenchError> {
    let http = reqwest::Client::builder()
        .timeout(options.turn_timeout + Duration::from_secs(30))
        .build()
        .map_err(fail)?;
    let base = options.url.trim_end_matches('/').to_string();
    let (backend, model) = server_model(&http, &base, options.model.as_deref()).await?;
    let tasks: Vec<Task> = tasks::all()
        .map_err(fail)?
        .into_iter()
        .filter(|t| {
            options.only.is_empty() || options.only.iter().any(|o| t.id.contains(o.as_str()))
        })
        .collect();
    println!(
        "agent bench: {} tasks against {base} ({backend}, model {model})",
        tasks.len()
    );
    let started = Instant::now();
    let tokens_before = super::tokens::read(&http, &base).await;
    let mut results = Vec::new();
    for task in &tasks {
        let before = super::heuristics::read(&http, &base).await;
        let mut result = run_task(
            &http,
            &base,
            task,
            options.model.as_deref(),
            options.turn_timeout,
        )
        .await;
        if let (Some(before), Some(after)) = (before, super::heuristics::read(&http, &base).await) {
            result.heuristics = super::heuristics::fired(&before, &after);
        }
        print_task(&result);
        results.push(result);
    }
    let report = Report::of(&results);
    println!();
    println!("{}", Report::header());
    println!("{}", report.row(&format!("{backend} · {model}")));
    println!(
        "({} tasks, {} turns, {:.1} min; right: the known answer appears in the final program's output)",
        results.len(),
        report.turns,
        started.elapsed().as_secs_f64() / 60.0
    );
    if let (Some(before), Some(after)) = (tokens_before, super::tokens::read(&http, &base).await) {
        println!(
            "model work over the run: {}",
            after.since(&before).summary()
        );
    }
    let heuristics = super::heuristics::tally(results.iter().map(|r| (&r.heuristics, r.right())));
    super::heuristics::print_tally(&heuristics, "tasks");
    if let Some(out) = &options.out {
        let json = serde_json::json!({
            "backend": backend, "model": model, "summary": report, "tasks": results,
        });
        std::fs::write(out, serde_json::to_vec_pretty(&json).map_err(fail)?).map_err(fail)?;
        println!("details: {}", out.display());
    }
    Ok(())
}

/// The server's model backend and the model a bench asks for: `model`, or
/// the server's default.
pub async fn server_model(
    http: &reqwest::Client,
    base: &str,
    model: Option<&str>,
) -> Result<(String, String), BenchError> {
    let models: serde_json::Value = http
        .get(format!("{base}/api/models"))
        .send()
        .await
        .map_err(|e| fail(format!("is runcell serving at {base}? {e}")))?
        .json()
        .await
        .map_err(fail)?;
    let backend = models["backend"].as_str().unwrap_or("?").to_string();
    // "default" stands for the backend's first model until it is listed.
    let model = model
        .map(str::to_string)
        .or_else(|| {
            models["default_model"]
                .as_str()
                .filter(|m| *m != "default")
                .map(str::to_string)
        })
        .or_else(|| models["models"][0].as_str().map(str::to_string))
        .unwrap_or_default();
    Ok((backend, model))
}

/// Runs one task in a session of its own; a failure is recorded, not fatal.
pub async fn run_task(
    http: &reqwest::Client,
    base: &str,
    task: &Task,
    model: Option<&str>,
    timeout: Duration,
) -> TaskResult {
    let mut client = AgentClient::new(http.clone(), base);
    let mut result = TaskResult {
        id: task.id.clone(),
        category: task.category.to_string(),
        turns: Vec::new(),
        heuristics: BTreeMap::new(),
    };
    let id = match client.create().await {
        Ok(id) => id,
        Err(e) => {
            result.turns.push(TurnResult {
                problem: Some(e.to_string()),
                ..TurnResult::default()
            });
            return result;
        }
    };
    for (name, bytes) in &task.files {
        if let Err(e) = client.upload(&id, name, bytes).await {
            result.turns.push(TurnResult {
                problem: Some(e.to_string()),
                ..TurnResult::default()
            });
            client.delete(&id).await;
            return result;
        }
    }
    // The whole history: the notebook is folded from its first event.
    let mut history = Vec::new();
    for turn in &task.turns {
        let started = Instant::now();
        let outcome = client.ask(&id, &turn.question, model, timeout).await;
        let seconds = started.elapsed().as_secs_f64();
        let judged = match outcome {
            Ok((events, first_code)) => {
                history.extend(events);
                TurnResult {
                    seconds,
                    first_code_seconds: first_code,
                    ..judge(&turn.question, &turn.expect, &history)
                }
            }
            Err(e) => TurnResult {
                question: turn.question.clone(),
                seconds,
                problem: Some(e.to_string()),
                ..TurnResult::default()
            },
        };
        result.turns.push(judged);
    }
    client.delete(&id).await;
    result
}
