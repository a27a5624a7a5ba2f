//! Text that streams into the open panel: code drawn line by line as the
//! model writes it (the line being written shown raw on a terminal), an
//! explanation's raw text while it is written, and an explanation that
//! starts over.

use std::io::{self, Write};

use anstyle::Style;

use super::super::look::{clean, columns};
use super::{Body, MAX_HELD_BYTES, Panel, Panels};

impl<W: Write> Panels<'_, W> {
    pub(super) fn delta(&mut self, cell: u64, text: &str) -> io::Result<()> {
        let Some(mut panel) = self.open.take() else {
            return Ok(());
        };
        if panel.cell != cell {
            self.open = Some(panel);
            return Ok(());
        }
        match &mut panel.body {
            Body::Code {
                highlighter,
                pending,
                shown,
            } => {
                pending.push_str(text);
                if pending.len() > MAX_HELD_BYTES && !pending.contains('\n') {
                    // A line without end: shown as far as it came.
                    pending.push('\n');
                }
                while let Some(end) = pending.find('\n') {
                    let line: String = pending.drain(..=end).collect();
                    let line = clean(line.trim_end_matches('\n'));
                    if *shown > 0 {
                        write!(self.out, "\r\u{1b}[2K")?;
                        *shown = 0;
                    }
                    let painted = self.highlighted(highlighter, &line);
                    self.line(&painted)?;
                }
                if self.look.live && !pending.is_empty() {
                    // The line so far, raw, while it fits on one row.
                    let so_far = clean(pending);
                    if columns(&so_far) < self.room() {
                        if *shown == 0 {
                            write!(self.out, "{}", self.border())?;
                        }
                        let new = clean(pending.get(*shown..).unwrap_or_default());
                        write!(self.out, "{new}")?;
                        *shown = pending.len();
                    }
                }
            }
            Body::Explanation {
                text: all,
                rows,
                used,
                ..
            } => {
                let cleaned = clean(text);
                if all.len() + text.len() > MAX_HELD_BYTES {
                    // Enough to show; the rest of an endless explanation
                    // is not held.
                    self.open = Some(panel);
                    return Ok(());
                }
                all.push_str(text);
                if self.look.live && !cleaned.is_empty() {
                    let room = self.room();
                    let border = self.border();
                    if *rows == 0 && *used == 0 {
                        write!(self.out, "{border}")?;
                    }
                    for c in cleaned.chars() {
                        let w = columns(&c.to_string());
                        if c == '\n' || *used + w > room {
                            write!(self.out, "\n{border}")?;
                            *rows += 1;
                            *used = 0;
                        }
                        if c != '\n' {
                            write!(self.out, "{c}")?;
                            *used += w;
                        }
                    }
                }
            }
            Body::Result { .. } | Body::Other => {}
        }
        self.open = Some(panel);
        Ok(())
    }

    /// An explanation starts over: what was drawn of it is erased when it
    /// can be, else ended with a note that a new text follows.
    pub(super) fn reset(&mut self, cell: u64) -> io::Result<()> {
        let Some(Panel {
            cell: open,
            body:
                Body::Explanation {
                    text,
                    rows,
                    used,
                    drawn_over,
                },
        }) = self.open.take()
        else {
            return Ok(());
        };
        if open != cell {
            self.open = Some(Panel {
                cell: open,
                body: Body::Explanation {
                    text,
                    rows,
                    used,
                    drawn_over,
                },
            });
            return Ok(());
        }
        let drawn = rows > 0 || used > 0;
        if drawn && (drawn_over || !self.erase(rows, used)?) {
            writeln!(self.out)?;
            let note = self
                .look
                .paint(Style::new().dimmed().italic(), "(rewritten:)");
            self.line(&note)?;
        }
        self.open = Some(Panel {
            cell,
            body: Body::Explanation {
                text: String::new(),
                rows: 0,
                used: 0,
                drawn_over: false,
            },
        });
        Ok(())
    }

    /// Wipes an explanation's raw streamed text (live only). False when it
    /// is taller than the screen, and stays.
    pub(super) fn erase(&mut self, rows: usize, used: usize) -> io::Result<bool> {
        if !self.look.live || (rows == 0 && used == 0) {
            return Ok(true);
        }
        if rows + 1 >= self.look.height {
            return Ok(false);
        }
        if rows > 0 {
            write!(self.out, "\r\u{1b}[{rows}A\u{1b}[J")?;
        } else {
            write!(self.out, "\r\u{1b}[J")?;
        }
        Ok(true)
    }
}
