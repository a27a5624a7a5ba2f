//! Syntax highlighting on the server, line by line as code streams in, so
//! that the browser bundle carries no highlighter. The markup is class-based
//! (`hl-keyword`, `hl-string`...) and themed by the style sheet.

use app::protocol::Highlight;
use syntect::html::{ClassStyle, line_tokens_to_classed_spans};
use syntect::parsing::{ParseState, ScopeStack, SyntaxReference, SyntaxSet};

const STYLE: ClassStyle = ClassStyle::SpacedPrefixed { prefix: "hl-" };

/// Longer lines are shown plain: a pathological line must not cost seconds.
const MAX_LINE_BYTES: usize = 4096;

/// The grammars, loaded once.
pub struct Highlighter {
    syntaxes: SyntaxSet,
}

impl Default for Highlighter {
    fn default() -> Self {
        Self::new()
    }
}

impl Highlighter {
    pub fn new() -> Self {
        Self {
            syntaxes: SyntaxSet::load_defaults_newlines(),
        }
    }

    /// A highlighter for one code cell in `language` (plain text when the
    /// language is unknown).
    pub fn cell(&self, language: &str) -> CellHighlighter<'_> {
        let token = match language {
            "javascript" => "js",
            "bash" => "sh",
            other => other,
        };
        let syntax = self
            .syntaxes
            .find_syntax_by_token(token)
            .unwrap_or_else(|| self.syntaxes.find_syntax_plain_text());
        CellHighlighter {
            syntaxes: &self.syntaxes,
            state: ParseState::new(syntax),
            scopes: ScopeStack::new(),
            syntax,
            pending: String::new(),
            upto: 0,
            open_spans: 0,
        }
    }
}

/// Highlights one cell's text as it arrives, a complete line at a time.
pub struct CellHighlighter<'a> {
    syntaxes: &'a SyntaxSet,
    syntax: &'a SyntaxReference,
    state: ParseState,
    scopes: ScopeStack,
    /// Text after the last complete line.
    pending: String,
    /// Bytes of the cell's text covered so far.
    upto: usize,
    open_spans: isize,
}

impl CellHighlighter<'_> {
    /// Takes more text; returns the markup for the lines it completed.
    pub fn push(&mut self, text: &str) -> Option<Highlight> {
        self.pending.push_str(text);
        let end = self.pending.rfind('\n')? + 1;
        let lines: String = self.pending.drain(..end).collect();
        let mut html = String::new();
        for line in lines.split_inclusive('\n') {
            html.push_str(&self.line(line));
        }
        self.upto += end;
        Some(Highlight {
            html,
            upto: self.upto,
        })
    }

    /// The markup for whatever is left, with every span closed.
    pub fn finish(&mut self) -> Option<Highlight> {
        let rest = std::mem::take(&mut self.pending);
        let mut html = if rest.is_empty() {
            String::new()
        } else {
            self.line(&rest)
        };
        for _ in 0..self.open_spans.max(0) {
            html.push_str("</span>");
        }
        self.open_spans = 0;
        self.upto += rest.len();
        (!html.is_empty()).then_some(Highlight {
            html,
            upto: self.upto,
        })
    }

    fn line(&mut self, line: &str) -> String {
        if line.len() <= MAX_LINE_BYTES
            && let Ok(ops) = self.state.parse_line(line, self.syntaxes)
            && let Ok((html, delta)) =
                line_tokens_to_classed_spans(line, &ops, STYLE, &mut self.scopes)
        {
            self.open_spans += delta;
            return html;
        }
        // Give up on markup for the rest of the cell, but keep the text.
        self.state = ParseState::new(self.syntax);
        app::render::markdown::escape(line)
    }
}

/// The whole of `code`, highlighted at once (for code that arrives complete).
pub fn highlight_all(highlighter: &Highlighter, language: &str, code: &str) -> Option<Highlight> {
    let mut cell = highlighter.cell(language);
    let head = cell.push(code);
    let tail = cell.finish();
    match (head, tail) {
        (Some(mut head), Some(tail)) => {
            head.html.push_str(&tail.html);
            head.upto = tail.upto;
            Some(head)
        }
        (head, tail) => head.or(tail),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text_of(html: &str) -> String {
        let mut text = String::new();
        let mut in_tag = false;
        for c in html.chars() {
            match c {
                '<' => in_tag = true,
                '>' => in_tag = false,
                c if !in_tag => text.push(c),
                _ => {}
            }
        }
        text.replace("&lt;", "<")
            .replace("&gt;", ">")
            .replace("&quot;", "\"")
            .replace("&#39;", "'")
            .replace("&amp;", "&")
    }

    #[test]
    fn python_gets_classes_and_keeps_its_text() {
        let highlighter = Highlighter::new();
        let code = "import math\nfor i in range(3):\n    print(f\"<{i}>\", math.pi)  # done";
        let html = highlight_all(&highlighter, "python", code).unwrap();
        assert_eq!(html.upto, code.len());
        assert!(html.html.contains("hl-keyword"), "{}", html.html);
        assert!(html.html.contains("hl-comment"), "{}", html.html);
        assert_eq!(text_of(&html.html), code);
        assert_eq!(
            html.html.matches("<span").count(),
            html.html.matches("</span>").count()
        );
    }

    #[test]
    fn streamed_pieces_add_up_to_the_whole() {
        let highlighter = Highlighter::new();
        let code = "s = '''a\nb'''\nx = [1,\n  2]\nprint(s, x)";
        let whole = highlight_all(&highlighter, "python", code).unwrap().html;
        let mut cell = highlighter.cell("python");
        let mut html = String::new();
        let mut upto = 0;
        for piece in code.as_bytes().chunks(3) {
            if let Some(h) = cell.push(std::str::from_utf8(piece).unwrap()) {
                assert!(h.upto > upto && code[..h.upto].ends_with('\n'));
                upto = h.upto;
                html.push_str(&h.html);
            }
        }
        html.push_str(&cell.finish().unwrap().html);
        assert_eq!(html, whole);
    }

    #[test]
    fn unknown_languages_and_hostile_text_stay_escaped() {
        let highlighter = Highlighter::new();
        let html = highlight_all(&highlighter, "cobol", "<script>alert(1)</script>").unwrap();
        assert!(!html.html.contains("<script"), "{}", html.html);
        for language in ["javascript", "bash", "c"] {
            let html = highlight_all(&highlighter, language, "x").unwrap();
            assert_eq!(text_of(&html.html), "x");
        }
    }
}
