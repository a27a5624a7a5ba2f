//! A data frame's table as the page shows it, as HTML: its header with a
//! sort button per column, a window of its rows (the rest stood in for by
//! spacers of their height, since a frame may bring ten thousand), its size
//! and its actions. The server renders it whole; the page's table
//! controller renders the window of rows again as it is sorted, filtered
//! or scrolled, with the same functions.

use super::markdown::escape;
use super::table::{Sort, numeric_columns, order};
use crate::Table;

/// How many rows are in the page at once.
pub const WINDOW: usize = 120;
/// A row's height until one is measured, in CSS pixels.
pub const ROW_PX: f64 = 30.0;

/// "1 row × 2 columns".
fn shape(rows: usize, columns: usize) -> String {
    let plural =
        |n: usize, one: &str, many: &str| format!("{n} {}", if n == 1 { one } else { many });
    format!(
        "{} × {}",
        plural(rows, "row", "rows"),
        plural(columns, "column", "columns")
    )
}

/// The table's size, as the page's header names it.
fn size(table: &Table) -> String {
    let index_columns = table.index_columns.min(table.columns.len());
    shape(table.rows.len(), table.columns.len() - index_columns)
}

/// What the table shows, as the page asks for it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct View<'a> {
    pub sort: Option<Sort>,
    /// Rows matching this (any value containing it, ignoring case) are
    /// shown; empty for all.
    pub filter: &'a str,
    /// The first row of the window (in the rows shown).
    pub start: usize,
    /// A row's height in CSS pixels, as measured.
    pub row_px: f64,
}

/// The rows `view` shows, in order: sorted, then those matching the filter.
pub fn visible(table: &Table, numeric: &[bool], view: &View) -> Vec<usize> {
    let wanted = view.filter.trim().to_lowercase();
    order(table, numeric, view.sort)
        .into_iter()
        .filter(|&r| {
            wanted.is_empty()
                || table.rows[r]
                    .iter()
                    .any(|v| v.to_lowercase().contains(&wanted))
        })
        .collect()
}

/// Only the rows `visible` names, in that order (what Copy and Download
/// take: every row shown, not only those scrolled into view).
pub fn only(table: &Table, visible: &[usize]) -> Table {
    Table {
        rows: visible.iter().map(|&r| table.rows[r].clone()).collect(),
        ..table.clone()
    }
}

/// The table's body: a window of [`WINDOW`] rows of `visible` from
/// `view.start`, with a spacer for the rows before and after it.
pub fn body(table: &Table, numeric: &[bool], visible: &[usize], view: &View) -> String {
    let width = table.columns.len();
    let index_columns = table.index_columns.min(width);
    let first = view.start.min(visible.len().saturating_sub(1));
    let last = (first + WINDOW).min(visible.len());
    let spacer = |rows: usize| {
        if rows == 0 {
            return String::new();
        }
        let height = (rows as f64 * view.row_px).round() as u64;
        format!(
            "<tr class=\"spacer\" aria-hidden=\"true\"><td colspan=\"{width}\" style=\"height: {height}px\"></td></tr>"
        )
    };
    let mut out = spacer(first);
    for (at, &r) in visible[first..last].iter().enumerate() {
        out.push_str(&format!("<tr aria-rowindex=\"{}\">", first + at + 2));
        for (i, value) in table.rows[r].iter().enumerate() {
            let value = escape(value);
            if i < index_columns {
                out.push_str(&format!("<th scope=\"row\">{value}</th>"));
            } else if numeric.get(i).copied().unwrap_or(false) {
                out.push_str(&format!("<td class=\"num\">{value}</td>"));
            } else {
                out.push_str(&format!("<td>{value}</td>"));
            }
        }
        out.push_str("</tr>");
    }
    out.push_str(&spacer(visible.len() - last));
    out
}

/// What the caption says of the rows: the size, what the kernel left out,
/// and how many match a filter.
pub fn caption(table: &Table, matching: usize) -> String {
    let size = size(table);
    let whole = match &table.elided {
        Some(whole) => format!("{size} shown, of {whole}"),
        None => size,
    };
    let total = table.rows.len();
    if matching == total {
        whole
    } else {
        format!("{matching} of {total} rows match · {whole}")
    }
}

/// A column's `aria-sort` under `sort`, if it is the sorted one.
pub fn aria_sort(sort: Option<Sort>, column: usize) -> Option<&'static str> {
    sort.filter(|s| s.column == column).map(|s| {
        if s.ascending {
            "ascending"
        } else {
            "descending"
        }
    })
}

/// A column's arrow under `sort`.
pub fn arrow(sort: Option<Sort>, column: usize) -> &'static str {
    match sort.filter(|s| s.column == column) {
        Some(s) if s.ascending => "↑",
        Some(_) => "↓",
        None => "",
    }
}

/// The whole table as the page first shows it (unsorted, unfiltered, from
/// its first row), the `index`th output of `cell`.
pub fn table_html(table: &Table, cell: &str, index: usize) -> String {
    let numeric = numeric_columns(table);
    let view = View {
        row_px: ROW_PX,
        ..View::default()
    };
    let visible = visible(table, &numeric, &view);
    let mut header = String::new();
    for (i, column) in table.columns.iter().enumerate() {
        let class = if numeric.get(i).copied().unwrap_or(false) {
            " class=\"num\""
        } else {
            ""
        };
        // The index's column has no name: a reader still hears what the
        // button sorts by.
        let (title, label) = if column.is_empty() {
            (
                "index".to_string(),
                "<span class=\"visually-hidden\">index</span>".to_string(),
            )
        } else {
            (escape(column), escape(column))
        };
        header.push_str(&format!(
            "<th scope=\"col\"{class}><button type=\"button\" class=\"sort\" title=\"Sort by {title}\" data-column=\"{i}\">{label}<span class=\"arrow\" aria-hidden=\"true\"></span></button></th>"
        ));
    }
    format!(
        "<figure class=\"out out-table\" data-output=\"{index}\" data-file=\"table-{cell}-{number}.csv\">\
         <div class=\"table-scroll\" tabindex=\"0\" role=\"region\" aria-label=\"Table, {size}\">\
         <table aria-rowcount=\"{rowcount}\"><thead><tr aria-rowindex=\"1\">{header}</tr></thead>\
         <tbody>{body}</tbody></table></div>\
         <figcaption><span class=\"table-size\">{caption}</span>\
         <span class=\"cell-actions js-only\">\
         <input type=\"search\" class=\"table-filter\" aria-label=\"Filter rows\" placeholder=\"Filter rows\">\
         <button type=\"button\" class=\"table-copy\">Copy table</button>\
         <button type=\"button\" class=\"table-csv\">Download CSV</button>\
         </span></figcaption></figure>",
        cell = escape(cell),
        number = index + 1,
        size = escape(&size(table)),
        rowcount = visible.len() + 1,
        body = body(table, &numeric, &visible, &view),
        caption = escape(&caption(table, visible.len())),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table(rows: usize) -> Table {
        Table {
            columns: vec!["".into(), "name".into(), "units".into()],
            index_columns: 1,
            rows: (0..rows)
                .map(|i| vec![i.to_string(), format!("item {i}"), (rows - i).to_string()])
                .collect(),
            elided: None,
        }
    }

    #[test]
    fn a_table_renders_headers_index_and_values_escaped() {
        let table = Table {
            columns: vec!["".into(), "name".into(), "units".into()],
            index_columns: 1,
            rows: vec![vec!["0".into(), "<b>x</b>".into(), "3".into()]],
            elided: Some("1000 rows × 2 columns".into()),
        };
        let html = table_html(&table, "c1", 0);
        assert!(html.contains(r#"<th scope="row">0</th>"#), "{html}");
        assert!(html.contains("&lt;b&gt;x&lt;/b&gt;"), "{html}");
        assert!(!html.contains("<b>x"), "{html}");
        // The number column is marked for right alignment, the text one not.
        assert!(html.contains(r#"<td class="num">3</td>"#), "{html}");
        assert!(
            html.contains(r#"<span class="visually-hidden">index</span>"#),
            "{html}"
        );
        assert!(
            html.contains("1 row × 2 columns shown, of 1000 rows × 2 columns"),
            "{html}"
        );
        assert!(
            html.contains(r#"role="region""#) && html.contains(r#"tabindex="0""#),
            "{html}"
        );
        assert!(html.contains(r#"data-file="table-c1-1.csv""#), "{html}");
        assert!(html.contains(r#"<table aria-rowcount="2">"#), "{html}");
    }

    #[test]
    fn a_long_table_shows_a_window_and_spacers_for_the_rest() {
        let table = table(1000);
        let numeric = numeric_columns(&table);
        let view = View {
            start: 400,
            row_px: 20.0,
            ..View::default()
        };
        let visible = visible(&table, &numeric, &view);
        let html = body(&table, &numeric, &visible, &view);
        assert_eq!(html.matches("<tr aria-rowindex=").count(), WINDOW);
        assert!(
            html.starts_with(r#"<tr class="spacer" aria-hidden="true"><td colspan="3" style="height: 8000px"></td></tr><tr aria-rowindex="402"><th scope="row">400</th>"#),
            "{html}"
        );
        assert!(
            html.ends_with(r#"<td colspan="3" style="height: 9600px"></td></tr>"#),
            "{}",
            &html[html.len() - 200..]
        );
        // The first render: from the first row, no spacer before it.
        let first = table_html(&table, "c1", 2);
        assert!(
            first.contains(r#"<tbody><tr aria-rowindex="2">"#),
            "{first}"
        );
        assert!(first.contains(r#"data-output="2""#), "{first}");
    }

    #[test]
    fn a_filter_and_a_sort_choose_the_rows_and_the_caption_counts_them() {
        let table = table(30);
        let numeric = numeric_columns(&table);
        let view = View {
            sort: Some(Sort {
                column: 2,
                ascending: true,
            }),
            filter: " ITEM 2",
            ..View::default()
        };
        let rows = visible(&table, &numeric, &view);
        // Items 2 and 20–29, fewest units first.
        assert_eq!(rows, vec![29, 28, 27, 26, 25, 24, 23, 22, 21, 20, 2]);
        assert_eq!(
            caption(&table, rows.len()),
            "11 of 30 rows match · 30 rows × 2 columns"
        );
        assert_eq!(only(&table, &rows[..1]).rows, vec![table.rows[29].clone()]);
        assert_eq!(aria_sort(view.sort, 2), Some("ascending"));
        assert_eq!(aria_sort(view.sort, 1), None);
        assert_eq!(arrow(view.sort, 2), "↑");
        // Nothing matches: an empty body.
        let none = View {
            filter: "zzz",
            ..View::default()
        };
        let rows = visible(&table, &numeric, &none);
        assert_eq!(body(&table, &numeric, &rows, &none), "");
    }
}
