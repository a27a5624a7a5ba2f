//! Markdown for explanations and questions, rendered the same on the server
//! and in the browser. The text is untrusted: raw HTML is shown as text,
//! images are reduced to their alt text (no requests to other sites), and
//! links keep only safe schemes.

use pulldown_cmark::{Event, Options, Parser, Tag, TagEnd, html};

/// Safe HTML for `text`.
pub fn to_html(text: &str) -> String {
    render(text, false)
}

/// Safe HTML for what a person typed: markdown as for [`to_html`], with
/// each line break kept where they pressed Shift+Enter.
pub fn question_html(text: &str) -> String {
    render(text, true)
}

fn render(text: &str, keep_lines: bool) -> String {
    let options = Options::ENABLE_TABLES | Options::ENABLE_STRIKETHROUGH;
    let events = Parser::new_ext(text, options).filter_map(|event| match event {
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
    });
    let mut out = String::with_capacity(text.len() * 3 / 2);
    html::push_html(&mut out, events);
    out
}

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

#[cfg(test)]
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

    #[test]
    fn escaping_covers_markup_characters() {
        assert_eq!(
            escape("<a href=\"x\">'&'</a>"),
            "&lt;a href=&quot;x&quot;&gt;&#39;&amp;&#39;&lt;/a&gt;"
        );
    }
}
