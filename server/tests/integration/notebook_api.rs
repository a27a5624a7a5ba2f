//! `/api/sessions`: the notebook over plain HTTP, one event a line, sharing
//! the turn path (and the session) with the page's WebSocket.

use app::notebook::Notebook;
use app::protocol::{CellKind, EventBody, ServerMessage, SessionEvent, TurnStatus};
use futures::StreamExt;

use crate::support::{ASKED, PATIENCE, TestServer, http, ndjson_events, random_session_id};

async fn create(server: &TestServer) -> String {
    let response = http()
        .post(server.url("/api/sessions"))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 201);
    let body: serde_json::Value = response.json().await.unwrap();
    let id = body["id"].as_str().unwrap().to_string();
    assert_eq!(body["url"], format!("/sessions/{id}"));
    id
}

#[tokio::test]
async fn an_ask_streams_its_turn_as_ndjson_and_a_follow_up_keeps_state() {
    let server = TestServer::start().await;
    let id = create(&server).await;
    let response = http()
        .post(server.url(&format!("/api/sessions/{id}/ask")))
        .json(&serde_json::json!({ "text": "```python\nanswer = 6 * 7\nprint(answer)\n```" }))
        .send()
        .await
        .unwrap();
    let events = ndjson_events(response).await;
    assert!(matches!(
        events.first().map(|e| &e.event),
        Some(EventBody::TurnStarted { .. })
    ));
    assert!(matches!(
        events.last().map(|e| &e.event),
        Some(EventBody::TurnFinished {
            status: TurnStatus::Ok,
            ..
        })
    ));
    let seqs: Vec<u64> = events.iter().map(|e| e.seq).collect();
    assert_eq!(seqs, (1..=events.len() as u64).collect::<Vec<_>>());
    let notebook = Notebook::from_events(&events);
    let kinds: Vec<CellKind> = notebook.cells().map(|c| c.kind).collect();
    assert_eq!(kinds, ASKED);
    assert_eq!(notebook.all_cells()[2].printed(), "42\n");

    // Code as written, no model; the kernel still has `answer`.
    let response = http()
        .post(server.url(&format!("/api/sessions/{id}/run")))
        .json(&serde_json::json!({ "code": "print(answer + 1)", "language": "python" }))
        .send()
        .await
        .unwrap();
    let run = ndjson_events(response).await;
    assert_eq!(run[0].seq, events.len() as u64 + 1, "no gap, no repeat");
    let both = Notebook::from_events(&[events.clone(), run.clone()].concat());
    assert_eq!(both.cells().next_back().unwrap().printed(), "43\n");

    // The whole history, as a page would replay it.
    let history = ndjson_events(
        http()
            .get(server.url(&format!("/api/sessions/{id}/events?after=0")))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(history, [events, run].concat());
}

#[tokio::test]
async fn a_page_on_the_session_sees_an_api_turn_live() {
    let server = TestServer::start().await;
    let id = create(&server).await;
    let mut page = server.join(&id).await;
    let response = http()
        .post(server.url(&format!("/api/sessions/{id}/ask")))
        .json(&serde_json::json!({ "text": "seen by both" }))
        .send()
        .await
        .unwrap();
    let from_api = ndjson_events(response).await;
    let from_page = page.events_until_finished().await;
    // The same events; the page's carry their markdown's markup.
    assert_eq!(crate::support::as_a_page_is_sent(&from_api), from_page);
    assert!(from_api.iter().all(|e| !matches!(
        &e.event,
        EventBody::UserMessage {
            markup: Some(_),
            ..
        }
    )));
}

#[tokio::test]
async fn stop_ends_a_running_turn_over_http() {
    let server = TestServer::start().await;
    let id = create(&server).await;
    let response = http()
        .post(server.url(&format!("/api/sessions/{id}/run")))
        .json(&serde_json::json!({
            "code": "import time\nprint('started', flush=True)\ntime.sleep(120)",
            "language": "python"
        }))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let mut body = response.bytes_stream();
    let mut seen = String::new();
    while !seen.contains("started") {
        let chunk = tokio::time::timeout(PATIENCE, body.next())
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        seen.push_str(&String::from_utf8_lossy(&chunk));
    }
    let stopped = http()
        .post(server.url(&format!("/api/sessions/{id}/stop")))
        .send()
        .await
        .unwrap();
    assert_eq!(stopped.status(), 204);
    while let Some(chunk) = tokio::time::timeout(PATIENCE, body.next()).await.unwrap() {
        seen.push_str(&String::from_utf8_lossy(&chunk.unwrap()));
    }
    let last: ServerMessage = serde_json::from_str(seen.lines().last().unwrap()).unwrap();
    assert!(
        matches!(
            last,
            ServerMessage::Event(SessionEvent {
                event: EventBody::TurnFinished {
                    status: TurnStatus::Cancelled,
                    ..
                },
                ..
            })
        ),
        "{last:?}"
    );
}

#[tokio::test]
async fn a_question_being_written_is_accepted_for_its_own_sessions_only() {
    let server = TestServer::start().await;
    let id = create(&server).await;
    let composing = http()
        .post(server.url(&format!("/api/sessions/{id}/composing")))
        .send()
        .await
        .unwrap();
    assert_eq!(composing.status(), 202);
    // Someone else's session, or none: not found, as everywhere.
    let unknown = random_session_id();
    let refused = http()
        .post(server.url(&format!("/api/sessions/{unknown}/composing")))
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), 404);
    // The session still answers as before.
    let asked = http()
        .post(server.url(&format!("/api/sessions/{id}/ask")))
        .json(&serde_json::json!({ "text": "```python\nprint(6 * 7)\n```" }))
        .send()
        .await
        .unwrap();
    assert_eq!(asked.status(), 200);
    let text = asked.text().await.unwrap();
    assert!(text.contains("\"text\":\"42\\n\""), "{text}");
}

#[tokio::test]
async fn bad_requests_get_clear_errors() {
    let server = TestServer::start().await;
    let id = create(&server).await;
    let unknown = random_session_id();
    let cases = [
        (
            format!("/api/sessions/{unknown}/ask"),
            serde_json::json!({ "text": "hi" }),
            404,
            "not_found",
        ),
        (
            "/api/sessions/not-an-id/ask".into(),
            serde_json::json!({ "text": "hi" }),
            404,
            "not_found",
        ),
        (
            format!("/api/sessions/{id}/ask"),
            serde_json::json!({ "text": "  " }),
            400,
            "bad_request",
        ),
        (
            format!("/api/sessions/{id}/ask"),
            serde_json::json!({ "txt": "hi" }),
            400,
            "bad_request",
        ),
        (
            format!("/api/sessions/{id}/ask"),
            serde_json::json!({ "text": "x".repeat(40_000) }),
            413,
            "too_large",
        ),
        (
            format!("/api/sessions/{id}/run"),
            serde_json::json!({ "code": "print(1)", "language": "cobol" }),
            400,
            "bad_request",
        ),
        (
            format!("/api/sessions/{id}/run"),
            serde_json::json!({ "code": "a\u{0}b", "language": "python" }),
            400,
            "bad_request",
        ),
    ];
    for (path, body, status, code) in cases {
        let response = http()
            .post(server.url(&path))
            .json(&body)
            .send()
            .await
            .unwrap();
        let got = response.status().as_u16();
        let answer: serde_json::Value = response.json().await.unwrap();
        let shown = path.chars().take(60).collect::<String>();
        assert_eq!(got, status, "{shown}: {answer}");
        assert_eq!(answer["error"]["code"], code, "{shown}: {answer}");
    }
    let response = http()
        .post(server.url(&format!("/api/sessions/{id}/ask")))
        .header("content-type", "application/json")
        .body("{not json")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 400);

    // Nothing refused entered the history.
    let history = http()
        .get(server.url(&format!("/api/sessions/{id}/events")))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert_eq!(history, "");
}
