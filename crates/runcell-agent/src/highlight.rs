//! Syntax highlighting on the server, line by line as code streams in, so
//! that the browser bundle carries no highlighter; and the same for the
//! terminal client. The markup is class-based
//! (`hl-keyword`, `hl-string`...) and themed by the style sheet.

use anstyle::{AnsiColor, Style};
use runcell_protocol::Highlight;
use syntect::easy::ScopeRangeIterator;
use syntect::html::{ClassStyle, line_tokens_to_classed_spans};
use syntect::parsing::{ParseState, Scope, ScopeStack, SyntaxReference, SyntaxSet};

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

    /// The grammar for `language` (plain text when it is unknown).
    fn syntax(&self, language: &str) -> &SyntaxReference {
        let token = match language {
            "javascript" => "js",
            // syntect's defaults have no TypeScript grammar: JavaScript's
            // reads it closely (annotations stay plain).
            "typescript" | "ts" => "js",
            "bash" => "sh",
            other => other,
        };
        self.syntaxes
            .find_syntax_by_token(token)
            .unwrap_or_else(|| self.syntaxes.find_syntax_plain_text())
    }

    /// A highlighter for one code cell in `language` (plain text when the
    /// language is unknown).
    pub fn cell(&self, language: &str) -> CellHighlighter<'_> {
        let syntax = self.syntax(language);
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
        runcell_protocol::render::markdown::escape(line)
    }
}

/// Highlights code for a terminal, a line at a time: the same grammars as
/// the page's, and the same rules as its style sheet (`.hl-*`), in the
/// terminal's own sixteen colours so that they suit its background.
pub struct TerminalHighlighter<'a> {
    syntaxes: &'a SyntaxSet,
    syntax: &'a SyntaxReference,
    state: ParseState,
    scopes: ScopeStack,
    rules: [(Scope, Style); 9],
}

impl Highlighter {
    /// A terminal highlighter for one program in `language`.
    pub fn terminal(&self, language: &str) -> TerminalHighlighter<'_> {
        let syntax = self.syntax(language);
        let rule = |scope: &str, style: Style| (Scope::new(scope).unwrap_or_default(), style);
        let colour = |c: AnsiColor| Style::new().fg_color(Some(c.into()));
        TerminalHighlighter {
            syntaxes: &self.syntaxes,
            syntax,
            state: ParseState::new(syntax),
            scopes: ScopeStack::new(),
            rules: [
                rule("comment", colour(AnsiColor::BrightBlack).italic()),
                rule("punctuation.definition.string", colour(AnsiColor::Green)),
                rule("string", colour(AnsiColor::Green)),
                rule("constant.numeric", colour(AnsiColor::Yellow)),
                rule("constant.language", colour(AnsiColor::Yellow)),
                rule("keyword", colour(AnsiColor::Magenta)),
                rule("storage", colour(AnsiColor::Magenta)),
                rule("entity.name", colour(AnsiColor::Blue)),
                rule("support", colour(AnsiColor::Cyan)),
            ],
        }
    }
}

impl TerminalHighlighter<'_> {
    /// One line (without its line break) as pieces of text and the style
    /// of each. A line the grammar cannot read, or an overlong one, is one
    /// plain piece, and the grammar starts again after it.
    pub fn line(&mut self, line: &str) -> Vec<(Style, String)> {
        let with_break = format!("{line}\n");
        if line.len() <= MAX_LINE_BYTES
            && let Ok(ops) = self.state.parse_line(&with_break, self.syntaxes)
        {
            let mut pieces: Vec<(Style, String)> = Vec::new();
            let mut whole = true;
            for (range, op) in ScopeRangeIterator::new(&ops, &with_break) {
                if self.scopes.apply(op).is_err() {
                    whole = false;
                    break;
                }
                let text = with_break
                    .get(range)
                    .unwrap_or_default()
                    .trim_end_matches('\n');
                if text.is_empty() {
                    continue;
                }
                let style = self.style();
                match pieces.last_mut() {
                    Some((last, so_far)) if *last == style => so_far.push_str(text),
                    _ => pieces.push((style, text.to_string())),
                }
            }
            if whole && pieces.iter().map(|(_, t)| t.len()).sum::<usize>() == line.len() {
                return pieces;
            }
        }
        self.state = ParseState::new(self.syntax);
        self.scopes = ScopeStack::new();
        vec![(Style::new(), line.to_string())]
    }

    /// The style of the innermost scope a rule names.
    fn style(&self) -> Style {
        for scope in self.scopes.as_slice().iter().rev() {
            if let Some((_, style)) = self
                .rules
                .iter()
                .find(|(rule, _)| rule.is_prefix_of(*scope))
            {
                return *style;
            }
        }
        Style::new()
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
    fn terminal_lines_keep_their_text_and_colour_like_the_page() {
        let highlighter = Highlighter::new();
        let mut cell = highlighter.terminal("python");
        let lines = ["import math", "s = '''a", "b'''  # c", "print(1.5, None)"];
        let pieces: Vec<_> = lines.iter().map(|line| cell.line(line)).collect();
        for (line, pieces) in lines.iter().zip(&pieces) {
            let text: String = pieces.iter().map(|(_, t)| t.as_str()).collect();
            assert_eq!(&text, line);
        }
        let style_of = |line: usize, text: &str| {
            pieces[line]
                .iter()
                .find(|(_, t)| t.contains(text))
                .map(|(s, _)| *s)
                .unwrap()
        };
        let magenta = Style::new().fg_color(Some(AnsiColor::Magenta.into()));
        let green = Style::new().fg_color(Some(AnsiColor::Green.into()));
        assert_eq!(style_of(0, "import"), magenta);
        // The string opened on the line before goes on.
        assert_eq!(style_of(2, "b"), green);
        assert!(
            style_of(2, "# c")
                .get_effects()
                .contains(anstyle::Effects::ITALIC)
        );
        assert_eq!(
            style_of(3, "1.5"),
            Style::new().fg_color(Some(AnsiColor::Yellow.into()))
        );
        let plain = highlighter.terminal("cobol").line("MOVE A TO B");
        assert_eq!(plain, vec![(Style::new(), "MOVE A TO B".to_string())]);
    }

    #[test]
    fn unknown_languages_and_hostile_text_stay_escaped() {
        let highlighter = Highlighter::new();
        let html = highlight_all(&highlighter, "cobol", "<script>alert(1)</script>").unwrap();
        assert!(!html.html.contains("<script"), "{}", html.html);
        for language in ["javascript", "typescript", "r", "java", "bash", "c"] {
            let html = highlight_all(&highlighter, language, "x").unwrap();
            assert_eq!(text_of(&html.html), "x");
            assert_ne!(
                highlighter.syntax(language).name,
                "Plain Text",
                "{language} has a grammar"
            );
        }
    }
}
