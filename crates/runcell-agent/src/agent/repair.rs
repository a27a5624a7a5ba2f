//! Repairs a person would make: for a failure whose remedy is certain,
//! runcell edits the failing program itself and runs the edit as the turn's
//! next attempt, shown with what it changed and why, instead of asking the
//! model (the 1.5B, told the closest real column, still rewrote its whole
//! program and often the mistake with it).
//!
//! Only a missing column whose real name is certain: equal once case,
//! spaces, dashes, dots and underscores are set aside, or one clear nearest
//! by edit distance ([`MARGIN`] ahead of the next). Headers with spaces
//! around them (`' BARO'`) are the same case. An API removed from pandas
//! (`DataFrame.append`) is not repaired here: its rewrite depends on what
//! is appended (a row, a dict, a frame), so it is not mechanical.

use super::fix_hints::{quoted, similarity};
use super::profile::python_str;

/// How alike a key and its nearest column must be, by edit distance, for
/// a repair without an exact match.
const NEAREST: f64 = 0.8;

/// How far ahead of the second nearest column the nearest must be.
const MARGIN: f64 = 0.15;

/// A program edited by runcell, and what the person is told of it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Repair {
    pub code: String,
    /// The edit and its reason: "`'wind_speed'` → `'wind speed'`: the
    /// table's column".
    pub note: String,
}

/// The repair of a program `code` whose run failed with `report`, over
/// tables with `columns`; `None` unless it is certain.
pub(super) fn repair(report: &str, code: &str, columns: &[String]) -> Option<Repair> {
    if columns.is_empty() {
        return None;
    }
    let line = report.lines().rev().find(|l| {
        l.starts_with("KeyError") || l.contains("not in index") || l.contains("are in the [")
    })?;
    let mut code = code.to_string();
    let mut edits = Vec::new();
    for key in quoted(line) {
        let key = key.rsplit_once(": ").map_or(key, |(_, key)| key);
        if key.is_empty() || columns.iter().any(|c| c == key) {
            continue;
        }
        let column = certain_column(key, columns)?;
        let mut replaced = false;
        for quote in ['\'', '"'] {
            let written = format!("{quote}{key}{quote}");
            if code.contains(&written) && !column.contains([quote, '\\', '\n']) {
                code = code.replace(&written, &format!("{quote}{column}{quote}"));
                replaced = true;
            }
        }
        if !replaced {
            return None;
        }
        edits.push(format!("`{}` → `{}`", python_str(key), python_str(column)));
    }
    if edits.is_empty() {
        return None;
    }
    let reason = if edits.len() == 1 {
        "the table's column"
    } else {
        "the table's columns"
    };
    Some(Repair {
        code,
        note: format!("Edited by runcell: {}: {reason}.", edits.join(", ")),
    })
}

/// The one column `key` certainly means.
fn certain_column<'a>(key: &str, columns: &'a [String]) -> Option<&'a str> {
    let mut scored: Vec<(f64, &String)> = columns.iter().map(|c| (similarity(key, c), c)).collect();
    scored.sort_by(|a, b| b.0.total_cmp(&a.0));
    let (best, column) = *scored.first()?;
    let second = scored.get(1).map_or(0.0, |s| s.0);
    let certain = if best >= 1.0 {
        second < 1.0
    } else {
        best >= NEAREST && best - second >= MARGIN
    };
    certain.then_some(column.as_str())
}

/// A program's lines that install packages, which cannot run where
/// nothing installs them (the Browser sandbox): IPython's `%pip`/`!pip`
/// (and conda's), and a bare `pip install` line. In Pyodide each is a
/// `SyntaxError` that stops the whole program, imports and all.
fn installs(line: &str) -> bool {
    let line = line.trim_start();
    let shell = line
        .strip_prefix('%')
        .or_else(|| line.strip_prefix('!'))
        .map(str::trim_start);
    match shell {
        Some(rest) => [
            "pip",
            "pip3",
            "conda",
            "mamba",
            "python -m pip",
            "python3 -m pip",
        ]
        .iter()
        .any(|tool| rest == *tool || rest.starts_with(&format!("{tool} "))),
        None => ["pip install ", "pip3 install "]
            .iter()
            .any(|bare| line.starts_with(bare)),
    }
}

/// The program without its lines that install packages, for a sandbox
/// where nothing installs them (`why`: what the person is told); its
/// imports stay, so a package the sandbox has still loads. A dropped line
/// inside a block becomes `pass` at its indent, so the block still parses.
/// `None` when no line installs anything.
pub(super) fn without_installs(code: &str, why: &str) -> Option<Repair> {
    let mut dropped = Vec::new();
    let mut kept = Vec::new();
    for line in code.lines() {
        if installs(line) {
            dropped.push(format!("`{}`", line.trim().replace('`', "'")));
            let indent = &line[..line.len() - line.trim_start().len()];
            if !indent.is_empty() {
                kept.push(format!("{indent}pass"));
            }
        } else {
            kept.push(line.to_string());
        }
    }
    if dropped.is_empty() {
        return None;
    }
    Some(Repair {
        code: kept.join("\n"),
        note: format!("Edited by runcell: dropped {}: {why}.", dropped.join(", ")),
    })
}

/// Whether a program does anything: a line that is not blank or a
/// comment.
pub(super) fn has_statements(code: &str) -> bool {
    code.lines().any(|line| {
        let line = line.trim();
        !line.is_empty() && !line.starts_with('#')
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn columns(names: &[&str]) -> Vec<String> {
        names.iter().map(|n| n.to_string()).collect()
    }

    #[test]
    fn a_missing_column_is_replaced_by_the_one_it_certainly_means() {
        let report = "Traceback (most recent call last):\n  File \"<cell>\", line 3\nKeyError: 'wind_speed'\n";
        let code = "import pandas as pd\ndf = pd.read_csv('w.csv')\nprint(df['wind_speed'].mean())";
        let got = repair(report, code, &columns(&["date", "wind speed", "temp"]));
        assert_eq!(
            got,
            Some(Repair {
                code:
                    "import pandas as pd\ndf = pd.read_csv('w.csv')\nprint(df['wind speed'].mean())"
                        .into(),
                note: "Edited by runcell: `'wind_speed'` → `'wind speed'`: the table's column."
                    .into(),
            })
        );
    }

    #[test]
    fn headers_with_spaces_around_them_are_written_as_the_table_has_them() {
        let report = "KeyError: \"['BARO', 'TEMP'] not in index\"\n";
        let code = "print(df[[\"BARO\", \"TEMP\"]].corr())";
        let got = repair(report, code, &columns(&["DATE", " BARO", " TEMP"]));
        assert_eq!(
            got,
            Some(Repair {
                code: "print(df[[\" BARO\", \" TEMP\"]].corr())".into(),
                note: "Edited by runcell: `'BARO'` → `' BARO'`, `'TEMP'` → `' TEMP'`: the \
                       table's columns."
                    .into(),
            })
        );
    }

    #[test]
    fn no_repair_unless_it_is_certain() {
        let code = "print(df['price'])";
        let report = "KeyError: 'price'\n";
        // Two columns as near: which one is meant is not certain.
        assert_eq!(repair(report, code, &columns(&["Price", "PRICE"])), None);
        assert_eq!(
            repair(report, code, &columns(&["prices", "prize"])),
            None,
            "no margin"
        );
        // Nothing near, no table, another error, or the key not written so.
        assert_eq!(repair(report, code, &columns(&["region", "units"])), None);
        assert_eq!(repair(report, code, &[]), None);
        assert_eq!(
            repair("ValueError: 'price'\n", code, &columns(&["Price"])),
            None
        );
        assert_eq!(
            repair(report, "print(df[name])", &columns(&["Price"])),
            None
        );
        // One clear nearest by edit distance.
        assert_eq!(
            repair(report, code, &columns(&["prce", "region"])).map(|r| r.code),
            Some("print(df['prce'])".into())
        );
    }

    #[test]
    fn installs_are_dropped_and_imports_kept() {
        let why = "there is no pip";
        let fixed =
            without_installs("%pip install numpy\nimport numpy as np\nprint(np.pi)", why).unwrap();
        assert_eq!(fixed.code, "import numpy as np\nprint(np.pi)");
        assert_eq!(
            fixed.note,
            "Edited by runcell: dropped `%pip install numpy`: there is no pip."
        );
        let fixed = without_installs(
            "!pip install -q pandas\ntry:\n    %pip install sympy\nexcept Exception:\n    pass\npip install six\nimport sympy",
            why,
        )
        .unwrap();
        assert_eq!(
            fixed.code,
            "try:\n    pass\nexcept Exception:\n    pass\nimport sympy"
        );
        assert_eq!(
            fixed.note,
            "Edited by runcell: dropped `!pip install -q pandas`, `%pip install sympy`, \
             `pip install six`: there is no pip."
        );
        // Only an install is an install: names that start alike, a string.
        for code in [
            "pipeline = 3\nprint(pipeline)",
            "%pipeline",
            "print('pip install x')",
            "%time x = 1",
        ] {
            assert_eq!(without_installs(code, why), None, "{code}");
        }
        let only = without_installs("%pip install numpy\n", why).unwrap();
        assert!(!has_statements(&only.code));
        assert!(has_statements("# a comment\nx = 1"));
    }
}
