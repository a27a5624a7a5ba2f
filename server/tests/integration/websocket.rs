use app::notebook::Notebook;
use app::protocol::{
    CellKind, CellStatus, ErrorCode, EventBody, MAX_ASK_BYTES, PROTOCOL_VERSION, ServerMessage,
    TurnKind, TurnStatus,
};
use futures::StreamExt;
use tokio_tungstenite::tungstenite::Message;

use crate::support::{ASKED, PATIENCE, TestServer, http, printed, random_session_id};

#[tokio::test]
async fn an_ask_streams_back_as_a_cell_in_several_frames() {
    let server = TestServer::start().await;
    let session = server.new_session().await;
    let mut client = server.connect(&session, 0).await;
    assert_eq!(
        client.welcome().await,
        (PROTOCOL_VERSION, session.clone(), 0)
    );

    client.ask("count the r's in strawberry").await;
    let events = client.events_until_finished().await;

    let seqs: Vec<u64> = events.iter().map(|e| e.seq).collect();
    assert_eq!(seqs, (1..=events.len() as u64).collect::<Vec<_>>());
    assert!(matches!(
        events[0].event,
        EventBody::TurnStarted {
            turn_kind: TurnKind::Ask,
            ..
        }
    ));
    assert!(
        matches!(events[1].event, EventBody::UserMessage { ref text, .. } if text == "count the r's in strawberry")
    );
    assert!(matches!(
        events[2].event,
        EventBody::CellStarted {
            cell_kind: CellKind::Code,
            ..
        }
    ));
    assert!(matches!(
        events.last().map(|e| &e.event),
        Some(EventBody::TurnFinished {
            status: TurnStatus::Ok,
            ..
        })
    ));
    let deltas = events
        .iter()
        .filter(|e| matches!(e.event, EventBody::CellDelta { .. }))
        .count();
    assert!(deltas >= 3, "{deltas} deltas");
    let notebook = Notebook::from_events(&events);
    let kinds: Vec<CellKind> = notebook.cells().map(|c| c.kind).collect();
    assert_eq!(kinds, ASKED);
    let cells = notebook.all_cells();
    assert_eq!(cells[1].text, printed("count the r's in strawberry"));
    assert_eq!(cells[2].printed(), "count the r's in strawberry\n");
    assert!(
        cells[3].text.contains("count the r's in strawberry"),
        "{}",
        cells[3].text
    );
    assert!(cells.iter().all(|c| c.status == CellStatus::Ok));
}

#[tokio::test]
async fn bad_frames_get_an_error_and_the_connection_keeps_working() {
    let server = TestServer::start().await;
    let mut client = server.join(&server.new_session().await).await;

    let too_long = serde_json::json!({ "type": "ask", "text": "x".repeat(MAX_ASK_BYTES + 1) });
    let cases = [
        (Message::text("not json"), ErrorCode::BadFrame),
        (
            Message::text(r#"{"type":"launch_missiles"}"#),
            ErrorCode::BadFrame,
        ),
        (
            Message::text(r#"{"type":"ask","text":42}"#),
            ErrorCode::BadFrame,
        ),
        (Message::text("\u{0}\u{1}"), ErrorCode::BadFrame),
        (
            Message::binary(vec![0u8, 159, 146, 150]),
            ErrorCode::BadFrame,
        ),
        (
            Message::text(r#"{"type":"ask","text":"  \n "}"#),
            ErrorCode::EmptyMessage,
        ),
        (
            Message::text(too_long.to_string()),
            ErrorCode::MessageTooLong,
        ),
    ];
    for (frame, want) in cases {
        let shown = format!("{frame:?}").chars().take(60).collect::<String>();
        client.send_raw(frame).await;
        match client.next().await {
            Some(ServerMessage::Error { code, message }) => {
                assert_eq!(code, want, "{shown}");
                assert!(!message.is_empty());
            }
            other => panic!("{shown}: expected an error, got {other:?}"),
        }
    }

    client.ask("still fine").await;
    let events = client.events_until_finished().await;
    assert_eq!(
        events[0].seq, 1,
        "refused frames must not enter the history"
    );
    assert_eq!(
        Notebook::from_events(&events).all_cells()[1].text,
        printed("still fine")
    );
}

#[tokio::test]
async fn an_oversized_frame_closes_only_that_connection() {
    let server = TestServer::start().await;
    let session = server.new_session().await;
    let mut neighbour = server.join(&session).await;
    let mut client = server.join(&session).await;
    // Far above the frame limit: the server drops this connection.
    let _ =
        futures::SinkExt::send(&mut client.ws, Message::text("y".repeat(2 * 1024 * 1024))).await;
    let closed = tokio::time::timeout(PATIENCE, async {
        loop {
            match client.ws.next().await {
                Some(Ok(Message::Close(_)) | Err(_)) | None => return true,
                Some(Ok(_)) => {}
            }
        }
    })
    .await;
    assert_eq!(closed, Ok(true));

    neighbour.ask("the neighbour is unaffected").await;
    let events = neighbour.events_until_finished().await;
    assert_eq!(
        Notebook::from_events(&events).all_cells()[1].text,
        printed("the neighbour is unaffected")
    );
    let health = http().get(server.url("/healthz")).send().await.unwrap();
    assert_eq!(health.status(), 200);
}

#[tokio::test]
async fn a_reconnecting_page_gets_exactly_what_it_missed() {
    let server = TestServer::start().await;
    let session = server.new_session().await;
    let mut first = server.join(&session).await;
    first.ask("one two three four").await;
    let all = first.events_until_finished().await;
    drop(first);

    // Resume from the middle: only the later events, in order.
    let mut resumed = server.connect(&session, 3).await;
    let (_, _, last_seq) = resumed.welcome().await;
    assert_eq!(last_seq, all.len() as u64);
    let mut replay = Vec::new();
    for _ in 3..all.len() {
        replay.push(resumed.next_event().await);
    }
    assert_eq!(replay, all[3..].to_vec());

    // A page that claims more than the history holds (a server that forgot)
    // is told how far the history goes, and follows from there.
    let mut stale = server.connect(&session, u64::MAX).await;
    assert_eq!(stale.welcome().await.2, last_seq);

    // Nothing more until something new happens, which follows without a gap.
    resumed.ask("five").await;
    assert_eq!(resumed.next_event().await.seq, last_seq + 1);
    assert_eq!(stale.next_event().await.seq, last_seq + 1);
}

#[tokio::test]
async fn a_flood_of_asks_is_bounded_and_the_session_recovers() {
    let server = TestServer::start().await;
    let mut client = server.join(&server.new_session().await).await;
    let text = "one two three four";
    let sent = 40;
    for _ in 0..sent {
        client.ask(text).await;
    }
    // Every ask is either refused as busy or becomes a turn; nothing else.
    let mut busy = 0;
    let mut finished = 0;
    while busy + finished < sent {
        match client.next().await {
            Some(ServerMessage::Error { code, .. }) => {
                assert_eq!(code, ErrorCode::Busy);
                busy += 1;
            }
            Some(ServerMessage::Event(event)) => {
                if matches!(event.event, EventBody::TurnFinished { .. }) {
                    finished += 1;
                }
            }
            other => panic!("unexpected {other:?}"),
        }
    }
    assert!(busy > 0, "the flood should have been bounded");
    assert!(finished >= 1);
    // Once the queue drains, the session takes asks again.
    client.ask("after the flood").await;
    loop {
        match client.next().await {
            Some(ServerMessage::Event(event)) => {
                if let EventBody::UserMessage { text, .. } = &event.event {
                    assert_eq!(text, "after the flood");
                    break;
                }
            }
            other => panic!("unexpected {other:?}"),
        }
    }
}

#[tokio::test]
async fn every_page_of_a_session_sees_the_same_events() {
    let server = TestServer::start().await;
    let session = server.new_session().await;
    let mut a = server.join(&session).await;
    let mut b = server.join(&session).await;
    a.ask("shared view").await;
    let from_a = a.events_until_finished().await;
    let from_b = b.events_until_finished().await;
    assert_eq!(from_a, from_b);

    // Another session hears nothing of it.
    let mut other = server.connect(&server.new_session().await, 0).await;
    assert_eq!(other.welcome().await.2, 0);
}

#[tokio::test]
async fn bad_socket_addresses_are_refused_with_json() {
    let server = TestServer::start().await;
    let client = http();
    let cases = [
        ("/ws/sessions/not-a-uuid", 404, "not_found"),
        (
            &*format!("/ws/sessions/{}?after=abc", random_session_id()),
            400,
            "bad_request",
        ),
    ];
    for (path, status, code) in cases {
        let response = client
            .get(server.url(path))
            .header("connection", "upgrade")
            .header("upgrade", "websocket")
            .header("sec-websocket-version", "13")
            .header("sec-websocket-key", "dGhlIHNhbXBsZSBub25jZQ==")
            .send()
            .await
            .unwrap();
        assert_eq!(response.status().as_u16(), status, "{path}");
        let body: serde_json::Value = response.json().await.unwrap();
        assert_eq!(body["error"]["code"], code, "{path}");
    }
}

#[tokio::test]
async fn shutdown_closes_sockets_and_stops_the_server() {
    let mut server = TestServer::start().await;
    let mut client = server.join(&server.new_session().await).await;
    server.shutdown.cancel();
    assert!(client.next().await.is_none(), "the socket should be closed");
    let task = server.task.take().unwrap();
    let result = tokio::time::timeout(PATIENCE, task).await;
    assert!(matches!(result, Ok(Ok(Ok(())))), "{result:?}");
}

/// The close frame a socket ends with: its code and reason.
async fn close_of(client: &mut crate::support::Client) -> Option<(u16, String)> {
    loop {
        let frame = tokio::time::timeout(PATIENCE, client.ws.next())
            .await
            .expect("no frame in time");
        match frame {
            Some(Ok(Message::Close(Some(frame)))) => {
                return Some((u16::from(frame.code), frame.reason.to_string()));
            }
            Some(Ok(Message::Close(None)) | Err(_)) | None => return None,
            Some(Ok(_)) => {}
        }
    }
}

#[tokio::test]
async fn more_pages_than_a_session_takes_are_closed_saying_why() {
    let server = TestServer::start_configured(|config| {
        config.sandbox.pool_size = 0;
        config.notebook.max_sockets_per_session = 2;
        config.notebook.max_sockets_per_owner = 3;
    })
    .await;
    let one = server.new_session().await;
    let two = server.new_session().await;
    let a = server.join(&one).await;
    let _b = server.join(&one).await;
    // A third page of the same session is told why it is closed.
    let mut third = server.connect(&one, 0).await;
    let (code, reason) = close_of(&mut third).await.expect("a close frame");
    assert_eq!(code, 1013);
    assert!(reason.contains("this session has 2 pages open"), "{reason}");
    // The owner's cap holds across sessions.
    let _c = server.join(&two).await;
    let mut fourth = server.connect(&two, 0).await;
    let (code, reason) = close_of(&mut fourth).await.expect("a close frame");
    assert_eq!(code, 1013);
    assert!(reason.contains("you have 3 session pages open"), "{reason}");
    // Another owner is not held to this one's count.
    let other = "7e570000000000000000000000000002";
    let response = crate::support::http_as(Some(other))
        .post(server.url("/api/sessions"))
        .send()
        .await
        .unwrap();
    let created: serde_json::Value = response.json().await.unwrap();
    let theirs = created["id"].as_str().unwrap();
    let mut theirs = server.try_connect_as(theirs, Some(other)).await.unwrap();
    assert!(matches!(
        theirs.next().await,
        Some(ServerMessage::Welcome { .. })
    ));
    // A page that closes frees its place.
    drop(a);
    let deadline = tokio::time::Instant::now() + PATIENCE;
    loop {
        let mut again = server.connect(&one, 0).await;
        match again.next().await {
            Some(ServerMessage::Welcome { .. }) => break,
            _ => assert!(
                tokio::time::Instant::now() < deadline,
                "the place never came back"
            ),
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

/// How a page's socket was first answered: a protocol frame (its welcome),
/// or a close with its code and reason.
async fn first_answer(client: &mut crate::support::Client) -> Result<(), (u16, String)> {
    loop {
        let frame = tokio::time::timeout(PATIENCE, client.ws.next())
            .await
            .expect("no frame in time");
        match frame {
            Some(Ok(Message::Text(_))) => return Ok(()),
            Some(Ok(Message::Close(Some(frame)))) => {
                return Err((u16::from(frame.code), frame.reason.to_string()));
            }
            Some(Ok(Message::Ping(_) | Message::Pong(_))) => {}
            other => panic!("unexpected answer {other:?}"),
        }
    }
}

/// Pages opened at once cannot pass a session's cap together: each takes
/// its place before it is welcomed.
#[tokio::test]
async fn pages_opened_at_once_cannot_pass_the_sessions_cap_together() {
    const CAP: usize = 2;
    const PAGES: usize = 6;
    let server = TestServer::start_configured(|config| {
        config.notebook.max_sockets_per_session = CAP as u32;
    })
    .await;
    let id = server.new_session().await;
    let opens = (0..PAGES).map(|_| async {
        let mut page = server.connect(&id, 0).await;
        let answer = first_answer(&mut page).await;
        // Kept open until every page is answered.
        (answer, page)
    });
    let answered = futures::future::join_all(opens).await;
    let answers: Vec<&Result<(), (u16, String)>> = answered.iter().map(|(a, _)| a).collect();
    let welcomed = answers.iter().filter(|a| a.is_ok()).count();
    assert_eq!(welcomed, CAP, "{answers:?}");
    for refused in answers.iter().filter_map(|a| a.as_ref().err()) {
        assert_eq!(refused.0, 1013, "{refused:?}");
        assert!(
            refused.1.contains("this session has 2 pages open"),
            "{refused:?}"
        );
    }
}

/// A page renders no markdown: its socket sends each question with its
/// markup and each explanation delta with the markup of the whole text so
/// far (the page keeps the last), its first render has the same, and the
/// history itself (what API clients read) has none.
#[tokio::test]
async fn a_page_is_sent_the_markup_of_questions_and_explanations() {
    use runcell_protocol::render::markdown::{question_html, to_html};

    let server = TestServer::start().await;
    let session = server.new_session().await;
    let mut client = server.join(&session).await;
    let question = "Run this, *please*:\n```python\nprint('a **bold** sum:', 2 + 3)\n```";
    client.ask(question).await;
    let events = client.events_until_finished().await;

    let markup = events.iter().find_map(|e| match &e.event {
        EventBody::UserMessage { markup, .. } => markup.clone(),
        _ => None,
    });
    assert_eq!(markup, Some(question_html(question)));
    assert!(markup.is_some_and(|m| m.contains("<em>please</em>")));
    let notebook = Notebook::from_events(&events);
    let explanation = notebook
        .cells()
        .find(|c| c.kind == CellKind::Explanation)
        .expect("an explanation");
    let deltas: Vec<_> = events
        .iter()
        .filter_map(|e| match &e.event {
            EventBody::CellDelta {
                cell_id, highlight, ..
            } if *cell_id == explanation.id => Some(highlight.clone()),
            _ => None,
        })
        .collect();
    assert!(deltas.len() >= 2, "{deltas:?}");
    assert!(deltas.iter().all(Option::is_some), "{deltas:?}");
    assert_eq!(explanation.html, to_html(&explanation.text));
    assert_eq!(explanation.highlighted, explanation.text.len());

    // A page opened now is sent the same markup, from the history.
    let mut late = server.connect(&session, 0).await;
    late.welcome().await;
    let mut again = Vec::new();
    while again.len() < events.len() {
        again.push(late.next_event().await);
    }
    let reread = Notebook::from_events(&again);
    let cells: Vec<_> = reread.cells().map(|c| (c.kind, c.html.clone())).collect();
    let live: Vec<_> = notebook.cells().map(|c| (c.kind, c.html.clone())).collect();
    assert_eq!(cells, live);
    // One that joins mid-explanation (it has the first delta) is sent the
    // second with the markup of both.
    let first = events
        .iter()
        .find(|e| matches!(&e.event, EventBody::CellDelta { cell_id, .. } if *cell_id == explanation.id))
        .expect("a delta");
    let mut joined = server.connect(&session, first.seq).await;
    joined.welcome().await;
    let mut text = match &first.event {
        EventBody::CellDelta { text, .. } => text.clone(),
        _ => unreachable!(),
    };
    loop {
        let event = joined.next_event().await;
        if let EventBody::CellDelta {
            cell_id,
            text: more,
            highlight,
        } = &event.event
            && *cell_id == explanation.id
        {
            text.push_str(more);
            assert_eq!(
                highlight.as_ref().map(|h| h.html.clone()),
                Some(to_html(&text))
            );
            break;
        }
    }

    // The history as API clients read it is as it was published.
    let stored = crate::support::history(&server, &session).await;
    assert!(stored.iter().all(|e| match &e.event {
        EventBody::UserMessage { markup, .. } => markup.is_none(),
        EventBody::CellDelta {
            cell_id, highlight, ..
        } if *cell_id == explanation.id => highlight.is_none(),
        _ => true,
    }));

    // The page's first render shows the same markup.
    let html = crate::support::page_html(&server, &format!("/sessions/{session}")).await;
    assert!(html.contains("Run this, <em>please</em>:"), "{html}");
}
