//! The list of tasks in `tasks.json`, in the order they run: the tasks
//! whose questions and answers are fixed, and in their places the groups of
//! tasks about a generated file.
//!
//! A fixed task is `{"id", "category", "turns"}`; each turn is a
//! `"question"` and what it expects: `"number": 42` (this figure appears in
//! what the program printed), `"right": [..]` with an optional
//! `"wrong": [..]` (the last printed line naming any of them names one of
//! `right` and none of `wrong`), or `"image": true` (an image was shown).
//! A group is `{"generated": "sales"}`: its tasks are built in code (a
//! module per file) so that their answers are computed from the same rows
//! as the file, never typed in here.

use serde::Deserialize;

use super::{CATEGORIES, Expect, Task, Turn};

const TASKS: &str = include_str!("tasks.json");

/// One entry of the list, in order.
#[derive(Debug)]
pub(super) enum Listed {
    Task(Task),
    Generated(Generated),
}

/// A group of tasks about a generated file, built in code.
#[derive(Clone, Copy, Debug, Deserialize, PartialEq, Eq, PartialOrd, Ord)]
#[serde(rename_all = "kebab-case")]
pub(super) enum Generated {
    /// Questions about sales.csv.
    Sales,
    /// A follow-up about sales.csv.
    SalesFollowUp,
    /// A plot of sales.csv.
    SalesPlot,
    /// Questions about customers.csv joined with orders.csv.
    Shop,
    /// Questions about employees.json.
    Employees,
    /// Questions about server.log.
    ServerLog,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Entry {
    id: Option<String>,
    category: Option<String>,
    #[serde(default)]
    turns: Vec<TurnEntry>,
    generated: Option<Generated>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TurnEntry {
    question: String,
    number: Option<f64>,
    #[serde(default)]
    right: Vec<String>,
    #[serde(default)]
    wrong: Vec<String>,
    #[serde(default)]
    image: bool,
}

/// The entries of `tasks.json`, in order; an error names the entry that is
/// not a task.
pub(super) fn listed() -> Result<Vec<Listed>, String> {
    let entries: Vec<Entry> =
        serde_json::from_str(TASKS).map_err(|e| format!("tasks.json: {e}"))?;
    entries.into_iter().map(listed_entry).collect()
}

fn listed_entry(entry: Entry) -> Result<Listed, String> {
    match entry {
        Entry {
            id: None,
            category: None,
            turns,
            generated: Some(group),
        } if turns.is_empty() => Ok(Listed::Generated(group)),
        Entry {
            id: Some(id),
            category: Some(category),
            turns,
            generated: None,
        } if !turns.is_empty() => {
            let category = CATEGORIES
                .iter()
                .copied()
                .find(|c| *c == category)
                .ok_or_else(|| format!("tasks.json: {id}: no category {category:?}"))?;
            let turns = turns
                .into_iter()
                .map(|t| fixed_turn(t).map_err(|e| format!("tasks.json: {id}: {e}")))
                .collect::<Result<_, _>>()?;
            Ok(Listed::Task(Task {
                id,
                category,
                files: Vec::new(),
                turns,
            }))
        }
        Entry { id, .. } => Err(format!(
            "tasks.json: {}: a task has an id, a category and turns; a group only `generated`",
            id.as_deref().unwrap_or("an entry")
        )),
    }
}

/// A turn expects exactly one of a number, names, or an image.
fn fixed_turn(turn: TurnEntry) -> Result<Turn, String> {
    let TurnEntry {
        question,
        number,
        right,
        wrong,
        image,
    } = turn;
    let expect = match (number, right.is_empty(), image) {
        (Some(n), true, false) if wrong.is_empty() => Expect::Number(n),
        (None, false, false) => Expect::Text { right, wrong },
        (None, true, true) if wrong.is_empty() => Expect::Image,
        _ => {
            return Err(format!(
                "{question:?} expects one of `number`, `right` (with `wrong`) or `image`"
            ));
        }
    };
    Ok(Turn { question, expect })
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;

    #[test]
    fn the_list_parses_with_unique_ids_and_each_group_once() {
        let listed = listed().unwrap();
        let tasks: Vec<&Task> = listed
            .iter()
            .filter_map(|l| match l {
                Listed::Task(task) => Some(task),
                Listed::Generated(_) => None,
            })
            .collect();
        assert!(!tasks.is_empty());
        let ids: BTreeSet<&str> = tasks.iter().map(|t| t.id.as_str()).collect();
        assert_eq!(ids.len(), tasks.len(), "ids are unique");
        assert!(tasks.iter().all(|t| t.files.is_empty()));
        let groups: Vec<Generated> = listed
            .iter()
            .filter_map(|l| match l {
                Listed::Generated(group) => Some(*group),
                Listed::Task(_) => None,
            })
            .collect();
        let once: BTreeSet<Generated> = groups.iter().copied().collect();
        assert_eq!(once.len(), groups.len(), "{groups:?}");
        assert_eq!(once.len(), 6, "every group has its place: {groups:?}");
    }

    #[test]
    fn an_entry_that_is_neither_a_task_nor_a_group_is_refused() {
        let parse = |entry: &str| {
            let entry: Entry = serde_json::from_str(entry).map_err(|e| e.to_string())?;
            listed_entry(entry)
        };
        let task = |turn: &str| {
            format!(r#"{{"id": "t", "category": "strings", "turns": [{{"question": "q"{turn}}}]}}"#)
        };
        assert!(parse(&task(r#", "number": 1"#)).is_ok());
        assert!(parse(&task(r#", "image": true"#)).is_ok());
        assert!(parse(&task(r#", "right": ["a"], "wrong": ["b"]"#)).is_ok());
        assert!(parse(&task(r#", "number": 1, "image": true"#)).is_err());
        assert!(parse(&task(r#", "wrong": ["b"]"#)).is_err());
        assert!(parse(&task("")).is_err(), "no answer");
        assert!(parse(&task(r#", "numbr": 1"#)).is_err(), "a typo");
        assert!(parse(r#"{"id": "t", "category": "strings", "turns": []}"#).is_err());
        let other =
            r#"{"id": "t", "category": "poetry", "turns": [{"question": "q", "number": 1}]}"#;
        assert!(parse(other).is_err());
        assert!(parse(r#"{"generated": "sales"}"#).is_ok());
        assert!(parse(r#"{"generated": "weather"}"#).is_err());
        assert!(parse(r#"{"id": "t", "generated": "sales"}"#).is_err());
    }
}
