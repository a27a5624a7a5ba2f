//! Edited questions and regenerated answers as branches (issue 41): the
//! old version stays, the kernel follows the branch a turn is on.

use app::notebook::Notebook;
use app::protocol::{ErrorCode, EventBody, ServerMessage, SessionEvent, TurnId};
use tokio_tungstenite::tungstenite::Message;

use crate::support::{TestServer, ask, history, http, ndjson_events};

fn fenced(code: &str) -> String {
    format!("```python\n{code}\n```")
}

/// What the session's newest turn's programs printed, joined.
async fn printed(server: &TestServer, id: &str) -> String {
    let notebook = Notebook::from_events(&history(server, id).await);
    let last = notebook.all_turns().last().map(|t| t.id);
    notebook
        .all_cells()
        .iter()
        .filter(|c| c.turn == last)
        .map(|c| c.printed())
        .collect()
}

fn restored(events: &[SessionEvent]) -> Option<(u32, bool)> {
    events.iter().find_map(|e| match &e.event {
        EventBody::KernelRestored { programs, error } => Some((*programs, error.is_some())),
        _ => None,
    })
}

async fn ask_instead(server: &TestServer, id: &str, text: &str, of: u64) -> reqwest::Response {
    http()
        .post(server.url(&format!("/api/sessions/{id}/ask")))
        .json(&serde_json::json!({ "text": text, "alternative_to": of }))
        .send()
        .await
        .unwrap()
}

#[tokio::test]
async fn an_edit_is_a_branch_and_each_branch_runs_on_its_own_variables() {
    let server = TestServer::start().await;
    let id = server.new_session().await;
    ask(&server, &id, &fenced("a = 1")).await;
    let second = ask(&server, &id, &fenced("b = a + 1\nprint(b)")).await;
    assert_eq!(printed(&server, &id).await, "2\n", "{second:?}");
    assert_eq!(restored(&second), None);

    // Turn 2 again, edited: the kernel ran turn 2, so turn 1 re-runs first.
    let edited =
        ndjson_events(ask_instead(&server, &id, &fenced("b = a + 10\nprint(b)"), 2).await).await;
    assert!(matches!(
        edited[0].event,
        EventBody::TurnStarted {
            alternative_to: Some(TurnId(2)),
            ..
        }
    ));
    assert_eq!(restored(&edited), Some((1, false)));
    assert_eq!(printed(&server, &id).await, "11\n");
    let notebook = Notebook::from_events(&history(&server, &id).await);
    let shown: Vec<u64> = notebook.turns().map(|t| t.id.0).collect();
    assert_eq!(shown, [1, 3]);

    // Back to the first version over the socket; a question there sees b = 2.
    let seen = history(&server, &id).await.len() as u64;
    let mut page = server.connect(&id, seen).await;
    page.welcome().await;
    page.send_raw(Message::text(r#"{"type":"select_branch","turn":2}"#))
        .await;
    let selected = page.next_event().await;
    assert_eq!(
        selected.event,
        EventBody::BranchSelected { turn: TurnId(2) }
    );
    let third = ask(&server, &id, &fenced("print(b * 100)")).await;
    assert_eq!(restored(&third), Some((2, false)));
    assert_eq!(printed(&server, &id).await, "200\n");
    // The kernel now holds this branch: the next question rebuilds nothing.
    let fourth = ask(&server, &id, &fenced("print(a)")).await;
    assert_eq!(restored(&fourth), None);
    let notebook = Notebook::from_events(&history(&server, &id).await);
    let shown: Vec<u64> = notebook.turns().map(|t| t.id.0).collect();
    assert_eq!(shown, [1, 2, 4, 5]);
    let plan: Vec<String> = notebook.rerun_plan().into_iter().map(|s| s.code).collect();
    assert_eq!(
        plan,
        ["a = 1", "b = a + 1\nprint(b)", "print(b * 100)", "print(a)"]
    );
}

#[tokio::test]
async fn versions_of_unknown_or_unfinished_turns_are_refused() {
    let server = TestServer::start().await;
    let id = server.new_session().await;
    ask(&server, &id, "hello").await;
    let refused = ask_instead(&server, &id, "hello again", 9).await;
    assert_eq!(refused.status(), 404);
    assert!(refused.text().await.unwrap().contains("turn 9"));

    let seen = history(&server, &id).await.len() as u64;
    let mut page = server.connect(&id, seen).await;
    page.welcome().await;
    page.send_raw(Message::text(r#"{"type":"select_branch","turn":7}"#))
        .await;
    match page.next().await {
        Some(ServerMessage::Error { code, .. }) => assert_eq!(code, ErrorCode::UnknownTurn),
        other => panic!("{other:?}"),
    }
    page.send_raw(Message::text(r#"{"type":"select_branch","turn":"x"}"#))
        .await;
    match page.next().await {
        Some(ServerMessage::Error { code, .. }) => assert_eq!(code, ErrorCode::BadFrame),
        other => panic!("{other:?}"),
    }
    // Nothing of it reached the history.
    let events = history(&server, &id).await;
    assert!(
        events
            .iter()
            .all(|e| !matches!(e.event, EventBody::BranchSelected { .. }))
    );
}

/// The session's title in its owner's list.
async fn listed_title(server: &TestServer, id: &str) -> String {
    let listed: serde_json::Value = http()
        .get(server.url("/api/sessions"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    listed["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["id"] == id)
        .and_then(|s| s["title"].as_str())
        .unwrap_or_else(|| panic!("{id} listed: {listed}"))
        .to_string()
}

#[tokio::test]
async fn an_edited_first_question_names_the_session_unless_the_person_did() {
    let server = TestServer::start().await;
    let id = server.new_session().await;
    ask(&server, &id, &fenced("a = 1")).await;
    ask(&server, &id, &fenced("b = 2")).await;
    assert_eq!(listed_title(&server, &id).await, "a = 1");

    // An edit of a later question leaves the name.
    ask_instead(&server, &id, &fenced("b = 3"), 2).await;
    assert_eq!(listed_title(&server, &id).await, "a = 1");
    // An edit of the first names it anew (turn 4), and so does an edit of
    // that edit (turn 5).
    ndjson_events(ask_instead(&server, &id, &fenced("a = 10"), 1).await).await;
    assert_eq!(listed_title(&server, &id).await, "a = 10");
    ndjson_events(ask_instead(&server, &id, &fenced("a = 100"), 4).await).await;
    assert_eq!(listed_title(&server, &id).await, "a = 100");
    let html = http()
        .get(server.url(&format!("/sessions/{id}")))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(html.contains("<title>a = 100 · runcell</title>"), "{html}");

    // A name the person chose stays whatever they edit.
    let renamed = http()
        .patch(server.url(&format!("/api/sessions/{id}")))
        .json(&serde_json::json!({ "title": "My numbers" }))
        .send()
        .await
        .unwrap();
    assert_eq!(renamed.status(), 200);
    ndjson_events(ask_instead(&server, &id, &fenced("a = 7"), 5).await).await;
    assert_eq!(listed_title(&server, &id).await, "My numbers");
}
