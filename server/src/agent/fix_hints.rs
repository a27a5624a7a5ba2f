//! What a failed program's error tells the model to check. The small
//! models write the pandas of their training data; pandas 3 refuses some of
//! it with errors whose remedy the model rarely finds on its own (the agent
//! benchmark's group-by questions failed three fixes in a row on
//! `df.groupby(k)['a', 'b']`). A hint names the remedy; the model still
//! writes the program.

/// pandas' refusal of `df.groupby(k)['a', 'b']`, whose hint also gets the
/// rewrite of the program's own selection.
const TUPLE_OF_COLUMNS: &str = "Cannot subset columns with a tuple";

/// `(what the error says, what to do)`, checked in order; the first match
/// is the hint.
const HINTS: &[(&str, &str)] = &[
    (
        TUPLE_OF_COLUMNS,
        "In pandas 3, select several columns with a list: `df.groupby(key)[['a', 'b']]`. \
         For a total of a product per group, add the product as a column first \
         (`df['revenue'] = df['units'] * df['price']`), then `df.groupby(key)['revenue'].sum()`.",
    ),
    (
        "Unalignable boolean Series",
        "Filter a table with a condition on its own columns: after a merge, \
         `merged[merged['country'] == 'Germany']`, not a column of the table it came from.",
    ),
    (
        "object has no attribute 'append'",
        "`DataFrame.append` is gone in pandas 3: build a list and use `pd.concat`.",
    ),
    (
        "Can only use .dt accessor with datetimelike",
        "Convert the column first: `df['date'] = pd.to_datetime(df['date'])`.",
    ),
    (
        "invalid literal for int()",
        "A field was not where the program looked: check the file's first lines shown \
         above and pick each field by its position in the split line, or match it with a \
         regular expression.",
    ),
    (
        "could not convert string to float",
        "A field was not where the program looked, or holds text: check the file's first \
         lines shown above, and convert a column with `pd.to_numeric`.",
    ),
    (
        "KeyError",
        "Use the exact column or key names shown in the file note above (they are case- \
         and space-sensitive).",
    ),
    (
        "ModuleNotFoundError",
        "No package can be installed: use the standard library, numpy, pandas, matplotlib, \
         plotly, scipy, statsmodels, scikit-learn, seaborn, sympy, openpyxl or pyarrow.",
    ),
];

/// The hint for a failed program's `report`, if its error is a known one:
/// with the exact rewrite of the failing selection when the error is a
/// pandas-2 tuple of columns and `code` shows where.
pub fn hint(report: &str, code: &str) -> Option<String> {
    let (needle, hint) = HINTS.iter().find(|(needle, _)| report.contains(needle))?;
    let mut hint = hint.to_string();
    if *needle == TUPLE_OF_COLUMNS
        && let Some(tuple) = tuple_selection(code)
    {
        hint.push_str(&format!(" Here: write `[{tuple}]` for `{tuple}`."));
    }
    Some(hint)
}

/// The first column selection written as a tuple, `['units', 'price']`
/// right after a call or a name (`df.groupby(k)['a', 'b']`), as written.
fn tuple_selection(code: &str) -> Option<&str> {
    let bytes = code.as_bytes();
    let mut from = 0;
    let next = |from: usize| {
        let rest = &code[from..];
        [rest.find("['"), rest.find("[\"")]
            .into_iter()
            .flatten()
            .min()
            .map(|i| i + from)
    };
    while let Some(open) = next(from) {
        from = open + 1;
        let after_call = open > 0
            && (matches!(bytes[open - 1], b')' | b'_') || bytes[open - 1].is_ascii_alphanumeric());
        let Some(close) = code[open..].find(']').map(|i| i + open) else {
            break;
        };
        let inside = &code[open + 1..close];
        if after_call && inside.contains(',') && !inside.contains('\n') && !inside.contains('[') {
            return Some(&code[open..=close]);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_errors_get_their_remedy_and_others_none() {
        let tuple = "ValueError: Cannot subset columns with a tuple with more than one \
                     element. Use a list instead.";
        assert!(hint(tuple, "").is_some_and(|h| h.contains("[['a', 'b']]") && !h.contains("Here")));
        let join = "IndexingError: Unalignable boolean Series provided as indexer";
        assert!(hint(join, "").is_some_and(|h| h.contains("merged[merged[")));
        let field = "ValueError: invalid literal for int() with base 10: '/api/item/7'";
        assert!(hint(field, "").is_some_and(|h| h.contains("first lines")));
        assert_eq!(hint("ZeroDivisionError: division by zero", ""), None);
        assert_eq!(hint("", ""), None);
    }

    #[test]
    fn a_tuple_of_columns_gets_its_rewrite() {
        let tuple = "ValueError: Cannot subset columns with a tuple with more than one element.";
        let code = "x = df['a']\nt = df.groupby('region')['units', 'price'].sum()\nprint(t)";
        let h = hint(tuple, code).unwrap();
        assert!(
            h.ends_with("Here: write `[['units', 'price']]` for `['units', 'price']`."),
            "{h}"
        );
        // A list, a dict literal or a lone column is not it.
        assert_eq!(
            tuple_selection("df[['a', 'b']]\nx = ['a', 'b']\ndf['a']"),
            None
        );
        assert_eq!(tuple_selection("g[\"a\", \"b\"]"), Some("[\"a\", \"b\"]"));
    }
}
