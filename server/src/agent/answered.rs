//! Ran but did not answer: a program that exited cleanly yet printed
//! nothing, printed only an empty value (`None`, `NaN`, an empty frame), or
//! never grouped its rows when the question asks for figures per group (the
//! classic wrong answer: a per-row column and `idxmax()` over rows instead
//! of totals per region). Such a program goes back to the model as a fix,
//! like one that failed.

/// Why the result does not answer `question`, as a note for the model;
/// `None` when nothing is wrong that can be told from the outside.
pub fn doubt(question: &str, language: &str, code: &str, report: &str) -> Option<&'static str> {
    if printed_nothing(report) {
        return Some(NOTHING);
    }
    if only_empty_values(report) {
        return Some(EMPTY);
    }
    if language == "python" && uses_pandas(code) && asks_per_group(question) && !groups(code) {
        return Some(UNGROUPED);
    }
    None
}

/// Which of the doubts it was, for metrics and logs.
pub fn reason(note: &str) -> &'static str {
    match note {
        NOTHING => "printed_nothing",
        EMPTY => "empty_value",
        UNGROUPED => "never_grouped",
        _ => "other",
    }
}

pub const NOTHING: &str = "The program ran but printed nothing, so it did not answer the \
question. Write the complete program again so that it prints the answer with a short label.";

pub const EMPTY: &str = "The program ran but printed only an empty value (None, NaN or an \
empty table), which does not answer the question. Find why the value is empty (a wrong \
column name, a filter that matches nothing, a function that returns nothing) and write the \
complete corrected program.";

pub const UNGROUPED: &str = "The question asks for figures per group, but the program never \
groups its rows. Write the complete program again: group the rows first (for example with \
groupby), print the grouped table, then print the answer taken from it.";

fn printed_nothing(report: &str) -> bool {
    let report = report.trim();
    report.is_empty() || report == "(the program printed nothing)"
}

/// Every line printed is an empty value, maybe after a label.
fn only_empty_values(report: &str) -> bool {
    let mut lines = report
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .peekable();
    if lines.peek().is_none() {
        return false;
    }
    lines.all(|line| {
        if line.starts_with("Columns: [")
            || line == "Index: []"
            || line.starts_with("Series([]")
            || line == "Empty DataFrame"
        {
            return true;
        }
        let value = line.rsplit_once(": ").map_or(line, |(_, v)| v).trim();
        matches!(
            value,
            "None" | "nan" | "NaN" | "NaT" | "<NA>" | "[]" | "{}" | "()" | "''" | "\"\"" | "set()"
        )
    })
}

fn uses_pandas(code: &str) -> bool {
    [
        "pandas",
        "pd.",
        "read_csv",
        "read_json",
        "DataFrame",
        "read_excel",
        "read_parquet",
    ]
    .iter()
    .any(|m| code.contains(m))
}

fn groups(code: &str) -> bool {
    [
        "groupby",
        "pivot",
        "crosstab",
        "resample",
        "value_counts",
        "Counter",
        "defaultdict",
        "for ",
        ".agg(",
        "drop_duplicates",
        ".unique(",
    ]
    .iter()
    .any(|m| code.contains(m))
}

/// "per region", "for each month", "total revenue by region", "which region
/// has the largest total".
fn asks_per_group(question: &str) -> bool {
    let q = question.to_lowercase();
    let words: Vec<&str> = q
        .split(|c: char| !c.is_alphanumeric() && c != '%')
        .filter(|w| !w.is_empty())
        .collect();
    let aggregate = |w: &str| {
        matches!(
            w,
            "total"
                | "totals"
                | "sum"
                | "sums"
                | "average"
                | "averages"
                | "mean"
                | "count"
                | "counts"
                | "revenue"
                | "sales"
                | "number"
        )
    };
    let extreme = |w: &str| {
        matches!(
            w,
            "largest"
                | "highest"
                | "most"
                | "biggest"
                | "smallest"
                | "lowest"
                | "least"
                | "fewest"
                | "top"
                | "best"
                | "worst"
        )
    };
    for (i, pair) in words.windows(2).enumerate() {
        match pair {
            // "per region", not "per cent" or "5% per year" in a rate.
            ["per", next] if !matches!(*next, "cent" | "year" | "annum" | "hour" | "second") => {
                return true;
            }
            ["each", _] => return true,
            // "total revenue by region": an aggregate within three words before.
            ["by", _] if words[i.saturating_sub(3)..i].iter().any(|w| aggregate(w)) => {
                return true;
            }
            _ => {}
        }
    }
    // "which region has the largest total (revenue)".
    if let Some(which) = words.iter().position(|w| *w == "which") {
        let rest = &words[which..words.len().min(which + 8)];
        return rest.iter().any(|w| extreme(w)) && rest.iter().any(|w| aggregate(w));
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    const PANDAS: &str = "import pandas as pd\ndf = pd.read_csv('sales.csv')\n";

    #[test]
    fn a_program_that_printed_nothing_or_only_empty_values_did_not_answer() {
        assert_eq!(
            doubt("q", "python", "x = 1", "(the program printed nothing)"),
            Some(NOTHING)
        );
        assert_eq!(doubt("q", "python", "x = 1", "  \n"), Some(NOTHING));
        assert_eq!(doubt("q", "python", "", "None\n"), Some(EMPTY));
        assert_eq!(doubt("q", "python", "", "Average: nan\n"), Some(EMPTY));
        assert_eq!(
            doubt(
                "q",
                "python",
                "",
                "Empty DataFrame\nColumns: [region, units]\nIndex: []\n"
            ),
            Some(EMPTY)
        );
        assert_eq!(doubt("q", "python", "", "Total: 42\n"), None);
        assert_eq!(doubt("q", "python", "", "[a figure was shown]\n"), None);
        assert_eq!(doubt("q", "python", "", "None\n42\n"), None);
    }

    #[test]
    fn a_per_group_question_needs_a_program_that_groups() {
        let per_row = format!(
            "{PANDAS}df['revenue'] = df.units * df.price\nprint(df.loc[df.revenue.idxmax(), 'region'])"
        );
        let grouped = format!("{PANDAS}t = df.groupby('region').revenue.sum()\nprint(t)");
        for q in [
            "Which region has the largest total revenue (units times price)?",
            "What is the total revenue per region?",
            "Show the average price for each product.",
            "Total units by region, please.",
        ] {
            assert_eq!(
                doubt(q, "python", &per_row, "West\n"),
                Some(UNGROUPED),
                "{q}"
            );
            assert_eq!(doubt(q, "python", &grouped, "West 10\n"), None, "{q}");
        }
        // Not a grouping question, or no table.
        for q in [
            "What is 1000 at 5% per year for 10 years?",
            "Divide 10 by 4.",
            "Sort the rows by price and print the first.",
            "Which row has the largest price?",
        ] {
            assert_eq!(doubt(q, "python", &per_row, "1628.89\n"), None, "{q}");
        }
        assert_eq!(doubt("total per region", "python", "print(3)", "3\n"), None);
        assert_eq!(doubt("total per region", "bash", &per_row, "3\n"), None);
    }

    #[test]
    fn reasons_name_the_doubt() {
        assert_eq!(reason(NOTHING), "printed_nothing");
        assert_eq!(reason(EMPTY), "empty_value");
        assert_eq!(reason(UNGROUPED), "never_grouped");
    }
}
