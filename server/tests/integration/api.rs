//! The `/v1` API as a product: credentials, per-key isolation, limits, the
//! OpenAPI document, metrics, `/mcp`, request hygiene, and the pages'
//! sign-in when they ask for a key.

use runcell_server::config::AuthMode;
use serde_json::{Value, json};

use crate::support::{TestServer, bearer, http, http_as, new_v1_session};

const RUN: &str = "/v1/code_interpreter/run";
const SESSIONS: &str = "/v1/code_interpreter/sessions";

fn run_body(code: &str) -> Value {
    json!({ "code": code, "language": "python" })
}

/// An MCP client's first message.
fn initialize() -> Value {
    json!({
        "jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-03-26", "capabilities": {},
                   "clientInfo": {"name": "test", "version": "1"}}
    })
}

/// `POST /v1/code_interpreter/run` of a Python program as `client`.
async fn run(client: &reqwest::Client, server: &TestServer, code: &str) -> reqwest::Response {
    client
        .post(server.url(RUN))
        .json(&run_body(code))
        .send()
        .await
        .unwrap()
}

/// A JSON-RPC message to `/mcp` as `client`, in MCP session `session`.
async fn mcp(
    client: &reqwest::Client,
    server: &TestServer,
    session: Option<&str>,
    message: &Value,
) -> reqwest::Response {
    let mut request = client
        .post(server.url("/mcp"))
        .header("accept", "application/json, text/event-stream")
        .json(message);
    if let Some(session) = session {
        request = request.header("mcp-session-id", session);
    }
    request.send().await.unwrap()
}

async fn error_of(response: reqwest::Response) -> (u16, String, reqwest::header::HeaderMap) {
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    let body: Value = response.json().await.unwrap();
    assert!(body["error"]["message"].is_string(), "{body}");
    (
        status,
        body["error"]["code"].as_str().unwrap().to_string(),
        headers,
    )
}

/// A token signed with the server's own secret, for `key_id`, expiring at `exp`.
fn forged(server: &TestServer, secret: Option<&[u8]>, sub: &str, exp: u64) -> String {
    let stored = std::fs::read(server.data_dir().join("auth-secret")).unwrap();
    let secret = secret.unwrap_or(&stored);
    let now = runcell_core::clock::now_ms() / 1000;
    jsonwebtoken::encode(
        &jsonwebtoken::Header::new(jsonwebtoken::Algorithm::HS256),
        &json!({"sub": sub, "iss": "runcell", "aud": "runcell-api", "iat": now, "exp": exp}),
        &jsonwebtoken::EncodingKey::from_secret(secret),
    )
    .unwrap()
}

async fn key_id_of(server: &TestServer, token: &str) -> String {
    let claims = token.split('.').nth(1).unwrap();
    use base64::Engine;
    let claims = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(claims)
        .unwrap();
    let claims: Value = serde_json::from_slice(&claims).unwrap();
    let _ = server;
    claims["sub"].as_str().unwrap().to_string()
}

#[tokio::test]
async fn every_v1_route_needs_a_valid_token_of_a_live_key() {
    let server = TestServer::start().await;
    let anonymous = http();
    for (method, path) in [
        ("POST", RUN),
        ("GET", SESSIONS),
        ("POST", SESSIONS),
        ("GET", "/v1/code_interpreter/sessions/abc"),
        ("DELETE", "/v1/code_interpreter/sessions/abc"),
        ("GET", "/v1/code_interpreter/sessions/abc/files"),
        ("PUT", "/v1/code_interpreter/sessions/abc/files?path=a"),
        ("DELETE", "/v1/code_interpreter/sessions/abc/files?path=a"),
    ] {
        let request = anonymous
            .request(method.parse().unwrap(), server.url(path))
            .json(&run_body("print(1)"));
        let (status, code, headers) = error_of(request.send().await.unwrap()).await;
        assert_eq!(
            (status, code.as_str()),
            (401, "unauthorized"),
            "{method} {path}"
        );
        assert!(
            headers["www-authenticate"]
                .to_str()
                .unwrap()
                .starts_with("Bearer")
        );
    }

    let key = server.api_key("ci").await;
    let token = server.token_for(&key).await;
    let ok = bearer(&token)
        .get(server.url(SESSIONS))
        .send()
        .await
        .unwrap();
    assert_eq!(ok.status(), 200);
    // The key itself works as a bearer credential too (for static headers).
    let ok = bearer(&key).get(server.url(SESSIONS)).send().await.unwrap();
    assert_eq!(ok.status(), 200);

    let key_id = key_id_of(&server, &token).await;
    let now = runcell_core::clock::now_ms() / 1000;
    let cases = [
        ("not a token".to_string(), "garbage"),
        (format!("{token}x"), "a changed signature"),
        (
            forged(
                &server,
                Some(b"another secret of thirty-two bytes!!"),
                &key_id,
                now + 600,
            ),
            "another secret",
        ),
        (forged(&server, None, &key_id, now - 600), "expired"),
        (
            forged(&server, None, "no-such-key", now + 600),
            "an unknown key id",
        ),
        (format!("rc_{}", "A".repeat(43)), "an unknown key"),
    ];
    for (credential, what) in cases {
        let response = bearer(&credential)
            .get(server.url(SESSIONS))
            .send()
            .await
            .unwrap();
        let (status, _, _) = error_of(response).await;
        assert_eq!(status, 401, "{what}");
    }
    let expired = bearer(&forged(&server, None, &key_id, now - 600))
        .get(server.url(SESSIONS))
        .send()
        .await
        .unwrap();
    let body: Value = expired.json().await.unwrap();
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("expired"),
        "{body}"
    );
    // The server's own secret and a live key: accepted.
    let fresh = bearer(&forged(&server, None, &key_id, now + 600))
        .get(server.url(SESSIONS))
        .send()
        .await
        .unwrap();
    assert_eq!(fresh.status(), 200);
    let basic = reqwest::Client::new()
        .get(server.url(SESSIONS))
        .header("authorization", format!("Basic {token}"))
        .send()
        .await
        .unwrap();
    assert_eq!(basic.status(), 401);

    // Revoking the key stops its tokens on their next use.
    let store = runcell_store::SqliteStore::open_in(&server.data_dir())
        .await
        .unwrap();
    use runcell_store::KeyStore;
    assert!(
        store
            .revoke_key("ci", runcell_core::clock::now_ms())
            .await
            .unwrap()
    );
    store.close().await;
    let (status, code, _) = error_of(
        bearer(&token)
            .get(server.url(SESSIONS))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!((status, code.as_str()), (401, "unauthorized"));
    let (status, _, _) =
        error_of(bearer(&key).get(server.url(SESSIONS)).send().await.unwrap()).await;
    assert_eq!(status, 401);
}

#[tokio::test]
async fn the_token_endpoint_answers_keys_with_tokens_and_everything_else_with_4xx() {
    let server = TestServer::start().await;
    let key = server.api_key("ci").await;
    let client = reqwest::Client::new();
    let response = client
        .post(server.url("/v1/auth/token"))
        .json(&json!({ "api_key": key }))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["token_type"], "bearer");
    assert_eq!(body["expires_in"], 3600);
    assert_eq!(body["access_token"].as_str().unwrap().split('.').count(), 3);

    for (body, status) in [
        (json!({ "api_key": "rc_nope" }), 401),
        (json!({ "api_key": format!("rc_{}", "B".repeat(43)) }), 401),
        (json!({ "key": key }), 400),
        (json!({ "api_key": key, "extra": 1 }), 400),
        (json!([1, 2]), 400),
    ] {
        let response = client
            .post(server.url("/v1/auth/token"))
            .json(&body)
            .send()
            .await
            .unwrap();
        assert_eq!(error_of(response).await.0, status, "{body}");
    }
    let response = client
        .post(server.url("/v1/auth/token"))
        .header("content-type", "application/json")
        .body("{not json")
        .send()
        .await
        .unwrap();
    assert_eq!(error_of(response).await.0, 400);
}

#[tokio::test]
async fn a_key_sees_only_its_own_sessions() {
    let server = TestServer::start().await;
    let alice = server.api().await;
    let bob = server.api().await;
    let id = new_v1_session(&alice, &server).await;
    let one = format!("{SESSIONS}/{id}");

    let listed: Value = bob
        .get(server.url(SESSIONS))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(listed["sessions"], json!([]));
    for response in [
        bob.get(server.url(&one)).send().await.unwrap(),
        bob.delete(server.url(&one)).send().await.unwrap(),
        bob.post(server.url(RUN))
            .json(&json!({"code": "print(1)", "language": "python", "session_id": id}))
            .send()
            .await
            .unwrap(),
    ] {
        assert_eq!(error_of(response).await.1, "not_found");
    }
    // Still alice's, untouched.
    let got: Value = alice
        .get(server.url(&one))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(got["session_id"], id.as_str());
    let listed: Value = alice
        .get(server.url(SESSIONS))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(listed["sessions"].as_array().unwrap().len(), 1);
    assert_eq!(
        alice
            .delete(server.url(&one))
            .send()
            .await
            .unwrap()
            .status(),
        204
    );
}

#[tokio::test]
async fn runs_past_the_rate_get_429_with_retry_after() {
    let server = TestServer::start_configured(|config| {
        config.auth.runs_per_minute = 1;
        config.auth.run_burst = 2;
    })
    .await;
    let api = server.api().await;
    let mut remaining = Vec::new();
    for _ in 0..2 {
        let response = run(&api, &server, "print(1)").await;
        assert_eq!(response.status(), 200);
        assert_eq!(response.headers()["x-ratelimit-limit"], "2");
        remaining.push(
            response.headers()["x-ratelimit-remaining"]
                .to_str()
                .unwrap()
                .to_string(),
        );
    }
    assert_eq!(remaining, ["1", "0"]);
    let response = run(&api, &server, "print(1)").await;
    let (status, code, headers) = error_of(response).await;
    assert_eq!((status, code.as_str()), (429, "rate_limited"));
    let retry: u64 = headers["retry-after"].to_str().unwrap().parse().unwrap();
    // One run a minute comes back.
    assert!((1..=60).contains(&retry), "{retry}");
    assert_eq!(headers["x-ratelimit-limit"], "2");
    assert_eq!(headers["x-ratelimit-remaining"], "0");
    // Another key has its own budget.
    let other = server.api().await;
    let response = run(&other, &server, "print(1)").await;
    assert_eq!(response.status(), 200);
}

#[tokio::test]
async fn runs_under_way_and_open_sessions_are_capped_per_key() {
    let server = TestServer::start_configured(|config| {
        config.auth.max_concurrent_runs = 1;
        config.auth.max_live_sessions = 1;
    })
    .await;
    let api = server.api().await;
    // A streamed run is under way until its last line.
    let mut slow = api
        .post(server.url(RUN))
        .header("accept", "application/x-ndjson")
        .json(&run_body(
            "import time\nprint('started', flush=True)\ntime.sleep(3)",
        ))
        .send()
        .await
        .unwrap();
    assert_eq!(slow.status(), 200);
    let first = slow.chunk().await.unwrap().unwrap();
    assert!(String::from_utf8_lossy(&first).contains("started"));
    let response = run(&api, &server, "print(2)").await;
    let (status, _, headers) = error_of(response).await;
    assert_eq!(status, 429);
    assert_eq!(headers["retry-after"], "1");
    assert_eq!(headers["x-ratelimit-limit"], "1");
    // Another key is not held up.
    let other = server.api().await;
    assert_eq!(run(&other, &server, "print(3)").await.status(), 200);
    while slow.chunk().await.unwrap().is_some() {}
    assert_eq!(
        run(&api, &server, "print(4)").await.status(),
        200,
        "the slot is free once the run ended"
    );

    let created = api
        .post(server.url(SESSIONS))
        .json(&json!({}))
        .send()
        .await
        .unwrap();
    assert_eq!(created.status(), 201);
    let (status, code, headers) = error_of(
        api.post(server.url(SESSIONS))
            .json(&json!({}))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!((status, code.as_str()), (429, "rate_limited"));
    assert!(headers.contains_key("retry-after"));
}

#[tokio::test]
async fn the_openapi_document_covers_every_v1_route_and_the_reference_page_shows_it() {
    let server = TestServer::start().await;
    let doc: Value = http()
        .get(server.url("/v1/openapi.json"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert!(doc["openapi"].as_str().unwrap().starts_with("3."));
    let paths = doc["paths"].as_object().unwrap();
    for (path, methods) in [
        ("/v1/auth/token", &["post"][..]),
        (RUN, &["post"][..]),
        (SESSIONS, &["get", "post"][..]),
        ("/v1/code_interpreter/sessions/{id}", &["get", "delete"][..]),
        (
            "/v1/code_interpreter/sessions/{id}/files",
            &["get", "put", "delete"][..],
        ),
    ] {
        for method in methods {
            let operation = &paths[path][*method];
            assert!(operation.is_object(), "{method} {path} is documented");
            let responses = operation["responses"].as_object().unwrap();
            if path != "/v1/auth/token" {
                assert!(
                    responses.contains_key("401"),
                    "{method} {path} documents 401"
                );
                assert_eq!(operation["security"], json!([{"bearer": []}]));
            }
        }
    }
    let schemas = doc["components"]["schemas"].as_object().unwrap();
    for name in [
        "RunBody",
        "RunOutcome",
        "SessionInfo",
        "ErrorBody",
        "TokenRequest",
        "TokenResponse",
        "Language",
    ] {
        assert!(schemas.contains_key(name), "schema {name}");
    }
    assert_eq!(
        doc["components"]["securitySchemes"]["bearer"]["scheme"],
        "bearer"
    );

    // The reference page: server-rendered from the same document, every
    // operation under its own heading, and no script.
    let docs = http().get(server.url("/v1/docs/")).send().await.unwrap();
    assert_eq!(docs.status(), 200);
    assert_eq!(
        docs.headers()[reqwest::header::CONTENT_TYPE],
        "text/html; charset=utf-8"
    );
    let html = docs.text().await.unwrap();
    assert!(html.starts_with("<!DOCTYPE html>"), "{html}");
    // Paths may wrap after a slash: read them without the break points.
    let text = html.replace("<wbr>", "");
    for (path, item) in paths {
        for method in item.as_object().unwrap().keys() {
            let heading = format!(
                "{}</span> <code class=\"path\">{path}</code>",
                method.to_uppercase()
            );
            assert!(text.contains(&heading), "{method} {path} in {html}");
        }
    }
    for name in schemas.keys() {
        assert!(html.contains(&format!("<code>{name}</code>")), "{name}");
    }
    assert!(html.contains("href=\"/v1/openapi.json\""));
    assert!(!html.contains("<script"), "{html}");
    // A page read whole: compressed when asked for.
    let compressed = http()
        .get(server.url("/v1/docs/"))
        .header("accept-encoding", "gzip")
        .send()
        .await
        .unwrap();
    assert_eq!(compressed.headers()["content-encoding"], "gzip");
    // The address without the slash leads to it.
    let unfollowed = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let bare = unfollowed.get(server.url("/v1/docs")).send().await.unwrap();
    assert!(bare.status().is_redirection(), "{}", bare.status());
    assert_eq!(bare.headers()[reqwest::header::LOCATION], "/v1/docs/");
    let unknown = http().get(server.url("/v1/nope")).send().await.unwrap();
    assert_eq!(error_of(unknown).await.1, "not_found");
    let wrong = http().put(server.url(RUN)).send().await.unwrap();
    assert_eq!(error_of(wrong).await.0, 405);
}

#[tokio::test]
async fn metrics_count_runs_sessions_and_sockets() {
    let server = TestServer::start().await;
    let api = server.api().await;
    let response = api
        .post(server.url(RUN))
        .json(&json!({"code": "echo hi", "language": "bash"}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let session = server.new_session().await;
    let _socket = server.join(&session).await;
    // A notebook turn asks the (scripted) model.
    let turn = http()
        .post(server.url(&format!("/api/sessions/{session}/ask")))
        .json(&json!({"text": "print(6 * 7)"}))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(turn.contains("turn_finished"), "{turn}");
    let text = http()
        .get(server.url("/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    for series in [
        "runcell_runs_total{language=\"bash\",backend=\"jail\",outcome=\"ok\"}",
        "runcell_run_duration_seconds_bucket{language=\"bash\",backend=\"jail\"",
        "runcell_sandbox_pool_size",
        "runcell_sandbox_sessions",
        "runcell_notebook_sessions",
        "runcell_websocket_connections 1",
        "runcell_llm_requests_total{backend=\"scripted\",outcome=\"ok\"}",
        "runcell_llm_tokens_total{backend=\"scripted\",kind=\"completion\"}",
        "runcell_llm_time_to_first_token_seconds_bucket{backend=\"scripted\"",
        "runcell_api_requests_total{route=\"/v1/code_interpreter/run\",status=\"200\"}",
    ] {
        assert!(text.contains(series), "{series} in\n{text}");
    }
}

#[tokio::test]
async fn the_mcp_endpoint_needs_credentials_and_speaks_json_rpc() {
    let server = TestServer::start().await;
    let initialize = initialize();
    let refused = http()
        .post(server.url("/mcp"))
        .header("accept", "application/json, text/event-stream")
        .json(&initialize)
        .send()
        .await
        .unwrap();
    assert_eq!(error_of(refused).await.0, 401);
    let api = server.api().await;
    let response = mcp(&api, &server, None, &initialize).await;
    assert_eq!(response.status(), 200);
    assert!(response.headers().contains_key("mcp-session-id"));
    let text = response.text().await.unwrap();
    assert!(text.contains("\"tools\""), "{text}");
}

#[tokio::test]
async fn an_mcp_session_belongs_to_the_key_that_opened_it() {
    let server = TestServer::start().await;
    let initialize = initialize();
    let alice = server.api().await;
    let opened = mcp(&alice, &server, None, &initialize).await;
    let id = opened.headers()["mcp-session-id"]
        .to_str()
        .unwrap()
        .to_string();
    let bob = server.api().await;
    let list = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"});
    let refused = mcp(&bob, &server, Some(&id), &list).await;
    assert_eq!(error_of(refused).await.0, 404);
    let closed = bob
        .delete(server.url("/mcp"))
        .header("mcp-session-id", &id)
        .send()
        .await
        .unwrap();
    assert_eq!(closed.status(), 404);
    let closed = alice
        .delete(server.url("/mcp"))
        .header("mcp-session-id", &id)
        .send()
        .await
        .unwrap();
    // 200, as the MCP SDKs expect of a closed session (rmcp says 202).
    assert_eq!(closed.status(), 200);
}

#[tokio::test]
async fn sessions_opened_at_once_cannot_pass_the_cap_together() {
    let server = TestServer::start_configured(|config| config.auth.max_live_sessions = 2).await;
    let api = server.api().await;
    let attempts = (0..6).map(|_| {
        let api = api.clone();
        let url = server.url(SESSIONS);
        async move {
            api.post(url)
                .json(&json!({}))
                .send()
                .await
                .unwrap()
                .status()
                .as_u16()
        }
    });
    let mut statuses = futures::future::join_all(attempts).await;
    statuses.sort_unstable();
    assert_eq!(statuses, [201, 201, 429, 429, 429, 429]);
}

#[tokio::test]
async fn responses_carry_security_headers_and_bodies_are_capped() {
    let server = TestServer::start().await;
    for path in ["/", "/v1/openapi.json", "/healthz"] {
        let response = http().get(server.url(path)).send().await.unwrap();
        let headers = response.headers();
        assert_eq!(headers["x-content-type-options"], "nosniff", "{path}");
        assert_eq!(headers["x-frame-options"], "DENY", "{path}");
        assert_eq!(headers["referrer-policy"], "no-referrer", "{path}");
        assert!(
            headers["content-security-policy"]
                .to_str()
                .unwrap()
                .contains("frame-ancestors 'none'")
        );
    }
    let api = server.api().await;
    let huge = json!({"code": "x".repeat(9 * 1024 * 1024), "language": "python"});
    let response = api.post(server.url(RUN)).json(&huge).send().await.unwrap();
    assert_eq!(error_of(response).await.0, 413);
    // CORS is closed by default: no preflight succeeds.
    let preflight = http()
        .request(reqwest::Method::OPTIONS, server.url(RUN))
        .header("origin", "https://elsewhere.example")
        .header("access-control-request-method", "POST")
        .send()
        .await
        .unwrap();
    assert!(
        !preflight
            .headers()
            .contains_key("access-control-allow-origin")
    );
}

#[tokio::test]
async fn configured_origins_may_call_the_api() {
    let server = TestServer::start_configured(|config| {
        config.http.cors_origins = vec!["https://app.example".into()];
    })
    .await;
    let preflight = http()
        .request(reqwest::Method::OPTIONS, server.url(RUN))
        .header("origin", "https://app.example")
        .header("access-control-request-method", "POST")
        .header(
            "access-control-request-headers",
            "authorization, content-type",
        )
        .send()
        .await
        .unwrap();
    assert_eq!(
        preflight.headers()["access-control-allow-origin"],
        "https://app.example"
    );
    let other = http()
        .request(reqwest::Method::OPTIONS, server.url(RUN))
        .header("origin", "https://evil.example")
        .header("access-control-request-method", "POST")
        .send()
        .await
        .unwrap();
    assert!(!other.headers().contains_key("access-control-allow-origin"));
}

#[tokio::test]
async fn when_required_the_pages_ask_for_a_key() {
    let server = TestServer::start_configured(|config| config.auth.mode = AuthMode::Required).await;
    let stranger = http_as(None);
    let response = stranger.get(server.url("/")).send().await.unwrap();
    assert_eq!(response.status(), 303);
    assert_eq!(response.headers()["location"], "/login?next=/");
    let response = http()
        .post(server.url("/api/sessions"))
        .send()
        .await
        .unwrap();
    assert_eq!(error_of(response).await.0, 401);
    let form = stranger
        .get(server.url("/login?next=/"))
        .send()
        .await
        .unwrap();
    assert_eq!(form.status(), 200);
    assert!(form.text().await.unwrap().contains("name=\"api_key\""));

    let wrong = stranger
        .post(server.url("/login"))
        .form(&[("api_key", "rc_wrong"), ("next", "/")])
        .send()
        .await
        .unwrap();
    assert_eq!(wrong.status(), 401);
    assert!(wrong.text().await.unwrap().contains("unknown API key"));

    let key = server.api_key("me").await;
    let signed = stranger
        .post(server.url("/login"))
        .form(&[("api_key", key.as_str()), ("next", "//evil.example/")])
        .send()
        .await
        .unwrap();
    assert_eq!(signed.status(), 303);
    assert_eq!(signed.headers()["location"], "/", "only local paths");
    let cookie = signed.headers()["set-cookie"].to_str().unwrap();
    assert!(
        cookie.contains("HttpOnly") && cookie.contains("SameSite=Lax"),
        "{cookie}"
    );
    let signin = cookie.split(';').next().unwrap().to_string();
    let signed_in = format!(
        "{signin}; {}",
        crate::support::cookie_of(crate::support::OWNER)
    );

    let page = http()
        .get(server.url("/"))
        .header("cookie", &signed_in)
        .send()
        .await
        .unwrap();
    assert_eq!(page.status(), 200);
    let page = http()
        .post(server.url("/sessions"))
        .header("cookie", &signed_in)
        .send()
        .await
        .unwrap();
    assert_eq!(page.status(), 303);
    assert!(
        page.headers()["location"]
            .to_str()
            .unwrap()
            .starts_with("/sessions/")
    );
    // Dot segments do not sneak past the gate to the page fallback.
    let session = http()
        .post(server.url("/api/sessions"))
        .header("cookie", &signed_in)
        .send()
        .await
        .unwrap();
    assert_eq!(session.status(), 201);
    let id = session.json::<Value>().await.unwrap()["id"]
        .as_str()
        .unwrap()
        .to_string();
    for path in [
        format!("/x/%2e%2e/sessions/{id}"),
        format!("/%2E/sessions/{id}"),
        format!("/s/x/%2e%2e/%2e%2e/sessions/{id}"),
    ] {
        let response = http().get(server.url(&path)).send().await.unwrap();
        assert_eq!(response.status(), 303, "{path}");
        assert!(!response.text().await.unwrap().contains(&id), "{path}");
    }
    // An API token is not a page sign-in.
    let token = server.token_for(&key).await;
    let response = http()
        .get(server.url("/"))
        .header("cookie", format!("runcell_signin={token}"))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 303);
    assert!(
        response.headers()["location"]
            .to_str()
            .unwrap()
            .starts_with("/login")
    );
}

/// The display flood of point 3 of the review, through `/v1` in a session:
/// JSON and NDJSON answers stay within the output limit (plus the events'
/// framing), say what was dropped, and the session goes on.
#[tokio::test]
async fn a_display_flood_through_v1_comes_back_bounded() {
    let server = TestServer::start().await;
    let client = server.api().await;
    let id = new_v1_session(&client, &server).await;
    let flood = "from IPython.display import display, HTML\nx = 'x' * 2_000_000\nfor _ in range(40):\n    display(HTML(x))";
    let body = json!({"code": flood, "language": "python", "session_id": id});
    let budget = runcell_sandbox::Limits::default().output_bytes;
    let slack = 64 * 1024;

    let response = client
        .post(server.url(RUN))
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let bytes = response.bytes().await.unwrap();
    assert!(bytes.len() <= budget + slack, "{} bytes", bytes.len());
    let outcome: Value = serde_json::from_slice(&bytes).unwrap();
    assert_eq!(outcome["error"]["name"], "OutputLimit", "{outcome}");
    assert!(
        outcome["error"]["value"]
            .as_str()
            .unwrap()
            .contains("a display of 2000"),
        "{outcome}"
    );
    assert_eq!(outcome["truncated"], true);

    // Events and the summary repeat each other: twice the budget at most.
    let response = client
        .post(server.url(RUN))
        .header("accept", "application/x-ndjson")
        .json(&body)
        .send()
        .await
        .unwrap();
    let bytes = response.bytes().await.unwrap();
    assert!(bytes.len() <= 2 * (budget + slack), "{} bytes", bytes.len());
    let last: Value = serde_json::from_slice(
        bytes
            .trim_ascii_end()
            .rsplit(|b| *b == b'\n')
            .next()
            .unwrap(),
    )
    .unwrap();
    assert_eq!(last["type"], "summary");
    assert_eq!(last["error"]["name"], "OutputLimit");
    // A kernel that did not come back from the interrupt within its grace (a
    // loaded machine) was replaced, and the run says so.
    let replaced = last["error"]["value"]
        .as_str()
        .unwrap_or_default()
        .contains("the kernel was restarted");

    let after: Value = client
        .post(server.url(RUN))
        .json(&json!({"code": "print(len(x))", "language": "python", "session_id": id}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    if replaced {
        assert_eq!(after["error"]["name"], "NameError", "{after}");
    } else {
        assert_eq!(after["stdout"], "2000000\n", "{after}");
    }
}

#[tokio::test]
async fn when_required_the_metrics_ask_for_a_key_too() {
    let server = TestServer::start_configured(|config| config.auth.mode = AuthMode::Required).await;
    let stranger = reqwest::Client::new();
    let response = stranger.get(server.url("/metrics")).send().await.unwrap();
    assert_eq!(error_of(response).await.0, 401);
    let response = stranger
        .get(server.url("/metrics"))
        .header("authorization", "Bearer rc_wrong")
        .send()
        .await
        .unwrap();
    assert_eq!(error_of(response).await.0, 401);
    let key = server.api_key("scraper").await;
    let token = server.token_for(&key).await;
    for credential in [&key, &token] {
        let response = stranger
            .get(server.url("/metrics"))
            .header("authorization", format!("Bearer {credential}"))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200);
        assert!(response.text().await.unwrap().contains("runcell_"));
    }
    // A page sign-in will do as well.
    let signed = http_as(None)
        .post(server.url("/login"))
        .form(&[("api_key", key.as_str()), ("next", "/")])
        .send()
        .await
        .unwrap();
    let cookie = signed.headers()["set-cookie"].to_str().unwrap();
    let signin = cookie.split(';').next().unwrap().to_string();
    let response = stranger
        .get(server.url("/metrics"))
        .header("cookie", signin)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    // Open pages, open metrics (loopback by default).
    let open = TestServer::start().await;
    let response = stranger.get(open.url("/metrics")).send().await.unwrap();
    assert_eq!(response.status(), 200);
    assert!(
        response.headers().get("set-cookie").is_none(),
        "no owner for scrapers"
    );
}

/// Runs `print(...)` in a new notebook session of a fresh anonymous owner
/// (a client that dropped its cookie), sent through a proxy that says the
/// client is `client`; the run's NDJSON answer as text, which says
/// `ran {1000 + n}` if it ran.
async fn anonymous_run(server: &TestServer, n: u32, client: &str) -> String {
    let owner = format!("a4000000000000000000000000{n:06}");
    let page = crate::support::client_with(&[
        ("cookie", &crate::support::cookie_of(&owner)),
        ("x-forwarded-for", client),
    ]);
    let created = page.post(server.url("/api/sessions")).send().await.unwrap();
    assert_eq!(created.status(), 201);
    let id = created.json::<Value>().await.unwrap()["id"]
        .as_str()
        .unwrap()
        .to_string();
    let ran = page
        .post(server.url(&format!("/api/sessions/{id}/run")))
        .json(&json!({ "code": format!("print('ran', {n} + 1000)"), "language": "python" }))
        .send()
        .await
        .unwrap();
    assert_eq!(ran.status(), 200);
    ran.text().await.unwrap()
}

#[tokio::test]
async fn cookie_less_pages_cannot_take_the_sandbox_slots_a_key_needs() {
    let server = TestServer::start_configured(|config| {
        config.sandbox.max_sessions = 4;
        config.sandbox.anonymous_share_percent = 50;
        config.sandbox.anonymous_sessions_per_client = 4;
    })
    .await;
    let mut refused = 0;
    for n in 0..4 {
        let answer = anonymous_run(&server, n, "198.51.100.1").await;
        // Refused by the anonymous share's cap, as a typed event.
        if answer.contains(r#""kind":"kernel_refused","#)
            && answer.contains(r#""cap":"anonymous","held":2}"#)
        {
            refused += 1;
        } else {
            assert!(answer.contains(&format!("ran {}", n + 1000)), "{answer}");
        }
    }
    assert_eq!(refused, 2, "two of the four slots are the anonymous pages'");
    // The rest stay for keys.
    let api = server.api().await;
    for _ in 0..2 {
        let created = api
            .post(server.url(SESSIONS))
            .json(&json!({}))
            .send()
            .await
            .unwrap();
        assert_eq!(created.status(), 201);
    }
    let (status, code, headers) = error_of(
        api.post(server.url(SESSIONS))
            .json(&json!({}))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!((status, code.as_str()), (503, "unavailable"));
    assert!(headers.contains_key("retry-after"));
}

#[tokio::test]
async fn one_client_address_holds_a_few_of_the_anonymous_kernels() {
    let server = TestServer::start_configured(|config| {
        config.http.trust_forwarded = true;
        config.sandbox.max_sessions = 8;
        config.sandbox.anonymous_share_percent = 100;
        config.sandbox.anonymous_sessions_per_client = 2;
    })
    .await;
    for n in 0..2 {
        let answer = anonymous_run(&server, n, "203.0.113.7").await;
        assert!(answer.contains(&format!("ran {}", n + 1000)), "{answer}");
    }
    // A third owner from the same address, however many cookies it drops.
    let answer = anonymous_run(&server, 2, "203.0.113.7").await;
    assert!(
        answer.contains(r#""kind":"kernel_refused","#)
            && answer.contains(r#""cap":"client","held":2}"#),
        "{answer}"
    );
    assert!(!answer.contains("ran 1002"), "{answer}");
    // Another address has its own few; a proxy's chain is read from its end.
    let answer = anonymous_run(&server, 3, "203.0.113.7, 203.0.113.8").await;
    assert!(answer.contains("ran 1003"), "{answer}");
}

/// Opens an MCP session as `client`: its id, or the refusal's status and
/// body.
pub(super) async fn open_mcp(
    client: &reqwest::Client,
    server: &TestServer,
) -> Result<String, (u16, Value)> {
    let response = mcp(client, server, None, &initialize()).await;
    match response.headers().get("mcp-session-id") {
        Some(id) if response.status() == 200 => Ok(id.to_str().unwrap().to_string()),
        _ => {
            let status = response.status().as_u16();
            Err((status, response.json().await.unwrap_or(Value::Null)))
        }
    }
}

/// The status `/mcp` answers a `tools/list` in MCP session `id` with.
async fn mcp_status(client: &reqwest::Client, server: &TestServer, id: &str) -> u16 {
    let list = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"});
    mcp(client, server, Some(id), &list).await.status().as_u16()
}

#[tokio::test]
async fn a_key_holds_a_bounded_number_of_mcp_sessions() {
    let server = TestServer::start_configured(|config| config.auth.mcp_sessions_per_key = 3).await;
    let api = server.api().await;
    let opens = (0..8).map(|_| open_mcp(&api, &server));
    let results = futures::future::join_all(opens).await;
    let opened: Vec<&String> = results.iter().filter_map(|r| r.as_ref().ok()).collect();
    assert_eq!(opened.len(), 3, "{results:?}");
    for refused in results.iter().filter_map(|r| r.as_ref().err()) {
        assert_eq!(refused.0, 429, "{refused:?}");
        assert_eq!(refused.1["jsonrpc"], "2.0");
        assert!(
            refused.1["error"]["message"]
                .as_str()
                .unwrap()
                .contains("MCP sessions"),
            "{refused:?}"
        );
    }
    // Another key has its own; one closed makes room.
    assert!(open_mcp(&server.api().await, &server).await.is_ok());
    let closed = api
        .delete(server.url("/mcp"))
        .header("mcp-session-id", opened[0].as_str())
        .send()
        .await
        .unwrap();
    assert!(closed.status().is_success(), "{}", closed.status());
    assert!(open_mcp(&api, &server).await.is_ok());
}

#[tokio::test]
async fn an_idle_mcp_session_is_closed_and_no_longer_counts() {
    let server = TestServer::start_configured(|config| {
        config.auth.mcp_sessions_per_key = 1;
        config.auth.mcp_session_idle_secs = 1;
    })
    .await;
    let api = server.api().await;
    let first = open_mcp(&api, &server).await.expect("a first session");
    assert_eq!(mcp_status(&api, &server, &first).await, 200);
    assert_eq!(open_mcp(&api, &server).await.unwrap_err().0, 429);
    // Left alone, it is closed, and its place is free again.
    let mut reopened = None;
    for _ in 0..80 {
        tokio::time::sleep(std::time::Duration::from_millis(250)).await;
        if let Ok(id) = open_mcp(&api, &server).await {
            reopened = Some(id);
            break;
        }
    }
    let second = reopened.expect("the idle session's place came back");
    assert_ne!(mcp_status(&api, &server, &first).await, 200);
    assert_eq!(mcp_status(&api, &server, &second).await, 200);
}

#[tokio::test]
async fn a_revoked_keys_mcp_session_is_closed_within_seconds() {
    let server = TestServer::start_configured(|config| config.auth.revocation_check_secs = 1).await;
    let key = server.api_key("leaving").await;
    let api = bearer(&key);
    let id = open_mcp(&api, &server).await.expect("a session");
    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    assert!(
        mcp(&api, &server, Some(&id), &initialized)
            .await
            .status()
            .is_success()
    );
    // The session's own stream, which a client keeps open to hear the
    // server: it ends when the session is closed.
    let stream = api
        .get(server.url("/mcp"))
        .header("accept", "text/event-stream")
        .header("mcp-session-id", &id)
        .send()
        .await
        .unwrap();
    assert_eq!(stream.status(), 200);

    server.revoke("leaving").await;
    assert!(
        super::support::ends_within(stream, std::time::Duration::from_secs(30)).await,
        "a revoked key's MCP session stayed open"
    );
}
