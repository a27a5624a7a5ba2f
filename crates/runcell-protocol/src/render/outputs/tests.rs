use super::*;
use crate::Table;

fn offered(path: &str) -> Option<String> {
    Some(format!("/files?path={path}"))
}

fn not_offered(_: &str) -> Option<String> {
    None
}

fn place<'a>(file_href: &'a dyn Fn(&str) -> Option<String>) -> Place<'a> {
    Place {
        cell: "c1",
        question: "plot the\nprimes",
        scheme: "dark",
        file_href,
    }
}

fn html_of(output: &Output) -> String {
    output_html(output, 0, &place(&offered))
}

fn rich(pairs: &[(&str, &str)]) -> Output {
    Output::Rich {
        data: pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        main: false,
        metadata: String::new(),
        display_id: None,
    }
}

/// An attribute's value as the browser reads it.
fn unescaped(value: &str) -> String {
    value
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&#39;", "'")
        .replace("&amp;", "&")
}

#[test]
fn an_html_output_follows_the_theme_on_show() {
    for scheme in ["light dark", "light", "dark"] {
        let document = output_document("<table></table>", scheme);
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
    let document = output_document("<img src=\"http://example.invalid/x.png\">", "light dark");
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

#[test]
fn the_output_frame_carries_the_policy_first() {
    let markup = "<img src=\"http://example.invalid/x.png\"><p>hi</p>";
    let html = html_of(&rich(&[("text/html", markup)]));
    assert!(
        html.starts_with("<iframe class=\"out out-html\" sandbox=\"\""),
        "{html}"
    );
    let escaped = html
        .split("srcdoc=\"")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .expect("a srcdoc");
    // Nothing of the output's markup is markup of the page's.
    assert!(!escaped.contains('<'), "{escaped}");
    let srcdoc = unescaped(escaped);
    assert_eq!(
        srcdoc,
        output_document(markup, "dark"),
        "the policy comes first"
    );
    let policy = srcdoc.find(OUTPUT_FRAME_POLICY).expect("the policy");
    let image = srcdoc.find("example.invalid").expect("the output");
    assert!(policy < image, "{srcdoc}");
    assert!(html.contains("data-scheme=\"dark\""), "{html}");
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
fn figures_are_named_for_download_and_described() {
    let png = html_of(&rich(&[
        ("image/png", "iVBORw0KGgo="),
        ("text/plain", "<Figure size 640x480 with 1 Axes>"),
    ]));
    assert_eq!(
        png,
        "<figure class=\"out out-image\"><img src=\"data:image/png;base64,iVBORw0KGgo=\" alt=\"A figure for: plot the primes\"><figcaption class=\"js-only\"><button type=\"button\" class=\"button save-figure\" data-file=\"figure-c1-1.png\">Download PNG</button></figcaption></figure>"
    );
    let linked = output_html(
        &Output::Image {
            url: "/f/3.png".into(),
            text: "\"quoted\"".into(),
            width: Some(640),
            height: Some(480),
        },
        1,
        &place(&offered),
    );
    assert_eq!(
        linked,
        "<figure class=\"out out-image\"><img src=\"/f/3.png\" alt=\"&quot;quoted&quot;\" width=\"640\" height=\"480\"><figcaption><a class=\"button\" href=\"/f/3.png\" download=\"figure-c1-2.png\">Download PNG</a></figcaption></figure>"
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

#[test]
fn a_package_renders_as_a_line_of_plain_text() {
    let installed = html_of(&Output::Package {
        project: "numpy".to_string(),
        version: "2.1.0".to_string(),
        size: 16_100_000,
        cached: true,
        refused: None,
    });
    assert_eq!(
        installed,
        "<p class=\"out out-package\">Installed numpy 2.1.0 (16.1 MB, from runcell&#39;s package index, cached)</p>"
    );
    let refused = html_of(&Output::Package {
        project: "<b>evil</b>".to_string(),
        version: String::new(),
        size: 0,
        cached: false,
        refused: Some("Not on the index's list.".to_string()),
    });
    assert_eq!(
        refused,
        "<p class=\"out out-package out-package-refused\" role=\"status\">Not installed: &lt;b&gt;evil&lt;/b&gt;. Not on the index&#39;s list.</p>"
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

#[test]
fn a_long_stream_is_capped_with_a_toggle_and_a_short_one_is_not() {
    let short = html_of(&Output::Stdout {
        text: "<b>hi</b>\n".into(),
    });
    assert_eq!(
        short,
        "<pre class=\"out out-stdout\">&lt;b&gt;hi&lt;/b&gt;\n</pre>"
    );
    let long: String = (0..40).map(|i| format!("{i}\n")).collect();
    let capped = html_of(&Output::Stderr { text: long });
    assert!(
        capped.starts_with(
            "<pre class=\"out out-stderr capped\" tabindex=\"0\" aria-label=\"Errors, scrollable\">0\n1\n"
        ),
        "{capped}"
    );
    assert!(
        capped.ends_with(
            "</pre><button type=\"button\" class=\"button show-all js-only\" aria-expanded=\"false\" data-lines=\"40\" data-label=\"Errors, scrollable\">Show all 40 lines</button>"
        ),
        "{capped}"
    );
}

#[test]
fn errors_and_stops_read_as_they_should() {
    let error = html_of(&Output::Error {
        name: "ValueError".into(),
        value: "bad <input>".into(),
        traceback: Vec::new(),
    });
    assert_eq!(
        error,
        "<pre class=\"out out-error\">ValueError: bad &lt;input&gt;</pre>"
    );
    let stopped = html_of(&Output::Error {
        name: "Cancelled".into(),
        value: String::new(),
        traceback: vec!["x".into()],
    });
    assert_eq!(stopped, "<p class=\"out out-stopped\">Stopped.</p>");
}

#[test]
fn a_file_is_offered_only_where_the_page_offers_it() {
    let file = Output::File {
        path: "/home/user/out.png".into(),
        name: "out.png".into(),
        size: 2048,
    };
    assert_eq!(
        html_of(&file),
        "<figure class=\"out out-file\"><img src=\"/files?path=/home/user/out.png\" alt=\"out.png\" loading=\"lazy\"><figcaption>wrote <a class=\"button\" href=\"/files?path=/home/user/out.png\" download=\"out.png\">out.png (2.0 KB)</a></figcaption></figure>"
    );
    assert_eq!(
        output_html(&file, 0, &place(&not_offered)),
        "<p class=\"out out-file\">wrote out.png (2.0 KB), not shared</p>"
    );
}

#[test]
fn a_chart_has_its_frame_and_a_fallback_without_scripts() {
    let chart = output_html(
        &rich(&[
            ("application/vnd.plotly.v1+json", "{\"data\": []}"),
            ("text/plain", "a <chart>"),
        ]),
        3,
        &place(&offered),
    );
    assert_eq!(
        chart,
        "<figure class=\"out out-chart\" data-output=\"3\" data-kind=\"plotly\"><iframe class=\"js-only\" src=\"/chart-frame.html\" sandbox=\"allow-scripts\" title=\"Interactive chart\" style=\"height: 460px\"></iframe><pre class=\"out out-value no-js-only\">a &lt;chart&gt;\n(an interactive chart: it needs JavaScript)</pre></figure>"
    );
    // The chart's JSON is not in the markup: the page hands it to the frame.
    assert!(!chart.contains("data\":"), "{chart}");
}

#[test]
fn markdown_svg_and_plain_values() {
    assert_eq!(
        html_of(&rich(&[
            ("text/markdown", "**x**"),
            (markdown::MARKDOWN_MARKUP, "<p><strong>x</strong></p>")
        ])),
        "<div class=\"out markdown\"><p><strong>x</strong></p></div>"
    );
    assert_eq!(
        html_of(&rich(&[("text/plain", "<x>")])),
        "<pre class=\"out out-value\">&lt;x&gt;</pre>"
    );
    let svg = html_of(&rich(&[("image/svg+xml", "<svg/>")]));
    assert_eq!(
        svg,
        "<figure class=\"out out-image\"><img src=\"data:image/svg+xml;base64,PHN2Zy8+\" alt=\"A figure\"></figure>"
    );
}

#[test]
fn outputs_render_in_order_with_their_place() {
    let table = Output::Table {
        table: Table {
            columns: vec!["a".into()],
            index_columns: 0,
            rows: vec![vec!["1".into()]],
            elided: None,
        },
        text: String::new(),
        main: true,
    };
    let html = outputs_html(
        &[Output::Stdout { text: "x".into() }, table],
        &place(&offered),
    );
    assert!(html.starts_with("<pre class=\"out out-stdout\">x</pre><figure class=\"out out-table\" data-output=\"1\" data-file=\"table-c1-2.csv\">"), "{html}");
}

#[test]
fn the_frame_gets_the_chart_as_json_text_with_the_theme() {
    let hostile = r#"{"data": [], "layout": {"title": "</script><script>alert(1)</script>\""}}"#;
    let message = chart_message("plotly", hostile, "dark");
    let read: serde_json::Value = serde_json::from_str(&message).unwrap();
    assert_eq!(read["kind"], "plotly");
    assert_eq!(read["theme"], "dark");
    // The spec stays text, exactly as the program made it.
    assert_eq!(read["spec"].as_str(), Some(hostile));
}
