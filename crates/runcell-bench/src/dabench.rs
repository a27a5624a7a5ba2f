//! `runcell bench dabench`: the agent on other people's data. The
//! questions of InfiAgent-DABench (Hu et al., ICML 2024; closed-form
//! questions over real CSV files) are asked through a running runcell's
//! own API the way a person would paste them: the CSV uploaded into a fresh
//! session, then one message holding the question, its constraints and the
//! answer format. Answers are scored with the benchmark's rule
//! (`eval_closed_form.py`): every `@name[value]` in the answer text; a
//! sub-answer is right when its value equals the label as a string, or as
//! a float within 1e-6; a question is right when all its sub-answers are.
//!
//! The answer text is what the person reads of the turn: the standing
//! explanation, then the final program's output. Where both name a
//! sub-answer, the output's (the last) counts, as the benchmark's
//! `dict(zip(...))` keeps the last.
//!
//! The data is evaluation data: it is read from a directory (by default
//! `../shared/dabench`), never committed, and nothing here knows any
//! question, column or file of it.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use runcell_protocol::SessionEvent;
use serde::{Deserialize, Serialize};

use crate::agent::{AgentClient, LastTurn, median};
use crate::tokens::{self, Tokens};
use crate::{BenchError, fail};

pub struct DabenchOptions {
    /// The runcell to ask.
    pub url: String,
    pub model: Option<String>,
    /// The directory with `da-dev-questions.jsonl`, `da-dev-labels.jsonl`
    /// and `da-dev-tables/`.
    pub dir: PathBuf,
    /// Only these question ids (all when empty).
    pub only: Vec<u64>,
    /// A sample of this many questions, spread evenly over each level.
    pub sample: Option<usize>,
    pub out: Option<PathBuf>,
    pub turn_timeout: Duration,
    /// How long a question may be "typed" after its file is uploaded: the
    /// server reads the conversation ahead meanwhile (0: asked at once).
    pub typing: Duration,
}

/// One question of the benchmark, as its file has it.
#[derive(Clone, Debug, Deserialize, Serialize)]
pub struct Question {
    pub id: u64,
    pub question: String,
    #[serde(default)]
    pub constraints: String,
    #[serde(default)]
    pub format: String,
    pub file_name: String,
    #[serde(default)]
    pub level: String,
}

impl Question {
    /// The message a person would paste: the question, its constraints and
    /// the answer's format, as the benchmark gives them.
    pub fn message(&self) -> String {
        [&self.question, &self.constraints, &self.format]
            .iter()
            .map(|part| part.trim())
            .filter(|part| !part.is_empty())
            .collect::<Vec<_>>()
            .join("\n\n")
    }
}

/// A question's labels: `(name, value)` pairs.
pub type Labels = Vec<(String, String)>;

/// A question's labels: `[name, value]` pairs.
#[derive(Clone, Debug, Deserialize)]
struct Label {
    id: u64,
    common_answers: Labels,
}

/// The most bytes read of the benchmark's files: they are data, read
/// defensively like any other.
const MAX_JSONL_BYTES: u64 = 16 * 1024 * 1024;
const MAX_TABLE_BYTES: u64 = 64 * 1024 * 1024;

/// The questions and their labels in `dir`, in file order.
pub fn load(dir: &Path) -> Result<Vec<(Question, Labels)>, BenchError> {
    let read = |name: &str| -> Result<String, BenchError> {
        let path = dir.join(name);
        let size = std::fs::metadata(&path)
            .map_err(|e| fail(format!("{}: {e}", path.display())))?
            .len();
        if size > MAX_JSONL_BYTES {
            return Err(fail(format!("{} is larger than 16 MiB", path.display())));
        }
        std::fs::read_to_string(&path).map_err(|e| fail(format!("{}: {e}", path.display())))
    };
    let questions = read("da-dev-questions.jsonl")?;
    let labels = read("da-dev-labels.jsonl")?;
    let mut by_id = BTreeMap::new();
    for (n, line) in labels
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
    {
        let label: Label = serde_json::from_str(line)
            .map_err(|e| fail(format!("da-dev-labels.jsonl line {}: {e}", n + 1)))?;
        by_id.insert(label.id, label.common_answers);
    }
    let mut out = Vec::new();
    for (n, line) in questions
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
    {
        let question: Question = serde_json::from_str(line)
            .map_err(|e| fail(format!("da-dev-questions.jsonl line {}: {e}", n + 1)))?;
        if question.file_name.contains(['/', '\\']) || question.file_name.starts_with('.') {
            return Err(fail(format!(
                "question {}: a file name that is a path",
                question.id
            )));
        }
        let Some(labels) = by_id.get(&question.id) else {
            return Err(fail(format!("question {} has no label", question.id)));
        };
        out.push((question, labels.clone()));
    }
    Ok(out)
}

/// `n` questions spread evenly over each level's questions (in id order),
/// each level in proportion to its share: the same sample every time.
pub fn sample<T: Clone>(questions: &[(Question, T)], n: usize) -> Vec<(Question, T)> {
    if n >= questions.len() {
        return questions.to_vec();
    }
    let mut levels: BTreeMap<&str, Vec<&(Question, T)>> = BTreeMap::new();
    for q in questions {
        levels.entry(q.0.level.as_str()).or_default().push(q);
    }
    let total = questions.len();
    let mut picked = Vec::new();
    // Largest remainders, so that the shares add up to `n`.
    let mut shares: Vec<(&str, usize, f64)> = levels
        .iter()
        .map(|(level, qs)| {
            let exact = n as f64 * qs.len() as f64 / total as f64;
            (*level, exact.floor() as usize, exact.fract())
        })
        .collect();
    let mut left = n - shares.iter().map(|s| s.1).sum::<usize>();
    let mut order: Vec<usize> = (0..shares.len()).collect();
    order.sort_by(|a, b| shares[*b].2.total_cmp(&shares[*a].2));
    for i in order {
        if left == 0 {
            break;
        }
        shares[i].1 += 1;
        left -= 1;
    }
    for (level, take, _) in shares {
        let mut qs = levels[level].clone();
        qs.sort_by_key(|q| q.0.id);
        let step = qs.len() as f64 / take.max(1) as f64;
        for k in 0..take {
            let at = ((k as f64 + 0.5) * step) as usize;
            picked.push(qs[at.min(qs.len() - 1)].clone());
        }
    }
    picked.sort_by_key(|q| q.0.id);
    picked
}

/// The benchmark's extraction: every `@name[value]` (`@(\w+)\[(.*?)\]`,
/// the value on one line), the last of a name winning.
pub fn extract(text: &str) -> BTreeMap<String, String> {
    let mut found = BTreeMap::new();
    let mut rest = text;
    while let Some(at) = rest.find('@') {
        let after = &rest[at + 1..];
        let name_len = after
            .char_indices()
            .find(|(_, c)| !(c.is_alphanumeric() || *c == '_'))
            .map_or(after.len(), |(i, _)| i);
        let name = &after[..name_len];
        let tail = &after[name_len..];
        if !name.is_empty()
            && let Some(inner) = tail.strip_prefix('[')
            && let Some(close) = inner.find([']', '\n'])
            && inner[close..].starts_with(']')
        {
            found.insert(name.to_string(), inner[..close].to_string());
            rest = &inner[close + 1..];
            continue;
        }
        rest = after;
    }
    found
}

/// The benchmark's `is_equal`: the same string, or the same float within
/// 1e-6 (Python's `float()` takes surrounding blanks).
pub fn is_equal(answer: &str, label: &str) -> bool {
    if answer == label {
        return true;
    }
    match (answer.trim().parse::<f64>(), label.trim().parse::<f64>()) {
        (Ok(a), Ok(b)) => (a - b).abs() < 1e-6,
        _ => false,
    }
}

/// What one question gave.
#[derive(Clone, Debug, Default, Serialize)]
pub struct QuestionResult {
    pub id: u64,
    pub level: String,
    pub right: bool,
    /// Sub-answers right, of `labels`.
    pub parts_right: usize,
    pub parts: usize,
    /// The final program ran without an error.
    pub ran: bool,
    /// Programs written (1 + fixes, with refused repeats).
    pub programs: usize,
    /// Explanations that started over for a figure the output did not show.
    pub rewritten: usize,
    pub seconds: f64,
    pub first_code_seconds: Option<f64>,
    /// From the last result's end to the explanation's first text.
    pub explanation_wait_s: Option<f64>,
    /// The question's "typing" time, spent waiting for the server to read
    /// the conversation ahead (not part of `seconds`).
    pub typed_s: f64,
    /// The model's work for the turn (and what it read ahead before it).
    pub tokens: Tokens,
    /// The labels and what the answer said for each.
    pub labels: Vec<(String, String)>,
    pub answered: BTreeMap<String, String>,
    pub code: String,
    pub output: String,
    pub explanation: String,
    pub problem: Option<String>,
    /// Figures the standing explanation names that neither the output, the
    /// question nor the program shows (the agent bench's check).
    pub invented: Vec<String>,
    /// The agent's heuristics that fired in the turn (a hint told, a note
    /// added, a program sent back, an explanation rewritten), with how
    /// often: read from the server's `/metrics`.
    pub heuristics: BTreeMap<String, u64>,
}

/// Scores the last turn of `history` against `labels`.
pub fn judge(
    question: &Question,
    labels: &[(String, String)],
    history: &[SessionEvent],
) -> QuestionResult {
    let turn = LastTurn::of(history);
    let (explanation, output) = (&turn.explanation, &turn.output);
    // What the person reads: the explanation, then the output.
    let answered = extract(&format!("{explanation}\n{output}"));
    let parts_right = labels
        .iter()
        .filter(|(name, value)| answered.get(name).is_some_and(|a| is_equal(a, value)))
        .count();
    let code = turn
        .code
        .as_ref()
        .map(|c| c.text.clone())
        .unwrap_or_default();
    let invented = turn.invented(&question.message());
    QuestionResult {
        id: question.id,
        level: question.level.clone(),
        right: !labels.is_empty() && parts_right == labels.len(),
        parts_right,
        parts: labels.len(),
        ran: turn.ran(),
        programs: turn.programs(),
        rewritten: turn.rewritten,
        labels: labels.to_vec(),
        answered,
        code,
        invented,
        output: runcell_sandbox::fit(output, 4000).to_string(),
        explanation: explanation.clone(),
        ..QuestionResult::default()
    }
}

/// How a question is asked.
#[derive(Clone, Copy, Debug)]
pub struct Asking<'a> {
    /// The model to ask for (the server's default when `None`).
    pub model: Option<&'a str>,
    /// The longest the turn may take.
    pub timeout: Duration,
    /// The longest the question is "typed" after the upload, while the
    /// server reads ahead.
    pub typing: Duration,
}

/// Asks one question in a session of its own; a failure is recorded.
pub async fn run_question(
    http: &reqwest::Client,
    base: &str,
    tables: &Path,
    question: &Question,
    labels: &[(String, String)],
    how: Asking<'_>,
) -> QuestionResult {
    let Asking {
        model,
        timeout,
        typing,
    } = how;
    let failed = |problem: String| QuestionResult {
        id: question.id,
        level: question.level.clone(),
        parts: labels.len(),
        labels: labels.to_vec(),
        problem: Some(problem),
        ..QuestionResult::default()
    };
    let path = tables.join(&question.file_name);
    let bytes = match std::fs::metadata(&path) {
        Ok(m) if m.len() <= MAX_TABLE_BYTES => match std::fs::read(&path) {
            Ok(bytes) => bytes,
            Err(e) => return failed(format!("{}: {e}", path.display())),
        },
        Ok(_) => return failed(format!("{} is larger than 64 MiB", path.display())),
        Err(e) => return failed(format!("{}: {e}", path.display())),
    };
    let mut client = AgentClient::new(http.clone(), base);
    let id = match client.create().await {
        Ok(id) => id,
        Err(e) => return failed(e.to_string()),
    };
    if let Err(e) = client.upload(&id, &question.file_name, &bytes).await {
        client.delete(&id).await;
        return failed(e.to_string());
    }
    // A person uploads, then types the question: the page says so and the
    // server reads ahead meanwhile.
    let before = tokens::read(http, base).await;
    let mut typed_s = 0.0;
    if !typing.is_zero()
        && let Some(before) = &before
    {
        client.composing(&id).await;
        typed_s = tokens::ahead_read(http, base, before, typing)
            .await
            .as_secs_f64();
    }
    let asked = tokens::read(http, base).await;
    let started = Instant::now();
    let outcome = client.ask(&id, &question.message(), model, timeout).await;
    let seconds = started.elapsed().as_secs_f64();
    let after = tokens::read(http, base).await;
    client.delete(&id).await;
    let mut spent = match (&asked, &after) {
        (Some(asked), Some(after)) => after.since(asked),
        _ => Tokens::default(),
    };
    if let (Some(before), Some(asked)) = (&before, &asked) {
        let ahead = asked.since(before);
        spent.ahead += ahead.ahead;
        spent.ahead_s += ahead.ahead_s;
    }
    match outcome {
        Ok((events, first_code)) => QuestionResult {
            seconds,
            first_code_seconds: first_code,
            explanation_wait_s: explanation_wait(&events),
            typed_s,
            tokens: spent,
            ..judge(question, labels, &events)
        },
        Err(e) => QuestionResult {
            seconds,
            typed_s,
            tokens: spent,
            ..failed(e.to_string())
        },
    }
}

/// Seconds from the end of the turn's last result cell to the first text
/// of the explanation after it.
fn explanation_wait(events: &[SessionEvent]) -> Option<f64> {
    use runcell_protocol::{CellKind, EventBody};
    let mut kinds = std::collections::HashMap::new();
    let mut result_ended = None;
    for event in events {
        match &event.event {
            EventBody::CellStarted {
                cell_id, cell_kind, ..
            } => {
                kinds.insert(*cell_id, *cell_kind);
            }
            EventBody::CellFinished { cell_id, .. }
                if kinds.get(cell_id) == Some(&CellKind::Result) =>
            {
                result_ended = Some(event.ts_ms);
            }
            EventBody::CellDelta { cell_id, text, .. }
                if kinds.get(cell_id) == Some(&CellKind::Explanation)
                    && !text.trim().is_empty() =>
            {
                let ended = result_ended?;
                return Some(event.ts_ms.saturating_sub(ended) as f64 / 1000.0);
            }
            _ => {}
        }
    }
    None
}

/// Runs the chosen questions against `options.url` and prints the report.
pub async fn run(options: DabenchOptions) -> Result<(), BenchError> {
    let all = load(&options.dir)?;
    let chosen: Vec<_> = if options.only.is_empty() {
        all
    } else {
        all.into_iter()
            .filter(|(q, _)| options.only.contains(&q.id))
            .collect()
    };
    let chosen = match options.sample {
        Some(n) => sample(&chosen, n),
        None => chosen,
    };
    let http = reqwest::Client::builder()
        .timeout(options.turn_timeout + Duration::from_secs(30))
        .build()
        .map_err(fail)?;
    let base = options.url.trim_end_matches('/').to_string();
    let (backend, model) =
        crate::agent::server_model(&http, &base, options.model.as_deref()).await?;
    println!(
        "dabench: {} questions from {} against {base} ({backend}, model {model})",
        chosen.len(),
        options.dir.display()
    );
    let tables = options.dir.join("da-dev-tables");
    let started = Instant::now();
    let mut results = Vec::new();
    for (question, labels) in &chosen {
        let before = crate::heuristics::read(&http, &base).await;
        let mut result = run_question(
            &http,
            &base,
            &tables,
            question,
            labels,
            Asking {
                model: options.model.as_deref(),
                timeout: options.turn_timeout,
                typing: options.typing,
            },
        )
        .await;
        if let (Some(before), Some(after)) = (before, crate::heuristics::read(&http, &base).await) {
            result.heuristics = crate::heuristics::fired(&before, &after);
        }
        print_result(&result);
        results.push(result);
    }
    let report = Report::of(&results);
    println!();
    println!("{}", Report::header());
    println!("{}", report.row(&format!("{backend} · {model}")));
    println!(
        "({} questions, {:.1} min; right: every @name[value] of the label in the turn's \
         explanation or final output, by the benchmark's rule)",
        results.len(),
        started.elapsed().as_secs_f64() / 60.0
    );
    crate::heuristics::print_tally(&report.heuristics, "questions");
    if let Some(out) = &options.out {
        let json = serde_json::json!({
            "backend": backend, "model": model, "summary": report, "questions": results,
        });
        std::fs::write(out, serde_json::to_vec_pretty(&json).map_err(fail)?).map_err(fail)?;
        println!("details: {}", out.display());
    }
    Ok(())
}

fn print_result(r: &QuestionResult) {
    let mark = if r.right { "right" } else { "WRONG" };
    let wrong: Vec<String> = r
        .labels
        .iter()
        .filter(|(name, value)| !r.answered.get(name).is_some_and(|a| is_equal(a, value)))
        .map(|(name, value)| {
            format!(
                "{name}: {} (label {value})",
                r.answered.get(name).map_or("-", String::as_str)
            )
        })
        .collect();
    println!(
        "{:>4} {:<6} {mark:<5} {}/{} {:<4} programs {} {:>5.1}s first code {:>5}{}{}{}",
        r.id,
        r.level,
        r.parts_right,
        r.parts,
        if r.ran { "ran" } else { "fail" },
        r.programs,
        r.seconds,
        r.first_code_seconds
            .map_or("-".into(), |s| format!("{s:.1}s")),
        if r.rewritten > 0 {
            format!(" rewritten {}", r.rewritten)
        } else {
            String::new()
        },
        if r.invented.is_empty() {
            String::new()
        } else {
            format!(" INVENTED {}", r.invented.join(", "))
        },
        if wrong.is_empty() || r.right {
            String::new()
        } else {
            format!("  [{}]", runcell_sandbox::fit(&wrong.join("; "), 300))
        },
    );
    println!(
        "     {}; typed {:.1}s; explanation after {}",
        r.tokens.summary(),
        r.typed_s,
        r.explanation_wait_s
            .map_or("-".into(), |s| format!("{s:.1}s"))
    );
    if !r.heuristics.is_empty() {
        let fired: Vec<String> = r
            .heuristics
            .iter()
            .map(|(name, n)| {
                if *n > 1 {
                    format!("{name}×{n}")
                } else {
                    name.clone()
                }
            })
            .collect();
        println!("     fired: {}", fired.join(", "));
    }
    if let Some(problem) = &r.problem {
        println!("     problem: {problem}");
    }
}

/// The summary of a run.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Report {
    pub questions: usize,
    pub right: usize,
    pub parts: usize,
    pub parts_right: usize,
    /// Level → (right, of).
    pub by_level: BTreeMap<String, (usize, usize)>,
    pub ran: usize,
    /// Questions that needed more than one program, and the programs
    /// beyond the first.
    pub fixed_questions: usize,
    pub fixes: usize,
    pub rewritten: usize,
    /// Questions whose standing explanation names a figure nothing shows.
    pub invented: usize,
    pub median_turn_s: f64,
    pub first_code_p50_s: f64,
    /// Median seconds from the last result to the explanation's first text.
    pub explanation_wait_p50_s: f64,
    /// Of all the turns' prompt tokens, the share reused, in percent.
    pub reused_pct: f64,
    /// Heuristic → (questions it fired in, of those right).
    pub heuristics: BTreeMap<String, (usize, usize)>,
}

impl Report {
    pub fn of(results: &[QuestionResult]) -> Self {
        let mut by_level: BTreeMap<String, (usize, usize)> = BTreeMap::new();
        for r in results {
            let entry = by_level.entry(r.level.clone()).or_default();
            entry.0 += usize::from(r.right);
            entry.1 += 1;
        }
        Self {
            questions: results.len(),
            right: results.iter().filter(|r| r.right).count(),
            parts: results.iter().map(|r| r.parts).sum(),
            parts_right: results.iter().map(|r| r.parts_right).sum(),
            by_level,
            ran: results.iter().filter(|r| r.ran).count(),
            fixed_questions: results.iter().filter(|r| r.programs > 1).count(),
            fixes: results.iter().map(|r| r.programs.saturating_sub(1)).sum(),
            rewritten: results.iter().map(|r| r.rewritten).sum(),
            invented: results.iter().filter(|r| !r.invented.is_empty()).count(),
            median_turn_s: median(results.iter().map(|r| r.seconds).collect()),
            first_code_p50_s: median(
                results
                    .iter()
                    .filter_map(|r| r.first_code_seconds)
                    .collect(),
            ),
            explanation_wait_p50_s: median(
                results
                    .iter()
                    .filter_map(|r| r.explanation_wait_s)
                    .collect(),
            ),
            reused_pct: {
                let prompt: f64 = results.iter().map(|r| r.tokens.prompt).sum();
                let reused: f64 = results.iter().map(|r| r.tokens.reused).sum();
                100.0 * reused / prompt.max(1.0)
            },
            heuristics: crate::heuristics::tally(results.iter().map(|r| (&r.heuristics, r.right))),
        }
    }

    pub fn header() -> String {
        "| model | right (by question) | by sub-question | easy / medium / hard | program ran | needed fixes (fixes) | explanations rewritten | invented figure | median turn | first code p50 | explanation after result p50 | prompt tokens reused |\n|---|---|---|---|---|---|---|---|---|---|---|---|".into()
    }

    pub fn row(&self, label: &str) -> String {
        let pct = |n: usize, of: usize| 100.0 * n as f64 / of.max(1) as f64;
        let level = |name: &str| {
            self.by_level
                .get(name)
                .map_or("-".into(), |(r, n)| format!("{r}/{n}"))
        };
        format!(
            "| {label} | {}/{} ({:.0}%) | {}/{} ({:.0}%) | {} / {} / {} | {}/{} | {} ({}) | {} | {} | {:.1} s | {:.1} s | {:.1} s | {:.0}% |",
            self.right,
            self.questions,
            pct(self.right, self.questions),
            self.parts_right,
            self.parts,
            pct(self.parts_right, self.parts),
            level("easy"),
            level("medium"),
            level("hard"),
            self.ran,
            self.questions,
            self.fixed_questions,
            self.fixes,
            self.rewritten,
            self.invented,
            self.median_turn_s,
            self.first_code_p50_s,
            self.explanation_wait_p50_s,
            self.reused_pct,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_are_extracted_as_the_benchmark_does() {
        let text = "@mean_fare[34.65]\nThe answer: @count[ 12 ] and @flag[True] @x[a]@x[b]\n@bad[no close\n@[3] @name(4)";
        let found = extract(text);
        assert_eq!(found["mean_fare"], "34.65");
        assert_eq!(found["count"], " 12 ");
        assert_eq!(found["flag"], "True");
        assert_eq!(found["x"], "b", "the last of a name wins");
        assert!(!found.contains_key("bad") && !found.contains_key("name"));
        // The shortest bracket: `@a[1], @b[2]` is two answers.
        let found = extract("@a[1], @b[2]");
        assert_eq!((found["a"].as_str(), found["b"].as_str()), ("1", "2"));
    }

    #[test]
    fn values_compare_as_strings_or_floats_within_1e_6() {
        assert!(is_equal("34.65", "34.65"));
        assert!(is_equal(" 12 ", "12"));
        assert!(is_equal("12.0", "12"));
        assert!(is_equal("0.1000000001", "0.1"));
        assert!(!is_equal("34.6", "34.65"));
        assert!(!is_equal("skewed_left", "skewed_right"));
        assert!(is_equal("skewed_left", "skewed_left"));
        assert!(!is_equal("nan", "nan") || "nan" == "nan");
        assert!(!is_equal("314, 577", "314,577"));
    }

    fn q(id: u64, level: &str) -> (Question, ()) {
        (
            Question {
                id,
                question: format!("q{id}"),
                constraints: String::new(),
                format: String::new(),
                file_name: "t.csv".into(),
                level: level.into(),
            },
            (),
        )
    }

    #[test]
    fn a_sample_is_spread_over_levels_in_proportion() {
        let mut all = Vec::new();
        for id in 0..30 {
            all.push(q(id, ["easy", "medium", "hard"][(id % 3) as usize]));
        }
        all.push(q(100, "hard"));
        let picked = sample(&all, 10);
        assert_eq!(picked.len(), 10);
        let count = |level: &str| picked.iter().filter(|p| p.0.level == level).count();
        assert_eq!(count("easy") + count("medium") + count("hard"), 10);
        assert!((3..=4).contains(&count("hard")), "{}", count("hard"));
        // The same every time, each question once.
        let ids: Vec<u64> = picked.iter().map(|p| p.0.id).collect();
        assert_eq!(
            ids,
            sample(&all, 10).iter().map(|p| p.0.id).collect::<Vec<_>>()
        );
        let mut unique = ids.clone();
        unique.dedup();
        assert_eq!(unique.len(), ids.len());
        assert_eq!(sample(&all, 100).len(), all.len());
    }

    #[test]
    fn the_message_is_question_constraints_and_format() {
        let question = Question {
            id: 1,
            question: "What is the mean?".into(),
            constraints: " Round to 2 decimals. ".into(),
            format: "@mean[value]".into(),
            file_name: "t.csv".into(),
            level: "easy".into(),
        };
        assert_eq!(
            question.message(),
            "What is the mean?\n\nRound to 2 decimals.\n\n@mean[value]"
        );
    }

    #[test]
    fn files_are_loaded_and_checked() {
        let dir = std::env::temp_dir().join(format!("dabench-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(
            dir.join("da-dev-questions.jsonl"),
            "{\"id\": 3, \"question\": \"q\", \"constraints\": \"c\", \"format\": \"@a[x]\", \"file_name\": \"t.csv\", \"level\": \"easy\"}\n",
        )
        .unwrap();
        std::fs::write(
            dir.join("da-dev-labels.jsonl"),
            "{\"id\": 3, \"common_answers\": [[\"a\", \"1.5\"]]}\n",
        )
        .unwrap();
        let loaded = load(&dir).unwrap();
        assert_eq!(loaded[0].0.id, 3);
        assert_eq!(loaded[0].1, vec![("a".to_string(), "1.5".to_string())]);
        // A file name that is a path is refused.
        std::fs::write(
            dir.join("da-dev-questions.jsonl"),
            "{\"id\": 3, \"question\": \"q\", \"file_name\": \"../etc/passwd\"}\n",
        )
        .unwrap();
        assert!(load(&dir).is_err());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
