//! A run that finds no kernel free: its turn ends with a typed refusal
//! (which limit, how many kernels it allows), the code stays to be run
//! again, and no failed cell stands in the notebook.

use crate::support::*;
use app::notebook::Notebook;
use app::protocol::{CellKind, CellStatus, EventBody, KernelCap, TurnStatus};

const OWNER_ID: &str = "a7a7a7a7a7a7a7a7a7a7a7a7a7a7a7a7";

/// `POST /api/sessions/{id}/run` as [`OWNER_ID`]: the response, streaming.
async fn start_run(server: &TestServer, id: &str, code: &str) -> reqwest::Response {
    let response = http_as(Some(OWNER_ID))
        .post(server.url(&format!("/api/sessions/{id}/run")))
        .json(&serde_json::json!({ "code": code, "language": "python" }))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    response
}

/// `POST /api/sessions/{id}/ask` as [`OWNER_ID`], to its end.
async fn ask_as_owner(
    server: &TestServer,
    id: &str,
    text: &str,
) -> Vec<app::protocol::SessionEvent> {
    let response = http_as(Some(OWNER_ID))
        .post(server.url(&format!("/api/sessions/{id}/ask")))
        .json(&serde_json::json!({ "text": text }))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    ndjson_events(response).await
}

/// A server whose owners may each hold one kernel, none of them pooled.
async fn one_kernel_server() -> TestServer {
    TestServer::start_configured(|config| {
        config.notebook.max_kernels_per_owner = 1;
        config.sandbox.pool_size = 0;
    })
    .await
}

/// Another notebook of [`OWNER_ID`]'s takes the owner's one kernel with a
/// program that sleeps: its id, and the run's streaming response.
async fn hold_the_kernel(server: &TestServer) -> (String, reqwest::Response) {
    let busy = server.new_session_of(OWNER_ID).await;
    let sleeping = start_run(server, &busy, "import time\ntime.sleep(60)").await;
    until_running(server, &busy).await;
    (busy, sleeping)
}

/// Stops the sleeper of [`hold_the_kernel`] and waits for its run to end.
async fn let_go(server: &TestServer, busy: &str, sleeping: reqwest::Response) {
    let stopped = http_as(Some(OWNER_ID))
        .post(server.url(&format!("/api/sessions/{busy}/stop")))
        .send()
        .await
        .unwrap();
    assert_eq!(stopped.status(), 204);
    ndjson_events(sleeping).await;
}

/// Session `id`'s whole history.
async fn events_of(server: &TestServer, id: &str) -> Vec<app::protocol::SessionEvent> {
    ndjson_events(
        http_as(Some(OWNER_ID))
            .get(server.url(&format!("/api/sessions/{id}/events")))
            .send()
            .await
            .unwrap(),
    )
    .await
}

/// Waits until `GET /api/kernels` lists session `id`'s kernel as running.
async fn until_running(server: &TestServer, id: &str) {
    let deadline = tokio::time::Instant::now() + PATIENCE;
    loop {
        let listed = crate::kernels::kernels_of(server, OWNER_ID).await;
        let running = listed["kernels"].as_array().is_some_and(|kernels| {
            kernels
                .iter()
                .any(|k| k["session_id"] == id && k["running"] == true)
        });
        if running {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "never running: {listed}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
}

#[tokio::test]
async fn a_run_with_every_kernel_running_is_refused_by_name_and_not_a_failed_cell() {
    let server = one_kernel_server().await;
    let (busy, sleeping) = hold_the_kernel(&server).await;

    let refused = server.new_session_of(OWNER_ID).await;
    let events = ndjson_events(start_run(&server, &refused, "print(6 * 7)").await).await;
    let bodies: Vec<&EventBody> = events.iter().map(|e| &e.event).collect();
    let code_cell = bodies
        .iter()
        .find_map(|e| match e {
            EventBody::CellStarted {
                cell_id,
                cell_kind: CellKind::Code,
                ..
            } => Some(*cell_id),
            _ => None,
        })
        .expect("a code cell");
    let tail: Vec<EventBody> = bodies[bodies.len() - 2..]
        .iter()
        .map(|e| match e {
            EventBody::TurnFinished {
                turn,
                status,
                final_cell,
                ..
            } => EventBody::TurnFinished {
                turn: *turn,
                status: *status,
                elapsed_ms: 0,
                final_cell: *final_cell,
            },
            other => (*other).clone(),
        })
        .collect();
    let turn = events
        .iter()
        .find_map(|e| match e.event {
            EventBody::TurnStarted { turn, .. } => Some(turn),
            _ => None,
        })
        .expect("a turn");
    assert_eq!(
        tail,
        vec![
            EventBody::KernelRefused {
                cell_id: code_cell,
                cap: KernelCap::Owner,
                held: 1,
            },
            EventBody::TurnFinished {
                turn,
                status: TurnStatus::Error,
                elapsed_ms: 0,
                final_cell: Some(code_cell),
            },
        ],
        "{bodies:?}"
    );

    // What is stored: the code, complete and fine, and no result cell.
    let notebook = Notebook::from_events(&events_of(&server, &refused).await);
    let cells: Vec<(CellKind, CellStatus, String)> = notebook
        .cells()
        .map(|c| (c.kind, c.status, c.text.clone()))
        .collect();
    assert_eq!(
        cells,
        vec![(CellKind::Code, CellStatus::Ok, "print(6 * 7)".to_string())]
    );
    let refusal = notebook.turns().next_back().and_then(|t| t.refused);
    assert_eq!(
        refusal.map(|r| (r.cell_id, r.cap, r.held)),
        Some((code_cell, KernelCap::Owner, 1))
    );

    // A question's program is refused alike: the model's code stays, with
    // no result cell and no explanation.
    let asked = server.new_session_of(OWNER_ID).await;
    ask_as_owner(&server, &asked, "```python\nprint(7 * 6)\n```").await;
    let notebook = Notebook::from_events(&events_of(&server, &asked).await);
    let kinds: Vec<(CellKind, CellStatus)> = notebook.cells().map(|c| (c.kind, c.status)).collect();
    assert_eq!(
        kinds,
        vec![
            (CellKind::User, CellStatus::Ok),
            (CellKind::Code, CellStatus::Ok)
        ]
    );
    let turn = notebook.turns().next_back().expect("a turn");
    assert_eq!(turn.status, Some(TurnStatus::Error));
    assert_eq!(
        turn.refused.map(|r| (r.cap, r.held)),
        Some((KernelCap::Owner, 1))
    );

    // Once the other program stops, the same code runs.
    let_go(&server, &busy, sleeping).await;
    ndjson_events(start_run(&server, &refused, "print(6 * 7)").await).await;
    let printed = Notebook::from_events(&events_of(&server, &refused).await)
        .cells()
        .next_back()
        .map(|c| (c.kind, c.printed()));
    assert_eq!(printed, Some((CellKind::Result, "42\n".to_string())));
}

#[tokio::test]
async fn a_look_at_the_data_refused_a_kernel_ends_the_turn_with_one_refusal() {
    let server = one_kernel_server().await;
    // A notebook with a table, profiled by a first question in its kernel.
    let data = server.new_session_of(OWNER_ID).await;
    let put = http_as(Some(OWNER_ID))
        .put(server.url(&format!("/api/sessions/{data}/files?path=news.csv")))
        .body("author,source,neg\nA,abc-news,0.1\nB,reuters,0.2\nC,abc-news,0.3\n")
        .send()
        .await
        .unwrap();
    assert_eq!(put.status(), 201);
    ask_as_owner(&server, &data, "```python\nprint(1)\n```").await;

    // Another notebook's program takes the owner's one kernel, and runs.
    let (busy, sleeping) = hold_the_kernel(&server).await;

    // "ABC News" is a value of `source` written another way: a look would
    // run first, and finds no kernel. The turn ends there, once refused,
    // with no program of the model's.
    let events = ask_as_owner(
        &server,
        &data,
        "```python\nprint(2)\n```\nWhat is the mean neg of ABC News articles?",
    )
    .await;
    let refusals: Vec<_> = events
        .iter()
        .filter_map(|e| match &e.event {
            EventBody::KernelRefused { cell_id, cap, held } => Some((*cell_id, *cap, *held)),
            _ => None,
        })
        .collect();
    let notebook = Notebook::from_events(&events_of(&server, &data).await);
    let turn = notebook.turns().next_back().expect("a turn");
    let code: Vec<(app::protocol::CellId, String)> = notebook
        .cells_of(turn.id)
        .filter(|c| c.kind == CellKind::Code)
        .map(|c| (c.id, c.text.lines().next().unwrap_or("").to_string()))
        .collect();
    assert_eq!(code.len(), 1, "only the look's code: {code:?}");
    assert!(
        code[0]
            .1
            .starts_with("# Looking at the data: the values of 'source' in news.csv"),
        "{code:?}"
    );
    assert_eq!(refusals, vec![(code[0].0, KernelCap::Owner, 1)]);
    assert_eq!(turn.status, Some(TurnStatus::Error));
    assert_eq!(turn.final_cell, Some(code[0].0));
    let_go(&server, &busy, sleeping).await;
}
