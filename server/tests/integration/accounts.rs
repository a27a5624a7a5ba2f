//! Accounts: people signing in with a real OpenID provider (oidc-provider
//! on loopback) or named by a trusted proxy, what they made before
//! signing in becoming theirs, answers that cannot be replayed, admins
//! disabling people (their page sockets, kernels, keys and MCP sessions
//! closed) and people's limits refused with 429; on SQLite and, where a
//! server is configured, PostgreSQL.

use std::collections::BTreeMap;
use std::time::Duration;

use futures::StreamExt;
use reqwest::StatusCode;
use reqwest::header::{COOKIE, LOCATION, SET_COOKIE};
use runcell_server::config::Config;
use runcell_store::scratch::ScratchDatabase;
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::http::HeaderValue;

use super::oidc_provider::{OidcProvider, sign_in_at};
use super::support::{TestServer, client_with};

const CLIENT_ID: &str = "runcell-tests";
const CLIENT_SECRET: &str = "a-secret-only-the-tests-know";
/// The header a trusted proxy names people in.
const USER_HEADER: &str = "x-forwarded-user";

/// A port nothing listens on now (for the provider, whose issuer the
/// server must know before either starts).
fn free_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().port()
}

/// A browser's cookies for the runcell server, by name.
#[derive(Default, Debug)]
struct Jar(BTreeMap<String, String>);

impl Jar {
    fn keep(&mut self, response: &reqwest::Response) {
        for value in response.headers().get_all(SET_COOKIE) {
            let Ok(cookie) = cookie::Cookie::parse(value.to_str().unwrap().to_string()) else {
                continue;
            };
            // The attempt cookie is sent to /auth/oidc only; the tests send
            // every cookie everywhere, which the server must not mind.
            if cookie.value().is_empty()
                || cookie
                    .max_age()
                    .is_some_and(|age| age <= time::Duration::ZERO)
            {
                self.0.remove(cookie.name());
            } else {
                self.0
                    .insert(cookie.name().to_string(), cookie.value().to_string());
            }
        }
    }

    fn header(&self) -> String {
        self.0
            .iter()
            .map(|(name, value)| format!("{name}={value}"))
            .collect::<Vec<_>>()
            .join("; ")
    }

    fn get(&self, name: &str) -> Option<&str> {
        self.0.get(name).map(String::as_str)
    }
}

/// A browser: no redirects followed, the jar sent by hand.
struct Browser {
    http: reqwest::Client,
    jar: Jar,
    origin: String,
}

impl Browser {
    fn new(server: &TestServer) -> Self {
        Self {
            http: client_with(&[]),
            jar: Jar::default(),
            origin: server.url(""),
        }
    }

    async fn get(&mut self, url: &str) -> reqwest::Response {
        let response = self
            .http
            .get(url)
            .header(COOKIE, self.jar.header())
            .send()
            .await
            .unwrap();
        self.jar.keep(&response);
        response
    }

    async fn post_form(&mut self, url: &str, form: &[(&str, &str)]) -> reqwest::Response {
        let response = self
            .http
            .post(url)
            .header(COOKIE, self.jar.header())
            .header("origin", self.origin.trim_end_matches('/'))
            .form(form)
            .send()
            .await
            .unwrap();
        self.jar.keep(&response);
        response
    }

    async fn post_json(&mut self, url: &str, body: &Value) -> reqwest::Response {
        let response = self
            .http
            .post(url)
            .header(COOKIE, self.jar.header())
            .header("origin", self.origin.trim_end_matches('/'))
            .json(body)
            .send()
            .await
            .unwrap();
        self.jar.keep(&response);
        response
    }
}

fn location(response: &reqwest::Response) -> String {
    response
        .headers()
        .get(LOCATION)
        .unwrap_or_else(|| panic!("no Location on a {}", response.status()))
        .to_str()
        .unwrap()
        .to_string()
}

/// The server, set up to sign people in at the provider on `port`.
async fn server_with_provider(port: u16, database_url: Option<&str>) -> TestServer {
    let issuer = format!("http://127.0.0.1:{port}");
    let database_url = database_url.map(str::to_string);
    TestServer::start_configured(move |config: &mut Config| {
        config.auth.oidc.issuer = issuer;
        config.auth.oidc.client_id = CLIENT_ID.into();
        config.auth.oidc.client_secret = CLIENT_SECRET.into();
        config.auth.oidc.name = "the test provider".into();
        config.auth.admins = vec!["alice@example.test".into()];
        if let Some(url) = database_url {
            config.database_url = url.into();
        }
    })
    .await
}

async fn provider_for(server: &TestServer, port: u16) -> OidcProvider {
    let callback = server.url("/auth/oidc/callback");
    let provider = OidcProvider::start_on(port, &[(CLIENT_ID, CLIENT_SECRET, &callback)]).await;
    assert_eq!(provider.issuer, format!("http://127.0.0.1:{port}"));
    provider
}

/// Starts a sign-in at the server: the provider's authorize URL.
async fn start_sign_in(browser: &mut Browser, server: &TestServer, next: &str) -> String {
    let started = browser
        .get(&server.url(&format!("/auth/oidc/start?next={next}")))
        .await;
    assert_eq!(started.status(), StatusCode::SEE_OTHER);
    assert!(
        browser.jar.get("runcell_oidc").is_some(),
        "the attempt is sealed in a cookie"
    );
    location(&started)
}

/// The sidebar's sessions of whoever `browser` is.
async fn listed(browser: &mut Browser, server: &TestServer) -> Vec<String> {
    let response = browser.get(&server.url("/api/sessions")).await;
    assert_eq!(response.status(), 200);
    let body: Value = response.json().await.unwrap();
    body["sessions"]
        .as_array()
        .unwrap_or_else(|| panic!("a list of sessions: {body}"))
        .iter()
        .map(|s| s["id"].as_str().unwrap().to_string())
        .collect()
}

/// A session of the browser's with one turn asked (the sidebar lists only
/// sessions with a question).
async fn asked_session(browser: &mut Browser, server: &TestServer) -> String {
    let created = browser
        .post_json(&server.url("/api/sessions"), &json!({}))
        .await;
    assert!(created.status().is_success(), "{}", created.status());
    let id = created.json::<Value>().await.unwrap()["id"]
        .as_str()
        .unwrap()
        .to_string();
    let asked = browser
        .post_json(
            &server.url(&format!("/api/sessions/{id}/ask")),
            &json!({"text": "print(6 * 7)"}),
        )
        .await;
    assert!(asked.status().is_success(), "{}", asked.status());
    // The NDJSON stream runs until the turn finishes.
    let _ = asked.bytes().await;
    id
}

async fn signs_in_and_keeps_what_was_made_before(database_url: Option<&str>) {
    let port = free_port();
    let server = server_with_provider(port, database_url).await;
    let _provider = provider_for(&server, port).await;
    let mut browser = Browser::new(&server);

    // Before signing in: an anonymous notebook, and the offer to sign in.
    let before = asked_session(&mut browser, &server).await;
    let anonymous = browser.jar.get("runcell_owner").unwrap().to_string();
    let login = browser.get(&server.url("/login")).await;
    let login = login.text().await.unwrap();
    assert!(login.contains("Sign in with the test provider"), "{login}");

    // Through the provider's own login form.
    let authorize = start_sign_in(&mut browser, &server, "/somewhere").await;
    assert!(authorize.starts_with(&format!("http://127.0.0.1:{port}/")));
    assert!(
        authorize.contains("code_challenge_method=S256"),
        "PKCE: {authorize}"
    );
    let provider_browser = client_with(&[]);
    let callback = sign_in_at(&provider_browser, &authorize, "alice").await;
    let answered = browser.get(&callback).await;
    assert_eq!(
        answered.status(),
        StatusCode::SEE_OTHER,
        "{}",
        answered.text().await.unwrap()
    );
    assert_eq!(location(&answered), "/somewhere");
    assert!(browser.jar.get("runcell_signin").is_some());
    assert!(
        browser.jar.get("runcell_oidc").is_none(),
        "the attempt is spent"
    );
    assert_ne!(
        browser.jar.get("runcell_owner"),
        Some(anonymous.as_str()),
        "a fresh anonymous owner for after signing out"
    );

    // What this browser made before is the person's now, and not the
    // anonymous owner's any more.
    assert_eq!(listed(&mut browser, &server).await, vec![before.clone()]);
    let mut stranger = Browser::new(&server);
    stranger
        .jar
        .0
        .insert("runcell_owner".into(), anonymous.clone());
    assert!(listed(&mut stranger, &server).await.is_empty());

    // The page says who is signed in; alice is an admin by the configuration.
    let page = browser
        .get(&server.url(&format!("/sessions/{before}")))
        .await;
    let page = page.text().await.unwrap();
    assert!(page.contains("Signed in as"), "the account menu");
    assert!(page.contains("Alice"));
    assert!(page.contains("href=\"/admin\""));
    let admin = browser.get(&server.url("/admin")).await;
    assert_eq!(admin.status(), 200);
    let admin = admin.text().await.unwrap();
    assert!(admin.contains("alice@example.test"));
    assert!(
        admin.contains("signed in with OpenID Connect"),
        "the audit log: {admin}"
    );

    // The same answer again is refused, even with the attempt's cookie.
    let mut replayer = Browser::new(&server);
    let authorize = start_sign_in(&mut replayer, &server, "/").await;
    let callback = sign_in_at(&provider_browser, &authorize, "mallory").await;
    let attempt = replayer.jar.get("runcell_oidc").unwrap().to_string();
    let first = replayer.get(&callback).await;
    assert_eq!(first.status(), StatusCode::SEE_OTHER);
    replayer.jar.0.insert("runcell_oidc".into(), attempt);
    replayer.jar.0.remove("runcell_signin");
    let again = replayer.get(&callback).await;
    assert_eq!(again.status(), StatusCode::BAD_REQUEST);
    assert!(again.text().await.unwrap().contains("already used"));
    assert!(replayer.jar.get("runcell_signin").is_none());

    // Another browser's answer (another attempt's state) is refused, and an
    // answer with no attempt at all.
    let mut first_browser = Browser::new(&server);
    let mut second_browser = Browser::new(&server);
    let _mine = start_sign_in(&mut first_browser, &server, "/").await;
    let theirs = start_sign_in(&mut second_browser, &server, "/").await;
    let their_callback = sign_in_at(&provider_browser, &theirs, "bob").await;
    let crossed = first_browser.get(&their_callback).await;
    assert_eq!(crossed.status(), StatusCode::BAD_REQUEST);
    assert!(first_browser.jar.get("runcell_signin").is_none());
    let mut cold = Browser::new(&server);
    let no_attempt = cold.get(&their_callback).await;
    assert_eq!(no_attempt.status(), StatusCode::BAD_REQUEST);
    // The provider's refusal (a person who said no) is said, not a sign-in.
    let refused = cold
        .get(&server.url("/auth/oidc/callback?error=access_denied&error_description=said+no"))
        .await;
    assert_eq!(refused.status(), StatusCode::UNAUTHORIZED);
    assert!(refused.text().await.unwrap().contains("said no"));

    // Signing out leaves the person's notebooks with the person.
    let out = browser.post_form(&server.url("/logout"), &[]).await;
    assert_eq!(out.status(), StatusCode::SEE_OTHER);
    assert!(browser.jar.get("runcell_signin").is_none());
    assert!(listed(&mut browser, &server).await.is_empty());
}

#[tokio::test]
async fn a_person_signs_in_at_the_provider_and_keeps_what_they_made_before() {
    signs_in_and_keeps_what_was_made_before(None).await;
}

#[tokio::test]
async fn a_person_signs_in_at_the_provider_on_postgres() {
    let Some(db) = ScratchDatabase::create("oidc").await else {
        return;
    };
    signs_in_and_keeps_what_was_made_before(Some(&db.url)).await;
    db.drop_now().await;
}

#[tokio::test]
async fn an_email_the_provider_does_not_vouch_for_makes_no_admin() {
    let port = free_port();
    let server = server_with_provider(port, None).await;
    let _provider = provider_for(&server, port).await;
    let provider_browser = client_with(&[]);
    // Mallory types alice's address at a provider that does not check it.
    let mut mallory = Browser::new(&server);
    let authorize = start_sign_in(&mut mallory, &server, "/").await;
    let callback = sign_in_at(&provider_browser, &authorize, "mallory+alice@example.test").await;
    assert_eq!(mallory.get(&callback).await.status(), StatusCode::SEE_OTHER);
    assert!(mallory.jar.get("runcell_signin").is_some(), "signed in");
    let refused = mallory.get(&server.url("/admin")).await;
    assert_eq!(refused.status(), StatusCode::FORBIDDEN);
    // Alice, whose address the provider vouches for, is the admin.
    let mut alice = Browser::new(&server);
    let authorize = start_sign_in(&mut alice, &server, "/").await;
    let callback = sign_in_at(&provider_browser, &authorize, "alice").await;
    assert_eq!(alice.get(&callback).await.status(), StatusCode::SEE_OTHER);
    let admin = alice.get(&server.url("/admin")).await;
    assert_eq!(admin.status(), 200);
    let admin = admin.text().await.unwrap();
    assert!(
        admin.contains("is now an admin on signing in: auth.admins names them"),
        "the list's role is in the audit log: {admin}"
    );
}

#[tokio::test]
async fn a_trusted_header_is_believed_from_the_proxy_address_only() {
    let server = TestServer::start_configured(|config| {
        config.auth.trusted_header = "X-Forwarded-User".into();
        config.auth.trusted_email_header = "X-Forwarded-Email".into();
        // The proxy is 127.0.0.2; the tests' own connections come from
        // 127.0.0.1.
        config.auth.trusted_proxies = vec!["127.0.0.2".into()];
    })
    .await;
    let proxy = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .local_address(std::net::IpAddr::from([127, 0, 0, 2]))
        .build()
        .unwrap();
    let direct = client_with(&[]);
    let page = |client: reqwest::Client| {
        let url = server.url("/account");
        async move {
            client
                .get(url)
                .header(USER_HEADER, "carol")
                .header("x-forwarded-email", "carol@example.test")
                .send()
                .await
                .unwrap()
        }
    };
    let through_proxy = page(proxy.clone()).await;
    assert_eq!(through_proxy.status(), 200);
    let text = through_proxy.text().await.unwrap();
    assert!(text.contains("carol@example.test"), "{text}");
    // The same header from anyone else is nobody: the account page sends
    // them to sign in.
    let forged = page(direct).await;
    assert_eq!(forged.status(), StatusCode::SEE_OTHER);
    assert!(location(&forged).starts_with("/login"));
    // Two values, or an empty one, name nobody even from the proxy.
    let doubled = proxy
        .get(server.url("/account"))
        .header(USER_HEADER, "carol")
        .header(USER_HEADER, "dave")
        .send()
        .await
        .unwrap();
    assert_eq!(doubled.status(), StatusCode::SEE_OTHER);
}

/// A server whose people are named by the trusted header from 127.0.0.1
/// (the tests' own address): `boss` is an admin.
async fn server_with_header(
    database_url: Option<&str>,
    change: impl FnOnce(&mut Config),
) -> TestServer {
    let database_url = database_url.map(str::to_string);
    TestServer::start_configured(move |config: &mut Config| {
        config.auth.trusted_header = "X-Forwarded-User".into();
        config.auth.trusted_proxies = vec!["127.0.0.1".into()];
        config.auth.admins = vec!["boss".into()];
        config.auth.revocation_check_secs = 1;
        if let Some(url) = database_url {
            config.database_url = url.into();
        }
        change(config);
    })
    .await
}

/// A browser that a trusted proxy names `who`.
fn named(server: &TestServer, who: &str) -> Browser {
    Browser {
        http: client_with(&[(USER_HEADER, who)]),
        jar: Jar::default(),
        origin: server.url(""),
    }
}

/// The account id of `name` on the admin page.
async fn account_id(admin: &mut Browser, server: &TestServer, name: &str) -> String {
    let page = admin.get(&server.url("/admin")).await.text().await.unwrap();
    let row = page
        .lines()
        .find(|line| line.contains(&format!(">{name}</a>")))
        .unwrap_or_else(|| panic!("{name} on the admin page: {page}"));
    let start = row.find("/admin/users/").unwrap() + "/admin/users/".len();
    row[start..].split('"').next().unwrap().to_string()
}

async fn disabling_closes_everything(database_url: Option<&str>) {
    let server = server_with_header(database_url, |_| {}).await;
    let mut boss = named(&server, "boss");
    let mut worker = named(&server, "worker");

    // The worker's notebook with a live kernel, its page's socket, a key
    // and an MCP session opened with it.
    let session = asked_session(&mut worker, &server).await;
    let mut request = server
        .ws_url(&format!("/ws/sessions/{session}?after=0"))
        .into_client_request()
        .unwrap();
    let headers = request.headers_mut();
    headers.insert(
        "sec-websocket-protocol",
        HeaderValue::from_static(app::protocol::SUBPROTOCOL),
    );
    headers.insert(USER_HEADER, HeaderValue::from_static("worker"));
    headers.insert(
        "origin",
        HeaderValue::from_str(server.url("").trim_end_matches('/')).unwrap(),
    );
    let (mut socket, _) = tokio_tungstenite::connect_async(request).await.unwrap();
    let made = worker
        .post_form(&server.url("/account/keys"), &[("name", "laptop")])
        .await;
    assert_eq!(made.status(), 200);
    let made = made.text().await.unwrap();
    let key = made
        .split("<code>")
        .nth(1)
        .and_then(|rest| rest.split("</code>").next())
        .filter(|key| key.starts_with("rc_"))
        .unwrap_or_else(|| panic!("the new key on its page: {made}"))
        .to_string();
    let api = super::support::bearer(&key);
    let run = api
        .post(server.url("/v1/code_interpreter/run"))
        .json(&json!({"code": "print(1)", "language": "python"}))
        .send()
        .await
        .unwrap();
    assert_eq!(run.status(), 200, "the person's key works");
    let mcp_id = super::api::open_mcp(&api, &server)
        .await
        .expect("an MCP session with the person's key");
    let stream = api
        .get(server.url("/mcp"))
        .header("accept", "text/event-stream")
        .header("mcp-session-id", &mcp_id)
        .send()
        .await
        .unwrap();
    assert_eq!(stream.status(), 200);
    let live_before = live_kernels(&server).await;
    assert!(live_before >= 1, "the worker's notebook holds a kernel");

    // The admin disables them.
    let worker_id = account_id(&mut boss, &server, "worker").await;
    let disabled = boss
        .post_form(
            &server.url(&format!("/admin/users/{worker_id}/status")),
            &[("disabled", "true")],
        )
        .await;
    assert_eq!(disabled.status(), StatusCode::SEE_OTHER);

    // The page's socket is closed with the reason...
    let closed = tokio::time::timeout(Duration::from_secs(30), async {
        while let Some(frame) = socket.next().await {
            match frame {
                Ok(Message::Close(frame)) => return frame.map(|f| f.reason.to_string()),
                Ok(_) => continue,
                Err(_) => return None,
            }
        }
        None
    })
    .await
    .expect("the disabled person's socket stayed open");
    assert_eq!(closed.as_deref(), Some("this account has been disabled"));
    // ...their key no longer works, their MCP session ends...
    let refused = api
        .post(server.url("/v1/code_interpreter/run"))
        .json(&json!({"code": "print(1)", "language": "python"}))
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), 401);
    assert!(
        super::support::ends_within(stream, Duration::from_secs(30)).await,
        "the disabled person's MCP session stayed open"
    );
    // ...their kernel is closed...
    assert!(
        live_kernels(&server).await < live_before,
        "the kernel is closed"
    );
    // ...and the proxy's header no longer signs them in.
    let account = worker.get(&server.url("/account")).await;
    assert_eq!(account.status(), StatusCode::SEE_OTHER);
    let admin = boss.get(&server.url("/admin")).await.text().await.unwrap();
    assert!(
        admin.contains("boss disabled worker (1 key revoked)"),
        "{admin}"
    );

    // Enabled again, they sign in again (their revoked key stays revoked).
    let enabled = boss
        .post_form(
            &server.url(&format!("/admin/users/{worker_id}/status")),
            &[("disabled", "false")],
        )
        .await;
    assert_eq!(enabled.status(), StatusCode::SEE_OTHER);
    assert_eq!(worker.get(&server.url("/account")).await.status(), 200);
    // A member cannot reach the admin page.
    assert_eq!(
        worker.get(&server.url("/admin")).await.status(),
        StatusCode::FORBIDDEN
    );
}

/// Live sandbox sessions, as `/metrics` says.
async fn live_kernels(server: &TestServer) -> u64 {
    let text = client_with(&[])
        .get(server.url("/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    text.lines()
        .find(|line| line.starts_with("runcell_sandbox_sessions "))
        .and_then(|line| line.split_whitespace().nth(1))
        .and_then(|n| n.parse::<f64>().ok())
        .map_or(0, |n| n as u64)
}

#[tokio::test]
async fn a_disabled_persons_socket_kernel_keys_and_mcp_session_are_closed() {
    disabling_closes_everything(None).await;
}

#[tokio::test]
async fn a_disabled_person_is_closed_out_on_postgres() {
    let Some(db) = ScratchDatabase::create("disable").await else {
        return;
    };
    disabling_closes_everything(Some(&db.url)).await;
    db.drop_now().await;
}

#[tokio::test]
async fn a_persons_limits_are_refused_with_429_and_say_which() {
    limits_are_refused(None).await;
}

#[tokio::test]
async fn a_persons_limits_hold_on_postgres() {
    let Some(db) = ScratchDatabase::create("limits").await else {
        return;
    };
    limits_are_refused(Some(&db.url)).await;
    db.drop_now().await;
}

async fn limits_are_refused(database_url: Option<&str>) {
    let server = server_with_header(database_url, |config| {
        config.auth.user_limits.runs_per_minute = 2;
        config.auth.user_limits.sessions = 3;
        config.auth.user_limits.storage_mib = 1;
    })
    .await;
    let mut erin = named(&server, "erin");
    let session = asked_session(&mut erin, &server).await;
    let ask_url = server.url(&format!("/api/sessions/{session}/ask"));
    let question = json!({"text": "print(1)"});
    // The first turn took one of two; the second is the last this minute.
    let second = erin.post_json(&ask_url, &question).await;
    assert!(second.status().is_success());
    let _ = second.bytes().await;
    let third = erin.post_json(&ask_url, &question).await;
    assert_eq!(third.status(), StatusCode::TOO_MANY_REQUESTS);
    let body: Value = third.json().await.unwrap();
    assert!(
        body.to_string().contains("2 turns a minute"),
        "the refusal says which limit: {body}"
    );
    // Files: 600 KiB fit her 1 MiB, 600 more do not (across notebooks),
    // and replacing a file counts only the difference.
    let put = |browser: &Browser, session: &str, path: &str, size: usize| {
        let request = browser
            .http
            .put(server.url(&format!(
                "/api/sessions/{session}/files?path={path}&overwrite=true"
            )))
            .header(COOKIE, browser.jar.header())
            .header("origin", browser.origin.trim_end_matches('/'))
            .body(vec![b'x'; size]);
        async move { request.send().await.unwrap() }
    };
    assert!(
        put(&erin, &session, "a.bin", 600 * 1024)
            .await
            .status()
            .is_success()
    );
    assert!(
        put(&erin, &session, "a.bin", 700 * 1024)
            .await
            .status()
            .is_success()
    );
    let full = put(&erin, &session, "b.bin", 600 * 1024).await;
    assert_eq!(full.status(), StatusCode::TOO_MANY_REQUESTS);
    let said = full.text().await.unwrap();
    assert!(said.contains("your account may keep 1 MiB"), "{said}");

    // Someone else is not held back by erin's limit.
    let mut frank = named(&server, "frank");
    asked_session(&mut frank, &server).await;

    // An admin raises erin's turns; the notebooks cap still holds.
    let mut boss = named(&server, "boss");
    let erin_id = account_id(&mut boss, &server, "erin").await;
    let erins = boss
        .get(&server.url(&format!("/admin/users/{erin_id}")))
        .await
        .text()
        .await
        .unwrap();
    assert!(
        erins.contains("<dd>0.7 MiB (of 1 MiB)</dd>"),
        "her files: {erins}"
    );
    let raised = boss
        .post_form(
            &server.url(&format!("/admin/users/{erin_id}/limits")),
            &[("runs_per_minute", "100"), ("sessions", "")],
        )
        .await;
    assert_eq!(raised.status(), StatusCode::SEE_OTHER);
    let bad = boss
        .post_form(
            &server.url(&format!("/admin/users/{erin_id}/limits")),
            &[("runs_per_minute", "-5")],
        )
        .await;
    assert_eq!(bad.status(), StatusCode::BAD_REQUEST);
    // The account is read again within seconds.
    let mut refusal = String::new();
    for _ in 0..40 {
        let again = erin.post_json(&ask_url, &question).await;
        if again.status().is_success() {
            let _ = again.bytes().await;
            refusal.clear();
            break;
        }
        refusal = again.text().await.unwrap();
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    assert!(
        refusal.is_empty(),
        "the raised limit was not seen: {refusal}"
    );
    asked_session(&mut erin, &server).await;
    asked_session(&mut erin, &server).await;
    let over = erin
        .post_json(&server.url("/api/sessions"), &json!({}))
        .await;
    assert_eq!(over.status(), StatusCode::TOO_MANY_REQUESTS);
    let body: Value = over.json().await.unwrap();
    assert!(
        body.to_string()
            .contains("the most your account allows (3)"),
        "{body}"
    );
}

/// The key `browser`'s person makes at `/account`, from the page that
/// shows it once; or the refusal's status.
async fn make_key(
    browser: &mut Browser,
    server: &TestServer,
    name: &str,
) -> Result<String, StatusCode> {
    let made = browser
        .post_form(&server.url("/account/keys"), &[("name", name)])
        .await;
    let status = made.status();
    if status != StatusCode::OK {
        return Err(status);
    }
    let page = made.text().await.unwrap();
    Ok(page
        .split("<code>")
        .nth(1)
        .and_then(|rest| rest.split("</code>").next())
        .unwrap()
        .to_string())
}

/// Revokes the first live key listed on `browser`'s person's account page.
async fn revoke_first_key(browser: &mut Browser, server: &TestServer) -> StatusCode {
    let page = browser
        .get(&server.url("/account"))
        .await
        .text()
        .await
        .unwrap();
    let id = page
        .split("/account/keys/")
        .nth(1)
        .and_then(|rest| rest.split('/').next())
        .unwrap()
        .to_string();
    browser
        .post_form(&server.url(&format!("/account/keys/{id}/revoke")), &[])
        .await
        .status()
}

#[tokio::test]
async fn a_persons_keys_are_held_to_the_persons_limits() {
    let server = server_with_header(None, |config| {
        config.auth.user_limits.live_kernels = 1;
        config.auth.keys_per_person = 3;
        config.auth.keys_made_per_hour = 4;
    })
    .await;
    let mut hana = named(&server, "hana");
    let mut keys = Vec::new();
    for name in ["a", "b", "c"] {
        keys.push(
            make_key(&mut hana, &server, name)
                .await
                .expect("within the cap"),
        );
    }
    // A fourth live key is refused, and says why.
    let fourth = hana
        .post_form(&server.url("/account/keys"), &[("name", "d")])
        .await;
    assert_eq!(fourth.status(), StatusCode::TOO_MANY_REQUESTS);
    let said = fourth.text().await.unwrap();
    assert!(said.contains("you have 3 live API keys"), "{said}");

    // Two keys, one live kernel: the second key's session is refused, for
    // the person's limit, not the key's.
    let session = |key: String| {
        let http = client_with(&[]);
        let url = server.url("/v1/code_interpreter/sessions");
        async move {
            http.post(url)
                .bearer_auth(key)
                .json(&json!({"language": "python"}))
                .send()
                .await
                .unwrap()
        }
    };
    let first = session(keys[0].clone()).await;
    assert_eq!(
        first.status(),
        StatusCode::CREATED,
        "{}",
        first.text().await.unwrap()
    );
    let second = session(keys[1].clone()).await;
    assert_eq!(second.status(), StatusCode::TOO_MANY_REQUESTS);
    let said = second.text().await.unwrap();
    assert!(
        said.contains("may hold 1 live kernels, its notebooks' and its keys' together"),
        "{said}"
    );

    // Revoking a key makes room for another, but not past the hourly rate:
    // four made this hour already (three live, one revoked, one new).
    assert_eq!(
        revoke_first_key(&mut hana, &server).await,
        StatusCode::SEE_OTHER
    );
    make_key(&mut hana, &server, "e").await.expect("room again");
    assert_eq!(
        revoke_first_key(&mut hana, &server).await,
        StatusCode::SEE_OTHER
    );
    assert_eq!(
        make_key(&mut hana, &server, "f").await,
        Err(StatusCode::TOO_MANY_REQUESTS),
        "the fifth key within the hour"
    );
}

/// A person's cap on notebooks holds for notebooks made at once (the
/// count and the new row are one step), for new empty ones, and for the
/// other ways of making one: an import and a fork.
#[tokio::test]
async fn a_persons_notebooks_made_at_once_cannot_pass_their_cap_together() {
    const CAP: usize = 2;
    const ASKED: usize = 6;
    let server = server_with_header(None, |config| {
        config.auth.user_limits.sessions = CAP as u32;
    })
    .await;
    // A link to fork, from someone else.
    let mut frank = named(&server, "frank");
    let shared = asked_session(&mut frank, &server).await;
    let link = frank
        .post_json(
            &server.url(&format!("/api/sessions/{shared}/share")),
            &json!({}),
        )
        .await;
    assert!(link.status().is_success(), "{}", link.status());
    let token = link.json::<Value>().await.unwrap()["token"]
        .as_str()
        .unwrap()
        .to_string();

    let mut gail = named(&server, "gail");
    assert_eq!(gail.get(&server.url("/")).await.status(), StatusCode::OK);
    let origin = server.url("").trim_end_matches('/').to_string();
    let made = (0..ASKED).map(|_| {
        let request = gail
            .http
            .post(server.url("/api/sessions"))
            .header("origin", &origin);
        async move {
            let response = request.send().await.unwrap();
            let status = response.status().as_u16();
            (status, response.text().await.unwrap())
        }
    });
    let answers = futures::future::join_all(made).await;
    let opened = answers.iter().filter(|(status, _)| *status == 201).count();
    assert_eq!(opened, CAP, "{answers:?}");
    for (status, body) in answers.iter().filter(|(status, _)| *status != 201) {
        assert_eq!(*status, 429, "{body}");
        let body: Value = serde_json::from_str(body).unwrap();
        assert_eq!(body["error"]["code"], "over_quota");
        assert_eq!(
            body["error"]["message"],
            "you keep 2 notebooks (new empty ones count too), the most your account allows (2); delete some to make new ones"
        );
    }
    let notebook = json!({
        "nbformat": 4, "nbformat_minor": 5, "metadata": {},
        "cells": [{"cell_type": "markdown", "id": "m", "metadata": {}, "source": "# Mine"}],
    });
    let imported = gail
        .http
        .post(server.url("/api/sessions/import"))
        .header("origin", &origin)
        .body(notebook.to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(imported.status(), StatusCode::TOO_MANY_REQUESTS);
    let forked = gail
        .post_form(&server.url(&format!("/s/{token}/fork")), &[])
        .await;
    assert_eq!(forked.status(), StatusCode::TOO_MANY_REQUESTS);
}

/// A person's cap on the bytes their files keep holds for uploads sent at
/// once: the count of what is kept and the upload it admits are one step.
#[tokio::test]
async fn a_persons_files_uploaded_at_once_cannot_pass_their_cap_together() {
    const FILES: usize = 5;
    const SIZE: usize = 400 * 1024;
    let server = server_with_header(None, |config| {
        config.auth.user_limits.storage_mib = 1;
    })
    .await;
    let mut hana = named(&server, "hana");
    let session = asked_session(&mut hana, &server).await;
    let origin = server.url("").trim_end_matches('/').to_string();
    let puts = (0..FILES).map(|n| {
        let request = hana
            .http
            .put(server.url(&format!("/api/sessions/{session}/files?path=part{n}.bin")))
            .header("origin", &origin)
            .body(vec![b'x'; SIZE]);
        async move {
            let response = request.send().await.unwrap();
            let status = response.status().as_u16();
            (status, response.text().await.unwrap())
        }
    });
    let answers = futures::future::join_all(puts).await;
    // Two of 400 KiB fit 1 MiB; a third does not.
    let kept = answers.iter().filter(|(status, _)| *status == 201).count();
    assert_eq!(kept, 2, "{answers:?}");
    for (status, body) in answers.iter().filter(|(status, _)| *status != 201) {
        assert_eq!(*status, 429, "{body}");
        assert!(body.contains("your account may keep 1 MiB"), "{body}");
    }
}

#[tokio::test]
async fn a_persons_key_signs_a_browser_or_terminal_in_as_the_person() {
    key_signs_the_person_in(None).await;
}

#[tokio::test]
async fn a_persons_key_signs_them_in_on_postgres() {
    let Some(db) = ScratchDatabase::create("personkey").await else {
        return;
    };
    key_signs_the_person_in(Some(&db.url)).await;
    db.drop_now().await;
}

async fn key_signs_the_person_in(database_url: Option<&str>) {
    let server = server_with_header(database_url, |_| {}).await;
    let mut gina = named(&server, "gina");
    let hers = asked_session(&mut gina, &server).await;
    let made = gina
        .post_form(&server.url("/account/keys"), &[("name", "terminal")])
        .await
        .text()
        .await
        .unwrap();
    let key = made
        .split("<code>")
        .nth(1)
        .and_then(|rest| rest.split("</code>").next())
        .unwrap()
        .to_string();
    // A browser (or `runcell chat --key`, which posts the same form) with
    // no header: what it made before becomes hers, and it sees her notebooks.
    let mut terminal = Browser::new(&server);
    let before = asked_session(&mut terminal, &server).await;
    let signed = terminal
        .post_form(&server.url("/login"), &[("api_key", &key), ("next", "/")])
        .await;
    assert_eq!(signed.status(), StatusCode::SEE_OTHER);
    let mut listed_now = listed(&mut terminal, &server).await;
    listed_now.sort();
    let mut expected = vec![hers, before];
    expected.sort();
    assert_eq!(listed_now, expected);
    let page = terminal
        .get(&server.url("/account"))
        .await
        .text()
        .await
        .unwrap();
    assert!(page.contains("gina"), "{page}");
    let admin = named(&server, "boss")
        .get(&server.url("/admin"))
        .await
        .text()
        .await
        .unwrap();
    assert!(
        admin.contains("gina signed in with the API key terminal"),
        "{admin}"
    );
}

#[tokio::test]
async fn a_refused_key_name_is_explained_at_the_form_and_a_new_key_has_a_copy_button() {
    let server = server_with_header(None, |_| {}).await;
    let mut ida = named(&server, "ida");
    // The form says the rule before anything is sent.
    let form = ida.get(&server.url("/account")).await.text().await.unwrap();
    let rule = "letters, digits, spaces, . _ and - only, up to 64";
    assert!(form.contains(&format!("title=\"{rule}\"")), "{form}");
    assert!(
        form.contains("aria-describedby=\"key-name-hint\""),
        "{form}"
    );

    // A name with a slash, sent anyway (with no pattern to stop it), comes
    // back in the form with the reason beside it.
    let refused = ida
        .post_form(&server.url("/account/keys"), &[("name", "my/laptop")])
        .await;
    assert_eq!(refused.status(), StatusCode::BAD_REQUEST);
    let said = refused.text().await.unwrap();
    for part in [
        "aria-invalid=\"true\"",
        "value=\"my/laptop\"",
        "aria-describedby=\"key-name-error key-name-hint\"",
        "<span id=\"key-name-error\" class=\"account-error\" role=\"alert\">Not made: a key name is 1 to 64 letters, digits, spaces, &#39;.&#39;, &#39;_&#39; or &#39;-&#39;, not starting or ending with a space (got &quot;my/laptop&quot;)</span>",
    ] {
        assert!(said.contains(part), "{part} in {said}");
    }
    assert_eq!(
        make_key(&mut ida, &server, "my/laptop").await,
        Err(StatusCode::BAD_REQUEST)
    );
    // Spaces are part of a name people give.
    assert!(make_key(&mut ida, &server, "home laptop").await.is_ok());

    // A new key is shown with a Copy button, hidden until its script (the
    // page's only one, from this site) shows it.
    let made = ida
        .post_form(&server.url("/account/keys"), &[("name", "work laptop")])
        .await;
    assert_eq!(made.status(), StatusCode::OK);
    assert_eq!(
        made.headers()["content-security-policy"],
        "script-src 'self'; frame-ancestors 'none'; base-uri 'self'; object-src 'none'; form-action 'self'"
    );
    let page = made.text().await.unwrap();
    assert!(
        page.contains("<button type=\"button\" data-copies=\"new-key\" data-says=\"copy-said\" hidden>Copy the key</button>"),
        "{page}"
    );
    assert!(page.contains("<p role=\"status\"><strong id=\"copy-said\"></strong>Copy it now"));
    assert_eq!(page.matches("<script").count(), 1);
    assert!(page.contains("<script src=\"/account-key.js\" defer></script>"));
    // The account page itself runs no script.
    let account = ida.get(&server.url("/account")).await;
    assert_eq!(
        account.headers()["content-security-policy"],
        "script-src 'none'; frame-ancestors 'none'; base-uri 'self'; object-src 'none'; form-action 'self'"
    );
}
