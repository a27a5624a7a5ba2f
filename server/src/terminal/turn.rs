//! Following one turn in the terminal: its events drawn as they come (or
//! printed as NDJSON), a spinner while nothing streams, and Ctrl+C: the
//! first stops the turn, a second leaves.

use std::io::{IsTerminal, Write};
use std::sync::Arc;
use std::time::Duration;

use app::protocol::{EventBody, TurnStatus};
use futures::{FutureExt, StreamExt};
use parking_lot::Mutex;
use tokio::signal::unix::{Signal, SignalKind, signal};

use super::engine::{Backend, ClientError, TurnStream};
use super::panels::Panels;

/// How a followed turn ended.
#[derive(Debug)]
pub enum Ending {
    Finished(TurnStatus),
    /// The stream broke or the server refused (the turn may run on).
    Broken(ClientError),
    /// Ctrl+C a second time: the person wants out.
    Left,
}

/// SIGINT, listened for from the start, so that Ctrl+C no longer kills the
/// client but stops a turn.
pub struct Interrupts {
    signal: Signal,
}

impl Interrupts {
    pub fn listen() -> std::io::Result<Self> {
        Ok(Self {
            signal: signal(SignalKind::interrupt())?,
        })
    }

    /// Forgets interrupts that came while no turn ran.
    pub fn forget(&mut self) {
        while let Some(Some(())) = self.signal.recv().now_or_never() {}
    }

    /// The next interrupt.
    pub async fn next(&mut self) {
        if self.signal.recv().await.is_none() {
            std::future::pending::<()>().await;
        }
    }
}

/// A spinner on standard error, only when it is a terminal. Drawn by a
/// task of its own, under a lock that clearing takes too, so that no frame
/// lands after the line is cleared and the panels write there.
pub struct Spinner {
    enabled: bool,
    shown: Option<(Arc<Mutex<bool>>, &'static str)>,
}

const FRAMES: [char; 10] = ['⠋', '⠙', '⠹', '⠸', '⠼', '⠴', '⠦', '⠧', '⠇', '⠏'];

impl Spinner {
    pub fn new(enabled: bool) -> Self {
        Self {
            enabled: enabled && std::io::stderr().is_terminal(),
            shown: None,
        }
    }

    /// Shows `message` spinning, or nothing.
    pub fn set(&mut self, message: Option<&'static str>) {
        match (message, &self.shown) {
            (Some(m), Some((_, shown))) if *shown == m => {}
            (Some(m), _) if self.enabled => {
                self.clear();
                let running = Arc::new(Mutex::new(true));
                draw(FRAMES[0], m);
                let task_running = Arc::clone(&running);
                tokio::spawn(async move {
                    for frame in FRAMES.iter().cycle().skip(1) {
                        tokio::time::sleep(Duration::from_millis(100)).await;
                        let running = task_running.lock();
                        if !*running {
                            break;
                        }
                        draw(*frame, m);
                    }
                });
                self.shown = Some((running, m));
            }
            _ => self.clear(),
        }
    }

    pub fn clear(&mut self) {
        if let Some((running, _)) = self.shown.take() {
            let mut running = running.lock();
            *running = false;
            let mut stderr = std::io::stderr();
            let _ = write!(stderr, "\r\u{1b}[2K");
            let _ = stderr.flush();
        }
    }
}

fn draw(frame: char, message: &str) {
    let mut stderr = std::io::stderr();
    let _ = write!(stderr, "\r\u{1b}[2K{frame} {message}…");
    let _ = stderr.flush();
}

/// Where a turn goes: panels, or NDJSON lines.
pub enum Sink<'a, 'h, W: Write> {
    Panels(&'a mut Panels<'h, W>),
    Json(&'a mut dyn Write),
}

/// Follows `turn` of session `session` to its end.
pub async fn follow<W: Write>(
    engine: &dyn Backend,
    session: &str,
    mut turn: TurnStream,
    mut sink: Sink<'_, '_, W>,
    interrupts: &mut Interrupts,
    spinner: &mut Spinner,
) -> Ending {
    interrupts.forget();
    let mut stopping = false;
    if let Sink::Panels(panels) = &mut sink {
        panels.begin();
        spinner.set(panels.waiting());
    }
    let ending = loop {
        tokio::select! {
            frame = turn.next() => {
                let frame = match frame {
                    Some(Ok(frame)) => frame,
                    Some(Err(error)) => break Ending::Broken(error),
                    None => break Ending::Broken(ClientError::Protocol(
                        "the turn's stream ended before the turn did".into(),
                    )),
                };
                spinner.clear();
                let drawn = match &mut sink {
                    Sink::Panels(panels) => panels.event(&frame.event),
                    Sink::Json(out) => writeln!(out, "{}", json_line(&frame.line)).and_then(|()| out.flush()),
                };
                if let Err(error) = drawn {
                    break Ending::Broken(error.into());
                }
                if let EventBody::TurnFinished { status, .. } = frame.event.event {
                    break Ending::Finished(status);
                }
                if let Sink::Panels(panels) = &sink {
                    spinner.set(panels.waiting());
                }
            }
            () = interrupts.next() => {
                if stopping {
                    break Ending::Left;
                }
                stopping = true;
                spinner.clear();
                if let Sink::Panels(panels) = &mut sink {
                    let _ = panels.note(
                        anstyle::Style::new().dimmed(),
                        "Stopping… (Ctrl+C again to leave)",
                    );
                }
                if let Err(error) = engine.stop(session).await {
                    break Ending::Broken(error);
                }
            }
        }
    };
    spinner.clear();
    ending
}

/// An NDJSON line as printed: JSON escapes what is below U+0020 but not
/// the C1 controls or bidirectional overrides a terminal acts on or that
/// reorder what is shown; those are written as `\uXXXX` (the same JSON).
fn json_line(line: &str) -> std::borrow::Cow<'_, str> {
    let risky = |c: char| {
        ('\u{80}'..='\u{9f}').contains(&c)
            || ('\u{202a}'..='\u{202e}').contains(&c)
            || ('\u{2066}'..='\u{2069}').contains(&c)
    };
    if !line.chars().any(risky) {
        return std::borrow::Cow::Borrowed(line);
    }
    let mut out = String::with_capacity(line.len() + 16);
    for c in line.chars() {
        if risky(c) {
            out.push_str(&format!("\\u{:04x}", u32::from(c)));
        } else {
            out.push(c);
        }
    }
    std::borrow::Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_lines_keep_their_value_without_c1_or_bidi_controls() {
        let value = serde_json::json!({"text": "a\u{9b}2Jb\u{202e}c\u{1b}"});
        let line = serde_json::to_string(&value).unwrap();
        let printed = json_line(&line);
        assert!(
            !printed.chars().any(|c| c.is_control() || c == '\u{202e}'),
            "{printed}"
        );
        let back: serde_json::Value = serde_json::from_str(&printed).unwrap();
        assert_eq!(back, value);
        assert_eq!(json_line("{\"plain\":1}"), "{\"plain\":1}");
    }
}
