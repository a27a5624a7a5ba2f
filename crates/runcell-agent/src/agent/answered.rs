//! Ran but did not answer: a program that exited cleanly yet printed
//! nothing, printed only an empty value (`None`, `NaN`, an empty frame), or
//! never grouped its rows when the question asks for figures per group (the
//! classic wrong answer: a per-row column and `idxmax()` over rows instead
//! of totals per region). Such a program goes back to the model as a fix,
//! like one that failed.

use crate::sandbox::Language;

/// What a program's report says for each image a program showed.
pub const FIGURE_SHOWN: &str = "[a figure was shown]";

/// What a program's report says for each interactive chart (Plotly, Vega-Lite).
pub const CHART_SHOWN: &str = "[an interactive chart was shown]";

/// What a program's report says for an HTML table shown without a plain form.
pub const HTML_TABLE_SHOWN: &str = "[an HTML table was shown]";

/// What is wrong with a program that ran, told from the outside.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Doubt {
    /// It printed nothing at all.
    Nothing,
    /// It printed only `None`, `NaN`, an empty frame and the like.
    Empty,
    /// The question asks per group; the pandas program never groups.
    Ungrouped,
    /// It only drew a chart, and the question asked for none.
    OnlyFigure,
    /// The question asks for one value; the program printed a whole
    /// column (a pandas Series), as `df.a * df.b.sum()` does.
    WholeColumn,
    /// The question groups by a calendar period (per month, which year);
    /// the pandas program never derives one from its dates (it grouped by
    /// the day).
    NoPeriod(Period),
    /// The question gives a template for its answers (`@mean[value]`) and
    /// the output fills in not every one of them.
    NoAnswerForm,
    /// An answer filled into the question's template is NaN: missing
    /// values were left in (a t-test over a column with gaps).
    NanAnswer,
    /// A template was printed as the program wrote it, `{value}` and all:
    /// its string lacks the `f` prefix.
    NotInterpolated,
}

/// A calendar period a question groups by.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Period {
    Week,
    Month,
    Year,
}

impl Period {
    /// Whether a line of code derives this period from dates, or reads a
    /// column of it.
    fn derived_in(self, line: &str) -> bool {
        const ANY: [&str; 4] = ["to_period", "resample", "Grouper", "strftime"];
        let own: &[&str] = match self {
            Period::Week => &[
                ".week",
                "isocalendar",
                "%W",
                "%U",
                "%V",
                "'week'",
                "\"week\"",
            ],
            Period::Month => &[".month", "%m", ":7]", "'month'", "\"month\"", "split("],
            Period::Year => &[".year", "%Y", ":4]", "'year'", "\"year\"", "split("],
        };
        own.iter().chain(ANY.iter()).any(|m| line.contains(m))
    }
}

impl Doubt {
    /// What the model is told, in place of an explanation request.
    pub fn note(self) -> &'static str {
        match self {
            Doubt::Nothing => NOTHING,
            Doubt::Empty => EMPTY,
            Doubt::Ungrouped => UNGROUPED,
            Doubt::OnlyFigure => ONLY_FIGURE,
            Doubt::WholeColumn => WHOLE_COLUMN,
            Doubt::NoPeriod(Period::Week) => NO_WEEK,
            Doubt::NoPeriod(Period::Month) => NO_MONTH,
            Doubt::NoPeriod(Period::Year) => NO_YEAR,
            Doubt::NoAnswerForm => NO_ANSWER_FORM,
            Doubt::NanAnswer => NAN_ANSWER,
            Doubt::NotInterpolated => NOT_INTERPOLATED,
        }
    }

    /// Its name in metrics and logs.
    pub fn reason(self) -> &'static str {
        match self {
            Doubt::Nothing => "printed_nothing",
            Doubt::Empty => "empty_value",
            Doubt::Ungrouped => "never_grouped",
            Doubt::OnlyFigure => "only_a_chart",
            Doubt::WholeColumn => "whole_column",
            Doubt::NoPeriod(_) => "no_period",
            Doubt::NoAnswerForm => "no_answer_form",
            Doubt::NanAnswer => "nan_answer",
            Doubt::NotInterpolated => "not_interpolated",
        }
    }
}

/// Why the result does not answer `question`; `None` when nothing is wrong
/// that can be told from the outside.
pub fn doubt(question: &str, language: &str, code: &str, report: &str) -> Option<Doubt> {
    if printed_nothing(report) {
        return Some(Doubt::Nothing);
    }
    if only_empty_values(report) {
        return Some(Doubt::Empty);
    }
    // The question's own form for its answers, not followed: a person
    // who asked for `@mean[value]` gets no answer in another form (DABench:
    // 4 of 18 wrong answers were right values in another form, and the
    // form was missing from 8 of 40 outputs).
    let templates = answer_templates(question);
    if !templates.is_empty()
        && !templates
            .iter()
            .all(|name| report.contains(&format!("@{name}[")))
    {
        return Some(Doubt::NoAnswerForm);
    }
    if templates.iter().any(|name| nan_filled(report, name)) {
        return Some(Doubt::NanAnswer);
    }
    if templates
        .iter()
        .any(|name| filled_literally(report, code, name))
    {
        return Some(Doubt::NotInterpolated);
    }
    let asked_for_chart = asks_for_chart(question);
    if only_figures(report) && !asked_for_chart {
        return Some(Doubt::OnlyFigure);
    }
    // A chart (an image, Plotly, Vega-Lite) or a table shown answers a
    // question that asked for one, whatever the program printed beside, and
    // its rows need no grouping of their own (`px.bar` and seaborn sum per
    // bar): only a period the chart never derived still tells it wrong.
    let charted = asked_for_chart && shows_rich_output(report);
    if language != Language::Python.name() || !uses_pandas(code) {
        return None;
    }
    // What the program does is in its code, not its comments ("# total
    // revenue for each region" above a per-row `idxmax()`).
    let statements: Vec<&str> = code.lines().map(without_comment).collect();
    let per_group = asks_per_group(question);
    if per_group && !charted && !groups(&statements) {
        return Some(Doubt::Ungrouped);
    }
    if let Some(period) = asks_per_period(question)
        && !statements.iter().any(|line| period.derived_in(line))
    {
        return Some(Doubt::NoPeriod(period));
    }
    if !per_group && !charted && asks_one_value(question) && prints_series(report) {
        return Some(Doubt::WholeColumn);
    }
    None
}

const NO_ANSWER_FORM: &str = "The question says how to write its answer (such as \
`@name[value]`), but the output does not show every answer in that form. Write the complete \
program again so that its last lines print each answer exactly in the question's form, with \
its names, filled in with the computed values.";

const NAN_ANSWER: &str = "An answer in the output is NaN: missing values were left in the \
data, or a filter matched no rows. Drop missing values from the columns used (`dropna()`) \
unless the question says how to treat them, check that each filter matches the values the \
column really holds (`df['col'].unique()`), and write the complete program again.";

const NOT_INTERPOLATED: &str = "The output shows an answer as the program wrote it, with \
`{…}` in place of the value: the string lacks its `f` prefix. Write \
`print(f\"@name[{value}]\")` and the complete program again.";

/// What the output fills into `name`'s templates.
fn filled<'a>(report: &'a str, name: &str) -> Vec<&'a str> {
    let open = format!("@{name}[");
    report
        .match_indices(&open)
        .map(|(at, _)| {
            let value = &report[at + open.len()..];
            &value[..value.find([']', '\n']).unwrap_or(value.len())]
        })
        .collect()
}

/// Whether the output fills `name`'s template with `{…}` text that the
/// program holds as written (`@total[{total:.2f}]` from a string without
/// its `f`).
fn filled_literally(report: &str, code: &str, name: &str) -> bool {
    filled(report, name).iter().any(|value| {
        let value = value.trim();
        value.contains('{') && value.contains('}') && code.contains(value)
    })
}

/// Whether the output fills `name`'s template with NaN (`@p_value[nan]`).
fn nan_filled(report: &str, name: &str) -> bool {
    filled(report, name)
        .iter()
        .any(|value| value.trim().eq_ignore_ascii_case("nan"))
}

/// The names of the answer templates a question gives (`@mean_fare[...]`),
/// at most sixteen, in order.
pub fn answer_templates(question: &str) -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    for (at, _) in question.match_indices('@') {
        let rest = &question[at + 1..];
        let name: String = rest
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect();
        if !name.is_empty() && rest[name.len()..].starts_with('[') && !names.contains(&name) {
            names.push(name);
            if names.len() == 16 {
                break;
            }
        }
    }
    names
}

const NOTHING: &str = "The program ran but printed nothing, so it did not answer the \
question. Write the complete program again so that it prints the answer with a short label.";

const EMPTY: &str = "The program ran but printed only an empty value (None, NaN or an \
empty table), which does not answer the question. Find why the value is empty (a wrong \
column name, a filter that matches nothing, a function that returns nothing) and write the \
complete corrected program.";

const UNGROUPED: &str = "The question asks for figures per group, but the program never \
groups its rows. Write the complete program again: group the rows first (for example with \
groupby), print the grouped table, then print the answer taken from it.";

const ONLY_FIGURE: &str = "The program only drew a chart, which the question did not ask \
for, and printed no answer. Write the complete program again without a chart: compute the \
answer and print it with a short label.";

const WHOLE_COLUMN: &str = "The question asks for one value, but the program printed a \
whole column of values (a pandas Series). Write the complete program again so that it \
reduces the column to the one value asked for; mind the parentheses: the total of a product \
is `(df['a'] * df['b']).sum()`, while `df['a'] * df['b'].sum()` multiplies every row by a \
total.";

const NO_WEEK: &str = "The question asks per week, but the program never works out the \
week of its dates (it grouped by something else, such as the day). Write the complete program \
again: derive the week (for example `pd.to_datetime(df['date']).dt.to_period('W')`), group by \
it, print the grouped table, then the answer taken from it.";

const NO_MONTH: &str = "The question asks per month, but the program never works out the \
month of its dates (it grouped by something else, such as the day). Write the complete \
program again: derive the month (for example `pd.to_datetime(df['date']).dt.to_period('M')`), \
group by it, print the grouped table, then the answer taken from it.";

const NO_YEAR: &str = "The question asks per year, but the program never works out the year \
of its dates (it grouped by something else, such as the day). Write the complete program \
again: derive the year (for example `pd.to_datetime(df['date']).dt.year`), group by it, \
print the grouped table, then the answer taken from it.";

/// "per month", "each year", "by week", "monthly", "which month": the
/// period a question groups by.
fn asks_per_period(question: &str) -> Option<Period> {
    let q = question.to_lowercase();
    let words: Vec<&str> = q
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .collect();
    let period = |w: &str| match w {
        "week" | "weeks" | "weekly" => Some(Period::Week),
        "month" | "months" | "monthly" => Some(Period::Month),
        "year" | "years" | "yearly" | "annual" | "annually" => Some(Period::Year),
        _ => None,
    };
    words.iter().enumerate().find_map(|(i, w)| {
        let p = period(w)?;
        let before = i.checked_sub(1).map(|b| words[b]);
        let adjective = w.ends_with("ly") || *w == "annual";
        let grouping = matches!(before, Some("per" | "each" | "by" | "every" | "which"));
        // "5% per year", "compounded yearly": a rate, not a grouping.
        ((adjective || grouping) && !q.contains('%')).then_some(p)
    })
}

/// The figure markers of a program that drew and printed nothing else.
fn only_figures(report: &str) -> bool {
    let mut lines = report
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .peekable();
    lines.peek().is_some() && lines.all(|line| RICH_MARKERS[..2].contains(&line))
}

/// The report's lines for a picture, an interactive chart and an HTML table.
const RICH_MARKERS: [&str; 3] = [FIGURE_SHOWN, CHART_SHOWN, HTML_TABLE_SHOWN];

/// Whether the program showed a figure, a chart or an HTML table.
fn shows_rich_output(report: &str) -> bool {
    report
        .lines()
        .map(str::trim)
        .any(|line| RICH_MARKERS.contains(&line))
}

/// "plot", "chart", "draw", "histogram"...: a chart is what was asked for.
fn asks_for_chart(question: &str) -> bool {
    let q = question.to_lowercase();
    [
        "plot",
        "chart",
        "graph",
        "draw",
        "histogram",
        "visual",
        "figure",
        "image",
        "picture",
        "diagram",
        "scatter",
        "heatmap",
        "show me",
    ]
    .iter()
    .any(|w| q.contains(w))
}

/// "What is the total revenue...", "the average price", "how many rows":
/// one figure, unless the question lists or compares ("each", "per" are
/// caught before this).
fn asks_one_value(question: &str) -> bool {
    let q = question.to_lowercase();
    let one = [
        "what is the total",
        "what's the total",
        "the total ",
        "what is the sum",
        "what is the average",
        "what is the mean",
        "what is the median",
        "the average ",
        "the mean ",
        "how many ",
        "how much ",
    ];
    one.iter().any(|p| q.contains(p)) && !q.contains(" list ") && !q.starts_with("list ")
}

/// A pandas Series printed whole: a `Name: x, dtype: y` or `dtype: y` footer
/// after more than a handful of index/value rows.
fn prints_series(report: &str) -> bool {
    let lines: Vec<&str> = report.lines().collect();
    lines.iter().enumerate().any(|(i, line)| {
        let footer = line.trim_start();
        (footer.starts_with("Name: ") && footer.contains(", dtype: ")
            || footer.starts_with("dtype: "))
            && i >= 5
    })
}

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

/// Whether the program's lines (without their comments) group its rows: a
/// pandas grouping, a counter, or a loop statement.
fn groups(statements: &[&str]) -> bool {
    statements.iter().any(|line| {
        line.trim_start().starts_with("for ")
            || [
                "groupby",
                "pivot",
                "crosstab",
                "resample",
                "value_counts",
                "Counter",
                "defaultdict",
                ".agg(",
                "drop_duplicates",
                ".unique(",
            ]
            .iter()
            .any(|m| line.contains(m))
    })
}

/// A line of Python up to its comment: the first `#` outside a string.
pub fn without_comment(line: &str) -> &str {
    let mut quote: Option<char> = None;
    let mut escaped = false;
    for (at, c) in line.char_indices() {
        match quote {
            Some(_) if escaped => escaped = false,
            Some(_) if c == '\\' => escaped = true,
            Some(q) if c == q => quote = None,
            Some(_) => {}
            None if c == '#' => return &line[..at],
            None if c == '\'' || c == '"' => quote = Some(c),
            None => {}
        }
    }
    line
}

/// A word for one row or one value of a table, or a unit: "each row",
/// "per square metre" are not groups.
fn row_unit(word: &str) -> bool {
    matches!(
        word,
        "row"
            | "record"
            | "entry"
            | "value"
            | "observation"
            | "item"
            | "element"
            | "line"
            | "sample"
            | "instance"
            | "point"
            | "data"
            | "column"
            | "cell"
            | "individual"
            | "person"
            | "unit"
            | "case"
            | "square"
            | "cubic"
            | "capita"
            | "one"
            | "of"
            | "other"
    )
}

/// "total revenue per region", "the average price for each product", "total
/// revenue by region", "which region has the largest total".
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
    // "per region" or "for each product" groups when an aggregate comes
    // before it in the question ("the total revenue per region", "the mean
    // fare for each class"); "for each row, compute", "the value of each
    // passenger" and "per square metre" do not. DABench: the check fired in
    // 6 of 40 turns on any "each"/"per", 5 of them on a right first program.
    let aggregated_before = |i: usize| words[i.saturating_sub(6)..i].iter().any(|w| aggregate(w));
    for (i, pair) in words.windows(2).enumerate() {
        match pair {
            // "per region", not "per cent" or "5% per year" in a rate.
            ["per" | "each", next]
                if !matches!(*next, "cent" | "year" | "annum" | "hour" | "second")
                    && !row_unit(next)
                    && aggregated_before(i) =>
            {
                return true;
            }
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
    fn a_chart_of_any_kind_answers_a_question_that_asks_for_one() {
        // Issue 41: a Plotly-only program was sent back three times.
        let chart = format!("{}\n", CHART_SHOWN);
        let per_row =
            format!("{PANDAS}import plotly.express as px\npx.line(df, x='date', y='units').show()");
        for question in [
            "plot the units sold per region",
            "Draw an interactive chart of units by region",
        ] {
            assert_eq!(
                doubt(question, "python", &per_row, &chart),
                None,
                "{question}"
            );
            let figure = format!("{}\n", FIGURE_SHOWN);
            assert_eq!(
                doubt(question, "python", &per_row, &figure),
                None,
                "{question}"
            );
            let table = format!("{}\n", HTML_TABLE_SHOWN);
            assert_eq!(
                doubt(question, "python", &per_row, &table),
                None,
                "{question}"
            );
        }
        // Not asked for: a chart alone is no answer, whichever library drew it.
        assert_eq!(
            doubt("what is the total revenue", "python", "", &chart),
            Some(Doubt::OnlyFigure)
        );
        // A chart of days for a question per month is still the wrong chart.
        assert_eq!(
            doubt("plot the units sold per month", "python", &per_row, &chart),
            Some(Doubt::NoPeriod(Period::Month))
        );
        // Asked for a chart but shown none: the usual checks still hold.
        assert_eq!(
            doubt(
                "plot the total units per region",
                "python",
                &per_row,
                "West 3\n"
            ),
            Some(Doubt::Ungrouped)
        );
    }

    #[test]
    fn a_program_that_printed_nothing_or_only_empty_values_did_not_answer() {
        assert_eq!(
            doubt("q", "python", "x = 1", "(the program printed nothing)"),
            Some(Doubt::Nothing)
        );
        assert_eq!(doubt("q", "python", "x = 1", "  \n"), Some(Doubt::Nothing));
        assert_eq!(doubt("q", "python", "", "None\n"), Some(Doubt::Empty));
        assert_eq!(
            doubt("q", "python", "", "Average: nan\n"),
            Some(Doubt::Empty)
        );
        assert_eq!(
            doubt(
                "q",
                "python",
                "",
                "Empty DataFrame\nColumns: [region, units]\nIndex: []\n"
            ),
            Some(Doubt::Empty)
        );
        assert_eq!(doubt("q", "python", "", "Total: 42\n"), None);
        assert_eq!(
            doubt("plot it", "python", "", "[a figure was shown]\n"),
            None
        );
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
                Some(Doubt::Ungrouped),
                "{q}"
            );
            assert_eq!(doubt(q, "python", &grouped, "West 10\n"), None, "{q}");
        }
        // Not a grouping question, or no table: one row, one value, a
        // unit, nothing aggregated before the "each".
        for q in [
            "For each row, compute the ratio of A to B and report the mean ratio.",
            "Calculate the mean of each value after scaling.",
            "What is the population density per square kilometre?",
            "Create a new column with the age of each passenger.",
            "What is 1000 at 5% per year for 10 years?",
            "Divide 10 by 4.",
            "Sort the rows by price and print the first.",
            "Which row has the largest price?",
        ] {
            assert_eq!(doubt(q, "python", &per_row, "1628.89\n"), None, "{q}");
        }
        // What the 1.5B wrote in the agent benchmark: a comment saying "for
        // each region" over a per-row idxmax. Comments are not code; a loop
        // statement and strings holding `#` are.
        let commented = format!(
            "{PANDAS}# Calculate total revenue for each region\ndf['t'] = df.units * df.price  # for each row\n\
             print(df.loc[df['t'].idxmax(), 'region'])"
        );
        let q = "Which region has the largest total revenue (units times price)?";
        assert_eq!(
            doubt(q, "python", &commented, "North\n"),
            Some(Doubt::Ungrouped)
        );
        let looped = format!(
            "{PANDAS}totals = {{}}\nfor _, row in df.iterrows():\n    \
             totals[row.region] = totals.get(row.region, 0) + row.units * row.price\nprint(totals)"
        );
        assert_eq!(doubt(q, "python", &looped, "{'West': 3}\n"), None);
        let in_a_string = format!("{PANDAS}print('#1:', df.groupby('region').units.sum())");
        assert_eq!(doubt(q, "python", &in_a_string, "#1: West 3\n"), None);
        assert_eq!(without_comment("x = 'a # b' # c"), "x = 'a # b' ");
        assert_eq!(without_comment(r##"s = "\"#" # c"##), r##"s = "\"#" "##);
        assert_eq!(doubt("total per region", "python", "print(3)", "3\n"), None);
        assert_eq!(doubt("total per region", "bash", &per_row, "3\n"), None);
    }

    #[test]
    fn a_question_per_month_needs_a_program_that_finds_the_month() {
        // What the 1.5B wrote in the agent benchmark: totals per day.
        let by_day = format!(
            "{PANDAS}# total revenue per month\ndf['amount'] = df['units'] * df['price']\n\
             monthly_revenue = df.groupby('date')['amount'].sum()\nprint(monthly_revenue)"
        );
        let by_month = format!(
            "{PANDAS}df['month'] = pd.to_datetime(df['date']).dt.to_period('M')\n\
             print(df.groupby('month')['units'].sum())"
        );
        let by_slice = format!("{PANDAS}print(df.groupby(df['date'].str[:7])['units'].sum())");
        let q = "What is the total revenue per month, and which month had the highest?";
        assert_eq!(
            doubt(q, "python", &by_day, "date\n2024-01-03 874.8\n"),
            Some(Doubt::NoPeriod(Period::Month))
        );
        assert_eq!(doubt(q, "python", &by_month, "2024-01 100\n"), None);
        assert_eq!(doubt(q, "python", &by_slice, "2024-01 100\n"), None);
        assert_eq!(
            doubt(
                "Plot monthly sales",
                "python",
                &by_day,
                "[a figure was shown]\n"
            ),
            Some(Doubt::NoPeriod(Period::Month))
        );
        assert_eq!(
            doubt("Total units by year", "python", &by_day, "x 1\n"),
            Some(Doubt::NoPeriod(Period::Year))
        );
        // Not a grouping by period.
        for q in [
            "What is 1000 at 5% per year for 10 years?",
            "How many units were sold in March?",
            "What was the revenue last month?",
            "1000 dollars at 5% compounded yearly: how much after 10 years?",
        ] {
            assert_eq!(asks_per_period(q), None, "{q}");
        }
        assert_eq!(Doubt::NoPeriod(Period::Month).reason(), "no_period");
        assert!(Doubt::NoPeriod(Period::Week).note().contains("per week"));
    }

    #[test]
    fn a_chart_nobody_asked_for_is_not_an_answer() {
        let drew = "[a figure was shown]\n";
        assert_eq!(
            doubt("List the prime numbers below 50.", "python", "", drew),
            Some(Doubt::OnlyFigure)
        );
        assert_eq!(doubt("Plot the primes below 50.", "python", "", drew), None);
        assert_eq!(doubt("Draw a sine wave", "python", "", drew), None);
        assert_eq!(
            doubt(
                "List the primes below 50.",
                "python",
                "",
                "Primes: [2, 3]\n[a figure was shown]\n"
            ),
            None
        );
    }

    #[test]
    fn one_value_asked_and_a_whole_column_printed_is_not_an_answer() {
        let column = "Total: 0     28269.72\n1      2355.81\n2     29054.99\n3     43975.12\n4     20417.02\n5      6282.16\nName: units, dtype: float64\n";
        let q = "What is the total revenue (units times price) over all of sales.csv?";
        let code = format!("{PANDAS}print(df['units'] * df['price'].sum())");
        assert_eq!(doubt(q, "python", &code, column), Some(Doubt::WholeColumn));
        assert_eq!(doubt(q, "python", &code, "Total: 28269.72\n"), None);
        // Asked for a list, or per group: a column is the answer.
        let grouped = format!("{PANDAS}print(df.groupby('region').units.sum())");
        assert_eq!(
            doubt("What is the total per region?", "python", &grouped, column),
            None
        );
        assert_eq!(
            doubt("Show the prices of all rows.", "python", &code, column),
            None
        );
        // Not pandas: not judged.
        assert_eq!(doubt(q, "python", "print(1)", column), None);
    }

    #[test]
    fn reasons_name_the_doubt() {
        assert_eq!(Doubt::Nothing.reason(), "printed_nothing");
        assert_eq!(Doubt::Empty.reason(), "empty_value");
        assert_eq!(Doubt::Ungrouped.reason(), "never_grouped");
        assert_eq!(Doubt::OnlyFigure.reason(), "only_a_chart");
        assert_eq!(Doubt::WholeColumn.reason(), "whole_column");
        assert!(
            Doubt::WholeColumn
                .note()
                .contains("(df['a'] * df['b']).sum()")
        );
    }

    #[test]
    fn an_answer_asked_in_a_form_is_printed_in_it() {
        let q = "What is the mean fare?\n\n@mean_fare[mean_fare_value] where the value has two decimals; \
                 and @count[n].";
        assert_eq!(answer_templates(q), ["mean_fare", "count"]);
        assert_eq!(
            doubt(q, "python", "print(1)", "mean fare: 34.65\ncount: 3\n"),
            Some(Doubt::NoAnswerForm)
        );
        assert_eq!(
            doubt(q, "python", "print(1)", "@mean_fare[34.65]\n"),
            Some(Doubt::NoAnswerForm),
            "every name"
        );
        assert_eq!(
            doubt(q, "python", "print(1)", "@mean_fare[34.65]\n@count[3]\n"),
            None
        );
        // An e-mail address or a decorator is no template.
        assert!(answer_templates("mail a@b.com, use @property").is_empty());
        assert!(Doubt::NoAnswerForm.note().contains("`@name[value]`"));
        // A NaN filled in: missing values were left in.
        assert_eq!(
            doubt(q, "python", "print(1)", "@mean_fare[nan]\n@count[3]\n"),
            Some(Doubt::NanAnswer)
        );
        assert_eq!(
            doubt(
                q,
                "python",
                "print(1)",
                "@mean_fare[34.6]\n@count[3]\nnan in a table\n"
            ),
            None
        );
    }
}
