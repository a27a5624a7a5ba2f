//! What a failed program's error tells the model to check. The small
//! models write the pandas of their training data; pandas 3 refuses some of
//! it with errors whose remedy the model rarely finds on its own (the agent
//! benchmark's group-by questions failed three fixes in a row on
//! `df.groupby(k)['a', 'b']`). A hint names the remedy; the model still
//! writes the program.

/// pandas' refusal of `df.groupby(k)['a', 'b']`, whose hint also gets the
/// rewrite of the program's own selection.
const TUPLE_OF_COLUMNS: &str = "Cannot subset columns with a tuple";

/// A remedy: when the error says `error` (and the program holds `code`,
/// if given), what to do. The class of failure each fixes is named beside
/// it; checked in order, the first match is the hint.
struct Hint {
    /// A short name, for `/metrics` and the DABench report.
    name: &'static str,
    error: &'static str,
    code: Option<&'static str>,
    remedy: &'static str,
}

const fn hint_for(name: &'static str, error: &'static str, remedy: &'static str) -> Hint {
    Hint {
        name,
        error,
        code: None,
        remedy,
    }
}

const HINTS: &[Hint] = &[
    // The agent bench's group-by questions: three fixes in a row.
    hint_for(
        "tuple_of_columns",
        TUPLE_OF_COLUMNS,
        "In pandas 3, select several columns with a list: `df.groupby(key)[['a', 'b']]`. \
         For a total of a product per group, add the product as a column first \
         (`df['revenue'] = df['units'] * df['price']`), then `df.groupby(key)['revenue'].sum()`.",
    ),
    hint_for(
        "unalignable_filter",
        "Unalignable boolean Series",
        "Filter a table with a condition on its own columns: after a merge, \
         `merged[merged['country'] == 'Germany']`, not a column of the table it came from.",
    ),
    hint_for(
        "frame_append",
        "object has no attribute 'append'",
        "`DataFrame.append` is gone in pandas 3: build a list and use `pd.concat`.",
    ),
    hint_for(
        "dt_accessor",
        "Can only use .dt accessor with datetimelike",
        "Convert the column first: `df['date'] = pd.to_datetime(df['date'])`.",
    ),
    hint_for(
        "int_literal",
        "invalid literal for int()",
        "A field was not where the program looked: check the file's first lines shown \
         above and pick each field by its position in the split line, or match it with a \
         regular expression.",
    ),
    // DABench: `df.corr()` over a table with text columns, which pandas 3
    // refuses (an attempt's every fix failed on it).
    Hint {
        name: "corr_over_text",
        error: "could not convert string to float",
        code: Some(".corr("),
        remedy: "pandas 3's `corr()` refuses text columns: use `df.corr(numeric_only=True)`, \
                 or select the numeric columns first.",
    },
    hint_for(
        "string_to_float",
        "could not convert string to float",
        "A field was not where the program looked, or holds text: check the file's first \
         lines shown above, and convert a column with `pd.to_numeric`.",
    ),
    // DABench: `mean_squared_error(squared=False)`, removed from
    // scikit-learn.
    hint_for(
        "squared_removed",
        "unexpected keyword argument 'squared'",
        "scikit-learn 1.6 removed `squared=False`: use `root_mean_squared_error(y_true, y_pred)` \
         from `sklearn.metrics`.",
    ),
    // DABench: p-values asked of scikit-learn's regression.
    hint_for(
        "no_pvalues",
        "has no attribute 'pvalues'",
        "scikit-learn's models give no p-values: use statsmodels \
         (`sm.OLS(y, sm.add_constant(X)).fit()`, then `.pvalues` and `.params`) or \
         `scipy.stats.linregress` (`.pvalue`, `.slope`, `.rvalue`).",
    ),
    // DABench: `df['a'].mean().round(2)`; pandas 3 gives a plain float.
    hint_for(
        "float_round",
        "'float' object has no attribute 'round'",
        "pandas 3 returns a plain Python float from `mean()`, `std()` and `sum()` of a \
         column: write `round(x, 2)`, not `x.round(2)`.",
    ),
    // DABench: `statistics.stdev` over a pandas column of NumPy floats.
    hint_for(
        "statistics_numpy",
        "object has no attribute 'numerator'",
        "Python's `statistics` module fails on NumPy numbers: use pandas \
         (`df['a'].std()`, `df['a'].median()`) or NumPy instead.",
    ),
    // DABench: `from scipy.stats import minmax_scale`, a name from
    // another library.
    hint_for(
        "cannot_import",
        "cannot import name",
        "That name is not in that module in the versions the sandbox has: import it from \
         the module that defines it (scaling, for one, is in `sklearn.preprocessing`), or \
         compute it with pandas.",
    ),
    // DABench: a filter on a value the column does not hold (the source
    // "ABC News" written "abc-news"), then a statistic of no rows.
    hint_for(
        "empty_filter",
        "must have length at least 2",
        "The data the program computed on is empty or nearly: a filter matched no rows. \
         Print the values the column really holds (`df['col'].unique()[:20]`) and filter on \
         the one the question means.",
    ),
    hint_for(
        "unexpected_keyword",
        "unexpected keyword argument",
        "That argument is not in the version of the library the sandbox has (named in the \
         file note above): call the function without it, or use the function that replaced it.",
    ),
    hint_for(
        "key_error",
        "KeyError",
        "Use the exact column or key names shown in the file note above, as Python writes \
         them (they are case- and space-sensitive).",
    ),
    hint_for(
        "module_not_found",
        "ModuleNotFoundError",
        "No package can be installed: use the standard library, numpy, pandas, matplotlib, \
         plotly, scipy, statsmodels, scikit-learn, seaborn, sympy, openpyxl or pyarrow.",
    ),
];

/// The hint for a failed program's `report`, if its error is a known one:
/// with the exact rewrite of the failing selection when the error is a
/// pandas-2 tuple of columns and `code` shows where, and with the real
/// column a missing key is closest to, of the session's table `columns`.
pub fn hint(report: &str, code: &str, columns: &[String]) -> Option<String> {
    named(report, code, columns).map(|(_, hint)| hint)
}

/// The name of the hint [`hint`] gives (`closest_key`, `key_error`, ...),
/// for `/metrics`: which remedies fire, and on what.
pub fn which(report: &str, code: &str, columns: &[String]) -> Option<&'static str> {
    named(report, code, columns).map(|(name, _)| name)
}

fn named(report: &str, code: &str, columns: &[String]) -> Option<(&'static str, String)> {
    if let Some(closest) = closest_keys(report, columns) {
        return Some(("closest_key", closest));
    }
    let found = HINTS
        .iter()
        .find(|h| report.contains(h.error) && h.code.is_none_or(|needle| code.contains(needle)))?;
    let mut hint = found.remedy.to_string();
    if found.error == TUPLE_OF_COLUMNS
        && let Some(tuple) = tuple_selection(code)
    {
        hint.push_str(&format!(" Here: write `[{tuple}]` for `{tuple}`."));
    }
    Some((found.name, hint))
}

/// For a missing key (`KeyError: 'wind_speed'`, `"['party'] not in
/// index"`): each key the error quotes that is no column, with the column
/// it is closest to (`'wind speed'`, `' WINDSPEED'`). DABench: 3 of the 7
/// turns whose every attempt failed wrote a column name without its spaces
/// or with another case, and "names are space-sensitive" did not say which.
fn closest_keys(report: &str, columns: &[String]) -> Option<String> {
    if columns.is_empty() {
        return None;
    }
    let line = report.lines().rev().find(|l| {
        l.contains("KeyError") || l.contains("not in index") || l.contains("are in the")
    })?;
    let mut told = Vec::new();
    // `Column not found: WINDSPEED` quotes a message with the key at its end.
    let keys = quoted(line)
        .into_iter()
        .map(|q| q.rsplit_once(": ").map_or(q, |(_, key)| key));
    for key in keys {
        if columns.iter().any(|c| c == key) || key.is_empty() {
            continue;
        }
        // Alike once case and spaces are set aside, then as written.
        let Some(best) = columns
            .iter()
            .map(|c| {
                (
                    similarity(key, c),
                    strsim::normalized_levenshtein(key, c),
                    c,
                )
            })
            .filter(|(score, _, _)| *score >= 0.6)
            .max_by(|a, b| a.0.total_cmp(&b.0).then(a.1.total_cmp(&b.1)))
            .map(|(_, _, c)| c)
        else {
            continue;
        };
        // Headers with spaces around them (`' BARO'`): named exactly, the
        // 1.5B still wrote `'BARO'` in all of its fixes (DABench, 3 of 40
        // questions); stripping the headers once is a fix it can make.
        if best.trim() != best.as_str() && best.trim().eq_ignore_ascii_case(key.trim()) {
            told.push(format!(
                "`{}` is not a column: the file's headers have spaces around them (`{}`). \
                 Right after reading the file, add `df.columns = df.columns.str.strip()`, then \
                 write `{}`",
                super::profile::python_str(key),
                super::profile::python_str(best),
                super::profile::python_str(best.trim())
            ));
        } else {
            told.push(format!(
                "`{}` is not a column; the closest is `{}` (write it exactly so)",
                super::profile::python_str(key),
                super::profile::python_str(best)
            ));
        }
        if told.len() == 3 {
            break;
        }
    }
    if told.is_empty() {
        let names: Vec<String> = columns
            .iter()
            .take(30)
            .map(|c| super::profile::python_str(c))
            .collect();
        return Some(format!(
            "The table's columns are exactly: {}. Use these names as written.",
            names.join(", ")
        ));
    }
    Some(format!("{}.", told.join("; ")))
}

/// The strings quoted in `line`, at most eight: with `'` as Python's repr
/// writes keys (also inside `"['a', 'b'] not in index"`), else with `"`.
pub(super) fn quoted(line: &str) -> Vec<&str> {
    let within = |quote: char| {
        let mut out = Vec::new();
        let mut rest = line;
        while out.len() < 8 {
            let Some(open) = rest.find(quote) else { break };
            let after = &rest[open + 1..];
            let Some(close) = after.find(quote) else {
                break;
            };
            out.push(&after[..close]);
            rest = &after[close + 1..];
        }
        out
    };
    let single = within('\'');
    if single.is_empty() {
        within('"')
    } else {
        single
    }
}

/// How alike a key and a column are, from 0 to 1: case, spaces, dashes and
/// underscores aside, by edit distance.
pub(super) fn similarity(key: &str, column: &str) -> f64 {
    let plain = |s: &str| -> String {
        s.chars()
            .filter(|c| !matches!(c, ' ' | '_' | '-' | '.'))
            .flat_map(char::to_lowercase)
            .collect()
    };
    let (a, b) = (plain(key), plain(column));
    if a.is_empty() || b.is_empty() {
        return 0.0;
    }
    if a == b {
        return 1.0;
    }
    let distance = strsim::normalized_levenshtein(&a, &b);
    // A part of the name (`party` for `party_name`) is as good as close.
    let shorter = a.len().min(b.len());
    if shorter >= 3 && (a.contains(&b) || b.contains(&a)) {
        return distance.max(0.8);
    }
    distance
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
        assert!(
            hint(tuple, "", &[]).is_some_and(|h| h.contains("[['a', 'b']]") && !h.contains("Here"))
        );
        let join = "IndexingError: Unalignable boolean Series provided as indexer";
        assert!(hint(join, "", &[]).is_some_and(|h| h.contains("merged[merged[")));
        let field = "ValueError: invalid literal for int() with base 10: '/api/item/7'";
        assert!(hint(field, "", &[]).is_some_and(|h| h.contains("first lines")));
        assert_eq!(hint("ZeroDivisionError: division by zero", "", &[]), None);
        assert_eq!(hint("", "", &[]), None);
    }

    #[test]
    fn a_tuple_of_columns_gets_its_rewrite() {
        let tuple = "ValueError: Cannot subset columns with a tuple with more than one element.";
        let code = "x = df['a']\nt = df.groupby('region')['units', 'price'].sum()\nprint(t)";
        let h = hint(tuple, code, &[]).unwrap();
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

    #[test]
    fn a_missing_key_is_told_the_closest_column() {
        let columns: Vec<String> = [" WINDSPEED", "wind speed", "Date", "party_name"]
            .map(String::from)
            .to_vec();
        let h = hint("KeyError: 'WINDSPEED'", "", &columns).unwrap();
        assert!(
            h.contains("`'WINDSPEED'` is not a column: the file's headers have spaces around them (`' WINDSPEED'`)")
                && h.contains("df.columns = df.columns.str.strip()"),
            "{h}"
        );
        let h = hint("KeyError: 'Column not found: WINDSPEED'", "", &columns).unwrap();
        assert!(h.contains("`'WINDSPEED'` is not a column"), "{h}");
        let h = hint("KeyError: 'wind_speed'", "", &columns).unwrap();
        assert!(h.contains("the closest is `'wind speed'`"), "{h}");
        let h = hint("KeyError: \"['party'] not in index\"", "", &columns).unwrap();
        assert!(h.contains("`'party_name'`"), "{h}");
        // Nothing close: the real names, all of them.
        let h = hint("KeyError: 'zzz'", "", &columns).unwrap();
        assert!(
            h.starts_with("The table's columns are exactly: ' WINDSPEED', 'wind speed'"),
            "{h}"
        );
        // No table: the general remedy.
        assert!(
            hint("KeyError: 'zzz'", "", &[])
                .unwrap()
                .contains("as Python writes them")
        );
    }

    #[test]
    fn library_changes_get_their_remedy() {
        let corr = "ValueError: could not convert string to float: 'male'";
        assert!(
            hint(corr, "print(df.corr())", &[])
                .unwrap()
                .contains("numeric_only=True")
        );
        assert!(
            hint(corr, "float(x)", &[])
                .unwrap()
                .contains("pd.to_numeric")
        );
        let squared = "TypeError: got an unexpected keyword argument 'squared'";
        assert!(
            hint(squared, "", &[])
                .unwrap()
                .contains("root_mean_squared_error")
        );
        let other = "TypeError: f() got an unexpected keyword argument 'inplace'";
        assert!(hint(other, "", &[]).unwrap().contains("version"));
        let p = "AttributeError: 'LinearRegression' object has no attribute 'pvalues'";
        assert!(hint(p, "", &[]).unwrap().contains("statsmodels"));
        let round = "AttributeError: 'float' object has no attribute 'round'";
        assert!(hint(round, "", &[]).unwrap().contains("round(x, 2)"));
        let stats = "AttributeError: 'float' object has no attribute 'numerator'";
        assert!(hint(stats, "", &[]).unwrap().contains("df['a'].std()"));
        let import = "ImportError: cannot import name 'minmax_scale' from 'scipy.stats'";
        assert!(
            hint(import, "", &[])
                .unwrap()
                .contains("sklearn.preprocessing")
        );
        let empty = "ValueError: `x` and `y` must have length at least 2.";
        assert!(hint(empty, "", &[]).unwrap().contains("unique()"));
    }
}
