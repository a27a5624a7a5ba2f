//! A result cell's body: what the program printed, showed or wrote, each in
//! the richest form the page can show safely.

use leptos::prelude::*;

use super::table::TableView;
use crate::api::session_file_url;
use crate::components::{Theme, copy_text, data_url, save_as, use_theme};
use crate::contexts::{use_session, use_share_link_offer};
use crate::notebook::Cell;
use crate::protocol::{CellStatus, Output};
use crate::render::sizes::human_size;
use crate::render::{ansi, markdown};

#[component]
pub(super) fn ResultBody(cell: Memo<Option<Cell>>) -> impl IntoView {
    let outputs = move || cell.with(|c| c.as_ref().map(|c| c.outputs.clone()).unwrap_or_default());
    let printed = move || cell.with(|c| c.as_ref().map(Cell::printed).unwrap_or_default());
    let copied = RwSignal::new(false);
    let cell_name = move || cell.with(|c| c.as_ref().map(|c| c.id.to_string()).unwrap_or_default());
    // The question the result answers: what a figure is of, in words.
    let state = use_session();
    let question = move || {
        let turn = cell.with(|c| c.as_ref().and_then(|c| c.turn));
        state.notebook.with(|n| {
            turn.and_then(|turn| n.question(turn))
                .unwrap_or_default()
                .to_string()
        })
    };

    view! {
        <div class="cell-body outputs">
            {move || {
                outputs()
                    .into_iter()
                    .enumerate()
                    .map(|(i, output)| view! { <OutputView output index=i name=cell_name() question=question()/> })
                    .collect_view()
            }}
            <Show when=move || cell.with(|c| c.as_ref().is_some_and(|c| c.outputs.is_empty() && c.status != CellStatus::Streaming))>
                <p class="out-empty">"(no output)"</p>
            </Show>
            <Show when=move || !printed().is_empty()>
                <div class="cell-actions">
                    <button
                        type="button"
                        class="js-only"
                        on:click=move |_| {
                            copy_text(&printed());
                            copied.set(true);
                        }
                    >
                        {move || if copied.get() { "Copied" } else { "Copy output" }}
                    </button>
                    <a
                        class="button"
                        download=move || format!("output-{}.txt", cell_name())
                        href=move || data_url("text/plain;charset=utf-8", printed().as_bytes())
                    >
                        "Download"
                    </a>
                </div>
            </Show>
        </div>
    }
}

/// A file the program wrote: a download link (and a preview of an image)
/// for the session's owner; on a shared page the same if its link offers the
/// file (the owner shared the files), else only its name.
#[component]
fn FileOffer(path: String, name: String, size: u64) -> impl IntoView {
    let state = use_session();
    let size = human_size(size);
    let href = if state.read_only {
        // A share link's page links only what its link offers.
        let offered = use_share_link_offer().and_then(|offer| offer.href(&path));
        match offered {
            Some(href) => href,
            None => {
                return view! {
                    <p class="out out-file">{format!("wrote {name} ({size}), not shared")}</p>
                }
                .into_any();
            }
        }
    } else {
        session_file_url(&state.session_id.get_value(), &path)
    };
    let image = [".png", ".jpg", ".jpeg", ".gif", ".webp"]
        .iter()
        .any(|e| name.to_ascii_lowercase().ends_with(e));
    let label = format!("{name} ({size})");
    view! {
        <figure class="out out-file">
            {image.then(|| view! { <img src=href.clone() alt=name.clone() loading="lazy"/> })}
            <figcaption>
                "wrote " <a class="button" href=href download=name>{label}</a>
            </figcaption>
        </figure>
    }
    .into_any()
}

/// What an HTML output's frame may load: nothing from another origin, and
/// nothing over the network at all (no image, font, style sheet, script or
/// connection), so that showing a result (also to a share link's readers)
/// never tells another site who is reading it. Inline styles and `data:`
/// images and fonts still show; the frame's `sandbox` runs no script.
pub const OUTPUT_FRAME_POLICY: &str = "default-src 'none'; img-src data: blob:; \
     style-src 'unsafe-inline'; font-src data:; media-src data: blob:; \
     connect-src 'none'; form-action 'none'; base-uri 'none'";

/// An HTML output as its frame's document: the policy in a head of its
/// own, before any of the output's markup (a `<meta>` policy governs only
/// what comes after it, and only in the head; a later policy can only
/// narrow it).
pub fn output_document(html: &str) -> String {
    output_document_in(html, Theme::Auto)
}

/// [`output_document`] in the theme the page shows (the switch's pick, or
/// the system's).
pub fn output_document_in(html: &str, theme: Theme) -> String {
    let scheme = theme.color_scheme();
    format!(
        "<html><head><meta http-equiv=\"Content-Security-Policy\" content=\"{OUTPUT_FRAME_POLICY}\">\
         <meta name=\"color-scheme\" content=\"{scheme}\"><style>:root{{color-scheme:{scheme}}}</style>\
         {OUTPUT_FRAME_STYLE}</head><body>{html}</body></html>"
    )
}

/// How an HTML output reads in the page's theme (its colour scheme is set
/// before this): the page's fonts, and tables with lines between rows (an
/// output's own styles come after, and win).
const OUTPUT_FRAME_STYLE: &str = "<style>:root{font:14px/1.45 system-ui,sans-serif}\
     body{margin:0.5rem}table{border-collapse:collapse;font-size:13px}\
     th,td{padding:0.25rem 0.6rem;border:0;border-bottom:1px solid #8886;text-align:right}\
     thead th{border-bottom-width:2px}</style>";

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
const CAPPED_LINES: usize = 30;

/// The toggle under a capped stream (scripts only: without them the box
/// scrolls, and Download has it all).
#[component]
fn ShowAll(lines: usize, open: RwSignal<bool>) -> impl IntoView {
    (lines > CAPPED_LINES).then(|| {
        view! {
            <button
                type="button"
                class="button show-all js-only"
                aria-expanded=move || open.get().to_string()
                on:click=move |_| open.update(|o| *o = !*o)
            >
                {move || if open.get() { "Show less".to_string() } else { format!("Show all {lines} lines") }}
            </button>
        }
    })
}

/// The error a sandbox reports for a run that Stop ended
/// (`sandbox::limit_error::CANCELLED` on the server).
const STOPPED_ERROR: &str = "Cancelled";

/// The richest form of a value the page can show safely.
#[component]
fn OutputView(
    output: Output,
    index: usize,
    name: String,
    /// The question the result answers, for a figure's text alternative.
    #[prop(optional)]
    question: String,
) -> impl IntoView {
    match output {
        Output::Stdout { text } => {
            let (left_out, shown) = shown_tail(&text);
            let lines = shown.lines().count();
            let open = RwSignal::new(false);
            let capped = move || lines > CAPPED_LINES && !open.get();
            view! {
                {left_out.map(|note| view! { <p class="out-left-out">{note}</p> })}
                <pre
                    class="out out-stdout"
                    class:capped=capped
                    tabindex=move || capped().then_some("0")
                    aria-label=move || capped().then_some("Output, scrollable")
                    inner_html=ansi::to_html(shown)
                ></pre>
                <ShowAll lines open/>
            }
            .into_any()
        }
        Output::Stderr { text } => {
            let (left_out, shown) = shown_tail(&text);
            let lines = shown.lines().count();
            let open = RwSignal::new(false);
            let capped = move || lines > CAPPED_LINES && !open.get();
            view! {
                {left_out.map(|note| view! { <p class="out-left-out">{note}</p> })}
                <pre
                    class="out out-stderr"
                    class:capped=capped
                    tabindex=move || capped().then_some("0")
                    aria-label=move || capped().then_some("Errors, scrollable")
                    inner_html=ansi::to_html(shown)
                ></pre>
                <ShowAll lines open/>
            }
            .into_any()
        }
        // Stopped by the person (Stop): said plainly, not as a failure.
        Output::Error { name: ename, .. } if ename == STOPPED_ERROR => {
            view! { <p class="out out-stopped">"Stopped."</p> }.into_any()
        }
        Output::Error {
            name: ename,
            value,
            traceback,
        } => {
            let text = if traceback.is_empty() {
                format!("{ename}: {value}")
            } else {
                traceback.join("\n")
            };
            view! { <pre class="out out-error" inner_html=ansi::to_html(&text)></pre> }.into_any()
        }
        Output::File { path, name, size } => view! { <FileOffer path name size/> }.into_any(),
        Output::Package {
            project,
            refused: Some(why),
            ..
        } => view! {
            <p class="out out-package out-package-refused" role="status">
                {package_refused_line(&project, &why)}
            </p>
        }
        .into_any(),
        Output::Package {
            project,
            version,
            size,
            cached,
            refused: None,
        } => view! {
            <p class="out out-package">{package_line(&project, &version, size, cached)}</p>
        }
        .into_any(),
        Output::Table { table, .. } => view! { <TableView table name index/> }.into_any(),
        Output::Image {
            url,
            text,
            width,
            height,
        } => {
            // The page names the figure by its address: a plain link
            // downloads it, with or without scripts. Its size, when known,
            // keeps its room before it loads.
            let file = format!("figure-{name}-{}.png", index + 1);
            view! {
                <figure class="out out-image">
                    <img
                        src=url.clone()
                        alt=figure_alt(&text, &question)
                        width=width.map(|w| w.to_string())
                        height=height.map(|h| h.to_string())
                    />
                    <figcaption>
                        <a class="button" href=url download=file>"Download PNG"</a>
                    </figcaption>
                </figure>
            }
            .into_any()
        }
        Output::Rich { data, .. } => {
            if let Some((kind, spec)) = crate::protocol::chart_of(&data) {
                let spec = spec.clone();
                let png = data.get("image/png").cloned();
                let text = data.get("text/plain").cloned().unwrap_or_default();
                view! { <super::chart::ChartView kind spec png text/> }.into_any()
            } else if let Some(png) = data.get("image/png") {
                // The bytes are in the page once, in the image: Download
                // saves them from there (without scripts, the browser's own
                // "Save image" does).
                let src = format!("data:image/png;base64,{}", png.trim());
                let file = format!("figure-{name}-{}.png", index + 1);
                let saved = src.clone();
                let (width, height) = crate::render::png::png_size(png).unzip();
                view! {
                    <figure class="out out-image">
                        <img
                            src=src
                            alt=figure_alt(data.get("text/plain").map_or("", String::as_str), &question)
                            width=width.map(|w| w.to_string())
                            height=height.map(|h| h.to_string())
                        />
                        <figcaption class="js-only">
                            <button
                                type="button"
                                class="button"
                                on:click=move |_| save_as(&file, &saved)
                            >
                                "Download PNG"
                            </button>
                        </figcaption>
                    </figure>
                }
                .into_any()
            } else if let Some(svg) = data.get("image/svg+xml") {
                // As an image, an SVG's scripts do not run.
                let src = data_url("image/svg+xml", svg.as_bytes());
                view! { <figure class="out out-image"><img src=src alt="A figure"/></figure> }
                    .into_any()
            } else if let Some(html) = data.get("text/html") {
                // No scripts, no same origin: the frame can only show markup,
                // and its policy lets it load nothing from elsewhere. It
                // follows the page's theme switch.
                let (html, theme) = (html.clone(), use_theme());
                view! {
                    <iframe class="out out-html" sandbox="" srcdoc=move || output_document_in(&html, theme.get()) title="HTML output"></iframe>
                }
                .into_any()
            } else if let Some(md) = data.get("text/markdown") {
                // Its markup comes from the server with the output.
                let html = data
                    .get(markdown::MARKDOWN_MARKUP)
                    .cloned()
                    .unwrap_or_else(|| markdown::shown("", md));
                view! { <div class="out markdown" inner_html=html></div> }.into_any()
            } else {
                let text = data.get("text/plain").cloned().unwrap_or_default();
                view! { <pre class="out out-value" inner_html=ansi::to_html(&text)></pre> }
                    .into_any()
            }
        }
    }
}

/// What a result cell says of a package file runcell's index handed to
/// the program: `Installed numpy 2.1.0 (16.1 MB, from runcell's package
/// index, cached)`.
pub(super) fn package_line(project: &str, version: &str, size: u64, cached: bool) -> String {
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
pub(super) fn package_refused_line(project: &str, why: &str) -> String {
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
mod tests {
    use super::*;

    #[test]
    fn an_html_output_follows_the_theme_on_show() {
        for (theme, scheme) in [
            (Theme::Auto, "light dark"),
            (Theme::Light, "light"),
            (Theme::Dark, "dark"),
        ] {
            let document = output_document_in("<table></table>", theme);
            let (head, _) = document.split_once("</head>").expect("a head");
            assert!(
                head.contains(&format!("content=\"{scheme}\"")),
                "{document}"
            );
            assert!(
                head.contains(&format!(":root{{color-scheme:{scheme}}}")),
                "{document}"
            );
        }
    }

    #[test]
    fn an_html_output_loads_nothing_from_elsewhere() {
        let document = output_document("<img src=\"http://example.invalid/x.png\">");
        // The policy is the first thing in a head that holds nothing of the
        // output's.
        assert!(
            document.starts_with("<html><head><meta http-equiv=\"Content-Security-Policy\""),
            "{document}"
        );
        let (head, body) = document.split_once("</head>").expect("a head");
        assert!(head.contains(OUTPUT_FRAME_POLICY), "{document}");
        assert!(!head.contains("example.invalid"), "{document}");
        assert!(body.contains("example.invalid"), "{document}");
        for directive in [
            "default-src 'none'",
            "connect-src 'none'",
            "img-src data: blob:;",
        ] {
            assert!(OUTPUT_FRAME_POLICY.contains(directive), "{directive}");
        }
        assert!(!OUTPUT_FRAME_POLICY.contains("http"));
    }

    #[cfg(feature = "ssr")]
    #[test]
    fn the_output_frame_carries_the_policy_first() {
        use leptos::prelude::*;
        let html = Owner::new().with(|| {
            view! {
                <OutputView
                    output=Output::Rich {
                        data: [(
                            "text/html".to_string(),
                            "<img src=\"http://example.invalid/x.png\"><p>hi</p>".to_string(),
                        )]
                        .into(),
                        main: false,
                        metadata: String::new(),
                        display_id: None,
                    }
                    index=0
                    name="c1".to_string()
                />
            }
            .to_html()
        });
        assert!(html.contains("<iframe"), "{html}");
        assert!(html.contains("sandbox=\"\""), "{html}");
        // The document in `srcdoc`, as the page's HTML escapes it.
        let escaped = html
            .split("srcdoc=\"")
            .nth(1)
            .and_then(|rest| rest.split('"').next())
            .expect("a srcdoc");
        let srcdoc = escaped
            .replace("&lt;", "<")
            .replace("&gt;", ">")
            .replace("&quot;", "\"")
            .replace("&#39;", "'")
            .replace("&#x27;", "'")
            .replace("&amp;", "&");
        assert_eq!(
            srcdoc,
            output_document("<img src=\"http://example.invalid/x.png\"><p>hi</p>"),
            "the policy comes first"
        );
        let policy = srcdoc.find(OUTPUT_FRAME_POLICY).expect("the policy");
        let image = srcdoc.find("example.invalid").expect("the output");
        assert!(policy < image, "{srcdoc}");
    }

    #[test]
    fn a_figure_is_described_by_its_question_when_its_repr_says_only_its_size() {
        assert_eq!(
            figure_alt("<Figure size 640x480 with 1 Axes>", "plot the\nprimes"),
            "A figure for: plot the primes"
        );
        assert_eq!(figure_alt("Sales by region", "plot it"), "Sales by region");
        assert_eq!(figure_alt("", ""), "A figure the program drew");
        let long = "x ".repeat(400);
        let alt = figure_alt("", &long);
        assert_eq!(
            alt.chars().count(),
            "A figure for: ".len() + ALT_QUESTION_CHARS
        );
    }

    #[test]
    fn a_package_says_what_was_installed_and_from_where() {
        assert_eq!(
            package_line("numpy", "2.1.0", 16_100_000, true),
            "Installed numpy 2.1.0 (16.1 MB, from runcell's package index, cached)"
        );
        assert_eq!(
            package_line("six", "1.16.0", 11_053, false),
            "Installed six 1.16.0 (11.1 KB, from runcell's package index)"
        );
        // Only what is known.
        assert_eq!(
            package_line("six", "", 0, false),
            "Installed six (from runcell's package index)"
        );
        assert_eq!(
            package_refused_line("torch", "Larger than the index's limit."),
            "Not installed: torch. Larger than the index's limit."
        );
        assert_eq!(package_refused_line("torch", " "), "Not installed: torch.");
    }

    #[cfg(feature = "ssr")]
    #[test]
    fn a_package_renders_as_a_line_of_plain_text() {
        use leptos::prelude::*;
        let render = |output: Output| {
            Owner::new()
                .with(|| view! { <OutputView output index=0 name="c1".to_string()/> }.to_html())
        };
        let installed = render(Output::Package {
            project: "numpy".to_string(),
            version: "2.1.0".to_string(),
            size: 16_100_000,
            cached: true,
            refused: None,
        });
        assert!(
            installed.contains("<p class=\"out out-package\""),
            "{installed}"
        );
        assert!(
            installed.contains("Installed numpy 2.1.0 (16.1 MB, from runcell&#39;s cache)")
                || installed.contains(
                    "Installed numpy 2.1.0 (16.1 MB, from runcell's package index, cached)"
                ),
            "{installed}"
        );
        assert!(!installed.contains("role="), "{installed}");
        let refused = render(Output::Package {
            project: "<b>evil</b>".to_string(),
            version: String::new(),
            size: 0,
            cached: false,
            refused: Some("Not on the index's list.".to_string()),
        });
        assert!(
            refused.contains("class=\"out out-package out-package-refused\""),
            "{refused}"
        );
        assert!(refused.contains("role=\"status\""), "{refused}");
        assert!(
            refused.contains("Not installed: &lt;b&gt;evil&lt;/b&gt;."),
            "{refused}"
        );
        assert!(
            !refused.contains("<b>"),
            "the name is text, never markup: {refused}"
        );
    }

    #[test]
    fn long_streams_show_their_end() {
        assert_eq!(shown_tail("a\nb\n"), (None, "a\nb\n"));
        let text: String = (0..100_000).map(|i| format!("{i}\n")).collect();
        let (note, shown) = shown_tail(&text);
        assert!(shown.len() <= SHOWN_MAX, "{}", shown.len());
        assert!(shown.ends_with("99999\n"));
        let first = shown.lines().next().unwrap();
        assert!(text.contains(&format!("\n{first}\n")), "starts at a line");
        let left: usize = first.parse().unwrap();
        assert_eq!(
            note.unwrap(),
            format!("… {left} earlier lines not shown: Download or Copy output has all of it.")
        );
        // Never inside a character.
        let wide = "é".repeat(SHOWN_MAX);
        let (_, shown) = shown_tail(&wide);
        assert!(shown.len() <= SHOWN_MAX && shown.chars().all(|c| c == 'é'));
    }
}
