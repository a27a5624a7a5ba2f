//! How output is drawn: colour or not, redrawn in place or not, how wide;
//! and making text from the far side of a sandbox safe to print.
//!
//! Everything shown comes from a program, a model or a file the person
//! uploaded: none of it may move the cursor, set the title, write the
//! clipboard (OSC 52) or otherwise drive the terminal. Text is cleaned of
//! every control character and escape sequence; colours a program asked for
//! (SGR, as in IPython's tracebacks) are read by `cansi` and drawn again
//! from what was understood, never passed through.

use std::io::IsTerminal;

use anstyle::{AnsiColor, Effects, Style};
use cansi::v3::{CategorisedSlice, Color, Intensity, categorise_text};
use unicode_width::UnicodeWidthChar;

/// The narrowest and widest panels drawn.
const MIN_WIDTH: usize = 24;
const MAX_WIDTH: usize = 160;
/// When the width cannot be known (a pipe without `COLUMNS`).
const DEFAULT_WIDTH: usize = 80;

/// What the output can do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Look {
    /// Colours and bold (off when piped, under `NO_COLOR`, or `TERM=dumb`).
    pub colour: bool,
    /// Lines may be redrawn in place as they complete (a terminal only).
    pub live: bool,
    /// Columns a panel may use.
    pub width: usize,
    /// Rows the terminal shows (0 when not a terminal): what can be redrawn.
    pub height: usize,
}

impl Look {
    /// Plain text, for pipes and files (and tests).
    pub const PLAIN: Self = Self {
        colour: false,
        live: false,
        width: DEFAULT_WIDTH,
        height: 0,
    };

    /// What standard output is: a terminal (its width, colour unless
    /// `NO_COLOR`), or a pipe or file (plain text).
    pub fn of_stdout() -> Self {
        let stdout = std::io::stdout();
        let dumb = std::env::var("TERM").is_ok_and(|t| t == "dumb");
        let live = stdout.is_terminal() && !dumb;
        let colour = anstream::AutoStream::choice(&stdout) != anstream::ColorChoice::Never;
        let size = terminal_size(&stdout);
        // A terminal's own width is never exceeded (its wraps could not be
        // counted); elsewhere a sensible one.
        let width = match size {
            Some((columns, _)) => columns.min(MAX_WIDTH),
            None => std::env::var("COLUMNS")
                .ok()
                .and_then(|c| c.trim().parse().ok())
                .unwrap_or(DEFAULT_WIDTH)
                .clamp(MIN_WIDTH, MAX_WIDTH),
        };
        Self {
            colour,
            live,
            width,
            height: size.map_or(0, |(_, rows)| rows),
        }
    }

    /// Standard error's colours (for the client's own complaints).
    pub fn of_stderr() -> Self {
        let colour =
            anstream::AutoStream::choice(&std::io::stderr()) != anstream::ColorChoice::Never;
        Self {
            colour,
            ..Self::PLAIN
        }
    }

    /// `text` in `style` when colours are on.
    pub fn paint(&self, style: Style, text: &str) -> String {
        if self.colour && style != Style::new() {
            format!("{}{text}{}", style.render(), style.render_reset())
        } else {
            text.to_string()
        }
    }

    /// Program output that may hold colours: cleaned, its colours drawn
    /// again when colours are on, dropped otherwise.
    pub fn program_text(&self, text: &str) -> String {
        let mut out = String::with_capacity(text.len());
        for slice in categorise_text(&overwrite_carriage_returns(text)) {
            let piece = clean(slice.text);
            if self.colour {
                out.push_str(&self.paint(style_of(&slice), &piece));
            } else {
                out.push_str(&piece);
            }
        }
        out
    }
}

/// The columns and rows of the terminal on `stdout`, if it is one.
fn terminal_size(stdout: &std::io::Stdout) -> Option<(usize, usize)> {
    if !stdout.is_terminal() {
        return None;
    }
    let size = rustix::termios::tcgetwinsize(stdout).ok()?;
    (size.ws_col > 0).then_some((usize::from(size.ws_col), usize::from(size.ws_row)))
}

/// `text` with nothing that drives a terminal: escape sequences and control
/// characters go (a tab becomes spaces), line breaks stay.
pub fn clean(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\n' => out.push('\n'),
            '\t' => out.push_str("    "),
            '\u{1b}' => skip_escape(&mut chars),
            c if c.is_control() => {}
            // Bidirectional overrides could make shown code read as other
            // code ("Trojan Source"): shown as what they are.
            '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}' => {
                out.push_str(&format!("<U+{:04X}>", u32::from(c)));
            }
            c => out.push(c),
        }
    }
    out
}

/// Skips the rest of an escape sequence whose ESC was just read: CSI up to
/// its final byte, OSC/DCS/APC/PM/SOS up to BEL or ST, or one character.
fn skip_escape(chars: &mut std::iter::Peekable<std::str::Chars<'_>>) {
    match chars.next() {
        Some('[') => {
            for c in chars.by_ref() {
                if ('\u{40}'..='\u{7e}').contains(&c) {
                    break;
                }
            }
        }
        Some(']' | 'P' | '_' | '^' | 'X') => {
            while let Some(c) = chars.next() {
                if c == '\u{7}' {
                    break;
                }
                if c == '\u{1b}' {
                    chars.next_if_eq(&'\\');
                    break;
                }
            }
        }
        _ => {}
    }
}

/// What a terminal shows of a line with carriage returns (a progress bar):
/// the text after the last one.
fn overwrite_carriage_returns(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for (i, line) in text.split('\n').enumerate() {
        if i > 0 {
            out.push('\n');
        }
        let line = line.strip_suffix('\r').unwrap_or(line);
        let shown = line
            .rsplit('\r')
            .find(|part| !part.is_empty())
            .unwrap_or("");
        out.push_str(shown);
    }
    out
}

fn style_of(slice: &CategorisedSlice<'_>) -> Style {
    let mut style = Style::new();
    if let Some(fg) = slice.fg {
        style = style.fg_color(Some(ansi(fg).into()));
    }
    if let Some(bg) = slice.bg {
        style = style.bg_color(Some(ansi(bg).into()));
    }
    let mut effects = Effects::new();
    match slice.intensity {
        Some(Intensity::Bold) => effects |= Effects::BOLD,
        Some(Intensity::Faint) => effects |= Effects::DIMMED,
        _ => {}
    }
    if slice.italic == Some(true) {
        effects |= Effects::ITALIC;
    }
    if slice.underline == Some(true) {
        effects |= Effects::UNDERLINE;
    }
    style.effects(effects)
}

fn ansi(colour: Color) -> AnsiColor {
    match colour {
        Color::Black => AnsiColor::Black,
        Color::Red => AnsiColor::Red,
        Color::Green => AnsiColor::Green,
        Color::Yellow => AnsiColor::Yellow,
        Color::Blue => AnsiColor::Blue,
        Color::Magenta => AnsiColor::Magenta,
        Color::Cyan => AnsiColor::Cyan,
        Color::White => AnsiColor::White,
        Color::BrightBlack => AnsiColor::BrightBlack,
        Color::BrightRed => AnsiColor::BrightRed,
        Color::BrightGreen => AnsiColor::BrightGreen,
        Color::BrightYellow => AnsiColor::BrightYellow,
        Color::BrightBlue => AnsiColor::BrightBlue,
        Color::BrightMagenta => AnsiColor::BrightMagenta,
        Color::BrightCyan => AnsiColor::BrightCyan,
        Color::BrightWhite => AnsiColor::BrightWhite,
    }
}

/// Columns `text` takes (escape sequences count for nothing).
pub fn columns(text: &str) -> usize {
    let mut width = 0;
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            skip_escape(&mut chars);
        } else {
            width += c.width().unwrap_or(0);
        }
    }
    width
}

/// `line` (clean text, no line breaks) cut into pieces of at most `width`
/// columns.
pub fn wrap(line: &str, width: usize) -> Vec<String> {
    let width = width.max(1);
    let mut pieces = Vec::new();
    let mut piece = String::new();
    let mut used = 0;
    for c in line.chars() {
        let w = c.width().unwrap_or(0);
        if used + w > width && !piece.is_empty() {
            pieces.push(std::mem::take(&mut piece));
            used = 0;
        }
        piece.push(c);
        used += w;
    }
    pieces.push(piece);
    pieces
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nothing_that_drives_a_terminal_survives_cleaning() {
        let hostile = concat!(
            "a\u{1b}[2J\u{1b}[H",                 // clear the screen, home
            "\u{1b}]0;owned\u{7}",                // set the title
            "\u{1b}]52;c;ZXZpbA==\u{1b}\\",       // write the clipboard
            "\u{1b}P+q\u{1b}\\",                  // a device control string
            "b\u{8}\u{7}\u{0}\u{9b}c\u{202e}d\n", // backspace, bell, NUL, C1 CSI, RLO
        );
        let cleaned = clean(hostile);
        assert_eq!(cleaned, "abc<U+202E>d\n");
        assert!(!cleaned.chars().any(|c| c.is_control() && c != '\n'));
    }

    #[test]
    fn program_colours_are_redrawn_or_dropped() {
        let traceback = "\u{1b}[0;31mZeroDivisionError\u{1b}[0m: \u{1b}]52;c;eA==\u{7}x";
        let plain = Look::PLAIN.program_text(traceback);
        assert_eq!(plain, "ZeroDivisionError: x");
        let coloured = Look {
            colour: true,
            ..Look::PLAIN
        }
        .program_text(traceback);
        assert!(
            coloured.contains("\u{1b}[31mZeroDivisionError"),
            "{coloured:?}"
        );
        assert!(!coloured.contains("]52"), "{coloured:?}");
    }

    #[test]
    fn carriage_returns_keep_what_a_terminal_would_show() {
        assert_eq!(
            overwrite_carriage_returns("10%\r20%\r30%\nok\r\n"),
            "30%\nok\n"
        );
        assert_eq!(overwrite_carriage_returns("done\r"), "done");
    }

    #[test]
    fn wrapping_counts_columns_not_bytes() {
        assert_eq!(wrap("abcdef", 4), vec!["abcd", "ef"]);
        assert_eq!(wrap("日本語です", 4), vec!["日本", "語で", "す"]);
        assert_eq!(wrap("", 4), vec![""]);
        assert_eq!(columns("\u{1b}[31mred\u{1b}[0m"), 3);
    }
}
