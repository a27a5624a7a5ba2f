//! Look, then compute: before the model writes the program that answers a
//! question, runcell may run a short program of its own that shows what the
//! question needs read right, when the data says it is needed. Nothing here
//! reads the question's English for meaning: its words are only compared
//! with what the person's tables hold, as the files' profile found them
//! (`profile.py` sends each text column's distinct values when it has few,
//! and the line a delimited file's header is on).
//!
//! A look runs when
//! - a phrase of the question is a value of a text column written another
//!   way (case, punctuation, spaces: "ABC News" where the column holds
//!   `abc-news`): it prints that column's most common values, with counts;
//! - a phrase of the question is a column's name written another way than
//!   case ("wind speed" for `' WINDSPEED'` or `wind_speed`): it prints the
//!   file's real column names (a name differing only in case is left to the
//!   files note and the KeyError's hint: a wrong key fails loudly, a wrong
//!   value filters silently);
//! - a delimited file's header is not on its first line (a title or a
//!   comment above it): it prints the first lines and the columns that
//!   `skiprows` reads.
//!
//! The look program is deterministic and costs no model tokens. It runs in
//! the session's kernel as a code cell (no attempt number, first line
//! `# Looking at the data: …`) and its result cell, the person sees both,
//! and it leaves no name behind (everything is inside a function it deletes).
//! A look that fails or is stopped is logged and left out: the turn goes on
//! as if none was needed. A look refused for want of a free kernel ends the
//! turn there, as the model's program would be refused alike: one refusal,
//! and no model tokens spent on a program that cannot run.
//!
//! `Agent::ask` calls it once the opening messages are built, before the
//! model writes code, and appends [`Looked::messages`] after the question:
//!
//! ```ignore
//! match self.look(session, &text, cancel).await {
//!     Look::Looked(looked) => turn.messages.extend(looked.messages()),
//!     Look::Skipped => {}
//!     Look::Refused(cell) => return refused(cell),
//! }
//! ```

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::Agent;
use super::code::publish_complete;
use super::execute::{Program, RunEnd, run_into_cell};
use super::profile::{Format, Table, python_str};
use super::prompt;
use crate::session::SessionLog;
use runcell_llm::Message;
use runcell_llm::tools::result_message;
use runcell_protocol::CellId;
use runcell_sandbox::{Language, Limits};

/// What the look program's first line starts with.
pub use runcell_protocol::LOOK_COMMENT;

/// The most phrase a value or a column name may be, in words.
const MAX_PHRASE_WORDS: usize = 6;
/// Shorter folded values and names are not matched ("a", "no", "AT"):
/// they are words of any question.
const MIN_FOLDED_CHARS: usize = 3;
/// How much of a question is read.
const MAX_QUESTION_BYTES: usize = 4000;
/// How many columns' values one look prints.
const MAX_VALUE_COLUMNS: usize = 3;
/// How many of a column's most common values it prints (and the ones the
/// question named, wherever they are).
const SHOWN_VALUES: usize = 25;
/// How many first lines of a file whose header is further down.
const SHOWN_LINES: usize = 5;
/// The look's own limits: it reads the files once and prints little.
const WALL: Duration = Duration::from_secs(20);
const OUTPUT_BYTES: usize = 16 * 1024;

/// Sent after the look's output.
pub const LOOKED_REQUEST: &str = "That is what the data holds. Now write the program that \
answers the question, using these exact values, column names and read options.";

/// Why a look runs: what in the data calls for it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Sight {
    /// The question writes `said`; `column` of `path` holds them only as
    /// `held`.
    Value {
        path: String,
        column: String,
        said: Vec<String>,
        held: Vec<String>,
    },
    /// The question writes `said` for the column `column` of `path`.
    Column {
        path: String,
        said: String,
        column: String,
    },
    /// The header of `path` is on line `line + 1`.
    Header { path: String, line: u64 },
}

impl Sight {
    /// Its class, for logs and counts.
    pub fn class(&self) -> &'static str {
        match self {
            Self::Value { .. } => "value",
            Self::Column { .. } => "column",
            Self::Header { .. } => "header",
        }
    }

    fn path(&self) -> &str {
        match self {
            Self::Value { path, .. } | Self::Column { path, .. } | Self::Header { path, .. } => {
                path
            }
        }
    }
}

/// What came of a look at the data.
pub(super) enum Look {
    /// None was needed, or it failed or was stopped: the turn goes on
    /// without it.
    Skipped,
    /// It ran: what it printed goes to the model.
    Looked(Looked),
    /// No kernel was free for it (the `kernel_refused` event names its code
    /// cell): the turn ends with that cell.
    Refused(CellId),
}

#[cfg(test)]
impl Look {
    /// The look that ran, if one did.
    fn looked(self) -> Option<Looked> {
        match self {
            Look::Looked(looked) => Some(looked),
            Look::Skipped | Look::Refused(_) => None,
        }
    }
}

/// A look that ran: its program and what it printed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Looked {
    pub code: String,
    pub report: String,
    pub sights: Vec<Sight>,
}

impl Looked {
    /// The two messages that follow the question: the look program as the
    /// model would have written it, and its output with the request to
    /// answer now.
    pub fn messages(&self) -> [Message; 2] {
        [
            prompt::program_message(Language::Python.name(), &self.code),
            Message::user(result_message(&self.report, LOOKED_REQUEST)),
        ]
    }
}

/// `text` as compared: lowercase letters and digits only.
fn folded(text: &str) -> String {
    text.chars()
        .filter(|c| c.is_alphanumeric())
        .flat_map(char::to_lowercase)
        .collect()
}

/// Whether a folded value or name is worth matching: long enough, and not
/// a number or a date.
fn matchable(folded: &str) -> bool {
    folded.chars().count() >= MIN_FOLDED_CHARS && !folded.chars().all(|c| c.is_ascii_digit())
}

/// The question's phrases of up to [`MAX_PHRASE_WORDS`] words, folded, each
/// with the first phrase (trimmed of quotes and punctuation) that folds so.
fn phrases(question: &str) -> HashMap<String, String> {
    let question = runcell_sandbox::fit(question, MAX_QUESTION_BYTES);
    let words: Vec<&str> = question.split_whitespace().collect();
    let mut found = HashMap::new();
    for start in 0..words.len() {
        for end in start + 1..=(start + MAX_PHRASE_WORDS).min(words.len()) {
            let phrase = words[start..end]
                .join(" ")
                .trim_matches(|c: char| !c.is_alphanumeric())
                .to_string();
            let key = folded(&phrase);
            if matchable(&key) {
                found.entry(key).or_insert(phrase);
            }
        }
    }
    found
}

/// What calls for a look at `tables` (path and profile) before `question`
/// is answered; none when nothing does.
pub fn sights(question: &str, tables: &[(String, Table)]) -> Vec<Sight> {
    let phrases = phrases(question);
    let lower = question.to_lowercase();
    let mut sights = Vec::new();
    for (path, table) in tables {
        if table.header_line > 0 {
            sights.push(Sight::Header {
                path: path.clone(),
                line: table.header_line,
            });
        }
        for column in &table.values {
            let mut held: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
            for value in &column.values {
                if let Some(said) = phrases.get(&folded(value)) {
                    held.entry(said).or_default().push(value);
                }
            }
            // A phrase the column also holds as written is not looked at
            // ("ABC News" in `author`).
            held.retain(|_, values| !values.iter().any(|v| question.contains(v)));
            if !held.is_empty() {
                sights.push(Sight::Value {
                    path: path.clone(),
                    column: column.column.clone(),
                    said: held.keys().map(|s| s.to_string()).collect(),
                    held: held.values().flatten().map(|v| v.to_string()).collect(),
                });
            }
        }
        for column in &table.columns {
            let key = folded(&column.name);
            let Some(said) = phrases.get(&key) else {
                continue;
            };
            let exact =
                column.name == column.name.trim() && lower.contains(&column.name.to_lowercase());
            if !exact {
                sights.push(Sight::Column {
                    path: path.clone(),
                    said: said.clone(),
                    column: column.name.clone(),
                });
            }
        }
    }
    sights
}

/// How the look reads a file.
#[derive(Clone, Copy)]
enum Read<'a> {
    /// Whole, as a program would (shown, not run).
    Whole,
    /// Only the header.
    Header,
    /// One column whole.
    Column(&'a str),
}

/// The pandas call that reads `path` as the profile did, for `read`.
fn read_call(path: &str, table: &Table, read: Read<'_>) -> Option<String> {
    let format = Format::of(path)?;
    let mut options = String::new();
    let call = match format {
        Format::Csv | Format::Tsv => {
            match (format, table.sep) {
                (Format::Tsv, _) | (_, Some('\t')) => options.push_str(", sep='\\t'"),
                (_, Some(sep)) if sep != ',' => options.push_str(&format!(", sep='{sep}'")),
                _ => {}
            }
            if table.header_line > 0 {
                options.push_str(&format!(", skiprows={}", table.header_line));
            }
            "pd.read_csv"
        }
        Format::Excel => "pd.read_excel",
        Format::Parquet => "pd.read_parquet",
        Format::Json => "pd.read_json",
        Format::JsonLines => {
            options.push_str(", lines=True");
            "pd.read_json"
        }
        Format::Text => return None,
    };
    match (format, read) {
        (Format::Csv | Format::Tsv | Format::Excel, Read::Header) => options.push_str(", nrows=0"),
        (Format::Csv | Format::Tsv | Format::Excel, Read::Column(name)) => {
            options.push_str(&format!(", usecols=[{}]", python_str(name)));
        }
        (Format::Parquet, Read::Column(name)) => {
            options.push_str(&format!(", columns=[{}]", python_str(name)));
        }
        _ => {}
    }
    Some(format!("{call}({}{options})", python_str(path)))
}

/// The file's name, for what the program says.
fn file_name(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

/// The lines that print `path`'s first lines and the columns its header
/// line gives.
fn header_lines(path: &str, table: &Table) -> Option<String> {
    let whole = read_call(path, table, Read::Whole)?;
    let header = read_call(path, table, Read::Header)?;
    let heading = python_str(&format!("The first lines of {}:", file_name(path)));
    let reads = python_str(&format!("{whole} reads the columns:"));
    Some(format!(
        "    with open({}, encoding='utf-8-sig', errors='replace') as f:\n        \
         print({heading})\n        \
         for n, line in enumerate(itertools.islice(f, {SHOWN_LINES}), 1):\n            \
         print(f'{{n}}: {{line.rstrip()[:200]}}')\n    \
         print({reads}, list({header}.columns))",
        python_str(path),
    ))
}

/// The lines that print a column's most common values with their counts,
/// and `held` (the question's values as the column writes them) wherever
/// they are.
fn value_lines(path: &str, table: &Table, column: &str, held: &[String]) -> Option<String> {
    let read = read_call(path, table, Read::Column(column))?;
    let column = python_str(column);
    let held: Vec<String> = held.iter().map(|v| python_str(v)).collect();
    Some(format!(
        "    column = {column}\n    \
         counts = {read}[column].dropna().astype(str).value_counts()\n    \
         print(f'{{column!r}} has {{counts.size}} distinct values; the most common, with counts:')\n    \
         shown = list(counts.index[:{SHOWN_VALUES}])\n    \
         shown += [v for v in [{}] if v in counts.index[{SHOWN_VALUES}:]]\n    \
         for value in shown:\n        \
         print(f'  {{value!r}}: {{counts[value]}}')",
        held.join(", "),
    ))
}

/// The look program for `sights` over `tables`; `None` when none of them
/// can be looked at.
pub fn program(sights: &[Sight], tables: &[(String, Table)]) -> Option<String> {
    let mut said = Vec::new();
    let mut body = Vec::new();
    let mut lines_read = false;
    let mut value_columns = 0;
    let mut listed: Vec<&str> = Vec::new();
    for sight in sights {
        let path = sight.path();
        let Some((_, table)) = tables.iter().find(|(p, _)| p == path) else {
            continue;
        };
        let name = file_name(path);
        let (what, lines) = match sight {
            Sight::Header { line, .. } => {
                lines_read = true;
                (
                    format!(
                        "the first lines of {name} (its header is on line {})",
                        line + 1
                    ),
                    header_lines(path, table),
                )
            }
            Sight::Column { .. } if listed.contains(&path) => continue,
            Sight::Column { .. } => {
                listed.push(path);
                let lines = read_call(path, table, Read::Header).map(|read| {
                    let heading = python_str(&format!("The columns of {name}:"));
                    format!("    print({heading}, list({read}.columns))")
                });
                (format!("the column names of {name}"), lines)
            }
            Sight::Value { column, held, .. } => {
                // A name the profile cut would not be found.
                if value_columns == MAX_VALUE_COLUMNS || column.ends_with('…') {
                    continue;
                }
                value_columns += 1;
                (
                    format!("the values of {} in {name}", python_str(column)),
                    value_lines(path, table, column, held),
                )
            }
        };
        if let Some(lines) = lines {
            // The comment stays one line whatever a file is called.
            said.push(what.replace(|c: char| c.is_control(), " "));
            body.push(lines);
        }
    }
    if body.is_empty() {
        return None;
    }
    let imports = if lines_read {
        "    import itertools\n\n    import pandas as pd\n"
    } else {
        "    import pandas as pd\n"
    };
    Some(format!(
        "{LOOK_COMMENT}{}\ndef _runcell_look():\n{imports}\n{}\n\n\n_runcell_look()\ndel _runcell_look\n",
        said.join("; "),
        body.join("\n\n"),
    ))
}

impl Agent {
    /// Looks at the session's tables before `question` is answered, when
    /// the data calls for it (see the module's documentation): the look
    /// program runs in the session's kernel as a code cell and its result;
    /// [`Look::Skipped`] when no look is needed, or it failed or was stopped
    /// (logged: the turn goes on without it).
    pub(super) async fn look(
        &self,
        session: &SessionLog,
        question: &str,
        cancel: &CancellationToken,
    ) -> Look {
        let tables = self.kernels.table_profiles(session.id());
        let sights = sights(question, &tables);
        if sights.is_empty() || cancel.is_cancelled() {
            return Look::Skipped;
        }
        let Some(code) = program(&sights, &tables) else {
            return Look::Skipped;
        };
        let classes: Vec<&str> = sights.iter().map(Sight::class).collect();
        let cell = publish_complete(
            session,
            &self.highlighter,
            &code,
            Language::Python.name(),
            None,
        );
        let limits = Limits {
            wall: WALL.min(self.settings.limits.wall),
            output_bytes: OUTPUT_BYTES.min(self.settings.limits.output_bytes),
            ..self.settings.limits.clone()
        };
        let program = Program {
            code_cell: cell,
            attempt: None,
            language: Language::Python,
            code: &code,
        };
        let ran = run_into_cell(&self.kernels, session, program, &limits, cancel).await;
        match ran.end {
            RunEnd::Ok => {}
            RunEnd::Refused => {
                tracing::info!(sights = ?classes, "no kernel free for the look at the data; the turn ends");
                return Look::Refused(cell);
            }
            end => {
                tracing::info!(sights = ?classes, ?end, "the look at the data did not run; going on without it");
                return Look::Skipped;
            }
        }
        tracing::info!(sights = ?classes, "looked at the data");
        Look::Looked(Looked {
            code,
            report: ran.report,
            sights,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::profile::{Column, ColumnValues, Count};

    fn table(columns: &[&str], values: &[(&str, &[&str])], header_line: u64) -> Table {
        Table {
            rows: Count { n: 3, exact: true },
            columns: columns
                .iter()
                .map(|name| Column {
                    name: (*name).into(),
                    dtype: "str".into(),
                })
                .collect(),
            columns_total: columns.len() as u64,
            sample: Vec::new(),
            sheets: Vec::new(),
            sheets_total: 0,
            values: values
                .iter()
                .map(|(column, values)| ColumnValues {
                    column: (*column).into(),
                    values: values.iter().map(|v| (*v).into()).collect(),
                })
                .collect(),
            header_line,
            sep: Some(','),
        }
    }

    const NEWS: &str = "/home/user/news.csv";

    fn news() -> (String, Table) {
        (
            NEWS.into(),
            table(
                &[
                    "author",
                    "source",
                    "neg",
                    "wind_speed",
                    "Fare",
                    "Sex",
                    "Student",
                ],
                &[
                    ("author", &["Reuters Editorial", "ABC News"]),
                    ("source", &["reuters", "abc-news"]),
                    ("Sex", &["Male", "female"]),
                    ("Student", &["No", "Yes"]),
                    ("day", &["2018", "2018-08-29"]),
                ],
                0,
            ),
        )
    }

    fn value(column: &str, said: &str, held: &[&str]) -> Sight {
        Sight::Value {
            path: NEWS.into(),
            column: column.into(),
            said: vec![said.into()],
            held: held.iter().map(|v| (*v).into()).collect(),
        }
    }

    /// Question and tables → what calls for a look.
    #[test]
    fn a_look_is_called_for_by_what_the_data_holds() {
        let titled = || {
            (
                "/home/user/logan.csv".to_string(),
                table(&["Wins", "Name"], &[], 1),
            )
        };
        // The question, the tables, what calls for a look.
        type Case = (&'static str, Vec<(String, Table)>, Vec<Sight>);
        let cases: Vec<Case> = vec![
            // Written another way than the column holds it; `author`
            // holds it as written, so only `source` is looked at.
            (
                "What share of the articles from \"ABC News\" are negative?",
                vec![news()],
                vec![value("source", "ABC News", &["abc-news"])],
            ),
            // Written as the column holds it.
            (
                "How many articles has abc-news?",
                vec![(
                    NEWS.into(),
                    table(&["source"], &[("source", &["reuters", "abc-news"])], 0),
                )],
                vec![],
            ),
            // Each column on its own: `author` holds "abc-news" only as
            // "ABC News".
            (
                "How many articles has abc-news?",
                vec![news()],
                vec![value("author", "abc-news", &["ABC News"])],
            ),
            // No value of the table, no column written another way.
            (
                "What is the mean neg of the articles?",
                vec![news()],
                vec![],
            ),
            // Case alone: a value filters silently, a column name fails
            // loudly (left to the files note).
            (
                "What is the mean fare of male passengers?",
                vec![news()],
                vec![value("Sex", "male", &["Male"])],
            ),
            // Several phrases of one column: one look at it.
            (
                "What is the mean fare of male and FEMALE passengers?",
                vec![news()],
                vec![Sight::Value {
                    path: NEWS.into(),
                    column: "Sex".into(),
                    said: vec!["FEMALE".into(), "male".into()],
                    held: vec!["female".into(), "Male".into()],
                }],
            ),
            // Too short ("no", "yes" is three), numbers and dates are not
            // matched.
            (
                "Are there no articles from 2018 or 2018-08-29? yes",
                vec![news()],
                vec![value("Student", "yes", &["Yes"])],
            ),
            // A column named loosely.
            (
                "What is the mean wind speed?",
                vec![news()],
                vec![Sight::Column {
                    path: NEWS.into(),
                    said: "wind speed".into(),
                    column: "wind_speed".into(),
                }],
            ),
            // A header with a space around it is never named exactly.
            (
                "What is the mean WINDSPEED?",
                vec![(
                    "/home/user/baro.csv".into(),
                    table(&["DATE TIME", " WINDSPEED"], &[], 0),
                )],
                vec![Sight::Column {
                    path: "/home/user/baro.csv".into(),
                    said: "WINDSPEED".into(),
                    column: " WINDSPEED".into(),
                }],
            ),
            // A title line above the header, whatever the question.
            (
                "How many wins?",
                vec![titled()],
                vec![Sight::Header {
                    path: "/home/user/logan.csv".into(),
                    line: 1,
                }],
            ),
            ("What is 2 + 2?", vec![], vec![]),
        ];
        for (question, tables, expect) in cases {
            assert_eq!(sights(question, &tables), expect, "{question}");
        }
    }

    #[test]
    fn the_look_program_prints_the_values_the_columns_and_the_first_lines() {
        let mut titled = table(&["Wins", "Name"], &[], 1);
        titled.sep = Some(';');
        let tables = vec![news(), ("/home/user/logan.csv".into(), titled)];
        let sights = vec![
            value("source", "ABC News", &["abc-news"]),
            Sight::Column {
                path: NEWS.into(),
                said: "wind speed".into(),
                column: "wind_speed".into(),
            },
            Sight::Column {
                path: NEWS.into(),
                said: "fare".into(),
                column: "Fare".into(),
            },
            Sight::Header {
                path: "/home/user/logan.csv".into(),
                line: 1,
            },
        ];
        let code = program(&sights, &tables).unwrap();
        assert_eq!(
            code,
            "# Looking at the data: the values of 'source' in news.csv; the column names of news.csv; the first lines of logan.csv (its header is on line 2)
def _runcell_look():
    import itertools

    import pandas as pd

    column = 'source'
    counts = pd.read_csv('/home/user/news.csv', usecols=['source'])[column].dropna().astype(str).value_counts()
    print(f'{column!r} has {counts.size} distinct values; the most common, with counts:')
    shown = list(counts.index[:25])
    shown += [v for v in ['abc-news'] if v in counts.index[25:]]
    for value in shown:
        print(f'  {value!r}: {counts[value]}')

    print('The columns of news.csv:', list(pd.read_csv('/home/user/news.csv', nrows=0).columns))

    with open('/home/user/logan.csv', encoding='utf-8-sig', errors='replace') as f:
        print('The first lines of logan.csv:')
        for n, line in enumerate(itertools.islice(f, 5), 1):
            print(f'{n}: {line.rstrip()[:200]}')
    print('pd.read_csv(\\'/home/user/logan.csv\\', sep=\\';\\', skiprows=1) reads the columns:', list(pd.read_csv('/home/user/logan.csv', sep=';', skiprows=1, nrows=0).columns))


_runcell_look()
del _runcell_look
"
        );
        // Nothing that can be read: no program.
        assert_eq!(
            program(
                &[Sight::Header {
                    path: "/home/user/notes.txt".into(),
                    line: 1
                }],
                &[("/home/user/notes.txt".into(), table(&[], &[], 1))]
            ),
            None
        );
    }

    #[test]
    fn what_was_seen_follows_the_question_as_a_program_and_its_output() {
        let looked = Looked {
            code: "print(1)".into(),
            report: "1\n".into(),
            sights: Vec::new(),
        };
        let [program, output] = looked.messages();
        assert_eq!(program.role, runcell_llm::Role::Assistant);
        assert_eq!(program.content, "```python\nprint(1)\n```");
        assert_eq!(output.role, runcell_llm::Role::User);
        assert_eq!(output.content, result_message("1\n", LOOKED_REQUEST));
    }

    /// The agent over the real jail and the scripted model, as the server
    /// assembles it; `None` (said on stderr) where the jail cannot run.
    async fn jailed(dir: &std::path::Path) -> Option<(Agent, crate::session::SessionHub)> {
        let settings = runcell_sandbox::config::SandboxConfig::default();
        let jail = runcell_sandbox::jail::JailSandbox::new(
            runcell_sandbox::jail::JailConfig::from_settings(&settings),
        );
        if let Some(why) = jail.unavailable() {
            eprintln!("skipped: the local sandbox is unavailable ({why})");
            return None;
        }
        let backends = runcell_sandbox::backends::Backends::new(
            runcell_sandbox::sessions::SandboxSessions::new(
                jail,
                runcell_sandbox::sessions::SessionSettings {
                    pool_size: 0,
                    ..Default::default()
                },
            ),
        );
        let kernels =
            crate::agent::Kernels::new(backends, None, crate::session::uploads::Uploads::new(dir));
        let agent = Agent::new(
            std::sync::Arc::new(runcell_llm::scripted::ScriptedLlm::default()),
            kernels,
            crate::agent::AgentSettings {
                limits: settings.default_limits(),
                ..Default::default()
            },
        );
        let store = runcell_store::SqliteStore::open_in(dir).await.ok()?;
        Some((
            agent,
            crate::session::SessionHub::new(std::sync::Arc::new(store)),
        ))
    }

    #[tokio::test]
    async fn a_look_runs_in_the_kernel_as_a_cell_of_its_own_and_leaves_no_name() {
        use runcell_protocol::{CellKind, CellStatus};

        let dir = tempfile::tempdir().unwrap();
        let Some((agent, hub)) = jailed(dir.path()).await else {
            return;
        };
        let channel = hub
            .create(runcell_protocol::OwnerId::random())
            .await
            .unwrap();
        let session = channel.log();
        let files: [(&str, &[u8]); 2] = [
            (
                "news.csv",
                b"author,source,neg\nABC News,abc-news,0.1\nReuters Editorial,reuters,0.2\nABC News,abc-news,0.3\nJo,reuters,0.0\nAl,reuters,0.4\n",
            ),
            (
                "logan.csv",
                b"JAMES LOGAN,,,\nWins,Name,Code,School\n5,A B,AB,Mitty\n3,C D,CD,Gunn\n4,E F,EF,Leland\n",
            ),
        ];
        let cancel = CancellationToken::new();
        for (name, bytes) in files {
            agent
                .kernels()
                .upload(session.id(), name, bytes.to_vec().into(), false)
                .await
                .unwrap();
            // The turn's system prompt profiles the files first.
            let note = agent
                .kernels()
                .files_note(session.id(), session.owner())
                .await
                .unwrap();
            if name == "news.csv" {
                // Nothing in the data calls for a look: no cell.
                let looked = agent.look(session, "How many rows in all?", &cancel).await;
                assert_eq!(looked.looked().map(|l| l.sights), None);
            } else {
                assert!(
                    note.contains("- /home/user/logan.csv (82 bytes): a table of 3 rows and 4 columns\n    the header is on line 2 (lines above it are not the table's): read it with `skiprows=1`\n    columns, as Python writes them: 'Wins' (int64), 'Name' (str), 'Code' (str), 'School' (str)"),
                    "{note}"
                );
            }
        }
        let before = session.events_after(0).len();
        let looked = agent
            .look(
                session,
                "What is the mean neg of ABC News articles?",
                &cancel,
            )
            .await
            .looked()
            .unwrap();
        assert_eq!(
            looked.sights.iter().map(Sight::class).collect::<Vec<_>>(),
            ["header", "value"]
        );
        assert_eq!(
            looked.report,
            "The first lines of logan.csv:\n1: JAMES LOGAN,,,\n2: Wins,Name,Code,School\n3: 5,A B,AB,Mitty\n4: 3,C D,CD,Gunn\n5: 4,E F,EF,Leland\npd.read_csv('/home/user/logan.csv', skiprows=1) reads the columns: ['Wins', 'Name', 'Code', 'School']\n'source' has 2 distinct values; the most common, with counts:\n  'reuters': 3\n  'abc-news': 2\n"
        );
        let events = session.events_after(0);
        let notebook = runcell_protocol::notebook::Notebook::from_events(&events[before..]);
        let cells: Vec<_> = notebook.cells().collect();
        assert_eq!(cells.len(), 2, "{cells:?}");
        assert_eq!(
            (cells[0].kind, cells[0].attempt, cells[0].text.as_str()),
            (CellKind::Code, None, looked.code.as_str())
        );
        assert!(cells[0].text.starts_with("# Looking at the data: the first lines of logan.csv (its header is on line 2); the values of 'source' in news.csv\n"), "{}", cells[0].text);
        assert_eq!(
            (
                cells[1].kind,
                cells[1].attempt,
                cells[1].source,
                cells[1].status
            ),
            (CellKind::Result, None, Some(cells[0].id), CellStatus::Ok)
        );
        // The person's namespace is as it was.
        let check = "print(sorted(n for n in globals() if n in ('_runcell_look', 'pd', 'itertools', 'counts', 'column', 'shown', 'f')))";
        let ran = run_into_cell(
            &agent.kernels,
            session,
            Program {
                code_cell: cells[0].id,
                attempt: None,
                language: Language::Python,
                code: check,
            },
            &agent.settings.limits,
            &cancel,
        )
        .await;
        assert_eq!(ran.report, "[]\n");
        // A look that fails leaves nothing for the model, and the turn
        // goes on.
        agent
            .kernels()
            .upload(
                session.id(),
                "news.csv",
                b"other,columns\n1,2\n".to_vec().into(),
                true,
            )
            .await
            .unwrap();
        assert_eq!(
            agent
                .look(
                    session,
                    "What is the mean neg of ABC News articles?",
                    &cancel
                )
                .await
                .looked()
                .map(|l| l.report),
            None
        );
        agent.drop_kernel(session.id()).await;
    }
}
