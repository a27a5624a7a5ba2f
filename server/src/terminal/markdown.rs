//! An explanation's markdown drawn for a terminal: paragraphs wrapped to
//! the panel, bold and italic as such (when colours are on), inline code
//! and code blocks set apart, lists with their bullets or numbers, links
//! with their address. Parsed by pulldown-cmark, as the page's is.

use anstyle::{AnsiColor, Style};
use pulldown_cmark::{Event, Options, Parser, Tag, TagEnd};
use unicode_width::UnicodeWidthStr;

use super::look::{Look, clean, columns, wrap};

/// `markdown` as lines of at most `width` columns (escape sequences aside),
/// painted when `look` has colours.
pub fn render(markdown: &str, look: &Look, width: usize) -> Vec<String> {
    let mut out = Writer {
        look,
        width: width.max(8),
        lines: Vec::new(),
        pieces: Vec::new(),
        styles: vec![Style::new()],
        lists: Vec::new(),
        bullet: None,
        quotes: 0,
        code: None,
        links: Vec::new(),
        cell: 0,
    };
    let options =
        Options::ENABLE_TABLES | Options::ENABLE_STRIKETHROUGH | Options::ENABLE_TASKLISTS;
    // Cleaned whole, before the parser cuts an escape sequence in two.
    let markdown = clean(markdown);
    for event in Parser::new_ext(&markdown, options) {
        out.event(event);
    }
    out.flush();
    while out.lines.last().is_some_and(String::is_empty) {
        out.lines.pop();
    }
    out.lines
}

struct Writer<'a> {
    look: &'a Look,
    width: usize,
    lines: Vec<String>,
    /// The block being gathered: text and its style.
    pieces: Vec<(Style, String)>,
    styles: Vec<Style>,
    /// Open lists: the next number, or `None` for bullets.
    lists: Vec<Option<u64>>,
    /// The bullet the next line of an item starts with.
    bullet: Option<String>,
    quotes: usize,
    /// A code block's text, while in one.
    code: Option<String>,
    links: Vec<String>,
    /// Cells so far in a table row.
    cell: usize,
}

fn code_style() -> Style {
    Style::new().fg_color(Some(AnsiColor::Cyan.into()))
}

fn dim() -> Style {
    Style::new().dimmed()
}

impl Writer<'_> {
    fn style(&self) -> Style {
        self.styles.last().copied().unwrap_or_default()
    }

    fn push_style(&mut self, change: impl Fn(Style) -> Style) {
        let style = change(self.style());
        self.styles.push(style);
    }

    fn pop_style(&mut self) {
        if self.styles.len() > 1 {
            self.styles.pop();
        }
    }

    fn text(&mut self, style: Style, text: &str) {
        self.pieces.push((style, clean(text).replace('\n', " ")));
    }

    fn blank(&mut self) {
        if self.lines.last().is_some_and(|l| !l.is_empty()) && self.lists.is_empty() {
            self.lines.push(String::new());
        }
    }

    fn indent(&self) -> String {
        let mut indent = "│ ".repeat(self.quotes);
        indent.push_str(&"  ".repeat(self.lists.len().saturating_sub(1)));
        indent
    }

    fn event(&mut self, event: Event<'_>) {
        if let Some(code) = &mut self.code {
            match event {
                Event::Text(text) => code.push_str(&text),
                Event::End(TagEnd::CodeBlock) => self.code_block(),
                _ => {}
            }
            return;
        }
        match event {
            Event::Start(tag) => self.start(tag),
            Event::End(tag) => self.end(tag),
            Event::Text(text) => self.text(self.style(), &text),
            Event::Code(text) => self.text(code_style(), &text),
            Event::InlineMath(text) | Event::DisplayMath(text) => {
                self.text(code_style(), &text);
            }
            Event::Html(text) | Event::InlineHtml(text) => self.text(self.style(), &text),
            Event::SoftBreak => self.pieces.push((Style::new(), " ".into())),
            Event::HardBreak => self.flush(),
            Event::Rule => {
                self.flush();
                let rule = "─".repeat(self.width.min(40));
                self.lines.push(self.look.paint(dim(), &rule));
                self.lines.push(String::new());
            }
            Event::TaskListMarker(done) => {
                self.text(Style::new(), if done { "[x] " } else { "[ ] " });
            }
            Event::FootnoteReference(name) => self.text(dim(), &format!("[{name}]")),
        }
    }

    fn start(&mut self, tag: Tag<'_>) {
        match tag {
            Tag::Heading { .. } => {
                self.flush();
                self.push_style(|s| s.bold().underline());
            }
            Tag::Emphasis => self.push_style(Style::italic),
            Tag::Strong => self.push_style(Style::bold),
            Tag::Strikethrough => self.push_style(Style::strikethrough),
            Tag::Link { dest_url, .. } => self.links.push(dest_url.to_string()),
            Tag::List(start) => {
                self.flush();
                self.lists.push(start);
            }
            Tag::Item => {
                self.flush();
                let bullet = match self.lists.last_mut() {
                    Some(Some(n)) => {
                        *n += 1;
                        format!("{}. ", *n - 1)
                    }
                    _ => "• ".to_string(),
                };
                self.bullet = Some(bullet);
            }
            Tag::BlockQuote(_) => {
                self.flush();
                self.quotes += 1;
            }
            Tag::CodeBlock(_) => {
                self.flush();
                self.code = Some(String::new());
            }
            Tag::TableRow | Tag::TableHead => {
                self.flush();
                self.cell = 0;
            }
            Tag::TableCell => {
                if self.cell > 0 {
                    self.pieces.push((dim(), " │ ".into()));
                }
                self.cell += 1;
            }
            _ => {}
        }
    }

    fn end(&mut self, tag: TagEnd) {
        match tag {
            TagEnd::Paragraph => {
                self.flush();
                self.blank();
            }
            TagEnd::Heading(_) => {
                self.flush();
                self.pop_style();
                self.blank();
            }
            TagEnd::Emphasis | TagEnd::Strong | TagEnd::Strikethrough => self.pop_style(),
            TagEnd::Link => {
                if let Some(url) = self.links.pop() {
                    let shown: String = self.pieces.iter().map(|(_, t)| t.as_str()).collect();
                    if !url.is_empty() && !shown.ends_with(url.as_str()) {
                        self.text(dim(), &format!(" <{url}>"));
                    }
                }
            }
            TagEnd::List(_) => {
                self.flush();
                self.lists.pop();
                self.blank();
            }
            TagEnd::Item => self.flush(),
            TagEnd::BlockQuote(_) => {
                self.flush();
                self.quotes = self.quotes.saturating_sub(1);
                self.blank();
            }
            TagEnd::TableHead | TagEnd::TableRow => self.flush(),
            TagEnd::Table => {
                self.flush();
                self.blank();
            }
            _ => {}
        }
    }

    fn code_block(&mut self) {
        let code = self.code.take().unwrap_or_default();
        let indent = format!("{}    ", self.indent());
        let room = self.width.saturating_sub(indent.width()).max(1);
        for line in clean(&code).trim_end_matches('\n').split('\n') {
            for piece in wrap(line, room) {
                let painted = self.look.paint(code_style(), &piece);
                self.lines.push(format!("{indent}{painted}"));
            }
        }
        self.blank();
    }

    /// Wraps the gathered block into lines.
    fn flush(&mut self) {
        let pieces = std::mem::take(&mut self.pieces);
        if pieces.iter().all(|(_, t)| t.trim().is_empty()) {
            return;
        }
        let indent = self.indent();
        let bullet = self.bullet.take().unwrap_or_default();
        let first = format!("{indent}{bullet}");
        let rest = format!("{indent}{}", " ".repeat(bullet.width()));
        let room = self.width.saturating_sub(first.width()).max(1);
        let mut line = String::new();
        let mut used = 0;
        let mut lines: Vec<String> = Vec::new();
        let words = pieces
            .iter()
            .flat_map(|(style, text)| split_words(text).into_iter().map(move |w| (*style, w)));
        for (style, word) in words {
            let w = columns(&word);
            let space = word.trim().is_empty();
            if used + w > room && used > 0 {
                lines.push(std::mem::take(&mut line));
                used = 0;
                if space {
                    continue;
                }
            }
            if w > room {
                for piece in wrap(&word, room) {
                    if used > 0 {
                        lines.push(std::mem::take(&mut line));
                    }
                    used = columns(&piece);
                    line.push_str(&self.look.paint(style, &piece));
                }
                continue;
            }
            if used == 0 && space {
                continue;
            }
            line.push_str(&self.look.paint(style, &word));
            used += w;
        }
        if !line.is_empty() {
            lines.push(line);
        }
        for (i, line) in lines.into_iter().enumerate() {
            let prefix = if i == 0 { &first } else { &rest };
            self.lines.push(format!("{prefix}{}", line.trim_end()));
        }
    }
}

/// Words and the spaces between them, in order.
fn split_words(text: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut word = String::new();
    let mut in_space = false;
    for c in text.chars() {
        let space = c == ' ';
        if space != in_space && !word.is_empty() {
            words.push(std::mem::take(&mut word));
        }
        in_space = space;
        word.push(c);
    }
    if !word.is_empty() {
        words.push(word);
    }
    words
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plain(markdown: &str, width: usize) -> Vec<String> {
        render(markdown, &Look::PLAIN, width)
    }

    #[test]
    fn paragraphs_wrap_to_the_width_and_keep_their_words() {
        let lines = plain(
            "The **North** region has the largest total, `5,200.25`, ahead of the South.\n\nSecond.",
            30,
        );
        assert!(lines.iter().all(|l| l.width() <= 30), "{lines:?}");
        assert_eq!(
            lines
                .join(" ")
                .split_whitespace()
                .collect::<Vec<_>>()
                .join(" "),
            "The North region has the largest total, 5,200.25, ahead of the South. Second."
        );
        assert!(
            lines.contains(&String::new()),
            "paragraphs apart: {lines:?}"
        );
    }

    #[test]
    fn lists_code_and_links_read_as_text() {
        let lines = plain(
            "1. first\n2. second item\n\n- a [link](http://x.test/y)\n\n```python\nprint(1)\n```\n",
            40,
        );
        assert_eq!(lines[0], "1. first");
        assert_eq!(lines[1], "2. second item");
        assert!(
            lines.iter().any(|l| l == "• a link <http://x.test/y>"),
            "{lines:?}"
        );
        assert!(lines.iter().any(|l| l == "    print(1)"), "{lines:?}");
    }

    #[test]
    fn styles_only_with_colour_and_nothing_hostile_passes() {
        let look = Look {
            colour: true,
            ..Look::PLAIN
        };
        let lines = render("**bold** \u{1b}]52;c;eA==\u{7}x", &look, 40);
        assert!(lines[0].contains("\u{1b}[1m"), "{lines:?}");
        assert!(!lines[0].contains("]52"), "{lines:?}");
        assert!(!plain("**bold**", 40)[0].contains('\u{1b}'));
    }

    #[test]
    fn a_long_word_is_cut() {
        let lines = plain(&"x".repeat(25), 10);
        assert_eq!(lines, vec!["x".repeat(10), "x".repeat(10), "x".repeat(5)]);
    }
}
