//! runcell on PostgreSQL (`RUNCELL_TEST_DATABASE_URL`, a throwaway server
//! that `scripts/test.sh` starts). Sessions cannot move between nodes yet,
//! so a database has one live node: a second one refuses to start, and once
//! the first stops, another node on another machine's data directory serves
//! everything it stored: keys, tokens it signed, sessions, share links.

use std::time::Duration;

use app::protocol::{EventBody, KernelLoss};
use runcell::store::scratch::ScratchDatabase;

use crate::support::{PATIENCE, TestServer, ask, bearer, history, http, http_as};

async fn node(database_url: &str) -> TestServer {
    let url = database_url.to_string();
    TestServer::start_configured(move |config| {
        config.database_url = url.as_str().into();
    })
    .await
}

#[tokio::test]
async fn a_database_has_one_live_node_and_the_next_serves_all_it_stored() {
    let Some(db) = ScratchDatabase::create("cluster").await else {
        return;
    };
    let mut a = node(&db.url).await;
    a.ready().await;

    // A second node on the same database refuses to start, naming the first.
    let mut b = node(&db.url).await;
    let refused = tokio::time::timeout(PATIENCE, b.task.take().unwrap())
        .await
        .expect("the second node gave up")
        .unwrap();
    let message = refused.expect_err("a second live node started").to_string();
    assert!(message.contains("another runcell node"), "{message}");
    assert!(message.contains(&a.addr.to_string()), "{message}");
    drop(b);

    // On A: a key, a token, a turn, a share link.
    let key = a.api_key("shared").await;
    let token = a.token_for(&key).await;
    let id = a.new_session().await;
    let events = ask(&a, &id, "```python\nprint('made on node a')\n```").await;
    assert!(
        events
            .iter()
            .any(|e| matches!(&e.event, EventBody::TurnFinished { .. })),
        "{events:?}"
    );
    let on_a = history(&a, &id).await;
    let shared: serde_json::Value = http()
        .post(a.url(&format!("/api/sessions/{id}/share")))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let link = shared["token"].as_str().unwrap().to_string();

    // A stops cleanly (as SIGTERM would): B, with a data directory of its
    // own, starts at once and serves it all.
    a.shutdown.cancel();
    a.task.take().unwrap().await.unwrap().unwrap();
    let b = node(&db.url).await;
    b.ready().await;
    let from_b = bearer(&token)
        .get(b.url("/v1/code_interpreter/sessions"))
        .send()
        .await
        .unwrap();
    assert_eq!(from_b.status(), 200, "a token A signed works on B");
    assert!(!b.token_for(&key).await.is_empty());

    let on_b = history(&b, &id).await;
    assert_eq!(on_b[..on_a.len()], on_a[..], "every event A stored");
    // B opened a session whose kernel was on A: the page offers Re-run all.
    assert!(
        matches!(
            on_b.last().map(|e| &e.event),
            Some(EventBody::KernelLost {
                reason: KernelLoss::ServerRestart
            })
        ),
        "{:?}",
        on_b.last()
    );
    let listed = http().get(b.url("/api/sessions")).send().await.unwrap();
    assert!(listed.text().await.unwrap().contains(&id));
    let opened = http_as(None)
        .get(b.url(&format!("/s/{link}")))
        .send()
        .await
        .unwrap();
    assert_eq!(opened.status(), 200);
    assert!(opened.text().await.unwrap().contains("made on node a"));
    // Someone else's session is a 404 here too.
    let stranger = http_as(Some("5742a7e0000000000000000000000002"))
        .get(b.url(&format!("/api/sessions/{id}/events")))
        .send()
        .await
        .unwrap();
    assert_eq!(stranger.status(), 404);

    // The session goes on on B: its state was A's, so a follow-up runs in
    // a new kernel there.
    let more = ask(&b, &id, "```python\nprint('then on node b')\n```").await;
    assert!(format!("{more:?}").contains("then on node b"));

    // B restarts (a clean stop frees the database at once): all still there.
    let b = b.restart().await;
    b.ready().await;
    assert!(history(&b, &id).await.len() > on_b.len());
    drop(b);
    tokio::time::sleep(Duration::from_millis(100)).await;
    db.drop_now().await;
}
