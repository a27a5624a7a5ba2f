//! Figures as a person reads them: a long decimal the model copied from the
//! output (`13406.384516`, five decimals or more: what a float prints when
//! nobody rounded it) is shown rounded to two decimals, with thousands
//! separators (`13,406.38`). A figure the program rounded itself
//! (`3.1416`) is left as it was asked for. Rounding only: the figure still names the
//! output's (the gate compares a mention at its own precision), no digit
//! is made up, and nothing else is touched: integers (years, counts, ids),
//! values below 1 (`0.000123`, a p-value), figures inside names, versions,
//! inline code and scientific notation stay as written.

/// Decimals a rewritten figure keeps.
const KEPT_DECIMALS: usize = 2;

/// Decimals from which a figure reads as unrounded.
const LONG_DECIMALS: usize = 5;

/// `text` with each long decimal figure (at least [`LONG_DECIMALS`]) of 1
/// or more rounded to
/// [`KEPT_DECIMALS`] and given thousands separators.
pub fn plain_figures(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut copied = 0;
    let mut in_code = false;
    let mut i = 0;
    while i < bytes.len() {
        let c = bytes[i];
        if c == b'`' {
            in_code = !in_code;
            i += 1;
            continue;
        }
        if in_code || !c.is_ascii_digit() {
            i += 1;
            continue;
        }
        let start = i;
        let mut end = i;
        while end < bytes.len() && (bytes[end].is_ascii_digit() || bytes[end] == b',') {
            end += 1;
        }
        // A trailing comma is the sentence's, not the number's.
        while bytes[end - 1] == b',' {
            end -= 1;
        }
        let int_end = end;
        let mut decimals = 0;
        if bytes.get(end) == Some(&b'.') {
            let mut j = end + 1;
            while j < bytes.len() && bytes[j].is_ascii_digit() {
                j += 1;
            }
            decimals = j - end - 1;
            end = j;
        }
        i = end.max(start + 1);
        let glued_before = start > 0 && glued(bytes, start - 1);
        let glued_after = bytes
            .get(end)
            .is_some_and(|b| b.is_ascii_alphanumeric() || *b == b'_')
            || (bytes.get(end) == Some(&b'.')
                && bytes.get(end + 1).is_some_and(u8::is_ascii_digit));
        if decimals < LONG_DECIMALS || glued_before || glued_after {
            continue;
        }
        let digits: String = text[start..end].chars().filter(|c| *c != ',').collect();
        let Ok(value) = digits.parse::<f64>() else {
            continue;
        };
        if !(1.0..1e15).contains(&value) || !separated_well(&text[start..int_end]) {
            continue;
        }
        out.push_str(&text[copied..start]);
        out.push_str(&rounded(value));
        copied = end;
    }
    out.push_str(&text[copied..]);
    out
}

/// Whether the byte at `at`, just before a number, makes it part of a
/// name, a version or a range (`df2`, `v1.2`, `utf-8`); a minus sign after
/// a space is the number's own.
fn glued(bytes: &[u8], at: usize) -> bool {
    match bytes[at] {
        b'-' => at > 0 && bytes[at - 1].is_ascii_alphanumeric(),
        b => b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'/'),
    }
}

/// Whether an integer part's commas (if any) are thousands separators.
fn separated_well(int: &str) -> bool {
    if !int.contains(',') {
        return true;
    }
    let mut groups = int.split(',');
    let first = groups.next().unwrap_or_default();
    (1..=3).contains(&first.len()) && groups.all(|g| g.len() == 3)
}

/// `value` to [`KEPT_DECIMALS`] decimals, with thousands separators.
fn rounded(value: f64) -> String {
    let fixed = format!("{value:.KEPT_DECIMALS$}");
    let (int, frac) = fixed.split_once('.').unwrap_or((&fixed, ""));
    let mut grouped = String::new();
    for (n, digit) in int.chars().enumerate() {
        if n > 0 && (int.len() - n) % 3 == 0 {
            grouped.push(',');
        }
        grouped.push(digit);
    }
    if frac.is_empty() {
        grouped
    } else {
        format!("{grouped}.{frac}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_decimals_are_rounded_and_separated() {
        let cases = [
            (
                "North sold 13406.384516 and South 12417.575374.",
                "North sold 13,406.38 and South 12,417.58.",
            ),
            (
                "The mean is 3.14159, per year.",
                "The mean is 3.14, per year.",
            ),
            ("It fell by -1234.56789.", "It fell by -1,234.57."),
            ("1,234.56789 in all", "1,234.57 in all"),
            ("a share of 12.34567%", "a share of 12.35%"),
            // A figure the program rounded itself stays as it was asked for.
            ("pi is 3.1416", "pi is 3.1416"),
            // Kept: small values, short decimals, integers and years.
            ("p = 0.000123, r = 0.98765", "p = 0.000123, r = 0.98765"),
            (
                "In 2024 there were 13406 sales at 2.5 each.",
                "In 2024 there were 13406 sales at 2.5 each.",
            ),
            // Names, versions, code and scientific notation are not figures to round.
            (
                "model_2024.123456 and v1.2.3456",
                "model_2024.123456 and v1.2.3456",
            ),
            (
                "Q4 2024 in `x = 13406.384516`",
                "Q4 2024 in `x = 13406.384516`",
            ),
            ("about 1.234567e+05 rows", "about 1.234567e+05 rows"),
            ("999.999999 rounds up", "1,000.00 rounds up"),
        ];
        for (text, expect) in cases {
            assert_eq!(plain_figures(text), expect, "{text}");
        }
    }

    #[test]
    fn a_rounded_figure_still_names_the_output() {
        let output = "North 13406.384516\nSouth 12417.575374\n";
        let said = plain_figures("North 13406.384516, South 12417.575374.");
        assert_eq!(said, "North 13,406.38, South 12,417.58.");
        assert!(super::super::invented(&said, &[output], "").is_empty());
    }
}
