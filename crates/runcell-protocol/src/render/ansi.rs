//! ANSI colours (as in IPython tracebacks) to HTML spans, and to plain text.

use cansi::v3::{CategorisedSlice, Color, Intensity, categorise_text};

use super::markdown::escape;

/// Escaped HTML for `text`, its coloured parts in `<span class="ansi-…">`.
pub fn to_html(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for slice in categorise_text(text) {
        let classes = classes(&slice);
        if classes.is_empty() {
            out.push_str(&escape(slice.text));
        } else {
            out.push_str("<span class=\"");
            out.push_str(&classes.join(" "));
            out.push_str("\">");
            out.push_str(&escape(slice.text));
            out.push_str("</span>");
        }
    }
    out
}

/// `text` without its escape sequences.
pub fn strip(text: &str) -> String {
    categorise_text(text).iter().map(|s| s.text).collect()
}

fn classes(slice: &CategorisedSlice<'_>) -> Vec<String> {
    let mut classes = Vec::new();
    if let Some(fg) = slice.fg {
        classes.push(format!("ansi-{}", colour(fg)));
    }
    if let Some(bg) = slice.bg {
        classes.push(format!("ansi-bg-{}", colour(bg)));
    }
    if slice.intensity == Some(Intensity::Bold) {
        classes.push("ansi-bold".into());
    }
    if slice.underline == Some(true) {
        classes.push("ansi-underline".into());
    }
    classes
}

fn colour(colour: Color) -> &'static str {
    match colour {
        Color::Black | Color::BrightBlack => "black",
        Color::Red | Color::BrightRed => "red",
        Color::Green | Color::BrightGreen => "green",
        Color::Yellow | Color::BrightYellow => "yellow",
        Color::Blue | Color::BrightBlue => "blue",
        Color::Magenta | Color::BrightMagenta => "magenta",
        Color::Cyan | Color::BrightCyan => "cyan",
        Color::White | Color::BrightWhite => "white",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn colours_become_classes_and_text_is_escaped() {
        let traceback = "\u{1b}[0;31mZeroDivisionError\u{1b}[0m: division by <zero>";
        assert_eq!(
            to_html(traceback),
            "<span class=\"ansi-red\">ZeroDivisionError</span>: division by &lt;zero&gt;"
        );
        assert_eq!(strip(traceback), "ZeroDivisionError: division by <zero>");
    }

    #[test]
    fn plain_text_passes_through() {
        assert_eq!(to_html("a & b"), "a &amp; b");
        assert_eq!(strip("plain"), "plain");
    }
}
