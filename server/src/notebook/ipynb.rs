//! A session as a Jupyter notebook (nbformat 4.5): each question and its
//! explanation as markdown, the code that stood for each turn as a code
//! cell with what it printed and showed, numbered in order. Fix attempts
//! that were replaced, and re-runs (copies), are left out.

use app::notebook::{Cell, Notebook};
use app::protocol::{CellKind, Language, Output, SessionEvent, Table, TurnKind};
use serde_json::{Map, Value, json};

use super::{NotebookError, Notebooks};
use crate::session::{OwnerId, SessionId, ShareToken};

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
                    let outputs = notebook
                        .result_of(turn.id, cell.id)
                        .map(outputs_of)
                        .unwrap_or_default();
                    count += 1;
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

fn outputs_of(result: &Cell) -> Vec<Value> {
    let mut outputs: Vec<Value> = Vec::new();
    for output in &result.outputs {
        let (stream, text) = match output {
            Output::Stdout { text } => ("stdout", text),
            Output::Stderr { text } => ("stderr", text),
            Output::Rich { data } => {
                if let Some(data) = mime_bundle(data) {
                    outputs.push(display(data));
                }
                continue;
            }
            Output::Table { table, text } => {
                let mut data = Map::new();
                data.insert("text/html".into(), html_table(table).into());
                data.insert("text/plain".into(), text.clone().into());
                outputs.push(display(data));
                continue;
            }
            Output::Image { text, .. } => {
                let mut data = Map::new();
                data.insert("text/plain".into(), text.clone().into());
                outputs.push(display(data));
                continue;
            }
            Output::File { path, size, .. } => {
                let mut data = Map::new();
                data.insert(
                    "text/plain".into(),
                    format!("[a file the program wrote: {path}, {size} bytes]").into(),
                );
                outputs.push(display(data));
                continue;
            }
            Output::Error {
                name,
                value,
                traceback,
            } => {
                outputs.push(json!({
                    "output_type": "error",
                    "ename": name,
                    "evalue": value,
                    "traceback": traceback,
                }));
                continue;
            }
        };
        // Consecutive pieces of one stream are one output, as Jupyter
        // shows them.
        if let Some(last) = outputs.last_mut()
            && last["output_type"] == "stream"
            && last["name"] == stream
            && let Some(Value::String(before)) = last.get_mut("text")
        {
            before.push_str(text);
            continue;
        }
        outputs.push(json!({"output_type": "stream", "name": stream, "text": text}));
    }
    outputs
}

fn display(data: Map<String, Value>) -> Value {
    let mut output = json!({"output_type": "display_data", "metadata": {}});
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
        Ok(export(&channel.events_after(0)))
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
