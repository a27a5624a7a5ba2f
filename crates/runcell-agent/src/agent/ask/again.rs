//! A regenerated answer: the same question asked again beside its earlier
//! versions (the page's Regenerate). At temperature 0 the same conversation
//! gives the same program byte for byte, so a regenerate is sampled (at
//! [`TEMPERATURE`], with a seed that differs from version to version) and
//! told what the last version's program was; the person is told so on the
//! new program's cell.

use runcell_protocol::notebook::Notebook;
use runcell_protocol::{CellKind, TurnKind};

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
}

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
        let previous = last
            .final_cell
            .and_then(|id| history.cell(id))
            .filter(|c| c.kind == CellKind::Code)
            .or_else(|| {
                history
                    .cells_of(last.id)
                    .filter(|c| c.kind == CellKind::Code)
                    .last()
            })
            .map(|c| {
                let language = c.language.clone().unwrap_or_else(|| "python".into());
                (language, c.text.clone())
            });
        Some(Self {
            version: earlier.len() as u64 + 1,
            previous,
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
        let events: Vec<SessionEvent> = turns
            .into_iter()
            .flatten()
            .enumerate()
            .map(|(i, event)| SessionEvent {
                seq: i as u64 + 1,
                ts_ms: 0,
                event,
            })
            .collect();
        Notebook::from_events(&events)
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
