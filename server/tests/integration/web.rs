use crate::support::{TestServer, http};

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

#[tokio::test]
async fn a_session_page_shows_its_history_escaped() {
    let server = TestServer::start().await;
    let session = server.new_session().await;
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
    let server = TestServer::start_with(runcell::config::SandboxConfig {
        pool_size: 1,
        ..runcell::config::SandboxConfig::default()
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

/// A server whose site has the Browser sandbox's public files (small
/// stand-ins: the server only serves them).
async fn server_with_python_files(required: bool) -> TestServer {
    TestServer::start_configured(|config| {
        if required {
            config.auth.mode = runcell::config::AuthMode::Required;
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
