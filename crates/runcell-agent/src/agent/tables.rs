//! A data frame's HTML, read into rows.
//!
//! pandas shows a `DataFrame` as a plain `<table class="dataframe">`. Read
//! into a [`Table`], the page can show it as a table of its own (styled in
//! both themes, sortable, with copy and CSV download) instead of a frame of
//! foreign markup. Only tables that read back exactly are taken: one table,
//! one value per cell, pandas' own markup and style; anything else (a
//! `Styler`, merged header cells, a grouped index, other markup beside the
//! table) stays HTML and is shown in its sandboxed frame, as before.
//!
//! The markup comes from a program: it is read with a parser that reads
//! hostile markup as a browser would, within the bounds below.

use runcell_protocol::Table;
use scraper::{ElementRef, Html, Node};

/// The most bytes of HTML read as a table.
const MAX_HTML_BYTES: usize = 1024 * 1024;
/// The most columns and rows of a table read; larger ones stay HTML.
const MAX_COLUMNS: usize = 256;
const MAX_ROWS: usize = 10_000;
/// The most chars of one value.
const MAX_CELL_CHARS: usize = 4096;

/// The elements a pandas table's HTML is made of.
const ALLOWED: [&str; 12] = [
    "html", "head", "body", "div", "style", "table", "thead", "tbody", "tr", "th", "td", "p",
];

/// What pandas writes for a value, a row or a column it left out.
const ELLIPSIS: &str = "...";

/// The most bytes of values one table's data may hold (the kernel stops at
/// 2 MB of characters; a character may take up to four bytes).
const MAX_DATA_BYTES: usize = 8 * 1024 * 1024;

/// A data frame's own data, as the jail's kernel gives it beside its HTML
/// (`sandbox::TABLE_DATA_MIME`): `{"columns", "index_columns", "rows",
/// "total_rows"}`, every value a string. `None` for anything else (it is
/// the program's to forge): the frame is then read from its HTML.
pub fn from_data(value: &serde_json::Value) -> Option<Table> {
    let text = |v: &serde_json::Value| {
        v.as_str()
            .map(|s| s.chars().take(MAX_CELL_CHARS).collect::<String>())
    };
    let columns: Vec<String> = value
        .get("columns")?
        .as_array()?
        .iter()
        .map(text)
        .collect::<Option<_>>()?;
    if columns.is_empty() || columns.len() > MAX_COLUMNS {
        return None;
    }
    let index_columns = usize::try_from(value.get("index_columns")?.as_u64()?).ok()?;
    if index_columns > columns.len() {
        return None;
    }
    let mut rows = Vec::new();
    let mut bytes = 0;
    for row in value.get("rows")?.as_array()?.iter().take(MAX_ROWS) {
        let row: Vec<String> = row.as_array()?.iter().map(text).collect::<Option<_>>()?;
        if row.len() != columns.len() {
            return None;
        }
        bytes += row.iter().map(String::len).sum::<usize>();
        if bytes > MAX_DATA_BYTES {
            break;
        }
        rows.push(row);
    }
    let total = value.get("total_rows")?.as_u64()?;
    let shape = |n: u64| {
        let data_columns = columns.len() - index_columns;
        format!(
            "{n} {} × {data_columns} {}",
            if n == 1 { "row" } else { "rows" },
            if data_columns == 1 {
                "column"
            } else {
                "columns"
            }
        )
    };
    let elided = (total > rows.len() as u64).then(|| shape(total));
    Some(Table {
        columns,
        index_columns,
        rows,
        elided,
    })
}

/// The table in `html`, if it is a plain data frame that reads back
/// exactly; `None` leaves it HTML.
pub fn read(html: &str) -> Option<Table> {
    if html.len() > MAX_HTML_BYTES || !html.contains("dataframe") || !shallow(html) {
        return None;
    }
    let document = Html::parse_fragment(html);
    let root = document.root_element();
    let mut tables = Vec::new();
    let mut notes = Vec::new();
    for node in root.descendants() {
        match node.value() {
            Node::Element(element) => {
                let name = element.name();
                if !ALLOWED.contains(&name) {
                    return None;
                }
                let element = ElementRef::wrap(node)?;
                match name {
                    "table" => tables.push(element),
                    "style" if !is_pandas_style(&text_of(element)) => return None,
                    // A `Styler` marks cells with ids, classes and styles.
                    "th" | "td" | "tr" | "thead" | "tbody"
                        if element.value().attr("id").is_some()
                            || element.value().attr("class").is_some() =>
                    {
                        return None;
                    }
                    "th" | "td" if element.value().attr("style").is_some() => return None,
                    "p" => notes.push(text_of(element)),
                    _ => {}
                }
            }
            Node::Text(text) => {
                // Text outside the table's cells and notes is more than a
                // table.
                let inside = node
                    .ancestors()
                    .filter_map(ElementRef::wrap)
                    .any(|e| matches!(e.value().name(), "th" | "td" | "p" | "style"));
                if !inside && !text.trim().is_empty() {
                    return None;
                }
            }
            Node::Comment(_) | Node::Document | Node::Fragment | Node::Doctype(_) => {}
            Node::ProcessingInstruction(_) => return None,
        }
    }
    let [table] = tables.as_slice() else {
        return None;
    };
    let class = table.value().attr("class").unwrap_or_default();
    if !class.split_whitespace().any(|c| c == "dataframe") {
        return None;
    }
    let mut table = read_table(*table)?;
    // pandas writes one note, its shape, and only when it cut the frame;
    // any other paragraph is more than a table.
    match notes.as_slice() {
        [] => {}
        [note] if is_shape(note) => table.elided = Some(note.clone()),
        _ => return None,
    }
    Some(table)
}

/// pandas' "1000 rows × 3 columns".
fn is_shape(note: &str) -> bool {
    let words: Vec<&str> = note.split(' ').collect();
    let count = |w: &str| !w.is_empty() && w.chars().all(|c| c.is_ascii_digit());
    matches!(words.as_slice(), [rows, "rows", "×", columns, "columns"] if count(rows) && count(columns))
}

/// The deepest nesting of elements read (a data frame's is 5). An HTML
/// parser checks the open elements at each tag, so markup nested
/// thousands deep would take it minutes: such markup is not read at all.
const MAX_DEPTH: usize = 16;

/// Whether the tags in `html`, counted as written (an opening tag in, a
/// closing one out), never nest deeper than [`MAX_DEPTH`]: a bound taken
/// before parsing, in one pass.
fn shallow(html: &str) -> bool {
    const VOID: [&str; 6] = ["br", "hr", "img", "meta", "link", "input"];
    let mut depth = 0usize;
    let bytes = html.as_bytes();
    for (i, _) in html.match_indices('<') {
        match bytes.get(i + 1) {
            Some(b'/') => depth = depth.saturating_sub(1),
            Some(c) if c.is_ascii_alphabetic() => {
                let name: String = html[i + 1..]
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric())
                    .collect::<String>()
                    .to_ascii_lowercase();
                let closes_itself = html[i..]
                    .find('>')
                    .is_some_and(|end| html[i..i + end].ends_with('/'));
                if !VOID.contains(&name.as_str()) && !closes_itself {
                    depth += 1;
                    if depth > MAX_DEPTH {
                        return false;
                    }
                }
            }
            _ => {}
        }
    }
    true
}

/// pandas' own `<style scoped>`: rules for `.dataframe` only (a `Styler`'s
/// name cells by id).
fn is_pandas_style(css: &str) -> bool {
    !css.contains('#') && !css.contains('@') && !css.contains("url(")
}

/// An element's text, its whitespace collapsed.
fn text_of(element: ElementRef) -> String {
    element
        .text()
        .collect::<String>()
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
}

/// One row's cells: `(is a header cell, text)`; `None` if a cell spans more
/// than one row or column, or holds too much.
fn cells_of(row: ElementRef) -> Option<Vec<(bool, String)>> {
    let mut cells = Vec::new();
    for cell in row.children().filter_map(ElementRef::wrap) {
        let name = cell.value().name();
        if name != "th" && name != "td" {
            return None;
        }
        for span in ["colspan", "rowspan"] {
            if cell.value().attr(span).is_some_and(|s| s.trim() != "1") {
                return None;
            }
        }
        let text = text_of(cell);
        if text.chars().count() > MAX_CELL_CHARS {
            return None;
        }
        cells.push((name == "th", text));
    }
    Some(cells)
}

/// The rows of a table section (`thead`/`tbody`), in order.
fn rows_of<'a>(table: ElementRef<'a>, section: &str) -> Vec<ElementRef<'a>> {
    table
        .children()
        .filter_map(ElementRef::wrap)
        .filter(|e| e.value().name() == section)
        .flat_map(|s| s.children().filter_map(ElementRef::wrap))
        .filter(|e| e.value().name() == "tr")
        .collect()
}

fn read_table(table: ElementRef) -> Option<Table> {
    // Rows straight under the table (no thead/tbody) are not pandas'.
    if table
        .children()
        .filter_map(ElementRef::wrap)
        .any(|e| !matches!(e.value().name(), "thead" | "tbody"))
    {
        return None;
    }
    let head = rows_of(table, "thead")
        .into_iter()
        .map(cells_of)
        .collect::<Option<Vec<_>>>()?;
    let body = rows_of(table, "tbody")
        .into_iter()
        .map(cells_of)
        .collect::<Option<Vec<_>>>()?;
    if body.len() > MAX_ROWS {
        return None;
    }
    let width = head.first()?.len();
    if width == 0 || width > MAX_COLUMNS || head.len() > 2 {
        return None;
    }
    // The index: the header cells that lead every body row.
    let index_columns = body
        .first()
        .map(|row| row.iter().take_while(|(th, _)| *th).count())
        .unwrap_or(0);
    let mut columns: Vec<String> = head[0].iter().map(|(_, t)| t.clone()).collect();
    if let Some(names) = head.get(1) {
        // A second header row names the index, and only the index.
        if names.len() != width || names.iter().skip(index_columns).any(|(_, t)| !t.is_empty()) {
            return None;
        }
        for (column, (_, name)) in columns.iter_mut().zip(names).take(index_columns) {
            if !name.is_empty() {
                *column = name.clone();
            }
        }
    }
    let mut rows = Vec::with_capacity(body.len());
    let mut elided = false;
    for row in body {
        if row.len() != width || row.iter().take_while(|(th, _)| *th).count() != index_columns {
            return None;
        }
        let values: Vec<String> = row.into_iter().map(|(_, t)| t).collect();
        if values.iter().all(|v| v == ELLIPSIS) {
            elided = true;
            continue;
        }
        rows.push(values);
    }
    // A column pandas left out: "..." in its header and every row.
    let left_out: Vec<usize> = (0..width)
        .filter(|&i| columns[i] == ELLIPSIS && rows.iter().all(|r| r[i] == ELLIPSIS))
        .collect();
    if !left_out.is_empty() {
        elided = true;
        for &i in left_out.iter().rev() {
            columns.remove(i);
            for row in &mut rows {
                row.remove(i);
            }
        }
    }
    Some(Table {
        columns,
        index_columns,
        rows,
        elided: elided.then(|| "a larger table".to_string()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What pandas 2 writes for a frame with a default index.
    const FRAME: &str = r#"<div>
<style scoped>
    .dataframe tbody tr th:only-of-type {
        vertical-align: middle;
    }

    .dataframe tbody tr th {
        vertical-align: top;
    }

    .dataframe thead th {
        text-align: right;
    }
</style>
<table border="1" class="dataframe">
  <thead>
    <tr style="text-align: right;">
      <th></th>
      <th>region</th>
      <th>revenue</th>
    </tr>
  </thead>
  <tbody>
    <tr>
      <th>0</th>
      <td>north</td>
      <td>1200.50</td>
    </tr>
    <tr>
      <th>1</th>
      <td>south &amp; west</td>
      <td>980.25</td>
    </tr>
  </tbody>
</table>
</div>"#;

    #[test]
    fn a_frames_data_gives_all_its_rows_and_forged_data_is_refused() {
        let rows: Vec<serde_json::Value> = (0..200)
            .map(|i| serde_json::json!([i.to_string(), format!("r{i}"), (i * 2).to_string()]))
            .collect();
        let data = serde_json::json!({
            "columns": ["", "name", "double"], "index_columns": 1, "rows": rows, "total_rows": 200
        });
        let table = from_data(&data).expect("a table");
        assert_eq!(table.rows.len(), 200);
        assert_eq!(table.rows[199], strings(&["199", "r199", "398"]));
        assert_eq!(table.elided, None);
        // Fewer rows than the frame has: said.
        let cut = serde_json::json!({
            "columns": ["", "a"], "index_columns": 1, "rows": [["0", "1"]], "total_rows": 123456
        });
        assert_eq!(
            from_data(&cut).and_then(|t| t.elided).as_deref(),
            Some("123456 rows × 1 column")
        );
        for forged in [
            serde_json::json!({"columns": ["a"], "index_columns": 2, "rows": [], "total_rows": 0}),
            serde_json::json!({"columns": ["a"], "index_columns": 0, "rows": [["1", "2"]], "total_rows": 1}),
            serde_json::json!({"columns": ["a"], "index_columns": 0, "rows": [[1]], "total_rows": 1}),
            serde_json::json!({"columns": [], "index_columns": 0, "rows": [], "total_rows": 0}),
            serde_json::json!("a string"),
        ] {
            assert_eq!(from_data(&forged), None, "{forged}");
        }
    }

    fn strings(values: &[&str]) -> Vec<String> {
        values.iter().map(|v| v.to_string()).collect()
    }

    #[test]
    fn a_data_frame_reads_into_its_columns_and_rows() {
        let table = read(FRAME).expect("a table");
        assert_eq!(table.columns, strings(&["", "region", "revenue"]));
        assert_eq!(table.index_columns, 1);
        assert_eq!(
            table.rows,
            vec![
                strings(&["0", "north", "1200.50"]),
                strings(&["1", "south & west", "980.25"])
            ]
        );
        assert_eq!(table.elided, None);
    }

    #[test]
    fn a_named_index_takes_its_name_from_the_second_header_row() {
        let html = r#"<table border="1" class="dataframe"><thead>
            <tr style="text-align: right;"><th></th><th>units</th></tr>
            <tr><th>region</th><th></th></tr></thead>
            <tbody><tr><th>north</th><td>3</td></tr></tbody></table>"#;
        let table = read(html).expect("a table");
        assert_eq!(table.columns, strings(&["region", "units"]));
        assert_eq!(table.rows, vec![strings(&["north", "3"])]);
    }

    #[test]
    fn a_shortened_frame_leaves_out_its_ellipses_and_says_so() {
        let html = r#"<div><table border="1" class="dataframe"><thead>
            <tr style="text-align: right;"><th></th><th>a</th><th>...</th><th>z</th></tr></thead>
            <tbody>
            <tr><th>0</th><td>1</td><td>...</td><td>2</td></tr>
            <tr><th>...</th><td>...</td><td>...</td><td>...</td></tr>
            <tr><th>999</th><td>3</td><td>...</td><td>4</td></tr>
            </tbody></table>
            <p>1000 rows × 30 columns</p></div>"#;
        let table = read(html).expect("a table");
        assert_eq!(table.columns, strings(&["", "a", "z"]));
        assert_eq!(
            table.rows,
            vec![strings(&["0", "1", "2"]), strings(&["999", "3", "4"])]
        );
        assert_eq!(table.elided.as_deref(), Some("1000 rows × 30 columns"));
    }

    #[test]
    fn anything_but_a_plain_frame_stays_html() {
        let styled = r#"<style type="text/css">#T_1_row0_col0 { background: red }</style>
            <table id="T_1" class="dataframe"><thead><tr><th></th><th>a</th></tr></thead>
            <tbody><tr><th>0</th><td id="T_1_row0_col0" class="data row0 col0">1</td></tr></tbody></table>"#;
        let merged = r#"<table class="dataframe"><thead><tr><th></th><th colspan="2">a</th></tr>
            <tr><th></th><th>x</th><th>y</th></tr></thead>
            <tbody><tr><th>0</th><td>1</td><td>2</td></tr></tbody></table>"#;
        let grouped = r#"<table class="dataframe"><thead><tr><th></th><th></th><th>v</th></tr></thead>
            <tbody><tr><th rowspan="2">a</th><th>x</th><td>1</td></tr>
            <tr><th>y</th><td>2</td></tr></tbody></table>"#;
        let two = format!("{FRAME}{FRAME}");
        let scripted = FRAME.replace("</table>", "</table><script>alert(1)</script>");
        let beside = FRAME.replace("</div>", "<b>look</b></div>");
        let loose_text = FRAME.replace("</table>", "</table>some words");
        let not_pandas = FRAME.replace("class=\"dataframe\"", "class=\"other\"");
        let ragged = FRAME.replace("<td>980.25</td>", "");
        let image = FRAME.replace("north", "<img src=x onerror=alert(1)>");
        // A paragraph beside the table that is not pandas' shape, alone or
        // beside the shape, would be lost from a table.
        let prose = FRAME.replace("</table>", "</table><p>see the other columns</p>");
        let shape_and_prose = FRAME.replace(
            "</table>",
            "</table><p>2 rows × 2 columns</p><p>and a secret</p>",
        );
        for html in [
            styled,
            merged,
            grouped,
            two.as_str(),
            scripted.as_str(),
            beside.as_str(),
            loose_text.as_str(),
            not_pandas.as_str(),
            ragged.as_str(),
            image.as_str(),
            prose.as_str(),
            shape_and_prose.as_str(),
            "",
            "<p>dataframe</p>",
        ]
        .iter()
        .map(|h| h.to_string())
        {
            assert_eq!(read(&html), None, "{html}");
        }
    }

    #[test]
    fn markup_in_a_value_is_its_text() {
        // pandas escapes values; what a browser would read is what is kept.
        let html = FRAME.replace("north", "&lt;script&gt;alert(1)&lt;/script&gt;");
        let table = read(&html).expect("a table");
        assert_eq!(table.rows[0][1], "<script>alert(1)</script>");
    }

    #[test]
    fn hostile_markup_is_bounded() {
        let huge = format!(
            "<table class=\"dataframe\"><thead><tr><th>a</th></tr></thead><tbody>{}</tbody></table>",
            "<tr><td>1</td></tr>".repeat(MAX_ROWS + 1)
        );
        assert_eq!(read(&huge), None);
        // Nested deep, markup would hold a parser for minutes: it is not
        // parsed at all.
        let deep = format!("{}dataframe", "<div>".repeat(100_000));
        assert!(!shallow(&deep));
        assert_eq!(read(&deep), None);
        let unclosed_cells = format!(
            "<table class=\"dataframe\"><tbody>{}</tbody></table>",
            "<tr><td><b>".repeat(50_000)
        );
        assert_eq!(read(&unclosed_cells), None);
        assert!(shallow(FRAME), "a data frame is shallow");
        let wide_cell = FRAME.replace("north", &"n".repeat(MAX_CELL_CHARS + 1));
        assert_eq!(read(&wide_cell), None);
        let unclosed = "<table class=\"dataframe\"><thead><tr><th>a<tbody><tr><td>1";
        // Read as a browser would (closed for it), or left HTML; never a panic.
        let _ = read(unclosed);
    }
}
