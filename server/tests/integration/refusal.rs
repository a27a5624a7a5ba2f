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
    let server = TestServer::start_configured(|config| {
        config.notebook.max_kernels_per_owner = 1;
        config.sandbox.pool_size = 0;
    })
    .await;
    let busy = server.new_session_of(OWNER_ID).await;
    let sleeping = start_run(&server, &busy, "import time\ntime.sleep(60)").await;
    until_running(&server, &busy).await;

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
    let response = http_as(Some(OWNER_ID))
        .post(server.url(&format!("/api/sessions/{asked}/ask")))
        .json(&serde_json::json!({ "text": "```python\nprint(7 * 6)\n```" }))
        .send()
        .await
        .unwrap();
    ndjson_events(response).await;
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
    let stopped = http_as(Some(OWNER_ID))
        .post(server.url(&format!("/api/sessions/{busy}/stop")))
        .send()
        .await
        .unwrap();
    assert_eq!(stopped.status(), 204);
    ndjson_events(sleeping).await;
    ndjson_events(start_run(&server, &refused, "print(6 * 7)").await).await;
    let printed = Notebook::from_events(&events_of(&server, &refused).await)
        .cells()
        .next_back()
        .map(|c| (c.kind, c.printed()));
    assert_eq!(printed, Some((CellKind::Result, "42\n".to_string())));
}
