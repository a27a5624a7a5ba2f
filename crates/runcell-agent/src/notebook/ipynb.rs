//! A session as a Jupyter notebook (nbformat 4.5): its title as a heading,
//! each question (quoted) and its explanation as markdown, the code that
//! stood for each turn as a code cell with what it printed and showed,
//! numbered in order. Fix attempts that were replaced, and re-runs
//! (copies), are left out. Each cell says what it was in
//! `metadata.runcell.role`, and the notebook its title in
//! `metadata.runcell.title` (and nbformat's `metadata.title`), so that
//! [`read`] brings them back as they were; Jupyter shows them as any
//! notebook.

mod read;

use runcell_protocol::notebook::{Cell, Notebook};
use runcell_protocol::{CellKind, Language, Output, SessionEvent, Table, TurnKind};
use serde_json::{Map, Value, json};

use std::sync::Arc;

use super::{NotebookError, Notebooks};
use runcell_protocol::{OwnerId, SessionId, ShareToken};

/// What a notebook cell was in the session, in `metadata.runcell.role`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Role {
    /// The heading that names the notebook.
    Title,
    /// What the person asked.
    Question,
    /// A program, with what it printed and showed.
    Code,
    /// The model's answer around the program.
    Explanation,
}

impl Role {
    const ALL: [Role; 4] = [Role::Title, Role::Question, Role::Code, Role::Explanation];

    fn name(self) -> &'static str {
        match self {
            Role::Title => "title",
            Role::Question => "question",
            Role::Code => "code",
            Role::Explanation => "explanation",
        }
    }

    fn parse(name: &str) -> Option<Role> {
        Role::ALL.into_iter().find(|role| role.name() == name)
    }
}

/// The notebook `events` describe, titled `title` (the session's name; its
/// first question's first line when it has none).
pub fn export(events: &[SessionEvent], title: &str) -> Value {
    let notebook = Notebook::from_events(events);
    let title = if title.trim().is_empty() {
        notebook
            .first_question()
            .map(runcell_protocol::page::title_from)
            .unwrap_or_default()
    } else {
        title.to_string()
    };
    let mut cells = Vec::new();
    if !title.is_empty() {
        cells.push(markdown(0, &format!("# {title}"), Role::Title));
    }
    let mut count = 0u64;
    for turn in notebook.turns() {
        if !matches!(turn.kind, TurnKind::Ask | TurnKind::Run) {
            continue;
        }
        for cell in notebook.cells_of(turn.id) {
            match cell.kind {
                CellKind::User => {
                    cells.push(markdown(cells.len(), &quoted(&cell.text), Role::Question));
                }
                CellKind::Code if turn.final_cell == Some(cell.id) => {
                    count += 1;
                    let outputs = notebook
                        .result_of(turn.id, cell.id)
                        .map(|result| outputs_of(result, count))
                        .unwrap_or_default();
                    cells.push(code(cells.len(), cell, count, outputs));
                }
                CellKind::Explanation if !cell.text.trim().is_empty() => {
                    cells.push(markdown(cells.len(), &cell.text, Role::Explanation));
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
            "title": title,
            "runcell": {"title": title},
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

fn markdown(index: usize, text: &str, role: Role) -> Value {
    json!({
        "cell_type": "markdown",
        "id": format!("cell-{index}"),
        "metadata": {"runcell": {"role": role.name()}},
        "source": text,
    })
}

/// The cell magic a code cell in `language` begins with, for IPython to run
/// it (or to keep it without running it), or nothing for Python.
fn magic(language: Language) -> &'static str {
    match language {
        Language::Python => "",
        Language::Bash => "%%bash\n",
        Language::Javascript => "%%script node\n",
        Language::R => "%%script Rscript -\n",
        // No magic strips TypeScript's types: kept as a cell that runs nothing.
        Language::Typescript => "%%script false --no-raise-error\n// TypeScript\n",
        // JShell reads a cell's snippets from stdin, but IPython's
        // `%%script` gives no terminal: kept as a cell that runs nothing.
        Language::Java => "%%script false --no-raise-error\n// Java\n",
        // No magic runs C: kept as a cell that runs nothing.
        Language::C => "%%script false --no-raise-error\n// C\n",
    }
}

/// A code cell; a language other than Python runs through IPython's cell
/// magics, where there is one.
fn code(index: usize, cell: &Cell, count: u64, outputs: Vec<Value>) -> Value {
    let language = Language::ALL
        .into_iter()
        .find(|l| cell.language.as_deref() == Some(l.name()))
        .unwrap_or(Language::Python);
    let source = format!("{}{}", magic(language), cell.text);
    let mut cell = json!({
        "cell_type": "code",
        "id": format!("cell-{index}"),
        "metadata": {"runcell": {"language": language.name(), "role": Role::Code.name()}},
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
    /// `owner`'s session `id` as a notebook, under the session's name.
    pub async fn notebook_owned(
        &self,
        owner: OwnerId,
        id: SessionId,
    ) -> Result<Value, NotebookError> {
        let channel = self.open_owned(owner, id).await?;
        let title = self.store().session(id).await?.map(|r| r.title);
        Ok(export(
            &channel.log().events_after(0),
            title.as_deref().unwrap_or_default(),
        ))
    }

    /// What the link `token` shows, as a notebook.
    pub async fn notebook_shared(&self, token: &ShareToken) -> Result<Value, NotebookError> {
        let (record, events) = self
            .hub
            .shared_events(token)
            .await?
            .ok_or(NotebookError::LinkGone)?;
        Ok(export(&events, &record.title))
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
            read::import(bytes, highlighter)
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
}
