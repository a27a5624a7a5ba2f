use crate::support::{TestServer, http};

#[tokio::test]
async fn healthz_answers_once_ready() {
    let server = TestServer::start().await;
    let response = http().get(server.url("/healthz")).send().await.unwrap();
    assert_eq!(response.status(), 200);
    let body: serde_json::Value = response.json().await.unwrap();
    assert_eq!(body["status"], "ok");
}

/// Issue 40, point 12: another site's page can make a visitor's browser
/// open `/` (a link, an image, a frame) as often as it likes, so opening it
/// changes nothing; the session is made by the form's post, with its first
/// question when one is typed.
#[tokio::test]
async fn the_root_makes_nothing_and_its_post_makes_the_session() {
    // Two sessions an hour: had the fifty visits made any, the posts
    // below would be refused.
    let server = TestServer::start_configured(|config| {
        config.notebook.sessions_per_hour = 1;
        config.notebook.session_burst = 3;
    })
    .await;
    let client = http();
    for _ in 0..50 {
        let response = client.get(server.url("/")).send().await.unwrap();
        assert_eq!(response.status(), 200);
        assert!(response.headers().get("location").is_none());
        let html = response.text().await.unwrap();
        assert!(html.contains(r#"action="/sessions""#), "{html}");
        assert!(html.contains(r#"name="message""#), "{html}");
    }
    // An empty post: a new, empty session each time.
    let mut seen = Vec::new();
    for _ in 0..2 {
        let response = client
            .post(server.url("/sessions"))
            .form(&[("message", "")])
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 303);
        let location = response.headers()["location"].to_str().unwrap().to_string();
        let id = location.strip_prefix("/sessions/").unwrap().to_string();
        assert!(uuid::Uuid::try_parse(&id).is_ok(), "{location}");
        seen.push(id);
    }
    assert_ne!(seen[0], seen[1]);
    // A question: the session is made and asked it, and its page shows it.
    let response = client
        .post(server.url("/sessions"))
        .form(&[("message", "print(6 * 7)")])
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 303);
    let id = response.headers()["location"]
        .to_str()
        .unwrap()
        .strip_prefix("/sessions/")
        .unwrap()
        .to_string();
    let events = crate::support::history(&server, &id).await;
    assert!(
        events
            .iter()
            .any(|e| serde_json::to_string(e).unwrap().contains("print(6 * 7)")),
        "{events:?}"
    );
    // Another site's form cannot make one.
    let forged = client
        .post(server.url("/sessions"))
        .header("origin", "http://evil.example")
        .form(&[("message", "")])
        .send()
        .await
        .unwrap();
    assert_eq!(forged.status(), 403);
}

#[tokio::test]
async fn a_session_page_is_server_rendered() {
    let server = TestServer::start().await;
    let page = http()
        .get(server.url(&format!("/sessions/{}", server.new_session().await)))
        .send()
        .await
        .unwrap();
    assert_eq!(page.status(), 200);
    let html = page.text().await.unwrap();
    for needle in [
        "<title>New session · runcell</title>",
        r#"aria-label="Message""#,
        r#"aria-label="Conversation""#,
        "Ask something to start",
        "/pkg/runcell.js",
        "/pkg/runcell.css",
    ] {
        assert!(html.contains(needle), "missing {needle}");
    }
}

/// The body of `response`, gunzipped.
async fn gunzipped(response: reqwest::Response) -> String {
    use std::io::Read;
    let bytes = response.bytes().await.unwrap();
    let mut text = String::new();
    flate2::read::GzDecoder::new(&bytes[..])
        .read_to_string(&mut text)
        .expect("a gzip body");
    text
}

#[tokio::test]
async fn pages_and_documents_are_compressed_and_streams_are_not() {
    let server = TestServer::start().await;
    let page = http()
        .get(server.url(&format!("/sessions/{}", server.new_session().await)))
        .header("accept-encoding", "gzip")
        .send()
        .await
        .unwrap();
    assert_eq!(page.status(), 200);
    assert_eq!(page.headers()["content-encoding"], "gzip");
    assert!(gunzipped(page).await.contains(r#"aria-label="Message""#));

    let docs = http()
        .get(server.url("/v1/openapi.json"))
        .header("accept-encoding", "br, gzip")
        .send()
        .await
        .unwrap();
    assert_eq!(docs.status(), 200);
    assert_eq!(docs.headers()["content-encoding"], "br");

    // Without asking for it, nothing is compressed.
    let plain = http()
        .get(server.url("/v1/openapi.json"))
        .send()
        .await
        .unwrap();
    assert!(plain.headers().get("content-encoding").is_none());

    // A stream is never held back in a compressor.
    let stream = server
        .api()
        .await
        .post(server.url("/v1/code_interpreter/run"))
        .header("accept", "application/x-ndjson")
        .header("accept-encoding", "gzip, br")
        .json(&serde_json::json!({
            "code": "for i in $(seq 200); do echo line $i; done",
            "language": "bash",
        }))
        .send()
        .await
        .unwrap();
    assert_eq!(stream.status(), 200);
    assert!(stream.headers().get("content-encoding").is_none());
    assert!(stream.text().await.unwrap().contains("line 200"));
}

#[tokio::test]
async fn a_session_page_shows_its_history_escaped() {
    let server = TestServer::start().await;
    let session = server.new_session().await;
    let mut client = server.join(&session).await;
    client.ask("<script>alert(1)</script> & more").await;
    client.events_until_finished().await;

    let html = crate::support::page_html(&server, &format!("/sessions/{session}")).await;
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

#[tokio::test]
async fn a_one_shot_run_answers_with_the_whole_result() {
    let server = TestServer::start().await;
    let response = server
        .api()
        .await
        .post(server.url("/v1/code_interpreter/run"))
        .json(&serde_json::json!({
            "code": "import sys\nprint('out')\nprint('err', file=sys.stderr)\n{}['missing']",
            "language": "python",
        }))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let body: serde_json::Value = response.json().await.unwrap();
    assert_eq!(body["stdout"], "out\n");
    assert!(body["stderr"].as_str().unwrap().starts_with("err\n"));
    assert_eq!(body["error"]["name"], "KeyError");
    assert_eq!(body["exit_code"], 1);
    assert_eq!(body["truncated"], false);
    assert!(body["duration_ms"].is_u64());
    assert_eq!(body["results"], serde_json::json!([]));
}

#[tokio::test]
async fn a_one_shot_run_streams_ndjson_ending_with_a_summary() {
    let server = TestServer::start().await;
    let response = server
        .api()
        .await
        .post(server.url("/v1/code_interpreter/run"))
        .header("accept", "application/x-ndjson")
        .json(&serde_json::json!({
            "code": "for i in 1 2 3; do echo line $i; sleep 0.1; done; echo oops >&2",
            "language": "bash",
            "timeout": 20,
        }))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["content-type"], "application/x-ndjson");
    let text = response.text().await.unwrap();
    let lines: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let stdout: String = lines
        .iter()
        .filter(|l| l["type"] == "stdout")
        .map(|l| l["text"].as_str().unwrap())
        .collect();
    assert_eq!(stdout, "line 1\nline 2\nline 3\n");
    assert!(
        lines.iter().filter(|l| l["type"] == "stdout").count() >= 3,
        "{text}"
    );
    assert!(lines.iter().any(|l| l["type"] == "stderr"));
    let summary = lines.last().unwrap();
    assert_eq!(summary["type"], "summary");
    assert_eq!(summary["stdout"], "line 1\nline 2\nline 3\n");
    assert_eq!(summary["exit_code"], 0);
}

#[tokio::test]
async fn bad_run_requests_get_a_clear_4xx() {
    let server = TestServer::start().await;
    let client = server.api().await;
    let url = server.url("/v1/code_interpreter/run");
    let big = "x".repeat(1024 * 1024 + 1);
    let cases: Vec<(Option<serde_json::Value>, &str, u16)> = vec![
        (
            Some(serde_json::json!({"code": "1", "language": "cobol"})),
            "",
            400,
        ),
        (Some(serde_json::json!({"code": "1"})), "", 400),
        (
            Some(serde_json::json!({"code": "1", "language": "python", "extra": 1})),
            "",
            400,
        ),
        (
            Some(serde_json::json!({"code": "1\u{0}", "language": "python"})),
            "",
            400,
        ),
        (
            Some(serde_json::json!({"code": big, "language": "python"})),
            "",
            400,
        ),
        (
            Some(serde_json::json!({"code": "1", "language": "python", "timeout": 0})),
            "",
            400,
        ),
        (
            Some(serde_json::json!({"code": "1", "language": "python", "timeout": 301})),
            "",
            400,
        ),
        (
            Some(serde_json::json!({"code": "1", "language": "python", "session_id": "nope"})),
            "",
            404,
        ),
        // Under 1% of a core is not a quota the kernel takes.
        (
            Some(
                serde_json::json!({"code": "1", "language": "python", "limits": {"cpu_millis": 9}}),
            ),
            "",
            400,
        ),
        (None, "{not json", 400),
    ];
    for (json, raw, status) in cases {
        let request = client.post(&url).header("content-type", "application/json");
        let request = match &json {
            Some(json) => request.body(json.to_string()),
            None => request.body(raw.to_string()),
        };
        let response = request.send().await.unwrap();
        let shown = json.as_ref().map_or(raw.to_string(), |j| {
            j.to_string().chars().take(80).collect()
        });
        assert_eq!(response.status().as_u16(), status, "{shown}");
        let body: serde_json::Value = response.json().await.unwrap();
        assert!(
            body["error"]["message"]
                .as_str()
                .is_some_and(|m| !m.is_empty()),
            "{shown}"
        );
    }
    // Over the body limit altogether.
    let huge = "y".repeat(9 * 1024 * 1024);
    let response = client
        .post(&url)
        .header("content-type", "application/json")
        .body(format!(r#"{{"code":"{huge}","language":"python"}}"#))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 413);
}

#[tokio::test]
async fn a_session_keeps_variables_across_api_runs() {
    let server = TestServer::start_with(runcell_server::config::SandboxConfig {
        pool_size: 1,
        ..runcell_server::config::SandboxConfig::default()
    })
    .await;
    let client = server.api().await;
    let created = client
        .post(server.url("/v1/code_interpreter/sessions"))
        .json(&serde_json::json!({"language": "python"}))
        .send()
        .await
        .unwrap();
    assert_eq!(created.status(), 201);
    let created: serde_json::Value = created.json().await.unwrap();
    let id = created["session_id"].as_str().unwrap().to_string();
    assert_eq!(created["language"], "python");

    let run = |code: &'static str| {
        let client = client.clone();
        let url = server.url("/v1/code_interpreter/run");
        let id = id.clone();
        async move {
            let response = client
                .post(url)
                .json(&serde_json::json!({"code": code, "language": "python", "session_id": id}))
                .send()
                .await
                .unwrap();
            assert_eq!(response.status(), 200);
            response.json::<serde_json::Value>().await.unwrap()
        }
    };
    let first = run("total = 40").await;
    assert_eq!(first["error"], serde_json::Value::Null, "{first}");
    let second = run("total + 2").await;
    assert_eq!(second["results"][0]["text/plain"], "42", "{second}");

    let listed: serde_json::Value = client
        .get(server.url("/v1/code_interpreter/sessions"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert!(
        listed["sessions"]
            .as_array()
            .unwrap()
            .iter()
            .any(|s| s["session_id"] == id.as_str())
    );

    let deleted = client
        .delete(server.url(&format!("/v1/code_interpreter/sessions/{id}")))
        .send()
        .await
        .unwrap();
    assert_eq!(deleted.status(), 204);
    let again = client
        .delete(server.url(&format!("/v1/code_interpreter/sessions/{id}")))
        .send()
        .await
        .unwrap();
    assert_eq!(again.status(), 404);
    let after = client
        .post(server.url("/v1/code_interpreter/run"))
        .json(&serde_json::json!({"code": "total", "language": "python", "session_id": id}))
        .send()
        .await
        .unwrap();
    assert_eq!(after.status(), 404);
}

#[tokio::test]
async fn bad_session_requests_get_a_clear_4xx() {
    let server = TestServer::start().await;
    let client = server.api().await;
    let response = client
        .post(server.url("/v1/code_interpreter/sessions"))
        .json(&serde_json::json!({"language": "cobol"}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 400);
    let response = client
        .delete(server.url("/v1/code_interpreter/sessions/not-a-session"))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 404);
}

#[tokio::test]
async fn a_request_may_lower_its_limits() {
    let server = TestServer::start().await;
    let response = server
        .api()
        .await
        .post(server.url("/v1/code_interpreter/run"))
        .json(&serde_json::json!({
            "code": "b = bytearray(200 * 1024 * 1024)\nprint('allocated')",
            "language": "python",
            "limits": {"memory_mib": 64},
        }))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let body: serde_json::Value = response.json().await.unwrap();
    assert_eq!(body["error"]["name"], "MemoryLimit", "{body}");
    let response = server
        .api()
        .await
        .post(server.url("/v1/code_interpreter/run"))
        .json(&serde_json::json!({
            "code": "print('x' * 5000)",
            "language": "python",
            "limits": {"output_kib": 1},
        }))
        .send()
        .await
        .unwrap();
    let body: serde_json::Value = response.json().await.unwrap();
    assert_eq!(body["error"]["name"], "OutputLimit", "{body}");
    assert_eq!(body["stdout"].as_str().unwrap().len(), 1024);
}

/// Headers a request carries, as name and value.
type Headers<'a> = Vec<(&'a str, &'a str)>;

/// What `method path` answers when it names `host` (and `extra` headers).
async fn as_host(
    server: &TestServer,
    method: reqwest::Method,
    path: &str,
    host: &str,
    extra: &[(&str, &str)],
) -> reqwest::Response {
    let mut request = http()
        .request(method, server.url(path))
        .header("host", host);
    for (name, value) in extra {
        request = request.header(*name, *value);
    }
    request.send().await.unwrap()
}

#[tokio::test]
async fn requests_for_another_host_name_are_refused_everywhere() {
    let server = TestServer::start().await;
    let id = server.new_session().await;
    let key = server.api_key("hosts").await;
    let port = server.addr.port();
    let foreign = format!("rebound.example:{port}");
    let bearer = format!("Bearer {key}");
    let cases: Vec<(reqwest::Method, String, Headers)> = vec![
        (reqwest::Method::GET, "/".into(), vec![]),
        (reqwest::Method::GET, format!("/sessions/{id}"), vec![]),
        (reqwest::Method::POST, "/api/sessions".into(), vec![]),
        (
            reqwest::Method::GET,
            format!("/api/sessions/{id}/events"),
            vec![],
        ),
        (
            reqwest::Method::POST,
            format!("/sessions/{id}/delete"),
            vec![],
        ),
        (reqwest::Method::GET, "/api/models".into(), vec![]),
        (
            reqwest::Method::GET,
            "/v1/code_interpreter/sessions".into(),
            vec![("authorization", bearer.as_str())],
        ),
        (
            reqwest::Method::POST,
            "/mcp".into(),
            vec![("authorization", bearer.as_str())],
        ),
        (reqwest::Method::GET, "/metrics".into(), vec![]),
        (reqwest::Method::GET, "/pkg/runcell.js".into(), vec![]),
        (reqwest::Method::GET, "/no-such-page".into(), vec![]),
        (
            reqwest::Method::POST,
            "/execute".into(),
            vec![("e2b-sandbox-id", "x"), ("e2b-sandbox-port", "49999")],
        ),
    ];
    for (method, path, extra) in &cases {
        for host in [foreign.as_str(), "rebound.example", "127.0.0.1.nip.example"] {
            // A forwarded host does not make another name this server's.
            let mut headers = extra.clone();
            headers.push(("x-forwarded-host", "localhost"));
            let response = as_host(&server, method.clone(), path, host, &headers).await;
            assert_eq!(response.status(), 421, "{method} {path} as {host}");
            assert!(response.headers().get("location").is_none());
            assert!(response.headers().get("set-cookie").is_none());
            let body: serde_json::Value = response.json().await.unwrap();
            assert_eq!(body["error"]["code"], "misdirected");
        }
    }
    // The session is still there: the refused delete did nothing.
    let page = as_host(
        &server,
        reqwest::Method::GET,
        &format!("/sessions/{id}"),
        &format!("localhost:{port}"),
        &[],
    )
    .await;
    assert_eq!(page.status(), 200);
    // This server's own names, at any port, still work.
    for host in [
        format!("localhost:{port}"),
        format!("127.0.0.1:{port}"),
        "LOCALHOST".to_string(),
        format!("[::1]:{port}"),
    ] {
        let response = as_host(&server, reqwest::Method::GET, "/", &host, &[]).await;
        assert_eq!(response.status(), 200, "{host}");
    }
    // Health answers whatever the name (probes use odd ones).
    let health = as_host(&server, reqwest::Method::GET, "/healthz", &foreign, &[]).await;
    assert_eq!(health.status(), 200);
}

#[tokio::test]
async fn a_socket_for_another_host_name_is_refused() {
    use tokio_tungstenite::tungstenite::client::IntoClientRequest;
    use tokio_tungstenite::tungstenite::http::HeaderValue;
    let server = TestServer::start().await;
    let id = server.new_session().await;
    let mut request = server
        .ws_url(&format!("/ws/sessions/{id}?after=0"))
        .into_client_request()
        .unwrap();
    let headers = request.headers_mut();
    headers.insert("host", HeaderValue::from_static("rebound.example"));
    headers.insert(
        "cookie",
        HeaderValue::from_str(&crate::support::cookie_of(crate::support::OWNER)).unwrap(),
    );
    headers.insert(
        "sec-websocket-protocol",
        HeaderValue::from_static(app::protocol::SUBPROTOCOL),
    );
    headers.insert("origin", HeaderValue::from_static("http://rebound.example"));
    match tokio_tungstenite::connect_async(request).await {
        Err(tokio_tungstenite::tungstenite::Error::Http(response)) => {
            assert_eq!(response.status(), 421);
        }
        Ok(_) => panic!("a socket opened for another host name"),
        Err(err) => panic!("cannot connect: {err}"),
    }
    // Its own name still opens it.
    let mut client = server.connect(&id, 0).await;
    client.welcome().await;
}

#[tokio::test]
async fn configured_host_names_are_answered() {
    let server = TestServer::start_configured(|config| {
        config.http.allowed_hosts = vec!["runcell.example".into()];
    })
    .await;
    let port = server.addr.port();
    for host in ["runcell.example", &format!("runcell.example:{port}")] {
        let response = as_host(&server, reqwest::Method::GET, "/", host, &[]).await;
        assert_eq!(response.status(), 200, "{host}");
    }
    // Not its subdomains.
    let response = as_host(&server, reqwest::Method::GET, "/", "a.runcell.example", &[]).await;
    assert_eq!(response.status(), 421);
}

#[tokio::test]
async fn other_sites_cannot_post_with_the_cookie() {
    let server = TestServer::start().await;
    let id = server.new_session().await;
    let own = format!("http://{}", server.addr);
    let form = [("title", "renamed")];
    let post = |path: String, headers: Vec<(&'static str, String)>| {
        let mut request = http().post(server.url(&path)).form(&form);
        for (name, value) in headers {
            request = request.header(name, value);
        }
        request.send()
    };
    let cross_site: Vec<Vec<(&'static str, String)>> = vec![
        vec![("origin", "http://evil.example".into())],
        vec![("origin", "null".into())],
        vec![(
            "origin",
            format!("http://localhost:{}", crate::support::closed_port()),
        )],
        vec![("sec-fetch-site", "cross-site".into())],
        vec![("sec-fetch-site", "same-site".into())],
    ];
    for headers in &cross_site {
        for path in [
            format!("/sessions/{id}/rename"),
            format!("/sessions/{id}/share"),
            format!("/sessions/{id}/delete"),
            "/api/sessions".to_string(),
            format!("/api/sessions/{id}/stop"),
            "/logout".to_string(),
            "/login".to_string(),
            "/s/not-a-token/fork".to_string(),
        ] {
            let response = post(path.clone(), headers.clone()).await.unwrap();
            assert_eq!(response.status(), 403, "{path} with {headers:?}");
        }
        let response = http()
            .patch(server.url(&format!("/api/sessions/{id}")))
            .header(headers[0].0, &headers[0].1)
            .json(&serde_json::json!({"title": "x"}))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 403, "PATCH with {headers:?}");
        let response = http()
            .delete(server.url(&format!("/api/sessions/{id}")))
            .header(headers[0].0, &headers[0].1)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 403, "DELETE with {headers:?}");
    }
    // Neither deleted nor renamed.
    let page = http()
        .get(server.url(&format!("/sessions/{id}")))
        .send()
        .await
        .unwrap();
    assert_eq!(page.status(), 200);
    let html = page.text().await.unwrap();
    assert!(
        html.contains("<title>New session · runcell</title>"),
        "{html}"
    );
    // The page itself, a program without Origin, and a person typing pass.
    for headers in [
        vec![("origin", own.clone())],
        vec![
            ("origin", own.clone()),
            ("sec-fetch-site", "same-origin".into()),
        ],
        vec![],
        vec![("sec-fetch-site", "none".into())],
    ] {
        let response = post(format!("/sessions/{id}/rename"), headers.clone())
            .await
            .unwrap();
        assert_eq!(response.status(), 303, "{headers:?}");
    }
    // `/v1` takes bearer keys, not cookies: no origin check there.
    let key = server.api_key("origin").await;
    let response = reqwest::Client::new()
        .post(server.url("/v1/code_interpreter/sessions"))
        .header("authorization", format!("Bearer {key}"))
        .header("origin", "http://evil.example")
        .json(&serde_json::json!({}))
        .send()
        .await
        .unwrap();
    assert_ne!(response.status(), 403);
}

#[tokio::test]
async fn an_html_output_is_framed_behind_a_policy_that_loads_nothing() {
    let server = TestServer::start().await;
    let id = server.new_session().await;
    let code = "from IPython.display import HTML\nHTML('<img src=\"http://example.invalid/x.png\"><p>framed</p>')";
    let response = http()
        .post(server.url(&format!("/api/sessions/{id}/run")))
        .json(&serde_json::json!({ "code": code, "language": "python" }))
        .send()
        .await
        .unwrap();
    assert!(!crate::support::ndjson_events(response).await.is_empty());
    let html = http()
        .get(server.url(&format!("/sessions/{id}")))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let frame = html
        .split("<iframe")
        .nth(1)
        .and_then(|rest| rest.split("</iframe>").next())
        .unwrap_or_else(|| panic!("no output frame: {html}"));
    assert!(frame.contains("sandbox=\"\""), "{frame}");
    let srcdoc = frame
        .split("srcdoc=\"")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .unwrap();
    let policy = srcdoc
        .find("Content-Security-Policy")
        .unwrap_or_else(|| panic!("no policy: {srcdoc}"));
    let image = srcdoc.find("example.invalid").expect("the output");
    assert!(policy < image, "{srcdoc}");
    assert!(srcdoc.contains("default-src"), "{srcdoc}");
    assert!(srcdoc[..policy].find("img").is_none(), "{srcdoc}");
}

/// A server whose site has the Browser sandbox's public files (small
/// stand-ins: the server only serves them).
async fn server_with_python_files(required: bool) -> TestServer {
    TestServer::start_configured(|config| {
        if required {
            config.auth.mode = runcell_server::config::AuthMode::Required;
        }
        let runtime = config.site_root.join("pyodide").join("314.0.7-0123456789");
        std::fs::create_dir_all(&runtime).unwrap();
        std::fs::write(runtime.join("pyodide.mjs"), "export {};").unwrap();
        std::fs::write(runtime.join("pyodide.asm.wasm"), "\0asm\x01\0\0\0").unwrap();
        for (name, body) in [
            ("py-worker.mjs", "onmessage = () => {};"),
            ("py-frame.js", "parent.postMessage('hi', '*');"),
            (
                "py-frame.html",
                "<!doctype html><script src=/py-frame.js></script>",
            ),
        ] {
            std::fs::write(config.site_root.join(name), body).unwrap();
        }
    })
    .await
}

const PYTHON_FILES: [&str; 4] = [
    "/pyodide/314.0.7-0123456789/pyodide.mjs",
    "/pyodide/314.0.7-0123456789/pyodide.asm.wasm",
    "/py-worker.mjs",
    "/py-frame.js",
];

/// The page's Python runs in a frame whose origin is opaque: it reads the
/// public Python files cross-origin (CORS `*`, CORP `cross-origin`), and
/// nothing else of this site: no API route, page or socket says either.
#[tokio::test]
async fn only_the_public_python_files_are_readable_cross_origin() {
    let server = server_with_python_files(false).await;
    // The frame's requests carry no cookie, and `Origin: null`.
    let frame = crate::support::http_as(None);
    for path in PYTHON_FILES {
        let response = frame
            .get(server.url(path))
            .header("origin", "null")
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200, "{path}");
        let headers = response.headers();
        assert_eq!(headers["access-control-allow-origin"], "*", "{path}");
        assert_eq!(
            headers["cross-origin-resource-policy"], "cross-origin",
            "{path}"
        );
        assert!(!headers.contains_key("set-cookie"), "{path}");
    }

    let session = server.new_session().await;
    let client = http();
    let socket = format!("/ws/sessions/{session}");
    let session_page = format!("/sessions/{session}");
    let files = format!("/api/sessions/{session}/files");
    for path in [
        "/api/sessions",
        "/api/models",
        files.as_str(),
        session_page.as_str(),
        socket.as_str(),
        "/v1/openapi.json",
        "/v1/code_interpreter/sessions",
        "/healthz",
        "/nowhere",
    ] {
        let response = client
            .get(server.url(path))
            .header("origin", "null")
            .send()
            .await
            .unwrap();
        let headers = response.headers();
        assert!(
            !headers.contains_key("access-control-allow-origin"),
            "{path}"
        );
        assert_ne!(
            headers
                .get("cross-origin-resource-policy")
                .map(|v| v.to_str().unwrap()),
            Some("cross-origin"),
            "{path}"
        );
        // Nor may the frame ask to send what a form cannot.
        let preflight = client
            .request(reqwest::Method::OPTIONS, server.url(path))
            .header("origin", "null")
            .header("access-control-request-method", "DELETE")
            .send()
            .await
            .unwrap();
        assert!(
            !preflight
                .headers()
                .contains_key("access-control-allow-origin"),
            "{path}"
        );
    }

    // The session's socket refuses the frame's `Origin: null`, even with the
    // owner's cookie (which the frame does not have).
    let response = client
        .get(server.url(&socket))
        .header("origin", "null")
        .header("connection", "upgrade")
        .header("upgrade", "websocket")
        .header("sec-websocket-version", "13")
        .header("sec-websocket-key", "dGhlIHNhbXBsZSBub25jZQ==")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 403);
}

/// The frame's document: framed by this site's pages alone, sandboxed
/// however it is loaded, under the Python policy; every other page keeps
/// `DENY`.
#[tokio::test]
async fn the_python_frame_may_be_framed_by_this_site_alone() {
    let server = server_with_python_files(false).await;
    let client = http();
    let response = client
        .get(server.url("/py-frame.html"))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let headers = response.headers();
    assert_eq!(headers["x-frame-options"], "SAMEORIGIN");
    let csp = headers["content-security-policy"].to_str().unwrap();
    for part in [
        "frame-ancestors 'self'",
        "sandbox allow-scripts",
        "default-src 'none'",
        "connect-src 'self'",
        "worker-src blob:",
    ] {
        assert!(csp.contains(part), "{csp} lacks {part}");
    }
    assert!(!csp.contains("allow-same-origin"), "{csp}");
    assert_eq!(headers["cross-origin-embedder-policy"], "require-corp");
    assert!(!headers.contains_key("access-control-allow-origin"));
    let page = client.get(server.url("/healthz")).send().await.unwrap();
    assert_eq!(page.headers()["x-frame-options"], "DENY");
    assert!(
        page.headers()["content-security-policy"]
            .to_str()
            .unwrap()
            .contains("frame-ancestors 'none'")
    );
}

/// Where the pages ask for a key, the public Python files stay open: the
/// frame loads them without the sign-in cookie.
#[tokio::test]
async fn the_python_files_need_no_sign_in() {
    let server = server_with_python_files(true).await;
    let stranger = crate::support::http_as(None);
    for path in PYTHON_FILES {
        let response = stranger.get(server.url(path)).send().await.unwrap();
        assert_eq!(response.status(), 200, "{path}");
    }
    let response = stranger
        .get(server.url("/api/sessions"))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 401);
}

/// An interactive chart's frame: framed by this site alone, sandboxed
/// however it is loaded, fetching nothing (no connection, scripts from this
/// site only), and its libraries readable from its opaque origin.
#[tokio::test]
async fn the_chart_frame_fetches_nothing_and_its_libraries_are_public() {
    let server = TestServer::start_configured(|config| {
        std::fs::create_dir_all(config.site_root.join("charts")).unwrap();
        std::fs::write(config.site_root.join("charts/vega.min.js"), "var vega;").unwrap();
        std::fs::write(
            config.site_root.join("chart-frame.js"),
            "parent.postMessage('{}', '*');",
        )
        .unwrap();
        std::fs::write(
            config.site_root.join("chart-frame.html"),
            "<!doctype html><script src=/chart-frame.js></script>",
        )
        .unwrap();
    })
    .await;
    let response = http()
        .get(server.url("/chart-frame.html"))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let headers = response.headers();
    assert_eq!(headers["x-frame-options"], "SAMEORIGIN");
    let csp = headers["content-security-policy"].to_str().unwrap();
    for part in [
        "frame-ancestors 'self'",
        "sandbox allow-scripts",
        "default-src 'none'",
        "connect-src 'none'",
        "script-src 'self' 'unsafe-eval'",
        "img-src data: blob:",
    ] {
        assert!(csp.contains(part), "{csp} lacks {part}");
    }
    assert!(!csp.contains("allow-same-origin"), "{csp}");
    let frame = crate::support::http_as(None);
    for path in ["/chart-frame.js", "/charts/vega.min.js"] {
        let response = frame
            .get(server.url(path))
            .header("origin", "null")
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200, "{path}");
        let headers = response.headers();
        assert_eq!(headers["content-type"], "text/javascript", "{path}");
        assert_eq!(
            headers["cross-origin-resource-policy"], "cross-origin",
            "{path}"
        );
        assert!(!headers.contains_key("set-cookie"), "{path}");
    }
}

/// Titles that try to leave `<title>` (issue 40's stored XSS): each is set
/// by a first question and by a rename, then read back on the owner's page
/// and on a share link's.
const HOSTILE_TITLES: [&str; 4] = [
    "</title><script>eval(decodeURI(location.hash.slice(1)))</script>",
    "</TITLE><img src=x onerror=alert(1)>",
    "x</title ><svg/onload=alert(1)>",
    "\"'><script>alert(document.cookie)</script>",
];

/// The nonce a page's policy lets scripts run with, checked to be the one
/// its scripts carry.
fn page_nonce(policy: &str) -> &str {
    let start = policy.find("'nonce-").expect("a nonce in the policy") + "'nonce-".len();
    let rest = &policy[start..];
    &rest[..rest.find('\'').expect("a closed nonce")]
}

#[tokio::test]
async fn a_hostile_title_never_reaches_a_page_as_markup() {
    let server = TestServer::start().await;
    for (n, title) in HOSTILE_TITLES.iter().enumerate() {
        // Once as a first question (which names the session) and once as a rename.
        let asked = server.new_session().await;
        crate::support::ask(&server, &asked, title).await;
        let renamed = server.new_session().await;
        let response = http()
            .patch(server.url(&format!("/api/sessions/{renamed}")))
            .json(&serde_json::json!({ "title": title }))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200, "rename to {title:?}");
        for id in [&asked, &renamed] {
            let shared: serde_json::Value = http()
                .post(server.url(&format!("/api/sessions/{id}/share")))
                .send()
                .await
                .unwrap()
                .json()
                .await
                .unwrap();
            let link = shared["url"].as_str().unwrap().to_string();
            for url in [server.url(&format!("/sessions/{id}")), link] {
                let response = http().get(&url).send().await.unwrap();
                assert_eq!(response.status(), 200, "{url}: {:?}", response.headers());
                let policy = response.headers()["content-security-policy"]
                    .to_str()
                    .unwrap()
                    .to_string();
                let html = response.text().await.unwrap();
                let head = &html[..html.find("</head>").unwrap()];
                let written = head
                    .split("<title>")
                    .nth(1)
                    .and_then(|rest| rest.split("</title>").next())
                    .unwrap();
                assert!(!written.contains('<'), "case {n}: {written:?} at {url}");
                assert_eq!(head.matches("<title>").count(), 1, "{head}");
                assert!(!html.contains("<img src=x") && !html.contains("<svg/onload"));
                assert!(!html.contains("<script>alert") && !html.contains("<script>eval"));
                // Scripts run only with this response's nonce, and every
                // script of the page carries it.
                assert!(policy.contains("script-src 'nonce-"), "{policy}");
                assert!(policy.contains("'strict-dynamic'"), "{policy}");
                assert!(!policy.contains("unsafe-inline"), "{policy}");
                let nonce = page_nonce(&policy);
                assert!(nonce.len() >= 16, "{policy}");
                let scripts = html.matches("<script").count();
                let nonced = html.matches(&format!("nonce=\"{nonce}\"")).count();
                assert_eq!(scripts, nonced, "every script carries the nonce at {url}");
                assert!(scripts > 0, "the page hydrates: {url}");
            }
        }
    }
}

#[tokio::test]
async fn every_page_has_its_own_nonce_and_other_responses_run_no_script() {
    let server = TestServer::start().await;
    let id = server.new_session().await;
    let policy_of = |response: &reqwest::Response| {
        response.headers()["content-security-policy"]
            .to_str()
            .unwrap()
            .to_string()
    };
    let first = http()
        .get(server.url(&format!("/sessions/{id}")))
        .send()
        .await
        .unwrap();
    let second = http()
        .get(server.url(&format!("/sessions/{id}")))
        .send()
        .await
        .unwrap();
    assert_ne!(
        page_nonce(&policy_of(&first)),
        page_nonce(&policy_of(&second))
    );
    for path in ["/nowhere", "/v1/docs/", "/healthz"] {
        let response = http().get(server.url(path)).send().await.unwrap();
        let policy = policy_of(&response);
        assert!(
            policy.contains("script-src 'none'") || policy.contains("script-src 'nonce-"),
            "{path}: {policy}"
        );
        assert!(!policy.contains("unsafe-inline"), "{path}: {policy}");
    }
}

/// The CI flake where a session's first page, just after its form's
/// redirect, came with `script-src 'none'` and no nonce while its scripts
/// carried one (so the page never came to life): a file of the site
/// answered while that page was being rendered took the page's headers. A
/// browser fetches `/favicon.svg` with every page, so with two tabs at once
/// one tab's icon met the other's page. Here pages and the icon are asked
/// for at once, many times: every page keeps its own policy and its own
/// title (renders sharing a thread once read each other's, or dropped the
/// connection), and no file gets a policy with a nonce.
#[tokio::test]
async fn pages_rendered_while_files_are_fetched_keep_their_own_policy() {
    let site = tempfile::tempdir().unwrap();
    std::fs::write(
        site.path().join("favicon.svg"),
        r#"<svg xmlns="http://www.w3.org/2000/svg"/>"#,
    )
    .unwrap();
    let site_root = site.path().to_path_buf();
    let server = TestServer::start_configured(move |config| {
        config.site_root = site_root;
        config.notebook.session_burst = 1000;
    })
    .await;
    let server = &server;
    let pages = (0..6).map(|client_no| async move {
        let client = http();
        for n in 0..5 {
            let made = client
                .post(server.url("/sessions"))
                .form(&[("message", "")])
                .send()
                .await
                .unwrap();
            assert_eq!(made.status(), 303);
            let location = made.headers()["location"].to_str().unwrap().to_string();
            let title = format!("page {client_no}.{n}");
            let renamed = client
                .post(server.url(&format!("{location}/rename")))
                .form(&[("title", &title)])
                .send()
                .await
                .unwrap();
            assert_eq!(renamed.status(), 303);
            let page = client.get(server.url(&location)).send().await.unwrap();
            let status = page.status();
            if status != 200 {
                // Seen once in a full suite run: a 503 after a minute. What
                // the server said, to find out which wait it was.
                let said = page.text().await.unwrap_or_default();
                panic!("{location} answered {status}: {said}");
            }
            let policy = page.headers()["content-security-policy"]
                .to_str()
                .unwrap()
                .to_string();
            let html = page.text().await.unwrap();
            assert!(
                policy.contains("script-src 'nonce-"),
                "{location} lost its policy: {policy}"
            );
            let nonced = format!("nonce=\"{}\"", page_nonce(&policy));
            assert_eq!(
                html.matches("<script").count(),
                html.matches(&nonced).count(),
                "every script of {location} carries its header's nonce"
            );
            assert!(
                html.contains(&format!("<title>{title} · runcell</title>")),
                "{location} is titled {title}: {}",
                html.split("<title>").nth(1).unwrap_or_default()
            );
        }
    });
    let icons = (0..3).map(|_| async move {
        let client = http();
        for _ in 0..40 {
            let icon = client.get(server.url("/favicon.svg")).send().await.unwrap();
            assert_eq!(icon.status(), 200);
            let policy = icon.headers()["content-security-policy"]
                .to_str()
                .unwrap()
                .to_string();
            assert!(
                !policy.contains("nonce-"),
                "a page's policy on a file: {policy}"
            );
        }
    });
    futures::future::join(
        futures::future::join_all(pages),
        futures::future::join_all(icons),
    )
    .await;
}
