//! Sessions that last: stored in SQLite as they happen, read back after a
//! restart, shared read-only by link, forked, private to their owner.

use app::notebook::Notebook;
use app::protocol::{CellKind, CellStatus, EventBody, KernelLoss, ServerMessage};
use sqlx::Row;

use crate::support::{TestServer, ask, history, http, http_as, ndjson_events};

const STRANGER: &str = "5742a7e0000000000000000000000002";

/// Sends a request and reads its JSON answer.
async fn json_of(request: reqwest::RequestBuilder) -> serde_json::Value {
    request.send().await.unwrap().json().await.unwrap()
}

async fn page(client: &reqwest::Client, server: &TestServer, path: &str) -> (u16, String) {
    let response = client.get(server.url(path)).send().await.unwrap();
    let status = response.status().as_u16();
    (status, response.text().await.unwrap())
}

const PLOT: &str = "```python\nimport matplotlib.pyplot as plt\nsquares = [n * n for n in range(10)]\nplt.plot(squares)\nplt.show()\nprint('plotted', len(squares))\n```";

#[tokio::test]
async fn a_session_reads_back_identical_after_a_restart_and_re_run_all_rebuilds_its_state() {
    let server = TestServer::start().await;
    let id = server.new_session().await;
    ask(&server, &id, PLOT).await;
    ask(
        &server,
        &id,
        "```python\ntotal = sum(squares)\nprint('total', total)\n```",
    )
    .await;
    let before = history(&server, &id).await;
    let notebook = Notebook::from_events(&before);
    let image = notebook
        .cells()
        .flat_map(|c| &c.outputs)
        .find_map(|o| match o {
            app::protocol::Output::Rich { data, .. } => data.get("image/png").cloned(),
            _ => None,
        })
        .expect("the plot is an image");
    assert!(image.len() > 1000);

    let server = server.restart().await;
    let after = history(&server, &id).await;
    assert_eq!(
        after[..before.len()],
        before[..],
        "the stored history is the shown one"
    );
    assert!(
        matches!(
            after[before.len()..]
                .iter()
                .map(|e| &e.event)
                .collect::<Vec<_>>()[..],
            [EventBody::KernelLost {
                reason: KernelLoss::ServerRestart
            }]
        ),
        "{:?}",
        &after[before.len()..]
    );

    // The page shows the same cells and says plainly that the kernel is gone.
    let (status, html) = page(&http(), &server, &format!("/sessions/{id}")).await;
    assert_eq!(status, 200);
    assert!(html.contains("total 285"), "the result is rendered");
    // The figure is named by its address, and the address serves its bytes.
    assert!(!html.contains(&image[..200]), "no figure bytes in the page");
    let figure = html
        .split(&format!("src=\"/sessions/{id}/figures/"))
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .expect("the figure is named by address");
    let served = http()
        .get(server.url(&format!("/sessions/{id}/figures/{figure}")))
        .send()
        .await
        .unwrap();
    assert_eq!(served.status(), 200);
    assert_eq!(served.headers()["content-type"], "image/png");
    let bytes = served.bytes().await.unwrap();
    {
        use base64::Engine;
        let stored = base64::engine::general_purpose::STANDARD
            .decode(image.split_whitespace().collect::<String>())
            .unwrap();
        assert_eq!(bytes[..], stored[..], "the stored figure, as it was shown");
    }
    let stranger = http_as(Some(STRANGER))
        .get(server.url(&format!("/sessions/{id}/figures/{figure}")))
        .send()
        .await
        .unwrap();
    assert_eq!(stranger.status(), 404, "someone else's figure is not found");
    assert!(html.contains("The server restarted since these cells ran"));
    assert!(html.contains("Re-run all"));

    // A follow-up now fails (the variables are gone)...
    let lost = ask(&server, &id, "```python\nprint(total)\n```").await;
    let printed = Notebook::from_events(&history(&server, &id).await);
    let last_result = printed
        .cells()
        .rev()
        .find(|c| c.kind == CellKind::Result)
        .unwrap();
    assert_eq!(last_result.status, CellStatus::Error, "{lost:?}");

    // ...until Re-run all rebuilds them in a fresh kernel.
    let rerun = ndjson_events(
        http()
            .post(server.url(&format!("/api/sessions/{id}/rerun")))
            .send()
            .await
            .unwrap(),
    )
    .await;
    let all = history(&server, &id).await;
    let notebook = Notebook::from_events(&all);
    assert_eq!(notebook.kernel_lost(), None, "{rerun:?}");
    let rerun_codes: Vec<&str> = notebook
        .cells()
        .filter(|c| {
            c.kind == CellKind::Code && c.turn == notebook.turns().next_back().map(|t| t.id)
        })
        .map(|c| c.text.as_str())
        .collect();
    assert_eq!(
        rerun_codes.len(),
        2,
        "the two programs that succeeded: {rerun_codes:?}"
    );
    ask(&server, &id, "```python\nprint('again', total)\n```").await;
    let notebook = Notebook::from_events(&history(&server, &id).await);
    let last = notebook
        .cells()
        .rev()
        .find(|c| c.kind == CellKind::Result)
        .unwrap();
    assert_eq!(last.printed(), "again 285\n");
}

#[tokio::test]
async fn a_share_link_is_read_only_lasts_across_restarts_forks_and_can_be_revoked() {
    let server = TestServer::start().await;
    let id = server.new_session().await;
    ask(
        &server,
        &id,
        "```python\nsecret_sauce = 'ketchup'\nprint('shared cell output')\n```",
    )
    .await;
    let private = server.new_session().await;
    ask(&server, &private, "my private question about taxes").await;

    let shared: serde_json::Value =
        json_of(http().post(server.url(&format!("/api/sessions/{id}/share")))).await;
    let token = shared["token"].as_str().unwrap().to_string();
    assert!(token.len() >= 43, "at least 256 bits: {token}");
    assert_eq!(shared["url"], server.url(&format!("/s/{token}")));
    let again: serde_json::Value =
        json_of(http().post(server.url(&format!("/api/sessions/{id}/share")))).await;
    assert_eq!(again["token"], token.as_str(), "one link per session");

    // A rename after sharing reaches the link (and its forks): the title
    // is the owner's name for the session as it is now.
    let renamed = http()
        .patch(server.url(&format!("/api/sessions/{id}")))
        .json(&serde_json::json!({ "title": "Secret plans" }))
        .send()
        .await
        .unwrap();
    assert_eq!(renamed.status(), 200);

    // A stranger (no cookie at all) reads it, server-rendered, with no controls.
    let stranger = http_as(None);
    let link = format!("/s/{token}");
    let (status, html) = page(&stranger, &server, &link).await;
    assert_eq!(status, 200);
    assert!(html.contains("shared cell output"));
    assert!(html.contains("Fork"));
    assert!(
        html.contains("<title>Secret plans · shared · runcell</title>"),
        "{html}"
    );
    for absent in [
        "taxes",
        r#"aria-label="Message""#,
        "Stop sharing",
        "/delete",
        "/rename",
        &private,
    ] {
        assert!(!html.contains(absent), "the shared page shows {absent:?}");
    }

    // After a restart the link still works.
    let server = server.restart().await;
    let (status, html) = page(&stranger, &server, &link).await;
    assert_eq!(status, 200);
    assert!(html.contains("shared cell output"));

    // Fork: a new session for the stranger, the cells copied.
    let forked = http_as(Some(STRANGER))
        .post(server.url(&format!("{link}/fork")))
        .send()
        .await
        .unwrap();
    assert_eq!(forked.status(), 303);
    let location = forked.headers()["location"].to_str().unwrap().to_string();
    let fork_id = location.strip_prefix("/sessions/").unwrap().to_string();
    assert_ne!(fork_id, id);
    let (status, html) = page(&http_as(Some(STRANGER)), &server, &location).await;
    assert_eq!(status, 200);
    assert!(html.contains("shared cell output"));
    assert!(html.contains("This is a fork"));
    assert!(
        html.contains("<title>Secret plans (copy) · runcell</title>"),
        "the fork carries the title, said to be a copy: {html}"
    );
    assert_eq!(
        page(&http(), &server, &location).await.0,
        404,
        "the fork is the stranger's"
    );

    // Revoked: 404, and no more forks.
    let revoked = http()
        .delete(server.url(&format!("/api/sessions/{id}/share")))
        .send()
        .await
        .unwrap();
    assert_eq!(revoked.status(), 204);
    assert_eq!(page(&stranger, &server, &link).await.0, 404);
    let refork = stranger
        .post(server.url(&format!("{link}/fork")))
        .send()
        .await
        .unwrap();
    assert_eq!(refork.status(), 404);
    // The fork lives on, its own.
    assert_eq!(
        page(&http_as(Some(STRANGER)), &server, &location).await.0,
        200
    );
}

/// What the server answers a request to `path` with the form `body`.
async fn post_form(server: &TestServer, path: &str, body: &str) -> (u16, String) {
    let response = http()
        .post(server.url(path))
        .header("content-type", "application/x-www-form-urlencoded")
        .body(body.to_string())
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    (status, response.text().await.unwrap())
}

#[tokio::test]
async fn addresses_that_are_not_ids_or_tokens_are_404s_like_unknown_ones() {
    let server = TestServer::start().await;
    // The shapes the server issues, never issued.
    let unknown_id = "0e3c5e4a-5b0f-4c5e-9d3a-2b1c0d9e8f7a";
    let unknown_token = "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8";

    // The pages say why, with a 404.
    for (path, says) in [
        (
            "/sessions/not-a-session".to_string(),
            "that is not a session id",
        ),
        (
            format!("/sessions/{unknown_id}"),
            "there is no such session, or it is not yours",
        ),
        (
            "/s/not-a-token".to_string(),
            "this link does not exist or was revoked",
        ),
        (
            format!("/s/{unknown_token}"),
            "this link does not exist or was revoked",
        ),
    ] {
        let (status, html) = page(&http(), &server, &path).await;
        assert_eq!(status, 404, "{path}");
        assert!(html.contains(says), "{path}: {html}");
    }

    // So do the server functions the hydrated pages call.
    for (path, body, error) in [
        ("/api/load_session", "session_id=not-a-session", "InvalidId"),
        (
            "/api/load_session",
            &format!("session_id={unknown_id}"),
            "NotFound",
        ),
        ("/api/load_shared", "token=not-a-token", "LinkNotFound"),
        (
            "/api/load_shared",
            &format!("token={unknown_token}"),
            "LinkNotFound",
        ),
    ] {
        let (status, answer) = post_form(&server, path, body).await;
        assert_eq!(status, 404, "{path} {body}");
        assert_eq!(answer, format!("\"{error}\""), "{path} {body}");
    }

    // And the routes, with the message of an unknown one.
    for (path, message) in [
        (
            "/api/sessions/not-a-session/events".to_string(),
            "no session `not-a-session`",
        ),
        (
            format!("/api/sessions/{unknown_id}/events"),
            &format!("no session `{unknown_id}`"),
        ),
        (
            "/s/not-a-token/files?path=a.txt".to_string(),
            "this link offers no files",
        ),
        (
            format!("/s/{unknown_token}/files?path=a.txt"),
            "this link offers no files",
        ),
    ] {
        let (status, answer) = page(&http(), &server, &path).await;
        assert_eq!(status, 404, "{path}");
        let answer: serde_json::Value = serde_json::from_str(&answer).unwrap();
        assert_eq!(answer["error"]["message"], message, "{path}");
    }
    for token in ["not-a-token", unknown_token] {
        let (status, answer) = post_form(&server, &format!("/s/{token}/fork"), "").await;
        assert_eq!(status, 404, "{token}");
        let answer: serde_json::Value = serde_json::from_str(&answer).unwrap();
        assert_eq!(
            answer["error"]["message"], "this link does not exist or was revoked",
            "{token}"
        );
    }
}

#[tokio::test]
async fn another_owner_gets_404_for_everything_private() {
    let server = TestServer::start().await;
    let id = server.new_session().await;
    ask(&server, &id, "```python\nprint('mine')\n```").await;
    let other = http_as(Some(STRANGER));
    let nobody = http_as(None);
    for client in [&other, &nobody] {
        assert_eq!(
            page(client, &server, &format!("/sessions/{id}")).await.0,
            404
        );
        assert_eq!(
            page(client, &server, &format!("/api/sessions/{id}/events"))
                .await
                .0,
            404
        );
        for (method, path) in [
            (reqwest::Method::POST, format!("/api/sessions/{id}/ask")),
            (reqwest::Method::POST, format!("/api/sessions/{id}/share")),
            (reqwest::Method::DELETE, format!("/api/sessions/{id}/share")),
            (reqwest::Method::PATCH, format!("/api/sessions/{id}")),
            (reqwest::Method::DELETE, format!("/api/sessions/{id}")),
            (reqwest::Method::POST, format!("/sessions/{id}/delete")),
            (reqwest::Method::POST, format!("/api/sessions/{id}/rerun")),
        ] {
            let response = client
                .request(method.clone(), server.url(&path))
                .json(&serde_json::json!({ "text": "hi", "title": "x" }))
                .send()
                .await
                .unwrap();
            assert_eq!(response.status(), 404, "{method} {path}");
        }
        let listed: serde_json::Value = json_of(client.get(server.url("/api/sessions"))).await;
        assert_eq!(listed["sessions"], serde_json::json!([]));
    }
    assert_eq!(
        server.try_connect_as(&id, Some(STRANGER)).await.err(),
        Some(404)
    );
    assert_eq!(server.try_connect_as(&id, None).await.err(), Some(404));
    // The notebook's kernel is not a `/v1` sandbox session anyone can use.
    let sandboxes = json_of(
        server
            .api()
            .await
            .get(server.url("/v1/code_interpreter/sessions")),
    )
    .await;
    assert_eq!(sandboxes["sessions"], serde_json::json!([]), "{sandboxes}");
    // Still there for its owner.
    assert_eq!(
        page(&http(), &server, &format!("/sessions/{id}")).await.0,
        200
    );
}

#[tokio::test]
async fn sessions_are_listed_renamed_and_deleted_with_their_rows() {
    let server = TestServer::start().await;
    let first = server.new_session().await;
    ask(&server, &first, "```python\nprint('first')\n```").await;
    let second = server.new_session().await;
    ask(&server, &second, "how many r's are in strawberry?").await;
    let _empty = server.new_session().await;

    let listed: serde_json::Value = json_of(http().get(server.url("/api/sessions"))).await;
    let ids: Vec<&str> = listed["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["id"].as_str().unwrap())
        .collect();
    assert_eq!(
        ids,
        vec![second.as_str(), first.as_str()],
        "newest first, empty ones not listed"
    );
    assert_eq!(
        listed["sessions"][0]["title"],
        "how many r's are in strawberry?"
    );

    let renamed = http()
        .patch(server.url(&format!("/api/sessions/{first}")))
        .json(&serde_json::json!({ "title": "  Printing\nthings " }))
        .send()
        .await
        .unwrap();
    assert_eq!(renamed.status(), 200);
    let empty_title = http()
        .patch(server.url(&format!("/api/sessions/{first}")))
        .json(&serde_json::json!({ "title": "   " }))
        .send()
        .await
        .unwrap();
    assert_eq!(empty_title.status(), 400);
    // The page's forms do the same and redirect.
    let form = http()
        .post(server.url(&format!("/sessions/{second}/rename")))
        .form(&[("title", "Strawberries")])
        .send()
        .await
        .unwrap();
    assert_eq!(form.status(), 303);
    let (_, html) = page(&http(), &server, &format!("/sessions/{first}")).await;
    assert!(
        html.contains("Printing") && html.contains("Strawberries"),
        "titles in the sidebar"
    );

    let shared: serde_json::Value =
        json_of(http().post(server.url(&format!("/api/sessions/{first}/share")))).await;
    // A page still open on it when it is deleted can start nothing more.
    let mut open_page = server.join(&first).await;
    let known = history(&server, &first).await.len() as u64;
    let deleted = http()
        .post(server.url(&format!("/sessions/{first}/delete")))
        .send()
        .await
        .unwrap();
    assert_eq!(deleted.status(), 303);
    assert_eq!(deleted.headers()["location"], "/");
    open_page.ask("anyone there?").await;
    loop {
        match open_page.next().await {
            Some(ServerMessage::Error { message, .. }) => {
                assert!(message.contains("deleted"), "{message}");
                break;
            }
            // The history it joined with, replayed; nothing after it.
            Some(ServerMessage::Event(event)) => {
                assert!(event.seq <= known, "a deleted session moved on: {event:?}");
            }
            other => panic!("expected a refusal, got {other:?}"),
        }
    }
    assert_eq!(
        page(&http(), &server, &format!("/sessions/{first}"))
            .await
            .0,
        404
    );
    assert_eq!(
        page(&http(), &server, shared["path"].as_str().unwrap())
            .await
            .0,
        404
    );

    // Nothing of it is left in the database.
    let server = server.restart().await;
    let data_dir = server.data_dir();
    let db = sqlx::SqlitePool::connect(&format!(
        "sqlite://{}?mode=ro",
        data_dir.join("runcell.db").display()
    ))
    .await
    .unwrap();
    for table in [
        "sessions WHERE id",
        "events WHERE session_id",
        "shares WHERE session_id",
    ] {
        let count: i64 = sqlx::query(&format!("SELECT COUNT(*) AS n FROM {table} = ?"))
            .bind(&first)
            .fetch_one(&db)
            .await
            .unwrap()
            .get("n");
        assert_eq!(count, 0, "{table}");
    }
}

#[tokio::test]
async fn twenty_sessions_writing_at_once_lose_no_event() {
    let server = TestServer::start().await;
    let mut ids = Vec::new();
    for _ in 0..20 {
        ids.push(server.new_session().await);
    }
    let turns = ids.iter().enumerate().map(|(n, id)| {
        let server = &server;
        async move {
            let code = format!(
                "```python\nfor i in range(30):\n    print('session {n} line', i, flush=True)\n```"
            );
            ask(server, id, &code).await;
            ask(
                server,
                id,
                &format!("and say hello to number {n} in many words please"),
            )
            .await;
            history(server, id).await.len()
        }
    });
    let counts: Vec<usize> = futures::future::join_all(turns).await;
    assert!(counts.iter().all(|&n| n > 20), "{counts:?}");

    let server = server.restart().await;
    let data_dir = server.data_dir();
    let db = sqlx::SqlitePool::connect(&format!(
        "sqlite://{}?mode=ro",
        data_dir.join("runcell.db").display()
    ))
    .await
    .unwrap();
    for (id, expected) in ids.iter().zip(&counts) {
        let row = sqlx::query(
            "SELECT COUNT(*) AS n, MIN(seq) AS lo, MAX(seq) AS hi FROM events WHERE session_id = ?",
        )
        .bind(id)
        .fetch_one(&db)
        .await
        .unwrap();
        let (n, lo, hi): (i64, i64, i64) = (row.get("n"), row.get("lo"), row.get("hi"));
        assert_eq!(
            (n, lo, hi),
            (*expected as i64, 1, *expected as i64),
            "session {id}"
        );
    }
    let total: i64 = sqlx::query("SELECT COUNT(*) AS n FROM events")
        .fetch_one(&db)
        .await
        .unwrap()
        .get("n");
    assert_eq!(total, counts.iter().sum::<usize>() as i64);
}

#[tokio::test]
async fn a_socket_opened_from_another_site_is_refused() {
    use tokio_tungstenite::tungstenite::client::IntoClientRequest;
    use tokio_tungstenite::tungstenite::http::HeaderValue;

    let server = TestServer::start().await;
    let id = server.new_session().await;
    let url = server.ws_url(&format!("/ws/sessions/{id}?after=0"));
    let own = format!("http://{}", server.addr);
    for (origin, refused) in [("http://evil.example", true), (own.as_str(), false)] {
        let mut request = url.as_str().into_client_request().unwrap();
        let headers = request.headers_mut();
        headers.insert(
            "sec-websocket-protocol",
            HeaderValue::from_static(app::protocol::SUBPROTOCOL),
        );
        headers.insert(
            "cookie",
            HeaderValue::from_str(&crate::support::cookie_of(crate::support::OWNER)).unwrap(),
        );
        headers.insert("origin", HeaderValue::from_str(origin).unwrap());
        match tokio_tungstenite::connect_async(request).await {
            Ok(_) => assert!(!refused, "{origin} was let in"),
            Err(tokio_tungstenite::tungstenite::Error::Http(response)) => {
                assert!(refused, "{origin}: {}", response.status());
                assert_eq!(response.status(), 403);
            }
            Err(err) => panic!("{origin}: {err}"),
        }
    }
}

#[tokio::test]
async fn a_share_link_offers_the_files_only_when_its_owner_says_so() {
    let server = TestServer::start().await;
    let id = server.new_session().await;
    let upload = http()
        .put(server.url(&format!("/api/sessions/{id}/files?path=sales.csv")))
        .body("region,amount\nnorth,10\n")
        .send()
        .await
        .unwrap();
    assert_eq!(upload.status(), 201);
    ask(
        &server,
        &id,
        "```python\nopen('/home/user/out.csv', 'w').write('total\\n10\\n')\nprint('wrote it')\n```",
    )
    .await;

    // Shared without files: the page names what the code wrote, offers
    // nothing, and the files route is a 404.
    let shared = json_of(http().post(server.url(&format!("/api/sessions/{id}/share")))).await;
    assert_eq!(shared["files"], false);
    let token = shared["token"].as_str().unwrap().to_string();
    let stranger = http_as(None);
    let (status, html) = page(&stranger, &server, &format!("/s/{token}")).await;
    assert_eq!(status, 200);
    assert!(html.contains("out.csv (9 B), not shared"), "{html}");
    assert!(
        !html.contains("sales.csv"),
        "{}",
        &html[html.find("sales.csv").unwrap_or(0).saturating_sub(300)..][..600]
    );
    let refused = stranger
        .get(server.url(&format!("/s/{token}/files?path=sales.csv")))
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), 404);

    // With files: listed and downloadable by anyone with the link, as
    // they were when shared.
    let shared =
        json_of(http().post(server.url(&format!("/api/sessions/{id}/share?files=true")))).await;
    assert_eq!(
        (shared["files"].clone(), shared["token"].clone()),
        (true.into(), token.clone().into())
    );
    let (status, html) = page(&stranger, &server, &format!("/s/{token}")).await;
    assert_eq!(status, 200);
    assert!(
        html.contains(&format!("/s/{token}/files?path=/home/user/sales.csv")),
        "{html}"
    );
    assert!(
        html.contains(&format!("/s/{token}/files?path=/home/user/out.csv")),
        "{html}"
    );
    let download = stranger
        .get(server.url(&format!("/s/{token}/files?path=out.csv")))
        .send()
        .await
        .unwrap();
    assert_eq!(download.status(), 200);
    assert_eq!(download.headers()["content-type"], "text/csv");
    assert_eq!(download.text().await.unwrap(), "total\n10\n");
    // What the owner changes later is not in the link until it is shared again.
    ask(
        &server,
        &id,
        "```python\nopen('/home/user/out.csv', 'w').write('total\\n99\\n')\nprint('changed')\n```",
    )
    .await;
    let still = stranger
        .get(server.url(&format!("/s/{token}/files?path=out.csv")))
        .send()
        .await
        .unwrap();
    assert_eq!(still.text().await.unwrap(), "total\n10\n");
    for outside in ["../../runcell.db", "/etc/passwd"] {
        let refused = stranger
            .get(server.url(&format!("/s/{token}/files")))
            .query(&[("path", outside)])
            .send()
            .await
            .unwrap();
        assert_eq!(refused.status(), 400, "{outside}");
    }

    // A fork starts with the link's files.
    let forked = http_as(Some(STRANGER))
        .post(server.url(&format!("/s/{token}/fork")))
        .send()
        .await
        .unwrap();
    assert_eq!(forked.status(), 303);
    let location = forked.headers()["location"].to_str().unwrap().to_string();
    let listed =
        json_of(http_as(Some(STRANGER)).get(server.url(&format!("/api{location}/files")))).await;
    let paths: Vec<&str> = listed["files"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|f| f["path"].as_str())
        .collect();
    assert_eq!(paths, ["/home/user/out.csv", "/home/user/sales.csv"]);

    // Shared again without files, or revoked: the copy is gone.
    json_of(http().post(server.url(&format!("/api/sessions/{id}/share?files=false")))).await;
    let (_, html) = page(&stranger, &server, &format!("/s/{token}")).await;
    assert!(!html.contains("sales.csv"));
    assert!(!server.data_dir().join("shared-files").join(&id).exists());
    let bad = http()
        .post(server.url(&format!("/api/sessions/{id}/share?files=maybe")))
        .send()
        .await
        .unwrap();
    assert_eq!(bad.status(), 400);
}

#[tokio::test]
async fn an_owner_makes_sessions_at_a_bounded_rate() {
    let server = TestServer::start_configured(|config| {
        config.notebook.sessions_per_hour = 1;
        config.notebook.session_burst = 2;
    })
    .await;
    let me = http();
    assert_eq!(
        me.post(server.url("/api/sessions"))
            .send()
            .await
            .unwrap()
            .status(),
        201
    );
    assert_eq!(
        me.post(server.url("/sessions"))
            .send()
            .await
            .unwrap()
            .status(),
        303
    );
    for response in [
        me.post(server.url("/api/sessions")).send().await.unwrap(),
        me.post(server.url("/sessions")).send().await.unwrap(),
    ] {
        assert_eq!(response.status(), 429);
        assert!(response.headers().get("location").is_none());
        let wait: u64 = response.headers()["retry-after"]
            .to_str()
            .unwrap()
            .parse()
            .unwrap();
        assert!(wait > 60, "{wait}");
        let body: serde_json::Value = response.json().await.unwrap();
        assert_eq!(body["error"]["code"], "rate_limited");
    }
    // Another browser has its own budget.
    let other = http_as(Some("7e570000000000000000000000000002"));
    assert_eq!(
        other
            .post(server.url("/api/sessions"))
            .send()
            .await
            .unwrap()
            .status(),
        201
    );
}

/// Without a cookie every request is a new owner with a fresh budget, so
/// the anonymous pages of one address share one: `PER_MINUTE` sessions,
/// then 429 with `Retry-After`, as JSON for programs and as a page for a
/// browser's navigation. Another address has its own.
#[tokio::test]
async fn anonymous_pages_of_one_address_make_a_bounded_number_of_sessions() {
    const PER_MINUTE: usize = 3;
    const ASKED: usize = 7;
    let server = TestServer::start_configured(|config| {
        config.notebook.anonymous_sessions_per_minute = PER_MINUTE as u32;
        // Another address is told by the proxy in front.
        config.http.trust_forwarded = true;
    })
    .await;
    let server = &server;
    let made = (0..ASKED).map(|n| async move {
        // Both ways of making one: the JSON route and the form.
        let path = if n % 2 == 0 {
            "/api/sessions"
        } else {
            "/sessions"
        };
        let response = http_as(None).post(server.url(path)).send().await.unwrap();
        let status = response.status().as_u16();
        let retry_after = response
            .headers()
            .get("retry-after")
            .map(|v| v.to_str().unwrap().parse::<u64>().unwrap());
        (status, retry_after, response.text().await.unwrap())
    });
    let answers = futures::future::join_all(made).await;
    let made = answers
        .iter()
        .filter(|(status, ..)| [201, 303].contains(status))
        .count();
    assert_eq!(made, PER_MINUTE, "{answers:?}");
    for (status, retry_after, body) in answers.iter().filter(|(s, ..)| ![201, 303].contains(s)) {
        assert_eq!(*status, 429, "{body}");
        // One comes back every 20 s.
        assert!(
            retry_after.is_some_and(|s| (1..=20).contains(&s)),
            "{retry_after:?}"
        );
        let body: serde_json::Value = serde_json::from_str(body).unwrap();
        assert_eq!(body["error"]["code"], "rate_limited");
        assert_eq!(
            body["error"]["message"],
            "pages from your address made 3 new sessions this minute, the most anonymous pages may; sign in, or try again within a minute"
        );
    }
    // A browser's navigation (the new-session form without scripts) is
    // answered with a page that says so.
    let page = http_as(None)
        .post(server.url("/sessions"))
        .header("accept", "text/html,application/xhtml+xml")
        .form(&[("message", "")])
        .send()
        .await
        .unwrap();
    assert_eq!(page.status(), 429);
    assert!(page.headers().contains_key("retry-after"));
    assert!(
        page.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/html")
    );
    let html = page.text().await.unwrap();
    assert!(html.contains("<h1>Too many new sessions</h1>"), "{html}");
    assert!(
        html.contains("pages from your address made 3 new sessions"),
        "{html}"
    );
    // A cookie of one's own is no way around it...
    let me = http();
    assert_eq!(
        me.post(server.url("/api/sessions"))
            .send()
            .await
            .unwrap()
            .status(),
        429
    );
    // ...and another address has its own budget.
    let elsewhere = http_as(None)
        .post(server.url("/api/sessions"))
        .header("x-forwarded-for", "203.0.113.9")
        .send()
        .await
        .unwrap();
    assert_eq!(elsewhere.status(), 201);
}

#[tokio::test]
async fn an_owner_holds_a_bounded_number_of_kernels() {
    let server = TestServer::start_configured(|config| {
        config.notebook.max_kernels_per_owner = 1;
    })
    .await;
    let run = |id: String, code: &'static str| {
        let server = &server;
        async move {
            let response = http()
                .post(server.url(&format!("/api/sessions/{id}/run")))
                .json(&serde_json::json!({ "code": code, "language": "python" }))
                .send()
                .await
                .unwrap();
            assert!(!ndjson_events(response).await.is_empty());
            Notebook::from_events(&history(server, &id).await)
        }
    };
    let first = server.new_session().await;
    let second = server.new_session().await;
    let kept = run(first.clone(), "x = 41\nprint(x + 1)").await;
    assert_eq!(kept.cells().next_back().unwrap().printed(), "42\n");
    // The second session's kernel takes the first one's place...
    let other = run(second.clone(), "print('second')").await;
    assert_eq!(other.cells().next_back().unwrap().printed(), "second\n");
    // ...so the first starts afresh: its variable is gone.
    let again = run(first.clone(), "print('x' in globals())").await;
    let printed = again.cells().next_back().unwrap().printed();
    assert!(printed.starts_with("False\n"), "{printed}");
    assert!(printed.contains("needed the room"), "{printed}");
}

/// An owner's kernels started at once cannot pass the cap together: each
/// is counted from before its kernel starts, and while all of them run
/// none can be closed to make room, so the rest are refused.
#[tokio::test]
async fn kernels_an_owner_starts_at_once_cannot_pass_the_cap_together() {
    const CAP: usize = 2;
    const SESSIONS: usize = 5;
    let server = TestServer::start_configured(|config| {
        config.notebook.max_kernels_per_owner = CAP as u32;
    })
    .await;
    let mut ids = Vec::new();
    for _ in 0..SESSIONS {
        ids.push(server.new_session().await);
    }
    let server = &server;
    let runs = ids.iter().map(|id| async move {
        let response = http()
            .post(server.url(&format!("/api/sessions/{id}/run")))
            .json(&serde_json::json!({
                "code": "import time\ntime.sleep(3)\nprint('ran')",
                "language": "python",
            }))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200);
        ndjson_events(response).await;
        let events = history(server, id).await;
        let printed = Notebook::from_events(&events)
            .cells()
            .next_back()
            .unwrap()
            .printed();
        (printed, serde_json::to_string(&events).unwrap())
    });
    let outcomes = futures::future::join_all(runs).await;
    let ran = outcomes
        .iter()
        .filter(|(printed, _)| printed == "ran\n")
        .count();
    assert_eq!(ran, CAP, "{outcomes:?}");
    for (_, events) in outcomes.iter().filter(|(printed, _)| printed != "ran\n") {
        // Refused by name, not as a failed cell.
        assert!(
            events.contains(r#""kind":"kernel_refused","#)
                && events.contains(r#""cap":"owner","held":2}"#)
                && !events.contains("SandboxError"),
            "{events}"
        );
    }
}

/// The anonymous pages of one address hold a few sandbox sessions
/// together, whatever owners they are: kernels they start at once are
/// counted from before they start, so no more than that many start.
#[tokio::test]
async fn kernels_anonymous_pages_of_one_address_start_at_once_cannot_pass_its_cap() {
    const PER_ADDRESS: usize = 2;
    const PAGES: usize = 5;
    let server = TestServer::start_configured(|config| {
        config.sandbox.anonymous_sessions_per_client = PER_ADDRESS;
    })
    .await;
    let mut pages = Vec::new();
    for n in 0..PAGES {
        let owner = format!("a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0{n:02}");
        let id = server.new_session_of(&owner).await;
        pages.push((owner, id));
    }
    let server = &server;
    let runs = pages.iter().map(|(owner, id)| async move {
        let response = http_as(Some(owner))
            .post(server.url(&format!("/api/sessions/{id}/run")))
            .json(&serde_json::json!({
                "code": "import time\ntime.sleep(3)\nprint('ran')",
                "language": "python",
            }))
            .send()
            .await
            .unwrap();
        // Another owner's history is not ours to read: the run's own events.
        let events = ndjson_events(response).await;
        let printed = Notebook::from_events(&events)
            .cells()
            .next_back()
            .unwrap()
            .printed();
        (printed, serde_json::to_string(&events).unwrap())
    });
    let outcomes = futures::future::join_all(runs).await;
    let ran = outcomes
        .iter()
        .filter(|(printed, _)| printed == "ran\n")
        .count();
    assert_eq!(ran, PER_ADDRESS, "{outcomes:?}");
    for (_, events) in outcomes.iter().filter(|(printed, _)| printed != "ran\n") {
        assert!(
            events.contains(r#""kind":"kernel_refused","#)
                && events.contains(r#""cap":"client","held":2}"#)
                && !events.contains("SandboxError"),
            "{events}"
        );
    }
}

#[tokio::test]
async fn an_imported_notebook_is_a_session_whose_run_all_stops_at_the_first_error() {
    let server = TestServer::start().await;
    let notebook = serde_json::json!({
        "nbformat": 4, "nbformat_minor": 5, "metadata": {},
        "cells": [
            {"cell_type": "markdown", "id": "m", "metadata": {}, "source": "# Imported answers"},
            {"cell_type": "code", "id": "a", "metadata": {}, "execution_count": 1,
             "source": ["answer = 40\n", "answer += 2"], "outputs": []},
            {"cell_type": "code", "id": "b", "metadata": {}, "execution_count": 2,
             "source": "print('the answer is', answer)",
             "outputs": [{"output_type": "stream", "name": "stdout", "text": "stale output\n"}]},
            {"cell_type": "code", "id": "c", "metadata": {}, "execution_count": 3,
             "source": "1/0", "outputs": []},
            {"cell_type": "code", "id": "d", "metadata": {}, "execution_count": 4,
             "source": "print('must not run')", "outputs": []},
        ],
    });
    let response = http()
        .post(server.url("/api/sessions/import"))
        .body(notebook.to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 201);
    let created: serde_json::Value = response.json().await.unwrap();
    let id = created["id"].as_str().unwrap().to_string();
    assert_eq!(created["url"], format!("/sessions/{id}"));

    // It shows its cells and their old outputs, marked as not run here.
    let imported = Notebook::from_events(&history(&server, &id).await);
    assert_eq!(imported.kernel_lost(), Some(KernelLoss::Import));
    assert_eq!(imported.rerun_plan().len(), 4);
    let (status, html) = page(&http(), &server, &format!("/sessions/{id}")).await;
    assert_eq!(status, 200);
    assert!(html.contains("stale output") && html.contains("Imported answers"));
    // Nobody else sees it.
    let (status, _) = page(
        &http_as(Some(STRANGER)),
        &server,
        &format!("/sessions/{id}"),
    )
    .await;
    assert_eq!(status, 404);

    // Run all: in order, in a fresh kernel, up to the first error.
    ndjson_events(
        http()
            .post(server.url(&format!("/api/sessions/{id}/rerun")))
            .send()
            .await
            .unwrap(),
    )
    .await;
    let notebook = Notebook::from_events(&history(&server, &id).await);
    let last_turn = notebook.turns().next_back().map(|t| t.id);
    let ran: Vec<(String, CellStatus)> = notebook
        .cells()
        .filter(|c| c.kind == CellKind::Result && c.turn == last_turn)
        .map(|c| (c.printed(), c.status))
        .collect();
    assert_eq!(ran.len(), 3, "{ran:?}");
    assert_eq!(ran[1].0, "the answer is 42\n");
    assert_eq!(ran[2].1, CellStatus::Error);

    // What is not a notebook is refused, saying why, and makes nothing.
    let ids = || async {
        let list: serde_json::Value = http()
            .get(server.url("/api/sessions"))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        list["sessions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["id"].as_str().unwrap().to_string())
            .collect::<Vec<_>>()
    };
    let before = ids().await;
    for (body, status, why) in [
        ("{not json".to_string(), 400, "not JSON"),
        (r#"{"nbformat": 3}"#.to_string(), 400, "nbformat 4"),
        ("x".repeat(21 * 1024 * 1024), 413, ""),
    ] {
        let response = http()
            .post(server.url("/api/sessions/import"))
            .body(body)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), status);
        let text = response.text().await.unwrap();
        assert!(text.contains(why), "{text}");
    }
    assert_eq!(before, ids().await);
}

/// Issue 40, point 7: a notebook import is read whole and parsed, so few
/// are read at once and each is bounded as it arrives.
#[tokio::test]
async fn few_notebooks_are_read_at_once_and_a_big_one_is_refused_as_it_streams() {
    use std::time::Duration;
    use tokio::io::AsyncWriteExt;
    let server = TestServer::start_configured(|config| {
        config.notebook.import_mib = 1;
        config.notebook.imports_in_flight = 1;
    })
    .await;
    // Over the bound: refused, however the rest of the file would look.
    let big = http()
        .post(server.url("/api/sessions/import"))
        .body(vec![b' '; 2 * 1024 * 1024])
        .send()
        .await
        .unwrap();
    assert_eq!(big.status(), 413);
    // One import under way (its body not yet whole) holds the only place.
    let mut held = tokio::net::TcpStream::connect(server.addr).await.unwrap();
    held.write_all(
        format!(
            "POST /api/sessions/import HTTP/1.1\r\nHost: {}\r\nContent-Length: 1000\r\n\r\n{{",
            server.addr
        )
        .as_bytes(),
    )
    .await
    .unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        let other = http()
            .post(server.url("/api/sessions/import"))
            .body("{}")
            .send()
            .await
            .unwrap();
        if other.status() == 429 {
            assert!(other.headers().contains_key("retry-after"));
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "{}", other.status());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    drop(held);
    // Then the place is free again.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        let status = http()
            .post(server.url("/api/sessions/import"))
            .body("{}")
            .send()
            .await
            .unwrap()
            .status();
        if status != 429 {
            assert_eq!(status, 400, "an empty notebook is refused as one");
            break;
        }
        assert!(tokio::time::Instant::now() < deadline);
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Issue 40, point 8: a share link's page shows the first part of a long
/// session (2 MiB of its events) and says where the rest is, so a
/// stranger's slow reads of a long session's link hold megabytes, not the
/// session's whole size several times over.
#[tokio::test]
async fn a_long_sessions_share_page_shows_its_first_part_and_offers_the_rest() {
    let server = TestServer::start().await;
    let line = "0123456789abcdef".repeat(64 * 100); // 100 KiB of output a cell
    let cells: Vec<serde_json::Value> = (0..70)
        .map(|i| {
            serde_json::json!({
                "cell_type": "code", "id": format!("c{i}"), "metadata": {},
                "execution_count": i + 1, "source": format!("print({i})"),
                "outputs": [{"output_type": "stream", "name": "stdout", "text": line}],
            })
        })
        .collect();
    let notebook = serde_json::json!({
        "nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": cells,
    });
    let response = http()
        .post(server.url("/api/sessions/import"))
        .body(notebook.to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 201);
    let created: serde_json::Value = response.json().await.unwrap();
    let id = created["id"].as_str().unwrap().to_string();
    let shared: serde_json::Value =
        json_of(http().post(server.url(&format!("/api/sessions/{id}/share")))).await;
    let token = shared["token"].as_str().unwrap().to_string();

    let (status, html) = page(&http(), &server, &format!("/s/{token}")).await;
    assert_eq!(status, 200);
    // 7 MiB of output (21 MB of page when shown whole); the page holds a
    // bounded part of it.
    println!("share page: {} bytes", html.len());
    assert!(
        html.len() < 10 * 1024 * 1024,
        "the page is {} bytes",
        html.len()
    );
    assert!(html.contains("too long to show whole"), "the page says so");
    assert!(html.contains(&format!("/s/{token}/notebook.ipynb")));
    assert!(html.contains("print(0)"), "it starts at the beginning");
    assert!(!html.contains("print(69)"), "and ends before the end");
    // The download still has all of it.
    let ipynb = http()
        .get(server.url(&format!("/s/{token}/notebook.ipynb")))
        .send()
        .await
        .unwrap();
    assert_eq!(ipynb.status(), 200);
    let whole: serde_json::Value = ipynb.json().await.unwrap();
    assert!(whole["cells"].as_array().map_or(0, Vec::len) >= 70);
}

/// Each cell's `metadata.runcell.role` of a notebook, in order.
fn roles(notebook: &serde_json::Value) -> Vec<String> {
    notebook["cells"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            c["metadata"]["runcell"]["role"]
                .as_str()
                .unwrap_or_default()
                .to_string()
        })
        .collect()
}

async fn downloaded(server: &TestServer, id: &str) -> serde_json::Value {
    let response = http()
        .get(server.url(&format!("/api/sessions/{id}/notebook.ipynb")))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    response.json().await.unwrap()
}

#[tokio::test]
async fn a_downloaded_notebook_imports_back_with_its_questions_answers_and_title() {
    let server = TestServer::start().await;
    let id = server.new_session().await;
    let question = "```python\nprint(6 * 7)\n```";
    ask(&server, &id, question).await;
    let renamed = http()
        .patch(server.url(&format!("/api/sessions/{id}")))
        .json(&serde_json::json!({ "title": "Forty-two, kept" }))
        .send()
        .await
        .unwrap();
    assert_eq!(renamed.status(), 200);

    let exported = downloaded(&server, &id).await;
    assert_eq!(exported["metadata"]["runcell"]["title"], "Forty-two, kept");
    assert_eq!(exported["cells"][0]["source"], "# Forty-two, kept");
    assert_eq!(
        exported["cells"][1]["source"],
        "> ```python\n> print(6 * 7)\n> ```"
    );
    assert_eq!(exported["cells"][2]["source"], "print(6 * 7)");
    assert_eq!(exported["cells"][2]["outputs"][0]["text"], "42\n");
    let exported_roles = roles(&exported);
    assert_eq!(exported_roles[..3], ["title", "question", "code"]);

    let imported = http()
        .post(server.url("/api/sessions/import"))
        .body(exported.to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(imported.status(), 201);
    let created: serde_json::Value = imported.json().await.unwrap();
    let copy = created["id"].as_str().unwrap().to_string();
    // The question is the person's again, not an explanation.
    let notebook = Notebook::from_events(&history(&server, &copy).await);
    assert_eq!(notebook.first_question(), Some(question));
    let (_, html) = page(&http(), &server, &format!("/sessions/{copy}")).await;
    assert!(
        html.contains("<title>Forty-two, kept · runcell</title>"),
        "{html}"
    );
    // Downloaded again, it is the same notebook.
    assert_eq!(downloaded(&server, &copy).await, exported);
}
