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

pub mod tasks;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use app::notebook::{Cell, Notebook};
use app::protocol::{CellKind, CellStatus, EventBody, Output, ServerMessage, SessionEvent};
use futures::StreamExt;
use serde::Serialize;

use self::tasks::{Expect, Task};
use super::{BenchError, fail};
use crate::agent::{UNGROUNDED, grounding, prompt};

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

/// A client for one task: one owner (cookie), one session.
pub struct AgentClient {
    http: reqwest::Client,
    base: String,
    cookie: Option<String>,
}

impl AgentClient {
    pub fn new(http: reqwest::Client, base: &str) -> Self {
        Self {
            http,
            base: base.to_string(),
            cookie: None,
        }
    }

    fn request(&self, method: reqwest::Method, path: &str) -> reqwest::RequestBuilder {
        let builder = self.http.request(method, format!("{}{path}", self.base));
        match &self.cookie {
            Some(cookie) => builder.header(reqwest::header::COOKIE, cookie),
            None => builder,
        }
    }

    /// A new session; the first call also takes the owner cookie it sets.
    pub async fn create(&mut self) -> Result<String, BenchError> {
        let response = self
            .request(reqwest::Method::POST, "/api/sessions")
            .send()
            .await
            .map_err(fail)?;
        if let Some(cookie) = response
            .headers()
            .get(reqwest::header::SET_COOKIE)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.split(';').next())
        {
            self.cookie = Some(cookie.to_string());
        }
        let body: serde_json::Value = ok(response, "creating a session")
            .await?
            .json()
            .await
            .map_err(fail)?;
        body["id"]
            .as_str()
            .map(str::to_string)
            .ok_or_else(|| fail("no session id in the answer"))
    }

    pub async fn upload(&self, id: &str, name: &str, bytes: &[u8]) -> Result<(), BenchError> {
        let response = self
            .request(reqwest::Method::PUT, &format!("/api/sessions/{id}/files"))
            .query(&[("path", name)])
            .body(bytes.to_vec())
            .send()
            .await
            .map_err(fail)?;
        ok(response, &format!("uploading {name}")).await.map(drop)
    }

    /// Asks `question` and reads the turn's events until it finishes:
    /// (events, seconds to the first code token).
    pub async fn ask(
        &self,
        id: &str,
        question: &str,
        model: Option<&str>,
        timeout: Duration,
    ) -> Result<(Vec<SessionEvent>, Option<f64>), BenchError> {
        let started = Instant::now();
        let response = self
            .request(reqwest::Method::POST, &format!("/api/sessions/{id}/ask"))
            .json(&serde_json::json!({ "text": question, "model": model }))
            .send()
            .await
            .map_err(fail)?;
        let response = ok(response, "asking").await?;
        let mut events = Vec::new();
        let mut kinds = std::collections::HashMap::new();
        let mut first_code = None;
        let mut pending = Vec::new();
        let mut body = response.bytes_stream();
        let deadline = tokio::time::sleep(timeout);
        tokio::pin!(deadline);
        loop {
            let chunk = tokio::select! {
                () = &mut deadline => {
                    let _ = self.request(reqwest::Method::POST, &format!("/api/sessions/{id}/stop")).send().await;
                    return Err(fail(format!("the turn took more than {}s; stopped", timeout.as_secs())));
                }
                chunk = body.next() => chunk,
            };
            let Some(chunk) = chunk else { break };
            pending.extend_from_slice(&chunk.map_err(fail)?);
            while let Some(newline) = pending.iter().position(|b| *b == b'\n') {
                let line: Vec<u8> = pending.drain(..=newline).collect();
                let Ok(ServerMessage::Event(event)) = serde_json::from_slice(&line) else {
                    continue;
                };
                match &event.event {
                    EventBody::CellStarted {
                        cell_id, cell_kind, ..
                    } => {
                        kinds.insert(*cell_id, *cell_kind);
                    }
                    EventBody::CellDelta { cell_id, .. }
                        if kinds.get(cell_id) == Some(&CellKind::Code) =>
                    {
                        first_code.get_or_insert_with(|| started.elapsed().as_secs_f64());
                    }
                    _ => {}
                }
                let finished = matches!(event.event, EventBody::TurnFinished { .. });
                events.push(event);
                if finished {
                    return Ok((events, first_code));
                }
            }
        }
        Err(fail("the answer ended before its turn did"))
    }

    pub async fn delete(&self, id: &str) {
        let _ = self
            .request(reqwest::Method::DELETE, &format!("/api/sessions/{id}"))
            .send()
            .await;
    }
}

/// `response` when it succeeded, else an error naming `what` failed, with
/// the status and the start of the body.
async fn ok(response: reqwest::Response, what: &str) -> Result<reqwest::Response, BenchError> {
    let status = response.status();
    if status.is_success() {
        return Ok(response);
    }
    let body = response.text().await.unwrap_or_default();
    Err(fail(format!(
        "{what}: {status} {}",
        crate::sandbox::fit(&body, 500)
    )))
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

/// The last turn of a history, as a person reads it: its cells, the code
/// cell whose result stands, that result and its output, the explanation
/// that stands, and how often an explanation started over in place.
pub struct LastTurn {
    pub cells: Vec<Cell>,
    pub code: Option<Cell>,
    pub result: Option<Cell>,
    pub output: String,
    pub explanation: String,
    pub rewritten: usize,
}

impl LastTurn {
    pub fn of(history: &[SessionEvent]) -> Self {
        let notebook = Notebook::from_events(history);
        let (turn, final_cell) = history
            .iter()
            .rev()
            .find_map(|e| match e.event {
                EventBody::TurnFinished {
                    turn, final_cell, ..
                } => Some((Some(turn), final_cell)),
                _ => None,
            })
            .unwrap_or((None, None));
        let cells: Vec<Cell> = notebook
            .cells()
            .filter(|c| c.turn.is_some() && c.turn == turn)
            .cloned()
            .collect();
        let code = final_cell.and_then(|id| cells.iter().find(|c| c.id == id).cloned());
        let result = code.as_ref().and_then(|code| {
            cells
                .iter()
                .rev()
                .find(|c| c.kind == CellKind::Result && c.source == Some(code.id))
                .cloned()
        });
        let output = result
            .as_ref()
            .map(prompt::report_of_cell)
            .unwrap_or_default();
        let explanation = cells
            .iter()
            .rev()
            .find(|c| c.kind == CellKind::Explanation && c.status == CellStatus::Ok)
            .map(|c| c.text.clone())
            .unwrap_or_default();
        let explanation_ids: Vec<_> = cells
            .iter()
            .filter(|c| c.kind == CellKind::Explanation)
            .map(|c| c.id)
            .collect();
        let rewritten = history
            .iter()
            .filter(|e| matches!(&e.event, EventBody::CellReset { cell_id } if explanation_ids.contains(cell_id)))
            .count();
        Self {
            cells,
            code,
            result,
            output,
            explanation,
            rewritten,
        }
    }

    /// The final program ran without an error.
    pub fn ran(&self) -> bool {
        self.result
            .as_ref()
            .is_some_and(|r| r.status == CellStatus::Ok)
    }

    /// Code cells: the first try and each fix.
    pub fn programs(&self) -> usize {
        self.cells
            .iter()
            .filter(|c| c.kind == CellKind::Code)
            .count()
    }

    /// What the page shows about the turn itself, which an explanation may
    /// state without any output holding it: how many programs were tried
    /// ("all 3 programs failed").
    fn own_facts(&self) -> String {
        format!("{} programs", self.programs())
    }

    /// Figures the standing explanation names that neither the final
    /// output, the `question`, the final program nor the page's own facts
    /// hold. The server's statement that nothing was computed is not the
    /// model's explanation (its figures are the server's: the programs
    /// tried, a hint's example) and is not checked.
    pub fn invented(&self, question: &str) -> Vec<String> {
        if prompt::is_no_answer_statement(&self.explanation) {
            return Vec::new();
        }
        let code = self.code.as_ref().map_or("", |c| c.text.as_str());
        grounding::invented(
            &self.explanation,
            &[&self.output, question, code, &self.own_facts()],
            code,
        )
    }
}

/// Scores the last turn of `history` against `expect`.
pub fn judge(question: &str, expect: &Expect, history: &[SessionEvent]) -> TurnResult {
    let turn = LastTurn::of(history);
    let invented = turn.invented(question);
    let LastTurn {
        cells,
        code,
        result,
        output,
        explanation: standing,
        rewritten,
    } = turn;
    let code = code.as_ref();
    let result = result.as_ref();
    let withdrawn_texts: Vec<String> = cells
        .iter()
        .filter(|c| c.kind == CellKind::Explanation)
        .filter(|c| c.error.as_ref().is_some_and(|e| e.code == UNGROUNDED))
        .map(|c| c.text.clone())
        .collect();
    // Why there is no result: the last cell that failed says.
    let problem = cells
        .iter()
        .rev()
        .find_map(|c| c.error.as_ref().filter(|e| e.code != UNGROUNDED))
        .filter(|_| result.is_none_or(|r| r.status != CellStatus::Ok))
        .map(|e| format!("{}: {}", e.code, e.message));
    TurnResult {
        question: question.to_string(),
        // A program that failed answered nothing, whatever its error says.
        right: result.is_some_and(|r| r.status == CellStatus::Ok && is_right(expect, r, &output)),
        ran: result.is_some_and(|r| r.status == CellStatus::Ok),
        invented,
        withdrawn: withdrawn_texts.len() + rewritten,
        problem,
        // Two withdrawn: what stands is the server's, the second's grounded
        // sentences (pruned) or a quote of the output.
        fallback: withdrawn_texts.len() + rewritten >= 2
            || standing.starts_with("The program printed"),
        pruned: withdrawn_texts.len() + rewritten >= 2
            && !standing.starts_with("The program printed"),
        attempts: cells.iter().filter(|c| c.kind == CellKind::Code).count(),
        earlier_attempts: cells
            .iter()
            .filter(|c| c.kind == CellKind::Code && Some(c.id) != code.map(|c| c.id))
            .map(|c| c.text.clone())
            .collect(),
        code: code.map(|c| c.text.clone()).unwrap_or_default(),
        output: crate::sandbox::fit(&output, 4000).to_string(),
        explanation: standing,
        withdrawn_texts,
        ..TurnResult::default()
    }
}

/// Whether the result shows the expected answer.
pub fn is_right(expect: &Expect, result: &Cell, output: &str) -> bool {
    match expect {
        Expect::Image => result.outputs.iter().any(|o| match o {
            Output::Rich { data, .. } => {
                data.contains_key("image/png") || data.contains_key("image/svg+xml")
            }
            Output::Image { .. } => true,
            _ => false,
        }),
        Expect::Number(want) => {
            let want_decimals = decimals_of(*want);
            // Both rounded to the lesser precision of the two agree.
            grounding::figures(output).iter().any(|got| {
                let scale = 10f64.powi(got.decimals.min(want_decimals).clamp(0, 12));
                (got.value * scale).round() == (want * scale).round()
            })
        }
        Expect::Text { right, wrong } => {
            let answer_line = output.lines().rev().map(str::to_lowercase).find(|line| {
                right
                    .iter()
                    .chain(wrong)
                    .any(|c| mentions(line, &c.to_lowercase()))
            });
            answer_line.is_some_and(|line| {
                right.iter().any(|c| mentions(&line, &c.to_lowercase()))
                    && !wrong.iter().any(|c| mentions(&line, &c.to_lowercase()))
            })
        }
    }
}

/// Digits after the point in `x`'s shortest form.
fn decimals_of(x: f64) -> i32 {
    let shown = format!("{x}");
    shown.split_once('.').map_or(0, |(_, d)| d.len() as i32)
}

/// `needle` in `line` as a whole word (at the edges that are letters or
/// digits): "no" is not in "not", "e" is not in "keeper". A figure goes on
/// through a separator between digits: the month "2024-02" is not in the
/// day "2024-02-13", nor "3.1" in "3.14" or "12" in "1,12".
fn mentions(line: &str, needle: &str) -> bool {
    if needle.is_empty() {
        return false;
    }
    let word = |c: Option<char>| c.is_some_and(char::is_alphanumeric);
    let digit = |c: Option<char>| c.is_some_and(|c| c.is_ascii_digit());
    let joins = |c: Option<char>| matches!(c, Some('-' | '.' | '/' | ':' | ','));
    let starts_word = needle.chars().next().is_some_and(char::is_alphanumeric);
    let ends_word = needle.chars().last().is_some_and(char::is_alphanumeric);
    let starts_digit = digit(needle.chars().next());
    let ends_digit = digit(needle.chars().last());
    line.match_indices(needle).any(|(at, _)| {
        let mut before = line[..at].chars().rev();
        let mut after = line[at + needle.len()..].chars();
        let (b1, b2) = (before.next(), before.next());
        let (a1, a2) = (after.next(), after.next());
        let glued = starts_word && word(b1) || ends_word && word(a1);
        let figure_goes_on =
            starts_digit && joins(b1) && digit(b2) || ends_digit && joins(a1) && digit(a2);
        !glued && !figure_goes_on
    })
}

fn print_task(result: &TaskResult) {
    for (i, turn) in result.turns.iter().enumerate() {
        let mark = if turn.right { "right" } else { "WRONG" };
        let invented = if turn.invented.is_empty() {
            String::new()
        } else {
            format!(" INVENTED {:?}", turn.invented)
        };
        let fixes = turn.attempts.saturating_sub(1);
        println!(
            "{:<22} {:>1} {mark:<5} {:<4} {:>5.1}s first code {:>5}{}{}{}{}",
            result.id,
            i + 1,
            if turn.ran { "ran" } else { "fail" },
            turn.seconds,
            turn.first_code_seconds
                .map_or("-".into(), |s| format!("{s:.1}s")),
            if fixes > 0 {
                format!(" fixes {fixes}")
            } else {
                String::new()
            },
            if turn.withdrawn > 0 {
                format!(" withdrawn {}", turn.withdrawn)
            } else {
                String::new()
            },
            match (turn.fallback, turn.pruned) {
                (true, true) => " pruned",
                (true, false) => " fallback",
                _ => "",
            },
            invented,
        );
        if let Some(problem) = &turn.problem {
            println!("    problem: {problem}");
        }
    }
}

/// The summary of a run.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Report {
    pub tasks: usize,
    pub right: usize,
    pub ran: usize,
    pub invented: usize,
    pub turns: usize,
    pub withdrawn: usize,
    pub fallbacks: usize,
    pub pruned: usize,
    pub median_turn_s: f64,
    pub first_code_p50_s: f64,
    pub follow_up_first_code_p50_s: f64,
}

pub fn median(mut values: Vec<f64>) -> f64 {
    if values.is_empty() {
        return f64::NAN;
    }
    values.sort_by(f64::total_cmp);
    let n = values.len();
    if n % 2 == 1 {
        values[n / 2]
    } else {
        (values[n / 2 - 1] + values[n / 2]) / 2.0
    }
}

impl Report {
    pub fn of(results: &[TaskResult]) -> Self {
        let turns: Vec<&TurnResult> = results.iter().flat_map(|r| &r.turns).collect();
        let first_turns: Vec<f64> = results
            .iter()
            .filter_map(|r| r.turns.first().and_then(|t| t.first_code_seconds))
            .collect();
        let follow_ups: Vec<f64> = results
            .iter()
            .flat_map(|r| r.turns.iter().skip(1).filter_map(|t| t.first_code_seconds))
            .collect();
        Self {
            tasks: results.len(),
            right: results.iter().filter(|r| r.right()).count(),
            ran: results.iter().filter(|r| r.ran()).count(),
            invented: results.iter().filter(|r| r.invented()).count(),
            turns: turns.len(),
            withdrawn: turns.iter().map(|t| t.withdrawn).sum(),
            fallbacks: turns.iter().filter(|t| t.fallback).count(),
            pruned: turns.iter().filter(|t| t.pruned).count(),
            median_turn_s: median(turns.iter().map(|t| t.seconds).collect()),
            first_code_p50_s: median(first_turns),
            follow_up_first_code_p50_s: median(follow_ups),
        }
    }

    pub fn header() -> String {
        "| model | right | program ran | invented figure | withdrawn / fallback (pruned) | median turn | first code p50 (first turns / follow-ups) |\n|---|---|---|---|---|---|---|".into()
    }

    pub fn row(&self, label: &str) -> String {
        let pct = |n: usize| 100.0 * n as f64 / self.tasks.max(1) as f64;
        format!(
            "| {label} | {}/{} ({:.0}%) | {}/{} ({:.0}%) | {} | {} / {} ({}) | {:.1} s | {:.1} s / {:.1} s |",
            self.right,
            self.tasks,
            pct(self.right),
            self.ran,
            self.tasks,
            pct(self.ran),
            self.invented,
            self.withdrawn,
            self.fallbacks,
            self.pruned,
            self.median_turn_s,
            self.first_code_p50_s,
            self.follow_up_first_code_p50_s,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn result_cell(outputs: Vec<Output>) -> Cell {
        Cell {
            id: app::protocol::CellId(1),
            kind: CellKind::Result,
            turn: None,
            text: String::new(),
            html: String::new(),
            highlighted: 0,
            language: None,
            attempt: None,
            source: None,
            outputs,
            is_final: true,
            status: CellStatus::Ok,
            elapsed_ms: None,
            error: None,
            off_branch: false,
        }
    }

    fn stdout(text: &str) -> Cell {
        result_cell(vec![Output::Stdout { text: text.into() }])
    }

    fn right(expect: &Expect, text: &str) -> bool {
        is_right(expect, &stdout(text), text)
    }

    /// A turn of `programs` failed programs ending in the server's
    /// statement `explanation`.
    fn failed_turn(programs: u64, explanation: &str) -> Vec<SessionEvent> {
        use app::protocol::{CellError, CellId, TurnId, TurnKind, TurnStatus};
        let turn = TurnId(1);
        let started = |cell_id, cell_kind| EventBody::CellStarted {
            cell_id,
            cell_kind,
            language: None,
            attempt: None,
            source: None,
        };
        let text = |cell_id, text: &str| EventBody::CellDelta {
            cell_id,
            text: text.into(),
            highlight: None,
        };
        let finished = |cell_id, status| EventBody::CellFinished {
            cell_id,
            status,
            elapsed_ms: 1,
            error: (status == CellStatus::Error).then(|| CellError {
                code: "program_failed".into(),
                message: "KeyError".into(),
            }),
        };
        let mut bodies = vec![EventBody::TurnStarted {
            turn,
            turn_kind: TurnKind::Ask,
            alternative_to: None,
        }];
        for n in 0..programs {
            let id = CellId(10 + n);
            bodies.push(started(id, CellKind::Code));
            bodies.push(text(id, "print(df['x'].mean())"));
            bodies.push(finished(id, CellStatus::Error));
        }
        let said = CellId(99);
        bodies.push(started(said, CellKind::Explanation));
        bodies.push(text(said, explanation));
        bodies.push(finished(said, CellStatus::Ok));
        bodies.push(EventBody::TurnFinished {
            turn,
            status: TurnStatus::Error,
            elapsed_ms: 1,
            final_cell: None,
        });
        SessionEvent::numbered(bodies, 1)
    }

    #[test]
    fn the_count_of_programs_tried_is_the_pages_own_fact() {
        let said = "All 3 programs failed on a missing column.";
        let judged = judge(
            "the mean of x?",
            &Expect::Number(4.5),
            &failed_turn(3, said),
        );
        assert!(judged.invented.is_empty(), "{:?}", judged.invented);
        // Three programs said where two were tried is a figure nothing shows.
        let judged = judge(
            "the mean of x?",
            &Expect::Number(4.5),
            &failed_turn(2, said),
        );
        assert_eq!(judged.invented, vec!["3".to_string()]);
        assert!(!judged.right && !judged.ran);
    }

    #[test]
    fn the_servers_no_answer_statement_is_not_checked_as_an_explanation() {
        // Its figures are the server's: the count, a hint's `unique()[:20]`.
        let said = prompt::no_answer(
            3,
            "ValueError: `x` and `y` must have length at least 2.",
            "df = df[df['source'] == 'ABC News']",
            &[],
        );
        assert!(prompt::is_no_answer_statement(&said), "{said}");
        let judged = judge(
            "the mean of x?",
            &Expect::Number(4.5),
            &failed_turn(2, &said),
        );
        assert!(judged.invented.is_empty(), "{:?}", judged.invented);
        assert!(prompt::is_no_answer_statement(prompt::UNCOMPUTED));
    }

    #[test]
    fn numbers_count_when_printed_as_given_or_rounded() {
        let e = Expect::Number(1628.89);
        assert!(right(&e, "After 10 years: 1628.894626777442\n"));
        assert!(right(&e, "Balance: $1,628.89\n"));
        assert!(right(&e, "Balance: 1629\n"), "a rounded answer");
        assert!(!right(&e, "Balance: 1628.90\n"));
        assert!(!right(&e, "Balance: 1638.89\n"));
        let e = Expect::Number(168.0);
        assert!(right(&e, "Primes below 1000: 168\n"));
        assert!(right(&e, "168.0\n"));
        assert!(!right(&e, "169\n"));
        assert!(right(
            &Expect::Number(355_687_428_096_000.0),
            "17! = 355687428096000\n"
        ));
        assert!(right(&Expect::Number(0.45), "share 4.5e-01\n"));
    }

    #[test]
    fn names_count_on_the_answer_line_only() {
        let e = Expect::Text {
            right: vec!["West".into()],
            wrong: vec!["North".into(), "East".into()],
        };
        let table = "region\nEast     100\nNorth    200\nWest     300\n";
        assert!(right(&e, &format!("{table}Largest: West\n")));
        assert!(!right(&e, &format!("{table}Largest: North\n")));
        // A table with no answer line after it: its last line decides.
        assert!(!right(&e, "West 300\nNorth 200\n"));
        let leap = Expect::Text {
            right: vec!["false".into(), "no".into()],
            wrong: vec!["true".into(), "yes".into()],
        };
        assert!(right(&leap, "Is 2100 a leap year? False\n"));
        assert!(!right(&leap, "not sure: True\n"), "`no` is not in `not`");
    }

    #[test]
    fn a_lone_name_is_right_on_its_line() {
        let e = Expect::Text {
            right: vec!["llecnur".into()],
            wrong: Vec::new(),
        };
        assert!(right(&e, "llecnur\n"));
        assert!(right(&e, "Reversed: llecnur\n"));
    }

    #[test]
    fn an_image_is_a_rich_output_with_a_picture() {
        let png = result_cell(vec![Output::Rich {
            data: [("image/png".to_string(), "iVBOR".to_string())].into(),
            main: false,
            metadata: String::new(),
        }]);
        assert!(is_right(&Expect::Image, &png, ""));
        assert!(!is_right(&Expect::Image, &stdout("plotted"), "plotted"));
    }

    #[test]
    fn mentions_are_whole_words() {
        assert!(mentions("the answer is: e", ": e"));
        assert!(!mentions("bookkeeper", "e"));
        assert!(mentions("10.0.0.5 made 40", "10.0.0.5"));
        assert!(!mentions("10.0.0.50", "10.0.0.5"));
        // A month is not named by a day of it, nor a figure by a longer one.
        assert!(!mentions("highest: 2024-02-13.", "2024-02"));
        assert!(mentions("highest: 2024-02.", "2024-02"));
        assert!(mentions("highest month: 2024-02, with 4537.15", "2024-02"));
        assert!(!mentions("pi is 3.14", "3.1"));
        assert!(!mentions("total 1,120", "120"));
        assert!(mentions("1, 2 and 120", "120"));
    }
}
