//! Which of the agent's heuristics fired during a question: the change in
//! the server's `/metrics` counters that count them (a fix hint told, a
//! note added to the prompt, a program sent back as not answering, an
//! explanation rewritten or replaced). The benches ask one question at a
//! time, so the change between two reads is that question's.

use std::collections::BTreeMap;

/// The counters read, the label that names the heuristic, and the prefix
/// it is reported under (`hint:closest_key`, `doubt:ungrouped`).
const SERIES: [(&str, &str, &str); 4] = [
    ("runcell_fix_hints_total", "hint", "hint"),
    ("runcell_prompt_notes_total", "note", "note"),
    ("runcell_unanswered_total", "reason", "doubt"),
    ("runcell_explanations_total", "outcome", "explanation"),
];

/// The counts in a Prometheus text page, by `prefix:label`; other series,
/// comments and malformed lines are skipped.
pub fn parse(text: &str) -> BTreeMap<String, u64> {
    let mut counts = BTreeMap::new();
    for line in text.lines() {
        let Some((series, value)) = line.rsplit_once(' ') else {
            continue;
        };
        let Some((name, labels)) = series.split_once('{') else {
            continue;
        };
        let Some(&(_, key, prefix)) = SERIES.iter().find(|(s, _, _)| *s == name) else {
            continue;
        };
        let Some(label) = label(labels, key) else {
            continue;
        };
        let Ok(value) = value.trim().parse::<f64>() else {
            continue;
        };
        if value.is_finite() && value >= 0.0 {
            *counts.entry(format!("{prefix}:{label}")).or_insert(0) += value as u64;
        }
    }
    counts
}

/// The value of `key` in `a="x",key="y"}`.
fn label<'a>(labels: &'a str, key: &str) -> Option<&'a str> {
    let start = labels.find(&format!("{key}=\""))? + key.len() + 2;
    let rest = &labels[start..];
    Some(&rest[..rest.find('"')?])
}

/// What grew from `before` to `after`.
pub fn fired(
    before: &BTreeMap<String, u64>,
    after: &BTreeMap<String, u64>,
) -> BTreeMap<String, u64> {
    after
        .iter()
        .filter_map(|(name, &n)| {
            let grew = n.saturating_sub(before.get(name).copied().unwrap_or(0));
            (grew > 0).then(|| (name.clone(), grew))
        })
        .collect()
}

/// The server's counts now; `None` if `/metrics` cannot be read (behind a
/// key, or another recorder installed): the bench then reports none.
pub async fn read(http: &reqwest::Client, base: &str) -> Option<BTreeMap<String, u64>> {
    let response = http.get(format!("{base}/metrics")).send().await.ok()?;
    if !response.status().is_success() {
        return None;
    }
    Some(parse(&response.text().await.ok()?))
}

/// For each heuristic that fired in a run: the questions it fired in and,
/// of those, how many came out right.
pub fn tally<'a>(
    runs: impl IntoIterator<Item = (&'a BTreeMap<String, u64>, bool)>,
) -> BTreeMap<String, (usize, usize)> {
    let mut tally: BTreeMap<String, (usize, usize)> = BTreeMap::new();
    for (fired, right) in runs {
        for name in fired.keys() {
            let entry = tally.entry(name.clone()).or_default();
            entry.0 += 1;
            entry.1 += usize::from(right);
        }
    }
    tally
}

/// Prints a [`tally`] as a table, `unit` naming what was counted
/// ("questions", "tasks"); nothing when nothing fired.
pub fn print_tally(tally: &BTreeMap<String, (usize, usize)>, unit: &str) {
    if tally.is_empty() {
        return;
    }
    println!();
    println!("| heuristic | fired in ({unit}) | of those right |\n|---|---|---|");
    for (name, (fired, right)) in tally {
        println!("| {name} | {fired} | {right} |");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PAGE: &str = "# HELP runcell_fix_hints_total Failed programs\n\
        # TYPE runcell_fix_hints_total counter\n\
        runcell_fix_hints_total{hint=\"closest_key\"} 2\n\
        runcell_unanswered_total{reason=\"ungrouped\",fixed=\"asked\"} 1\n\
        runcell_unanswered_total{reason=\"ungrouped\",fixed=\"no_attempts_left\"} 1\n\
        runcell_explanations_total{outcome=\"grounded\"} 5\n\
        runcell_runs_total{language=\"python\"} 9\n\
        runcell_prompt_notes_total{note=\"format\"} nan\n\
        runcell_prompt_notes_total{note=\"missing} 3\n\
        garbage line\n";

    #[test]
    fn the_heuristics_counters_are_read_and_others_skipped() {
        let counts = parse(PAGE);
        assert_eq!(counts["hint:closest_key"], 2);
        assert_eq!(counts["doubt:ungrouped"], 2, "summed over the other labels");
        assert_eq!(counts["explanation:grounded"], 5);
        assert_eq!(counts.len(), 3, "{counts:?}");
    }

    #[test]
    fn what_fired_is_what_grew_and_the_tally_counts_questions() {
        let before = parse(PAGE);
        let mut after = before.clone();
        *after.get_mut("hint:closest_key").unwrap() += 1;
        after.insert("note:format".into(), 1);
        let one = fired(&before, &after);
        assert_eq!(
            one.into_iter().collect::<Vec<_>>(),
            vec![
                ("hint:closest_key".to_string(), 1),
                ("note:format".to_string(), 1)
            ]
        );
        let a = fired(&before, &after);
        let b: BTreeMap<String, u64> = [("note:format".to_string(), 2)].into();
        let tally = tally([(&a, true), (&b, false)]);
        assert_eq!(tally["note:format"], (2, 1));
        assert_eq!(tally["hint:closest_key"], (1, 1));
    }
}
