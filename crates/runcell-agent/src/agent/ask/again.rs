//! A regenerated answer: the same question asked again beside its earlier
//! versions (the page's Regenerate). At temperature 0 the same conversation
//! gives the same program byte for byte, so a regenerate is sampled (at
//! [`TEMPERATURE`], with a seed that differs from version to version) and
//! told what the last version's program was; the person is told so on the
//! new program's cell. A sample can be wrong where the first was right: when
//! both ran, the new result is checked against the one before, and the
//! person is told whether the two approaches agree.

use runcell_protocol::notebook::Notebook;
use runcell_protocol::{CellKind, CellStatus, TurnKind, TurnStatus};

use crate::agent::grounding::{self, Figure};
use crate::agent::prompt;

/// How a regenerated answer is sampled: above 0, so that it can differ,
/// and low enough that the program still reads as the model's best.
pub(super) const TEMPERATURE: f32 = 0.7;

/// What a regenerate knows of the versions before it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Regenerated {
    /// Which version this is among those of the same question, from 2: the
    /// seed it is sampled with, so that each regenerate draws another
    /// sample and a test can say which.
    pub version: u64,
    /// The program that stood in the version before, when it had one.
    pub previous: Option<(String, String)>,
    /// What that program printed (as the model reads a result), when it
    /// ran and its turn answered.
    pub previous_result: Option<String>,
}

/// The most figures a note quotes from each version's result.
const QUOTED_FIGURES: usize = 4;

impl Regenerated {
    /// The running turn's place among the versions of `question`: `None`
    /// unless an earlier version beside it asked the very same question
    /// (an edited question is a new question, asked greedily). A version
    /// whose program was refused a kernel is no answer to differ from: it
    /// never ran (asking again after a refusal is asked greedily).
    pub(super) fn of(history: &Notebook, question: &str) -> Option<Self> {
        let running = history
            .all_turns()
            .iter()
            .rev()
            .find(|t| t.status.is_none())?;
        let earlier: Vec<_> = history
            .all_turns()
            .iter()
            .filter(|t| {
                t.id != running.id
                    && t.id < running.id
                    && t.kind == TurnKind::Ask
                    && t.parent == running.parent
                    && t.refused.is_none()
                    && history.question(t.id) == Some(question)
            })
            .collect();
        let last = earlier.last()?;
        let program = last
            .final_cell
            .and_then(|id| history.cell(id))
            .filter(|c| c.kind == CellKind::Code)
            .or_else(|| {
                history
                    .cells_of(last.id)
                    .filter(|c| c.kind == CellKind::Code)
                    .last()
            });
        let previous = program.map(|c| {
            let language = c.language.clone().unwrap_or_else(|| "python".into());
            (language, c.text.clone())
        });
        let previous_result = program
            .filter(|_| last.status == Some(TurnStatus::Ok))
            .and_then(|code| {
                history
                    .cells_of(last.id)
                    .filter(|c| c.kind == CellKind::Result && c.source == Some(code.id))
                    .last()
            })
            .filter(|result| result.status == CellStatus::Ok)
            .map(|result| prompt::cut(&prompt::report_of_cell(result), prompt::MAX_REPORT_BYTES));
        Some(Self {
            version: earlier.len() as u64 + 1,
            previous,
            previous_result,
        })
    }

    /// What the person is told of this version's result `now` beside the
    /// version before's: the same figures (each as printed, or rounded from
    /// the other), or which differ. `None` when the version before gave no
    /// result to compare with.
    pub(super) fn comparison(&self, now: &str) -> Option<String> {
        let before = self.previous_result.as_deref()?;
        let earlier = self.version - 1;
        let (was, is) = (grounding::figures(before), grounding::figures(now));
        let same = if was.is_empty() && is.is_empty() {
            words(before) == words(now)
        } else {
            was.len() == is.len()
                && was
                    .iter()
                    .zip(&is)
                    .all(|(a, b)| grounding::names(a, b) || grounding::names(b, a))
        };
        Some(if same {
            format!(
                "Checked against version {earlier}: it printed the same result, so the two \
                 approaches agree."
            )
        } else {
            format!(
                "Checked against version {earlier}: it printed {}, this version {}. The two \
                 approaches disagree: compare their programs (the arrows above) before \
                 trusting either.",
                quoted(&was, before),
                quoted(&is, now)
            )
        })
    }

    /// The seed this version is sampled with.
    pub(super) fn seed(&self) -> u64 {
        self.version
    }

    /// What the model is told after the question.
    pub(super) fn request(&self) -> String {
        match &self.previous {
            Some((language, code)) => format!(
                "(This question was asked before; the previous version's program was:\n\
                 ```{language}\n{code}\n```\nWrite a different approach: another complete \
                 program that computes the answer another way.)"
            ),
            None => "(This question was asked before: write a different approach.)".to_string(),
        }
    }

    /// What the person is told on the new program's cell.
    pub(super) fn note(&self) -> String {
        format!(
            "Regenerated: version {} of this question, sampled differently (temperature \
             {TEMPERATURE}, seed {}) and told the previous version's program, so it may take \
             another approach.",
            self.version,
            self.seed()
        )
    }
}

/// A result's words, for results without figures ("Iceland"): its lines
/// trimmed, blank ones left out.
fn words(report: &str) -> Vec<&str> {
    report
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect()
}

/// A result in a note: its first figures as printed, or its first line.
fn quoted(figures: &[Figure], report: &str) -> String {
    if figures.is_empty() {
        let line = words(report).first().copied().unwrap_or("nothing");
        let cut: String = line.chars().take(60).collect();
        let more = if cut.len() < line.len() { "…" } else { "" };
        return format!("“{cut}{more}”");
    }
    let shown: Vec<&str> = figures
        .iter()
        .take(QUOTED_FIGURES)
        .map(|f| f.text.as_str())
        .collect();
    let more = if figures.len() > QUOTED_FIGURES {
        ", …"
    } else {
        ""
    };
    format!("{}{more}", shown.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;
    use runcell_protocol::{
        CellId, CellStatus, EventBody, KernelCap, SessionEvent, TurnId, TurnStatus,
    };

    /// A turn asking `question` whose program is `code`, as a version of
    /// `alternative_to` when given; finished unless `running`.
    fn turn(
        id: u64,
        alternative_to: Option<u64>,
        question: &str,
        code: &str,
        running: bool,
    ) -> Vec<EventBody> {
        let (user, program) = (CellId(id * 10), CellId(id * 10 + 1));
        let mut bodies = vec![
            EventBody::TurnStarted {
                turn: TurnId(id),
                turn_kind: TurnKind::Ask,
                alternative_to: alternative_to.map(TurnId),
            },
            EventBody::UserMessage {
                cell_id: user,
                text: question.into(),
                markup: None,
            },
        ];
        if running {
            return bodies;
        }
        bodies.extend([
            EventBody::CellStarted {
                cell_id: program,
                cell_kind: CellKind::Code,
                language: Some("python".into()),
                attempt: Some(1),
                source: None,
            },
            EventBody::CellDelta {
                cell_id: program,
                text: code.into(),
                highlight: None,
            },
            EventBody::CellFinished {
                cell_id: program,
                status: CellStatus::Ok,
                elapsed_ms: 1,
                error: None,
            },
            EventBody::TurnFinished {
                turn: TurnId(id),
                status: TurnStatus::Ok,
                elapsed_ms: 1,
                final_cell: Some(program),
            },
        ]);
        bodies
    }

    fn notebook(turns: Vec<Vec<EventBody>>) -> Notebook {
        Notebook::from_events(&SessionEvent::numbered(turns.into_iter().flatten(), 1))
    }

    #[test]
    fn each_regenerate_is_another_version_told_the_one_before() {
        let q = "sales by region";
        let first = notebook(vec![
            turn(1, None, q, "print(1)", false),
            turn(2, Some(1), q, "", true),
        ]);
        let again = Regenerated::of(&first, q).unwrap();
        assert_eq!(again.version, 2);
        assert_eq!(again.seed(), 2);
        assert_eq!(
            again.request(),
            "(This question was asked before; the previous version's program was:\n\
             ```python\nprint(1)\n```\nWrite a different approach: another complete program \
             that computes the answer another way.)"
        );
        assert_eq!(
            again.note(),
            "Regenerated: version 2 of this question, sampled differently (temperature 0.7, \
             seed 2) and told the previous version's program, so it may take another approach."
        );
        let second = notebook(vec![
            turn(1, None, q, "print(1)", false),
            turn(2, Some(1), q, "print(2)", false),
            turn(3, Some(2), q, "", true),
        ]);
        let again = Regenerated::of(&second, q).unwrap();
        assert_eq!(again.seed(), 3, "another seed for another regenerate");
        assert_eq!(again.previous, Some(("python".into(), "print(2)".into())));
    }

    /// A finished turn whose program printed `printed`, its result ending
    /// `status` (and the turn with it).
    fn ran(
        id: u64,
        alternative_to: Option<u64>,
        q: &str,
        printed: &str,
        ok: bool,
    ) -> Vec<EventBody> {
        let mut bodies = turn(id, alternative_to, q, "print(answer())", false);
        let finished = bodies.pop();
        let (program, result) = (CellId(id * 10 + 1), CellId(id * 10 + 2));
        let status = if ok {
            CellStatus::Ok
        } else {
            CellStatus::Error
        };
        bodies.extend([
            EventBody::CellStarted {
                cell_id: result,
                cell_kind: CellKind::Result,
                language: None,
                attempt: Some(1),
                source: Some(program),
            },
            EventBody::CellOutput {
                cell_id: result,
                output: runcell_protocol::Output::Stdout {
                    text: printed.into(),
                },
            },
            EventBody::CellFinished {
                cell_id: result,
                status,
                elapsed_ms: 1,
                error: None,
            },
        ]);
        if let Some(EventBody::TurnFinished {
            turn, final_cell, ..
        }) = finished
        {
            bodies.push(EventBody::TurnFinished {
                turn,
                status: if ok {
                    TurnStatus::Ok
                } else {
                    TurnStatus::Error
                },
                elapsed_ms: 1,
                final_cell,
            });
        }
        bodies
    }

    #[test]
    fn a_regenerate_is_checked_against_the_result_before() {
        let q = "total sales by region";
        let history = notebook(vec![
            ran(
                1,
                None,
                q,
                "North: 13406.384516\nSouth: 12417.575374\n",
                true,
            ),
            turn(2, Some(1), q, "", true),
        ]);
        let again = Regenerated::of(&history, q).unwrap();
        // Rounded, or with separators: the same figures.
        assert_eq!(
            again
                .comparison("North    13,406.38\nSouth    12,417.58\n")
                .as_deref(),
            Some(
                "Checked against version 1: it printed the same result, so the two approaches \
                 agree."
            )
        );
        assert_eq!(
            again
                .comparison("North: 13406.38\nSouth: 999.5\n")
                .as_deref(),
            Some(
                "Checked against version 1: it printed 13406.384516, 12417.575374, this version \
                 13406.38, 999.5. The two approaches disagree: compare their programs (the \
                 arrows above) before trusting either."
            )
        );
        // One figure more is another result too.
        assert!(
            again
                .comparison("North: 13406.38\nSouth: 12417.58\nEast: 1\n")
                .unwrap()
                .contains("disagree")
        );
    }

    #[test]
    fn results_in_words_are_compared_line_by_line() {
        let q = "which country is happiest";
        let history = notebook(vec![
            ran(1, None, q, "Iceland\n", true),
            turn(2, Some(1), q, "", true),
        ]);
        let again = Regenerated::of(&history, q).unwrap();
        assert!(
            again
                .comparison("  Iceland  \n\n")
                .unwrap()
                .contains("agree.")
        );
        assert_eq!(
            again.comparison("Denmark\n").as_deref(),
            Some(
                "Checked against version 1: it printed “Iceland”, this version “Denmark”. The \
                 two approaches disagree: compare their programs (the arrows above) before \
                 trusting either."
            )
        );
    }

    #[test]
    fn a_version_that_failed_has_no_result_to_check_against() {
        let q = "total sales by region";
        let history = notebook(vec![
            ran(1, None, q, "KeyError 'region'\n", false),
            turn(2, Some(1), q, "", true),
        ]);
        let again = Regenerated::of(&history, q).unwrap();
        assert_eq!(again.previous_result, None);
        assert_eq!(again.comparison("North: 1\n"), None);
    }

    #[test]
    fn a_new_or_edited_question_is_no_regenerate() {
        let one = notebook(vec![turn(1, None, "a", "", true)]);
        assert_eq!(Regenerated::of(&one, "a"), None);
        let edited = notebook(vec![
            turn(1, None, "a", "print(1)", false),
            turn(2, Some(1), "b", "", true),
        ]);
        assert_eq!(Regenerated::of(&edited, "b"), None);
        // The same words as a later question (not a version) are no regenerate.
        let follow = notebook(vec![
            turn(1, None, "a", "print(1)", false),
            turn(2, None, "a", "", true),
        ]);
        assert_eq!(Regenerated::of(&follow, "a"), None);
    }

    #[test]
    fn asking_again_after_a_refused_version_is_no_regenerate() {
        let q = "sales by region";
        // Version 1 wrote its program, and no kernel was free to run it.
        let mut refused = turn(1, None, q, "print(1)", false);
        let Some(EventBody::TurnFinished {
            status,
            final_cell: Some(program),
            ..
        }) = refused.last_mut()
        else {
            panic!("a finished turn");
        };
        *status = TurnStatus::Error;
        let program = *program;
        let at = refused.len() - 1;
        refused.insert(
            at,
            EventBody::KernelRefused {
                cell_id: program,
                cap: KernelCap::Client,
                held: 4,
            },
        );
        let asked_again = notebook(vec![refused.clone(), turn(2, Some(1), q, "", true)]);
        assert_eq!(Regenerated::of(&asked_again, q), None);
        // A version that ran still counts: the third is told of the second.
        let third = notebook(vec![
            refused,
            turn(2, Some(1), q, "print(2)", false),
            turn(3, Some(2), q, "", true),
        ]);
        let again = Regenerated::of(&third, q).unwrap();
        assert_eq!(again.version, 2);
        assert_eq!(again.previous, Some(("python".into(), "print(2)".into())));
    }
}
