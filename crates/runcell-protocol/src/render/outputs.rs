//! A result cell's outputs as HTML: what the program printed, showed or
//! wrote, each in the richest form a page can show safely. The server
//! renders a page's first view with these, and the page renders the
//! outputs that stream in with the same functions, so a result is static
//! markup on both sides; the page's controls in it (Show all, Download
//! PNG, a table's sort, filter, Copy and CSV, a chart's frame) are wired
//! by the page's output controller through the `class` and `data-` names
//! written here.

use super::ansi;
use super::markdown::{self, escape};
use super::png::png_size;
use super::sizes::human_size;
use super::table_markup::table_html;
use crate::{Output, chart_of};

/// Where an output is shown, which its markup names.
pub struct Place<'a> {
    /// The result cell's name (figure and table files are named by it).
    pub cell: &'a str,
    /// The question the result answers: what a figure is of, in words.
    pub question: &'a str,
    /// The page's colour scheme (`light dark`, `light`, `dark`), for an
    /// HTML output's frame.
    pub scheme: &'a str,
    /// Where a file the program wrote downloads from, if this page offers
    /// it (a share link offers only what its owner shared).
    pub file_href: &'a dyn Fn(&str) -> Option<String>,
}

/// What an HTML output's frame may load: nothing from another origin, and
/// nothing over the network at all (no image, font, style sheet, script or
/// connection), so that showing a result (also to a share link's readers)
/// never tells another site who is reading it. Inline styles and `data:`
/// images and fonts still show; the frame's `sandbox` runs no script.
pub const OUTPUT_FRAME_POLICY: &str = "default-src 'none'; img-src data: blob:; \
     style-src 'unsafe-inline'; font-src data:; media-src data: blob:; \
     connect-src 'none'; form-action 'none'; base-uri 'none'";

/// How an HTML output reads in the page's theme (its colour scheme is set
/// before this): the page's fonts, and tables with lines between rows (an
/// output's own styles come after, and win).
const OUTPUT_FRAME_STYLE: &str = "<style>:root{font:14px/1.45 system-ui,sans-serif}\
     body{margin:0.5rem}table{border-collapse:collapse;font-size:13px}\
     th,td{padding:0.25rem 0.6rem;border:0;border-bottom:1px solid #8886;text-align:right}\
     thead th{border-bottom-width:2px}</style>";

/// An HTML output as its frame's document in the colour scheme `scheme`:
/// the policy in a head of its own, before any of the output's markup (a
/// `<meta>` policy governs only what comes after it, and only in the head;
/// a later policy can only narrow it).
pub fn output_document(html: &str, scheme: &str) -> String {
    format!(
        "<html><head><meta http-equiv=\"Content-Security-Policy\" content=\"{OUTPUT_FRAME_POLICY}\">\
         <meta name=\"color-scheme\" content=\"{scheme}\"><style>:root{{color-scheme:{scheme}}}</style>\
         {OUTPUT_FRAME_STYLE}</head><body>{html}</body></html>"
    )
}

/// How much of a long stream a cell shows: its end (what a program printed
/// last), so that a page stays quick however much is printed; Download and
/// Copy output have it all.
const SHOWN_MAX: usize = 64 * 1024;

/// The end of `text` to show (from a line's start), and a note saying what
/// was left out, if anything was.
fn shown_tail(text: &str) -> (Option<String>, &str) {
    if text.len() <= SHOWN_MAX {
        return (None, text);
    }
    let mut start = text.len() - SHOWN_MAX;
    while !text.is_char_boundary(start) {
        start += 1;
    }
    if let Some(newline) = text[start..].find('\n') {
        start += newline + 1;
    }
    let lines = text[..start].matches('\n').count();
    (
        Some(format!(
            "… {lines} earlier lines not shown: Download or Copy output has all of it."
        )),
        &text[start..],
    )
}

/// Streams longer than this show in a box of their own height (scrolled
/// inside), until "Show all" lets them take the page's.
pub const CAPPED_LINES: usize = 30;

/// The error a sandbox reports for a run that Stop ended
/// (`sandbox::limit_error::CANCELLED` on the server).
const STOPPED_ERROR: &str = "Cancelled";

/// A stream (`stdout` or `stderr`), its end if it is long, capped to a box
/// of its own with a "Show all" toggle past [`CAPPED_LINES`] lines.
fn stream_html(text: &str, kind: &str, label: &str) -> String {
    let (left_out, shown) = shown_tail(text);
    let lines = shown.lines().count();
    let mut out = left_out
        .map(|note| format!("<p class=\"out-left-out\">{}</p>", escape(&note)))
        .unwrap_or_default();
    let capped = lines > CAPPED_LINES;
    if capped {
        out.push_str(&format!(
            "<pre class=\"out out-{kind} capped\" tabindex=\"0\" aria-label=\"{label}\">"
        ));
    } else {
        out.push_str(&format!("<pre class=\"out out-{kind}\">"));
    }
    out.push_str(&ansi::to_html(shown));
    out.push_str("</pre>");
    if capped {
        // Scripts only: without them the box scrolls, and Download has it all.
        out.push_str(&format!(
            "<button type=\"button\" class=\"button show-all js-only\" aria-expanded=\"false\" data-lines=\"{lines}\" data-label=\"{label}\">Show all {lines} lines</button>"
        ));
    }
    out
}

/// `<img>`'s attributes for a figure: its source, text alternative and
/// size when known (it keeps its room before it loads).
fn image_tag(src: &str, alt: &str, size: Option<(u32, u32)>) -> String {
    let size = size
        .map(|(w, h)| format!(" width=\"{w}\" height=\"{h}\""))
        .unwrap_or_default();
    format!(
        "<img src=\"{}\" alt=\"{}\"{size}>",
        escape(src),
        escape(alt)
    )
}

/// The `index`th output of a result cell, in the richest form the page can
/// show safely.
pub fn output_html(output: &Output, index: usize, place: &Place) -> String {
    let figure_file = || format!("figure-{}-{}.png", place.cell, index + 1);
    match output {
        Output::Stdout { text } => stream_html(text, "stdout", "Output, scrollable"),
        Output::Stderr { text } => stream_html(text, "stderr", "Errors, scrollable"),
        // Stopped by the person (Stop): said plainly, not as a failure.
        Output::Error { name, .. } if name == STOPPED_ERROR => {
            "<p class=\"out out-stopped\">Stopped.</p>".to_string()
        }
        Output::Error {
            name,
            value,
            traceback,
        } => {
            let text = if traceback.is_empty() {
                format!("{name}: {value}")
            } else {
                traceback.join("\n")
            };
            format!(
                "<pre class=\"out out-error\">{}</pre>",
                ansi::to_html(&text)
            )
        }
        Output::File { path, name, size } => file_html(path, name, *size, place),
        Output::Package { .. } => match package_said(output) {
            Some((line, true)) => format!(
                "<p class=\"out out-package out-package-refused\" role=\"status\">{}</p>",
                escape(&line)
            ),
            Some((line, false)) => format!("<p class=\"out out-package\">{}</p>", escape(&line)),
            None => String::new(),
        },
        Output::Table { table, .. } => table_html(table, place.cell, index),
        // The page names the figure by its address: a plain link downloads
        // it, with or without scripts.
        Output::Image {
            url,
            text,
            width,
            height,
        } => format!(
            "<figure class=\"out out-image\">{}<figcaption><a class=\"button\" href=\"{}\" download=\"{}\">Download PNG</a></figcaption></figure>",
            image_tag(url, &figure_alt(text, place.question), width.zip(*height)),
            escape(url),
            escape(&figure_file()),
        ),
        Output::Rich { data, .. } => {
            let plain = data.get("text/plain").map_or("", String::as_str);
            if let Some((kind, _)) = chart_of(data) {
                chart_html(kind, data.get("image/png"), plain, index)
            } else if let Some(png) = data.get("image/png") {
                // The bytes are in the page once, in the image: Download
                // saves them from there (without scripts, the browser's own
                // "Save image" does).
                format!(
                    "<figure class=\"out out-image\">{}<figcaption class=\"js-only\"><button type=\"button\" class=\"button save-figure\" data-file=\"{}\">Download PNG</button></figcaption></figure>",
                    image_tag(
                        &format!("data:image/png;base64,{}", png.trim()),
                        &figure_alt(plain, place.question),
                        png_size(png)
                    ),
                    escape(&figure_file()),
                )
            } else if let Some(svg) = data.get("image/svg+xml") {
                // As an image, an SVG's scripts do not run.
                format!(
                    "<figure class=\"out out-image\">{}</figure>",
                    image_tag(&data_url("image/svg+xml", svg.as_bytes()), "A figure", None)
                )
            } else if let Some(html) = data.get("text/html") {
                // No scripts, no same origin: the frame can only show
                // markup, and its policy lets it load nothing from
                // elsewhere. It follows the page's theme switch.
                format!(
                    "<iframe class=\"out out-html\" sandbox=\"\" data-output=\"{index}\" data-scheme=\"{}\" srcdoc=\"{}\" title=\"HTML output\"></iframe>",
                    escape(place.scheme),
                    escape(&output_document(html, place.scheme)),
                )
            } else if let Some(md) = data.get("text/markdown") {
                // Its markup comes from the server with the output.
                let html = data
                    .get(markdown::MARKDOWN_MARKUP)
                    .cloned()
                    .unwrap_or_else(|| markdown::shown("", md));
                format!("<div class=\"out markdown\">{html}</div>")
            } else {
                format!(
                    "<pre class=\"out out-value\">{}</pre>",
                    ansi::to_html(plain)
                )
            }
        }
    }
}

/// Every output of a result cell, in order.
pub fn outputs_html(outputs: &[Output], place: &Place) -> String {
    outputs
        .iter()
        .enumerate()
        .map(|(index, output)| output_html(output, index, place))
        .collect()
}

/// An interactive chart (Plotly, Vega-Lite): drawn in a frame of its own
/// (`/chart-frame.html`, sandboxed with an opaque origin, loading its
/// libraries from this site alone), which the page's controller hands the
/// chart's JSON. Without JavaScript: the PNG the bundle carries, if any,
/// else its text.
fn chart_html(kind: &str, png: Option<&String>, text: &str, index: usize) -> String {
    let fallback = match png {
        Some(png) => format!(
            "<img class=\"no-js-only\" src=\"data:image/png;base64,{}\" alt=\"{}\">",
            escape(png.trim()),
            escape(text)
        ),
        None => format!(
            "<pre class=\"out out-value no-js-only\">{}\n(an interactive chart: it needs JavaScript)</pre>",
            escape(text)
        ),
    };
    format!(
        "<figure class=\"out out-chart\" data-output=\"{index}\" data-kind=\"{kind}\"><iframe class=\"js-only\" src=\"/chart-frame.html\" sandbox=\"allow-scripts\" title=\"Interactive chart\" style=\"height: 460px\"></iframe>{fallback}</figure>"
    )
}

/// What a chart's frame is handed: the kind, the chart's JSON text (as
/// text, exactly as the program made it) and the page's theme.
pub fn chart_message(kind: &str, spec: &str, theme: &str) -> String {
    serde_json::json!({ "kind": kind, "spec": spec, "theme": theme }).to_string()
}

/// A file the program wrote: a download link (and a preview of an image)
/// where the page offers it, else only its name.
fn file_html(path: &str, name: &str, size: u64, place: &Place) -> String {
    let size = human_size(size);
    let Some(href) = (place.file_href)(path) else {
        return format!(
            "<p class=\"out out-file\">{}</p>",
            escape(&format!("wrote {name} ({size}), not shared"))
        );
    };
    let image = [".png", ".jpg", ".jpeg", ".gif", ".webp"]
        .iter()
        .any(|e| name.to_ascii_lowercase().ends_with(e));
    let preview = if image {
        format!(
            "<img src=\"{}\" alt=\"{}\" loading=\"lazy\">",
            escape(&href),
            escape(name)
        )
    } else {
        String::new()
    };
    format!(
        "<figure class=\"out out-file\">{preview}<figcaption>wrote <a class=\"button\" href=\"{}\" download=\"{}\">{}</a></figcaption></figure>",
        escape(&href),
        escape(name),
        escape(&format!("{name} ({size})")),
    )
}

/// A `data:` URL of `bytes`.
pub fn data_url(mime: &str, bytes: &[u8]) -> String {
    use base64::Engine;
    use base64::engine::general_purpose::STANDARD as BASE64;
    format!("data:{mime};base64,{}", BASE64.encode(bytes))
}

/// What a result cell says of a package output, and whether the index
/// refused it; `None` for any other output.
pub fn package_said(output: &Output) -> Option<(String, bool)> {
    match output {
        Output::Package {
            project,
            refused: Some(why),
            ..
        } => Some((package_refused_line(project, why), true)),
        Output::Package {
            project,
            version,
            size,
            cached,
            refused: None,
        } => Some((package_line(project, version, *size, *cached), false)),
        _ => None,
    }
}

/// What a result cell says of a package file runcell's index handed to
/// the program: `Installed numpy 2.1.0 (16.1 MB, from runcell's package
/// index, cached)`.
pub fn package_line(project: &str, version: &str, size: u64, cached: bool) -> String {
    let name = if version.is_empty() {
        project.to_string()
    } else {
        format!("{project} {version}")
    };
    let origin = if cached {
        "from runcell's package index, cached"
    } else {
        "from runcell's package index"
    };
    if size == 0 {
        format!("Installed {name} ({origin})")
    } else {
        format!("Installed {name} ({}, {origin})", human_size(size))
    }
}

/// What a result cell says of a package file runcell's index would not
/// serve: `Not installed: torch. Larger than the index's 200 MiB limit.`
pub fn package_refused_line(project: &str, why: &str) -> String {
    let why = why.trim();
    if why.is_empty() {
        format!("Not installed: {project}.")
    } else {
        format!("Not installed: {project}. {why}")
    }
}

/// The longest question quoted in a figure's text alternative, in chars.
const ALT_QUESTION_CHARS: usize = 150;

/// A figure's text alternative: what its `text/plain` form says, unless
/// that is only matplotlib's size (`<Figure size 640x480 with 1 Axes>`);
/// then the question it answers.
fn figure_alt(plain: &str, question: &str) -> String {
    let plain = plain.trim();
    if !plain.is_empty() && !plain.starts_with("<Figure size") {
        return plain.to_string();
    }
    let question: String = question
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .chars()
        .take(ALT_QUESTION_CHARS)
        .collect();
    if question.is_empty() {
        "A figure the program drew".to_string()
    } else {
        format!("A figure for: {question}")
    }
}

#[cfg(test)]
mod tests;
