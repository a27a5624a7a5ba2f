//! Ran but did not answer, told from what ran and never from how the
//! question is phrased: a program that exited cleanly yet printed nothing,
//! printed only an empty value (`None`, `NaN`, an empty frame), showed
//! only figures with nothing drawn on them, or left the
//! question's own answer template (`@mean[value]`) unfilled, filled with
//! NaN or not interpolated. Such a program goes back to the model, with the
//! reason shown to the person on the attempt sent back. A program that ran
//! without error and printed every answer the question asked for stands:
//! word lists over the question's English sent right answers back ("the
//! mean fare paid **by** the passengers" read as a grouping).

/// What a program's report says for each image a program showed.
pub const FIGURE_SHOWN: &str = "[a figure was shown]";

/// What a program's report says for each interactive chart (Plotly, Vega-Lite).
pub const CHART_SHOWN: &str = "[an interactive chart was shown]";

/// What a program's report says for an HTML table shown without a plain form.
pub const HTML_TABLE_SHOWN: &str = "[an HTML table was shown]";

/// What the jail's Python kernel writes on stderr for a figure it left out
/// because nothing was drawn on it (`plt.subplots()` and no plot): the
/// line its hooks (`jail/kernel/notebook_hooks.py`) write, exactly.
pub const BLANK_FIGURE_LEFT_OUT: &str = "runcell: a figure with nothing drawn on it was left out";

/// What is wrong with a program that ran, told from the outside.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Doubt {
    /// It printed nothing at all.
    Nothing,
    /// It printed only `None`, `NaN`, an empty frame and the like.
    Empty,
    /// Its only figures had nothing drawn on them (empty axes), and it
    /// printed nothing else but empty values.
    BlankFigure,
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

impl Doubt {
    /// What the model is told, in place of an explanation request.
    pub fn note(self) -> &'static str {
        match self {
            Doubt::Nothing => NOTHING,
            Doubt::Empty => EMPTY,
            Doubt::BlankFigure => BLANK_FIGURE,
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
            Doubt::BlankFigure => "blank_figure",
            Doubt::NoAnswerForm => "no_answer_form",
            Doubt::NanAnswer => "nan_answer",
            Doubt::NotInterpolated => "not_interpolated",
        }
    }

    /// Why the attempt was sent back, for the person: what in the output
    /// of `question`'s program is missing or wrong.
    pub fn shown(self, question: &str, report: &str) -> String {
        let templates = answer_templates(question);
        let named = |pick: &dyn Fn(&str) -> bool| {
            templates
                .iter()
                .filter(|name| pick(name))
                .map(|name| format!("`@{name}[…]`"))
                .collect::<Vec<_>>()
                .join(", ")
        };
        match self {
            Doubt::Nothing => "Sent back: the program printed nothing.".into(),
            Doubt::Empty => "Sent back: the program printed only an empty value (None, NaN or \
                             an empty table)."
                .into(),
            Doubt::BlankFigure => {
                "Sent back: the program's figures had nothing drawn on them.".into()
            }
            Doubt::NoAnswerForm => format!(
                "Sent back: the output does not show {} in the question's form.",
                named(&|name| !report.contains(&format!("@{name}[")))
            ),
            Doubt::NanAnswer => format!(
                "Sent back: the output fills {} with NaN.",
                named(&|name| nan_filled(report, name))
            ),
            Doubt::NotInterpolated => format!(
                "Sent back: the output shows {} as the program wrote it, not its value.",
                named(&|name| !filled(report, name).iter().all(|v| !v.contains('{')))
            ),
        }
    }
}

/// Why the result does not answer `question`; `None` when nothing is wrong
/// that can be told from what ran.
pub fn doubt(question: &str, code: &str, report: &str) -> Option<Doubt> {
    if printed_nothing(report) {
        return Some(Doubt::Nothing);
    }
    if only_blank_figures(report) {
        return Some(Doubt::BlankFigure);
    }
    if only_empty_values(report) {
        return Some(Doubt::Empty);
    }
    // The question's own form for its answers, not followed: a person
    // who asked for `@mean[value]` gets no answer in another form (DABench:
    // 4 of 18 wrong answers were right values in another form, and the
    // form was missing from 8 of 40 outputs).
    let templates = answer_templates(question);
    if !templates
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

const BLANK_FIGURE: &str = "The program ran but its figures had nothing drawn on them (empty \
axes), so it did not answer the question. Draw the data on the axes the program makes (such as \
`ax.plot(...)`, `ax.bar(...)` or `df.plot(ax=ax)`, not on a new figure) and write the complete \
program again.";

/// At least one figure was left out as blank, and every other line printed
/// is an empty value.
fn only_blank_figures(report: &str) -> bool {
    let lines: Vec<&str> = report
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    let (blank, rest): (Vec<&str>, Vec<&str>) =
        lines.into_iter().partition(|l| *l == BLANK_FIGURE_LEFT_OUT);
    !blank.is_empty() && (rest.is_empty() || only_empty_values(&rest.join("\n")))
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

#[cfg(test)]
mod tests {
    use super::*;

    const PANDAS: &str = "import pandas as pd\ndf = pd.read_csv('sales.csv')\n";

    #[test]
    fn a_program_that_printed_nothing_or_only_empty_values_did_not_answer() {
        assert_eq!(
            doubt("q", "x = 1", "(the program printed nothing)"),
            Some(Doubt::Nothing)
        );
        assert_eq!(doubt("q", "x = 1", "  \n"), Some(Doubt::Nothing));
        assert_eq!(doubt("q", "", "None\n"), Some(Doubt::Empty));
        assert_eq!(doubt("q", "", "Average: nan\n"), Some(Doubt::Empty));
        assert_eq!(
            doubt(
                "q",
                "",
                "Empty DataFrame\nColumns: [region, units]\nIndex: []\n"
            ),
            Some(Doubt::Empty)
        );
        assert_eq!(doubt("q", "", "Total: 42\n"), None);
        assert_eq!(doubt("plot it", "", "[a figure was shown]\n"), None);
        assert_eq!(doubt("q", "", "None\n42\n"), None);
        assert_eq!(
            Doubt::Nothing.shown("q", ""),
            "Sent back: the program printed nothing."
        );
    }

    #[test]
    fn an_answer_that_ran_and_printed_what_was_asked_stands() {
        // DABench's first question: the right answer was sent back as
        // "never grouped" ("paid by the passengers"), and the grouped second
        // answer, wrong, stood.
        let q = "Calculate the mean fare paid by the passengers.\n@mean_fare[mean_fare_value]";
        let code = format!(
            "{PANDAS}import statistics\nprint(f\"@mean_fare[{{statistics.mean(df['Fare']):.2f}}]\")"
        );
        assert_eq!(doubt(q, &code, "@mean_fare[34.65]\n"), None);
        // What the word lists sent back: per group, per month, one value
        // and a whole column, a chart nobody asked for.
        let per_row = format!("{PANDAS}print(df.loc[df.units.idxmax(), 'region'])");
        for (q, printed) in [
            ("What is the total revenue per region?", "West\n"),
            ("What is the total revenue per month?", "2024-01-03 874.8\n"),
            (
                "What is the total revenue?",
                "0 1\n1 2\n2 3\n3 4\n4 5\n5 6\nName: units, dtype: int64\n",
            ),
            ("List the prime numbers below 50.", "[a figure was shown]\n"),
        ] {
            assert_eq!(doubt(q, &per_row, printed), None, "{q}");
        }
    }

    #[test]
    fn an_answer_asked_in_a_form_is_printed_in_it() {
        let q = "What is the mean fare?\n\n@mean_fare[mean_fare_value] where the value has two decimals; \
                 and @count[n].";
        assert_eq!(answer_templates(q), ["mean_fare", "count"]);
        assert_eq!(
            doubt(q, "print(1)", "mean fare: 34.65\ncount: 3\n"),
            Some(Doubt::NoAnswerForm)
        );
        assert_eq!(
            doubt(q, "print(1)", "@mean_fare[34.65]\n"),
            Some(Doubt::NoAnswerForm),
            "every name"
        );
        assert_eq!(
            Doubt::NoAnswerForm.shown(q, "@mean_fare[34.65]\n"),
            "Sent back: the output does not show `@count[…]` in the question's form."
        );
        assert_eq!(doubt(q, "print(1)", "@mean_fare[34.65]\n@count[3]\n"), None);
        // An e-mail address or a decorator is no template.
        assert!(answer_templates("mail a@b.com, use @property").is_empty());
        assert!(Doubt::NoAnswerForm.note().contains("`@name[value]`"));
        // A NaN filled in: missing values were left in.
        assert_eq!(
            doubt(q, "print(1)", "@mean_fare[nan]\n@count[3]\n"),
            Some(Doubt::NanAnswer)
        );
        assert_eq!(
            Doubt::NanAnswer.shown(q, "@mean_fare[nan]\n@count[3]\n"),
            "Sent back: the output fills `@mean_fare[…]` with NaN."
        );
        assert_eq!(
            doubt(
                q,
                "print(1)",
                "@mean_fare[34.6]\n@count[3]\nnan in a table\n"
            ),
            None
        );
        // Not interpolated: the `{…}` the program wrote, printed as is.
        let code = "print('@mean_fare[{m:.2f}]')\nprint(f'@count[{n}]')";
        let report = "@mean_fare[{m:.2f}]\n@count[3]\n";
        assert_eq!(doubt(q, code, report), Some(Doubt::NotInterpolated));
        assert_eq!(
            Doubt::NotInterpolated.shown(q, report),
            "Sent back: the output shows `@mean_fare[…]` as the program wrote it, not its value."
        );
    }

    #[test]
    fn a_program_whose_only_figures_were_blank_did_not_answer() {
        let blank = format!("{BLANK_FIGURE_LEFT_OUT}\n");
        let code = "import matplotlib.pyplot as plt\nfig, ax = plt.subplots()";
        assert_eq!(
            doubt("Plot revenue per month", code, &blank),
            Some(Doubt::BlankFigure)
        );
        assert_eq!(
            doubt("q", code, &format!("{blank}{blank}")),
            Some(Doubt::BlankFigure),
            "two blank figures"
        );
        assert_eq!(
            doubt("q", code, &format!("Revenue: nan\n{blank}")),
            Some(Doubt::BlankFigure),
            "beside an empty value"
        );
        // A drawn figure or a printed value beside a blank one answers.
        assert_eq!(doubt("q", code, &format!("{blank}{FIGURE_SHOWN}\n")), None);
        assert_eq!(doubt("q", code, &format!("Total: 42\n{blank}")), None);
        // The kernel's line is matched whole, not as part of another.
        assert_eq!(
            doubt("q", code, &format!("echo: {BLANK_FIGURE_LEFT_OUT}\n")),
            None
        );
        assert_eq!(Doubt::BlankFigure.reason(), "blank_figure");
        assert_eq!(
            Doubt::BlankFigure.shown("q", &blank),
            "Sent back: the program's figures had nothing drawn on them."
        );
        assert!(Doubt::BlankFigure.note().contains("`ax.plot(...)`"));
    }

    /// The line the agent reads is the line the jail's kernel writes.
    #[test]
    fn the_blank_figure_line_is_the_kernels() {
        let hooks = include_str!("../../../runcell-sandbox/src/jail/kernel/notebook_hooks.py");
        assert!(
            hooks.contains(&format!("'{BLANK_FIGURE_LEFT_OUT}\\n'")),
            "notebook_hooks.py writes another line"
        );
    }

    #[test]
    fn comments_end_at_the_first_hash_outside_a_string() {
        assert_eq!(without_comment("x = 'a # b' # c"), "x = 'a # b' ");
        assert_eq!(without_comment(r##"s = "\"#" # c"##), r##"s = "\"#" "##);
    }
}
