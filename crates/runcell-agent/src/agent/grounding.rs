//! Whether an explanation's figures are grounded: every number it names must
//! appear in what the program printed or in the question, compared as
//! numbers (`5,200.25`, `5200.25`, and `5200` or `5200.3` for a rounded
//! mention of it; `45%` for `0.45`). A number that appears nowhere was made
//! up by the model, and an explanation that invents figures turns a wrong
//! answer into a believable one.

mod plain;
pub use plain::plain_figures;

/// A number as written: its value and how many decimals it was given with.
#[derive(Clone, Debug, PartialEq)]
pub struct Figure {
    /// As written in the text.
    pub text: String,
    /// Its magnitude (signs are left out: "fell by 5" names `-5`).
    pub value: f64,
    /// Digits after the decimal point (0 for integers); for scientific
    /// notation, the precision of the mantissa scaled by the exponent.
    pub decimals: i32,
    pub percent: bool,
}

/// The most figures read from one text: outputs can be long.
const MAX_FIGURES: usize = 20_000;

/// The numbers in `text`. Digits inside a word or a name (`df2`, `Q4_K`,
/// `utf-8`'s `8` counts: it follows a dash, not a letter) are not figures,
/// nor are the markers of a numbered list.
pub fn figures(text: &str) -> Vec<Figure> {
    let bytes = text.as_bytes();
    let mut found = Vec::new();
    let mut i = 0;
    while i < bytes.len() && found.len() < MAX_FIGURES {
        if !bytes[i].is_ascii_digit() {
            i += 1;
            continue;
        }
        let start = i;
        // Part of an identifier or a word: skip the whole run.
        let glued =
            start > 0 && (bytes[start - 1].is_ascii_alphabetic() || bytes[start - 1] == b'_');
        let mut end = i;
        let mut digits = String::new();
        // Integer part, with thousands separators only in groups of three.
        while end < bytes.len() {
            let c = bytes[end];
            if c.is_ascii_digit() {
                digits.push(c as char);
                end += 1;
            } else if c == b','
                && bytes
                    .get(end + 1..end + 4)
                    .is_some_and(|g| g.iter().all(u8::is_ascii_digit))
                && !bytes.get(end + 4).is_some_and(u8::is_ascii_digit)
                && !digits.is_empty()
            {
                end += 1;
            } else {
                break;
            }
        }
        let mut decimals = 0;
        if bytes.get(end) == Some(&b'.') && bytes.get(end + 1).is_some_and(u8::is_ascii_digit) {
            digits.push('.');
            end += 1;
            while end < bytes.len() && bytes[end].is_ascii_digit() {
                digits.push(bytes[end] as char);
                decimals += 1;
                end += 1;
            }
        }
        // Scientific notation: 1.234568e+05.
        let mut exponent = 0i32;
        if matches!(bytes.get(end), Some(b'e' | b'E')) {
            let mut j = end + 1;
            let negative = bytes.get(j) == Some(&b'-');
            if matches!(bytes.get(j), Some(b'+' | b'-')) {
                j += 1;
            }
            let exp_start = j;
            while j < bytes.len() && bytes[j].is_ascii_digit() && j - exp_start < 4 {
                j += 1;
            }
            if j > exp_start && !bytes.get(j).is_some_and(u8::is_ascii_alphanumeric) {
                exponent = text[exp_start..j].parse().unwrap_or(0);
                if negative {
                    exponent = -exponent;
                }
                end = j;
            }
        }
        let followed_by_letter = bytes
            .get(end)
            .is_some_and(|c| c.is_ascii_alphabetic() || *c == b'_')
            // "10x", "3rd", "5th", "2nd", "1st", "100k" and units are still figures.
            && !unit_suffix(&text[end..]);
        i = end.max(start + 1);
        if glued || followed_by_letter || list_marker(text, start, end) {
            continue;
        }
        let Ok(value) = format!("{digits}e{exponent}").parse::<f64>() else {
            continue;
        };
        if !value.is_finite() {
            continue;
        }
        let percent = bytes.get(end) == Some(&b'%');
        found.push(Figure {
            text: text[start..end].to_string(),
            value,
            decimals: decimals - exponent,
            percent,
        });
    }
    found
}

/// Whether what follows a number is a unit or an ordinal, not a name.
fn unit_suffix(rest: &str) -> bool {
    let word: String = rest
        .chars()
        .take_while(|c| c.is_ascii_alphabetic())
        .collect::<String>()
        .to_ascii_lowercase();
    matches!(
        word.as_str(),
        "st" | "nd"
            | "rd"
            | "th"
            | "x"
            | "k"
            | "m"
            | "b"
            | "s"
            | "ms"
            | "kb"
            | "mb"
            | "gb"
            | "px"
            | "cm"
            | "mm"
            | "km"
            | "kg"
            | "g"
            | "h"
            | "min"
            | "d"
    )
}

/// `1.` or `2)` opening a line: a numbered list, not a figure.
fn list_marker(text: &str, start: usize, end: usize) -> bool {
    let line_start = text[..start].rfind('\n').map_or(0, |i| i + 1);
    let before = text[line_start..start].trim();
    let after = &text[end..];
    before.is_empty()
        && (after.starts_with(". ") || after.starts_with(") "))
        && text[start..end].len() <= 2
}

/// Whether `mention` names `source`: the same number, or `source` rounded
/// to the decimals the mention is given with, or a percentage of it.
pub fn names(mention: &Figure, source: &Figure) -> bool {
    // `45%` names 0.45, and `0.15` names the question's `15%`.
    let candidates: &[f64] = match (mention.percent, source.percent) {
        (true, false) => &[source.value, source.value * 100.0],
        (false, true) => &[source.value, source.value / 100.0],
        _ => &[source.value],
    };
    candidates.iter().any(|&s| {
        let half = 0.5 * 10f64.powi(-mention.decimals);
        (mention.value - s).abs() <= half * (1.0 + 1e-9) + f64::EPSILON * s.abs()
    })
}

/// The figures of `explanation` that appear in none of `sources`. Inline
/// code that quotes the program (`range(1, 51)`) is the program's, which the
/// person sees beside it, not a figure of the answer.
pub fn invented(explanation: &str, sources: &[&str], code: &str) -> Vec<String> {
    let known: Vec<Figure> = sources.iter().flat_map(|s| figures(s)).collect();
    let mut missing: Vec<String> = Vec::new();
    for mention in figures(&without_quoted_code(explanation, code)) {
        if !known.iter().any(|source| names(&mention, source)) && !missing.contains(&mention.text) {
            missing.push(mention.text);
        }
    }
    missing
}

/// `text` with each `inline code` span that appears verbatim in `code`
/// blanked out.
fn without_quoted_code(text: &str, code: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(open) = rest.find('`') {
        let after = &rest[open + 1..];
        let Some(close) = after.find('`') else { break };
        let span = &after[..close];
        out.push_str(&rest[..open]);
        if !span.trim().is_empty() && !code.is_empty() && code.contains(span.trim()) {
            out.push_str(&" ".repeat(span.len() + 2));
        } else {
            out.push('`');
            out.push_str(span);
            out.push('`');
        }
        rest = &after[close + 1..];
    }
    out.push_str(rest);
    out
}

/// The sentences of `explanation` that name no invented figure, when the
/// first of them (the answer) does not: what stands of a model's second
/// explanation that still invented a figure in how the program got it
/// ("iterating from 2 to 49"). `None` when the answer itself is
/// ungrounded, when nothing would be left, or when the text holds a code
/// block (not cut into sentences).
pub fn grounded_sentences(explanation: &str, sources: &[&str], code: &str) -> Option<String> {
    if explanation.contains("```") {
        return None;
    }
    let sentences = sentences(explanation);
    let first = sentences.first()?;
    if !invented(first, sources, code).is_empty() {
        return None;
    }
    let kept: Vec<&str> = sentences
        .iter()
        .copied()
        .filter(|s| invented(s, sources, code).is_empty())
        .collect();
    let text = kept.join(" ");
    (!text.trim().is_empty()).then_some(text)
}

/// `text` cut after each `.`, `!` or `?` that ends a sentence (followed by
/// a space or the end: a decimal point is not) and at each line break.
fn sentences(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    for line in text.lines() {
        let mut start = 0;
        let bytes = line.as_bytes();
        for (i, &b) in bytes.iter().enumerate() {
            let ends = matches!(b, b'.' | b'!' | b'?')
                && bytes.get(i + 1).is_none_or(|c| c.is_ascii_whitespace());
            if ends {
                let sentence = line[start..=i].trim();
                if !sentence.is_empty() {
                    out.push(sentence);
                }
                start = i + 1;
            }
        }
        let rest = line[start..].trim();
        if !rest.is_empty() {
            out.push(rest);
        }
    }
    out
}

/// An explanation on its way to the page: text is let through a sentence
/// at a time, once the sentence is complete and names only figures of the
/// sources; the first sentence that names another is held, and everything
/// after it, so that no invented figure is ever shown.
pub struct Gate<'a> {
    sources: &'a [&'a str],
    code: &'a str,
    text: String,
    /// Bytes of `text` let through.
    shown: usize,
    held: bool,
}

impl<'a> Gate<'a> {
    pub fn new(sources: &'a [&'a str], code: &'a str) -> Self {
        Self {
            sources,
            code,
            text: String::new(),
            shown: 0,
            held: false,
        }
    }

    /// Takes the next piece of the reply; returns what may be shown now,
    /// its long decimals rounded as a person reads them ([`plain_figures`]).
    pub fn push(&mut self, delta: &str) -> Option<String> {
        self.text.push_str(delta);
        if self.held {
            return None;
        }
        let from = self.shown;
        while let Some(end) = sentence_end(&self.text, self.shown) {
            let sentence = &self.text[self.shown..end];
            if !invented(sentence, self.sources, self.code).is_empty() {
                self.held = true;
                break;
            }
            self.shown = end;
        }
        (self.shown > from).then(|| plain_figures(&self.text[from..self.shown]))
    }

    /// The rest of the reply, once the whole was found grounded.
    pub fn finish(&mut self) -> Option<String> {
        let rest = self.text.get(self.shown..).filter(|r| !r.is_empty())?;
        let rest = plain_figures(rest);
        self.shown = self.text.len();
        Some(rest)
    }
}

/// Where the first complete sentence of `text` after `from` ends: after a
/// `.`, `!` or `?` followed by whitespace (a decimal point is not), or
/// after a line break; with the whitespace that follows it.
fn sentence_end(text: &str, from: usize) -> Option<usize> {
    let bytes = text.as_bytes();
    let mut i = from;
    while i < bytes.len() {
        let b = bytes[i];
        let ends = b == b'\n'
            || matches!(b, b'.' | b'!' | b'?')
                && bytes.get(i + 1).is_some_and(u8::is_ascii_whitespace);
        if ends {
            let mut end = i + 1;
            while end < bytes.len() && bytes[end].is_ascii_whitespace() {
                end += 1;
            }
            // The whitespace may go on in the next piece: wait for it, so
            // that a sentence is never shown without its end.
            return (end < bytes.len()).then_some(end);
        }
        i += 1;
    }
    None
}

/// What stands when both of the model's explanations invented a figure:
/// the second's grounded sentences, followed by the output quoted unless
/// they already name one of its figures; or the output quoted alone. The
/// flag says whether any of the model's sentences stood.
pub fn stand_in(last: Option<&str>, output: &str, sources: &[&str], code: &str) -> (String, bool) {
    let Some(kept) = last.and_then(|text| grounded_sentences(text, sources, code)) else {
        return (fallback(output), false);
    };
    let shown = figures(output);
    let quotes_output = shown.is_empty()
        || figures(&kept)
            .iter()
            .any(|mention| shown.iter().any(|source| names(mention, source)));
    if quotes_output {
        (kept, true)
    } else {
        (format!("{kept}\n\n{}", fallback(output)), true)
    }
}

/// A plain statement of the answer, quoting the output: what stands when
/// the model cannot explain it without inventing figures. What the program
/// showed rather than printed (a figure, a chart, an HTML table: the
/// report's markers) is said in words, never quoted as if printed.
pub fn fallback(output: &str) -> String {
    let output = output.trim();
    if output.is_empty() || output == "(the program printed nothing)" {
        return "The program ran and printed nothing.".into();
    }
    let (mut showed, mut lines): (Vec<&str>, Vec<&str>) = (Vec::new(), Vec::new());
    for line in output
        .lines()
        .map(str::trim_end)
        .filter(|l| !l.trim().is_empty())
    {
        match shown_not_printed(line) {
            Some(what) if !showed.contains(&what) => showed.push(what),
            Some(_) => {}
            None => lines.push(line),
        }
    }
    let showed = match showed.as_slice() {
        [] => String::new(),
        [one] => format!("{one}, above"),
        [rest @ .., last] => format!("{} and {last}, above", rest.join(", ")),
    };
    if lines.is_empty() {
        return format!("The program showed {showed}, and printed nothing else.");
    }
    let shown: &[&str] = if lines.len() <= 6 {
        &lines
    } else {
        &lines[lines.len() - 6..]
    };
    let quoted = shown
        .iter()
        .map(|l| runcell_sandbox::fit(l, 300))
        .collect::<Vec<_>>()
        .join("\n");
    let also = if showed.is_empty() {
        String::new()
    } else {
        format!("\n\nIt also showed {showed}.")
    };
    format!("The program printed:\n\n```text\n{quoted}\n```{also}")
}

/// What a report's marker line stands for, in words.
fn shown_not_printed(line: &str) -> Option<&'static str> {
    use super::answered::{CHART_SHOWN, FIGURE_SHOWN, HTML_TABLE_SHOWN};
    match line.trim() {
        FIGURE_SHOWN => Some("a figure"),
        CHART_SHOWN => Some("an interactive chart"),
        HTML_TABLE_SHOWN => Some("a table"),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn values(text: &str) -> Vec<f64> {
        figures(text).into_iter().map(|f| f.value).collect()
    }

    #[test]
    fn numbers_are_read_as_written() {
        assert_eq!(
            values("a total of $5,200.25 in 2024"),
            vec![5200.25, 2024.0]
        );
        assert_eq!(
            values("1,234,567 rows; 12,34 is two"),
            vec![1234567.0, 12.0, 34.0]
        );
        assert_eq!(values("growth 1.234568e+05 and 3e-2"), vec![123456.8, 0.03]);
        assert_eq!(values("df2 has Q4_K columns and x_3"), Vec::<f64>::new());
        assert_eq!(
            values("on 2024-03-15 at 12:30"),
            vec![2024.0, 3.0, 15.0, 12.0, 30.0]
        );
        assert_eq!(values("1. first\n2. second 7"), vec![7.0]);
        assert_eq!(values("the 3rd of 10x and 45%"), vec![3.0, 10.0, 45.0]);
        assert!(figures("45%")[0].percent);
        // Sign is left out: "fell by 5" names -5.
        assert_eq!(values("change: -5"), vec![5.0]);
    }

    #[test]
    fn rounded_mentions_and_separators_are_the_same_figure() {
        let out = "East    5200.25\nWest    4100.5\nshare 0.4523";
        assert!(invented("East had 5,200.25.", &[out], "").is_empty());
        assert!(invented("East had 5200.", &[out], "").is_empty());
        assert!(invented("East had about 5,200.3", &[out], "").is_empty());
        assert!(invented("West had 4,100.50", &[out], "").is_empty());
        assert!(invented("a share of 45.2% or 45%", &[out], "").is_empty());
        assert!(
            invented(
                "It multiplied 2480 by 0.15.",
                &["372.0", "What is 15% of 2480?"],
                ""
            )
            .is_empty()
        );
        assert_eq!(invented("East had 5201.", &[out], ""), vec!["5201"]);
        assert_eq!(invented("East had 5200.31", &[out], ""), vec!["5200.31"]);
        assert_eq!(
            invented(
                "The total revenue is $12,345 in 3 regions.",
                &[out, "which region?"],
                ""
            ),
            vec!["12,345", "3"]
        );
        // The question's figures count as known.
        assert!(
            invented(
                "Below 1000 there are 168.",
                &["168\n", "primes below 1000"],
                ""
            )
            .is_empty()
        );
    }

    #[test]
    fn inline_code_quoting_the_program_is_not_a_figure() {
        let code = "print(sum(i * i for i in range(1, 51)))";
        let out = "42925\n";
        let q = "the sum of squares up to 50";
        assert!(
            invented(
                "It is 42925, summing `i * i` over `range(1, 51)`.",
                &[out, q],
                code
            )
            .is_empty()
        );
        // Not in the program: still a figure.
        assert_eq!(invented("It is `12,345`.", &[out, q], code), vec!["12,345"]);
        // Prose about the program's numbers is held to the rule.
        assert_eq!(
            invented("It loops from 1 to 51.", &[out, q], code),
            vec!["1", "51"]
        );
    }

    #[test]
    fn hostile_text_is_bounded() {
        let long = "9,".repeat(200_000);
        assert!(figures(&long).len() <= MAX_FIGURES);
        let huge = format!("{}e9999 and 1e-9999", "9".repeat(400));
        for f in figures(&huge) {
            assert!(f.value.is_finite());
        }
        assert!(invented("", &[], "").is_empty());
        assert!(invented("1e5", &["100000"], "").is_empty());
    }

    #[test]
    fn the_fallback_quotes_the_output() {
        assert_eq!(fallback(""), "The program ran and printed nothing.");
        let text = fallback("Total: 42\n");
        assert!(text.contains("Total: 42"), "{text}");
        assert!(invented(&text, &["Total: 42\n"], "").is_empty());
        // A figure is said in words, not quoted as printed text.
        assert_eq!(
            fallback("[a figure was shown]\n"),
            "The program showed a figure, above, and printed nothing else."
        );
        assert_eq!(
            fallback(
                "[a figure was shown]\n[a figure was shown]\n[an interactive chart was shown]\n"
            ),
            "The program showed a figure and an interactive chart, above, and printed nothing else."
        );
        assert_eq!(
            fallback("Total: 42\n[a figure was shown]\n"),
            "The program printed:\n\n```text\nTotal: 42\n```\n\nIt also showed a figure, above."
        );
        let many: String = (0..50).map(|i| format!("line {i}\n")).collect();
        let text = fallback(&many);
        assert!(
            text.contains("line 49") && !text.contains("line 10\n"),
            "{text}"
        );
    }

    #[test]
    fn what_stands_of_an_explanation_is_its_grounded_sentences() {
        let out = "There are 15 prime numbers below 50: [2, 3, 5, 47]\n";
        let q = "List the prime numbers below 50.";
        let expl = "There are 15 primes below 50. The program checked the numbers from 2 to 49 \
                    one by one. Each was divided by smaller numbers!";
        assert_eq!(
            grounded_sentences(expl, &[out, q], "").as_deref(),
            Some("There are 15 primes below 50. Each was divided by smaller numbers!")
        );
        // The answer itself invented: nothing stands.
        assert_eq!(
            grounded_sentences("There are 16 primes. Fine.", &[out, q], ""),
            None
        );
        // Decimals are not sentence ends; lines are.
        assert_eq!(
            sentences("It is 372.0 in total.\nDone"),
            vec!["It is 372.0 in total.", "Done"]
        );
        assert_eq!(grounded_sentences("```\n15\n```", &[out], ""), None);
        assert_eq!(grounded_sentences("", &[out], ""), None);
    }

    #[test]
    fn a_stand_in_always_shows_the_output_or_its_figures() {
        let out = "total: 42\n";
        let sources = [out, "what is 6 times 7?"];
        // Grounded sentences that name the output's figure stand alone.
        let (text, pruned) = stand_in(Some("It is 42. Made of 12,345 parts."), out, &sources, "");
        assert_eq!((text.as_str(), pruned), ("It is 42.", true));
        // Ones that name none of it come with the output quoted.
        let (text, pruned) = stand_in(Some("The code ran. Total 12,345."), out, &sources, "");
        assert!(
            pruned && text.starts_with("The code ran.") && text.contains("total: 42"),
            "{text}"
        );
        assert!(!text.contains("12,345"));
        // Nothing grounded, or nothing at all: the output quoted.
        let (text, pruned) = stand_in(Some("It is 43."), out, &sources, "");
        assert!(!pruned && text.starts_with("The program printed") && text.contains("total: 42"));
        assert!(!stand_in(None, out, &sources, "").1);
    }

    #[test]
    fn the_gate_shows_grounded_sentences_and_holds_from_the_first_invented_one() {
        let sources = ["total: 42\n", "what is the total?", "x = 3"];
        let mut gate = Gate::new(&sources, "x = 3");
        // Nothing before a sentence is complete.
        assert_eq!(gate.push("The total is 4"), None);
        assert_eq!(
            gate.push("2. It used x = "),
            Some("The total is 42. ".into())
        );
        // A literal of the program counts; an invented figure holds all.
        assert_eq!(
            gate.push("3 rows. Then 12,345 more"),
            Some("It used x = 3 rows. ".into())
        );
        assert_eq!(gate.push(" were added. The end. "), None);
        assert_eq!(gate.push("More."), None);
        // A decimal point is no sentence's end.
        let mut gate = Gate::new(&sources, "");
        assert_eq!(gate.push("It is 42.0 exactly"), None);
        assert_eq!(gate.push(".\nNext"), Some("It is 42.0 exactly.\n".into()));
        assert_eq!(gate.finish(), Some("Next".into()));
        assert_eq!(gate.finish(), None);
    }
}
