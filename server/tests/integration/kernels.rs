//! The kernels one person's notebooks hold, on the defaults: a person on
//! their own machine never meets a dead end.

use crate::support::*;
use app::notebook::Notebook;

/// Runs `code` in session `id` as `owner` and gives what its last cell
/// printed, with the run's events as text.
async fn run_as(server: &TestServer, owner: &str, id: &str, code: &str) -> (String, String) {
    let response = http_as(Some(owner))
        .post(server.url(&format!("/api/sessions/{id}/run")))
        .json(&serde_json::json!({ "code": code, "language": "python" }))
        .send()
        .await
        .unwrap();
    let ran = ndjson_events(response).await;
    assert!(!ran.is_empty());
    let events = ndjson_events(
        http_as(Some(owner))
            .get(server.url(&format!("/api/sessions/{id}/events")))
            .send()
            .await
            .unwrap(),
    )
    .await;
    let printed = Notebook::from_events(&events)
        .cells()
        .next_back()
        .map(|cell| cell.printed())
        .unwrap_or_default();
    (printed, serde_json::to_string(&events).unwrap())
}

/// What `GET /api/kernels` answers `owner`.
pub(crate) async fn kernels_of(server: &TestServer, owner: &str) -> serde_json::Value {
    http_as(Some(owner))
        .get(server.url("/api/kernels"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}

/// The sandbox settings as shipped, but for the warm pool.
fn shipped(config: &mut runcell_server::config::Config) {
    config.sandbox.anonymous_sessions_per_client =
        runcell_sandbox::config::SandboxConfig::default().anonymous_sessions_per_client;
    config.sandbox.pool_size = 0;
}

#[tokio::test]
async fn one_person_runs_code_in_six_notebooks_one_after_another_on_the_defaults() {
    let server = TestServer::start_configured(shipped).await;
    let owner = "b1b1b1b1b1b1b1b1b1b1b1b1b1b1b1b1";
    for n in 0..6 {
        let id = server.new_session_of(owner).await;
        let (printed, events) = run_as(&server, owner, &id, &format!("print({n} * 2)")).await;
        assert!(
            printed.starts_with(&format!("{}\n", n * 2)),
            "notebook {n}: {events}"
        );
    }
}

/// Two anonymous people on one address (behind a proxy, say) hold its
/// sandbox sessions together; when they are all taken, one person's new
/// kernel closes that person's own longest-idle kernel, never the other's.
#[tokio::test]
async fn an_address_cap_gives_way_to_the_same_persons_longest_idle_kernel() {
    let server = TestServer::start_configured(|config| {
        config.sandbox.anonymous_sessions_per_client = 3;
        config.sandbox.pool_size = 0;
    })
    .await;
    let (me, other) = (
        "c1c1c1c1c1c1c1c1c1c1c1c1c1c1c1c1",
        "d2d2d2d2d2d2d2d2d2d2d2d2d2d2d2d2",
    );
    let theirs = server.new_session_of(other).await;
    run_as(&server, other, &theirs, "kept = 'theirs'").await;
    let mut mine = Vec::new();
    for n in 0..2 {
        let id = server.new_session_of(me).await;
        run_as(&server, me, &id, &format!("kept = {n}")).await;
        mine.push(id);
    }
    // The address holds 3: my third notebook takes my first one's place.
    let third = server.new_session_of(me).await;
    let (printed, events) = run_as(&server, me, &third, "print('third')").await;
    assert_eq!(printed, "third\n", "{events}");
    let (printed, _) = run_as(&server, other, &theirs, "print(kept)").await;
    assert_eq!(printed, "theirs\n");
    let (printed, _) = run_as(&server, me, &mine[1], "print(kept)").await;
    assert_eq!(printed, "1\n");
    let (printed, _) = run_as(&server, me, &mine[0], "print('kept' in globals())").await;
    assert!(printed.starts_with("False\n"), "{printed}");
}

/// The kernels a person's notebooks hold are listed with their titles, and
/// one can be closed: its next run starts afresh and says so.
#[tokio::test]
async fn a_person_lists_their_kernels_and_closes_one() {
    let server = TestServer::start().await;
    let owner = "e3e3e3e3e3e3e3e3e3e3e3e3e3e3e3e3";
    let none = kernels_of(&server, owner).await;
    assert_eq!(none, serde_json::json!({ "kernels": [], "cap": 4 }));
    let id = server.new_session_of(owner).await;
    run_as(&server, owner, &id, "x = 1").await;
    let listed = kernels_of(&server, owner).await;
    let kernels = listed["kernels"].as_array().unwrap();
    assert_eq!(kernels.len(), 1, "{listed}");
    assert_eq!(kernels[0]["session_id"], id.as_str());
    assert_eq!(kernels[0]["url"], format!("/sessions/{id}"));
    assert_eq!(kernels[0]["backend"], "jail");
    assert_eq!(kernels[0]["running"], false);
    // Someone else neither sees it nor closes it.
    let stranger = "f4f4f4f4f4f4f4f4f4f4f4f4f4f4f4f4";
    let theirs = kernels_of(&server, stranger).await;
    assert_eq!(theirs["kernels"], serde_json::json!([]));
    let refused = http_as(Some(stranger))
        .delete(server.url(&format!("/api/sessions/{id}/kernel")))
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), 404);
    let closed = http_as(Some(owner))
        .delete(server.url(&format!("/api/sessions/{id}/kernel")))
        .send()
        .await
        .unwrap();
    assert_eq!(closed.status(), 204);
    let again = http_as(Some(owner))
        .delete(server.url(&format!("/api/sessions/{id}/kernel")))
        .send()
        .await
        .unwrap();
    assert_eq!(again.status(), 404);
    let (printed, _) = run_as(&server, owner, &id, "print('x' in globals())").await;
    assert!(printed.contains("kernel had stopped"), "{printed}");
    assert!(printed.starts_with("False\n"), "{printed}");
}
