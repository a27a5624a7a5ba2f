//! A session's events as a page is sent them: each question, each
//! explanation and each markdown output with its markup, rendered here by
//! [`super::markdown`]. The page shows that markup as it is and renders no
//! markdown itself, so its bundle carries no markdown parser. The log keeps
//! the events as they were published; only what goes to a page (its first
//! render's data and its socket) gains markup.
//!
//! An explanation streams: each of its deltas is sent with the markup of
//! its whole text so far (markdown read again from the start: a list or a
//! table may only take shape with a later line), which the page puts in
//! place of the last.

use std::collections::HashMap;

use super::markdown::{self, MARKDOWN_MARKUP};
use crate::{CellId, CellKind, EventBody, Highlight, Output, SessionEvent};

/// The longest explanation followed, in bytes: past it, its further
/// deltas go as they came, and the page shows the rest as text after the
/// markup it has. Each delta renders the whole text again.
const MAX_FOLLOWED_BYTES: usize = 64 * 1024;

/// The explanations under way, as far as this page was sent them.
#[derive(Debug, Default)]
pub struct PageMarkup {
    /// Each explanation not yet finished: its text so far.
    explanations: HashMap<CellId, String>,
}

impl PageMarkup {
    /// Follows an event the page already has (sent before it connected),
    /// so that an explanation under way is marked up whole from here on.
    pub fn learn(&mut self, event: &SessionEvent) {
        self.follow(&event.event);
    }

    /// `event` as a page is sent it.
    pub fn mark(&mut self, mut event: SessionEvent) -> SessionEvent {
        self.follow(&event.event);
        match &mut event.event {
            EventBody::UserMessage { text, markup, .. } if markup.is_none() => {
                *markup = Some(markdown::question_html(text));
            }
            // The server's own markup (an explanation's math as MathML)
            // stands as it was sent.
            EventBody::CellDelta {
                cell_id,
                highlight: highlight @ None,
                ..
            } => {
                if let Some(text) = self.explanations.get(cell_id) {
                    *highlight = Some(Highlight {
                        html: markdown::to_html(text),
                        upto: text.len(),
                    });
                }
            }
            EventBody::CellOutput { output, .. } | EventBody::DisplayUpdated { output, .. } => {
                mark_output(output);
            }
            _ => {}
        }
        event
    }

    fn follow(&mut self, body: &EventBody) {
        match body {
            EventBody::CellStarted {
                cell_id,
                cell_kind: CellKind::Explanation,
                ..
            } => {
                self.explanations.insert(*cell_id, String::new());
            }
            EventBody::CellDelta { cell_id, text, .. } => {
                let too_long = self.explanations.get_mut(cell_id).is_some_and(|so_far| {
                    so_far.push_str(text);
                    so_far.len() > MAX_FOLLOWED_BYTES
                });
                if too_long {
                    self.explanations.remove(cell_id);
                }
            }
            EventBody::CellReset { cell_id } => {
                if let Some(so_far) = self.explanations.get_mut(cell_id) {
                    so_far.clear();
                }
            }
            EventBody::CellFinished { cell_id, .. } => {
                self.explanations.remove(cell_id);
            }
            _ => {}
        }
    }
}

/// Every event of `events` as a page is sent it (a page's first render).
/// The page keeps only an explanation's last markup, so only each cell's
/// last delta that a live page would have been sent markup with carries
/// one here (the page's data is sent whole, and every delta's would repeat
/// the text's markup as many times). For an explanation past
/// [`MAX_FOLLOWED_BYTES`] that is its last delta within it, so a first
/// render shows the same markup, and the same text after it, as a page
/// that watched it stream.
pub fn marked(events: Vec<SessionEvent>) -> Vec<SessionEvent> {
    let mut last_delta: HashMap<CellId, u64> = HashMap::new();
    let mut followed = PageMarkup::default();
    for event in &events {
        followed.learn(event);
        if let EventBody::CellDelta { cell_id, .. } = &event.event
            && followed.explanations.contains_key(cell_id)
        {
            last_delta.insert(*cell_id, event.seq);
        }
    }
    let mut markup = PageMarkup::default();
    events
        .into_iter()
        .map(|event| match &event.event {
            EventBody::CellDelta { cell_id, .. } if last_delta.get(cell_id) != Some(&event.seq) => {
                markup.learn(&event);
                event
            }
            _ => markup.mark(event),
        })
        .collect()
}

/// A markdown output gains its markup.
fn mark_output(output: &mut Output) {
    if let Output::Rich { data, .. } = output
        && !data.contains_key(MARKDOWN_MARKUP)
        && let Some(text) = data.get("text/markdown")
    {
        let html = markdown::to_html(text);
        data.insert(MARKDOWN_MARKUP.to_string(), html);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::CellStatus;
    use crate::notebook::Notebook;

    fn events(bodies: Vec<EventBody>) -> Vec<SessionEvent> {
        SessionEvent::numbered(bodies, 1)
    }

    fn explanation(cell_id: u64, parts: &[&str]) -> Vec<EventBody> {
        let mut bodies = vec![EventBody::CellStarted {
            cell_id: CellId(cell_id),
            cell_kind: CellKind::Explanation,
            language: None,
            attempt: None,
            source: None,
        }];
        bodies.extend(parts.iter().map(|text| EventBody::CellDelta {
            cell_id: CellId(cell_id),
            text: (*text).into(),
            highlight: None,
        }));
        bodies.push(EventBody::CellFinished {
            cell_id: CellId(cell_id),
            status: CellStatus::Ok,
            elapsed_ms: 1,
            error: None,
        });
        bodies
    }

    /// `bodies` as a page connected throughout is sent them, one at a time.
    fn live(bodies: Vec<EventBody>) -> Vec<SessionEvent> {
        let mut markup = PageMarkup::default();
        events(bodies).into_iter().map(|e| markup.mark(e)).collect()
    }

    /// The page's first cell, folded from what it was sent.
    fn first_cell(sent: &[SessionEvent]) -> crate::notebook::Cell {
        let page = Notebook::from_events(sent);
        page.cells().next().cloned().expect("a cell")
    }

    /// The markup of "The **total** is 5." with a list of `a` and `b`.
    const TOTAL_AND_LIST: &str =
        "<p>The <strong>total</strong> is 5.</p>\n<ul>\n<li>a</li>\n<li>b</li>\n</ul>\n";

    fn highlights(events: &[SessionEvent]) -> Vec<Option<String>> {
        events
            .iter()
            .filter_map(|e| match &e.event {
                EventBody::CellDelta { highlight, .. } => {
                    Some(highlight.as_ref().map(|h| format!("{}@{}", h.html, h.upto)))
                }
                _ => None,
            })
            .collect()
    }

    #[test]
    fn a_question_is_sent_with_its_markup_and_stored_without() {
        let stored = events(vec![EventBody::UserMessage {
            cell_id: CellId(1),
            text: "run this:\n```python\nprint(1)\n```".into(),
            markup: None,
        }]);
        let sent = marked(stored.clone());
        let EventBody::UserMessage { markup, .. } = &sent[0].event else {
            panic!("a question");
        };
        assert_eq!(
            markup.as_deref(),
            Some(
                "<p>run this:</p>\n<pre tabindex=\"0\"><code class=\"language-python\">print(1)\n</code></pre>\n"
            )
        );
        // What is stored (and what API clients read) has none.
        assert!(
            !serde_json::to_string(&stored[0])
                .unwrap()
                .contains("markup")
        );
        let cell = first_cell(&sent);
        assert_eq!(Some(cell.html.clone()), markup.clone());
        assert_eq!(cell.highlighted, cell.text.len());
    }

    #[test]
    fn each_delta_of_an_explanation_carries_its_whole_markup_so_far() {
        let sent = live(explanation(2, &["The **total** is 5.", "\n\n- a", "\n- b"]));
        assert_eq!(
            highlights(&sent),
            [
                Some("<p>The <strong>total</strong> is 5.</p>\n@19".into()),
                Some(
                    "<p>The <strong>total</strong> is 5.</p>\n<ul>\n<li>a</li>\n</ul>\n@24".into()
                ),
                Some(format!("{TOTAL_AND_LIST}@28")),
            ]
        );
        // The page's cell holds the last markup, not the three appended.
        let cell = first_cell(&sent);
        assert_eq!(cell.html, TOTAL_AND_LIST);
        assert_eq!(cell.highlighted, cell.text.len());
    }

    #[test]
    fn a_first_render_marks_up_only_each_explanations_last_delta() {
        let mut bodies = explanation(2, &["The **total** is 5.", "\n\n- a", "\n- b"]);
        // Still streaming: its last delta so far carries the markup.
        bodies.pop();
        let sent = marked(events(bodies));
        assert_eq!(
            highlights(&sent),
            [None, None, Some(format!("{TOTAL_AND_LIST}@28"))]
        );
        let cell = first_cell(&sent);
        assert_eq!(cell.html, TOTAL_AND_LIST);
        assert_eq!(cell.highlighted, cell.text.len());
    }

    #[test]
    fn a_first_render_shows_an_explanation_past_the_cut_as_a_live_page_does() {
        // The first delta is within the followed length, the second goes
        // past it: a live page keeps the first's markup and shows the rest
        // as text after it, and so must a first render.
        let first = format!(
            "The **total** is 5. {}",
            "x".repeat(MAX_FOLLOWED_BYTES - 25)
        );
        let bodies = explanation(4, &[first.as_str(), " and *more*"]);
        let sent = marked(events(bodies.clone()));
        let watched = live(bodies);
        assert_eq!(highlights(&sent), highlights(&watched));
        let cell = first_cell(&sent);
        assert!(
            cell.html
                .starts_with("<p>The <strong>total</strong> is 5. xxx")
        );
        assert_eq!(cell.highlighted, first.len());
        assert_eq!(cell, first_cell(&watched));
    }

    #[test]
    fn a_page_that_joins_mid_explanation_is_sent_the_whole_markup() {
        let all = events(explanation(3, &["First *one*. ", "Then two."]));
        let mut markup = PageMarkup::default();
        // The page has the start and the first delta already.
        for event in &all[..2] {
            markup.learn(event);
        }
        let rest: Vec<_> = all[2..].iter().cloned().map(|e| markup.mark(e)).collect();
        assert_eq!(
            highlights(&rest),
            [Some("<p>First <em>one</em>. Then two.</p>\n@22".into())]
        );
    }

    #[test]
    fn a_reset_starts_the_markup_again_and_the_servers_own_stands() {
        let mut bodies = explanation(4, &["Invented 12,345."]);
        bodies.pop();
        bodies.push(EventBody::CellReset { cell_id: CellId(4) });
        bodies.push(EventBody::CellDelta {
            cell_id: CellId(4),
            text: "It is $x^2$.".into(),
            highlight: None,
        });
        bodies.push(EventBody::CellDelta {
            cell_id: CellId(4),
            text: String::new(),
            highlight: Some(Highlight {
                html: "<p>It is <math>…</math>.</p>\n".into(),
                upto: 12,
            }),
        });
        let sent = live(bodies);
        let marks = highlights(&sent);
        // Read again from the start: the withdrawn text is not in it.
        assert_eq!(
            marks[1].as_deref().map(|h| h.starts_with("<p>It is ")),
            Some(true)
        );
        assert_eq!(
            marks[2].as_deref(),
            Some("<p>It is <math>…</math>.</p>\n@12")
        );
        assert_eq!(first_cell(&sent).html, "<p>It is <math>…</math>.</p>\n");
    }

    #[test]
    fn a_code_cells_deltas_are_left_as_they_are() {
        let bodies = vec![
            EventBody::CellStarted {
                cell_id: CellId(5),
                cell_kind: CellKind::Code,
                language: Some("python".into()),
                attempt: Some(1),
                source: None,
            },
            EventBody::CellDelta {
                cell_id: CellId(5),
                text: "# **not markdown**".into(),
                highlight: None,
            },
        ];
        assert_eq!(highlights(&marked(events(bodies))), [None]);
    }

    #[test]
    fn a_markdown_output_gains_its_markup_and_other_outputs_none() {
        let rich = |key: &str, value: &str| Output::Rich {
            data: [(key.to_string(), value.to_string())].into(),
            main: false,
            metadata: String::new(),
            display_id: None,
        };
        let sent = marked(events(vec![
            EventBody::CellOutput {
                cell_id: CellId(6),
                output: rich("text/markdown", "# Title <script>x</script>"),
            },
            EventBody::CellOutput {
                cell_id: CellId(6),
                output: rich("text/plain", "*plain*"),
            },
        ]));
        let data = |i: usize| match &sent[i].event {
            EventBody::CellOutput {
                output: Output::Rich { data, .. },
                ..
            } => data.clone(),
            _ => panic!("an output"),
        };
        assert_eq!(
            data(0).get(MARKDOWN_MARKUP).map(String::as_str),
            Some("<h1>Title &lt;script&gt;x&lt;/script&gt;</h1>\n")
        );
        assert_eq!(data(1).get(MARKDOWN_MARKUP), None);
    }
}
