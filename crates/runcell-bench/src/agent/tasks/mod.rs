//! The agent benchmark's tasks: questions with known answers, and the files
//! they are asked about. The questions whose answers are fixed are data
//! (`tasks.json`, read by `fixed`). The files are generated from a fixed
//! seed (`data`) and every answer about them is computed from the same rows
//! by a module per file (`sales`, `shop`, `employees`, `server_log`), so
//! nothing is typed in by hand that could drift from the data.

mod data;
mod employees;
mod fixed;
mod sales;
mod server_log;
mod shop;

use self::fixed::{Generated, Listed};
use self::sales::Sales;

/// What a turn's result must show to count as right.
#[derive(Clone, Debug, PartialEq)]
pub enum Expect {
    /// This number appears in what the program printed (as a figure,
    /// rounded to the precision either side gives).
    Number(f64),
    /// The last printed line that names any of `right` or `wrong` names one
    /// of `right` and none of `wrong` (case-insensitive): the answer line,
    /// not a table that lists every candidate.
    Text {
        right: Vec<String>,
        wrong: Vec<String>,
    },
    /// An image was shown.
    Image,
}

#[derive(Clone, Debug)]
pub struct Turn {
    pub question: String,
    pub expect: Expect,
}

#[derive(Clone, Debug)]
pub struct Task {
    pub id: String,
    pub category: &'static str,
    /// Files uploaded before the first question: (name, bytes).
    pub files: Vec<(String, Vec<u8>)>,
    pub turns: Vec<Turn>,
}

/// The categories of the bench's tasks.
pub const CATEGORIES: [&str; 6] = [
    "arithmetic",
    "strings",
    "dates",
    "data",
    "follow-up",
    "plot",
];

/// Every task, in a fixed order: `tasks.json`'s, with the tasks about each
/// generated file where it names their group.
pub fn all() -> Result<Vec<Task>, String> {
    let sales = Sales::generate();
    let mut tasks = Vec::new();
    for listed in fixed::listed()? {
        match listed {
            Listed::Task(task) => tasks.push(task),
            Listed::Generated(group) => tasks.extend(match group {
                Generated::Sales => sales.questions(),
                Generated::SalesFollowUp => sales.follow_up(),
                Generated::SalesPlot => sales.plot(),
                Generated::Shop => shop::tasks(),
                Generated::Employees => employees::tasks(),
                Generated::ServerLog => server_log::tasks(),
            }),
        }
    }
    Ok(tasks)
}

fn task(id: &str, category: &'static str, files: Vec<(String, Vec<u8>)>, turns: Vec<Turn>) -> Task {
    Task {
        id: id.to_string(),
        category,
        files,
        turns,
    }
}

fn turn(question: &str, expect: Expect) -> Turn {
    Turn {
        question: question.to_string(),
        expect,
    }
}

fn number(n: f64) -> Expect {
    Expect::Number(n)
}

fn text(right: &[&str], wrong: &[&str]) -> Expect {
    Expect::Text {
        right: right.iter().map(|s| s.to_string()).collect(),
        wrong: wrong.iter().map(|s| s.to_string()).collect(),
    }
}

fn round(x: f64, decimals: i32) -> f64 {
    let scale = 10f64.powi(decimals);
    (x * scale).round() / scale
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn there_are_enough_tasks_of_every_kind_with_unique_ids() {
        let tasks = all().unwrap();
        assert!(tasks.len() >= 40, "{} tasks", tasks.len());
        let ids: std::collections::BTreeSet<&str> = tasks.iter().map(|t| t.id.as_str()).collect();
        assert_eq!(ids.len(), tasks.len());
        for category in CATEGORIES {
            assert!(tasks.iter().any(|t| t.category == category), "{category}");
        }
        assert!(tasks.iter().any(|t| t.turns.len() > 1));
    }
}
