//! E2B both ways: runcell's E2B-compatible endpoints at the byte level, and
//! runcell's own E2B backend running the sandbox conformance suite against
//! them (and against E2B's cloud when `RUNCELL_TEST_E2B_CLOUD=1` and
//! `E2B_API_KEY` are set).

use std::sync::Arc;
use std::time::Duration;

use runcell_sandbox::conformance;
use runcell_sandbox::e2b::E2bSandbox;
use runcell_sandbox::e2b::client::E2bSettings;
use runcell_server::config::E2bConfig;
use runcell_server::e2b::protocol::{self, Envelopes, FLAG_END_STREAM, FLAG_MESSAGE};
use serde_json::{Value, json};

use crate::support::TestServer;

/// A served sandbox: its id and envd token.
async fn create(server: &TestServer, key: &str, path: &str, body: Value) -> (String, String) {
    let response = reqwest::Client::new()
        .post(server.url(path))
        .header("X-API-Key", key)
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 201, "{path}");
    let sandbox: Value = response.json().await.unwrap();
    assert_eq!(sandbox["envdVersion"], protocol::ENVD_VERSION);
    (
        sandbox["sandboxID"].as_str().unwrap().to_string(),
        sandbox["envdAccessToken"].as_str().unwrap().to_string(),
    )
}

fn data(server: &TestServer, id: &str, port: u16, path: &str) -> reqwest::RequestBuilder {
    reqwest::Client::new()
        .post(server.url(path))
        .header("E2b-Sandbox-Id", id)
        .header("E2b-Sandbox-Port", port.to_string())
}

#[tokio::test]
async fn the_control_plane_serves_both_create_paths_and_keeps_keys_apart() {
    let server = TestServer::start().await;
    let key = server.api_key("e2b").await;
    let other = server.api_key("other").await;
    // SDK 2.45's body on `/sandboxes`, 2.63's on `/v2/sandboxes`.
    let (v1, _) = create(
        &server,
        &key,
        "/sandboxes",
        json!({"templateID": "code-interpreter-v1", "timeout": 300, "secure": true,
               "allow_internet_access": true, "metadata": {}, "envVars": {}}),
    )
    .await;
    let (v2, _) = create(
        &server,
        &key,
        "/v2/sandboxes",
        json!({"templateID": "code-interpreter-v1", "timeout": 120, "metadata": {"owner": "probe"}}),
    )
    .await;
    let http = reqwest::Client::new();
    let listed: Vec<Value> = http
        .get(server.url("/v2/sandboxes"))
        .header("X-API-Key", &key)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let ids: Vec<&str> = listed
        .iter()
        .filter_map(|s| s["sandboxID"].as_str())
        .collect();
    assert_eq!(ids, [v1.as_str(), v2.as_str()]);
    assert_eq!(listed[1]["metadata"]["owner"], "probe");
    assert_eq!(listed[1]["state"], "running");
    // Another key sees none of them and cannot touch them.
    let theirs: Vec<Value> = http
        .get(server.url("/v2/sandboxes"))
        .header("X-API-Key", &other)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert!(theirs.is_empty());
    for request in [
        http.delete(server.url(&format!("/sandboxes/{v1}"))),
        http.post(server.url(&format!("/sandboxes/{v1}/timeout")))
            .json(&json!({"timeout": 60})),
    ] {
        let response = request.header("X-API-Key", &other).send().await.unwrap();
        assert_eq!(response.status(), 404);
        let body: Value = response.json().await.unwrap();
        assert_eq!(body["code"], 404);
    }
    // No key, a wrong key, an unknown template.
    let response = http
        .post(server.url("/v2/sandboxes"))
        .json(&json!({"templateID": "base"}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 401);
    let response = http
        .post(server.url("/v2/sandboxes"))
        .header("X-API-Key", "e2b_0123456789abcdef")
        .json(&json!({"templateID": "base"}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 401);
    let response = http
        .post(server.url("/v2/sandboxes"))
        .header("X-API-Key", &key)
        .json(&json!({"templateID": "gpu-llama"}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 404);
    // Timeout, then kill: 204 each; killed twice is 404.
    let response = http
        .post(server.url(&format!("/sandboxes/{v2}/timeout")))
        .header("X-API-Key", &key)
        .json(&json!({"timeout": 600}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 204);
    for want in [204, 404] {
        let response = http
            .delete(server.url(&format!("/sandboxes/{v2}")))
            .header("X-API-Key", &key)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), want);
    }
}

#[tokio::test]
async fn a_sandbox_that_times_out_is_gone() {
    let server = TestServer::start().await;
    let key = server.api_key("e2b").await;
    let (id, token) = create(
        &server,
        &key,
        "/v2/sandboxes",
        json!({"templateID": "base", "timeout": 1}),
    )
    .await;
    // The reaper looks every few seconds.
    let mut gone = false;
    for _ in 0..40 {
        tokio::time::sleep(Duration::from_millis(500)).await;
        let response = reqwest::Client::new()
            .get(server.url("/envs"))
            .header("E2b-Sandbox-Id", &id)
            .header("E2b-Sandbox-Port", "49983")
            .header("X-Access-Token", &token)
            .send()
            .await
            .unwrap();
        if response.status() == 404 {
            gone = true;
            break;
        }
    }
    assert!(gone, "a sandbox past its timeout must be closed");
}

#[tokio::test]
async fn the_data_plane_checks_tokens_and_streams_exact_bytes() {
    let server = TestServer::start().await;
    let key = server.api_key("e2b").await;
    let (id, token) = create(
        &server,
        &key,
        "/v2/sandboxes",
        json!({"templateID": "code-interpreter-v1"}),
    )
    .await;
    // Without the sandbox's token: envd answers JSON 401, the code
    // interpreter plain text.
    let response = data(&server, &id, 49983, "/filesystem.Filesystem/ListDir")
        .json(&json!({"path": "/home/user"}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 401);
    assert_eq!(response.json::<Value>().await.unwrap()["code"], 401);
    let response = data(&server, &id, 49999, "/execute")
        .header("X-Access-Token", "envd_wrong")
        .json(&json!({"code": "1"}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 401);
    // An unknown sandbox.
    let response = data(&server, "nope", 49999, "/execute")
        .header("X-Access-Token", &token)
        .json(&json!({"code": "1"}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 404);

    // `/execute`: Python's spacing, the count first, end_of_execution last.
    let response = data(&server, &id, 49999, "/execute")
        .header("X-Access-Token", &token)
        .json(&json!({"code": "print('hi'); 1+1", "context_id": null, "language": null, "env_vars": {"X": "1"}}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    assert!(response.headers().get("content-type").is_none());
    let text = response.text().await.unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(
        lines[0],
        "{\"type\": \"number_of_executions\", \"execution_count\": 1}"
    );
    assert!(
        lines[1].starts_with("{\"type\": \"stdout\", \"text\": \"hi\\n\", \"timestamp\": \""),
        "{text}"
    );
    assert_eq!(
        lines[2],
        "{\"type\": \"result\", \"text\": \"2\", \"extra\": {}, \"is_main_result\": true}"
    );
    assert_eq!(*lines.last().unwrap(), "{\"type\": \"end_of_execution\"}");
    assert!(text.ends_with("}\n"));
    // Both context_id and language: 400, as E2B's server says it.
    let response = data(&server, &id, 49999, "/execute")
        .header("X-Access-Token", &token)
        .json(&json!({"code": "1", "context_id": "python", "language": "python"}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 400);
    assert_eq!(
        response.text().await.unwrap(),
        "Only one of context_id or language can be provided"
    );

    // A long silence is filled with keepalives every 5 s.
    let response = data(&server, &id, 49999, "/execute")
        .header("X-Access-Token", &token)
        .json(&json!({"code": "import time; time.sleep(6); print('late')"}))
        .send()
        .await
        .unwrap();
    let text = response.text().await.unwrap();
    assert!(text.contains("{\"type\": \"keepalive\"}\n"), "{text}");
    assert!(
        text.ends_with("{\"type\": \"end_of_execution\"}\n"),
        "{text}"
    );

    // `process.Process/Start`: envelopes, `start` first, the end-stream
    // flag last, over a chunked request body as the SDK sends it.
    let message = json!({"process": {"cmd": "/bin/bash", "args": ["-l", "-c", "echo out; echo err >&2; exit 3"]}, "stdin": false});
    let body = protocol::envelope(FLAG_MESSAGE, message.to_string().as_bytes());
    let chunks: Vec<Result<Vec<u8>, std::io::Error>> =
        body.chunks(7).map(|c| Ok(c.to_vec())).collect();
    let response = data(&server, &id, 49983, "/process.Process/Start")
        .header("X-Access-Token", &token)
        .header("Content-Type", "application/connect+json")
        .header("Connect-Protocol-Version", "1")
        .body(reqwest::Body::wrap_stream(futures::stream::iter(chunks)))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(
        response.headers()["content-type"],
        "application/connect+json"
    );
    let mut envelopes = Envelopes::default();
    envelopes.push(&response.bytes().await.unwrap());
    let mut got = Vec::new();
    while let Some(envelope) = envelopes.next_envelope().unwrap() {
        got.push(envelope);
    }
    assert!(envelopes.is_empty());
    let (last_flag, last) = got.pop().unwrap();
    assert_eq!(
        (last_flag, last.as_slice()),
        (FLAG_END_STREAM, b"{}".as_slice())
    );
    let events: Vec<Value> = got
        .iter()
        .map(|(flag, m)| {
            assert_eq!(*flag, FLAG_MESSAGE);
            serde_json::from_slice(m).unwrap()
        })
        .collect();
    assert!(events[0]["event"]["start"]["pid"].is_u64(), "{events:?}");
    let end = &events.last().unwrap()["event"]["end"];
    assert_eq!(end["exitCode"], 3);
    assert_eq!(end["status"], "exit status 3");
    // A malformed envelope ends the stream with an error, not a crash.
    let response = data(&server, &id, 49983, "/process.Process/Start")
        .header("X-Access-Token", &token)
        .header("Content-Type", "application/connect+json")
        .body(vec![0u8, 0, 0])
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let bytes = response.bytes().await.unwrap();
    assert_eq!(bytes[0], FLAG_END_STREAM);
    let end: Value = serde_json::from_slice(&bytes[5..]).unwrap();
    assert_eq!(end["error"]["code"], "invalid_argument");
}

#[tokio::test]
async fn the_data_plane_refuses_paths_and_links_out_of_the_home() {
    let server = TestServer::start().await;
    let key = server.api_key("e2b").await;
    let (id, token) = create(
        &server,
        &key,
        "/v2/sandboxes",
        json!({"templateID": "base"}),
    )
    .await;
    let http = reqwest::Client::new();
    let get = |path: &str| {
        http.get(server.url("/files"))
            .query(&[("path", path)])
            .header("E2b-Sandbox-Id", &id)
            .header("E2b-Sandbox-Port", "49983")
            .header("X-Access-Token", &token)
    };
    // Code makes links that point out of the home.
    let response = data(&server, &id, 49999, "/execute")
        .header("X-Access-Token", &token)
        .json(&json!({"code": "import os\nos.symlink('/etc/hostname', 'abs')\nos.symlink('../../../../etc', 'dir')\nprint('linked')"}))
        .send()
        .await
        .unwrap();
    assert!(response.text().await.unwrap().contains("linked"));
    for path in [
        "/etc/hostname",
        "../etc/hostname",
        "/home/user/abs",
        "dir/hostname",
    ] {
        let response = get(path).send().await.unwrap();
        assert!(
            response.status() == 400 || response.status() == 404,
            "{path}: {}",
            response.status()
        );
        let body: Value = response.json().await.unwrap();
        assert!(body["message"].is_string());
    }
    // Upload through a link out is refused too; the host file is untouched.
    let before = std::fs::read("/etc/hostname").unwrap_or_default();
    let response = data(&server, &id, 49983, "/files")
        .query(&[("path", "/home/user/abs")])
        .header("X-Access-Token", &token)
        .header("Content-Type", "application/octet-stream")
        .body("overwritten")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 400);
    assert_eq!(std::fs::read("/etc/hostname").unwrap_or_default(), before);
    // Multipart as the Python SDK sends it works, and reads back.
    let form = "--b\r\nContent-Disposition: form-data; name=\"file\"; filename=\"/home/user/a.txt\"\r\nContent-Type: text/plain\r\n\r\nhello world\n\r\n--b--\r\n";
    let response = data(&server, &id, 49983, "/files")
        .query(&[("path", "/home/user/a.txt")])
        .header("X-Access-Token", &token)
        .header("Content-Type", "multipart/form-data; boundary=b")
        .body(form)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let written: Value = response.json().await.unwrap();
    assert_eq!(
        written,
        json!([{"path": "/home/user/a.txt", "name": "a.txt", "type": "file"}])
    );
    let response = get("/home/user/a.txt").send().await.unwrap();
    assert_eq!(response.headers()["content-type"], "text/plain");
    // Saved as a file, never shown as a page of this origin.
    let disposition = response.headers()["content-disposition"].to_str().unwrap();
    assert!(disposition.starts_with("attachment;"), "{disposition}");
    assert_eq!(response.headers()["x-content-type-options"], "nosniff");
    assert_eq!(response.text().await.unwrap(), "hello world\n");
}

/// runcell's E2B backend, pointed at `server`'s E2B-compatible endpoints.
fn backend_for(server: &TestServer, key: &str) -> Arc<E2bSandbox> {
    let base = server.url("");
    let config = E2bConfig {
        api_key: key.into(),
        api_url: base.clone(),
        sandbox_url: base,
        sandbox_timeout_secs: 60,
        ..E2bConfig::default()
    };
    E2bSandbox::new(E2bSettings::from_config(&config)).unwrap()
}

#[tokio::test]
async fn the_e2b_backend_passes_the_conformance_suite_against_runcell() {
    let server = TestServer::start().await;
    let key = server.api_key("e2b-backend").await;
    let e2b = backend_for(&server, &key);
    conformance::says_hello_in_every_language(&*e2b).await;
    conformance::streams_output_in_order(&*e2b).await;
    conformance::stops_runs_at_the_time_limit(&*e2b).await;
    conformance::cancels_runs(&*e2b).await;
    conformance::refuses_bad_programs(&*e2b).await;
    conformance::sessions_keep_state_and_stay_apart(&*e2b).await;
    conformance::session_files_go_both_ways(&*e2b).await;
    conformance::contexts_keep_their_own_state(&*e2b).await;
    conformance::refuses_what_it_does_not_claim(&*e2b).await;
    conformance::sessions_report_values_and_errors(&*e2b).await;
    // Every sandbox it made was killed again.
    let left: Vec<Value> = reqwest::Client::new()
        .get(server.url("/v2/sandboxes"))
        .header("X-API-Key", &key)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert!(left.is_empty(), "{left:?}");
}

#[tokio::test]
async fn the_e2b_backend_says_what_went_wrong() {
    use runcell_sandbox::{Sandbox, SandboxError};
    let server = TestServer::start().await;
    // A wrong key.
    let e2b = backend_for(&server, "rc_wrong");
    let refused = e2b.open_session().await.err().unwrap();
    assert!(
        matches!(&refused, SandboxError::Unavailable(m) if m.contains("E2B_API_KEY")),
        "{refused}"
    );
    // A server that is not there.
    let config = E2bConfig {
        api_key: "e2b_1".into(),
        api_url: format!("http://127.0.0.1:{}", crate::support::closed_port()),
        ..E2bConfig::default()
    };
    let dead = E2bSandbox::new(E2bSettings::from_config(&config)).unwrap();
    let refused = dead.open_session().await.err().unwrap();
    assert!(matches!(refused, SandboxError::Unavailable(_)), "{refused}");
    // A sandbox killed behind a session's back.
    let key = server.api_key("e2b").await;
    let e2b = backend_for(&server, &key);
    let session = e2b.open_session().await.unwrap();
    reqwest::Client::new()
        .delete(server.url(&format!("/sandboxes/{}", session.id())))
        .header("X-API-Key", &key)
        .send()
        .await
        .unwrap();
    let request = runcell_sandbox::RunRequest {
        code: "1".into(),
        language: runcell_sandbox::Language::Python,
        limits: runcell_sandbox::Limits::default(),
        env: Vec::new(),
        cwd: None,
    };
    let gone = session
        .run(&request, None, &tokio_util::sync::CancellationToken::new())
        .await
        .err()
        .unwrap();
    assert!(matches!(gone, SandboxError::NotFound(_)), "{gone}");
    session.close().await;
}

#[tokio::test]
async fn the_e2b_backend_passes_the_conformance_suite_against_e2b_cloud() {
    let key = std::env::var("E2B_API_KEY").unwrap_or_default();
    if key.is_empty() || std::env::var("RUNCELL_TEST_E2B_CLOUD").as_deref() != Ok("1") {
        // Opt-in, and never a required peer: it costs money and needs the
        // internet.
        eprintln!(
            "SKIPPED: the E2B backend against E2B's cloud (set E2B_API_KEY and RUNCELL_TEST_E2B_CLOUD=1)"
        );
        return;
    }
    let config = E2bConfig {
        api_key: key.into(),
        domain: std::env::var("E2B_DOMAIN").unwrap_or_else(|_| "e2b.app".into()),
        ..E2bConfig::default()
    };
    let e2b = E2bSandbox::new(E2bSettings::from_config(&config)).unwrap();
    conformance::says_hello_in_every_language(&*e2b).await;
    conformance::streams_output_in_order(&*e2b).await;
    conformance::stops_runs_at_the_time_limit(&*e2b).await;
    conformance::cancels_runs(&*e2b).await;
    conformance::sessions_keep_state_and_stay_apart(&*e2b).await;
    conformance::session_files_go_both_ways(&*e2b).await;
    conformance::contexts_keep_their_own_state(&*e2b).await;
    conformance::refuses_what_it_does_not_claim(&*e2b).await;
    conformance::sessions_report_values_and_errors(&*e2b).await;
}

/// A server whose E2B backend is `provider`'s E2B-compatible endpoints.
async fn with_e2b_behind(provider: &TestServer) -> TestServer {
    let key = provider.api_key("upstream").await;
    let base = provider.url("");
    TestServer::start_configured(move |config| {
        config.e2b.api_key = key.into();
        config.e2b.api_url = base.clone();
        config.e2b.sandbox_url = base;
    })
    .await
}

/// Prints whether the program runs in an E2B sandbox.
const WHERE: &str = "import os\nprint(os.environ.get('E2B_SANDBOX'))";

#[tokio::test]
async fn v1_runs_and_sessions_go_to_the_backend_asked_for() {
    let provider = TestServer::start().await;
    let server = with_e2b_behind(&provider).await;
    let key = server.api_key("client").await;
    let http = crate::support::bearer(&key);
    let run = |backend: Option<&str>| {
        let mut body = json!({"language": "python", "code": WHERE});
        if let Some(backend) = backend {
            body["backend"] = backend.into();
        }
        http.post(server.url("/v1/code_interpreter/run"))
            .json(&body)
            .send()
    };
    for (backend, want) in [
        (None, "None\n"),
        (Some("jail"), "None\n"),
        (Some("e2b"), "true\n"),
    ] {
        let response = run(backend).await.unwrap();
        assert_eq!(response.status(), 200, "{backend:?}");
        let outcome: Value = response.json().await.unwrap();
        assert_eq!(outcome["stdout"], want, "{backend:?}: {outcome}");
    }
    let response = run(Some("pyodide")).await.unwrap();
    assert_eq!(response.status(), 400);
    // A session on E2B keeps its state there, and says where it runs.
    let session: Value = http
        .post(server.url("/v1/code_interpreter/sessions"))
        .json(&json!({"backend": "e2b"}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(session["backend"], "e2b", "{session}");
    let id = session["session_id"].as_str().unwrap();
    for (code, want) in [("x = 6 * 7\nprint('set')", "set\n"), ("print(x)", "42\n")] {
        let outcome: Value = http
            .post(server.url("/v1/code_interpreter/run"))
            .json(&json!({"language": "python", "code": code, "session_id": id}))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        assert_eq!(outcome["stdout"], want, "{outcome}");
    }
    let listed: Value = http
        .get(server.url("/v1/code_interpreter/sessions"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(listed["sessions"][0]["backend"], "e2b");
    // The session's sandbox is alive on the provider until it is closed.
    let upstream: Vec<Value> = reqwest::Client::new()
        .get(provider.url("/v2/sandboxes"))
        .header("X-API-Key", provider.api_key("viewer").await)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert!(upstream.is_empty(), "another key sees none of them");
    let response = http
        .delete(server.url(&format!("/v1/code_interpreter/sessions/{id}")))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 204);
    // A session of one backend cannot be run as another's.
    let jail: Value = http
        .post(server.url("/v1/code_interpreter/sessions"))
        .json(&json!({}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(jail["backend"], "jail");
    let response = http
        .post(server.url("/v1/code_interpreter/run"))
        .json(&json!({"language": "python", "code": "1", "session_id": jail["session_id"], "backend": "e2b"}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 400);
}

#[tokio::test]
async fn without_an_e2b_key_e2b_is_refused_saying_how_to_offer_it() {
    let server = TestServer::start().await;
    let key = server.api_key("client").await;
    let response = crate::support::bearer(&key)
        .post(server.url("/v1/code_interpreter/run"))
        .json(&json!({"language": "python", "code": "1", "backend": "e2b"}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 400);
    let body: Value = response.json().await.unwrap();
    let message = body["error"]["message"].as_str().unwrap();
    assert!(message.contains("E2B_API_KEY"), "{message}");
}

#[tokio::test]
async fn a_notebook_runs_on_the_backend_its_page_picked() {
    use app::notebook::Notebook;
    use tokio_tungstenite::tungstenite::Message;
    let provider = TestServer::start().await;
    let server = with_e2b_behind(&provider).await;
    let mut client = server.join(&server.new_session().await).await;
    let ask = |backend: Option<&str>| {
        let mut frame = json!({"type": "ask", "text": format!("```python\n{WHERE}\n```")});
        if let Some(backend) = backend {
            frame["backend"] = backend.into();
        }
        Message::text(frame.to_string())
    };
    let mut printed = Vec::new();
    let mut events = Vec::new();
    for backend in [None, Some("e2b"), None, Some("jail")] {
        client.send_raw(ask(backend)).await;
        events.extend(client.events_until_finished().await);
        let notebook = Notebook::from_events(&events);
        let result = notebook
            .cells()
            .rfind(|c| c.kind == app::protocol::CellKind::Result)
            .map(app::notebook::Cell::printed)
            .unwrap_or_default();
        printed.push(result);
    }
    // The choice lasts until another is made; a move says so.
    let moved = |to: &str| {
        format!(
            "(This code ran in a new kernel on the {to} sandbox, as picked; variables from earlier turns stayed behind.)\n"
        )
    };
    assert_eq!(
        printed,
        [
            "None\n".to_string(),
            format!("true\n{}", moved("E2B")),
            "true\n".to_string(),
            format!("None\n{}", moved("local")),
        ]
    );
    // An unknown backend is refused, and the connection keeps working.
    client.send_raw(ask(Some("mainframe"))).await;
    match client.next().await {
        Some(app::protocol::ServerMessage::Error { message, .. }) => {
            assert!(message.contains("mainframe"), "{message}");
        }
        other => panic!("expected a refusal, got {other:?}"),
    }
}

/// A display flood through the E2B backend: what runcell's served side
/// lets through (its own output limit) and what the client keeps (the
/// request's, here lower) both stay bounded, and the session goes on.
#[tokio::test]
async fn a_display_flood_through_the_e2b_backend_is_bounded() {
    use runcell_sandbox::{Language, Limits, RunRequest, Sandbox};
    let server = TestServer::start().await;
    let key = server.api_key("e2b-flood").await;
    let e2b = backend_for(&server, &key);
    let session = e2b.open_session().await.unwrap();
    let cancel = tokio_util::sync::CancellationToken::new();
    let flood = "from IPython.display import display, HTML\nx = 'x' * 200_000\nfor _ in range(40):\n    display(HTML(x))";
    for budget in [Limits::default().output_bytes, 100_000] {
        let request = RunRequest {
            code: flood.into(),
            language: Language::Python,
            limits: Limits {
                wall: Duration::from_secs(30),
                output_bytes: budget,
                ..Limits::default()
            },
            env: Vec::new(),
            cwd: None,
        };
        let outcome = session.run(&request, None, &cancel).await.unwrap();
        let shown = outcome.stdout.len()
            + outcome.stderr.len()
            + runcell_sandbox::serialized_len(&outcome.results);
        assert!(shown <= budget, "{shown} > {budget}");
        let error = outcome.error.unwrap();
        assert_eq!(error.name, "OutputLimit", "{error:?}");
        assert!(error.value.contains("a display of"), "{error:?}");
        assert!(outcome.truncated);
        let next = RunRequest {
            code: "print(len(x))".into(),
            ..request
        };
        let after = session.run(&next, None, &cancel).await.unwrap();
        assert_eq!(after.stdout, "200000\n", "{after:?}");
    }
    session.close().await;
}

#[tokio::test]
async fn code_contexts_count_under_the_keys_run_limits() {
    // One kernel start a minute, after a burst of one.
    let server = TestServer::start_configured(|config| {
        config.sandbox.pool_size = 0;
        config.auth.runs_per_minute = 1;
        config.auth.run_burst = 1;
    })
    .await;
    let key = server.api_key("contexts").await;
    let (id, token) = create(
        &server,
        &key,
        "/sandboxes",
        json!({"templateID": "code-interpreter-v1"}),
    )
    .await;
    let context = data(&server, &id, 49999, "/contexts")
        .header("X-Access-Token", &token)
        .json(&json!({"language": "python"}))
        .send()
        .await
        .unwrap();
    assert_eq!(context.status(), 200);
    let context: Value = context.json().await.unwrap();
    let context_id = context["id"].as_str().unwrap().to_string();
    for path in [
        "/contexts".to_string(),
        format!("/contexts/{context_id}/restart"),
    ] {
        let response = data(&server, &id, 49999, &path)
            .header("X-Access-Token", &token)
            .json(&json!({"language": "python"}))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 429, "{path}");
        let wait: u64 = response.headers()["retry-after"]
            .to_str()
            .unwrap()
            .parse()
            .unwrap();
        assert!(wait >= 1, "{path}: {wait}");
        assert!(
            response.text().await.unwrap().contains("retry in"),
            "{path}"
        );
    }
}

/// A sandbox holds at most 8 contexts of its own (each a kernel with the
/// sandbox's whole memory limit): contexts asked for at once are counted
/// before their kernels start, so that they cannot all pass the cap.
#[tokio::test]
async fn contexts_opened_at_once_cannot_pass_the_cap_together() {
    const CAP: usize = 8;
    const ASKED: usize = 11;
    let server = TestServer::start_configured(|config| {
        config.sandbox.pool_size = 0;
        // The key's run limits are out of the way: the contexts' cap is
        // what is tested.
        config.auth.max_concurrent_runs = 64;
        config.auth.run_burst = 1000;
    })
    .await;
    let key = server.api_key("contexts").await;
    let (id, token) = create(
        &server,
        &key,
        "/sandboxes",
        json!({"templateID": "code-interpreter-v1"}),
    )
    .await;
    let opens = (0..ASKED).map(|_| async {
        let response = data(&server, &id, 49999, "/contexts")
            .header("X-Access-Token", &token)
            .json(&json!({"language": "python"}))
            .send()
            .await
            .unwrap();
        (response.status().as_u16(), response.text().await.unwrap())
    });
    let answers = futures::future::join_all(opens).await;
    let opened = answers.iter().filter(|(status, _)| *status == 200).count();
    assert_eq!(opened, CAP, "{answers:?}");
    for (status, body) in answers.iter().filter(|(status, _)| *status != 200) {
        assert_eq!(*status, 400, "{body}");
        assert!(body.contains("at most 8 contexts"), "{body}");
    }
    // The sandbox lists its two default contexts and the eight of its own.
    let listed = reqwest::Client::new()
        .get(server.url("/contexts"))
        .header("E2b-Sandbox-Id", &id)
        .header("E2b-Sandbox-Port", "49999")
        .header("X-Access-Token", &token)
        .send()
        .await
        .unwrap();
    let listed: Vec<Value> = listed.json().await.unwrap();
    assert_eq!(listed.len(), CAP + 2, "{listed:?}");
}

/// E2B sandboxes are the key's sandbox sessions: made at once, they
/// cannot pass the key's cap together either.
#[tokio::test]
async fn sandboxes_made_at_once_cannot_pass_the_keys_cap_together() {
    const CAP: usize = 2;
    const ASKED: usize = 5;
    let server = TestServer::start_configured(|config| {
        config.sandbox.pool_size = 0;
        config.auth.max_live_sessions = CAP as u32;
    })
    .await;
    let key = server.api_key("sandboxes").await;
    let made = (0..ASKED).map(|_| async {
        let response = reqwest::Client::new()
            .post(server.url("/sandboxes"))
            .header("X-API-Key", &key)
            .json(&json!({"templateID": "code-interpreter-v1"}))
            .send()
            .await
            .unwrap();
        (response.status().as_u16(), response.text().await.unwrap())
    });
    let answers = futures::future::join_all(made).await;
    let created = answers.iter().filter(|(status, _)| *status == 201).count();
    assert_eq!(created, CAP, "{answers:?}");
    for (status, body) in answers.iter().filter(|(status, _)| *status != 201) {
        assert_eq!(*status, 429, "{body}");
        assert!(
            body.contains("this key has 2 sandbox sessions open, its most"),
            "{body}"
        );
    }
}

#[tokio::test]
async fn a_revoked_keys_sandbox_is_closed_within_seconds() {
    let server = TestServer::start_configured(|config| config.auth.revocation_check_secs = 1).await;
    let key = server.api_key("leaving").await;
    let (id, token) = create(
        &server,
        &key,
        "/v2/sandboxes",
        json!({"templateID": "code-interpreter-v1", "timeout": 3600}),
    )
    .await;
    let execute = || {
        data(&server, &id, 49999, "/execute")
            .header("X-Access-Token", &token)
            .json(&json!({"code": "print('still here')"}))
    };
    let response = execute().send().await.unwrap();
    assert_eq!(response.status(), 200);
    assert!(response.text().await.unwrap().contains("still here"));

    server.revoke("leaving").await;
    // The data plane's token is the sandbox's, not the key's: the sandbox
    // itself has to go.
    let mut gone = false;
    for _ in 0..80 {
        tokio::time::sleep(Duration::from_millis(250)).await;
        if execute().send().await.unwrap().status() == 404 {
            gone = true;
            break;
        }
    }
    assert!(gone, "a revoked key's sandbox kept running code");
}

#[tokio::test]
async fn an_e2b_upload_streams_to_disk_within_the_sandboxs_size() {
    const UPLOADS: usize = 4;
    const SIZE: usize = 40 * 1024 * 1024;
    let server = TestServer::start_configured(|config| {
        config.sandbox.pool_size = 0;
        config.sandbox.disk_mib = 64;
        config.http.body_idle_timeout_secs = 120;
    })
    .await;
    let key = server.api_key("e2b").await;
    let (id, token) = create(
        &server,
        &key,
        "/v2/sandboxes",
        json!({"templateID": "base"}),
    )
    .await;
    let headers = [
        ("e2b-sandbox-id", id.as_str()),
        ("e2b-sandbox-port", "49983"),
        ("x-access-token", token.as_str()),
        ("content-type", "application/octet-stream"),
    ];
    let before = crate::support::rss_bytes();
    let mut held = Vec::new();
    for i in 0..UPLOADS {
        held.push(
            crate::support::unfinished_request(
                &server,
                "POST",
                &format!("/files?path=/home/user/big{i}.bin"),
                &headers,
                SIZE,
                SIZE - 10,
            )
            .await,
        );
    }
    crate::support::wait_for_spool(&server, (UPLOADS * (SIZE - 10)) as u64, UPLOADS).await;
    let grown = crate::support::rss_bytes().saturating_sub(before);
    assert!(
        grown < (UPLOADS * SIZE / 2) as u64,
        "the server grew by {} MiB while {} MiB of uploads waited",
        grown / (1024 * 1024),
        UPLOADS * SIZE / (1024 * 1024)
    );
    // Finished, one goes into the sandbox whole.
    let mut last = held.pop().unwrap();
    tokio::io::AsyncWriteExt::write_all(&mut last, &[b'x'; 10])
        .await
        .unwrap();
    let (status, body) = crate::support::answer_of(&mut last).await;
    assert_eq!(status, 200, "{body}");
    drop(held);
    let stat = data(&server, &id, 49983, "/filesystem.Filesystem/Stat")
        .header("X-Access-Token", &token)
        .json(&json!({"path": "/home/user/big3.bin"}))
        .send()
        .await
        .unwrap();
    let stat: Value = stat.json().await.unwrap();
    assert_eq!(stat["entry"]["size"], SIZE.to_string(), "{stat}");
    // More than the sandbox's disk is refused as it streams.
    let over = data(&server, &id, 49983, "/files")
        .query(&[("path", "/home/user/over.bin")])
        .header("X-Access-Token", &token)
        .header("Content-Type", "application/octet-stream")
        .body(vec![0u8; 65 * 1024 * 1024])
        .send()
        .await;
    // Refused before its end: the answer, or a connection the server
    // stopped reading.
    if let Ok(over) = over {
        let status = over.status();
        assert_eq!(status, 413, "{}", over.text().await.unwrap_or_default());
    }
}
