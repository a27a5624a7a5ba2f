//! How a turn is judged: the last turn read as a person reads it, whether
//! its final program's output shows the known answer, and which figures
//! its explanation names that nothing shown holds.

use runcell_protocol::notebook::{Cell, Notebook};
use runcell_protocol::{CellKind, CellStatus, EventBody, Output, SessionEvent};

use super::TurnResult;
use super::tasks::Expect;
use runcell_agent::agent::{UNGROUNDED, grounding, prompt};

/// The last turn of a history, as a person reads it: its cells, the code
/// cell whose result stands, that result and its output, the explanation
/// that stands, and how often an explanation started over in place.
pub struct LastTurn {
    pub cells: Vec<Cell>,
    pub code: Option<Cell>,
    pub result: Option<Cell>,
    pub output: String,
    pub explanation: String,
    pub rewritten: usize,
}

impl LastTurn {
    pub fn of(history: &[SessionEvent]) -> Self {
        let notebook = Notebook::from_events(history);
        let (turn, final_cell) = history
            .iter()
            .rev()
            .find_map(|e| match e.event {
                EventBody::TurnFinished {
                    turn, final_cell, ..
                } => Some((Some(turn), final_cell)),
                _ => None,
            })
            .unwrap_or((None, None));
        let cells: Vec<Cell> = notebook
            .cells()
            .filter(|c| c.turn.is_some() && c.turn == turn)
            .cloned()
            .collect();
        let code = final_cell.and_then(|id| cells.iter().find(|c| c.id == id).cloned());
        let result = code.as_ref().and_then(|code| {
            cells
                .iter()
                .rev()
                .find(|c| c.kind == CellKind::Result && c.source == Some(code.id))
                .cloned()
        });
        let output = result
            .as_ref()
            .map(prompt::report_of_cell)
            .unwrap_or_default();
        let explanation = cells
            .iter()
            .rev()
            .find(|c| c.kind == CellKind::Explanation && c.status == CellStatus::Ok)
            .map(|c| c.text.clone())
            .unwrap_or_default();
        let explanation_ids: Vec<_> = cells
            .iter()
            .filter(|c| c.kind == CellKind::Explanation)
            .map(|c| c.id)
            .collect();
        let rewritten = history
            .iter()
            .filter(|e| matches!(&e.event, EventBody::CellReset { cell_id } if explanation_ids.contains(cell_id)))
            .count();
        Self {
            cells,
            code,
            result,
            output,
            explanation,
            rewritten,
        }
    }

    /// The final program ran without an error.
    pub fn ran(&self) -> bool {
        self.result
            .as_ref()
            .is_some_and(|r| r.status == CellStatus::Ok)
    }

    /// Code cells: the first try and each fix.
    pub fn programs(&self) -> usize {
        self.cells
            .iter()
            .filter(|c| c.kind == CellKind::Code)
            .count()
    }

    /// What the page shows about the turn itself, which an explanation may
    /// state without any output holding it: how many programs were tried
    /// ("all 3 programs failed").
    fn own_facts(&self) -> String {
        format!("{} programs", self.programs())
    }

    /// Figures the standing explanation names that neither the final
    /// output, the `question`, the final program nor the page's own facts
    /// hold. The server's statement that nothing was computed is not the
    /// model's explanation (its figures are the server's: the programs
    /// tried, a hint's example) and is not checked.
    pub fn invented(&self, question: &str) -> Vec<String> {
        if prompt::is_no_answer_statement(&self.explanation) {
            return Vec::new();
        }
        let code = self.code.as_ref().map_or("", |c| c.text.as_str());
        grounding::invented(
            &self.explanation,
            &[&self.output, question, code, &self.own_facts()],
            code,
        )
    }
}

/// Scores the last turn of `history` against `expect`.
pub fn judge(question: &str, expect: &Expect, history: &[SessionEvent]) -> TurnResult {
    let turn = LastTurn::of(history);
    let invented = turn.invented(question);
    let LastTurn {
        cells,
        code,
        result,
        output,
        explanation: standing,
        rewritten,
    } = turn;
    let code = code.as_ref();
    let result = result.as_ref();
    let withdrawn_texts: Vec<String> = cells
        .iter()
        .filter(|c| c.kind == CellKind::Explanation)
        .filter(|c| c.error.as_ref().is_some_and(|e| e.code == UNGROUNDED))
        .map(|c| c.text.clone())
        .collect();
    // Why there is no result: the last cell that failed says.
    let problem = cells
        .iter()
        .rev()
        .find_map(|c| c.error.as_ref().filter(|e| e.code != UNGROUNDED))
        .filter(|_| result.is_none_or(|r| r.status != CellStatus::Ok))
        .map(|e| format!("{}: {}", e.code, e.message));
    TurnResult {
        question: question.to_string(),
        // A program that failed answered nothing, whatever its error says.
        right: result.is_some_and(|r| r.status == CellStatus::Ok && is_right(expect, r, &output)),
        ran: result.is_some_and(|r| r.status == CellStatus::Ok),
        invented,
        withdrawn: withdrawn_texts.len() + rewritten,
        problem,
        // Two withdrawn: what stands is the server's, the second's grounded
        // sentences (pruned) or a quote of the output.
        fallback: withdrawn_texts.len() + rewritten >= 2 || is_server_statement(&standing),
        pruned: withdrawn_texts.len() + rewritten >= 2 && !is_server_statement(&standing),
        attempts: cells.iter().filter(|c| c.kind == CellKind::Code).count(),
        earlier_attempts: cells
            .iter()
            .filter(|c| c.kind == CellKind::Code && Some(c.id) != code.map(|c| c.id))
            .map(|c| c.text.clone())
            .collect(),
        code: code.map(|c| c.text.clone()).unwrap_or_default(),
        output: runcell_sandbox::fit(&output, 4000).to_string(),
        explanation: standing,
        withdrawn_texts,
        ..TurnResult::default()
    }
}

/// Whether what stands is the server's statement quoting the output
/// ("The program printed: …", "The program showed a figure, above, …").
fn is_server_statement(standing: &str) -> bool {
    standing.starts_with("The program printed") || standing.starts_with("The program showed")
}

/// Whether the result shows the expected answer.
pub fn is_right(expect: &Expect, result: &Cell, output: &str) -> bool {
    match expect {
        Expect::Image => result.outputs.iter().any(|o| match o {
            Output::Rich { data, .. } => {
                data.contains_key("image/png") || data.contains_key("image/svg+xml")
            }
            Output::Image { .. } => true,
            _ => false,
        }),
        Expect::Number(want) => {
            let want_decimals = decimals_of(*want);
            // Both rounded to the lesser precision of the two agree.
            grounding::figures(output).iter().any(|got| {
                let scale = 10f64.powi(got.decimals.min(want_decimals).clamp(0, 12));
                (got.value * scale).round() == (want * scale).round()
            })
        }
        Expect::Text { right, wrong } => {
            let answer_line = output.lines().rev().map(str::to_lowercase).find(|line| {
                right
                    .iter()
                    .chain(wrong)
                    .any(|c| mentions(line, &c.to_lowercase()))
            });
            answer_line.is_some_and(|line| {
                right.iter().any(|c| mentions(&line, &c.to_lowercase()))
                    && !wrong.iter().any(|c| mentions(&line, &c.to_lowercase()))
            })
        }
    }
}

/// Digits after the point in `x`'s shortest form.
fn decimals_of(x: f64) -> i32 {
    let shown = format!("{x}");
    shown.split_once('.').map_or(0, |(_, d)| d.len() as i32)
}

/// `needle` in `line` as a whole word (at the edges that are letters or
/// digits): "no" is not in "not", "e" is not in "keeper". A figure goes on
/// through a separator between digits: the month "2024-02" is not in the
/// day "2024-02-13", nor "3.1" in "3.14" or "12" in "1,12".
fn mentions(line: &str, needle: &str) -> bool {
    if needle.is_empty() {
        return false;
    }
    let word = |c: Option<char>| c.is_some_and(char::is_alphanumeric);
    let digit = |c: Option<char>| c.is_some_and(|c| c.is_ascii_digit());
    let joins = |c: Option<char>| matches!(c, Some('-' | '.' | '/' | ':' | ','));
    let starts_word = needle.chars().next().is_some_and(char::is_alphanumeric);
    let ends_word = needle.chars().last().is_some_and(char::is_alphanumeric);
    let starts_digit = digit(needle.chars().next());
    let ends_digit = digit(needle.chars().last());
    line.match_indices(needle).any(|(at, _)| {
        let mut before = line[..at].chars().rev();
        let mut after = line[at + needle.len()..].chars();
        let (b1, b2) = (before.next(), before.next());
        let (a1, a2) = (after.next(), after.next());
        let glued = starts_word && word(b1) || ends_word && word(a1);
        let figure_goes_on =
            starts_digit && joins(b1) && digit(b2) || ends_digit && joins(a1) && digit(a2);
        !glued && !figure_goes_on
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn result_cell(outputs: Vec<Output>) -> Cell {
        Cell {
            id: runcell_protocol::CellId(1),
            kind: CellKind::Result,
            turn: None,
            text: String::new(),
            html: String::new(),
            highlighted: 0,
            language: None,
            attempt: None,
            source: None,
            outputs,
            is_final: true,
            status: CellStatus::Ok,
            elapsed_ms: None,
            error: None,
            off_branch: false,
            clear_pending: false,
        }
    }

    fn stdout(text: &str) -> Cell {
        result_cell(vec![Output::Stdout { text: text.into() }])
    }

    fn right(expect: &Expect, text: &str) -> bool {
        is_right(expect, &stdout(text), text)
    }

    /// A turn of `programs` failed programs ending in the server's
    /// statement `explanation`.
    fn failed_turn(programs: u64, explanation: &str) -> Vec<SessionEvent> {
        use runcell_protocol::{CellError, CellId, TurnId, TurnKind, TurnStatus};
        let turn = TurnId(1);
        let started = |cell_id, cell_kind| EventBody::CellStarted {
            cell_id,
            cell_kind,
            language: None,
            attempt: None,
            source: None,
        };
        let text = |cell_id, text: &str| EventBody::CellDelta {
            cell_id,
            text: text.into(),
            highlight: None,
        };
        let finished = |cell_id, status| EventBody::CellFinished {
            cell_id,
            status,
            elapsed_ms: 1,
            error: (status == CellStatus::Error).then(|| CellError {
                code: "program_failed".into(),
                message: "KeyError".into(),
            }),
        };
        let mut bodies = vec![EventBody::TurnStarted {
            turn,
            turn_kind: TurnKind::Ask,
            alternative_to: None,
        }];
        for n in 0..programs {
            let id = CellId(10 + n);
            bodies.push(started(id, CellKind::Code));
            bodies.push(text(id, "print(df['x'].mean())"));
            bodies.push(finished(id, CellStatus::Error));
        }
        let said = CellId(99);
        bodies.push(started(said, CellKind::Explanation));
        bodies.push(text(said, explanation));
        bodies.push(finished(said, CellStatus::Ok));
        bodies.push(EventBody::TurnFinished {
            turn,
            status: TurnStatus::Error,
            elapsed_ms: 1,
            final_cell: None,
        });
        SessionEvent::numbered(bodies, 1)
    }

    #[test]
    fn the_count_of_programs_tried_is_the_pages_own_fact() {
        let said = "All 3 programs failed on a missing column.";
        let judged = judge(
            "the mean of x?",
            &Expect::Number(4.5),
            &failed_turn(3, said),
        );
        assert!(judged.invented.is_empty(), "{:?}", judged.invented);
        // Three programs said where two were tried is a figure nothing shows.
        let judged = judge(
            "the mean of x?",
            &Expect::Number(4.5),
            &failed_turn(2, said),
        );
        assert_eq!(judged.invented, vec!["3".to_string()]);
        assert!(!judged.right && !judged.ran);
    }

    #[test]
    fn the_servers_no_answer_statement_is_not_checked_as_an_explanation() {
        // Its figures are the server's: the count, a hint's `unique()[:20]`.
        let said = prompt::no_answer(
            3,
            "ValueError: `x` and `y` must have length at least 2.",
            "df = df[df['source'] == 'ABC News']",
            &[],
        );
        assert!(prompt::is_no_answer_statement(&said), "{said}");
        let judged = judge(
            "the mean of x?",
            &Expect::Number(4.5),
            &failed_turn(2, &said),
        );
        assert!(judged.invented.is_empty(), "{:?}", judged.invented);
        assert!(prompt::is_no_answer_statement(prompt::UNCOMPUTED));
    }

    #[test]
    fn numbers_count_when_printed_as_given_or_rounded() {
        let e = Expect::Number(1628.89);
        assert!(right(&e, "After 10 years: 1628.894626777442\n"));
        assert!(right(&e, "Balance: $1,628.89\n"));
        assert!(right(&e, "Balance: 1629\n"), "a rounded answer");
        assert!(!right(&e, "Balance: 1628.90\n"));
        assert!(!right(&e, "Balance: 1638.89\n"));
        let e = Expect::Number(168.0);
        assert!(right(&e, "Primes below 1000: 168\n"));
        assert!(right(&e, "168.0\n"));
        assert!(!right(&e, "169\n"));
        assert!(right(
            &Expect::Number(355_687_428_096_000.0),
            "17! = 355687428096000\n"
        ));
        assert!(right(&Expect::Number(0.45), "share 4.5e-01\n"));
    }

    #[test]
    fn names_count_on_the_answer_line_only() {
        let e = Expect::Text {
            right: vec!["West".into()],
            wrong: vec!["North".into(), "East".into()],
        };
        let table = "region\nEast     100\nNorth    200\nWest     300\n";
        assert!(right(&e, &format!("{table}Largest: West\n")));
        assert!(!right(&e, &format!("{table}Largest: North\n")));
        // A table with no answer line after it: its last line decides.
        assert!(!right(&e, "West 300\nNorth 200\n"));
        let leap = Expect::Text {
            right: vec!["false".into(), "no".into()],
            wrong: vec!["true".into(), "yes".into()],
        };
        assert!(right(&leap, "Is 2100 a leap year? False\n"));
        assert!(!right(&leap, "not sure: True\n"), "`no` is not in `not`");
    }

    #[test]
    fn a_lone_name_is_right_on_its_line() {
        let e = Expect::Text {
            right: vec!["llecnur".into()],
            wrong: Vec::new(),
        };
        assert!(right(&e, "llecnur\n"));
        assert!(right(&e, "Reversed: llecnur\n"));
    }

    #[test]
    fn an_image_is_a_rich_output_with_a_picture() {
        let png = result_cell(vec![Output::Rich {
            data: [("image/png".to_string(), "iVBOR".to_string())].into(),
            main: false,
            metadata: String::new(),
            display_id: None,
        }]);
        assert!(is_right(&Expect::Image, &png, ""));
        assert!(!is_right(&Expect::Image, &stdout("plotted"), "plotted"));
    }

    #[test]
    fn mentions_are_whole_words() {
        assert!(mentions("the answer is: e", ": e"));
        assert!(!mentions("bookkeeper", "e"));
        assert!(mentions("10.0.0.5 made 40", "10.0.0.5"));
        assert!(!mentions("10.0.0.50", "10.0.0.5"));
        // A month is not named by a day of it, nor a figure by a longer one.
        assert!(!mentions("highest: 2024-02-13.", "2024-02"));
        assert!(mentions("highest: 2024-02.", "2024-02"));
        assert!(mentions("highest month: 2024-02, with 4537.15", "2024-02"));
        assert!(!mentions("pi is 3.14", "3.1"));
        assert!(!mentions("total 1,120", "120"));
        assert!(mentions("1, 2 and 120", "120"));
    }
}
