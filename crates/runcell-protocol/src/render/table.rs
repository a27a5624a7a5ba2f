//! A table's values as people use them: which columns hold numbers (shown
//! right-aligned, sorted as numbers), an order to show the rows in, and
//! the table as CSV (to download) or tab-separated text (to paste).

use std::cmp::Ordering;

use crate::Table;

/// What pandas and numpy write for a missing value.
const MISSING: [&str; 6] = ["", "NaN", "nan", "None", "NaT", "<NA>"];

/// A value as a number, if it is one as pandas writes numbers (digits, a
/// sign, a point, an exponent, `inf`, thousands commas or a trailing `%`).
pub fn number(value: &str) -> Option<f64> {
    let value = value.trim();
    let value = value.strip_suffix('%').unwrap_or(value);
    let cleaned: String = value.chars().filter(|c| *c != ',').collect();
    cleaned.parse::<f64>().ok().filter(|n| !n.is_nan())
}

fn is_missing(value: &str) -> bool {
    MISSING.contains(&value.trim())
}

/// Which columns hold numbers: every value present is one, and there is
/// at least one.
pub fn numeric_columns(table: &Table) -> Vec<bool> {
    (0..table.columns.len())
        .map(|i| {
            let mut present = table
                .rows
                .iter()
                .filter_map(|row| row.get(i))
                .filter(|v| !is_missing(v))
                .peekable();
            present.peek().is_some() && present.all(|v| number(v).is_some())
        })
        .collect()
}

/// How the rows are sorted: by which column, which way.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Sort {
    pub column: usize,
    pub ascending: bool,
}

impl Sort {
    /// The sort after a click on `column`'s header: ascending first, then
    /// the other way.
    pub fn after_click(current: Option<Sort>, column: usize) -> Sort {
        match current {
            Some(sort) if sort.column == column => Sort {
                column,
                ascending: !sort.ascending,
            },
            _ => Sort {
                column,
                ascending: true,
            },
        }
    }
}

/// The rows' indices in the order `sort` shows them: numbers by value and
/// text alphabetically (ignoring case), missing values last either way,
/// ties in the kernel's order.
pub fn order(table: &Table, numeric: &[bool], sort: Option<Sort>) -> Vec<usize> {
    let mut order: Vec<usize> = (0..table.rows.len()).collect();
    let Some(Sort { column, ascending }) = sort else {
        return order;
    };
    let is_number = numeric.get(column).copied().unwrap_or(false);
    // Each row's key, read once (not at every comparison).
    let keys: Vec<Key> = table
        .rows
        .iter()
        .map(|row| {
            let value = row.get(column).map(String::as_str).unwrap_or("");
            if is_missing(value) {
                Key::Missing
            } else if is_number {
                Key::Number(number(value).unwrap_or(0.0))
            } else {
                Key::Text(value.to_lowercase())
            }
        })
        .collect();
    order.sort_by(|&a, &b| {
        let ordering = match (&keys[a], &keys[b]) {
            (Key::Missing, Key::Missing) => return Ordering::Equal,
            (Key::Missing, _) => return Ordering::Greater,
            (_, Key::Missing) => return Ordering::Less,
            (Key::Number(x), Key::Number(y)) => x.partial_cmp(y).unwrap_or(Ordering::Equal),
            (Key::Text(x), Key::Text(y)) => x.cmp(y),
            // A column's keys are all numbers or all text.
            _ => Ordering::Equal,
        };
        if ascending {
            ordering
        } else {
            ordering.reverse()
        }
    });
    order
}

/// A value as a sort compares it.
enum Key {
    /// Last either way.
    Missing,
    Number(f64),
    /// Lower-cased.
    Text(String),
}

/// The table as CSV (RFC 4180), header first. A text value that a
/// spreadsheet would run as a formula (`=`, `+`, `-`, `@` first) gets a
/// leading `'`, so that opening a shared result's CSV runs nothing.
pub fn to_csv(table: &Table) -> String {
    let mut csv = String::new();
    for row in std::iter::once(&table.columns).chain(&table.rows) {
        let line: Vec<String> = row.iter().map(|v| csv_field(v)).collect();
        csv.push_str(&line.join(","));
        csv.push_str("\r\n");
    }
    csv
}

fn csv_field(value: &str) -> String {
    let formula = value.starts_with(['=', '+', '-', '@', '\t', '\r']) && number(value).is_none();
    let value = if formula {
        format!("'{value}")
    } else {
        value.to_string()
    };
    if value.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", value.replace('"', "\"\""))
    } else {
        value
    }
}

/// The table as tab-separated lines, as spreadsheets paste it.
pub fn to_tsv(table: &Table) -> String {
    let clean = |v: &String| v.replace(['\t', '\n', '\r'], " ");
    std::iter::once(&table.columns)
        .chain(&table.rows)
        .map(|row| row.iter().map(clean).collect::<Vec<_>>().join("\t"))
        .collect::<Vec<_>>()
        .join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table(columns: &[&str], rows: &[&[&str]]) -> Table {
        Table {
            columns: columns.iter().map(|c| c.to_string()).collect(),
            index_columns: 1,
            rows: rows
                .iter()
                .map(|r| r.iter().map(|v| v.to_string()).collect())
                .collect(),
            elided: None,
        }
    }

    #[test]
    fn numbers_are_read_as_pandas_writes_them() {
        assert_eq!(number("1200.50"), Some(1200.5));
        assert_eq!(number(" -3e2 "), Some(-300.0));
        assert_eq!(number("1,234"), Some(1234.0));
        assert_eq!(number("12.5%"), Some(12.5));
        assert_eq!(number("inf"), Some(f64::INFINITY));
        assert_eq!(number("NaN"), None);
        assert_eq!(number("north"), None);
        assert_eq!(number("2024-01-01"), None);
    }

    #[test]
    fn a_column_is_numeric_when_every_present_value_is_a_number() {
        let t = table(
            &["", "region", "units", "note"],
            &[&["0", "north", "3", "NaN"], &["1", "south", "NaN", "NaN"]],
        );
        assert_eq!(numeric_columns(&t), vec![true, false, true, false]);
    }

    #[test]
    fn rows_sort_by_number_or_text_with_missing_values_last() {
        let t = table(
            &["", "region", "units"],
            &[
                &["0", "north", "10"],
                &["1", "South", "NaN"],
                &["2", "east", "9"],
                &["3", "west", "100"],
            ],
        );
        let numeric = numeric_columns(&t);
        let by = |column, ascending| order(&t, &numeric, Some(Sort { column, ascending }));
        assert_eq!(order(&t, &numeric, None), vec![0, 1, 2, 3]);
        // As numbers, not as text ("100" < "9").
        assert_eq!(by(2, true), vec![2, 0, 3, 1]);
        assert_eq!(by(2, false), vec![3, 0, 2, 1]);
        assert_eq!(by(1, true), vec![2, 0, 1, 3]);
        assert_eq!(by(1, false), vec![3, 1, 0, 2]);
    }

    #[test]
    fn a_click_sorts_ascending_then_the_other_way() {
        let first = Sort::after_click(None, 2);
        assert_eq!(
            first,
            Sort {
                column: 2,
                ascending: true
            }
        );
        let second = Sort::after_click(Some(first), 2);
        assert!(!second.ascending);
        assert_eq!(
            Sort::after_click(Some(second), 1),
            Sort {
                column: 1,
                ascending: true
            }
        );
    }

    #[test]
    fn csv_quotes_what_it_must_and_runs_no_formula() {
        let t = table(
            &["", "name", "value"],
            &[
                &["0", "a, \"b\"", "-1.5"],
                &["1", "=HYPERLINK(\"x\")", "@SUM(A1)"],
                &["2", "line\nbreak", "+1"],
            ],
        );
        assert_eq!(
            to_csv(&t),
            ",name,value\r\n\
             0,\"a, \"\"b\"\"\",-1.5\r\n\
             1,\"'=HYPERLINK(\"\"x\"\")\",'@SUM(A1)\r\n\
             2,\"line\nbreak\",+1\r\n"
        );
    }

    #[test]
    fn tsv_keeps_one_value_per_cell() {
        let t = table(&["", "a"], &[&["0", "x\ty\nz"]]);
        assert_eq!(to_tsv(&t), "\ta\n0\tx y z");
    }
}
