//! The notebook agent, driven directly: the scripted model writes the
//! programs, the real jail runs them, and the events a page would see are
//! read back from the session's history.

use std::sync::Arc;
use std::time::Duration;

use app::notebook::{Cell, Notebook};
use app::protocol::{
    CellKind, CellStatus, EventBody, Output, ServerMessage, SessionEvent, TurnStatus,
};
use runcell_agent::agent::{Agent, AgentSettings, BrowserOffer, Kernels, TurnRequest};
use runcell_agent::session::{SessionChannel, SessionHub};
use runcell_llm::openai::{OpenAiClient, OpenAiConfig};
use runcell_llm::scripted::{FAILING_CODE, INVENTED, SILENT_CODE, ScriptedLlm};
use runcell_llm::{
    Capabilities, ChatRequest, ChatStream, Completion, FinishReason, Llm, LlmError, LlmEvent,
    ModelInfo, Role, ToolChoice,
};
use runcell_protocol::OwnerId;
use runcell_sandbox::browser::{BrowserSettings, BrowserTabs, Reply};
use runcell_sandbox::jail::{JailConfig, JailSandbox};
use runcell_sandbox::sessions::{SandboxSessions, SessionSettings};
use runcell_sandbox::{Language, Limits};
use runcell_store::SqliteStore;
use tokio_util::sync::CancellationToken;

use crate::support::{ASKED, PATIENCE, closed_port};

struct Harness {
    agent: Arc<Agent>,
    channel: Arc<SessionChannel>,
    _hub: SessionHub,
    _data: tempfile::TempDir,
}

async fn harness_with(llm: Arc<dyn Llm>, max_fixes: u32) -> Harness {
    harness_offering(llm, max_fixes, None).await
}

async fn harness_offering(
    llm: Arc<dyn Llm>,
    max_fixes: u32,
    browser: Option<BrowserOffer>,
) -> Harness {
    let jail = JailSandbox::new(JailConfig::default());
    assert!(jail.unavailable().is_none(), "{:?}", jail.unavailable());
    let sessions = SandboxSessions::new(
        jail,
        SessionSettings {
            pool_size: 0,
            idle_ttl: Duration::from_secs(600),
            max_sessions: 4,
            limits: Limits::default(),
            ..SessionSettings::default()
        },
    );
    let agent = Agent::new(
        llm,
        Kernels::new(
            runcell_sandbox::backends::Backends::new(sessions),
            browser,
            runcell_agent::session::uploads::Uploads::new(
                &std::env::temp_dir().join(format!("runcell-agent-{}", uuid::Uuid::new_v4())),
            ),
        ),
        AgentSettings {
            max_fixes,
            limits: Limits {
                wall: Duration::from_secs(60),
                ..Limits::default()
            },
            ..AgentSettings::default()
        },
    );
    let data = tempfile::tempdir().unwrap();
    let store = SqliteStore::open_in(data.path()).await.unwrap();
    let hub = SessionHub::new(Arc::new(store));
    let channel = hub.create(OwnerId::random()).await.unwrap();
    Harness {
        agent: Arc::new(agent),
        channel,
        _hub: hub,
        _data: data,
    }
}

fn scripted() -> Arc<dyn Llm> {
    Arc::new(ScriptedLlm {
        frame_delay: Duration::from_millis(2),
        slow_delay: Duration::from_millis(300),
        ..ScriptedLlm::default()
    })
}

async fn harness() -> Harness {
    harness_with(scripted(), 2).await
}

/// One turn's events, its notebook and how it ended.
struct Turn {
    events: Vec<SessionEvent>,
    cells: Vec<Cell>,
    status: TurnStatus,
}

impl Turn {
    fn cells(&self) -> &[Cell] {
        &self.cells
    }

    fn kinds(&self) -> Vec<CellKind> {
        self.cells().iter().map(|c| c.kind).collect()
    }

    fn deltas_of(&self, cell: &Cell) -> usize {
        self.events
            .iter()
            .filter(|e| matches!(e.event, EventBody::CellDelta { cell_id, ref text, .. } if cell_id == cell.id && !text.is_empty()))
            .count()
    }
}

impl Harness {
    async fn ask(&self, text: &str) -> Turn {
        self.turn(
            TurnRequest::Ask {
                alternative_to: None,
                text: text.into(),
                model: None,
            },
            |_| false,
        )
        .await
    }

    /// The turn that finished last, if any.
    fn last_finished_turn(&self) -> Option<app::protocol::TurnId> {
        self.channel
            .log()
            .events_after(0)
            .iter()
            .rev()
            .find_map(|e| match e.event {
                EventBody::TurnFinished { turn, .. } => Some(turn),
                _ => None,
            })
    }

    /// Runs a turn; the first event that `stop_at` picks cancels it.
    async fn turn(&self, request: TurnRequest, stop_at: impl Fn(&SessionEvent) -> bool) -> Turn {
        let (from, mut live) = self.channel.log().follow();
        let cancel = CancellationToken::new();
        let turn = self.channel.next_turn_id();
        let task = tokio::spawn({
            let agent = Arc::clone(&self.agent);
            let channel = Arc::clone(&self.channel);
            let cancel = cancel.clone();
            async move { agent.run_turn(channel.log(), turn, request, cancel).await }
        });
        let watched = tokio::time::timeout(PATIENCE * 3, async {
            loop {
                let event = live.recv().await.unwrap();
                if stop_at(&event) {
                    cancel.cancel();
                }
                if matches!(event.event, EventBody::TurnFinished { turn: t, .. } if t == turn) {
                    return;
                }
            }
        })
        .await;
        assert!(watched.is_ok(), "the turn did not finish in time");
        task.await.unwrap();
        let events = self.channel.log().events_after(from);
        let status = match events.last().map(|e| &e.event) {
            Some(EventBody::TurnFinished { status, .. }) => *status,
            other => panic!("the turn ended with {other:?}"),
        };
        let notebook = Notebook::from_events(&self.channel.log().events_after(0));
        Turn {
            cells: notebook.cells_of(turn).cloned().collect(),
            events,
            status,
        }
    }
}

fn fenced(code: &str) -> String {
    format!("```python\n{code}\n```")
}

fn error_name(cell: &Cell) -> Option<&str> {
    cell.outputs.iter().find_map(|o| match o {
        Output::Error { name, .. } => Some(name.as_str()),
        _ => None,
    })
}

#[tokio::test]
async fn a_tool_call_becomes_code_result_and_explanation() {
    let h = harness().await;
    let code = "x = 6 * 7\nfor i in range(3):\n    print('line', i)\nprint('answer', x)";
    let turn = h.ask(&fenced(code)).await;

    assert_eq!(turn.status, TurnStatus::Ok);
    assert_eq!(turn.kinds(), ASKED);
    let [_, code_cell, result, explanation] = turn.cells() else {
        unreachable!()
    };
    assert_eq!(code_cell.text, code);
    assert_eq!(code_cell.language.as_deref(), Some("python"));
    assert_eq!(code_cell.attempt, Some(1));
    assert!(turn.deltas_of(code_cell) >= 2, "the code should stream");
    assert!(code_cell.highlighted > 0, "the code should be highlighted");
    assert!(code_cell.html.contains("hl-"), "{}", code_cell.html);
    assert!(code_cell.is_final);
    assert_eq!(result.source, Some(code_cell.id));
    assert_eq!(result.printed(), "line 0\nline 1\nline 2\nanswer 42\n");
    assert_eq!(result.status, CellStatus::Ok);
    assert!(
        turn.deltas_of(explanation) >= 2,
        "the explanation should stream"
    );
    assert!(
        explanation.text.contains("answer 42"),
        "{}",
        explanation.text
    );
    assert!(turn.cells().iter().all(|c| c.status == CellStatus::Ok));
    match turn.events.last().map(|e| &e.event) {
        Some(EventBody::TurnFinished { final_cell, .. }) => {
            assert_eq!(*final_cell, Some(code_cell.id));
        }
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn a_model_without_tools_gets_its_fenced_code_run() {
    let h = harness().await;
    let turn = h
        .ask(&format!(
            "#scripted: fenced\n{}",
            fenced("print(sum(range(10)))")
        ))
        .await;
    assert_eq!(turn.status, TurnStatus::Ok);
    assert_eq!(turn.kinds(), ASKED);
    assert_eq!(turn.cells()[1].text, "print(sum(range(10)))");
    assert_eq!(turn.cells()[2].printed(), "45\n");
}

#[tokio::test]
async fn a_failed_program_is_fixed_on_the_second_attempt() {
    let h = harness().await;
    let turn = h
        .ask(&format!(
            "#scripted: fail_first\n{}",
            fenced("print('fixed')")
        ))
        .await;
    assert_eq!(turn.status, TurnStatus::Ok);
    assert_eq!(
        turn.kinds(),
        [
            CellKind::User,
            CellKind::Code,
            CellKind::Result,
            CellKind::Code,
            CellKind::Result,
            CellKind::Explanation
        ]
    );
    let cells = turn.cells();
    assert_eq!(cells[1].text, FAILING_CODE);
    assert_eq!(cells[1].attempt, Some(1));
    assert!(!cells[1].is_final);
    assert_eq!(error_name(&cells[2]), Some("RuntimeError"));
    assert_eq!(cells[2].status, CellStatus::Error);
    assert_eq!(cells[3].attempt, Some(2));
    assert!(cells[3].is_final);
    assert_eq!(cells[4].printed(), "fixed\n");
    assert_eq!(cells[4].status, CellStatus::Ok);
}

#[tokio::test]
async fn a_program_written_again_is_refused_and_the_turn_says_nothing_was_computed() {
    let h = harness().await;
    // The scripted model writes the same failing program every time.
    let turn = h.ask(&fenced("print(1 / 0)")).await;
    assert_eq!(turn.status, TurnStatus::Error);
    let codes: Vec<&Cell> = turn
        .cells()
        .iter()
        .filter(|c| c.kind == CellKind::Code)
        .collect();
    // It ran once; each copy after it was refused before it ran, and asked
    // for anew (twice), without using up the turn's fixes.
    assert_eq!(
        codes.iter().map(|c| c.attempt).collect::<Vec<_>>(),
        [Some(1), Some(2), Some(3), Some(4)]
    );
    let results: Vec<&Cell> = turn
        .cells()
        .iter()
        .filter(|c| c.kind == CellKind::Result)
        .collect();
    assert_eq!(results.len(), 4);
    assert_eq!(error_name(results[0]), Some("ZeroDivisionError"));
    for refused in &results[1..] {
        assert_eq!(error_code(refused), Some("repeated_program"));
        assert!(
            refused
                .error
                .as_ref()
                .unwrap()
                .message
                .contains("same program as attempt 1"),
            "{:?}",
            refused.error
        );
    }
    // No conclusion: the server says nothing was computed, and what it hit.
    let explanation = turn.cells().last().unwrap();
    assert_eq!(explanation.kind, CellKind::Explanation);
    assert!(
        explanation.text.starts_with("No answer was computed")
            && explanation.text.contains("ZeroDivisionError"),
        "{}",
        explanation.text
    );

    // Fewer fixes when configured so.
    let h = harness_with(scripted(), 0).await;
    let turn = h.ask(&fenced("print(1 / 0)")).await;
    let attempts = turn
        .kinds()
        .iter()
        .filter(|k| **k == CellKind::Code)
        .count();
    assert_eq!(attempts, 1);
}

#[tokio::test]
async fn unacceptable_programs_are_refused_before_they_run() {
    let h = harness_with(scripted(), 0).await;
    // A model that names a language runcell does not run.
    let call =
        r#"{"name": "execute_code", "arguments": {"language": "cobol", "code": "DISPLAY 'HI'."}}"#;
    let turn = h.ask(&format!("```json\n{call}\n```")).await;
    assert_eq!(turn.status, TurnStatus::Error);
    let result = &turn.cells()[2];
    assert_eq!(result.kind, CellKind::Result);
    assert_eq!(error_name(result), Some("InvalidCode"));
    assert_eq!(
        result.error.as_ref().map(|e| e.code.as_str()),
        Some("invalid_code")
    );

    // The kernel compiles a program before it runs any of it.
    let turn = h.ask(&fenced("print('never shown')\ndef broken(:\n")).await;
    let result = &turn.cells()[2];
    assert_eq!(error_name(result), Some("SyntaxError"));
    assert!(!result.printed().contains("never shown"));
}

#[tokio::test]
async fn a_follow_up_uses_the_variables_of_earlier_turns() {
    let h = harness().await;
    let first = h.ask(&fenced("primes = [p for p in range(2, 30) if all(p % d for d in range(2, p))]\nprint(len(primes))")).await;
    assert_eq!(first.cells()[2].printed(), "10\n");
    let second = h
        .ask(&fenced(
            "twins = [(p, p + 2) for p in primes if p + 2 in primes]\nprint(twins)",
        ))
        .await;
    assert_eq!(second.status, TurnStatus::Ok);
    assert_eq!(
        second.cells()[2].printed(),
        "[(3, 5), (5, 7), (11, 13), (17, 19)]\n"
    );
}

#[tokio::test]
async fn stop_while_the_model_writes_ends_the_turn_and_the_session_goes_on() {
    let h = harness().await;
    let turn = h
        .turn(
            TurnRequest::Ask {
                alternative_to: None,
                text: format!(
                    "#scripted: slow\n{}",
                    fenced("for word in 'the quick brown fox jumps over the lazy dog'.split():\n    print(word)")
                ),
                model: None,
            },
            |e| matches!(e.event, EventBody::CellDelta { .. }),
        )
        .await;
    assert_eq!(turn.status, TurnStatus::Cancelled);
    assert_eq!(turn.kinds(), [CellKind::User, CellKind::Code]);
    assert_eq!(turn.cells()[1].status, CellStatus::Cancelled);

    let next = h.ask(&fenced("print('after stop')")).await;
    assert_eq!(next.status, TurnStatus::Ok);
    assert_eq!(next.cells()[2].printed(), "after stop\n");
}

#[tokio::test]
async fn stop_while_the_program_runs_interrupts_it_and_the_session_goes_on() {
    let h = harness().await;
    let turn = h
        .turn(
            TurnRequest::Ask {
                alternative_to: None,
                text: fenced("import time\nprint('started', flush=True)\ntime.sleep(120)\nprint('never')"),
                model: None,
            },
            |e| {
                matches!(&e.event, EventBody::CellOutput { output: Output::Stdout { text }, .. } if text.contains("started"))
            },
        )
        .await;
    assert_eq!(turn.status, TurnStatus::Cancelled);
    assert_eq!(
        turn.kinds(),
        [CellKind::User, CellKind::Code, CellKind::Result],
        "no explanation after a stop"
    );
    let result = &turn.cells()[2];
    assert_eq!(result.status, CellStatus::Cancelled);
    assert!(result.printed().contains("started"));
    assert!(!result.printed().contains("never"));

    let next = h.ask(&fenced("print('after stop')")).await;
    assert_eq!(next.status, TurnStatus::Ok);
    assert!(next.cells()[2].printed().contains("after stop"));
}

#[tokio::test]
async fn edited_code_runs_as_written_without_the_model() {
    let h = harness().await;
    let turn = h
        .turn(
            TurnRequest::Run {
                code: "print('edited')".into(),
                language: Language::Python,
                source: None,
            },
            |_| false,
        )
        .await;
    assert_eq!(turn.status, TurnStatus::Ok);
    assert_eq!(turn.kinds(), [CellKind::Code, CellKind::Result]);
    assert_eq!(turn.cells()[1].printed(), "edited\n");
}

#[tokio::test]
async fn a_dead_model_server_is_an_error_cell_and_the_session_still_works() {
    let port = closed_port();
    let client = OpenAiClient::new(OpenAiConfig {
        max_retries: 0,
        ..OpenAiConfig::new(format!("http://127.0.0.1:{port}/v1"))
    })
    .unwrap();
    let h = harness_with(Arc::new(client), 2).await;
    let turn = h.ask("what is 2 + 2?").await;
    assert_eq!(turn.status, TurnStatus::Error);
    assert_eq!(turn.kinds(), [CellKind::User, CellKind::Code]);
    assert_eq!(
        turn.cells()[1].error.as_ref().map(|e| e.code.as_str()),
        Some("llm_unreachable")
    );
    // Code still runs in the session, and asking again fails the same way.
    let run = h
        .turn(
            TurnRequest::Run {
                code: "print(2 + 2)".into(),
                language: Language::Python,
                source: None,
            },
            |_| false,
        )
        .await;
    assert_eq!(run.cells()[1].printed(), "4\n");
    assert_eq!(h.ask("still there?").await.status, TurnStatus::Error);
}

/// The scripted model, except that its first explanation is empty (as a
/// small model's now and then is).
struct SilentOnce {
    inner: ScriptedLlm,
    silent: std::sync::atomic::AtomicBool,
}

#[async_trait::async_trait]
impl Llm for SilentOnce {
    fn backend(&self) -> &'static str {
        "scripted"
    }

    fn capabilities(&self) -> Capabilities {
        self.inner.capabilities()
    }

    async fn models(&self) -> Result<Vec<ModelInfo>, LlmError> {
        self.inner.models().await
    }

    async fn chat(&self, request: ChatRequest) -> Result<ChatStream, LlmError> {
        let explaining = request.tool_choice == ToolChoice::None;
        if explaining && self.silent.swap(false, std::sync::atomic::Ordering::SeqCst) {
            let done = LlmEvent::Done(Completion {
                text: String::new(),
                tool_calls: Vec::new(),
                finish_reason: FinishReason::Stop,
                usage: None,
            });
            return Ok(Box::pin(futures::stream::iter([Ok(done)])));
        }
        self.inner.chat(request).await
    }
}

#[tokio::test]
async fn an_empty_explanation_is_asked_for_again() {
    let llm = SilentOnce {
        inner: ScriptedLlm {
            frame_delay: Duration::from_millis(2),
            ..ScriptedLlm::default()
        },
        silent: std::sync::atomic::AtomicBool::new(true),
    };
    let h = harness_with(Arc::new(llm), 0).await;
    let turn = h.ask(&fenced("print('explained')")).await;
    assert_eq!(turn.status, TurnStatus::Ok);
    let explanation = turn.cells().last().unwrap();
    assert_eq!(explanation.kind, CellKind::Explanation);
    assert_eq!(explanation.status, CellStatus::Ok);
    assert!(
        explanation.text.contains("explained"),
        "{}",
        explanation.text
    );
}

/// A model that remembers what it was asked.
struct Recording {
    inner: Arc<dyn Llm>,
    asked: std::sync::Mutex<Vec<ChatRequest>>,
    /// What it was given to read ahead.
    ahead: std::sync::Mutex<Vec<ChatRequest>>,
}

#[async_trait::async_trait]
impl Llm for Recording {
    fn backend(&self) -> &'static str {
        self.inner.backend()
    }

    fn capabilities(&self) -> Capabilities {
        self.inner.capabilities()
    }

    async fn models(&self) -> Result<Vec<ModelInfo>, LlmError> {
        self.inner.models().await
    }

    async fn chat(&self, request: ChatRequest) -> Result<ChatStream, LlmError> {
        self.asked.lock().unwrap().push(request.clone());
        self.inner.chat(request).await
    }

    async fn prefill(&self, request: ChatRequest) -> Result<(), LlmError> {
        self.ahead.lock().unwrap().push(request);
        Ok(())
    }
}

#[tokio::test]
async fn the_model_is_told_the_sessions_files_and_what_they_hold() {
    let model = Recording::new();
    let h = harness_with(model.clone(), 0).await;
    let csv = b"region,amount\nnorth,10\nsouth,32\neast,7\n".to_vec();
    h.agent
        .kernels()
        .upload(h.channel.id(), "sales.csv", csv.clone().into(), false)
        .await
        .unwrap();
    // An upload never replaces a file silently.
    assert!(
        h.agent
            .kernels()
            .upload(h.channel.id(), "sales.csv", csv.into(), false)
            .await
            .is_err()
    );
    let turn = h
        .ask(&fenced(
            "import csv\nprint('rows:', len(list(csv.DictReader(open('/home/user/sales.csv')))))",
        ))
        .await;
    assert_eq!(turn.status, TurnStatus::Ok);
    assert!(turn.cells().iter().any(|c| {
        c.kind == CellKind::Result
            && c.outputs
                .iter()
                .any(|o| matches!(o, Output::Stdout { text } if text == "rows: 3\n"))
    }),);
    let system = system_messages(&model.asked.lock().unwrap()[0]);
    assert!(
        system.contains(
            "- /home/user/sales.csv (39 bytes): a table of 3 rows and 2 columns\n    columns, as Python writes them: 'region' (str), 'amount' (int64)\n    first rows:\n      north | 10"
        ),
        "{system}"
    );

    // The upload outlives the kernel: a fresh one has it again.
    h.agent.kernels().reset(h.channel.id()).await;
    let again = h
        .ask(&fenced(
            "print(open('/home/user/sales.csv').read().count('\\n'))",
        ))
        .await;
    assert!(
        again.cells().iter().any(|c| c
            .outputs
            .iter()
            .any(|o| matches!(o, Output::Stdout { text } if text == "4\n"))),
        "{:?}",
        again.cells()
    );
    // What the code writes is offered from its result cell: tables and
    // images, not everything.
    let wrote = h
        .ask(&fenced(
            "open('out.csv', 'w').write('a,b\\n1,2\\n')\nopen('notes.bin', 'wb').write(b'x')",
        ))
        .await;
    let offered: Vec<&Output> = wrote
        .cells()
        .iter()
        .flat_map(|c| c.outputs.iter())
        .filter(|o| matches!(o, Output::File { .. }))
        .collect();
    assert_eq!(
        offered,
        [&Output::File {
            path: "/home/user/out.csv".into(),
            name: "out.csv".into(),
            size: 8,
        }]
    );
    // Deleting the session forgets it.
    h.agent.drop_kernel(h.channel.id()).await;
    assert!(
        h.agent
            .kernels()
            .list_files(h.channel.id())
            .await
            .unwrap()
            .is_empty()
    );
}

#[tokio::test]
async fn the_last_fix_starts_over_from_the_question_without_the_failed_programs() {
    let model = Recording::new();
    let h = harness_with(model.clone(), 2).await;
    // pandas 3's refusal, raised every time: the scripted model writes the
    // question's program again and again.
    let program = "import pandas as pd\n\
        df = pd.DataFrame({'r': ['a', 'b'], 'units': [1, 2], 'price': [3.0, 4.0]})\n\
        t = df.groupby('r')['units', 'price'].sum()";
    let turn = h.ask(&fenced(program)).await;
    assert_eq!(turn.status, TurnStatus::Error);
    let asked = model.asked.lock().unwrap().clone();
    let writing: Vec<&ChatRequest> = asked
        .iter()
        .filter(|r| r.tool_choice != ToolChoice::None)
        .collect();
    // One run, then the same program three times: each refused, the
    // first two asked for anew.
    assert_eq!(writing.len(), 4, "{}", writing.len());
    let shown_programs = |r: &ChatRequest| {
        r.messages
            .iter()
            .filter(|m| m.role == Role::Assistant && m.content.contains("groupby('r')"))
            .count()
    };
    // The first fix patches: it sees the failed program and the remedy.
    assert_eq!(shown_programs(writing[1]), 1);
    let fix = &writing[1].messages.last().unwrap().content;
    assert!(
        fix.contains("Cannot subset columns with a tuple") && fix.contains("[['units', 'price']]"),
        "{fix}"
    );
    // A repeat starts over, a little less greedily: the question again,
    // told what went wrong, and no failed program to copy.
    assert_eq!(shown_programs(writing[2]), 0, "{:?}", writing[2].messages);
    assert_eq!(writing[2].temperature, Some(0.5));
    assert_eq!(writing[2].messages.len(), writing[0].messages.len());
    let last = writing[2].messages.last().unwrap();
    assert_eq!(last.role, Role::User);
    assert!(
        last.content
            .starts_with(&writing[0].messages.last().unwrap().content)
    );
    assert!(
        last.content
            .contains("2 programs for this went wrong already")
            && last
                .content
                .contains("ValueError: Cannot subset columns with a tuple")
            && last.content.contains("add the product as a column first"),
        "{}",
        last.content
    );
    // The notebook still shows every program written.
    let codes = turn
        .cells()
        .iter()
        .filter(|c| c.kind == CellKind::Code)
        .count();
    assert_eq!(codes, 4);
}

/// A harness whose session runs its programs in the page (the Browser
/// sandbox), with short waits for it.
async fn harness_in_the_page() -> (Harness, Arc<BrowserTabs>) {
    let tabs = BrowserTabs::new(BrowserSettings {
        attach_wait: Duration::from_millis(300),
        gone_grace: Duration::from_millis(300),
        stop_grace: Duration::from_millis(300),
        prepare_wait: Duration::from_millis(300),
    });
    let offer = BrowserOffer {
        tabs: Arc::clone(&tabs),
        imports: Vec::new(),
    };
    let h = harness_offering(scripted(), 2, Some(offer)).await;
    h.agent
        .kernels()
        .choose(h.channel.id(), runcell_sandbox::SandboxKind::Browser)
        .unwrap();
    (h, tabs)
}

fn error_code(cell: &Cell) -> Option<&str> {
    cell.error.as_ref().map(|e| e.code.as_str())
}

#[tokio::test]
async fn a_sandbox_that_cannot_run_the_program_ends_the_turn_without_fixes() {
    let (h, tabs) = harness_in_the_page().await;
    let session = h.channel.id();
    let started = std::time::Instant::now();
    // No page runs the session's Python: one attempt, its error, the end.
    let turn = h.ask(&fenced("print(1)")).await;
    assert_eq!(turn.status, TurnStatus::Error);
    assert_eq!(
        turn.kinds(),
        [CellKind::User, CellKind::Code, CellKind::Result],
        "no fix, no explanation"
    );
    let result = &turn.cells()[2];
    assert_eq!(error_name(result), Some("SandboxError"));
    assert_eq!(error_code(result), Some("sandbox_unavailable"));
    assert!(
        result
            .error
            .as_ref()
            .unwrap()
            .message
            .contains("pick Browser"),
        "{:?}",
        result.error
    );
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "one wait for a page, not one per attempt"
    );

    // The page goes away mid-run: the same.
    let (link, mut frames) = tabs.link();
    tabs.attach(session, &link, "k").unwrap();
    let page = tokio::spawn({
        let tabs = Arc::clone(&tabs);
        async move {
            let Some(ServerMessage::BrowserRun { .. }) = frames.recv().await else {
                panic!("expected a run");
            };
            tabs.detach(session, link.conn());
        }
    });
    let turn = h.ask(&fenced("while True: pass")).await;
    page.await.unwrap();
    assert_eq!(turn.status, TurnStatus::Error);
    assert_eq!(
        turn.kinds(),
        [CellKind::User, CellKind::Code, CellKind::Result]
    );
    let result = &turn.cells()[2];
    assert_eq!(error_code(result), Some("sandbox_unavailable"));
    assert!(
        result.error.as_ref().unwrap().message.contains("went away"),
        "{:?}",
        result.error
    );
}

#[tokio::test]
async fn a_program_that_fails_in_the_page_is_still_fixed() {
    let (h, tabs) = harness_in_the_page().await;
    let session = h.channel.id();
    let (link, mut frames) = tabs.link();
    tabs.attach(session, &link, "k").unwrap();
    // The page: the first attempt raises, the fix prints.
    let page = tokio::spawn({
        let tabs = Arc::clone(&tabs);
        async move {
            for output in [
                Output::Error {
                    name: "NameError".into(),
                    value: "name 'x' is not defined".into(),
                    traceback: Vec::new(),
                },
                Output::Stdout {
                    text: "fixed\n".into(),
                },
            ] {
                let Some(ServerMessage::BrowserRun { run, .. }) = frames.recv().await else {
                    panic!("expected a run");
                };
                let conn = link.conn();
                tabs.reply(session, conn, run, Reply::Started)
                    .await
                    .unwrap();
                tabs.reply(session, conn, run, Reply::Output(output))
                    .await
                    .unwrap();
                tabs.reply(session, conn, run, Reply::Done { kernel: "k".into() })
                    .await
                    .unwrap();
            }
        }
    });
    // The fix is another program (the same one would be refused unrun).
    let turn = h
        .ask(&format!("#scripted: fail_first\n{}", fenced("print(x)")))
        .await;
    page.await.unwrap();
    assert_eq!(turn.status, TurnStatus::Ok);
    assert_eq!(
        turn.kinds(),
        [
            CellKind::User,
            CellKind::Code,
            CellKind::Result,
            CellKind::Code,
            CellKind::Result,
            CellKind::Explanation
        ]
    );
    assert_eq!(error_name(&turn.cells()[2]), Some("NameError"));
    assert_eq!(turn.cells()[4].printed(), "fixed\n");
}

/// The display flood in a notebook: a bounded number and size of
/// `cell_output` events (each one is kept in memory, in the store and sent
/// to every page), the output error in the cell, and the kernel goes on.
#[tokio::test]
async fn a_display_flood_yields_bounded_cell_outputs() {
    let h = harness().await;
    let run = |code: &str| TurnRequest::Run {
        code: code.into(),
        language: Language::Python,
        source: None,
    };
    let flood = "from IPython.display import display, HTML\nx = 'x' * 2_000_000\nfor _ in range(40):\n    display(HTML(x))";
    let turn = h.turn(run(flood), |_| false).await;
    let outputs: Vec<&Output> = turn
        .events
        .iter()
        .filter_map(|e| match &e.event {
            EventBody::CellOutput { output, .. } => Some(output),
            _ => None,
        })
        .collect();
    let bytes: usize = outputs
        .iter()
        .map(|o| serde_json::to_string(o).unwrap().len())
        .sum();
    assert!(
        outputs.len() <= runcell_sandbox::MAX_RESULTS + 2,
        "{}",
        outputs.len()
    );
    assert!(
        bytes <= Limits::default().output_bytes + 64 * 1024,
        "{bytes} bytes of cell outputs"
    );
    assert_eq!(error_name(&turn.cells()[1]), Some("OutputLimit"));

    // The session goes on. Its variables usually do too; on a loaded
    // machine the kernel may still be busy with the flood when the limit
    // stops it, and is then replaced, its variables gone.
    let next = h
        .turn(run("print('after', len(globals().get('x', '')))"), |_| {
            false
        })
        .await;
    let printed = next.cells()[1].printed();
    assert!(
        printed == "after 2000000\n" || printed == "after 0\n",
        "{printed:?}"
    );
}

#[tokio::test]
async fn an_explanation_with_an_invented_figure_is_held_and_rewritten_in_place() {
    let h = harness().await;
    let turn = h
        .ask(&format!(
            "#scripted: invent_once\n{}",
            fenced("print(6 * 7)")
        ))
        .await;
    assert_eq!(turn.status, TurnStatus::Ok);
    assert_eq!(
        turn.kinds(),
        [
            CellKind::User,
            CellKind::Code,
            CellKind::Result,
            CellKind::Explanation
        ]
    );
    let cells = turn.cells();
    // The first draft names 12,345, which nothing printed: that sentence is
    // never sent; the cell starts over with the second draft, which quotes
    // the output, and stands.
    let explanation = &cells[3];
    assert_eq!(explanation.status, CellStatus::Ok);
    assert!(explanation.text.contains("42") && !explanation.text.contains(INVENTED));
    assert_eq!(resets(&turn, explanation.id), 1);
    assert_never_shown(&turn, INVENTED);
}

/// How many times the cell started over.
fn resets(turn: &Turn, cell: app::protocol::CellId) -> usize {
    turn.events
        .iter()
        .filter(|e| matches!(&e.event, EventBody::CellReset { cell_id } if *cell_id == cell))
        .count()
}

/// No text sent to the page holds `figure`.
fn assert_never_shown(turn: &Turn, figure: &str) {
    for event in &turn.events {
        if let EventBody::CellDelta { text, .. } = &event.event {
            assert!(!text.contains(figure), "shown: {text:?}");
        }
    }
}

#[tokio::test]
async fn a_model_that_keeps_inventing_figures_is_replaced_by_the_output_quoted() {
    let h = harness().await;
    let turn = h
        .ask(&format!(
            "#scripted: invent\n{}",
            fenced("print('total:', 6 * 7)")
        ))
        .await;
    assert_eq!(turn.status, TurnStatus::Ok);
    let explanations: Vec<&Cell> = turn
        .cells()
        .iter()
        .filter(|c| c.kind == CellKind::Explanation)
        .collect();
    assert_eq!(explanations.len(), 1, "one cell, rewritten in place");
    let standing = explanations[0];
    assert_eq!(standing.status, CellStatus::Ok);
    assert_eq!(
        resets(&turn, standing.id),
        2,
        "a second draft, then the output quoted"
    );
    assert!(standing.text.contains("total: 42"), "{}", standing.text);
    assert!(!standing.text.contains(INVENTED));
    assert_never_shown(&turn, INVENTED);
}

#[tokio::test]
async fn an_answer_from_memory_with_made_up_figures_is_never_shown_and_a_program_asked_for() {
    let h = harness().await;
    let turn = h
        .ask("#scripted: prose_invent\nWhat is x divided by 5?")
        .await;
    assert_eq!(turn.status, TurnStatus::Error);
    let cells = turn.cells();
    assert!(
        cells.iter().all(|c| c.kind != CellKind::Code),
        "{:?}",
        turn.kinds()
    );
    let explanations: Vec<&Cell> = cells
        .iter()
        .filter(|c| c.kind == CellKind::Explanation)
        .collect();
    // Each reply from memory was asked again; only the statement stands.
    assert_eq!(explanations.len(), 1, "{:?}", turn.kinds());
    let standing = explanations[0];
    assert_eq!(standing.status, CellStatus::Ok);
    assert!(
        standing.text.contains("No program computed"),
        "{}",
        standing.text
    );
    assert_never_shown(&turn, INVENTED);

    // Words without figures (or with the question's) still answer.
    let turn = h.ask("hello 7").await;
    assert_eq!(turn.status, TurnStatus::Ok);
    assert!(
        turn.cells()
            .iter()
            .any(|c| c.kind == CellKind::Explanation && c.status == CellStatus::Ok)
    );
}

#[tokio::test]
async fn a_program_that_printed_nothing_goes_back_as_a_fix() {
    let h = harness().await;
    let turn = h
        .ask(&format!(
            "#scripted: silent_first\n{}",
            fenced("print('answer:', 6 * 7)")
        ))
        .await;
    assert_eq!(turn.status, TurnStatus::Ok);
    let cells = turn.cells();
    assert_eq!(
        turn.kinds(),
        [
            CellKind::User,
            CellKind::Code,
            CellKind::Result,
            CellKind::Code,
            CellKind::Result,
            CellKind::Explanation
        ]
    );
    assert_eq!(cells[1].text, SILENT_CODE);
    // It ran: the cell is not an error, yet it did not answer.
    assert_eq!(cells[2].status, CellStatus::Ok);
    assert_eq!(cells[2].printed(), "");
    assert_eq!(cells[4].printed(), "answer: 42\n");
    assert!(cells[5].text.contains("42"), "{}", cells[5].text);
}

/// The leading system messages of a request (the rules, then the files
/// note), as one text.
fn system_messages(request: &ChatRequest) -> String {
    request
        .messages
        .iter()
        .take_while(|m| m.role == Role::System)
        .map(|m| m.content.as_str())
        .collect::<Vec<_>>()
        .join("\n\n")
}

impl Recording {
    fn new() -> Arc<Self> {
        Arc::new(Self {
            inner: scripted(),
            asked: std::sync::Mutex::new(Vec::new()),
            ahead: std::sync::Mutex::new(Vec::new()),
        })
    }

    /// The system prompt of the first request of the turn `ask` runs.
    async fn system_of(&self, h: &Harness, question: &str) -> (Turn, String) {
        let before = self.asked.lock().unwrap().len();
        let turn = h.ask(question).await;
        let system = system_messages(&self.asked.lock().unwrap()[before]);
        (turn, system)
    }
}

#[tokio::test]
async fn the_model_is_told_each_files_profile_computed_in_the_kernel() {
    let model = Recording::new();
    let h = harness_with(model.clone(), 0).await;
    let kernels = h.agent.kernels();
    let id = h.channel.id();
    let files: [(&str, &[u8]); 5] = [
        (
            "sales.csv",
            b"region,amount,day\nnorth,10,2024-01-01\nsouth,32.5,2024-01-02\neast,7,2024-01-03\nnorth,1,2024-01-04\n",
        ),
        (
            "people.json",
            br#"[{"name": "Ada", "age": 36}, {"name": "Alan", "age": 41}, {"name": "Grace", "age": 85}]"#,
        ),
        ("config.json", br#"{"name": "x", "items": [1, 2, 3]}"#),
        (
            "app.log",
            b"2024-01-01 INFO start\n2024-01-01 WARN slow\n2024-01-01 INFO stop\n",
        ),
        ("broken.csv", b"a,b\n\"unterminated\n"),
    ];
    for (name, bytes) in files {
        kernels
            .upload(id, name, bytes.to_vec().into(), false)
            .await
            .unwrap();
    }
    // The person's variables are theirs: the profile leaves none behind.
    let (turn, system) = model
        .system_of(
            &h,
            &fenced("import sys\nprint(sorted(globals()), 'pandas' in sys.modules)"),
        )
        .await;
    assert_eq!(turn.status, TurnStatus::Ok);
    for expected in [
        "- /home/user/sales.csv (97 bytes): a table of 4 rows and 3 columns\n    columns, as Python writes them: 'region' (str), 'amount' (float64), 'day' (str)\n    first rows:\n      north | 10.0 | 2024-01-01",
        "- /home/user/people.json (87 bytes): JSON, a list of 3 records (objects); as a DataFrame:\n    columns, as Python writes them: 'name' (str), 'age' (int64)\n    first rows:\n      Ada | 36",
        "- /home/user/config.json (33 bytes): JSON, an object with keys: name (str), items (list of 3)",
        "- /home/user/app.log (64 bytes): text, 3 lines\n    first lines:\n      2024-01-01 INFO start",
        "print that table before the answer",
    ] {
        assert!(system.contains(expected), "{expected}\n---\n{system}");
    }
    assert!(
        system.contains("- /home/user/broken.csv (18 bytes): could not be read ("),
        "{system}"
    );
    let names = turn
        .cells()
        .iter()
        .flat_map(|c| &c.outputs)
        .find_map(|o| match o {
            Output::Stdout { text } => Some(text.clone()),
            _ => None,
        });
    // It ran in this kernel (pandas is loaded) and left no name behind.
    let names = names.unwrap_or_default();
    assert!(names.ends_with(" True\n"), "{names}");
    for name in [
        "'REQUEST'",
        "'_main'",
        "'pd'",
        "'json'",
        "'profiles'",
        "'__runcell",
    ] {
        assert!(!names.contains(name), "{name} in {names}");
    }
    // Nothing of the profile was published as a cell.
    assert_eq!(turn.kinds(), ASKED);

    // A file as it was is not profiled again: one rewritten behind the
    // profile's back (same size, same time) still shows the old profile.
    let (_, system) = model
        .system_of(
            &h,
            &fenced(
                "import os\np = '/home/user/sales.csv'\nt = os.stat(p).st_mtime_ns\ntext = open(p).read()\nopen(p, 'w').write(text.replace('region', 'REGION'))\nos.utime(p, ns=(t, t))",
            ),
        )
        .await;
    assert!(
        system.contains("columns, as Python writes them: 'region' (str)"),
        "{system}"
    );
    let (_, system) = model.system_of(&h, &fenced("print(1)")).await;
    assert!(
        system.contains("columns, as Python writes them: 'region' (str)"),
        "{system}"
    );
    // A changed one is.
    h.ask(&fenced(
        "open('/home/user/sales.csv', 'a').write('west,3,2024-01-05\\n')",
    ))
    .await;
    let (_, system) = model.system_of(&h, &fenced("print(2)")).await;
    assert!(
        system.contains(
            "sales.csv (115 bytes): a table of 5 rows and 3 columns\n    columns, as Python writes them: 'REGION' (str)"
        ),
        "{system}"
    );

    // When the kernel cannot run the profile, the model gets the first
    // lines of the files instead.
    h.ask(&fenced("__import__ = None")).await;
    h.ask(&fenced(
        "open('/home/user/app.log', 'a').write('one more\\n')",
    ))
    .await;
    let (_, system) = model.system_of(&h, &fenced("print(3)")).await;
    assert!(
        system.contains("- /home/user/app.log (73 bytes), first lines:\n    2024-01-01 INFO start"),
        "{system}"
    );
    assert!(
        system.contains("print that table before the answer"),
        "{system}"
    );
}

#[tokio::test]
async fn a_big_tables_rows_are_counted_not_read() {
    let model = Recording::new();
    let h = harness_with(model.clone(), 0).await;
    // Over the 8 MiB the profiler reads whole: its dtypes come from the
    // first rows, and its rows are its lines.
    let mut csv = b"id,score\n".to_vec();
    let rows = 1_000_000;
    for i in 0..rows {
        csv.extend_from_slice(format!("{i:06},{}.5\n", i % 97).as_bytes());
    }
    let size = csv.len();
    assert!(size > 8 * 1024 * 1024, "{size}");
    h.agent
        .kernels()
        .upload(h.channel.id(), "big.csv", csv.into(), false)
        .await
        .unwrap();
    let (turn, system) = model.system_of(&h, &fenced("print('ok')")).await;
    assert_eq!(turn.status, TurnStatus::Ok);
    assert!(
        system.contains(&format!(
            "- /home/user/big.csv ({size} bytes): a table of about {rows} rows and 2 columns\n    columns, as Python writes them: 'id' (int64), 'score' (float64)\n    first rows:\n      0 | 0.5"
        )),
        "{system}"
    );
}

/// Whether `later` begins with every message of `earlier`, as sent.
fn extends(earlier: &ChatRequest, later: &ChatRequest) -> bool {
    later.messages.len() > earlier.messages.len()
        && later.messages[..earlier.messages.len()] == earlier.messages[..]
}

#[tokio::test]
async fn a_conversation_read_ahead_is_what_the_next_question_extends() {
    let model = Recording::new();
    let h = harness_with(model.clone(), 0).await;
    h.agent
        .kernels()
        .upload(
            h.channel.id(),
            "t.csv",
            b"a,b\n1,2\n".to_vec().into(),
            false,
        )
        .await
        .unwrap();
    // Given a file: read ahead, once (nothing changed since).
    h.agent.read_ahead(h.channel.log(), None).await;
    h.agent.read_ahead(h.channel.log(), None).await;
    let first = h.ask(&fenced("print('x:', 6 * 7)")).await;
    assert_eq!(first.status, TurnStatus::Ok);
    // After a turn, soon again: too soon, not read.
    h.agent.read_ahead(h.channel.log(), None).await;
    let ahead = model.ahead.lock().unwrap().clone();
    let asked = model.asked.lock().unwrap().clone();
    assert_eq!(ahead.len(), 1, "{ahead:#?}");
    // The rules and the files note, no question; the question's request
    // begins with exactly that.
    assert_eq!(ahead[0].messages.len(), 2, "{:#?}", ahead[0].messages);
    assert!(ahead[0].messages[1].content.contains("/home/user/t.csv"));
    assert!(extends(&ahead[0], &asked[0]), "{:#?}", asked[0].messages);
    assert_eq!(ahead[0].shared_messages, 1);
    assert_eq!(ahead[0].conversation, asked[0].conversation);
    assert_eq!(ahead[0].requester, asked[0].requester);
}

#[tokio::test]
async fn each_request_extends_the_one_before_within_a_turn_and_across_turns() {
    let model = Recording::new();
    let h = harness_with(model.clone(), 2).await;
    h.agent
        .kernels()
        .upload(
            h.channel.id(),
            "t.csv",
            b"a,b\n1,2\n".to_vec().into(),
            false,
        )
        .await
        .unwrap();
    // A fix, then the explanation; then a follow-up with a template.
    let first = h
        .ask(&format!(
            "#scripted: fail_first\n{}",
            fenced("print('x:', 6 * 7)")
        ))
        .await;
    assert_eq!(first.status, TurnStatus::Ok);
    let second = h
        .ask(&format!("{}\n@x[value]", fenced("print(f'@x[{6 * 7}]')")))
        .await;
    assert_eq!(second.status, TurnStatus::Ok);
    let asked = model.asked.lock().unwrap().clone();
    // Code, fix, explanation; code, explanation.
    assert_eq!(asked.len(), 5, "{asked:#?}");
    for pair in asked.windows(2) {
        assert!(extends(&pair[0], &pair[1]), "{:#?}", pair[1].messages);
    }
    for request in &asked {
        // Only the rules are shared between people; the files note and
        // the question's notes come after them.
        assert_eq!(request.shared_messages, 1);
        assert_eq!(
            request.messages[0].content,
            runcell_agent::agent::SYSTEM_PROMPT
        );
        assert_eq!(request.messages[1].role, Role::System);
        assert!(request.messages[1].content.contains("/home/user/t.csv"));
        assert_eq!(
            request.conversation.as_deref(),
            Some(h.channel.id().to_string().as_str())
        );
    }
    // The template's note ends the second question's message.
    let question = &asked[3].messages[asked[3].messages.len() - 1].content;
    assert!(question.starts_with("```python\nprint(f'@x[{6 * 7}]')\n```\n@x[value]\n\nThe question says how to write the answer"), "{question}");
    // A regenerate is another branch: its memory is rebuilt, without the
    // turn it replaces, and still opens with the same rules.
    let before = model.asked.lock().unwrap().len();
    let last = h.last_finished_turn();
    h.turn(
        TurnRequest::Ask {
            alternative_to: last,
            text: fenced("print(1)"),
            model: None,
        },
        |_| false,
    )
    .await;
    let again = &model.asked.lock().unwrap()[before];
    assert!(!extends(&asked[4], again));
    assert!(again.messages.iter().all(|m| !m.content.contains("@x[")));
    assert_eq!(again.messages[..2], asked[0].messages[..2]);
}

#[tokio::test]
async fn a_program_sent_back_says_why_on_the_page() {
    let h = harness_with(scripted(), 1).await;
    // The program prints its answer, but not in the question's form.
    let turn = h
        .ask(&format!(
            "{}\n@mean_fare[value]",
            fenced("print('mean fare:', 34.65)")
        ))
        .await;
    let notes: Vec<(app::protocol::CellId, String)> = turn
        .events
        .iter()
        .filter_map(|e| match &e.event {
            EventBody::CellNote { cell_id, note } => Some((*cell_id, note.clone())),
            _ => None,
        })
        .collect();
    let first_code = turn
        .cells()
        .iter()
        .find(|c| c.kind == CellKind::Code)
        .unwrap();
    assert_eq!(
        notes,
        [(
            first_code.id,
            "Sent back: the output does not show `@mean_fare[…]` in the question's form."
                .to_string()
        )]
    );
    let notebook = Notebook::from_events(&h.channel.log().events_after(0));
    assert_eq!(
        notebook.notes_of(first_code.id).collect::<Vec<_>>(),
        ["Sent back: the output does not show `@mean_fare[…]` in the question's form."]
    );
}

#[tokio::test]
async fn a_missing_column_is_repaired_by_runcell_and_the_answer_explained() {
    let model = Recording::new();
    let h = harness_with(model.clone(), 2).await;
    h.agent
        .kernels()
        .upload(
            h.channel.id(),
            "w.csv",
            b"day,wind speed\n1,2\n2,4\n".to_vec().into(),
            false,
        )
        .await
        .unwrap();
    let turn = h
        .ask(&fenced(
            "import pandas as pd\ndf = pd.read_csv('/home/user/w.csv')\nprint('mean:', df['wind_speed'].mean())",
        ))
        .await;
    assert_eq!(turn.status, TurnStatus::Ok);
    assert_eq!(
        turn.kinds(),
        [
            CellKind::User,
            CellKind::Code,
            CellKind::Result,
            CellKind::Code,
            CellKind::Result,
            CellKind::Explanation
        ]
    );
    let cells = turn.cells();
    assert_eq!(error_name(&cells[2]), Some("KeyError"));
    assert_eq!(
        cells[3].text,
        "import pandas as pd\ndf = pd.read_csv('/home/user/w.csv')\nprint('mean:', df['wind speed'].mean())"
    );
    assert_eq!(cells[3].attempt, Some(2));
    assert!(cells[3].is_final);
    let notebook = Notebook::from_events(&h.channel.log().events_after(0));
    assert_eq!(
        notebook.notes_of(cells[3].id).collect::<Vec<_>>(),
        ["Edited by runcell: `'wind_speed'` → `'wind speed'`: the table's column."]
    );
    assert_eq!(cells[4].printed(), "mean: 3.0\n");
    assert!(cells[5].text.contains("3.0"), "{}", cells[5].text);
    // The model wrote one program and explained the edited one's result.
    let asked = model.asked.lock().unwrap().clone();
    assert_eq!(asked.len(), 2);
    assert_eq!(asked[1].tool_choice, ToolChoice::None);
}

/// Regenerate asks for a second opinion: the same question again is
/// sampled (temperature above zero, a seed per version), the model is told
/// the previous version's program, and the page says so on the new code.
#[tokio::test]
async fn regenerate_samples_a_different_program_and_says_so() {
    let model = Recording::new();
    let h = harness_with(model.clone(), 0).await;
    let question = fenced("print(6 * 7)");
    let first = h.ask(&question).await;
    assert_eq!(first.status, TurnStatus::Ok);
    let asked_first = model.asked.lock().unwrap()[0].clone();
    assert_eq!(asked_first.seed, None);
    assert!(
        asked_first.temperature.unwrap_or(0.0) == 0.0,
        "{:?}",
        asked_first.temperature
    );
    let last = h.last_finished_turn();
    for version in [2_u64, 3] {
        let before = model.asked.lock().unwrap().len();
        let again = h
            .turn(
                TurnRequest::Ask {
                    alternative_to: last,
                    text: question.clone(),
                    model: None,
                },
                |_| false,
            )
            .await;
        assert_eq!(again.status, TurnStatus::Ok);
        let request = model.asked.lock().unwrap()[before].clone();
        assert_eq!(request.temperature, Some(0.7));
        assert_eq!(request.seed, Some(version));
        let asked = &request.messages[request.messages.len() - 1].content;
        assert!(asked.contains("previous version's program"), "{asked}");
        assert!(asked.contains("print(6 * 7)"), "{asked}");
        let notes: Vec<String> = again
            .events
            .iter()
            .filter_map(|e| match &e.event {
                EventBody::CellNote { note, .. } => Some(note.clone()),
                _ => None,
            })
            .collect();
        assert!(
            notes.iter().any(|n| n.starts_with(&format!(
                "Regenerated: version {version} of this question, sampled differently"
            ))),
            "{notes:?}"
        );
        // Both printed 42: the person is told the approaches agree.
        assert!(
            notes.contains(&format!(
                "Checked against version {}: it printed the same result, so the two approaches \
                 agree.",
                version - 1
            )),
            "{notes:?}"
        );
    }
}

/// A regenerate whose result differs from the version before's says so on
/// its program, with both results' figures: a sample can be wrong where the
/// first was right, and the explanation alone would state the new number.
/// (A version starts from its question's kernel state, but a file the
/// program counts its runs in is kept: the same program prints another
/// figure each time it runs.)
#[tokio::test]
async fn a_regenerate_that_disagrees_with_the_version_before_says_so() {
    let h = harness_with(Recording::new(), 0).await;
    let question = fenced(
        "import os\nn = int(open('runs.txt').read()) + 1 if os.path.exists('runs.txt') else 1\n\
         open('runs.txt', 'w').write(str(n))\nprint('total:', n * 10)",
    );
    let first = h.ask(&question).await;
    assert_eq!(first.status, TurnStatus::Ok);
    let again = h
        .turn(
            TurnRequest::Ask {
                alternative_to: h.last_finished_turn(),
                text: question.clone(),
                model: None,
            },
            |_| false,
        )
        .await;
    assert_eq!(again.status, TurnStatus::Ok);
    let cells = again.cells();
    let program = cells.iter().find(|c| c.is_final).expect("a final program");
    let notebook = Notebook::from_events(&h.channel.log().events_after(0));
    let notes: Vec<&str> = notebook.notes_of(program.id).collect();
    assert_eq!(notes.len(), 2, "{notes:?}");
    assert_eq!(
        notes[1],
        "Checked against version 1: it printed 10, this version 20. The two approaches \
         disagree: compare their programs (the arrows above) before trusting either."
    );
}
