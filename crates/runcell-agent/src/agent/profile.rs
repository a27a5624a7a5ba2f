//! What the model is told about a session's data files: for each table its
//! columns, dtypes, row count and first rows; for JSON its shape and keys;
//! for text its line count and first lines. Computed by pandas in the
//! session's own kernel (`profile.py`), where the files are; what comes back
//! is read as a hostile peer's output: bounded, and every field checked.

use std::collections::HashMap;
use std::time::Duration;

use parking_lot::Mutex;
use serde_json::Value;

use runcell_protocol::SessionId;
use runcell_sandbox::files::FileEntry;

/// The profiler, run through `exec` in a dict of its own.
const SCRIPT: &str = include_str!("profile.py");

/// What starts the one line of the profiler's output the server reads.
const MARKER: &str = "<<runcell-profile>>";

/// How long the profiler gives itself; it reports what it has by then.
const BUDGET: Duration = Duration::from_secs(5);
/// The run's wall-clock limit, a little over the profiler's own budget.
pub const WALL: Duration = Duration::from_secs(10);
/// The most the profiler may print; more stops the run, and it counts as
/// failed.
pub const MAX_OUTPUT_BYTES: usize = 64 * 1024;

/// How many files are profiled; the rest are listed.
pub const MAX_PROFILED: usize = 8;
/// The most of the note the model is shown, in bytes.
const MAX_NOTE_BYTES: usize = 3000;
/// The most one file's part of the note takes, in bytes.
const MAX_PART_BYTES: usize = 900;
/// What a table's columns line may take before the rest are counted.
const MAX_COLUMNS_BYTES: usize = 500;

// What is kept of each field the profiler sends.
const MAX_COLUMNS: usize = 40;
const MAX_SAMPLE_ROWS: usize = 3;
const MAX_NAME_BYTES: usize = 80;
const MAX_DTYPE_BYTES: usize = 40;
const MAX_CELL_BYTES: usize = 60;
const MAX_HEAD_LINES: usize = 5;
const MAX_LINE_BYTES: usize = 200;
const MAX_SHEETS: usize = 20;
const MAX_ERROR_BYTES: usize = 200;
/// A text column's distinct values: how many columns, how many values each,
/// and how long a value may be (a longer one is left out, not cut: it is
/// matched against the question as it is).
const MAX_VALUE_COLUMNS: usize = 40;
const MAX_VALUES: usize = 200;
const MAX_VALUE_BYTES: usize = 60;
/// How far down a header may be found.
const MAX_HEADER_LINE: u64 = 10;

/// Added to the files note: the table an answer rests on is shown, not only
/// its conclusion.
pub const SHOW_THE_TABLE: &str = "When the answer rests on a table computed from these files \
(totals per group, counts, a filtered list), print that table before the answer, not only \
the winning row or the final number, so that the person can see why.";

/// Added when a file is a table: the pandas-2 idiom the small models write
/// most and pandas 3 refuses. (Adding "total a product per group as a new
/// column" here cost other data tasks in the agent bench: 10 of the first
/// 45 tasks wrong, against 6 and 8 of 47 without it.)
pub const PANDAS_NOTE: &str = "The sandbox has pandas 3: select several columns with a list \
(`df[['a', 'b']]`), never a tuple.";

/// The jail's Python packages, pinned: what the sandbox runs is what this
/// file names (`scripts/setup.sh` builds the venv from it).
const SANDBOX_REQUIREMENTS: &str = include_str!("../../../../scripts/sandbox-requirements.txt");

/// The versions of the analysis libraries the programs run with, so that
/// the model writes for them (pandas 3's `corr()`, scikit-learn without
/// `squared=`): "The sandbox has pandas 3.1.1, NumPy 2.4.6, …".
pub fn versions_note() -> String {
    let pinned = |project: &str| {
        SANDBOX_REQUIREMENTS.lines().find_map(|line| {
            let (name, version) = line.trim().split_once("==")?;
            (name.trim() == project).then(|| version.trim().to_string())
        })
    };
    let named: Vec<String> = [
        ("pandas", "pandas"),
        ("numpy", "NumPy"),
        ("scipy", "SciPy"),
        ("statsmodels", "statsmodels"),
        ("scikit-learn", "scikit-learn"),
    ]
    .iter()
    .filter_map(|(project, shown)| Some(format!("{shown} {}", pinned(project)?)))
    .collect();
    format!("The sandbox has {}.", named.join(", "))
}

/// Added when a file is plain text: a small model reaches for `read_csv`
/// on a log file and invents its columns.
pub const TEXT_NOTE: &str = "Read a text or log file line by line (split each line, or match \
it with a regular expression), not with pandas.read_csv.";

/// How the profiler reads a file, by its name's extension.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    Csv,
    Tsv,
    Excel,
    Parquet,
    Json,
    JsonLines,
    Text,
}

impl Format {
    pub fn of(name: &str) -> Option<Self> {
        let extension = name.rsplit_once('.')?.1.to_ascii_lowercase();
        Some(match extension.as_str() {
            "csv" => Self::Csv,
            "tsv" | "tab" => Self::Tsv,
            "xlsx" | "xlsm" => Self::Excel,
            "parquet" | "pq" => Self::Parquet,
            "json" => Self::Json,
            "jsonl" | "ndjson" => Self::JsonLines,
            "txt" | "log" | "md" | "xml" | "yaml" | "yml" | "ini" | "toml" | "html" | "sql"
            | "py" => Self::Text,
            _ => return None,
        })
    }

    /// The profiler's name for it.
    fn wire(self) -> &'static str {
        match self {
            Self::Csv => "csv",
            Self::Tsv => "tsv",
            Self::Excel => "excel",
            Self::Parquet => "parquet",
            Self::Json => "json",
            Self::JsonLines => "jsonl",
            Self::Text => "text",
        }
    }
}

/// A count that may have been cut short (a file too big to read whole in
/// time, rows counted as lines).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Count {
    pub n: u64,
    pub exact: bool,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Column {
    pub name: String,
    /// pandas' dtype (`int64`, `str`, `datetime64[us]`...), or for a JSON
    /// object's key what its value is (`list of 3`).
    pub dtype: String,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Table {
    pub rows: Count,
    /// The first columns.
    pub columns: Vec<Column>,
    /// How many there are in all.
    pub columns_total: u64,
    /// The first rows, each value as text.
    pub sample: Vec<Vec<String>>,
    /// A workbook's sheet names (the table is the first sheet's).
    pub sheets: Vec<String>,
    pub sheets_total: u64,
    /// The distinct values of the text columns that have few (at most 200),
    /// most common first, while the profiler's budget for them lasted.
    pub values: Vec<ColumnValues>,
    /// The line the header is on, from 0: past a title or a comment above
    /// it (a delimited file read with `skiprows` this many).
    pub header_line: u64,
    /// The field separator a delimited file was read with.
    pub sep: Option<char>,
}

/// A text column's distinct values.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ColumnValues {
    pub column: String,
    pub values: Vec<String>,
}

/// One file's profile.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Profile {
    /// CSV, TSV, Excel, Parquet.
    Table(Table),
    /// JSON that is a list of objects, or JSON lines of them.
    Records(Table),
    /// A JSON object: its first keys and what each holds.
    JsonObject {
        keys: Vec<Column>,
        keys_total: u64,
    },
    /// A JSON list of other things.
    JsonList {
        length: u64,
        items: Vec<String>,
    },
    /// JSON too big to parse here, or a lone value.
    JsonOther {
        shape: String,
    },
    Text {
        lines: Count,
        head: Vec<String>,
    },
    /// The profiler could not read it (the reason, cut).
    Unreadable(String),
}

/// The program the session's kernel runs: the profiler, in a namespace of
/// its own, for `files`.
pub fn program(files: &[(String, Format)]) -> String {
    let files: Vec<Value> = files
        .iter()
        .map(|(path, format)| serde_json::json!({ "path": path, "kind": format.wire() }))
        .collect();
    let request = serde_json::json!({
        "files": files,
        "budget_s": BUDGET.as_secs_f64(),
        "marker": MARKER,
    });
    // A JSON string is a Python string literal.
    let literal = |text: &str| Value::from(text).to_string();
    format!(
        "__import__('builtins').exec({}, {{'__name__': '__runcell_profile__', 'REQUEST': {}}})",
        literal(SCRIPT),
        literal(&request.to_string()),
    )
}

/// The profiles in the profiler's output, one for each of the `asked` files
/// in order (`None` where it sent none or one that does not parse); `None`
/// when the output has none at all.
pub fn parse(stdout: &str, asked: usize) -> Option<Vec<Option<Profile>>> {
    let line = stdout
        .lines()
        .rev()
        .find_map(|line| line.strip_prefix(MARKER))?;
    if line.len() > MAX_OUTPUT_BYTES {
        return None;
    }
    let Value::Array(items) = serde_json::from_str::<Value>(line).ok()? else {
        return None;
    };
    Some(
        (0..asked)
            .map(|i| items.get(i).and_then(profile_of))
            .collect(),
    )
}

/// `value[key]` as text, cut to `max` bytes.
fn text_at(value: &Value, key: &str, max: usize) -> Option<String> {
    value.get(key)?.as_str().map(|s| cut(s, max))
}

fn cut(text: &str, max: usize) -> String {
    let kept = runcell_sandbox::fit(text, max);
    // The model reads one line per item: no line breaks inside one.
    let kept = kept.replace(['\n', '\r'], " ");
    if kept.len() < text.len() {
        format!("{kept}…")
    } else {
        kept
    }
}

fn count_at(value: &Value, key: &str) -> Option<u64> {
    value.get(key)?.as_u64()
}

/// `[name, dtype]` pairs; anything else in the list is skipped.
fn columns_at(value: &Value, key: &str) -> Vec<Column> {
    let Some(list) = value.get(key).and_then(Value::as_array) else {
        return Vec::new();
    };
    list.iter()
        .filter_map(|pair| match pair.as_array()?.as_slice() {
            [Value::String(name), Value::String(dtype)] => Some(Column {
                name: cut(name, MAX_NAME_BYTES),
                dtype: cut(dtype, MAX_DTYPE_BYTES),
            }),
            _ => None,
        })
        .take(MAX_COLUMNS)
        .collect()
}

fn strings_at(value: &Value, key: &str, most: usize, max_bytes: usize) -> Vec<String> {
    value
        .get(key)
        .and_then(Value::as_array)
        .map(|list| {
            list.iter()
                .filter_map(Value::as_str)
                .take(most)
                .map(|s| cut(s, max_bytes))
                .collect()
        })
        .unwrap_or_default()
}

/// `[name, [value, ...]]` pairs; values too long are left out, whole.
fn values_at(value: &Value) -> Vec<ColumnValues> {
    let Some(list) = value.get("values").and_then(Value::as_array) else {
        return Vec::new();
    };
    list.iter()
        .filter_map(|pair| match pair.as_array()?.as_slice() {
            [Value::String(column), Value::Array(values)] => Some(ColumnValues {
                column: cut(column, MAX_NAME_BYTES),
                values: values
                    .iter()
                    .filter_map(Value::as_str)
                    .filter(|v| !v.is_empty() && v.len() <= MAX_VALUE_BYTES)
                    .take(MAX_VALUES)
                    .map(str::to_string)
                    .collect(),
            }),
            _ => None,
        })
        .take(MAX_VALUE_COLUMNS)
        .collect()
}

fn table_of(value: &Value) -> Option<Table> {
    let columns = columns_at(value, "columns");
    let sample = value
        .get("sample")
        .and_then(Value::as_array)
        .map(|rows| {
            rows.iter()
                .filter_map(Value::as_array)
                .take(MAX_SAMPLE_ROWS)
                .map(|row| {
                    row.iter()
                        .take(MAX_COLUMNS)
                        .map(|v| cut(v.as_str().unwrap_or("?"), MAX_CELL_BYTES))
                        .collect()
                })
                .collect()
        })
        .unwrap_or_default();
    let sheets = strings_at(value, "sheets", MAX_SHEETS, MAX_NAME_BYTES);
    Some(Table {
        rows: Count {
            n: count_at(value, "rows")?,
            exact: value.get("rows_exact").and_then(Value::as_bool) == Some(true),
        },
        columns_total: count_at(value, "columns_total")
            .unwrap_or(0)
            .max(columns.len() as u64),
        columns,
        sample,
        sheets_total: count_at(value, "sheets_total")
            .unwrap_or(0)
            .max(sheets.len() as u64),
        sheets,
        values: values_at(value),
        header_line: count_at(value, "header_line")
            .filter(|&n| n <= MAX_HEADER_LINE)
            .unwrap_or(0),
        sep: value
            .get("sep")
            .and_then(Value::as_str)
            .and_then(|sep| match sep {
                "," => Some(','),
                ";" => Some(';'),
                "\t" => Some('\t'),
                "|" => Some('|'),
                _ => None,
            }),
    })
}

/// One profile as the profiler sent it; `None` for one it skipped (out of
/// time: asked again next time) or one that is not what it should be.
fn profile_of(value: &Value) -> Option<Profile> {
    Some(match value.get("kind")?.as_str()? {
        "table" => Profile::Table(table_of(value)?),
        "records" => Profile::Records(table_of(value)?),
        "json" => match value.get("shape")?.as_str()? {
            "object" => {
                let keys = columns_at(value, "keys");
                Profile::JsonObject {
                    keys_total: count_at(value, "keys_total")
                        .unwrap_or(0)
                        .max(keys.len() as u64),
                    keys,
                }
            }
            "list" if value.get("length").is_some() => Profile::JsonList {
                length: count_at(value, "length")?,
                items: strings_at(value, "items", 10, MAX_DTYPE_BYTES),
            },
            shape => Profile::JsonOther {
                shape: cut(shape, MAX_DTYPE_BYTES),
            },
        },
        "text" => Profile::Text {
            lines: Count {
                n: count_at(value, "lines")?,
                exact: value.get("lines_exact").and_then(Value::as_bool) == Some(true),
            },
            head: strings_at(value, "head", MAX_HEAD_LINES, MAX_LINE_BYTES),
        },
        "error" => Profile::Unreadable(text_at(value, "error", MAX_ERROR_BYTES)?),
        _ => return None,
    })
}

/// A file as the note shows it.
pub struct NoteFile<'a> {
    pub path: &'a str,
    pub size: u64,
    pub profile: Option<&'a Profile>,
}

fn count(count: Count, one: &str, many: &str) -> String {
    let noun = if count.n == 1 { one } else { many };
    if count.exact {
        format!("{} {noun}", count.n)
    } else {
        format!("about {} {noun}", count.n)
    }
}

/// `items` joined with ", " while they fit in `max` bytes, then how many
/// more there are of `total`.
fn joined(items: &[String], total: u64, max: usize, noun: &str) -> String {
    let mut line = String::new();
    let mut shown = 0u64;
    for item in items {
        if !line.is_empty() && line.len() + item.len() + 2 > max {
            break;
        }
        if !line.is_empty() {
            line.push_str(", ");
        }
        line.push_str(item);
        shown += 1;
    }
    if total > shown {
        line.push_str(&format!(" … and {} more {noun}", total - shown));
    }
    line
}

fn table_lines(lines: &mut Vec<String>, table: &Table) {
    if table.header_line > 0 {
        lines.push(format!(
            "    the header is on line {} (lines above it are not the table's): read it with `skiprows={}`",
            table.header_line + 1,
            table.header_line
        ));
    }
    let columns: Vec<String> = table
        .columns
        .iter()
        .map(|c| format!("{} ({})", python_str(&c.name), c.dtype))
        .collect();
    lines.push(format!(
        "    columns, as Python writes them: {}",
        joined(&columns, table.columns_total, MAX_COLUMNS_BYTES, "columns")
    ));
    if !table.sample.is_empty() {
        lines.push("    first rows:".into());
        for row in &table.sample {
            lines.push(format!("      {}", row.join(" | ")));
        }
    }
}

/// `name` as a Python string literal: quoted, so that a header with a
/// leading space (`' WINDSPEED'`) or inner spaces (`'wind speed'`) shows
/// as the key the program must write. DABench: 3 of the 7 turns whose
/// every attempt failed used a name with its spaces lost.
pub fn python_str(name: &str) -> String {
    let mut out = String::with_capacity(name.len() + 2);
    out.push('\'');
    for c in name.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\'' => out.push_str("\\'"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            c if c.is_control() && (c as u32) <= 0xff => {
                out.push_str(&format!("\\x{:02x}", c as u32));
            }
            c if c.is_control() => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('\'');
    out
}

/// One file's lines in the note.
fn part(file: &NoteFile) -> String {
    let mut lines = Vec::new();
    let heading = format!("- {} ({} bytes)", file.path, file.size);
    match file.profile {
        None => lines.push(heading),
        Some(Profile::Table(table)) => {
            let sheets = if table.sheets_total > 1 {
                format!(
                    "; sheets: {} (the first is shown)",
                    joined(&table.sheets, table.sheets_total, 200, "sheets")
                )
            } else {
                String::new()
            };
            lines.push(format!(
                "{heading}: a table of {} and {}{sheets}",
                count(table.rows, "row", "rows"),
                count(
                    Count {
                        n: table.columns_total,
                        exact: true
                    },
                    "column",
                    "columns"
                ),
            ));
            table_lines(&mut lines, table);
        }
        Some(Profile::Records(table)) => {
            lines.push(format!(
                "{heading}: JSON, a list of {} (objects); as a DataFrame:",
                count(table.rows, "record", "records"),
            ));
            table_lines(&mut lines, table);
        }
        Some(Profile::JsonObject { keys, keys_total }) => {
            let keys: Vec<String> = keys
                .iter()
                .map(|k| format!("{} ({})", k.name, k.dtype))
                .collect();
            lines.push(format!(
                "{heading}: JSON, an object with keys: {}",
                joined(&keys, *keys_total, MAX_COLUMNS_BYTES, "keys")
            ));
        }
        Some(Profile::JsonList { length, items }) => lines.push(format!(
            "{heading}: JSON, a list of {length} items ({})",
            items.join(", ")
        )),
        Some(Profile::JsonOther { shape }) => {
            lines.push(format!("{heading}: JSON ({shape}, not read whole)"));
        }
        Some(Profile::Text { lines: n, head }) => {
            lines.push(format!("{heading}: text, {}", count(*n, "line", "lines")));
            if !head.is_empty() {
                lines.push("    first lines:".into());
                lines.extend(head.iter().map(|line| format!("      {line}")));
            }
        }
        Some(Profile::Unreadable(reason)) => {
            lines.push(format!("{heading}: could not be read ({reason})"));
        }
    }
    // Whole lines while they fit.
    let mut text = String::new();
    for line in lines {
        if !text.is_empty() && text.len() + line.len() + 1 > MAX_PART_BYTES {
            text.push_str("\n    …");
            break;
        }
        if !text.is_empty() {
            text.push('\n');
        }
        text.push_str(runcell_sandbox::fit(&line, MAX_PART_BYTES));
    }
    text
}

/// What the model is told about the session's files; `None` when there
/// are none. At most [`MAX_NOTE_BYTES`] besides the hints ([`SHOW_THE_TABLE`],
/// and [`PANDAS_NOTE`] or [`TEXT_NOTE`] for the kinds of file there are): the
/// files that do not fit are counted.
pub fn note(files: &[NoteFile]) -> Option<String> {
    if files.is_empty() {
        return None;
    }
    let mut note =
        String::from("The session has these files (the program can open them by these paths):");
    // Room for the count of those left out.
    let room = MAX_NOTE_BYTES - 40;
    for (i, file) in files.iter().enumerate() {
        let part = part(file);
        if note.len() + 1 + part.len() > room {
            note.push_str(&format!("\n- … and {} more files", files.len() - i));
            break;
        }
        note.push('\n');
        note.push_str(&part);
    }
    note.push_str("\n\n");
    note.push_str(SHOW_THE_TABLE);
    let has = |wanted: fn(&Profile) -> bool| files.iter().any(|f| f.profile.is_some_and(wanted));
    if has(|p| matches!(p, Profile::Table(_) | Profile::Records(_))) {
        note.push(' ');
        note.push_str(PANDAS_NOTE);
        note.push(' ');
        note.push_str(&versions_note());
    }
    if has(|p| matches!(p, Profile::Text { .. })) {
        note.push(' ');
        note.push_str(TEXT_NOTE);
    }
    Some(note)
}

/// A profile as it was for a file's size and time.
struct Cached {
    size: u64,
    modified_ms: u64,
    profile: Profile,
}

/// The profiles computed so far, per session and path: a file that has not
/// changed is not profiled again.
#[derive(Default)]
pub struct ProfileCache {
    by_session: Mutex<HashMap<SessionId, HashMap<String, Cached>>>,
}

impl ProfileCache {
    /// The profile of `entry` as it is now, if one was kept.
    pub fn get(&self, session: SessionId, entry: &FileEntry) -> Option<Profile> {
        let modified = entry.modified_ms?;
        let sessions = self.by_session.lock();
        let cached = sessions.get(&session)?.get(&entry.path)?;
        (cached.size == entry.size && cached.modified_ms == modified)
            .then(|| cached.profile.clone())
    }

    /// Keeps `profile` for `entry` as it is now (a file without a time is
    /// not kept: a change to it could not be seen), and forgets files that
    /// are not among `present`.
    pub fn put(&self, session: SessionId, entry: &FileEntry, profile: Profile, present: &[&str]) {
        let mut sessions = self.by_session.lock();
        let files = sessions.entry(session).or_default();
        files.retain(|path, _| present.contains(&path.as_str()));
        if let Some(modified_ms) = entry.modified_ms {
            files.insert(
                entry.path.clone(),
                Cached {
                    size: entry.size,
                    modified_ms,
                    profile,
                },
            );
        }
    }

    pub fn forget(&self, session: SessionId) {
        self.by_session.lock().remove(&session);
    }

    /// The session's tables as last profiled, each with its path, in the
    /// order of their paths.
    pub fn tables(&self, session: SessionId) -> Vec<(String, Table)> {
        let sessions = self.by_session.lock();
        let Some(files) = sessions.get(&session) else {
            return Vec::new();
        };
        let mut tables: Vec<(String, Table)> = files
            .iter()
            .filter_map(|(path, cached)| match &cached.profile {
                Profile::Table(table) | Profile::Records(table) => {
                    Some((path.clone(), table.clone()))
                }
                _ => None,
            })
            .collect();
        tables.sort_by(|a, b| a.0.cmp(&b.0));
        tables
    }

    /// The column names of the session's tables as last profiled (the
    /// keys a KeyError's hint may name).
    pub fn columns(&self, session: SessionId) -> Vec<String> {
        let sessions = self.by_session.lock();
        let Some(files) = sessions.get(&session) else {
            return Vec::new();
        };
        let mut names: Vec<String> = Vec::new();
        for cached in files.values() {
            if let Profile::Table(table) | Profile::Records(table) = &cached.profile {
                for column in &table.columns {
                    if !names.contains(&column.name) {
                        names.push(column.name.clone());
                    }
                }
            }
        }
        names
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use runcell_sandbox::files::FileKind;

    fn table(rows: u64) -> Table {
        Table {
            rows: Count {
                n: rows,
                exact: true,
            },
            columns: vec![
                Column {
                    name: "region".into(),
                    dtype: "str".into(),
                },
                Column {
                    name: "amount".into(),
                    dtype: "int64".into(),
                },
            ],
            columns_total: 2,
            sample: vec![vec!["north".into(), "10".into()]],
            sheets: Vec::new(),
            sheets_total: 0,
            values: Vec::new(),
            header_line: 0,
            sep: None,
        }
    }

    #[test]
    fn formats_come_from_extensions() {
        for (name, format) in [
            ("a.CSV", Some(Format::Csv)),
            ("a.tsv", Some(Format::Tsv)),
            ("b.xlsx", Some(Format::Excel)),
            ("c.parquet", Some(Format::Parquet)),
            ("d.json", Some(Format::Json)),
            ("e.ndjson", Some(Format::JsonLines)),
            ("server.log", Some(Format::Text)),
            ("photo.png", None),
            ("Makefile", None),
            ("old.xls", None),
        ] {
            assert_eq!(Format::of(name), format, "{name}");
        }
    }

    #[test]
    fn the_program_runs_the_profiler_in_a_namespace_of_its_own() {
        let code = program(&[("/home/user/it's \"odd\".csv".into(), Format::Csv)]);
        assert!(code.starts_with("__import__('builtins').exec(\""), "{code}");
        assert!(code.contains("'REQUEST': \""), "{code}");
        // The path travels inside a JSON string inside a Python string.
        assert!(code.contains(r#"it's \\\"odd\\\".csv"#), "{code}");
        assert!(code.len() < SCRIPT.len() * 2, "{}", code.len());
    }

    #[test]
    fn the_profilers_output_is_read_into_profiles() {
        let stdout = format!(
            "noise\n{MARKER}{}\n",
            serde_json::json!([
                {"kind": "table", "rows": 3, "rows_exact": true,
                 "columns": [["region", "str"], ["amount", "int64"]], "columns_total": 2,
                 "sample": [["north", "10"]]},
                {"kind": "records", "rows": 2, "rows_exact": true,
                 "columns": [["id", "int64"]], "columns_total": 1, "sample": []},
                {"kind": "json", "shape": "object", "keys": [["name", "str"]], "keys_total": 1},
                {"kind": "json", "shape": "list", "length": 4, "items": ["int"]},
                {"kind": "json", "shape": "list", "parsed": false},
                {"kind": "text", "lines": 57, "lines_exact": false, "head": ["a", "b"]},
                {"kind": "error", "error": "ParserError: bad"},
                {"kind": "skipped"},
            ])
        );
        let profiles = parse(&stdout, 9).unwrap();
        assert_eq!(profiles[0], Some(Profile::Table(table(3))));
        assert!(
            matches!(&profiles[1], Some(Profile::Records(t)) if t.rows.n == 2 && t.columns[0].name == "id")
        );
        assert!(
            matches!(&profiles[2], Some(Profile::JsonObject { keys, keys_total: 1 }) if keys[0].name == "name")
        );
        assert!(matches!(
            &profiles[3],
            Some(Profile::JsonList { length: 4, items }) if items == &["int"]
        ));
        assert!(matches!(&profiles[4], Some(Profile::JsonOther { shape }) if shape == "list"));
        assert!(matches!(
            &profiles[5],
            Some(Profile::Text { lines: Count { n: 57, exact: false }, head }) if head.len() == 2
        ));
        assert!(matches!(&profiles[6], Some(Profile::Unreadable(e)) if e == "ParserError: bad"));
        // Skipped, and not sent at all.
        assert_eq!(profiles[7], None);
        assert_eq!(profiles[8], None);
    }

    #[test]
    fn text_values_and_the_header_line_are_read_and_bounded() {
        let long = "v".repeat(MAX_VALUE_BYTES + 1);
        let many: Vec<String> = (0..MAX_VALUES + 5).map(|i| format!("v{i}")).collect();
        let stdout = format!(
            "{MARKER}{}",
            serde_json::json!([
                {"kind": "table", "rows": 3, "rows_exact": true,
                 "columns": [["source", "str"]], "columns_total": 1, "sample": [],
                 "values": [["source", ["abc-news", long, "", 7, "reuters"]],
                            ["many", many], ["bad"], [1, ["x"]]],
                 "header_line": 1, "sep": ";"},
                {"kind": "table", "rows": 3, "columns": [], "sample": [],
                 "values": "no", "header_line": 99, "sep": "x"},
            ])
        );
        let profiles = parse(&stdout, 2).unwrap();
        let Some(Profile::Table(first)) = &profiles[0] else {
            panic!("a table: {profiles:?}");
        };
        assert_eq!(first.values.len(), 2);
        assert_eq!(
            first.values[0],
            ColumnValues {
                column: "source".into(),
                values: vec!["abc-news".into(), "reuters".into()],
            }
        );
        assert_eq!(first.values[1].values.len(), MAX_VALUES);
        assert_eq!((first.header_line, first.sep), (1, Some(';')));
        let Some(Profile::Table(second)) = &profiles[1] else {
            panic!("a table: {profiles:?}");
        };
        assert_eq!(
            (second.values.len(), second.header_line, second.sep),
            (0, 0, None)
        );
        let part = part(&NoteFile {
            path: "/home/user/t.csv",
            size: 1,
            profile: Some(&Profile::Table(Table {
                header_line: 2,
                ..table(3)
            })),
        });
        assert!(
            part.contains("\n    the header is on line 3 (lines above it are not the table's): read it with `skiprows=2`\n    columns,"),
            "{part}"
        );
    }

    #[test]
    fn hostile_output_is_refused_or_bounded() {
        let at = |json: &str| parse(&format!("{MARKER}{json}"), 1);
        // No marker, not JSON, not a list, too deep, too big.
        assert_eq!(parse("[{}]", 1), None);
        assert_eq!(at("{\"kind\": \"table\"}"), None);
        assert_eq!(at("[{"), None);
        assert_eq!(
            at(&format!("{}{}", "[".repeat(10_000), "]".repeat(10_000))),
            None
        );
        let huge = format!(
            "[{{\"kind\": \"error\", \"error\": \"{}\"}}]",
            "x".repeat(MAX_OUTPUT_BYTES)
        );
        assert_eq!(at(&huge), None);
        // Wrong types and missing keys: that profile is dropped.
        for bad in [
            r#"[{"kind": 3}]"#,
            r#"[{"kind": "table", "rows": "many"}]"#,
            r#"[{"kind": "table", "rows": -1}]"#,
            r#"[{"kind": "text"}]"#,
            r#"[{"kind": "error", "error": ["no"]}]"#,
            r#"[{"kind": "json"}]"#,
            r#"[{"kind": "json", "shape": "list", "length": "x"}]"#,
            r#"[{"kind": "unheard of"}]"#,
            r#"["table"]"#,
            r#"[null]"#,
        ] {
            assert_eq!(at(bad), Some(vec![None]), "{bad}");
        }
        // What is there but wrong inside is skipped; long things are cut,
        // and no line break gets into the note.
        let long = "y".repeat(500);
        let mut columns = vec![
            serde_json::json!([1, "int64"]),
            serde_json::json!(["only one"]),
        ];
        columns.extend((0..60).map(|i| serde_json::json!([format!("c{i}\n{long}"), "int64"])));
        let odd = serde_json::json!([{
            "kind": "table", "rows": 5, "rows_exact": "yes",
            "columns": columns,
            "columns_total": 2,
            "sample": [[long, 1, null], "not a row", [], [], []],
            "sheets": [long, 7],
        }]);
        let Some(Profile::Table(t)) = at(&odd.to_string()).unwrap().remove(0) else {
            panic!("the table was dropped");
        };
        assert!(!t.rows.exact);
        assert_eq!(t.columns.len(), MAX_COLUMNS);
        assert_eq!(t.columns[0].name.len(), MAX_NAME_BYTES + '…'.len_utf8());
        assert!(!t.columns[0].name.contains('\n'));
        assert_eq!(t.columns_total, MAX_COLUMNS as u64);
        assert_eq!(t.sample.len(), MAX_SAMPLE_ROWS);
        assert_eq!(t.sample[0][1], "?");
        assert!(t.sample[0][0].len() <= MAX_CELL_BYTES + 3);
        assert_eq!(t.sheets.len(), 1);
        let part = part(&NoteFile {
            path: "/home/user/wide.csv",
            size: 1,
            profile: Some(&Profile::Table(t)),
        });
        assert!(part.len() <= MAX_PART_BYTES + 10, "{}", part.len());
        assert!(part.contains("more columns"), "{part}");
    }

    #[test]
    fn the_note_shows_each_profile() {
        let files = [
            Profile::Table(Table {
                sheets: vec!["2024".into(), "2025".into()],
                sheets_total: 2,
                ..table(3)
            }),
            Profile::Records(table(2)),
            Profile::JsonObject {
                keys: vec![Column {
                    name: "items".into(),
                    dtype: "list of 3".into(),
                }],
                keys_total: 1,
            },
            Profile::Text {
                lines: Count {
                    n: 57000,
                    exact: false,
                },
                head: vec!["INFO start".into()],
            },
            Profile::Unreadable("ParserError: bad".into()),
        ];
        let paths = ["a.xlsx", "b.json", "c.json", "d.log", "e.csv"];
        let mut shown: Vec<NoteFile> = files
            .iter()
            .zip(paths)
            .map(|(profile, path)| NoteFile {
                path,
                size: 10,
                profile: Some(profile),
            })
            .collect();
        shown.push(NoteFile {
            path: "photo.png",
            size: 9000,
            profile: None,
        });
        let note = note(&shown).unwrap();
        for expected in [
            "- a.xlsx (10 bytes): a table of 3 rows and 2 columns; sheets: 2024, 2025 (the first is shown)\n    columns, as Python writes them: 'region' (str), 'amount' (int64)\n    first rows:\n      north | 10",
            "- b.json (10 bytes): JSON, a list of 2 records",
            "- c.json (10 bytes): JSON, an object with keys: items (list of 3)",
            "- d.log (10 bytes): text, about 57000 lines\n    first lines:\n      INFO start",
            "- e.csv (10 bytes): could not be read (ParserError: bad)",
            "- photo.png (9000 bytes)\n\n",
            SHOW_THE_TABLE,
            PANDAS_NOTE,
            "The sandbox has pandas 3.",
            TEXT_NOTE,
        ] {
            assert!(note.contains(expected), "{expected}\n---\n{note}");
        }
        assert_eq!(super::note(&[]), None);
        // Each hint only where its kind of file is.
        let text_only = super::note(&shown[3..4]).unwrap();
        assert!(text_only.contains(TEXT_NOTE) && !text_only.contains(PANDAS_NOTE));
        let table_only = super::note(&shown[..1]).unwrap();
        assert!(table_only.contains(PANDAS_NOTE) && !table_only.contains(TEXT_NOTE));
    }

    #[test]
    fn many_files_are_counted_once_the_note_is_full() {
        let profile = Profile::Text {
            lines: Count { n: 1, exact: true },
            head: vec!["z".repeat(MAX_LINE_BYTES); MAX_HEAD_LINES],
        };
        let paths: Vec<String> = (0..500).map(|i| format!("/home/user/f{i}.txt")).collect();
        let files: Vec<NoteFile> = paths
            .iter()
            .map(|path| NoteFile {
                path,
                size: 1,
                profile: Some(&profile),
            })
            .collect();
        let note = note(&files).unwrap();
        assert!(
            note.len() <= MAX_NOTE_BYTES + SHOW_THE_TABLE.len() + TEXT_NOTE.len() + 3,
            "{}",
            note.len()
        );
        let shown = note.matches("\n- /home/user/").count();
        assert!(shown >= 2, "{note}");
        assert!(
            note.contains(&format!("\n- … and {} more files\n", 500 - shown)),
            "{note}"
        );
    }

    #[test]
    fn profiles_are_kept_while_the_file_is_unchanged() {
        let cache = ProfileCache::default();
        let session = SessionId::random();
        let entry = |path: &str, size, modified_ms| FileEntry {
            path: path.into(),
            name: path.into(),
            kind: FileKind::File,
            size,
            mode: 0o644,
            modified_ms,
            symlink_target: None,
        };
        let a = entry("/home/user/a.csv", 10, Some(5));
        let profile = Profile::Unreadable("x".into());
        cache.put(session, &a, profile.clone(), &["/home/user/a.csv"]);
        assert_eq!(cache.get(session, &a), Some(profile.clone()));
        assert_eq!(
            cache.get(session, &entry("/home/user/a.csv", 11, Some(5))),
            None
        );
        assert_eq!(
            cache.get(session, &entry("/home/user/a.csv", 10, Some(6))),
            None
        );
        assert_eq!(cache.get(SessionId::random(), &a), None);
        // Without a time nothing is kept.
        let timeless = entry("/home/user/b.csv", 1, None);
        cache.put(
            session,
            &timeless,
            profile.clone(),
            &["/home/user/a.csv", "/home/user/b.csv"],
        );
        assert_eq!(cache.get(session, &timeless), None);
        // A file that is gone is forgotten.
        let c = entry("/home/user/c.csv", 1, Some(1));
        cache.put(session, &c, profile.clone(), &["/home/user/c.csv"]);
        assert_eq!(cache.get(session, &a), None);
        assert_eq!(cache.get(session, &c), Some(profile));
        cache.forget(session);
        assert_eq!(cache.get(session, &c), None);
    }
}
