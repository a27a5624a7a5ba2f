//! A session as a Jupyter notebook (nbformat 4.5): each question and its
//! explanation as markdown, the code that stood for each turn as a code
//! cell with what it printed and showed, numbered in order. Fix attempts
//! that were replaced, and re-runs (copies), are left out.

use runcell_protocol::notebook::{Cell, Notebook};
use runcell_protocol::{
    CellId, CellKind, CellStatus, EventBody, Language, Output, SessionEvent, Table, TurnId,
    TurnKind, TurnStatus,
};
use serde_json::{Map, Value, json};

use std::sync::Arc;

use super::{ImportError, MAX_IMPORT_BYTES, NotebookError, Notebooks};
use runcell_protocol::{OwnerId, SessionId, ShareToken};

/// The notebook `events` describe, titled by its first question.
pub fn export(events: &[SessionEvent]) -> Value {
    let notebook = Notebook::from_events(events);
    let mut cells = Vec::new();
    let mut count = 0u64;
    for turn in notebook.turns() {
        if !matches!(turn.kind, TurnKind::Ask | TurnKind::Run) {
            continue;
        }
        for cell in notebook.cells_of(turn.id) {
            match cell.kind {
                CellKind::User => cells.push(markdown(cells.len(), &quoted(&cell.text))),
                CellKind::Code if turn.final_cell == Some(cell.id) => {
                    count += 1;
                    let outputs = notebook
                        .result_of(turn.id, cell.id)
                        .map(|result| outputs_of(result, count))
                        .unwrap_or_default();
                    cells.push(code(cells.len(), cell, count, outputs));
                }
                CellKind::Explanation if !cell.text.trim().is_empty() => {
                    cells.push(markdown(cells.len(), &cell.text));
                }
                _ => {}
            }
        }
    }
    json!({
        "nbformat": 4,
        "nbformat_minor": 5,
        "metadata": {
            "kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"},
            "language_info": {"name": "python"},
            "runcell": {"title": notebook.first_question().unwrap_or_default()},
        },
        "cells": cells,
    })
}

/// A question, quoted, so that it reads as the person's words.
fn quoted(text: &str) -> String {
    text.lines()
        .map(|line| format!("> {line}"))
        .collect::<Vec<_>>()
        .join("\n")
}

fn markdown(index: usize, text: &str) -> Value {
    json!({
        "cell_type": "markdown",
        "id": format!("cell-{index}"),
        "metadata": {},
        "source": text,
    })
}

/// A code cell; a language other than Python runs through IPython's cell
/// magics, where there is one.
fn code(index: usize, cell: &Cell, count: u64, outputs: Vec<Value>) -> Value {
    let language = Language::ALL
        .into_iter()
        .find(|l| cell.language.as_deref() == Some(l.name()))
        .unwrap_or(Language::Python);
    let source = match language {
        Language::Python => cell.text.clone(),
        Language::Bash => format!("%%bash\n{}", cell.text),
        Language::Javascript => format!("%%script node\n{}", cell.text),
        Language::R => format!("%%script Rscript -\n{}", cell.text),
        // No magic strips TypeScript's types: kept as a cell that runs nothing.
        Language::Typescript => format!(
            "%%script false --no-raise-error\n// TypeScript\n{}",
            cell.text
        ),
        // JShell reads a cell's snippets from stdin, but IPython's
        // `%%script` gives no terminal: kept as a cell that runs nothing.
        Language::Java => format!("%%script false --no-raise-error\n// Java\n{}", cell.text),
        // No magic runs C: kept as a cell that runs nothing.
        Language::C => format!("%%script false --no-raise-error\n// C\n{}", cell.text),
    };
    let mut cell = json!({
        "cell_type": "code",
        "id": format!("cell-{index}"),
        "metadata": {"runcell": {"language": language.name()}},
        "execution_count": count,
        "source": source,
    });
    cell["outputs"] = Value::Array(outputs);
    cell
}

/// A result cell's outputs as nbformat's; the program's last value is the
/// cell's `execute_result` (JupyterLab's `Out[count]`).
fn outputs_of(result: &Cell, count: u64) -> Vec<Value> {
    let mut outputs: Vec<Value> = Vec::new();
    for output in &result.outputs {
        match output {
            Output::Stdout { text } => push_stream(&mut outputs, "stdout", text),
            Output::Stderr { text } => push_stream(&mut outputs, "stderr", text),
            // A display's id is the kernel's, for its updates: nbformat
            // keeps none.
            Output::Rich {
                data,
                main,
                metadata,
                display_id: _,
            } => {
                if let Some(data) = mime_bundle(data) {
                    let mut output = rich(data, main.then_some(count));
                    if let Ok(Value::Object(metadata)) = serde_json::from_str(metadata) {
                        output["metadata"] = Value::Object(metadata);
                    }
                    outputs.push(output);
                }
            }
            Output::Table { table, text, main } => {
                let data = Map::from_iter([
                    ("text/html".to_string(), html_table(table).into()),
                    ("text/plain".to_string(), text.clone().into()),
                ]);
                outputs.push(rich(data, main.then_some(count)));
            }
            Output::Image { text, .. } => outputs.push(plain(text.clone())),
            Output::File { path, size, .. } => outputs.push(plain(format!(
                "[a file the program wrote: {path}, {size} bytes]"
            ))),
            // What pip got from runcell's package index: a note, as
            // Jupyter has no output of its own for it.
            Output::Package {
                project,
                version,
                size,
                cached,
                refused,
            } => outputs.push(plain(match refused {
                Some(why) => format!("[runcell's package index refused {project}: {why}]"),
                None => {
                    let from = if *cached { ", from cache" } else { "" };
                    format!(
                        "[installed through runcell's package index: {project} {version}, {size} bytes{from}]"
                    )
                }
            })),
            Output::Error {
                name,
                value,
                traceback,
            } => outputs.push(json!({
                "output_type": "error",
                "ename": name,
                "evalue": value,
                "traceback": traceback,
            })),
        }
    }
    outputs
}

/// Adds `text` of `stream` to `outputs`: onto the last output if that is a
/// piece of the same stream (consecutive pieces of one stream are one
/// output, as Jupyter shows them), else as an output of its own.
fn push_stream(outputs: &mut Vec<Value>, stream: &str, text: &str) {
    if let Some(last) = outputs.last_mut()
        && last["output_type"] == "stream"
        && last["name"] == stream
        && let Some(Value::String(before)) = last.get_mut("text")
    {
        before.push_str(text);
        return;
    }
    outputs.push(json!({"output_type": "stream", "name": stream, "text": text}));
}

/// A `display_data` of text alone.
fn plain(text: String) -> Value {
    display(Map::from_iter([("text/plain".to_string(), text.into())]))
}

fn display(data: Map<String, Value>) -> Value {
    rich(data, None)
}

/// A rich output: the cell's `execute_result` when it carries the
/// execution's count (the program's last value), else a `display_data`.
fn rich(data: Map<String, Value>, value_of: Option<u64>) -> Value {
    let mut output = match value_of {
        Some(count) => {
            json!({"output_type": "execute_result", "execution_count": count, "metadata": {}})
        }
        None => json!({"output_type": "display_data", "metadata": {}}),
    };
    output["data"] = Value::Object(data);
    output
}

/// A MIME bundle as nbformat has it: JSON types as JSON (one that is not
/// valid JSON is left out), the rest as text. `None` if nothing is left.
fn mime_bundle(data: &std::collections::BTreeMap<String, String>) -> Option<Map<String, Value>> {
    let mut bundle = Map::new();
    for (mime, value) in data {
        if mime == "application/json" || mime.ends_with("+json") {
            if let Ok(parsed) = serde_json::from_str::<Value>(value) {
                bundle.insert(mime.clone(), parsed);
            }
        } else {
            bundle.insert(mime.clone(), value.clone().into());
        }
    }
    (!bundle.is_empty()).then_some(bundle)
}

/// A table read from a data frame, as an HTML table again.
fn html_table(table: &Table) -> String {
    let escape = |text: &str| {
        text.replace('&', "&amp;")
            .replace('<', "&lt;")
            .replace('>', "&gt;")
    };
    let mut html = String::from("<table class=\"dataframe\">\n<thead><tr>");
    for column in &table.columns {
        html.push_str(&format!("<th>{}</th>", escape(column)));
    }
    html.push_str("</tr></thead>\n<tbody>\n");
    for row in &table.rows {
        html.push_str("<tr>");
        for (i, value) in row.iter().enumerate() {
            let tag = if i < table.index_columns { "th" } else { "td" };
            html.push_str(&format!("<{tag}>{}</{tag}>", escape(value)));
        }
        html.push_str("</tr>\n");
    }
    html.push_str("</tbody>\n</table>");
    if let Some(elided) = &table.elided {
        html.push_str(&format!("\n<p>{}</p>", escape(elided)));
    }
    html
}

impl Notebooks {
    /// `owner`'s session `id` as a notebook.
    pub async fn notebook_owned(
        &self,
        owner: OwnerId,
        id: SessionId,
    ) -> Result<Value, NotebookError> {
        let channel = self.open_owned(owner, id).await?;
        Ok(export(&channel.log().events_after(0)))
    }

    /// What the link `token` shows, as a notebook.
    pub async fn notebook_shared(&self, token: &ShareToken) -> Result<Value, NotebookError> {
        let (_, events) = self
            .hub
            .shared_events(token)
            .await?
            .ok_or(NotebookError::LinkGone)?;
        Ok(export(&events))
    }
}

/// Cells and outputs per cell, at most.
const MAX_CELLS: usize = 2_000;
const MAX_OUTPUTS: usize = 200;

fn bad(what: impl Into<String>) -> ImportError {
    ImportError(what.into())
}

/// nbformat's multiline strings: a string, or a list of strings.
fn text_of(value: Option<&Value>) -> String {
    match value {
        Some(Value::String(text)) => text.clone(),
        Some(Value::Array(lines)) => lines.iter().filter_map(Value::as_str).collect(),
        _ => String::new(),
    }
}

/// A notebook's cells as a session's history (numbered from 1): each code
/// cell an edited run of its own with the notebook's outputs as its result,
/// each markdown cell an explanation; raw cells are left out. Also its
/// title: the notebook's first heading or line.
pub fn import(
    bytes: &[u8],
    highlighter: &crate::highlight::Highlighter,
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
    let mut title = String::new();
    for (n, cell) in cells.iter().enumerate() {
        let source = text_of(cell.get("source"));
        let kind = cell.get("cell_type").and_then(Value::as_str).unwrap_or("");
        if !matches!(kind, "code" | "markdown") || source.trim().is_empty() {
            continue;
        }
        if title.is_empty() {
            title = title_of(&source);
        }
        let turn = TurnId(events.next_id());
        events.bodies.push(EventBody::TurnStarted {
            turn,
            turn_kind: TurnKind::Run,
            alternative_to: None,
        });
        let final_cell = if kind == "markdown" {
            events.push_explanation(source);
            None
        } else {
            Some(events.push_code(n, cell, source, highlighter)?)
        };
        events.bodies.push(EventBody::TurnFinished {
            turn,
            status: TurnStatus::Ok,
            elapsed_ms: 0,
            final_cell,
        });
    }
    if events.bodies.is_empty() {
        return Err(bad("it has no code or markdown cells"));
    }
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

/// The events a notebook's cells become, and the turn and cell ids they
/// have used so far.
#[derive(Default)]
struct CellEvents {
    bodies: Vec<EventBody>,
    ids: u64,
}

impl CellEvents {
    fn next_id(&mut self) -> u64 {
        self.ids += 1;
        self.ids
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

    /// Code cell `n`, `cell`, whose code is `source`: a Python code cell,
    /// highlighted, and a result cell with the notebook's outputs. Returns
    /// the code cell's id.
    fn push_code(
        &mut self,
        n: usize,
        cell: &Value,
        source: String,
        highlighter: &crate::highlight::Highlighter,
    ) -> Result<CellId, ImportError> {
        let code_id = CellId(self.next_id());
        let language = Language::Python.name();
        self.bodies.push(EventBody::CellStarted {
            cell_id: code_id,
            cell_kind: CellKind::Code,
            language: Some(language.into()),
            attempt: None,
            source: None,
        });
        let highlight = crate::highlight::highlight_all(highlighter, language, &source);
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

impl Notebooks {
    /// A new session of `owner`'s from an uploaded notebook.
    pub async fn import_notebook(
        &self,
        owner: OwnerId,
        bytes: &[u8],
    ) -> Result<Arc<crate::session::SessionChannel>, NotebookError> {
        static HIGHLIGHTER: std::sync::OnceLock<crate::highlight::Highlighter> =
            std::sync::OnceLock::new();
        let highlighter = HIGHLIGHTER.get_or_init(crate::highlight::Highlighter::new);
        // A notebook, or a session's own history (`…/events` saved to a file).
        let (title, events) = if super::history_import::is_history(bytes) {
            super::history_import::import(bytes, highlighter)
        } else {
            import(bytes, highlighter)
        }
        .map_err(|e| NotebookError::BadNotebook(e.to_string()))?;
        let room = self.notebook_room(owner).await?;
        let channel = self.hub.import(owner, &title, events).await?;
        drop(room);
        tracing::info!(session = %channel.id(), "notebook imported");
        Ok(channel)
    }
}

#[cfg(test)]
mod tests {
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
        let highlighter = crate::highlight::Highlighter::new();
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
        let back = export(&events);
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
    fn packages_are_exported_as_notes() {
        use runcell_protocol::{CellId, EventBody};

        let cell = CellId(1);
        let package = |project: &str, cached: bool, refused: Option<&str>| EventBody::CellOutput {
            cell_id: cell,
            output: Output::Package {
                project: project.into(),
                version: "1.16.0".into(),
                size: 11_053,
                cached,
                refused: refused.map(String::from),
            },
        };
        let events = SessionEvent::numbered(
            vec![
                EventBody::CellStarted {
                    cell_id: cell,
                    cell_kind: CellKind::Result,
                    language: None,
                    attempt: Some(1),
                    source: None,
                },
                package("six", true, None),
                package("attrs", false, None),
                package("torch", false, Some("larger than the index's limit")),
            ],
            1,
        );
        let read = Notebook::from_events(&events);
        let result = read.all_cells().first().expect("a result");
        let notes: Vec<Value> = outputs_of(result, 1)
            .into_iter()
            .map(|o| {
                assert_eq!(o["output_type"], "display_data", "{o}");
                o["data"]["text/plain"].clone()
            })
            .collect();
        assert_eq!(
            notes,
            [
                "[installed through runcell's package index: six 1.16.0, 11053 bytes, from cache]",
                "[installed through runcell's package index: attrs 1.16.0, 11053 bytes]",
                "[runcell's package index refused torch: larger than the index's limit]",
            ]
        );
    }

    #[test]
    fn what_is_not_a_notebook_is_refused_with_a_reason() {
        let highlighter = crate::highlight::Highlighter::new();
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
}
