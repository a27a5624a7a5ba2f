//! A Jupyter notebook read back into a session's history. A notebook that
//! runcell wrote says what each cell was (`metadata.runcell.role`), and
//! its questions, answers and title come back as they were; any other
//! notebook's cells are each a run of their own: code as code, markdown as
//! an explanation.

use runcell_protocol::{
    CellId, CellKind, CellStatus, EventBody, Language, Output, SessionEvent, TurnId, TurnKind,
    TurnStatus,
};
use serde_json::Value;

use super::super::{ImportError, MAX_IMPORT_BYTES};
use super::{Role, magic};
use crate::highlight::{Highlighter, highlight_all};

/// Cells and outputs per cell, at most.
pub(super) const MAX_CELLS: usize = 2_000;
const MAX_OUTPUTS: usize = 200;

fn bad(what: impl Into<String>) -> ImportError {
    ImportError::new(what)
}

/// nbformat's multiline strings: a string, or a list of strings.
fn text_of(value: Option<&Value>) -> String {
    match value {
        Some(Value::String(text)) => text.clone(),
        Some(Value::Array(lines)) => lines.iter().filter_map(Value::as_str).collect(),
        _ => String::new(),
    }
}

/// A notebook's cells as a session's history (numbered from 1), and its
/// title: the one runcell wrote in its metadata (`runcell.title`, or
/// nbformat's `title`), else its first heading or line. A question
/// (`role` "question") starts a question's turn, which holds the code and
/// explanations after it; every other code cell is an edited run of its
/// own with the notebook's outputs as its result, every other markdown
/// cell an explanation of its own; raw cells are left out.
pub fn import(
    bytes: &[u8],
    highlighter: &Highlighter,
) -> Result<(String, Vec<SessionEvent>), ImportError> {
    let notebook = read_notebook(bytes)?;
    let cells = notebook
        .get("cells")
        .and_then(Value::as_array)
        .ok_or_else(|| bad("it has no list of `cells`"))?;
    if cells.len() > MAX_CELLS {
        return Err(bad(format!(
            "it has {} cells; at most {MAX_CELLS} are read",
            cells.len()
        )));
    }
    let mut events = CellEvents::default();
    let mut heading = String::new();
    for (n, cell) in cells.iter().enumerate() {
        let source = text_of(cell.get("source"));
        let kind = cell.get("cell_type").and_then(Value::as_str).unwrap_or("");
        if !matches!(kind, "code" | "markdown") || source.trim().is_empty() {
            continue;
        }
        if heading.is_empty() {
            heading = title_of(&source);
        }
        let role = cell
            .pointer("/metadata/runcell/role")
            .and_then(Value::as_str)
            .and_then(Role::parse);
        match (kind, role) {
            ("code", _) => events.code(n, cell, source, highlighter)?,
            // The title comes from the notebook's metadata, or is this
            // heading (read above).
            (_, Some(Role::Title)) => {}
            (_, Some(Role::Question)) => events.question(unquoted(&source)),
            (_, Some(Role::Explanation)) => events.explanation(source),
            _ => events.note(source),
        }
    }
    events.close();
    if events.bodies.is_empty() {
        return Err(bad("it has no code or markdown cells"));
    }
    let title = ["/metadata/runcell/title", "/metadata/title"]
        .into_iter()
        .filter_map(|at| notebook.pointer(at).and_then(Value::as_str))
        .find(|title| !title.trim().is_empty())
        .map_or(heading, str::to_string);
    Ok((title, SessionEvent::numbered(events.bodies, 1)))
}

/// `bytes` as an nbformat 4 notebook, if they are one of a size accepted.
fn read_notebook(bytes: &[u8]) -> Result<Value, ImportError> {
    if bytes.len() > MAX_IMPORT_BYTES {
        return Err(bad(format!(
            "the file is {} bytes; at most {MAX_IMPORT_BYTES} are accepted",
            bytes.len()
        )));
    }
    let notebook: Value =
        serde_json::from_slice(bytes).map_err(|e| bad(format!("the file is not JSON ({e})")))?;
    match notebook.get("nbformat").and_then(Value::as_u64) {
        Some(4) => Ok(notebook),
        Some(other) => Err(bad(format!(
            "it is nbformat {other}; only nbformat 4 notebooks are read (Jupyter writes these since 2015)"
        ))),
        None => Err(bad("it has no `nbformat`: is it a Jupyter notebook?")),
    }
}

/// A notebook's title from its first cell's `source`: the first line that
/// is not empty, without a heading's `#`s.
fn title_of(source: &str) -> String {
    source
        .lines()
        .map(|l| l.trim_start_matches('#').trim())
        .find(|l| !l.is_empty())
        .unwrap_or_default()
        .to_string()
}

/// A question as the person wrote it, from the blockquote it was exported
/// as (a line not quoted, edited in Jupyter, is kept as it is).
fn unquoted(source: &str) -> String {
    source
        .lines()
        .map(|line| {
            line.strip_prefix("> ")
                .or_else(|| line.strip_prefix('>'))
                .unwrap_or(line)
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// A code cell's language, from runcell's metadata (Python without it),
/// and its code without the cell magic the export put before it.
fn code_of(cell: &Value, source: String) -> (Language, String) {
    let language = cell
        .pointer("/metadata/runcell/language")
        .and_then(Value::as_str)
        .and_then(|name| Language::ALL.into_iter().find(|l| l.name() == name))
        .unwrap_or(Language::Python);
    match source.strip_prefix(magic(language)) {
        Some(code) => (language, code.to_string()),
        None => (language, source),
    }
}

/// The turn cells are being added to: its id, whether it is a question's,
/// and its code cell once it has one.
struct OpenTurn {
    turn: TurnId,
    asked: bool,
    code: Option<CellId>,
}

/// The events a notebook's cells become, and the turn and cell ids they
/// have used so far.
#[derive(Default)]
struct CellEvents {
    bodies: Vec<EventBody>,
    ids: u64,
    open: Option<OpenTurn>,
}

impl CellEvents {
    fn next_id(&mut self) -> u64 {
        self.ids += 1;
        self.ids
    }

    /// Starts a turn (a question's if `asked`, else a run), ending the one
    /// open.
    fn begin(&mut self, asked: bool) {
        self.close();
        let turn = TurnId(self.next_id());
        self.bodies.push(EventBody::TurnStarted {
            turn,
            turn_kind: if asked { TurnKind::Ask } else { TurnKind::Run },
            alternative_to: None,
        });
        self.open = Some(OpenTurn {
            turn,
            asked,
            code: None,
        });
    }

    /// Ends the open turn, if there is one: it finished, fine, in no time.
    fn close(&mut self) {
        if let Some(open) = self.open.take() {
            self.bodies.push(EventBody::TurnFinished {
                turn: open.turn,
                status: TurnStatus::Ok,
                elapsed_ms: 0,
                final_cell: open.code,
            });
        }
    }

    /// Whether the open turn is a question's that has no code yet.
    fn question_open(&self, without_code: bool) -> bool {
        self.open
            .as_ref()
            .is_some_and(|o| o.asked && (!without_code || o.code.is_none()))
    }

    /// A question: a turn of its own, for the cells after it.
    fn question(&mut self, text: String) {
        self.begin(true);
        let cell_id = CellId(self.next_id());
        self.bodies.push(EventBody::UserMessage {
            cell_id,
            text,
            markup: None,
        });
    }

    /// An answer's explanation: in the open question's turn, or a turn of
    /// its own when there is none.
    fn explanation(&mut self, source: String) {
        if self.question_open(false) {
            self.push_explanation(source);
        } else {
            self.note(source);
        }
    }

    /// A markdown cell of no role: an explanation, in a turn of its own.
    fn note(&mut self, source: String) {
        self.begin(false);
        self.push_explanation(source);
        self.close();
    }

    /// A code cell: the open question's program if it has none yet, else
    /// a run of its own.
    fn code(
        &mut self,
        n: usize,
        cell: &Value,
        source: String,
        highlighter: &Highlighter,
    ) -> Result<(), ImportError> {
        let own_turn = !self.question_open(true);
        if own_turn {
            self.begin(false);
        }
        let code = self.push_code(n, cell, source, highlighter)?;
        if let Some(open) = &mut self.open {
            open.code = Some(code);
        }
        if own_turn {
            self.close();
        }
        Ok(())
    }

    /// A markdown cell's `source`, as an explanation cell.
    fn push_explanation(&mut self, source: String) {
        let cell_id = CellId(self.next_id());
        self.bodies.push(EventBody::CellStarted {
            cell_id,
            cell_kind: CellKind::Explanation,
            language: None,
            attempt: None,
            source: None,
        });
        self.bodies.push(EventBody::CellDelta {
            cell_id,
            text: source,
            highlight: None,
        });
        self.bodies.push(finished(cell_id));
    }

    /// Code cell `n`, `cell`, whose code is `source`: a code cell,
    /// highlighted, and a result cell with the notebook's outputs. Returns
    /// the code cell's id.
    fn push_code(
        &mut self,
        n: usize,
        cell: &Value,
        source: String,
        highlighter: &Highlighter,
    ) -> Result<CellId, ImportError> {
        let code_id = CellId(self.next_id());
        let (language, source) = code_of(cell, source);
        let language = language.name();
        self.bodies.push(EventBody::CellStarted {
            cell_id: code_id,
            cell_kind: CellKind::Code,
            language: Some(language.into()),
            attempt: None,
            source: None,
        });
        let highlight = highlight_all(highlighter, language, &source);
        self.bodies.push(EventBody::CellDelta {
            cell_id: code_id,
            text: source,
            highlight,
        });
        self.bodies.push(finished(code_id));
        let result_id = CellId(self.next_id());
        self.bodies.push(EventBody::CellStarted {
            cell_id: result_id,
            cell_kind: CellKind::Result,
            language: None,
            attempt: None,
            source: Some(code_id),
        });
        let outputs = cell
            .get("outputs")
            .and_then(Value::as_array)
            .map(Vec::as_slice)
            .unwrap_or_default();
        if outputs.len() > MAX_OUTPUTS {
            return Err(bad(format!(
                "cell {} has {} outputs; at most {MAX_OUTPUTS} are read",
                n + 1,
                outputs.len()
            )));
        }
        for output in outputs.iter().filter_map(output_of) {
            self.bodies.push(EventBody::CellOutput {
                cell_id: result_id,
                output,
            });
        }
        self.bodies.push(finished(result_id));
        Ok(code_id)
    }
}

/// An imported cell's end: it ran, fine, in no time.
fn finished(cell_id: CellId) -> EventBody {
    EventBody::CellFinished {
        cell_id,
        status: CellStatus::Ok,
        elapsed_ms: 0,
        error: None,
    }
}

/// One of a notebook's outputs as a result cell's; `None` for kinds runcell
/// does not show.
fn output_of(output: &Value) -> Option<Output> {
    match output.get("output_type")?.as_str()? {
        "stream" => {
            let text = text_of(output.get("text"));
            Some(match output.get("name").and_then(Value::as_str) {
                Some("stderr") => Output::Stderr { text },
                _ => Output::Stdout { text },
            })
        }
        kind @ ("display_data" | "execute_result") => {
            let data = output.get("data")?.as_object()?;
            let bundle: std::collections::BTreeMap<String, String> = data
                .iter()
                .map(|(mime, value)| {
                    let text = if mime == "application/json" || mime.ends_with("+json") {
                        value.to_string()
                    } else {
                        text_of(Some(value))
                    };
                    (mime.clone(), text)
                })
                .collect();
            let metadata = match output.get("metadata") {
                Some(Value::Object(m)) if !m.is_empty() => Value::Object(m.clone()).to_string(),
                _ => String::new(),
            };
            (!bundle.is_empty()).then_some(Output::Rich {
                data: bundle,
                main: kind == "execute_result",
                metadata,
                display_id: None,
            })
        }
        "error" => Some(Output::Error {
            name: output.get("ename")?.as_str()?.to_string(),
            value: text_of(output.get("evalue")),
            traceback: output
                .get("traceback")
                .and_then(Value::as_array)
                .map(|lines| {
                    lines
                        .iter()
                        .filter_map(|l| l.as_str().map(str::to_string))
                        .collect()
                })
                .unwrap_or_default(),
        }),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use runcell_protocol::notebook::Notebook;
    use serde_json::json;

    use super::super::export;
    use super::*;

    #[test]
    fn an_exported_session_imports_back_with_its_code_and_outputs() {
        let notebook = json!({
            "nbformat": 4, "nbformat_minor": 5, "metadata": {},
            "cells": [
                {"cell_type": "markdown", "id": "a", "metadata": {}, "source": ["# Sales\n", "by region"]},
                {"cell_type": "code", "id": "b", "metadata": {}, "execution_count": 1,
                 "source": "x = 2\nprint(x)", "outputs": [
                    {"output_type": "stream", "name": "stdout", "text": ["2\n"]},
                    {"output_type": "execute_result", "execution_count": 1, "metadata": {"isolated": true},
                     "data": {"text/plain": "2", "application/vnd.plotly.v1+json": {"data": []}}},
                    {"output_type": "error", "ename": "E", "evalue": "v", "traceback": ["t"]},
                    {"output_type": "unknown"}]},
                {"cell_type": "raw", "id": "c", "metadata": {}, "source": "ignored"},
                {"cell_type": "code", "id": "d", "metadata": {}, "execution_count": null, "source": "  ", "outputs": []},
            ],
        });
        let highlighter = Highlighter::new();
        let (title, events) =
            import(notebook.to_string().as_bytes(), &highlighter).expect("a notebook");
        assert_eq!(title, "Sales");
        let read = Notebook::from_events(&events);
        let plan = read.rerun_plan();
        assert_eq!(plan.len(), 1);
        assert_eq!(plan[0].code, "x = 2\nprint(x)");
        let result = read
            .cells()
            .find(|c| c.kind == CellKind::Result)
            .expect("a result");
        assert_eq!(result.outputs.len(), 3);
        assert_eq!(result.printed(), "2\n");
        // Out again, it is the same code and outputs.
        let back = export(&events, "");
        let code = &back["cells"][1];
        assert_eq!(code["source"], "x = 2\nprint(x)");
        assert_eq!(
            code["outputs"][1]["data"]["application/vnd.plotly.v1+json"],
            json!({"data": []})
        );
        // The cell's value stays its `Out[n]`, with its metadata.
        assert_eq!(code["outputs"][1]["output_type"], "execute_result");
        assert_eq!(code["outputs"][1]["metadata"], json!({"isolated": true}));
        assert_eq!(
            code["outputs"][1]["execution_count"],
            code["execution_count"]
        );
    }

    #[test]
    fn what_is_not_a_notebook_is_refused_with_a_reason() {
        let highlighter = Highlighter::new();
        for (bytes, why) in [
            (&b"not json"[..], "not JSON"),
            (&b"{}"[..], "no `nbformat`"),
            (
                &br#"{"nbformat": 3, "worksheets": []}"#[..],
                "only nbformat 4",
            ),
            (&br#"{"nbformat": 4}"#[..], "no list of `cells`"),
            (
                &br#"{"nbformat": 4, "cells": [{"cell_type": "raw", "source": "x"}]}"#[..],
                "no code or markdown",
            ),
        ] {
            let error = import(bytes, &highlighter).expect_err(why).to_string();
            assert!(error.contains(why), "{error}");
        }
        let many = json!({"nbformat": 4, "cells": vec![json!({"cell_type": "code", "source": "1"}); MAX_CELLS + 1]});
        assert!(import(many.to_string().as_bytes(), &highlighter).is_err());
    }

    /// The events of a turn `turn` of `kind`: the question `asked`, the
    /// program `code` in `language` printing `printed`, and the answer
    /// `explained`, each if there is one. Cells are numbered from `turn`.
    fn turn(
        turn: u64,
        asked: Option<&str>,
        code: Option<(&str, &str, &str)>,
        explained: Option<&str>,
    ) -> Vec<EventBody> {
        let kind = if asked.is_some() {
            TurnKind::Ask
        } else {
            TurnKind::Run
        };
        let mut bodies = vec![EventBody::TurnStarted {
            turn: TurnId(turn),
            turn_kind: kind,
            alternative_to: None,
        }];
        if let Some(text) = asked {
            bodies.push(EventBody::UserMessage {
                cell_id: CellId(turn + 1),
                text: text.into(),
                markup: None,
            });
        }
        let code_id = CellId(turn + 2);
        let started = |cell_id, cell_kind, language: Option<&str>, source| EventBody::CellStarted {
            cell_id,
            cell_kind,
            language: language.map(String::from),
            attempt: None,
            source,
        };
        if let Some((language, code, printed)) = code {
            let result = CellId(turn + 3);
            bodies.extend([
                started(code_id, CellKind::Code, Some(language), None),
                EventBody::CellDelta {
                    cell_id: code_id,
                    text: code.into(),
                    highlight: None,
                },
                finished(code_id),
                started(result, CellKind::Result, None, Some(code_id)),
                EventBody::CellOutput {
                    cell_id: result,
                    output: Output::Stdout {
                        text: printed.into(),
                    },
                },
                finished(result),
            ]);
        }
        if let Some(text) = explained {
            let answer = CellId(turn + 4);
            bodies.extend([
                started(answer, CellKind::Explanation, None, None),
                EventBody::CellDelta {
                    cell_id: answer,
                    text: text.into(),
                    highlight: None,
                },
                finished(answer),
            ]);
        }
        bodies.push(EventBody::TurnFinished {
            turn: TurnId(turn),
            status: TurnStatus::Ok,
            elapsed_ms: 5,
            final_cell: code.map(|_| code_id),
        });
        bodies
    }

    /// Each cell's role and source.
    fn roles_and_sources(notebook: &Value) -> Vec<(String, String)> {
        notebook["cells"]
            .as_array()
            .expect("cells")
            .iter()
            .map(|cell| {
                (
                    cell["metadata"]["runcell"]["role"]
                        .as_str()
                        .unwrap_or_default()
                        .to_string(),
                    text_of(cell.get("source")),
                )
            })
            .collect()
    }

    #[test]
    fn questions_answers_and_the_title_come_back_as_they_were() {
        let mut bodies = turn(
            10,
            Some("Sum 1 and 2\nin Python, please"),
            Some(("python", "print(1 + 2)", "3\n")),
            Some("The sum is **3**."),
        );
        bodies.extend(turn(20, None, Some(("bash", "echo hi", "hi\n")), None));
        bodies.extend(turn(30, Some("Why 3?"), None, Some("Because 1 + 2 = 3.")));
        let events = SessionEvent::numbered(bodies, 1);
        let title = "Sums, by hand & by Python";
        let exported = export(&events, title);
        let cells = |pairs: &[(&str, &str)]| -> Vec<(String, String)> {
            pairs
                .iter()
                .map(|(role, source)| (role.to_string(), source.to_string()))
                .collect()
        };
        assert_eq!(
            roles_and_sources(&exported),
            cells(&[
                ("title", "# Sums, by hand & by Python"),
                ("question", "> Sum 1 and 2\n> in Python, please"),
                ("code", "print(1 + 2)"),
                ("explanation", "The sum is **3**."),
                ("code", "%%bash\necho hi"),
                ("question", "> Why 3?"),
                ("explanation", "Because 1 + 2 = 3."),
            ])
        );
        assert_eq!(exported["metadata"]["runcell"]["title"], title);
        assert_eq!(exported["metadata"]["title"], title);

        let bytes = serde_json::to_vec(&exported).expect("json");
        let (imported_title, imported) = import(&bytes, &Highlighter::new()).expect("a notebook");
        assert_eq!(imported_title, title);
        let read = Notebook::from_events(&imported);
        let kinds: Vec<(TurnKind, Vec<CellKind>)> = read
            .turns()
            .map(|t| (t.kind, read.cells_of(t.id).map(|c| c.kind).collect()))
            .collect();
        assert_eq!(
            kinds,
            [
                (
                    TurnKind::Ask,
                    vec![
                        CellKind::User,
                        CellKind::Code,
                        CellKind::Result,
                        CellKind::Explanation
                    ]
                ),
                (TurnKind::Run, vec![CellKind::Code, CellKind::Result]),
                (TurnKind::Ask, vec![CellKind::User, CellKind::Explanation]),
            ]
        );
        let questions: Vec<&str> = read.turns().filter_map(|t| read.question(t.id)).collect();
        assert_eq!(questions, ["Sum 1 and 2\nin Python, please", "Why 3?"]);
        let bash = read
            .cells()
            .find(|c| c.language.as_deref() == Some("bash"))
            .expect("the bash cell");
        assert_eq!(bash.text, "echo hi");

        // Out again, it is the same notebook, cell for cell.
        assert_eq!(export(&imported, &imported_title), exported);
    }

    #[test]
    fn a_notebook_without_runcells_roles_reads_as_runs_and_explanations() {
        let notebook = json!({
            "nbformat": 4, "nbformat_minor": 5, "metadata": {},
            "cells": [
                {"cell_type": "markdown", "metadata": {}, "source": "> Sum it\n"},
                {"cell_type": "code", "metadata": {}, "source": "%%bash\necho 1", "outputs": []},
                {"cell_type": "code", "metadata": {}, "source": "1 + 1", "outputs": []},
            ],
        });
        let (title, events) =
            import(notebook.to_string().as_bytes(), &Highlighter::new()).expect("a notebook");
        assert_eq!(title, "> Sum it");
        let read = Notebook::from_events(&events);
        let turns: Vec<(TurnKind, Vec<(CellKind, String)>)> = read
            .turns()
            .map(|t| {
                (
                    t.kind,
                    read.cells_of(t.id)
                        .filter(|c| c.kind != CellKind::Result)
                        .map(|c| (c.kind, c.text.clone()))
                        .collect(),
                )
            })
            .collect();
        assert_eq!(
            turns,
            [
                (
                    TurnKind::Run,
                    vec![(CellKind::Explanation, "> Sum it\n".to_string())]
                ),
                (
                    TurnKind::Run,
                    vec![(CellKind::Code, "%%bash\necho 1".to_string())]
                ),
                (TurnKind::Run, vec![(CellKind::Code, "1 + 1".to_string())]),
            ]
        );
    }
}
