//! What a run prints: a line per task's turn as it finishes, and the
//! summary of all of them as a table row.

use serde::Serialize;

use super::{TaskResult, TurnResult};

pub(super) fn print_task(result: &TaskResult) {
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
