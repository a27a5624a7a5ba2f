//! What a failed program's error tells the model to check. The small
//! models write the pandas of their training data; pandas 3 refuses some of
//! it with errors whose remedy the model rarely finds on its own (the agent
//! benchmark's group-by questions failed three fixes in a row on
//! `df.groupby(k)['a', 'b']`). A hint names the remedy; the model still
//! writes the program.

/// `(what the error says, what to do)`, checked in order; the first match
/// is the hint.
const HINTS: &[(&str, &str)] = &[
    (
        "Cannot subset columns with a tuple",
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
         scipy, statsmodels, scikit-learn, seaborn, sympy, openpyxl or pyarrow.",
    ),
];

/// The hint for a failed program's `report`, if its error is a known one.
pub fn hint(report: &str) -> Option<&'static str> {
    HINTS
        .iter()
        .find(|(needle, _)| report.contains(needle))
        .map(|(_, hint)| *hint)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_errors_get_their_remedy_and_others_none() {
        let tuple = "ValueError: Cannot subset columns with a tuple with more than one \
                     element. Use a list instead.";
        assert!(hint(tuple).is_some_and(|h| h.contains("[['a', 'b']]")));
        let join = "IndexingError: Unalignable boolean Series provided as indexer";
        assert!(hint(join).is_some_and(|h| h.contains("merged[merged[")));
        let field = "ValueError: invalid literal for int() with base 10: '/api/item/7'";
        assert!(hint(field).is_some_and(|h| h.contains("first lines")));
        assert_eq!(hint("ZeroDivisionError: division by zero"), None);
        assert_eq!(hint(""), None);
    }
}
