use crate::support::{TestServer, http, new_session_id};

#[tokio::test]
async fn healthz_answers_once_ready() {
    let server = TestServer::start().await;
    let response = http().get(server.url("/healthz")).send().await.unwrap();
    assert_eq!(response.status(), 200);
    let body: serde_json::Value = response.json().await.unwrap();
    assert_eq!(body["status"], "ok");
}

#[tokio::test]
async fn the_root_opens_a_new_session() {
    let server = TestServer::start().await;
    let client = http();
    let mut seen = Vec::new();
    for _ in 0..2 {
        let response = client.get(server.url("/")).send().await.unwrap();
        assert_eq!(response.status(), 303);
        let location = response.headers()["location"].to_str().unwrap().to_string();
        let id = location.strip_prefix("/sessions/").unwrap().to_string();
        assert!(uuid::Uuid::try_parse(&id).is_ok(), "{location}");
        seen.push(id);
    }
    assert_ne!(seen[0], seen[1]);
}

#[tokio::test]
async fn a_session_page_is_server_rendered() {
    let server = TestServer::start().await;
    let page = http()
        .get(server.url(&format!("/sessions/{}", new_session_id())))
        .send()
        .await
        .unwrap();
    assert_eq!(page.status(), 200);
    let html = page.text().await.unwrap();
    for needle in [
        "<title>runcell</title>",
        r#"aria-label="Message""#,
        r#"aria-label="Conversation""#,
        "Ask something to start",
        "/pkg/runcell.js",
        "/pkg/runcell.css",
    ] {
        assert!(html.contains(needle), "missing {needle}");
    }
}

#[tokio::test]
async fn a_session_page_shows_its_history_escaped() {
    let server = TestServer::start().await;
    let session = new_session_id();
    let mut client = server.join(&session).await;
    client.ask("<script>alert(1)</script> & more").await;
    client.events_until_finished().await;

    let html = http()
        .get(server.url(&format!("/sessions/{session}")))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(html.contains("&lt;script&gt;alert(1)&lt;/script&gt; &amp; more"));
    assert!(!html.contains("Ask something to start"));
}

#[tokio::test]
async fn unknown_pages_and_bad_session_ids_are_404() {
    let server = TestServer::start().await;
    for path in [
        "/sessions/nope",
        "/sessions/../etc/passwd",
        "/no/such/page",
        "/pkg/missing.js",
    ] {
        let response = http().get(server.url(path)).send().await.unwrap();
        assert_eq!(response.status(), 404, "{path}");
    }
}
