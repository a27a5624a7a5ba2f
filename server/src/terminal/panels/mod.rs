//! A turn's events drawn as panels, in the order they happen: the code
//! (highlighted line by line as the model writes it), the result (stdout,
//! stderr in its own colour, errors with their traceback, images saved to
//! files, tables as text), the explanation (markdown, drawn once it is
//! complete; its raw text streams meanwhile on a terminal), fix attempts as
//! such, and a last line saying how the turn ended.
//!
//! On a terminal, panels have a border and the line being written is
//! redrawn as it completes; piped, the same content is plain lines under a
//! title rule, with no escape sequence at all.

mod output;
mod stream;

use std::collections::BTreeMap;
use std::io::{self, Write};
use std::path::PathBuf;

use anstyle::{AnsiColor, Style};
use app::protocol::{
    CellError, CellKind, CellStatus, EventBody, KernelCap, KernelLoss, Output, SessionEvent,
    TurnStatus, UNGROUNDED,
};

use super::look::{Look, clean, columns};
use super::markdown;
use runcell_agent::highlight::{Highlighter, TerminalHighlighter};

/// The live border's left edge.
const BORDER: &str = "│ ";
/// The most of one line (or one explanation) held before it is drawn.
const MAX_HELD_BYTES: usize = 1024 * 1024;

fn fg(colour: AnsiColor) -> Style {
    Style::new().fg_color(Some(colour.into()))
}

/// What is drawn of the open panel.
enum Body<'h> {
    Code {
        highlighter: Box<TerminalHighlighter<'h>>,
        /// The line being written.
        pending: String,
        /// Bytes of `pending` shown raw on the live line.
        shown: usize,
    },
    Result {
        /// A line of stdout or stderr still open, and whether it is stderr.
        pending: String,
        stderr: bool,
    },
    Explanation {
        text: String,
        /// Line breaks drawn while its raw text streamed (live only).
        rows: usize,
        /// Columns used on the current raw row.
        used: usize,
        /// Something else was drawn among its rows (a note): the raw text
        /// is not redrawn, since its rows can no longer be counted.
        drawn_over: bool,
    },
    Other,
}

struct Panel<'h> {
    cell: u64,
    body: Body<'h>,
}

/// Draws one session's turns onto `out`.
pub struct Panels<'h, W: Write> {
    out: W,
    look: Look,
    highlighter: &'h Highlighter,
    /// Where images are saved (made when the first one comes).
    figures: Option<PathBuf>,
    open: Option<Panel<'h>>,
    /// Attempts of the cells seen, for the titles of their results.
    attempts: BTreeMap<u64, u32>,
    waiting: Option<&'static str>,
    finished: Option<TurnStatus>,
}

impl<'h, W: Write> Panels<'h, W> {
    pub fn new(out: W, look: Look, highlighter: &'h Highlighter, figures: Option<PathBuf>) -> Self {
        Self {
            out,
            look,
            highlighter,
            figures,
            open: None,
            attempts: BTreeMap::new(),
            waiting: None,
            finished: None,
        }
    }

    /// What the turn waits for, while nothing streams: for a spinner.
    pub fn waiting(&self) -> Option<&'static str> {
        self.waiting
    }

    /// How the turn ended, once it has.
    #[cfg(test)]
    pub fn finished(&self) -> Option<TurnStatus> {
        self.finished
    }

    /// Starts a new turn's drawing (the same panels object serves a chat).
    pub fn begin(&mut self) {
        self.finished = None;
        self.waiting = Some("starting");
    }

    /// A line of the client's own (a notice, a command's answer), between
    /// panels.
    pub fn note(&mut self, style: Style, text: &str) -> io::Result<()> {
        if self.open.is_some() && self.look.live {
            // Keep the open line: start the note below it.
            writeln!(self.out)?;
        }
        if let Some(Panel {
            body: Body::Explanation { drawn_over, .. },
            ..
        }) = &mut self.open
        {
            *drawn_over = true;
        }
        let line = self.look.paint(style, &clean(text));
        writeln!(self.out, "{line}")?;
        self.out.flush()
    }

    pub fn event(&mut self, event: &SessionEvent) -> io::Result<()> {
        match &event.event {
            EventBody::TurnStarted { .. } => {
                self.waiting = Some("the model is starting");
            }
            EventBody::UserMessage { .. } => {}
            EventBody::CellStarted {
                cell_id,
                cell_kind,
                language,
                attempt,
                source,
            } => {
                self.close(None)?;
                let attempt = attempt
                    .or_else(|| source.and_then(|s| self.attempts.get(&s.0).copied()))
                    .unwrap_or(1);
                self.attempts.insert(cell_id.0, attempt);
                let fix = (attempt > 1).then(|| format!("fix {}", attempt - 1));
                let (title, body, waiting) = match cell_kind {
                    CellKind::Code => {
                        let language = language.as_deref().unwrap_or("python");
                        let mut title = format!("code · {}", clean(language));
                        if let Some(fix) = &fix {
                            title.push_str(&format!(" · {fix}"));
                        }
                        let body = Body::Code {
                            highlighter: Box::new(self.highlighter.terminal(language)),
                            pending: String::new(),
                            shown: 0,
                        };
                        (title, body, None)
                    }
                    CellKind::Result => {
                        let title = match &fix {
                            Some(fix) => format!("result · {fix}"),
                            None => "result".into(),
                        };
                        let body = Body::Result {
                            pending: String::new(),
                            stderr: false,
                        };
                        (title, body, Some("running"))
                    }
                    CellKind::Explanation => {
                        let body = Body::Explanation {
                            text: String::new(),
                            rows: 0,
                            used: 0,
                            drawn_over: false,
                        };
                        ("explanation".into(), body, Some("the model is explaining"))
                    }
                    CellKind::User => ("question".into(), Body::Other, None),
                };
                self.waiting = waiting;
                self.header(&title)?;
                self.open = Some(Panel {
                    cell: cell_id.0,
                    body,
                });
            }
            EventBody::CellDelta { cell_id, text, .. } => {
                self.waiting = None;
                self.delta(cell_id.0, text)?;
            }
            EventBody::CellReset { cell_id } => self.reset(cell_id.0)?,
            EventBody::CellOutput { cell_id, output } => {
                self.waiting = None;
                self.output(cell_id.0, output)?;
            }
            // A terminal cannot take back what it printed: a clear is said
            // (a clear that waits, an animation's frame, is not), and an
            // updated display is printed again where the output is.
            EventBody::CellCleared { cell_id, wait } => {
                if !wait {
                    let cleared = Output::Stdout {
                        text: "── output cleared ──\n".into(),
                    };
                    self.output(cell_id.0, &cleared)?;
                }
            }
            EventBody::DisplayUpdated { output, .. } => {
                let result = self
                    .open
                    .as_ref()
                    .filter(|p| matches!(p.body, Body::Result { .. }))
                    .map(|p| p.cell);
                if let Some(cell) = result {
                    self.output(cell, output)?;
                }
            }
            EventBody::CellFinished {
                cell_id,
                status,
                elapsed_ms,
                error,
            } => {
                if self.open.as_ref().is_some_and(|p| p.cell == cell_id.0) {
                    let kind = match self.open.as_ref().map(|p| &p.body) {
                        Some(Body::Code { .. }) => Some("code"),
                        Some(Body::Result { .. }) => Some("result"),
                        _ => None,
                    };
                    self.close(Some((*status, *elapsed_ms, error.as_ref())))?;
                    self.waiting = match (kind, status) {
                        (Some("code"), CellStatus::Ok) => Some("running"),
                        (Some("result"), _) => Some("the model is reading the result"),
                        _ => None,
                    };
                }
            }
            EventBody::TurnFinished {
                status, elapsed_ms, ..
            } => {
                self.close(None)?;
                self.waiting = None;
                self.finished = Some(*status);
                let took = seconds(*elapsed_ms);
                let (style, line) = match status {
                    TurnStatus::Ok => (fg(AnsiColor::Green), format!("✓ done in {took}")),
                    TurnStatus::Error => (fg(AnsiColor::Red), format!("✗ failed after {took}")),
                    TurnStatus::Cancelled => {
                        (fg(AnsiColor::Yellow), format!("■ stopped after {took}"))
                    }
                };
                let line = self.look.paint(style.bold(), &line);
                writeln!(self.out, "{line}")?;
            }
            EventBody::KernelLost { reason } => {
                self.close(None)?;
                let why = match reason {
                    KernelLoss::ServerRestart => "the server restarted",
                    KernelLoss::Fork => "this session is a fork",
                    KernelLoss::ForkWithoutFiles => {
                        "this session is a fork, shared without its files"
                    }
                    KernelLoss::Import => "this session was imported",
                };
                let line = format!(
                    "The kernel is gone ({why}): variables from before are lost; /rerun runs the code again."
                );
                let line = self.look.paint(fg(AnsiColor::Yellow), &line);
                writeln!(self.out, "{line}")?;
            }
            EventBody::KernelRefused { cap, held, .. } => {
                self.close(None)?;
                self.waiting = None;
                let whose = match cap {
                    KernelCap::Owner => "your sessions hold",
                    KernelCap::Server => "the server holds",
                    KernelCap::Anonymous | KernelCap::Client => "pages without an account hold",
                };
                let line = format!(
                    "Not run: {whose} all {held} kernels they may, all in use; stop one (or wait for one to end), then ask again."
                );
                let line = self.look.paint(fg(AnsiColor::Yellow), &line);
                writeln!(self.out, "{line}")?;
            }
            // Why an attempt was sent back, or what a repair changed.
            EventBody::CellNote { note, .. } => {
                self.close(None)?;
                let line = self.look.paint(fg(AnsiColor::Yellow), &clean(note));
                writeln!(self.out, "{line}")?;
            }
            // The terminal shows one line of turns; branches are the page's.
            EventBody::BranchSelected { .. } => {}
            EventBody::KernelRestored { programs, error } => {
                self.close(None)?;
                let line = match error {
                    None => {
                        format!("(variables rebuilt for this branch: {programs} programs re-ran)")
                    }
                    Some(e) => e.message.clone(),
                };
                let line = self.look.paint(fg(AnsiColor::Yellow), &clean(&line));
                writeln!(self.out, "{line}")?;
            }
        }
        self.out.flush()
    }

    fn header(&mut self, title: &str) -> io::Result<()> {
        let (lead, fill) = if self.look.live {
            ("╭─ ", "─")
        } else {
            ("── ", "─")
        };
        let head = format!("{lead}{title} ");
        let rest = self.look.width.saturating_sub(columns(&head));
        let line = format!("{head}{}", fill.repeat(rest));
        let line = self.look.paint(Style::new().dimmed(), &line);
        writeln!(self.out, "{line}")
    }

    fn border(&self) -> String {
        if self.look.live {
            self.look.paint(Style::new().dimmed(), BORDER)
        } else {
            String::new()
        }
    }

    /// Room for text inside the border.
    fn room(&self) -> usize {
        let border = if self.look.live { columns(BORDER) } else { 0 };
        self.look.width.saturating_sub(border).max(1)
    }

    /// One finished line of text inside the panel.
    fn line(&mut self, text: &str) -> io::Result<()> {
        let border = self.border();
        writeln!(self.out, "{border}{text}")
    }

    fn highlighted(&self, highlighter: &mut TerminalHighlighter<'_>, line: &str) -> String {
        if !self.look.colour {
            return line.to_string();
        }
        highlighter
            .line(line)
            .into_iter()
            .map(|(style, text)| self.look.paint(style, &text))
            .collect()
    }

    /// Closes the open panel, with its ending when it finished.
    fn close(&mut self, finished: Option<(CellStatus, u64, Option<&CellError>)>) -> io::Result<()> {
        let Some(mut panel) = self.open.take() else {
            return Ok(());
        };
        // An explanation withdrawn for naming figures nothing showed is not
        // shown as if it stood: only why it was withdrawn.
        let withdrawn = matches!(panel.body, Body::Explanation { .. })
            && finished.is_some_and(|(_, _, e)| e.is_some_and(|e| e.code == UNGROUNDED));
        if withdrawn {
            if let Body::Explanation {
                rows,
                used,
                drawn_over,
                ..
            } = &panel.body
                && (*drawn_over || !self.erase(*rows, *used)?)
            {
                // The raw text stays on screen: end its row first.
                writeln!(self.out)?;
            }
            let note = finished
                .and_then(|(_, _, e)| e)
                .map_or_else(String::new, |e| clean(&e.message));
            let line = self.look.paint(
                Style::new().dimmed().italic(),
                &format!("(an explanation was {note}; another follows)"),
            );
            self.line(&line)?;
            if self.look.live {
                let end = self.look.paint(Style::new().dimmed(), "╰─");
                writeln!(self.out, "{end}")?;
            }
            return Ok(());
        }
        match &mut panel.body {
            Body::Code {
                highlighter,
                pending,
                shown,
            } => {
                if *shown > 0 {
                    write!(self.out, "\r\u{1b}[2K")?;
                }
                if !pending.is_empty() {
                    let line = clean(pending);
                    let painted = self.highlighted(highlighter, &line);
                    self.line(&painted)?;
                }
            }
            Body::Result { pending, stderr } => {
                if !pending.is_empty() {
                    let rest = std::mem::take(pending);
                    self.stream_line(&rest, *stderr)?;
                }
            }
            Body::Explanation {
                text,
                rows,
                used,
                drawn_over,
            } => {
                if !*drawn_over && self.erase(*rows, *used)? {
                    self.markdown(text)?;
                } else {
                    // Too tall to redraw: the raw text stays as it streamed.
                    writeln!(self.out)?;
                }
            }
            Body::Other => {}
        }
        let Some((status, elapsed_ms, error)) = finished else {
            if self.look.live {
                let end = self.look.paint(Style::new().dimmed(), "╰─");
                writeln!(self.out, "{end}")?;
            }
            return Ok(());
        };
        let (style, word) = match status {
            CellStatus::Ok | CellStatus::Streaming => (Style::new().dimmed(), None),
            CellStatus::Error => (fg(AnsiColor::Red), Some("failed")),
            CellStatus::Cancelled => (fg(AnsiColor::Yellow), Some("stopped")),
        };
        let mut ending = match word {
            Some(word) => format!("{word} · {}", seconds(elapsed_ms)),
            None => seconds(elapsed_ms),
        };
        if let Some(error) = error {
            ending.push_str(&format!(": {}", clean(&error.message)));
        }
        if self.look.live {
            let line = self.look.paint(style, &format!("╰─ {ending}"));
            writeln!(self.out, "{line}")?;
        } else if word.is_some() {
            writeln!(self.out, "({ending})")?;
        }
        Ok(())
    }

    fn markdown(&mut self, text: &str) -> io::Result<()> {
        for line in markdown::render(text, &self.look, self.room()) {
            self.line(&line)?;
        }
        Ok(())
    }

    /// Gives the writer back (tests read what was drawn).
    #[cfg(test)]
    pub fn into_inner(self) -> W {
        self.out
    }
}

fn seconds(ms: u64) -> String {
    if ms < 1000 {
        format!("{ms} ms")
    } else {
        format!("{:.1} s", ms as f64 / 1000.0)
    }
}

#[cfg(test)]
mod tests;
