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
}
