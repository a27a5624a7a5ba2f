//! What a notebook front end relies on beyond running cells, against the
//! real kernels: `clear_output` (with and without `wait`), displays updated
//! by their id, the pager's help, and the questions a kernel answers
//! without running anything (completion, inspection, whether code is
//! complete, history), for Python (ipykernel) and R (IRkernel).

use std::time::{Duration, Instant};

use runcell_sandbox::jail::{JailConfig, JailSandbox, JailSession};
use runcell_sandbox::{
    HistoryAccess, HistoryQuery, KernelRequest, Language, Limits, RunOutcome, RunRequest,
    SandboxError, SandboxSession,
};
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

async fn session() -> JailSession {
    let jail = JailSandbox::new(JailConfig::default());
    assert!(jail.unavailable().is_none(), "{:?}", jail.unavailable());
    JailSession::open(jail, Limits::default()).await.unwrap()
}

/// Runs `code`, giving its outcome and its events (without their times).
async fn run(session: &JailSession, language: Language, code: &str) -> (RunOutcome, Vec<Value>) {
    let (events, mut received) = mpsc::channel(256);
    let request = RunRequest {
        code: code.into(),
        language,
        limits: Limits::default(),
        env: Vec::new(),
        cwd: None,
    };
    let outcome = session
        .run(&request, Some(&events), &CancellationToken::new())
        .await
        .unwrap();
    drop(events);
    let mut seen = Vec::new();
    while let Some(event) = received.recv().await {
        let mut event = serde_json::to_value(&event).unwrap();
        event.as_object_mut().unwrap().remove("ts_ms");
        seen.push(event);
    }
    (outcome, seen)
}

async fn ask(session: &JailSession, language: Language, request: KernelRequest) -> Value {
    Value::Object(session.kernel_request(language, request).await.unwrap())
}

fn complete(code: &str) -> KernelRequest {
    KernelRequest::Complete {
        code: code.into(),
        cursor_pos: code.chars().count(),
    }
}

fn inspect(code: &str) -> KernelRequest {
    KernelRequest::Inspect {
        code: code.into(),
        cursor_pos: code.chars().count(),
        detail_level: 0,
    }
}

fn is_complete(code: &str) -> KernelRequest {
    KernelRequest::IsComplete { code: code.into() }
}

#[tokio::test]
async fn clear_output_leaves_only_what_came_after() {
    let session = session().await;
    let (outcome, events) = run(
        &session,
        Language::Python,
        "print('a')\nfrom IPython.display import clear_output\nclear_output()\nprint('b')",
    )
    .await;
    assert_eq!(outcome.stdout, "b\n");
    assert_eq!(outcome.error, None);
    assert_eq!(
        events,
        vec![
            json!({"type": "stdout", "text": "a\n"}),
            json!({"type": "clear", "wait": false}),
            json!({"type": "stdout", "text": "b\n"}),
        ]
    );
    // With wait, the clear waits for the next output: a display this time.
    let (outcome, events) = run(
        &session,
        Language::Python,
        "print('a')\nclear_output(wait=True)\ndisplay(7)",
    )
    .await;
    assert_eq!(outcome.stdout, "");
    assert_eq!(
        outcome.results,
        vec![json!({"text/plain": "7"}).as_object().unwrap().clone()]
    );
    assert_eq!(events[1], json!({"type": "clear", "wait": true}));
    session.close().await;
}

#[tokio::test]
async fn an_updated_display_shows_its_new_value_in_its_place() {
    let session = session().await;
    let (outcome, events) = run(
        &session,
        Language::Python,
        "h = display('v1', display_id=True)\nprint('between')\nh.update('v2')\nh.display_id",
    )
    .await;
    assert_eq!(outcome.error, None);
    let id = events[0]["display_id"]
        .as_str()
        .expect("a display id")
        .to_string();
    assert_eq!(
        events,
        vec![
            json!({"type": "result", "data": {"text/plain": "'v1'"}, "display_id": id}),
            json!({"type": "stdout", "text": "between\n"}),
            json!({"type": "update", "display_id": id, "data": {"text/plain": "'v2'"}}),
            json!({"type": "result", "main": true, "data": {"text/plain": format!("'{id}'")}}),
        ]
    );
    let plain: Vec<&Value> = outcome.results.iter().map(|r| &r["text/plain"]).collect();
    assert_eq!(plain, [&json!("'v2'"), &json!(format!("'{id}'"))]);
    // A later run updates a display of an earlier one: the event says so.
    let (_, events) = run(&session, Language::Python, "h.update('v3')").await;
    assert_eq!(
        events,
        vec![json!({"type": "update", "display_id": id, "data": {"text/plain": "'v3'"}})]
    );
    session.close().await;
}

#[tokio::test]
async fn the_pagers_help_comes_after_the_output() {
    let session = session().await;
    let (outcome, events) = run(&session, Language::Python, "print(1)\nzip?").await;
    assert_eq!(outcome.error, None);
    assert_eq!(events.len(), 2, "{events:?}");
    assert_eq!(events[0], json!({"type": "stdout", "text": "1\n"}));
    assert_eq!(events[1]["type"], "page");
    let help = events[1]["data"]["text/plain"].as_str().expect("help text");
    assert!(help.contains("zip(*iterables"), "{help}");
    assert_eq!(outcome.results.len(), 1);
    session.close().await;
}

#[tokio::test]
async fn python_answers_completion_inspection_and_completeness() {
    let session = session().await;
    // Completion is from the kernel's live namespace (jedi is off: its
    // first answer takes seconds).
    run(&session, Language::Python, "import os").await;
    let reply = ask(&session, Language::Python, complete("x = os.pa")).await;
    assert_eq!(reply["status"], "ok");
    assert_eq!(
        reply["matches"],
        json!([
            ".pardir",
            ".path",
            ".pathconf",
            ".pathconf_names",
            ".pathsep"
        ]),
        "{reply}"
    );
    assert_eq!(
        (&reply["cursor_start"], &reply["cursor_end"]),
        (&json!(6), &json!(9))
    );

    let reply = ask(&session, Language::Python, inspect("zip")).await;
    assert_eq!(reply["status"], "ok");
    assert_eq!(reply["found"], true);
    let text = reply["data"]["text/plain"].as_str().expect("help text");
    assert!(text.contains("zip(*iterables"), "{text}");

    let reply = ask(&session, Language::Python, inspect("no_such_name_here")).await;
    assert_eq!(reply["found"], false);

    for (code, status) in [
        ("x = 1", "complete"),
        ("for i in range(3):", "incomplete"),
        ("1 +* 2", "invalid"),
    ] {
        let reply = ask(&session, Language::Python, is_complete(code)).await;
        assert_eq!(reply["status"], status, "{code}: {reply}");
    }
    let reply = ask(
        &session,
        Language::Python,
        is_complete("for i in range(3):"),
    )
    .await;
    assert_eq!(reply["indent"], "    ");
    session.close().await;
}

#[tokio::test]
async fn python_answers_history_of_what_ran() {
    let session = session().await;
    run(&session, Language::Python, "a = 40").await;
    run(&session, Language::Python, "a + 2").await;
    let reply = ask(
        &session,
        Language::Python,
        KernelRequest::History(HistoryQuery {
            output: false,
            raw: true,
            access: HistoryAccess::Tail { n: 2 },
        }),
    )
    .await;
    assert_eq!(reply["status"], "ok", "{reply}");
    let inputs: Vec<&Value> = reply["history"]
        .as_array()
        .expect("history")
        .iter()
        .map(|entry| &entry[2])
        .collect();
    assert_eq!(inputs, [&json!("a = 40"), &json!("a + 2")]);
    let (number, line) = (&reply["history"][0][0], &reply["history"][0][1]);
    // With outputs, an entry's third part is [input, output] (IPython logs
    // no outputs: null), passed on as the kernel gave it.
    let history = |output, access| {
        KernelRequest::History(HistoryQuery {
            output,
            raw: true,
            access,
        })
    };
    let reply = ask(
        &session,
        Language::Python,
        history(true, HistoryAccess::Tail { n: 1 }),
    )
    .await;
    assert_eq!(reply["history"][0][2], json!(["a + 2", null]), "{reply}");
    let range = HistoryAccess::Range {
        session: number.as_i64().and_then(|n| i32::try_from(n).ok()),
        start: line.as_i64().and_then(|n| i32::try_from(n).ok()).unwrap(),
        stop: line
            .as_i64()
            .and_then(|n| i32::try_from(n + 1).ok())
            .unwrap(),
    };
    let reply = ask(&session, Language::Python, history(false, range)).await;
    // IPython numbers the current session 0 in a range's entries.
    assert_eq!(reply["history"], json!([[0, line, "a = 40"]]), "{reply}");
    session.close().await;
}

#[tokio::test]
async fn a_question_waits_for_the_running_cell_and_disturbs_it_not() {
    let session = std::sync::Arc::new(session().await);
    let running = {
        let session = std::sync::Arc::clone(&session);
        tokio::spawn(async move {
            run(
                &session,
                Language::Python,
                "import time\nfor i in range(3):\n    time.sleep(0.5)\n    print(i)",
            )
            .await
        })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    let asked = Instant::now();
    let reply = ask(&session, Language::Python, is_complete("x = (")).await;
    let waited = asked.elapsed();
    assert_eq!(reply["status"], "incomplete");
    let (outcome, _) = running.await.unwrap();
    assert_eq!(outcome.stdout, "0\n1\n2\n");
    assert_eq!(outcome.error, None);
    assert!(
        waited >= Duration::from_millis(900),
        "answered during the cell: {waited:?}"
    );
    session.close().await;
}

#[tokio::test]
async fn r_answers_completion_inspection_and_completeness() {
    let session = session().await;
    // R's kernel starts for the question if no cell ran yet.
    let reply = ask(&session, Language::R, complete("x <- mea")).await;
    assert_eq!(reply["status"], "ok", "{reply}");
    let matches: Vec<&str> = reply["matches"]
        .as_array()
        .expect("matches")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert!(matches.contains(&"mean"), "{reply}");
    assert_eq!(reply["cursor_start"], 5);
    assert_eq!(reply["cursor_end"], 8);

    let reply = ask(&session, Language::R, inspect("mean")).await;
    assert_eq!(reply["found"], true, "{reply}");
    let text = reply["data"]["text/plain"].as_str().expect("help text");
    assert!(text.contains("mean"), "{text}");

    for (code, status) in [("x <- 1", "complete"), ("f <- function(x) {", "incomplete")] {
        let reply = ask(&session, Language::R, is_complete(code)).await;
        assert_eq!(reply["status"], status, "{code}: {reply}");
    }
    session.close().await;
}

#[tokio::test]
async fn a_language_without_a_kernel_is_not_asked() {
    let session = session().await;
    let refused = session
        .kernel_request(Language::Bash, complete("ec"))
        .await
        .unwrap_err();
    assert_eq!(
        refused,
        SandboxError::NotSupported(
            "bash runs as a process of its own here, with no kernel to ask".into()
        )
    );
    session.close().await;
}
