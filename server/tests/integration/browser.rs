//! The Browser sandbox end to end over a real socket: a test plays the page
//! (attaches, receives `browser_run`, answers with outputs) against a live
//! server; and what the server sends so that a real page can run Pyodide
//! (the runtime's types and caching, cross-origin isolation).

use std::time::Duration;

use app::protocol::{
    CellKind, CellStatus, ClientMessage, ErrorCode, EventBody, Output, SandboxKind, ServerMessage,
    SessionEvent, TurnStatus,
};
use tokio_tungstenite::tungstenite::Message;

use crate::support::{Client, TestServer, http};

const RUNTIME: &str = "314.0.7-0123456789";

/// A server whose site carries a Pyodide runtime (small stand-in files:
/// the server only serves them), with short waits for pages.
async fn server_with_pyodide() -> TestServer {
    TestServer::start_configured(|config| {
        let dir = config.site_root.join("pyodide").join(RUNTIME);
        std::fs::create_dir_all(&dir).unwrap();
        for (name, body) in [
            ("pyodide.mjs", "export const loadPyodide = () => {};"),
            ("pyodide.asm.mjs", "export default {};"),
            ("pyodide.asm.wasm", "\0asm\x01\0\0\0"),
            ("python_stdlib.zip", "PK"),
            ("pyodide-lock.json", "{\"packages\":{}}"),
            ("six-1.17.0-py2.py3-none-any.whl", "PK"),
        ] {
            std::fs::write(dir.join(name), body).unwrap();
        }
        std::fs::write(
            config.site_root.join("py-worker.mjs"),
            "onmessage = () => {};",
        )
        .unwrap();
        config.browser.attach_wait_secs = 2;
        config.browser.gone_grace_secs = 1;
    })
    .await
}

async fn send(client: &mut Client, message: &ClientMessage) {
    client
        .send_raw(Message::text(serde_json::to_string(message).unwrap()))
        .await;
}

fn ask_on_browser(code: &str) -> ClientMessage {
    ClientMessage::Ask {
        alternative_to: None,
        text: format!("```python\n{code}\n```"),
        model: None,
        backend: Some(SandboxKind::Browser),
    }
}

/// The next frame that is a browser run; the session events before it go
/// to `seen`.
async fn next_run_after(client: &mut Client, seen: &mut Vec<SessionEvent>) -> (u64, String, bool) {
    loop {
        match client.next().await {
            Some(ServerMessage::BrowserRun {
                run, code, fresh, ..
            }) => return (run, code, fresh),
            Some(ServerMessage::Event(event)) => seen.push(event),
            other => panic!("expected a browser run, got {other:?}"),
        }
    }
}

async fn next_run(client: &mut Client) -> (u64, String, bool) {
    next_run_after(client, &mut Vec::new()).await
}

/// Events up to the end of the turn, skipping anything else.
async fn rest_of_turn(client: &mut Client) -> Vec<SessionEvent> {
    let mut events = Vec::new();
    loop {
        match client.next().await {
            Some(ServerMessage::Event(event)) => {
                let done = matches!(event.event, EventBody::TurnFinished { .. });
                events.push(event);
                if done {
                    return events;
                }
            }
            Some(_) => {}
            None => panic!("the socket closed mid-turn"),
        }
    }
}

fn result_outputs(events: &[SessionEvent]) -> Vec<Output> {
    events
        .iter()
        .filter_map(|e| match &e.event {
            EventBody::CellOutput { output, .. } => Some(output.clone()),
            _ => None,
        })
        .collect()
}

fn turn_status(events: &[SessionEvent]) -> TurnStatus {
    events
        .iter()
        .find_map(|e| match e.event {
            EventBody::TurnFinished { status, .. } => Some(status),
            _ => None,
        })
        .expect("the turn finished")
}

async fn answer(client: &mut Client, run: u64, outputs: Vec<Output>, kernel: &str) {
    for output in outputs {
        send(client, &ClientMessage::BrowserOutput { run, output }).await;
    }
    send(
        client,
        &ClientMessage::BrowserDone {
            run,
            kernel: kernel.into(),
        },
    )
    .await;
}

#[tokio::test]
async fn pyodide_is_served_with_its_types_long_cache_and_isolation() {
    let server = server_with_pyodide().await;
    let client = http();
    for (file, kind) in [
        ("pyodide.mjs", "text/javascript"),
        ("pyodide.asm.mjs", "text/javascript"),
        ("pyodide.asm.wasm", "application/wasm"),
        ("python_stdlib.zip", "application/zip"),
        ("pyodide-lock.json", "application/json"),
        ("six-1.17.0-py2.py3-none-any.whl", "application/zip"),
    ] {
        let response = client
            .get(server.url(&format!("/pyodide/{RUNTIME}/{file}")))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200, "{file}");
        let headers = response.headers();
        assert_eq!(headers["content-type"], kind, "{file}");
        assert_eq!(
            headers["cache-control"], "public, max-age=31536000, immutable",
            "{file}"
        );
        assert_eq!(headers["cross-origin-embedder-policy"], "require-corp");
        assert_eq!(headers["cross-origin-opener-policy"], "same-origin");
        // The page's Python frame has an opaque origin: it reads them
        // cross-origin.
        assert_eq!(headers["cross-origin-resource-policy"], "cross-origin");
        assert_eq!(headers["access-control-allow-origin"], "*");
    }
    // The worker goes with the bundle: checked on every load.
    let worker = client
        .get(server.url("/py-worker.mjs"))
        .send()
        .await
        .unwrap();
    assert_eq!(worker.status(), 200);
    assert_eq!(worker.headers()["content-type"], "text/javascript");
    assert_eq!(worker.headers()["cache-control"], "no-cache");
    // Its programs may load scripts and fetch from this site alone (and
    // compile Pyodide's WebAssembly): nothing they read leaves for another
    // origin. (The frame's policy, which the worker inherits, says the same.)
    assert_eq!(
        worker.headers()["content-security-policy"],
        "default-src 'none'; script-src 'self' 'wasm-unsafe-eval'; \
         worker-src blob:; connect-src 'self'; base-uri 'none'; form-action 'none'"
    );
    assert_eq!(worker.headers()["access-control-allow-origin"], "*");
    assert_eq!(
        worker.headers()["cross-origin-embedder-policy"],
        "require-corp"
    );
    // Pages are cross-origin isolated.
    let page = client
        .get(server.url(&format!("/sessions/{}", server.new_session().await)))
        .send()
        .await
        .unwrap();
    assert_eq!(page.status(), 200);
    assert_eq!(page.headers()["cross-origin-opener-policy"], "same-origin");
    assert_eq!(
        page.headers()["cross-origin-embedder-policy"],
        "require-corp"
    );
    let html = page.text().await.unwrap();
    assert!(
        html.contains("Browser (Pyodide)"),
        "the picker offers Browser"
    );
    assert!(
        html.contains(&format!("/pyodide/{RUNTIME}/")),
        "the page knows where Pyodide is"
    );
    // Nothing else is reachable through /pyodide, and missing files are 404s
    // that are not cached for good.
    for path in [
        format!("/pyodide/{RUNTIME}/numpy-2.4.6.whl"),
        "/pyodide/../data/runcell.db".to_string(),
        format!("/pyodide/{RUNTIME}/..%2f..%2fpy-worker.mjs"),
    ] {
        let response = client.get(server.url(&path)).send().await.unwrap();
        assert_eq!(response.status(), 404, "{path}");
        assert!(response.headers().get("cache-control").is_none(), "{path}");
    }
}

#[tokio::test]
async fn the_page_runs_the_programs_and_keeps_their_state() {
    let server = server_with_pyodide().await;
    let session = server.new_session().await;
    let mut page = server.join(&session).await;
    send(
        &mut page,
        &ClientMessage::BrowserAttach {
            kernel: "k1".into(),
        },
    )
    .await;
    send(
        &mut page,
        &ask_on_browser("import sys; print(sys.platform)"),
    )
    .await;
    let (run, code, fresh) = next_run(&mut page).await;
    assert_eq!(code, "import sys; print(sys.platform)");
    assert!(fresh, "a new kernel starts from empty globals");
    answer(
        &mut page,
        run,
        vec![Output::Stdout {
            text: "emscripten\n".into(),
        }],
        "k1",
    )
    .await;
    let events = rest_of_turn(&mut page).await;
    assert_eq!(turn_status(&events), TurnStatus::Ok);
    assert_eq!(
        result_outputs(&events),
        vec![Output::Stdout {
            text: "emscripten\n".into()
        }]
    );
    // The explanation quotes what the page printed.
    assert!(events.iter().any(|e| matches!(&e.event,
        EventBody::CellDelta { text, .. } if text.contains("emscripten"))));

    // The next program runs in the same Python.
    send(&mut page, &ask_on_browser("x = 41\nx + 1")).await;
    let (run, _, fresh) = next_run(&mut page).await;
    assert!(!fresh, "the same kernel keeps its globals");
    // The page's results are the run's values (`Out[n]`).
    let value = Output::Rich {
        data: [("text/plain".to_string(), "42".to_string())].into(),
        main: true,
        metadata: String::new(),
        display_id: None,
    };
    answer(&mut page, run, vec![value.clone()], "k1").await;
    let events = rest_of_turn(&mut page).await;
    assert_eq!(result_outputs(&events), vec![value]);

    // The page was reloaded: a new Python, said so in the result.
    send(
        &mut page,
        &ClientMessage::BrowserAttach {
            kernel: "k2".into(),
        },
    )
    .await;
    // The first attempt is another program than its fix (the same program
    // twice would be refused before it ran again).
    let mut ask = ask_on_browser("x");
    if let ClientMessage::Ask { text, .. } = &mut ask {
        *text = format!("#scripted: fail_first\n{text}");
    }
    send(&mut page, &ask).await;
    let (run, _, fresh) = next_run(&mut page).await;
    assert!(fresh);
    answer(
        &mut page,
        run,
        vec![Output::Error {
            name: "NameError".into(),
            value: "name 'x' is not defined".into(),
            traceback: Vec::new(),
        }],
        "k2",
    )
    .await;
    // The scripted model tries its fix: the code as written, in the page
    // (which prints something: a fix that printed nothing would not have
    // answered, and would be sent back once more).
    let mut events = Vec::new();
    let (run, _, _) = next_run_after(&mut page, &mut events).await;
    answer(
        &mut page,
        run,
        vec![Output::Stdout {
            text: "x is back\n".into(),
        }],
        "k2",
    )
    .await;
    events.extend(rest_of_turn(&mut page).await);
    let outputs = result_outputs(&events);
    assert!(
        outputs
            .iter()
            .any(|o| matches!(o, Output::Stderr { text } if text.contains("started afresh"))),
        "{outputs:?}"
    );
}

#[tokio::test]
async fn stop_reaches_the_page_and_the_next_ask_works() {
    let server = server_with_pyodide().await;
    let session = server.new_session().await;
    let mut page = server.join(&session).await;
    send(
        &mut page,
        &ClientMessage::BrowserAttach { kernel: "k".into() },
    )
    .await;
    send(&mut page, &ask_on_browser("while True: pass")).await;
    let (run, _, _) = next_run(&mut page).await;
    send(&mut page, &ClientMessage::Stop).await;
    loop {
        match page.next().await {
            Some(ServerMessage::BrowserStop { run: stopped }) => {
                assert_eq!(stopped, run);
                break;
            }
            Some(ServerMessage::Event(_)) => {}
            other => panic!("expected a stop, got {other:?}"),
        }
    }
    answer(
        &mut page,
        run,
        vec![Output::Error {
            name: "KeyboardInterrupt".into(),
            value: String::new(),
            traceback: Vec::new(),
        }],
        "k",
    )
    .await;
    let events = rest_of_turn(&mut page).await;
    assert_eq!(turn_status(&events), TurnStatus::Cancelled);
    // A late frame about the stopped run is dropped quietly.
    answer(&mut page, run, Vec::new(), "k").await;

    send(&mut page, &ask_on_browser("print('after')")).await;
    let (run, _, _) = next_run(&mut page).await;
    answer(
        &mut page,
        run,
        vec![Output::Stdout {
            text: "after\n".into(),
        }],
        "k",
    )
    .await;
    let events = rest_of_turn(&mut page).await;
    assert_eq!(turn_status(&events), TurnStatus::Ok);
}

#[tokio::test]
async fn a_run_whose_page_is_gone_ends_cleanly() {
    let server = server_with_pyodide().await;
    let session = server.new_session().await;
    let mut page = server.join(&session).await;
    let mut watcher = server.join(&session).await;
    send(
        &mut page,
        &ClientMessage::BrowserAttach { kernel: "k".into() },
    )
    .await;
    send(&mut page, &ask_on_browser("while True: pass")).await;
    let _ = next_run(&mut page).await;
    // The tab closes mid-run.
    drop(page);
    let events = tokio::time::timeout(Duration::from_secs(20), rest_of_turn(&mut watcher))
        .await
        .expect("the turn ended");
    let outputs = result_outputs(&events);
    assert!(
        outputs
            .iter()
            .any(|o| matches!(o, Output::Error { value, .. } if value.contains("went away"))),
        "{outputs:?}"
    );
    // No program is at fault: the turn ends there, with no fix tried and
    // nothing to explain.
    assert_eq!(turn_status(&events), TurnStatus::Error);
    assert_eq!(cell_kinds(&events), [CellKind::Code, CellKind::Result]);
    // With no page at all, the next run says what to do.
    let last = events.last().map_or(0, |e| e.seq);
    let mut page = server.connect(&session, last).await;
    page.welcome().await;
    send(&mut page, &ask_on_browser("1")).await;
    let events = tokio::time::timeout(Duration::from_secs(30), rest_of_turn(&mut page))
        .await
        .expect("the turn ended");
    let failed = events.iter().find_map(|e| match &e.event {
        EventBody::CellFinished {
            status: CellStatus::Error,
            error: Some(error),
            ..
        } => Some(error.message.clone()),
        _ => None,
    });
    assert!(
        failed
            .as_deref()
            .is_some_and(|m| m.contains("pick Browser")),
        "{failed:?}"
    );
    assert_eq!(cell_kinds(&events), [CellKind::Code, CellKind::Result]);
}

/// The kinds of the cells started (the question is no cell of these).
fn cell_kinds(events: &[SessionEvent]) -> Vec<CellKind> {
    events
        .iter()
        .filter_map(|e| match &e.event {
            EventBody::CellStarted { cell_kind, .. } => Some(*cell_kind),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn frames_from_a_page_that_is_not_the_runner_are_refused() {
    let server = server_with_pyodide().await;
    let session = server.new_session().await;
    let mut page = server.join(&session).await;
    let mut other = server.join(&session).await;
    send(
        &mut page,
        &ClientMessage::BrowserAttach { kernel: "k".into() },
    )
    .await;
    for bad in [
        ClientMessage::BrowserAttach {
            kernel: "not a kernel id".into(),
        },
        ClientMessage::BrowserAttach {
            kernel: "k".repeat(65),
        },
    ] {
        send(&mut other, &bad).await;
        assert!(
            matches!(
                other.next().await,
                Some(ServerMessage::Error {
                    code: ErrorCode::BadFrame,
                    ..
                })
            ),
            "{bad:?}"
        );
    }
    // Another tab of the session attaches its own Python: it waits while
    // the runner is there.
    send(
        &mut other,
        &ClientMessage::BrowserAttach {
            kernel: "other".into(),
        },
    )
    .await;
    send(&mut page, &ask_on_browser("print(1)")).await;
    let (run, _, _) = next_run(&mut page).await;
    // Another page of the session cannot answer for the runner.
    send(
        &mut other,
        &ClientMessage::BrowserOutput {
            run,
            output: Output::Stdout {
                text: "forged\n".into(),
            },
        },
    )
    .await;
    loop {
        match other.next().await {
            Some(ServerMessage::Error { code, message }) => {
                assert_eq!(code, ErrorCode::BadFrame);
                assert!(message.contains("attach"), "{message}");
                break;
            }
            Some(ServerMessage::Event(_)) => {}
            frame => panic!("expected a refusal, got {frame:?}"),
        }
    }
    answer(
        &mut page,
        run,
        vec![Output::Stdout { text: "1\n".into() }],
        "k",
    )
    .await;
    let events = rest_of_turn(&mut page).await;
    assert_eq!(
        result_outputs(&events),
        vec![Output::Stdout { text: "1\n".into() }]
    );

    // The runner's tab closes: the other one runs the session's programs,
    // in a Python of its own.
    drop(page);
    rest_of_turn(&mut other).await;
    // No frame says when the server has seen the close: give it a moment.
    tokio::time::sleep(Duration::from_millis(500)).await;
    send(&mut other, &ask_on_browser("print(2)")).await;
    let (run, _, fresh) = next_run(&mut other).await;
    assert!(fresh, "another Python starts from empty globals");
    answer(
        &mut other,
        run,
        vec![Output::Stdout { text: "2\n".into() }],
        "other",
    )
    .await;
    let events = rest_of_turn(&mut other).await;
    assert_eq!(turn_status(&events), TurnStatus::Ok);
    let outputs = result_outputs(&events);
    assert!(
        outputs
            .iter()
            .any(|o| matches!(o, Output::Stderr { text } if text.contains("started afresh"))),
        "{outputs:?}"
    );
}

#[tokio::test]
async fn browser_is_refused_where_the_site_has_no_pyodide() {
    let server = TestServer::start().await;
    let session = server.new_session().await;
    let mut page = server.join(&session).await;
    send(&mut page, &ask_on_browser("1")).await;
    match page.next().await {
        Some(ServerMessage::Error { code, message }) => {
            assert_eq!(code, ErrorCode::BadFrame);
            assert!(message.contains("Pyodide"), "{message}");
        }
        other => panic!("expected a refusal, got {other:?}"),
    }
    // Nothing was started: the session is still empty and usable.
    page.ask("```python\nprint('jail')\n```").await;
    let events = page.events_until_finished().await;
    let kinds: Vec<CellKind> = events
        .iter()
        .filter_map(|e| match &e.event {
            EventBody::CellStarted { cell_kind, .. } => Some(*cell_kind),
            _ => None,
        })
        .collect();
    assert_eq!(
        kinds,
        [CellKind::Code, CellKind::Result, CellKind::Explanation]
    );
}
