//! What the model is told: the system prompts, and the conversation so far
//! rebuilt from the session's notebook within a token budget.

use runcell_protocol::notebook::{Cell, Notebook};
use runcell_protocol::{CellKind, Language, Output, TurnKind};

use runcell_llm::tools::result_message;
use runcell_llm::{Message, Role};

mod browser;
pub use browser::{browser_note, browser_remedy, pip_refusal};

/// The messages of one answered turn, laid out exactly as the live
/// conversation had them when the explanation was written: the question,
/// the program as a fenced block, its result with the request for an
/// explanation, the explanation. A model that keeps the state of a prompt's
/// prefix then reads only what is new in a follow-up.
///
/// Programs and results are plain assistant and user messages even when the
/// model hands programs over as tool calls: some servers' chat templates
/// drop tool messages (llama-cpp-python's `chatml-function-calling` renders
/// a tool message's role and not its content), and a model that never sees
/// the output invents one.
pub fn answered_turn(
    question: &str,
    language: &str,
    code: &str,
    report: &str,
    explanation: &str,
) -> [Message; 4] {
    [
        Message::user(question.to_string()),
        program_message(language, code),
        Message::user(result_message(report, EXPLAIN_REQUEST)),
        Message::assistant(explanation.to_string()),
    ]
}

/// A program the model wrote, as the conversation shows it.
pub fn program_message(language: &str, code: &str) -> Message {
    Message::assistant(format!("```{language}\n{code}\n```"))
}

/// What the model is told it is.
/// Asking for a labelled answer made the small default model compute rather
/// than guess (it answered "how many r's are in strawberry?" with
/// `print("strawberry" * 5)` when asked only to print "its result"); it then
/// wrote command-line tools reading `sys.argv`, hence the "never read input()".
pub const SYSTEM_PROMPT: &str = "You are runcell, a Python code interpreter. For every \
request, write one complete Python program that computes the answer and prints it with a \
short label. Include the imports it needs. Put the values from the request in the code: \
never read input() or command-line arguments. The program runs in the same Python session \
as the earlier programs of this conversation, so their variables and imports can be used. \
Compute every result in the program, never type one in yourself, and keep whole numbers \
exact (`2 ** 100`, not math.pow). Draw a chart only when the request asks for one.";

/// Added to the question when it asks for a chart to hover
/// or zoom: the page draws plotly's figures interactively. Only then: a
/// plain "plot" is best a matplotlib PNG (what the agent benchmark checks
/// for, and it shows without JavaScript too), and the system prompt stays
/// the one the benchmark measured.
pub fn chart_note(request: &str) -> Option<&'static str> {
    let asked = request.to_lowercase();
    ["interactive", "hover", "zoom", "plotly"]
        .iter()
        .any(|word| asked.contains(word))
        .then_some(
            "For an interactive chart (one to hover or zoom), use plotly.express and `fig.show()`.",
        )
}

/// Added to the question when it gives a template for its
/// answer (`@mean[value]`): the last printed lines fill it in. DABench: 4
/// of 18 wrong answers were right values in another form (`-0.53` for the
/// label `skewed_left`, `[ 314 ,  577 ]` for `314, 577`, no rounding).
pub const FORMAT_NOTE: &str = "The question says how to write the answer: the program's \
last printed lines must follow that form exactly (the same names, brackets, separators, \
labels, units and rounding), filled in with the computed values, e.g. \
`print(f\"@total[{total:.2f}]\")` for `@total[value]` with two decimals. When it asks for \
a label or a category, print the label, not the number it is chosen by.";

/// The note for a question that gives a template for its answers
/// (`@name[...]`), which is the question's own instruction restated: it
/// asks for no computation, only the form the question already gives. A
/// form said in words ("in the format ...") gets none: read from English,
/// "the date column is in the format DD/MM" asked for a form nobody wanted.
/// A rounding alone gets none either: with the note, 8 of the agent bench's
/// 52 turns that only asked for a rounding printed a template nobody asked
/// for (`@future_value[162889.00]`).
pub fn format_note(question: &str) -> Option<&'static str> {
    (!super::answered::answer_templates(question).is_empty()).then_some(FORMAT_NOTE)
}

/// How many leading messages of a request are the server's own: 1 when it
/// opens with the system prompt (the rules and the environment's note,
/// nothing a person wrote or uploaded), which a prompt cache may then share
/// between requesters; else 0.
pub fn shared_messages(messages: &[Message]) -> usize {
    usize::from(
        messages
            .first()
            .is_some_and(|m| m.role == Role::System && m.content.starts_with(SYSTEM_PROMPT)),
    )
}

/// A question as the model reads it: after the note that the kernel was
/// lost, if it was, and before the notes on what it asks for, so that the
/// messages before it stay the same from question to question.
pub fn question_message(text: &str, kernel_lost: bool, notes: &[&str]) -> Message {
    let mut question = if kernel_lost {
        format!("{KERNEL_LOST_NOTE}\n\n{text}")
    } else {
        text.to_string()
    };
    if !notes.is_empty() {
        question.push_str("\n\n");
        question.push_str(&notes.join(" "));
    }
    Message::user(question)
}

/// The most of the files note the model is shown, in bytes.
const MAX_FILES_NOTE_BYTES: usize = 3000;

/// What the model is told about the session's files: `(path, size, first
/// lines)` each; `None` when there are none.
pub fn files_note(files: &[(String, u64, Option<String>)]) -> Option<String> {
    if files.is_empty() {
        return None;
    }
    let mut note =
        String::from("The session has these files (the program can open them by these paths):");
    for (path, size, head) in files {
        note.push_str(&format!("\n- {path} ({size} bytes)"));
        if let Some(head) = head.as_deref().filter(|h| !h.is_empty()) {
            note.push_str(", first lines:");
            for line in head.lines() {
                note.push_str(&format!("\n    {line}"));
            }
        }
        if note.len() > MAX_FILES_NOTE_BYTES {
            note = cut(&note, MAX_FILES_NOTE_BYTES);
            break;
        }
    }
    Some(note)
}

/// Put before a question when the kernel was lost since the earlier turns.
pub const KERNEL_LOST_NOTE: &str = "(The Python session was restarted since the programs \
above ran: their variables and imports are gone, so define everything the program uses.)";

/// Sent when a reply held no program that could be read.
pub const NO_PROGRAM_REQUEST: &str = "Your reply held no complete program. Write the \
complete program that answers my question.";

/// Sent when a reply without a program named figures nothing computed.
pub fn compute_request(invented: &[String]) -> String {
    format!(
        "{REGROUNDING_OPEN}{}, which no program computed. Write the complete program that \
         computes the answer and prints it.",
        quoted_figures(invented)
    )
}

/// The first few invented figures, each as inline code.
fn quoted_figures(invented: &[String]) -> String {
    invented
        .iter()
        .take(5)
        .map(|f| format!("`{f}`"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// What stands when every reply answered from memory with made-up figures.
pub const UNCOMPUTED: &str = "No program computed an answer to this question: the model \
answered from memory, with figures nothing computed, so its answers were withdrawn. Ask again, \
or say what to compute.";

/// What a failed program hit, for a question asked again from the start:
/// the error's last line (the traceback's verdict), bounded, with the
/// remedy for a known error.
pub fn failure_summary(report: &str, code: &str, columns: &[String]) -> String {
    let verdict = verdict(report);
    match super::fix_hints::hint(report, code, columns) {
        Some(hint) => format!("`{verdict}`. {hint}"),
        None => format!("`{verdict}`."),
    }
}

/// A failed program's verdict: its report's error line (the last line
/// that names an error, `ValueError: ...`; else the last line), bounded,
/// with backticks made plain quotes so that it reads whole inside the
/// backticks it is quoted in. Pyodide's errors end with a "See https://...
/// for more details." line, which is no verdict.
pub fn verdict(report: &str) -> String {
    let lines = || {
        report
            .lines()
            .rev()
            .map(str::trim)
            .filter(|l| !l.is_empty())
    };
    let last = lines()
        .find(|line| names_an_error(line))
        .or_else(|| lines().next())
        .unwrap_or("it failed");
    cut(&last.replace('`', "'"), 300)
}

/// Whether `line` opens with an exception's name: `KeyError: 'x'`,
/// `numpy.linalg.LinAlgError: ...`, `SyntaxError: invalid syntax`.
fn names_an_error(line: &str) -> bool {
    let Some((name, _)) = line.split_once(':') else {
        return false;
    };
    let name = name.rsplit('.').next().unwrap_or(name);
    !name.is_empty()
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        && ["Error", "Exception", "Interrupt", "Exit"]
            .iter()
            .any(|end| name.ends_with(end))
}

/// Why a program is refused before it runs: it is attempt `earlier`'s
/// again, which came to `verdict`.
pub fn repeated_program(earlier: u32, verdict: &str) -> String {
    format!("this is the same program as attempt {earlier}, which ended with `{verdict}`")
}

/// How the server's statement that no program answered opens.
pub const NO_ANSWER_OPENING: &str = "No answer was computed:";

/// Whether `text` is one of the server's own statements that nothing was
/// computed (`no_answer`, `UNCOMPUTED`), not a model's explanation: its
/// figures are the server's (programs tried, a hint's example), so the
/// benches check only the model's explanations for invented ones.
pub fn is_no_answer_statement(text: &str) -> bool {
    text.starts_with(NO_ANSWER_OPENING) || text == UNCOMPUTED
}

/// What stands when no program of the turn answered: how many were tried
/// and what the last one hit, with no conclusion about the question (the
/// model, asked to explain a failure, concluded anyway).
pub fn no_answer(programs: usize, report: &str, code: &str, columns: &[String]) -> String {
    no_answer_in(programs, report, code, columns, None)
}

/// [`no_answer`], for programs that ran in the Browser sandbox when
/// `browser` (the packages it has) is given: a missing package is met with
/// what that sandbox has and how to choose another.
pub fn no_answer_in(
    programs: usize,
    report: &str,
    code: &str,
    columns: &[String],
    browser: Option<&[String]>,
) -> String {
    let hit = if report.trim().is_empty() || report.contains(NOTHING_PRINTED) {
        "printed nothing".to_string()
    } else {
        format!("ended with `{}`", verdict(report))
    };
    let tried = match programs {
        0 | 1 => format!("the program did not answer the question (it {hit})"),
        n => format!("none of the {n} programs tried answered the question (the last {hit})"),
    };
    if let Some(remedy) = browser.and_then(|imports| browser_remedy(report, imports)) {
        return format!("{NO_ANSWER_OPENING} {tried}, so there is no result to report. {remedy}");
    }
    let hint = super::fix_hints::hint(report, code, columns)
        .map(|h| format!(" What may help: {h}"))
        .unwrap_or_default();
    format!(
        "{NO_ANSWER_OPENING} {tried}, so there is no result to report.{hint} Ask again, \
         perhaps with more detail."
    )
}

/// The question asked again from the start after `failed` programs for it
/// went wrong, the last with `hit`: a small model shown its failed program
/// writes it again, mistake and all.
pub fn start_over(question: &str, failed: u32, hit: &str) -> String {
    format!(
        "{question}\n\n({failed} programs for this went wrong already, the last with: {hit} \
         Write a new complete program from the start.)"
    )
}

/// Sent after a failed program that runcell edited and ran again itself:
/// what it changed (`note`), so that the model's next program keeps it.
pub fn repaired_request(note: &str) -> String {
    format!("The program failed. {note} The edited program ran next:")
}

/// Sent after a failed program, asking for a fix.
pub const FIX_REQUEST: &str = "The program failed. Write the complete corrected program.";

/// The fix request for a failed program `code` whose result is `report`:
/// with the remedy for a known error when there is one. In the Browser
/// sandbox (`browser`: its packages) a missing package's remedy is the
/// packages it has, not the jail's.
pub fn fix_request(
    report: &str,
    code: &str,
    columns: &[String],
    browser: Option<&[String]>,
) -> String {
    if let Some(imports) = browser
        && browser_remedy(report, imports).is_some()
    {
        return format!(
            "{FIX_REQUEST} Hint: {}. Use only those, or compute it without the package.",
            pip_refusal(imports)
        );
    }
    match super::fix_hints::hint(report, code, columns) {
        Some(hint) => format!("{FIX_REQUEST} Hint: {hint}"),
        None => FIX_REQUEST.to_string(),
    }
}

pub use runcell_llm::requests::{EXPLAIN_REQUEST, REGROUNDING_OPEN};

/// Sent when an explanation named figures the output does not show.
pub fn regrounding_request(invented: &[String]) -> String {
    format!(
        "{REGROUNDING_OPEN}{}, which the program's output does not show. Answer again, \
         using only numbers that appear in the output above or in my question.",
        quoted_figures(invented)
    )
}

/// The report of a program that printed nothing.
pub const NOTHING_PRINTED: &str = "(the program printed nothing)";

/// The longest piece of a program's output the model is shown, in bytes.
pub const MAX_REPORT_BYTES: usize = 2000;

/// Output of older turns, once they no longer fit whole.
const SUMMARY_OUTPUT_BYTES: usize = 200;

/// Programs longer than this are shown to the model cut.
const MAX_MEMORY_CODE_BYTES: usize = 4000;

/// A rough token count: four bytes a token, plus a little for each message.
/// Real tokenizers differ by model; this errs on the side of fewer tokens.
pub fn approx_tokens(text: &str) -> usize {
    text.len().div_ceil(4) + 4
}

/// `text` cut to about `max` bytes, keeping its start and its end.
pub fn cut(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_string();
    }
    let head = runcell_sandbox::fit(text, max * 2 / 3);
    let tail_start = text.len() - (max - head.len());
    let mut start = tail_start;
    while !text.is_char_boundary(start) {
        start += 1;
    }
    format!(
        "{head}\n… ({} bytes left out) …\n{}",
        start - head.len(),
        &text[start..]
    )
}

/// The messages before the new question: a user/assistant pair for each
/// earlier turn, newest kept whole, older ones summarised (code and the start
/// of the output), the oldest dropped once `budget` tokens are used.
pub fn history(notebook: &Notebook, budget: usize) -> Vec<Message> {
    let mut turns: Vec<Vec<Message>> = Vec::new();
    let mut used = 0;
    // The turn under way (the one being asked) is not memory.
    for turn in notebook.turns().rev().filter(|t| t.status.is_some()) {
        let cells: Vec<&Cell> = notebook.cells_of(turn.id).collect();
        let code = turn
            .final_cell
            .and_then(|id| cells.iter().find(|c| c.id == id))
            .or_else(|| cells.iter().rev().find(|c| c.kind == CellKind::Code));
        let result = code.and_then(|code| {
            cells
                .iter()
                .rev()
                .find(|c| c.source == Some(code.id) && c.kind == CellKind::Result)
        });
        let question = match turn.kind {
            TurnKind::Ask => cells
                .iter()
                .find(|c| c.kind == CellKind::User)
                .map(|c| c.text.clone()),
            TurnKind::Run => {
                code.map(|c| format!("I ran this myself:\n{}", fenced(c, MAX_MEMORY_CODE_BYTES)))
            }
            TurnKind::Rerun => Some(
                "I re-ran the programs above, in order, in a fresh Python session.".to_string(),
            ),
        };
        let Some(question) = question else { continue };
        let explanation = cells
            .iter()
            .rev()
            .find(|c| c.kind == CellKind::Explanation)
            .map(|c| c.text.as_str())
            .filter(|e| !e.trim().is_empty());
        // An answered question, as it was asked: the same messages again.
        if let (TurnKind::Ask, Some(code), Some(result), Some(explanation)) =
            (turn.kind, code, result, explanation)
            && code.text.len() <= MAX_MEMORY_CODE_BYTES
        {
            let messages = answered_turn(
                &question,
                code.language.as_deref().unwrap_or(Language::Python.name()),
                &code.text,
                &cut(&report_of_cell(result), MAX_REPORT_BYTES),
                explanation,
            );
            let cost: usize = messages.iter().map(|m| approx_tokens(&m.content)).sum();
            if used + cost <= budget {
                used += cost;
                turns.push(messages.to_vec());
                continue;
            }
        } else {
            let whole = answer(turn.kind, code, result, explanation, MAX_REPORT_BYTES);
            let cost = approx_tokens(&question) + approx_tokens(&whole);
            if used + cost <= budget {
                used += cost;
                turns.push(vec![Message::user(question), Message::assistant(whole)]);
                continue;
            }
        }
        let short = answer(turn.kind, code, result, None, SUMMARY_OUTPUT_BYTES);
        let question = cut(&question, 400);
        let cost = approx_tokens(&question) + approx_tokens(&short);
        if used + cost > budget {
            break;
        }
        used += cost;
        turns.push(vec![Message::user(question), Message::assistant(short)]);
    }
    turns.into_iter().rev().flatten().collect()
}

fn fenced(code: &Cell, max: usize) -> String {
    format!(
        "```{}\n{}\n```",
        code.language.as_deref().unwrap_or(Language::Python.name()),
        cut(&code.text, max)
    )
}

fn answer(
    kind: TurnKind,
    code: Option<&&Cell>,
    result: Option<&&Cell>,
    explanation: Option<&str>,
    output_bytes: usize,
) -> String {
    let mut text = String::new();
    if let (TurnKind::Ask, Some(code)) = (kind, code) {
        text.push_str(&fenced(code, MAX_MEMORY_CODE_BYTES));
        text.push('\n');
    }
    if let Some(result) = result {
        text.push_str("Its result:\n");
        text.push_str(&cut(&report_of_cell(result), output_bytes));
        text.push('\n');
    }
    if let Some(explanation) = explanation.filter(|e| !e.trim().is_empty()) {
        text.push_str(explanation);
    }
    if text.is_empty() {
        text.push_str("(no answer)");
    }
    text
}

/// A result cell as text for the model.
pub fn report_of_cell(cell: &Cell) -> String {
    report(&cell.outputs)
}

pub use super::answered::{CHART_SHOWN, FIGURE_SHOWN, HTML_TABLE_SHOWN};

/// Outputs as text for the model: printed text, values, a note for each
/// image, and errors without their colours.
pub fn report(outputs: &[Output]) -> String {
    let mut text = String::new();
    for output in outputs {
        match output {
            Output::Stdout { text: t } => text.push_str(t),
            Output::Stderr { text: t } => text.push_str(&runcell_protocol::render::ansi::strip(t)),
            Output::Rich { data, .. } => {
                if data.contains_key("image/png") || data.contains_key("image/svg+xml") {
                    text.push_str(FIGURE_SHOWN);
                    text.push('\n');
                } else if runcell_protocol::chart_of(data).is_some() {
                    text.push_str(CHART_SHOWN);
                    text.push('\n');
                } else if data.contains_key("text/html") && !data.contains_key("text/plain") {
                    text.push_str(HTML_TABLE_SHOWN);
                    text.push('\n');
                }
                if let Some(plain) = data
                    .get("text/plain")
                    .filter(|_| !data.contains_key("image/png"))
                {
                    text.push_str(plain);
                    text.push('\n');
                }
            }
            Output::Image { .. } => {
                text.push_str(FIGURE_SHOWN);
                text.push('\n');
            }
            Output::Table { text: plain, .. } => {
                text.push_str(plain);
                text.push('\n');
            }
            Output::File { path, size, .. } => {
                text.push_str(&format!("[wrote {path}, {size} bytes]\n"));
            }
            // What pip got from runcell's index: the model learns what is
            // installed now, and why something is not.
            Output::Package {
                project,
                version,
                refused,
                ..
            } => {
                if !text.is_empty() && !text.ends_with('\n') {
                    text.push('\n');
                }
                let line = match refused {
                    Some(why) => format!("[runcell's package index refused {project}: {why}]"),
                    None if version.is_empty() => format!("[runcell installed {project}]"),
                    None => format!("[runcell installed {project} {version}]"),
                };
                text.push_str(&line);
                text.push('\n');
            }
            Output::Error {
                name,
                value,
                traceback,
            } => {
                let trace = runcell_protocol::render::ansi::strip(&traceback.join("\n"));
                if trace.trim().is_empty() {
                    text.push_str(&format!("{name}: {value}\n"));
                } else {
                    text.push_str(&trace);
                    text.push('\n');
                }
            }
        }
    }
    if text.trim().is_empty() {
        NOTHING_PRINTED.into()
    } else {
        text
    }
}

#[cfg(test)]
mod tests {
    use runcell_protocol::{CellId, CellStatus, EventBody, SessionEvent, TurnId, TurnStatus};

    use super::*;

    #[test]
    fn a_start_over_names_the_verdict_and_the_remedy() {
        let report = "Traceback (most recent call last):\n  File \"<cell>\", line 3\n\
                      ValueError: Cannot subset columns with a tuple with more than one element. \
                      Use a list instead.\n\n";
        let hit = failure_summary(report, "t = df.groupby('r')['a', 'b'].sum()", &[]);
        assert!(hit.starts_with("`ValueError: Cannot subset"), "{hit}");
        assert!(hit.contains("Here: write `[['a', 'b']]`"), "{hit}");
        assert_eq!(failure_summary("", "", &[]), "`it failed`.");
        let long = format!("Error: {}", "x".repeat(5000));
        assert!(failure_summary(&long, "", &[]).len() < 400);
        let again = start_over("How much?", 2, &hit);
        assert!(again.starts_with("How much?\n\n(2 programs for this went wrong already"));
        assert!(again.ends_with("Write a new complete program from the start.)"));
    }

    #[test]
    fn plotly_is_suggested_only_for_a_chart_to_hover_or_zoom() {
        assert!(chart_note("Draw a bar chart of the units per region").is_none());
        assert!(chart_note("plot sin(x)").is_none());
        for asked in [
            "an interactive chart of sales",
            "a chart I can hover over",
            "let me Zoom into the peaks",
            "use Plotly",
        ] {
            assert!(chart_note(asked).is_some(), "{asked}");
        }
        assert!(!SYSTEM_PROMPT.contains("plotly"));
    }

    #[test]
    fn the_files_note_lists_paths_sizes_and_first_lines() {
        assert_eq!(files_note(&[]), None);
        let note = files_note(&[
            (
                "/home/user/sales.csv".into(),
                41,
                Some("region,amount\nnorth,10".into()),
            ),
            ("/home/user/photo.png".into(), 9000, None),
        ])
        .unwrap();
        assert!(
            note.contains(
                "- /home/user/sales.csv (41 bytes), first lines:\n    region,amount\n    north,10"
            ),
            "{note}"
        );
        assert!(
            note.contains("- /home/user/photo.png (9000 bytes)"),
            "{note}"
        );
        let many: Vec<_> = (0..500)
            .map(|i| (format!("/home/user/f{i}.txt"), 1, None))
            .collect();
        assert!(files_note(&many).unwrap().len() < MAX_FILES_NOTE_BYTES + 100);
    }

    #[test]
    fn the_verdict_is_the_error_line_without_backticks() {
        let pyodide = "Traceback (most recent call last):\n  File \"<exec>\", line 1\n\
                       ModuleNotFoundError: The module 'numpy' is included in the Pyodide \
                       distribution, but it is not installed.\nYou can install it by calling:\n  \
                       await micropip.install(\"numpy\") in Python, or\nSee \
                       https://pyodide.org/en/stable/usage/loading-packages.html for more details.\n";
        assert_eq!(
            verdict(pyodide),
            "ModuleNotFoundError: The module 'numpy' is included in the Pyodide distribution, \
             but it is not installed."
        );
        assert_eq!(verdict("x\nValueError: bad `x`\n"), "ValueError: bad 'x'");
        assert_eq!(verdict("just words\n"), "just words");
    }

    #[test]
    fn no_answer_in_the_browser_offers_the_local_sandbox() {
        let report = "  File \"<exec>\", line 1\n    %pip install numpy\n    ^\n\
                      SyntaxError: invalid syntax\nModuleNotFoundError: No module named 'numpy'\n";
        let imports = ["six".to_string(), "sympy".to_string()];
        assert_eq!(
            no_answer_in(2, report, "import numpy", &[], Some(&imports)),
            "No answer was computed: none of the 2 programs tried answered the question (the \
             last ended with `ModuleNotFoundError: No module named 'numpy'`), so there is no \
             result to report. The Browser sandbox runs Python in this page and has Python's \
             standard library and six, sympy; it cannot install packages. For `numpy`, choose \
             the local sandbox in the Sandbox picker and ask again."
        );
        // Elsewhere the jail's remedy stands.
        assert!(
            no_answer_in(1, report, "import numpy", &[], None)
                .contains("What may help: No package")
        );
        assert_eq!(
            fix_request(report, "import numpy", &[], Some(&imports)),
            "The program failed. Write the complete corrected program. Hint: the Browser \
             sandbox cannot install packages (there is no pip); it has Python's standard library \
             and six, sympy. Use only those, or compute it without the package."
        );
    }

    /// A notebook of `n` ask turns, each printing a long output.
    fn notebook(n: u64, output_bytes: usize) -> Notebook {
        let mut bodies = Vec::new();
        for t in 1..=n {
            let (user, code, result, explanation) = (
                CellId(t * 10),
                CellId(t * 10 + 1),
                CellId(t * 10 + 2),
                CellId(t * 10 + 3),
            );
            let started = |cell_id, cell_kind, source| EventBody::CellStarted {
                cell_id,
                cell_kind,
                language: Some("python".into()),
                attempt: Some(1),
                source,
            };
            let finished = |cell_id| EventBody::CellFinished {
                cell_id,
                status: CellStatus::Ok,
                elapsed_ms: 1,
                error: None,
            };
            bodies.extend([
                EventBody::TurnStarted {
                    turn: TurnId(t),
                    turn_kind: TurnKind::Ask,
                    alternative_to: None,
                },
                EventBody::UserMessage {
                    cell_id: user,
                    text: format!("question {t}"),
                    markup: None,
                },
                started(code, CellKind::Code, None),
                EventBody::CellDelta {
                    cell_id: code,
                    text: format!("x{t} = {t}\nprint('o' * {output_bytes})"),
                    highlight: None,
                },
                finished(code),
                started(result, CellKind::Result, Some(code)),
                EventBody::CellOutput {
                    cell_id: result,
                    output: Output::Stdout {
                        text: "o".repeat(output_bytes),
                    },
                },
                finished(result),
                started(explanation, CellKind::Explanation, None),
                EventBody::CellDelta {
                    cell_id: explanation,
                    text: format!("explanation {t}"),
                    highlight: None,
                },
                finished(explanation),
                EventBody::TurnFinished {
                    turn: TurnId(t),
                    status: TurnStatus::Ok,
                    elapsed_ms: 1,
                    final_cell: Some(code),
                },
            ]);
        }
        let events = SessionEvent::numbered(bodies, 1);
        Notebook::from_events(&events)
    }

    #[test]
    fn earlier_turns_are_laid_out_as_they_were_asked() {
        let messages = history(&notebook(2, 10), 10_000);
        assert_eq!(messages.len(), 8);
        assert_eq!(messages[0].content, "question 1");
        assert!(
            messages[1].content.contains("```python\nx1 = 1"),
            "{}",
            messages[1].content
        );
        assert!(messages[2].content.contains("oooooooooo"));
        assert!(messages[2].content.ends_with(EXPLAIN_REQUEST));
        assert_eq!(messages[3].content, "explanation 1");
        assert_eq!(messages[4].content, "question 2");

        // Exactly what the live conversation sent.
        let messages = history(&notebook(1, 10), 10_000);
        let live = answered_turn(
            "question 1",
            "python",
            "x1 = 1\nprint('o' * 10)",
            "oooooooooo",
            "explanation 1",
        );
        assert_eq!(messages, live.to_vec());
    }

    #[test]
    fn old_turns_are_summarised_then_dropped_to_fit_the_budget() {
        let notebook = notebook(30, 5000);
        let budget = 3000;
        let messages = history(&notebook, budget);
        let used: usize = messages.iter().map(|m| approx_tokens(&m.content)).sum();
        assert!(used <= budget, "{used} tokens");
        // The newest turn is whole (its explanation kept), older ones are not.
        let last = &messages[messages.len() - 1].content;
        assert!(last.ends_with("explanation 30"), "{last}");
        assert_eq!(messages[messages.len() - 4].content, "question 30");
        let first = &messages[1].content;
        assert!(!first.contains("explanation"), "{first}");
        assert!(first.len() < 600, "{first}");
        // Variables of the newest turns stay visible to the model.
        assert!(messages.iter().any(|m| m.content.contains("x29 = 29")));
        assert!(messages.len() < 60);
    }

    #[test]
    fn long_text_is_cut_in_the_middle() {
        let text = format!("{}{}", "a".repeat(5000), "z".repeat(5000));
        let short = cut(&text, 1000);
        assert!(short.len() < 1100 && short.starts_with('a') && short.ends_with('z'));
        assert_eq!(cut("short", 1000), "short");
        let snow = "☃".repeat(1000);
        assert!(cut(&snow, 100).len() < 150);
    }

    #[test]
    fn reports_name_figures_and_strip_colours() {
        let report = report(&[
            Output::Stdout {
                text: "hi\n".into(),
            },
            Output::Rich {
                data: [("image/png".to_string(), "iVBOR".to_string())].into(),
                main: false,
                metadata: String::new(),
                display_id: None,
            },
            Output::Error {
                name: "ValueError".into(),
                value: "bad".into(),
                traceback: vec!["\u{1b}[31mValueError\u{1b}[0m: bad".into()],
            },
        ]);
        assert_eq!(report, "hi\n[a figure was shown]\nValueError: bad\n");
    }

    #[test]
    fn reports_say_what_the_package_index_served_or_refused() {
        let package = |project: &str, version: &str, refused: Option<&str>| Output::Package {
            project: project.into(),
            version: version.into(),
            size: 11_053,
            cached: false,
            refused: refused.map(String::from),
        };
        let report = report(&[
            Output::Stdout {
                text: "Collecting six".into(),
            },
            package("six", "1.16.0", None),
            package("attrs", "", None),
            package("torch", "2.5.1", Some("larger than the index's limit")),
        ]);
        assert_eq!(
            report,
            "Collecting six\n[runcell installed six 1.16.0]\n[runcell installed attrs]\n\
             [runcell's package index refused torch: larger than the index's limit]\n"
        );
    }

    #[test]
    fn a_question_that_gives_a_template_gets_the_format_note() {
        assert_eq!(
            format_note("Mean fare?\n@mean_fare[value] rounded to two decimals"),
            Some(FORMAT_NOTE)
        );
        // Forms said in words are English, not a template: no note.
        assert_eq!(format_note("Give the date in the format YYYY-MM-DD."), None);
        assert_eq!(format_note("Round the result to 3 decimal places."), None);
        assert_eq!(format_note("What is 6 times 7?"), None);
        assert_eq!(format_note("mail me at a@b.com"), None);
    }

    #[test]
    fn the_notes_follow_the_question_and_only_the_rules_are_shared() {
        assert_eq!(
            question_message("Mean?", false, &[FORMAT_NOTE]).content,
            format!("Mean?\n\n{FORMAT_NOTE}")
        );
        assert_eq!(
            question_message("Mean?", true, &[]).content,
            format!("{KERNEL_LOST_NOTE}\n\nMean?")
        );
        let rules = Message::system(format!("{SYSTEM_PROMPT} {}", browser_note(&[])));
        let files = Message::system("The session has these files");
        assert_eq!(shared_messages(&[rules.clone(), files.clone()]), 1);
        assert_eq!(shared_messages(&[files, rules]), 0);
        assert_eq!(shared_messages(&[Message::user(SYSTEM_PROMPT)]), 0);
        assert_eq!(shared_messages(&[]), 0);
    }
}
