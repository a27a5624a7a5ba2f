//! Markdown for explanations and questions, rendered by the server only:
//! the page is sent each question's and explanation's markup with its
//! events ([`super::for_pages`]), so the page's bundle carries no markdown
//! parser (a tenth of it). The text is untrusted: raw HTML is shown as text,
//! images are reduced to their alt text (no requests to other sites), and
//! links keep only safe schemes. `$…$` and `$$…$$` are math, rendered as
//! MathML (so it shows with scripts off too), and a code block or a table
//! can be reached by the keyboard to scroll it.

#[cfg(feature = "server")]
use pulldown_cmark::{CowStr, Event, Options, Parser, Tag, TagEnd, html};

#[cfg(feature = "server")]
/// Safe HTML for `text`.
pub fn to_html(text: &str) -> String {
    render(text, false)
}

#[cfg(feature = "server")]
/// Safe HTML for what a person typed: markdown as for [`to_html`], with
/// each line break kept where they pressed Shift+Enter.
pub fn question_html(text: &str) -> String {
    render(text, true)
}

#[cfg(feature = "server")]
/// What a table is wrapped in: a focusable, labelled box it scrolls in.
const TABLE_BOX: &str =
    "<div class=\"md-table\" tabindex=\"0\" role=\"region\" aria-label=\"Table\">";

#[cfg(feature = "server")]
fn render(text: &str, keep_lines: bool) -> String {
    let options = Options::ENABLE_TABLES | Options::ENABLE_STRIKETHROUGH | Options::ENABLE_MATH;
    let events = Parser::new_ext(text, options)
        .into_offset_iter()
        .filter_map(|(event, at)| match event {
            // "$5-$10": money, not math (a closing `$` right before a digit
            // does not close a formula, as in pandoc).
            Event::InlineMath(_) if text[at.end..].starts_with(|c: char| c.is_ascii_digit()) => {
                Some(Event::Text(CowStr::from(text[at].to_string())))
            }
            Event::InlineMath(tex) => Some(Event::InlineHtml(math(&tex, false).into())),
            Event::DisplayMath(tex) => Some(Event::Html(math(&tex, true).into())),
            // A block that scrolls sideways takes the keyboard's focus, so that
            // its long lines can be read without a mouse.
            Event::Start(Tag::CodeBlock(kind)) => {
                let language = match &kind {
                    pulldown_cmark::CodeBlockKind::Fenced(info) => info
                        .split_whitespace()
                        .next()
                        .unwrap_or_default()
                        .to_string(),
                    pulldown_cmark::CodeBlockKind::Indented => String::new(),
                };
                let class = if language.is_empty() {
                    String::new()
                } else {
                    format!(" class=\"language-{}\"", escape(&language))
                };
                Some(Event::Html(CowStr::from(format!(
                    "<pre tabindex=\"0\"><code{class}>"
                ))))
            }
            Event::SoftBreak if keep_lines => Some(Event::HardBreak),
            Event::Html(raw) | Event::InlineHtml(raw) => Some(Event::Text(raw)),
            Event::Start(Tag::Image { .. }) | Event::End(TagEnd::Image) => None,
            Event::Start(Tag::Link {
                link_type,
                dest_url,
                title,
                id,
            }) => Some(Event::Start(Tag::Link {
                link_type,
                dest_url: if safe_url(&dest_url) {
                    dest_url
                } else {
                    "".into()
                },
                title,
                id,
            })),
            other => Some(other),
        })
        // A table scrolls sideways in a box of its own that the keyboard
        // can reach (the same as a code block), named for screen readers.
        .flat_map(|event| match event {
            Event::Start(Tag::Table(_)) => [Some(Event::Html(TABLE_BOX.into())), Some(event)],
            Event::End(TagEnd::Table) => [Some(event), Some(Event::Html("</div>\n".into()))],
            event => [Some(event), None],
        })
        .flatten();
    let mut out = String::with_capacity(text.len() * 3 / 2);
    html::push_html(&mut out, events);
    out
}

/// The most characters of one formula rendered; longer ones stay as text.
#[cfg(feature = "server")]
const MAX_MATH_CHARS: usize = 4_000;

/// An explanation's whole markup with its math as MathML, for the server to
/// send with a finished cell (the page cannot render math itself); `None`
/// when it holds no formula.
#[cfg(feature = "server")]
pub fn rendered_with_math(text: &str) -> Option<crate::Highlight> {
    let options = Options::ENABLE_MATH;
    let has_math = Parser::new_ext(text, options)
        .any(|e| matches!(e, Event::InlineMath(_) | Event::DisplayMath(_)));
    has_math.then(|| crate::Highlight {
        html: to_html(text),
        upto: text.len(),
    })
}

/// MathML for a formula (`display`: a block of its own); a formula that
/// cannot be read shows as its text, in the error colour.
#[cfg(feature = "server")]
fn math(tex: &str, display: bool) -> String {
    use pulldown_latex::config::DisplayMode;
    use pulldown_latex::{Parser, RenderConfig, Storage, push_mathml};
    if tex.chars().count() > MAX_MATH_CHARS {
        return format!("<code>{}</code>", escape(tex));
    }
    let storage = Storage::new();
    let config = RenderConfig {
        display_mode: if display {
            DisplayMode::Block
        } else {
            DisplayMode::Inline
        },
        ..RenderConfig::default()
    };
    let mut out = String::new();
    match push_mathml(&mut out, Parser::new(tex, &storage), config) {
        // A formula it could not read shows as it was written, not as the
        // parser's report.
        Ok(()) if !out.contains("<merror") => out,
        _ => format!("<code class=\"math-source\">{}</code>", escape(tex)),
    }
}

#[cfg(feature = "server")]
/// Web links, mail links, fragments and relative paths; nothing that runs.
fn safe_url(url: &str) -> bool {
    let lower = url.trim().to_ascii_lowercase();
    match lower.find(':') {
        None => true,
        Some(colon) => {
            // A colon after a path separator is not a scheme.
            lower[..colon].contains(['/', '?', '#'])
                || ["http", "https", "mailto"].contains(&&lower[..colon])
        }
    }
}

/// The MIME key a markdown output's markup travels under to a page, beside
/// its `text/markdown` (the page never renders markdown itself).
pub const MARKDOWN_MARKUP: &str = "text/x-runcell-markdown-html";

/// What a page shows for markdown: the server's `markup` for the text it
/// covers, then the `rest` it does not cover yet (or at all: a question
/// stored before pages were sent markup) as text, its lines kept.
pub fn shown(markup: &str, rest: &str) -> String {
    if rest.is_empty() {
        markup.to_string()
    } else {
        format!("{markup}<p class=\"as-typed\">{}</p>", escape(rest))
    }
}

/// Escapes text for use inside HTML elements and attributes.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(all(test, feature = "server"))]
mod tests {
    use super::*;

    #[test]
    fn markdown_renders() {
        assert_eq!(
            to_html("The answer is **3**.\n\n- a\n- b"),
            "<p>The answer is <strong>3</strong>.</p>\n<ul>\n<li>a</li>\n<li>b</li>\n</ul>\n"
        );
        assert!(to_html("`x = 1`").contains("<code>x = 1</code>"));
    }

    #[test]
    fn a_table_scrolls_in_a_box_the_keyboard_reaches() {
        assert_eq!(
            to_html("| region | sales |\n|---|--:|\n| North | 13,406.38 |"),
            "<div class=\"md-table\" tabindex=\"0\" role=\"region\" aria-label=\"Table\">\
             <table><thead><tr><th>region</th><th style=\"text-align: right\">sales</th></tr></thead><tbody>\n\
             <tr><td>North</td><td style=\"text-align: right\">13,406.38</td></tr>\n\
             </tbody></table>\n</div>\n"
        );
    }

    #[test]
    fn hostile_markdown_is_defused() {
        for (input, forbidden) in [
            ("<script>alert(1)</script>", "<script"),
            ("hi <img src=x onerror=alert(1)>", "<img"),
            ("[x](javascript:alert(1))", "javascript:"),
            ("[x](JavaScript:alert(1))", "avascript:"),
            ("[x](data:text/html,hi)", "data:"),
            ("![pixel](https://tracker.example/p.png)", "tracker"),
        ] {
            let html = to_html(input);
            assert!(!html.contains(forbidden), "{input:?} gave {html:?}");
        }
        assert!(
            to_html("[docs](https://docs.python.org/3/)")
                .contains("href=\"https://docs.python.org/3/\"")
        );
        assert!(to_html("[a](#b) [c](d/e:f)").contains("href=\"d/e:f\""));
    }

    #[cfg(feature = "server")]
    #[test]
    fn math_is_mathml_and_dollars_of_money_are_not_math() {
        let html =
            to_html("The area is $\\pi r^2$, and\n\n$$\\sum_{i=1}^n i = \\frac{n(n+1)}{2}$$");
        assert!(html.contains("<math"), "{html}");
        assert!(html.contains("display=\"block\""), "{html}");
        assert!(html.contains("<mfrac>"), "{html}");
        for money in [
            "Revenue went from $1,200 to $980.",
            "It costs $5 and $10.",
            "between $5-$10 a unit",
        ] {
            let html = to_html(money);
            assert!(!html.contains("<math"), "{money:?} gave {html}");
        }
        // Code blocks can be scrolled from the keyboard.
        assert!(
            question_html("```python\nprint(1)\n```")
                .contains("<pre tabindex=\"0\"><code class=\"language-python\">")
        );
    }

    #[cfg(feature = "server")]
    #[test]
    fn hostile_math_is_defused() {
        for input in [
            "$\\text{<img src=x onerror=alert(1)>}$",
            "$$\\text{</math><script>alert(1)</script>}$$",
            "$\\href{javascript:alert(1)}{x}$",
            "$\\unknowncommand{<b>}$",
            "$\\frac{$",
        ] {
            let html = to_html(input);
            assert!(!html.contains("<img"), "{input:?} gave {html:?}");
            assert!(!html.contains("<script"), "{input:?} gave {html:?}");
            assert!(!html.contains("<b>"), "{input:?} gave {html:?}");
            assert!(!html.contains("href="), "{input:?} gave {html:?}");
        }
    }

    proptest::proptest! {
        #[test]
        fn any_formula_renders_without_panicking(tex in "\\PC{0,80}") {
            let _ = to_html(&format!("${tex}$ and $${tex}$$"));
        }

        #[test]
        fn tex_like_formulas_render_without_panicking(
            tex in "(\\\\(frac|sqrt|sum|int|text|mathbb|mathcal|left|right|begin|end|operatorname|over|color)|[{}^_a-zA-Z0-9 ()\\[\\]|&=+-]){0,40}"
        ) {
            let _ = to_html(&format!("$${tex}$$"));
        }
    }

    #[test]
    fn escaping_covers_markup_characters() {
        assert_eq!(
            escape("<a href=\"x\">'&'</a>"),
            "&lt;a href=&quot;x&quot;&gt;&#39;&amp;&#39;&lt;/a&gt;"
        );
    }
}
