//! A package install as runcell tells it: what was installed, its size and
//! where from, in a line of runcell's own; pip's log folded under it
//! (without the index's address, and without pip's advice to restart a
//! kernel, which runcell does not need). And the program run again after
//! it, which says so ("re-run after installing humanize"), not "edited".

use leptos::prelude::*;

use crate::notebook::{Cell, Notebook};
use crate::protocol::{CellId, CellKind, CellStatus, Output, TurnId};
use crate::render::ansi;

/// How an install's code cell begins (`agent/install.rs` writes it).
const PIP_INSTALL: &str = "%pip install ";

/// What pip says that is not so here: runcell's kernel imports the package
/// without a restart.
const FALSE_ADVICE: &str = "you may need to restart the kernel";

/// The project a code cell installs, if it is an install.
pub(super) fn installs(code: &Cell) -> Option<&str> {
    (code.kind == CellKind::Code)
        .then(|| code.text.strip_prefix(PIP_INSTALL))
        .flatten()
        .map(str::trim)
        .filter(|p| !p.is_empty())
}

/// Whether a result cell is an install's.
pub(super) fn is_install_result(notebook: &Notebook, result: &Cell) -> bool {
    result.kind == CellKind::Result
        && result
            .source
            .and_then(|s| notebook.cell(s))
            .and_then(installs)
            .is_some()
}

/// The project a code cell's program was run again after installing: a
/// code cell whose source is a cell of its own turn (runcell's re-run, as
/// an Edit & run starts a turn of its own), after an install in the turn.
pub(super) fn rerun_after(notebook: &Notebook, code: &Cell) -> Option<String> {
    let (turn, source) = (code.turn?, code.source?);
    let failed = notebook.cell(source).filter(|s| s.turn == Some(turn))?;
    installed_between(notebook, turn, failed.id, code.id)
}

/// The re-run of `failed` (a code cell) after an install, and the project
/// installed.
pub(super) fn rerun_of(
    notebook: &Notebook,
    turn: TurnId,
    failed: CellId,
) -> Option<(CellId, String)> {
    let rerun = notebook
        .cells_of(turn)
        .find(|c| c.kind == CellKind::Code && c.source == Some(failed))?;
    let project = installed_between(notebook, turn, failed, rerun.id)?;
    Some((rerun.id, project))
}

fn installed_between(
    notebook: &Notebook,
    turn: TurnId,
    from: CellId,
    to: CellId,
) -> Option<String> {
    notebook
        .cells_of(turn)
        .filter(|c| c.id > from && c.id < to)
        .find_map(installs)
        .map(str::to_string)
}

/// runcell's lines on an install: one per package its index handed out
/// (or refused); else what pip's log says was installed.
pub(super) fn summary(
    outputs: &[Output],
    project: &str,
    status: CellStatus,
) -> Vec<(String, bool)> {
    let lines: Vec<(String, bool)> = outputs
        .iter()
        .filter_map(crate::render::outputs::package_said)
        .collect();
    if !lines.is_empty() {
        return lines;
    }
    let log = printed(outputs);
    if let Some(installed) = log
        .lines()
        .find_map(|l| l.trim().strip_prefix("Successfully installed "))
    {
        let names: Vec<String> = installed
            .split_whitespace()
            .map(|n| match n.rsplit_once('-') {
                Some((name, version)) => format!("{name} {version}"),
                None => n.to_string(),
            })
            .collect();
        return vec![(
            format!(
                "Installed {} from runcell's package index",
                names.join(", ")
            ),
            false,
        )];
    }
    if log.lines().any(|l| {
        l.trim_start()
            .starts_with("Requirement already satisfied: ")
    }) {
        return vec![(format!("{project} was installed already"), false)];
    }
    match status {
        CellStatus::Streaming => vec![(format!("Installing {project}…"), false)],
        CellStatus::Ok => vec![(format!("Installed {project}"), false)],
        _ => vec![(
            format!("Not installed: {project}. pip's log says why."),
            true,
        )],
    }
}

/// What pip printed, for its folded log: addresses of the index shown as
/// the file they lead to (or as runcell's package index), and the advice to
/// restart the kernel left out.
pub(super) fn pip_log(outputs: &[Output]) -> String {
    printed(outputs)
        .lines()
        .filter(|l| !l.to_ascii_lowercase().contains(FALSE_ADVICE))
        .map(redact_urls)
        .collect::<Vec<_>>()
        .join("\n")
}

fn printed(outputs: &[Output]) -> String {
    let all: String = outputs
        .iter()
        .filter_map(|o| match o {
            Output::Stdout { text } | Output::Stderr { text } => Some(text.clone()),
            Output::Error { name, value, .. } => Some(format!("{name}: {value}\n")),
            _ => None,
        })
        .collect();
    ansi::strip(&all)
}

fn redact_urls(line: &str) -> String {
    line.split(' ')
        .map(|word| {
            let bare = word.trim_matches(|c| matches!(c, '(' | ')' | ',' | '\'' | '"'));
            if !(bare.starts_with("http://") || bare.starts_with("https://")) {
                return word.to_string();
            }
            let path = bare.split(['?', '#']).next().unwrap_or_default();
            let file = path.rsplit('/').next().unwrap_or_default();
            let shown = if [".whl", ".tar.gz", ".zip"]
                .iter()
                .any(|e| file.ends_with(e))
            {
                file.to_string()
            } else {
                "runcell's package index".to_string()
            };
            word.replace(bare, &shown)
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// An install's result: runcell's summary, pip's log folded under it (the
/// fold is a view of its own, so that a log opened while pip still prints
/// stays open).
#[component]
pub(super) fn InstallBody(cell: Memo<Option<Cell>>, project: String) -> impl IntoView {
    let lines = Memo::new(move |_| {
        cell.with(|c| {
            c.as_ref()
                .map(|c| summary_html(&summary(&c.outputs, &project, c.status)))
                .unwrap_or_default()
        })
    });
    let log = Memo::new(move |_| {
        cell.with(|c| c.as_ref().map(|c| pip_log(&c.outputs)).unwrap_or_default())
    });
    view! {
        <div class="cell-body outputs">
            <div class="install-summary" role="status" inner_html=lines></div>
            <details class="pip-log" hidden=move || log.with(|l| l.trim().is_empty())>
                <summary>"pip's log"</summary>
                <pre class="out out-stdout" tabindex="0" inner_html=move || crate::render::markdown::escape(&log.get())></pre>
            </details>
        </div>
    }
}

/// runcell's lines on an install, as markup: one paragraph each, a refusal
/// marked.
fn summary_html(lines: &[(String, bool)]) -> String {
    lines
        .iter()
        .map(|(line, refused)| {
            let class = if *refused {
                "out out-package out-package-refused"
            } else {
                "out out-package"
            };
            format!(
                "<p class=\"{class}\">{}</p>",
                crate::render::markdown::escape(line)
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stdout(text: &str) -> Output {
        Output::Stdout { text: text.into() }
    }

    const PIP: &str = "Looking in indexes: http://10.200.0.1:3141/simple\n\
        Collecting humanize\n  Downloading http://10.200.0.1:3141/files/humanize-4.9.0-py3-none-any.whl (126 kB)\n\
        Installing collected packages: humanize\nSuccessfully installed humanize-4.9.0\n\
        Note: you may need to restart the kernel to use updated packages.\n";

    #[test]
    fn the_summary_is_text_in_paragraphs() {
        assert_eq!(
            summary_html(&[
                ("Installed <b>a</b> 1.0".to_string(), false),
                ("Not installed: b.".to_string(), true)
            ]),
            "<p class=\"out out-package\">Installed &lt;b&gt;a&lt;/b&gt; 1.0</p>\
             <p class=\"out out-package out-package-refused\">Not installed: b.</p>"
        );
    }

    #[test]
    fn pip_log_hides_the_index_and_the_false_advice() {
        assert_eq!(
            pip_log(&[stdout(PIP)]),
            "Looking in indexes: runcell's package index\nCollecting humanize\n  \
             Downloading humanize-4.9.0-py3-none-any.whl (126 kB)\n\
             Installing collected packages: humanize\nSuccessfully installed humanize-4.9.0"
        );
    }

    #[test]
    fn the_summary_is_runcells_line() {
        let package = Output::Package {
            project: "humanize".into(),
            version: "4.9.0".into(),
            size: 126_000,
            cached: false,
            refused: None,
        };
        assert_eq!(
            summary(
                &[stdout(PIP), package, stdout("done\n")],
                "humanize",
                CellStatus::Ok
            ),
            vec![(
                "Installed humanize 4.9.0 (126.0 KB, from runcell's package index)".to_string(),
                false
            )]
        );
        // No line of the index's (a backend without it): pip's own words.
        assert_eq!(
            summary(
                &[stdout("Successfully installed a-1.0 b_c-2\n")],
                "a",
                CellStatus::Ok
            ),
            vec![(
                "Installed a 1.0, b_c 2 from runcell's package index".to_string(),
                false
            )]
        );
        assert_eq!(
            summary(
                &[stdout("ERROR: No matching distribution\n")],
                "nope",
                CellStatus::Error
            ),
            vec![("Not installed: nope. pip's log says why.".to_string(), true)]
        );
    }

    #[test]
    fn only_an_install_cell_installs() {
        let events = crate::protocol::SessionEvent::numbered(
            vec![
                crate::protocol::EventBody::CellStarted {
                    cell_id: CellId(1),
                    cell_kind: CellKind::Code,
                    language: Some("python".into()),
                    attempt: None,
                    source: None,
                },
                crate::protocol::EventBody::CellDelta {
                    cell_id: CellId(1),
                    text: "%pip install humanize".into(),
                    highlight: None,
                },
            ],
            1,
        );
        let notebook = Notebook::from_events(&events);
        assert_eq!(
            notebook.cell(CellId(1)).and_then(installs),
            Some("humanize")
        );
    }
}
