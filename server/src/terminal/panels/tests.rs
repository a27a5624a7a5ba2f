use std::collections::BTreeMap;

use app::protocol::{CellId, Output, Table, TurnId, TurnKind};
use base64::Engine as _;

use super::*;

fn started(cell: u64, kind: CellKind, attempt: Option<u32>, source: Option<u64>) -> EventBody {
    EventBody::CellStarted {
        cell_id: CellId(cell),
        cell_kind: kind,
        language: (kind == CellKind::Code).then(|| "python".to_string()),
        attempt,
        source: source.map(CellId),
    }
}

fn delta(cell: u64, text: &str) -> EventBody {
    EventBody::CellDelta {
        cell_id: CellId(cell),
        text: text.into(),
        highlight: None,
    }
}

fn output(cell: u64, output: Output) -> EventBody {
    EventBody::CellOutput {
        cell_id: CellId(cell),
        output,
    }
}

fn finished(cell: u64, status: CellStatus) -> EventBody {
    EventBody::CellFinished {
        cell_id: CellId(cell),
        status,
        elapsed_ms: 12,
        error: (status == CellStatus::Error).then(|| CellError {
            code: "program_failed".into(),
            message: "ZeroDivisionError: division by zero".into(),
        }),
    }
}

fn stdout(text: &str) -> Output {
    Output::Stdout { text: text.into() }
}

/// What the panels draw of `bodies`, with `look`.
fn draw(
    look: Look,
    figures: Option<PathBuf>,
    bodies: Vec<EventBody>,
) -> (String, Option<TurnStatus>) {
    let highlighter = Highlighter::new();
    let mut panels = Panels::new(Vec::new(), look, &highlighter, figures);
    panels.begin();
    for event in SessionEvent::numbered(bodies, 1) {
        panels.event(&event).unwrap();
    }
    let status = panels.finished();
    (String::from_utf8(panels.into_inner()).unwrap(), status)
}

fn turn(bodies: Vec<EventBody>, status: TurnStatus) -> Vec<EventBody> {
    let mut all = vec![
        EventBody::TurnStarted {
            turn: TurnId(1),
            turn_kind: TurnKind::Ask,
            alternative_to: None,
        },
        EventBody::UserMessage {
            cell_id: CellId(1),
            text: "q".into(),
            markup: None,
        },
    ];
    all.extend(bodies);
    all.push(EventBody::TurnFinished {
        turn: TurnId(1),
        status,
        elapsed_ms: 2300,
        final_cell: None,
    });
    all
}

#[test]
fn a_turn_is_three_plain_panels_in_order_when_piped() {
    let (text, status) = draw(
        Look::PLAIN,
        None,
        turn(
            vec![
                started(2, CellKind::Code, Some(1), None),
                delta(2, "x = [i * i "),
                delta(2, "for i in range(4)]\nprint("),
                delta(2, "x)"),
                finished(2, CellStatus::Ok),
                started(3, CellKind::Result, Some(1), Some(2)),
                output(3, stdout("[0, 1, ")),
                output(3, stdout("4, 9]\n")),
                output(
                    3,
                    Output::Stderr {
                        text: "careful\n".into(),
                    },
                ),
                finished(3, CellStatus::Ok),
                started(4, CellKind::Explanation, None, None),
                delta(4, "The list is **[0, 1, 4, 9]**: "),
                delta(4, "the squares below 4."),
                finished(4, CellStatus::Ok),
            ],
            TurnStatus::Ok,
        ),
    );
    assert_eq!(status, Some(TurnStatus::Ok));
    let rule = |title: &str| format!("── {title} {}", "─".repeat(80 - 4 - title.chars().count()));
    let expected = [
        rule("code · python"),
        "x = [i * i for i in range(4)]".into(),
        "print(x)".into(),
        rule("result"),
        "[0, 1, 4, 9]".into(),
        "careful".into(),
        rule("explanation"),
        "The list is [0, 1, 4, 9]: the squares below 4.".into(),
        "✓ done in 2.3 s".into(),
    ]
    .join("\n");
    assert_eq!(text.trim_end(), expected);
    assert!(!text.contains('\u{1b}'));
}

#[test]
fn fixes_are_titled_as_such_and_errors_show_their_traceback() {
    let traceback = "\u{1b}[0;31mZeroDivisionError\u{1b}[0m: division by zero".to_string();
    let (text, status) = draw(
        Look::PLAIN,
        None,
        turn(
            vec![
                started(2, CellKind::Code, Some(1), None),
                delta(2, "1 / 0\n"),
                finished(2, CellStatus::Ok),
                started(3, CellKind::Result, None, Some(2)),
                output(
                    3,
                    Output::Error {
                        name: "ZeroDivisionError".into(),
                        value: "division by zero".into(),
                        traceback: vec![traceback],
                    },
                ),
                finished(3, CellStatus::Error),
                started(4, CellKind::Code, Some(2), None),
                delta(4, "print(1 / 1)\n"),
                finished(4, CellStatus::Ok),
                started(5, CellKind::Result, None, Some(4)),
                output(5, stdout("1.0\n")),
                finished(5, CellStatus::Ok),
            ],
            TurnStatus::Error,
        ),
    );
    assert_eq!(status, Some(TurnStatus::Error));
    let at = |needle: &str| {
        text.find(needle)
            .unwrap_or_else(|| panic!("{needle:?} missing from:\n{text}"))
    };
    assert!(at("── result ─") < at("ZeroDivisionError: division by zero"));
    assert!(at("(failed · 12 ms: ZeroDivisionError") < at("── code · python · fix 1"));
    assert!(at("── code · python · fix 1") < at("── result · fix 1"));
    assert!(at("── result · fix 1") < at("1.0"));
    assert!(text.contains("✗ failed after 2.3 s"));
    assert!(!text.contains('\u{1b}'), "{text:?}");
}

#[test]
fn live_panels_have_borders_and_redraw_only_whole_lines() {
    let look = Look {
        colour: true,
        live: true,
        width: 40,
        height: 30,
    };
    let (text, _) = draw(
        look,
        None,
        turn(
            vec![
                started(2, CellKind::Code, Some(1), None),
                delta(2, "import "),
                delta(2, "math\n"),
                finished(2, CellStatus::Ok),
                started(3, CellKind::Result, Some(1), Some(2)),
                output(3, stdout("\u{1b}]52;c;ZXZpbA==\u{7}\u{1b}[2Jhi\n")),
                finished(3, CellStatus::Ok),
                started(4, CellKind::Explanation, None, None),
                delta(4, "It printed *hi*."),
                finished(4, CellStatus::Ok),
            ],
            TurnStatus::Ok,
        ),
    );
    // The partial line was shown raw, then wiped and drawn highlighted.
    assert!(text.contains("import \r\u{1b}[2K"), "{text:?}");
    assert!(text.contains("\u{1b}[35mimport"), "{text:?}");
    assert!(text.contains("╭─ result"), "{text:?}");
    // The program's escapes are gone; its text stays.
    assert!(!text.contains("]52") && !text.contains("[2J"), "{text:?}");
    assert!(text.contains("hi"));
    // The explanation's raw text is wiped and drawn as markdown.
    assert!(text.contains("It printed *hi*.\r\u{1b}[J"), "{text:?}");
    assert!(text.contains("\u{1b}[3mhi"), "{text:?}");
}

#[test]
fn images_are_saved_and_their_path_printed() {
    let dir = tempfile::tempdir().unwrap();
    let png = base64::engine::general_purpose::STANDARD.encode(b"\x89PNG\r\n\x1a\nfake");
    let mut data = BTreeMap::new();
    data.insert("image/png".to_string(), png);
    data.insert(
        "text/plain".to_string(),
        "<Figure size 640x480>".to_string(),
    );
    let figures = dir.path().join("session");
    let (text, _) = draw(
        Look::PLAIN,
        Some(figures.clone()),
        turn(
            vec![
                started(3, CellKind::Result, Some(1), None),
                output(
                    3,
                    Output::Rich {
                        data: data.clone(),
                        main: false,
                        metadata: String::new(),
                        display_id: None,
                    },
                ),
                output(
                    3,
                    Output::Rich {
                        data,
                        main: false,
                        metadata: String::new(),
                        display_id: None,
                    },
                ),
                finished(3, CellStatus::Ok),
            ],
            TurnStatus::Ok,
        ),
    );
    let first = figures.join("figure-1.png");
    let second = figures.join("figure-2.png");
    assert_eq!(std::fs::read(&first).unwrap(), b"\x89PNG\r\n\x1a\nfake");
    assert!(second.is_file());
    assert!(
        text.contains(&format!(
            "[image] saved to {}  <Figure size 640x480>",
            first.display()
        )),
        "{text}"
    );
}

#[test]
fn packages_the_index_served_or_refused_are_one_line_each() {
    let package = |project: &str, refused: Option<&str>| Output::Package {
        project: project.into(),
        version: "1.16.0".into(),
        size: 11_053,
        cached: true,
        refused: refused.map(String::from),
    };
    let (text, _) = draw(
        Look::PLAIN,
        None,
        turn(
            vec![
                started(3, CellKind::Result, Some(1), None),
                output(3, stdout("Collecting six")),
                output(3, package("six", None)),
                output(3, package("torch", Some("Larger than the index's limit."))),
                finished(3, CellStatus::Ok),
            ],
            TurnStatus::Ok,
        ),
    );
    assert!(
        text.contains(
            "Collecting six\n\
             [package] installed six 1.16.0 (10.8 KiB, from runcell's cache)\n\
             [package] not installed: torch. Larger than the index's limit.\n"
        ),
        "{text}"
    );
}

#[test]
fn tables_without_text_are_aligned() {
    let table = Table {
        columns: vec!["region".into(), "total".into()],
        index_columns: 0,
        rows: vec![
            vec!["North".into(), "5200.25".into()],
            vec!["South".into(), "17".into()],
        ],
        elided: None,
    };
    let (text, _) = draw(
        Look::PLAIN,
        None,
        turn(
            vec![
                started(3, CellKind::Result, Some(1), None),
                output(
                    3,
                    Output::Table {
                        table,
                        text: String::new(),
                        main: false,
                    },
                ),
                finished(3, CellStatus::Ok),
            ],
            TurnStatus::Ok,
        ),
    );
    assert!(
        text.contains("region  total\nNorth   5200.25\nSouth   17\n"),
        "{text}"
    );
}

#[test]
fn a_withdrawn_explanation_is_not_shown_as_if_it_stood() {
    let (text, _) = draw(
        Look::PLAIN,
        None,
        turn(
            vec![
                started(4, CellKind::Explanation, None, None),
                delta(4, "The total is 12,345."),
                EventBody::CellFinished {
                    cell_id: CellId(4),
                    status: CellStatus::Error,
                    elapsed_ms: 5,
                    error: Some(CellError {
                        code: UNGROUNDED.into(),
                        message: "withdrawn: it names 12,345, which the output does not show"
                            .into(),
                    }),
                },
                started(5, CellKind::Explanation, None, None),
                delta(5, "The total is 7."),
                finished(5, CellStatus::Ok),
            ],
            TurnStatus::Ok,
        ),
    );
    assert!(!text.contains("The total is 12,345."), "{text}");
    assert!(
        text.contains("(an explanation was withdrawn: it names 12,345, which the output does not show; another follows)"),
        "{text}"
    );
    assert!(text.contains("The total is 7."), "{text}");
}

fn live(width: usize, height: usize) -> Look {
    Look {
        colour: false,
        live: true,
        width,
        height,
    }
}

fn explanation(bodies: Vec<EventBody>) -> Vec<EventBody> {
    let mut all = vec![started(4, CellKind::Explanation, None, None)];
    all.extend(bodies);
    all
}

#[test]
fn a_streamed_explanation_is_wiped_row_for_row_and_drawn_as_markdown() {
    // 30 characters in 18 columns (20 less the border): two rows.
    let (text, _) = draw(
        live(20, 30),
        None,
        explanation(vec![
            delta(4, ""),
            delta(4, "It is **bold** and it wraps."),
            finished(4, CellStatus::Ok),
        ]),
    );
    assert_eq!(
        text.matches("│ ").count(),
        2 + 2,
        "raw rows, then drawn rows: {text:?}"
    );
    assert!(
        text.contains("\r\u{1b}[1A\u{1b}[J│ It is bold and it"),
        "{text:?}"
    );
}

#[test]
fn what_cannot_be_counted_or_reached_is_not_wiped() {
    // A note among the rows: no wipe, the raw text stays.
    let highlighter = Highlighter::new();
    let mut panels = Panels::new(Vec::new(), live(40, 30), &highlighter, None);
    for event in SessionEvent::numbered(explanation(vec![delta(4, "First words")]), 1) {
        panels.event(&event).unwrap();
    }
    panels.note(Style::new(), "Stopping…").unwrap();
    let closing = SessionEvent::numbered([finished(4, CellStatus::Cancelled)], 9);
    panels.event(&closing[0]).unwrap();
    let text = String::from_utf8(panels.into_inner()).unwrap();
    assert!(!text.contains("\u{1b}[J"), "{text:?}");
    assert_eq!(text.matches("First words").count(), 1, "{text:?}");

    // Taller than the screen, and withdrawn: the raw rows stay, and the
    // reason starts on a row of its own.
    let long = "word ".repeat(40);
    let (text, _) = draw(
        live(20, 3),
        None,
        explanation(vec![
            delta(4, &long),
            EventBody::CellFinished {
                cell_id: CellId(4),
                status: CellStatus::Error,
                elapsed_ms: 5,
                error: Some(CellError {
                    code: UNGROUNDED.into(),
                    message: "withdrawn: it names 9".into(),
                }),
            },
        ]),
    );
    assert!(!text.contains("\u{1b}[J"), "{text:?}");
    assert!(
        text.contains("\n│ (an explanation was withdrawn: it names 9"),
        "{text:?}"
    );
}

#[test]
fn an_explanation_that_starts_over_shows_only_its_new_text() {
    let bodies = |cell: u64| {
        explanation(vec![
            delta(cell, "The total is 7. "),
            EventBody::CellReset {
                cell_id: CellId(cell),
            },
            delta(cell, "It is 8."),
            finished(cell, CellStatus::Ok),
        ])
    };
    // Piped: only what stands is written.
    let (text, _) = draw(Look::PLAIN, None, bodies(4));
    assert!(!text.contains("The total is 7."), "{text}");
    assert!(text.contains("It is 8."), "{text}");
    // Live: the first text is wiped before the new one streams (and the
    // new one once more when it is drawn as markdown at its end).
    let (text, _) = draw(live(40, 30), None, bodies(4));
    assert_eq!(text.matches("\u{1b}[J").count(), 2, "{text:?}");
    assert!(text.contains("It is 8."), "{text:?}");
    // A reset of another cell changes nothing.
    let (text, _) = draw(
        Look::PLAIN,
        None,
        explanation(vec![
            delta(4, "Kept."),
            EventBody::CellReset { cell_id: CellId(9) },
            finished(4, CellStatus::Ok),
        ]),
    );
    assert!(text.contains("Kept."), "{text}");
}

#[test]
fn a_clear_is_said_and_an_updated_display_printed_again() {
    let rich = |text: &str, display_id: Option<&str>| Output::Rich {
        data: [("text/plain".to_string(), text.to_string())].into(),
        main: false,
        metadata: String::new(),
        display_id: display_id.map(str::to_string),
    };
    let (text, _) = draw(
        Look::PLAIN,
        None,
        turn(
            vec![
                started(3, CellKind::Result, Some(1), None),
                output(3, stdout("a\n")),
                EventBody::CellCleared {
                    cell_id: CellId(3),
                    wait: false,
                },
                output(3, stdout("b\n")),
                // A clear that waits (an animation's frame) says nothing.
                EventBody::CellCleared {
                    cell_id: CellId(3),
                    wait: true,
                },
                output(3, rich("v1", Some("d"))),
                EventBody::DisplayUpdated {
                    display_id: "d".into(),
                    output: rich("v2", None),
                },
                finished(3, CellStatus::Ok),
            ],
            TurnStatus::Ok,
        ),
    );
    let rule = format!("── result {}", "─".repeat(80 - 4 - "result".len()));
    let expected = [
        rule.as_str(),
        "a",
        "── output cleared ──",
        "b",
        "v1",
        "v2",
        "✓ done in 2.3 s",
    ]
    .join("\n");
    assert_eq!(text.trim_end(), expected);
}
