//! A result panel's content: stdout and stderr line by line, and rich
//! outputs as text (images saved to files, tables aligned, errors with
//! their traceback).

use std::io::{self, Write};
use std::path::PathBuf;

use anstyle::{AnsiColor, Style};
use app::protocol::{Output, Table, chart_of};
use base64::Engine as _;

use super::super::look::{clean, columns};
use super::super::markdown;
use super::{Body, MAX_HELD_BYTES, Panels, fg};

impl<W: Write> Panels<'_, W> {
    pub(super) fn output(&mut self, cell: u64, output: &Output) -> io::Result<()> {
        let Some(mut panel) = self.open.take() else {
            return Ok(());
        };
        if panel.cell != cell {
            self.open = Some(panel);
            return Ok(());
        }
        if let Body::Result { pending, stderr } = &mut panel.body {
            match output {
                Output::Stdout { text } | Output::Stderr { text } => {
                    let is_err = matches!(output, Output::Stderr { .. });
                    if is_err != *stderr && !pending.is_empty() {
                        let rest = std::mem::take(pending);
                        self.stream_line(&rest, *stderr)?;
                    }
                    *stderr = is_err;
                    pending.push_str(text);
                    if pending.len() > MAX_HELD_BYTES && !pending.contains('\n') {
                        pending.push('\n');
                    }
                    while let Some(end) = pending.find('\n') {
                        let line: String = pending.drain(..=end).collect();
                        self.stream_line(line.trim_end_matches('\n'), is_err)?;
                    }
                }
                other => {
                    if !pending.is_empty() {
                        let rest = std::mem::take(pending);
                        self.stream_line(&rest, *stderr)?;
                    }
                    self.rich(other)?;
                }
            }
        }
        self.open = Some(panel);
        Ok(())
    }

    pub(super) fn stream_line(&mut self, line: &str, stderr: bool) -> io::Result<()> {
        let text = self.look.program_text(line);
        let text = if stderr {
            self.look.paint(fg(AnsiColor::Yellow), &text)
        } else {
            text
        };
        self.line(&text)
    }

    fn text_block(&mut self, text: &str, style: Style) -> io::Result<()> {
        let text = self.look.program_text(text.trim_end_matches('\n'));
        for line in text.split('\n') {
            let line = self.look.paint(style, line);
            self.line(&line)?;
        }
        Ok(())
    }

    fn rich(&mut self, output: &Output) -> io::Result<()> {
        match output {
            Output::Stdout { .. } | Output::Stderr { .. } => Ok(()),
            Output::Rich { data, .. } => {
                if let Some(png) = data.get("image/png") {
                    return self.save_image(png, "png", true, data.get("text/plain"));
                }
                if let Some(svg) = data.get("image/svg+xml") {
                    return self.save_image(svg, "svg", false, data.get("text/plain"));
                }
                if let Some(jpeg) = data.get("image/jpeg") {
                    return self.save_image(jpeg, "jpg", true, data.get("text/plain"));
                }
                if let Some((kind, spec)) = chart_of(data) {
                    self.save_image(spec, "json", false, None)?;
                    let note = format!(
                        "(an interactive {kind} chart: open the session in a browser to see it drawn)"
                    );
                    return self.text_block(&note, Style::new().dimmed());
                }
                if let Some(markdown) = data.get("text/markdown") {
                    let lines = markdown::render(markdown, &self.look, self.room());
                    for line in lines {
                        self.line(&line)?;
                    }
                    return Ok(());
                }
                if let Some(plain) = data.get("text/plain") {
                    return self.text_block(plain, Style::new());
                }
                if data.contains_key("text/html") {
                    return self.text_block(
                        "(HTML output: open the session in a browser to see it)",
                        Style::new().dimmed(),
                    );
                }
                Ok(())
            }
            Output::Table { table, text, .. } => {
                if text.trim().is_empty() {
                    let text = table_text(table);
                    self.text_block(&text, Style::new())
                } else {
                    self.text_block(text, Style::new())
                }
            }
            Output::Image { url, text, .. } => {
                let line = if text.is_empty() {
                    format!("[image] {url}")
                } else {
                    format!("[image] {url} {text}")
                };
                self.text_block(&line, fg(AnsiColor::Cyan))
            }
            Output::File { path, size, .. } => {
                let line = format!("[file] {path} ({})", bytes(*size));
                self.text_block(&line, fg(AnsiColor::Cyan))
            }
            Output::Package {
                project,
                version,
                size,
                cached,
                refused,
            } => match refused {
                Some(why) => {
                    let line = format!("[package] not installed: {project}. {why}");
                    self.text_block(line.trim_end(), fg(AnsiColor::Yellow))
                }
                None => {
                    let origin = if *cached {
                        "from runcell's cache"
                    } else {
                        "downloaded through runcell's index"
                    };
                    let name = format!("{project} {version}");
                    let line = format!(
                        "[package] installed {} ({}, {origin})",
                        name.trim_end(),
                        bytes(*size)
                    );
                    self.text_block(&line, Style::new().dimmed())
                }
            },
            Output::Error {
                name,
                value,
                traceback,
            } => {
                let red = fg(AnsiColor::Red);
                if traceback.is_empty() {
                    self.text_block(&format!("{name}: {value}"), red)
                } else {
                    for entry in traceback {
                        self.text_block(entry, Style::new())?;
                    }
                    Ok(())
                }
            }
        }
    }

    /// Saves an image (base64 unless `text`) and says where.
    fn save_image(
        &mut self,
        data: &str,
        extension: &str,
        base64: bool,
        alt: Option<&String>,
    ) -> io::Result<()> {
        let bytes = if base64 {
            let compact: String = data.split_whitespace().collect();
            match base64::engine::general_purpose::STANDARD.decode(compact) {
                Ok(bytes) => bytes,
                Err(_) => {
                    return self.text_block("[image] (unreadable data)", fg(AnsiColor::Red));
                }
            }
        } else {
            data.as_bytes().to_vec()
        };
        let Some(dir) = self.figures.clone() else {
            let line = format!("[image] {} ({extension})", bytes_len(bytes.len()));
            return self.text_block(&line, fg(AnsiColor::Cyan));
        };
        let path = match save_new(&dir, extension, &bytes) {
            Ok(path) => path,
            Err(e) => {
                // The turn goes on; only this image is missing.
                let line = format!("[image] not saved in {}: {e}", dir.display());
                return self.text_block(&line, fg(AnsiColor::Red));
            }
        };
        let mut line = format!("[image] saved to {}", path.display());
        if let Some(alt) = alt.filter(|a| !a.trim().is_empty()) {
            line.push_str(&format!("  {}", alt.trim()));
        }
        self.text_block(&line, fg(AnsiColor::Cyan))
    }
}

/// Writes `bytes` to a new file `figure-N.<extension>` in `dir` (made,
/// readable by the user only): never over a file or through a link that is
/// already there.
fn save_new(dir: &std::path::Path, extension: &str, bytes: &[u8]) -> io::Result<PathBuf> {
    use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)?;
    for n in 1..10_000 {
        let path = dir.join(format!("figure-{n}.{extension}"));
        match std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&path)
        {
            Ok(mut file) => {
                file.write_all(bytes)?;
                return Ok(path);
            }
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(e),
        }
    }
    Err(io::Error::other("too many figures in one directory"))
}

/// A table without its text form: columns aligned, one row a line.
fn table_text(table: &Table) -> String {
    let cells: Vec<&Vec<String>> = std::iter::once(&table.columns)
        .chain(table.rows.iter())
        .collect();
    let count = cells.iter().map(|r| r.len()).max().unwrap_or(0);
    let widths: Vec<usize> = (0..count)
        .map(|i| {
            cells
                .iter()
                .filter_map(|r| r.get(i))
                .map(|c| columns(&clean(c)))
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut text = String::new();
    for row in cells {
        let line: Vec<String> = widths
            .iter()
            .enumerate()
            .map(|(i, w)| {
                let cell = clean(row.get(i).map_or("", String::as_str));
                format!("{cell}{}", " ".repeat(w.saturating_sub(columns(&cell))))
            })
            .collect();
        text.push_str(line.join("  ").trim_end());
        text.push('\n');
    }
    if let Some(elided) = &table.elided {
        text.push_str(&format!("({elided})\n"));
    }
    text
}

fn bytes(size: u64) -> String {
    match size {
        s if s < 1024 => format!("{s} B"),
        s if s < 1024 * 1024 => format!("{:.1} KiB", s as f64 / 1024.0),
        s => format!("{:.1} MiB", s as f64 / (1024.0 * 1024.0)),
    }
}

fn bytes_len(len: usize) -> String {
    bytes(u64::try_from(len).unwrap_or(u64::MAX))
}
