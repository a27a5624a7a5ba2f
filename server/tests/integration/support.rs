use std::net::SocketAddr;
use std::time::Duration;

use app::protocol::{CellKind, ClientMessage, EventBody, SUBPROTOCOL, ServerMessage, SessionEvent};
use futures::{SinkExt, StreamExt};
use runcell_server::config::{LlmBackend, LlmConfig, SandboxConfig};
use runcell_server::{Config, launch_with_listener};
use tokio::net::TcpStream;
use tokio::task::JoinHandle;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::http::HeaderValue;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};
use tokio_util::sync::CancellationToken;

/// Long enough for anything these tests wait for; only a failing test waits it out.
pub const PATIENCE: Duration = Duration::from_secs(20);

/// Sandbox sessions the anonymous pages of one address may hold in tests:
/// every test's pages come from loopback, and most are anonymous, so the
/// per-address budget is set out of their way (tests of it set their own).
pub const LOOPBACK_PAGES: usize = 64;

/// New sessions the anonymous pages of one address may make a minute in
/// tests: every test's pages come from loopback, so this budget too is set
/// out of their way (tests of it set their own).
pub const LOOPBACK_NEW_SESSIONS: u32 = 1000;

/// The owner every test request carries unless it says otherwise.
pub const OWNER: &str = "7e570000000000000000000000000001";

/// The `Cookie` header that makes a request `owner`'s.
pub fn cookie_of(owner: &str) -> String {
    format!("runcell_owner={owner}")
}

/// A server on an ephemeral port with its own data directory, stopped on drop.
pub struct TestServer {
    pub addr: SocketAddr,
    pub shutdown: CancellationToken,
    pub task: Option<JoinHandle<Result<(), runcell_server::ServeError>>>,
    config: Config,
    data: Option<tempfile::TempDir>,
}

impl TestServer {
    /// A server without a warm pool (many run at once in the tests).
    pub async fn start() -> Self {
        Self::start_with(SandboxConfig {
            pool_size: 0,
            ..SandboxConfig::default()
        })
        .await
    }

    pub async fn start_with(sandbox: SandboxConfig) -> Self {
        Self::start_with_llm(sandbox, scripted()).await
    }

    pub async fn start_with_llm(sandbox: SandboxConfig, llm: LlmConfig) -> Self {
        Self::start_configured(|config| {
            config.sandbox = SandboxConfig {
                anonymous_sessions_per_client: LOOPBACK_PAGES,
                ..sandbox
            };
            config.llm = llm;
        })
        .await
    }

    async fn launch(mut config: Config, data: tempfile::TempDir) -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        config.addr = addr;
        let shutdown = CancellationToken::new();
        let task = tokio::spawn(launch_with_listener(
            config.clone(),
            listener,
            shutdown.clone(),
        ));
        Self {
            addr,
            shutdown,
            task: Some(task),
            config,
            data: Some(data),
        }
    }

    /// Stops the server cleanly (as SIGTERM would) and starts a new one on
    /// the same data directory, on a new port.
    pub async fn restart(mut self) -> Self {
        self.shutdown.cancel();
        if let Some(task) = self.task.take() {
            task.await.unwrap().unwrap();
        }
        let data = self.data.take().unwrap();
        Self::launch(self.config.clone(), data).await
    }

    /// Starts a server with `config` changed by `change` (on a temp data dir).
    pub async fn start_configured(change: impl FnOnce(&mut Config)) -> Self {
        let data = tempfile::tempdir().unwrap();
        let mut config = Config {
            addr: "127.0.0.1:0".parse().unwrap(),
            data_dir: data.path().join("data"),
            database_url: Default::default(),
            site_root: data.path().join("site"),
            log: "warn".into(),
            sandbox: SandboxConfig {
                pool_size: 0,
                anonymous_sessions_per_client: LOOPBACK_PAGES,
                ..SandboxConfig::default()
            },
            notebook: runcell_server::config::NotebookConfig {
                anonymous_sessions_per_minute: LOOPBACK_NEW_SESSIONS,
                // The tests' pages stand for many people on one address, as
                // behind a proxy: not a single-person install.
                single_person: Some(false),
                ..Default::default()
            },
            llm: scripted(),
            auth: Default::default(),
            http: Default::default(),
            e2b: Default::default(),
            browser: Default::default(),
            jupyter: Default::default(),
            packages: Default::default(),
        };
        change(&mut config);
        Self::launch(config, data).await
    }

    /// A new API key named `name`, made as `runcell keys create` makes it.
    pub async fn api_key(&self, name: &str) -> String {
        // The server makes the database first (two first starts at once
        // would both try to lay it out).
        self.ready().await;
        let database =
            runcell_store::Database::open(self.config.database_url.expose(), &self.data_dir())
                .await
                .unwrap();
        let (key, _) = runcell_server::auth::create_key(database.keys().as_ref(), name)
            .await
            .unwrap();
        database.close().await;
        key.as_str().to_string()
    }

    /// Revokes the key named `name`, as `runcell keys revoke` does (another
    /// process writing the store).
    pub async fn revoke(&self, name: &str) {
        let database =
            runcell_store::Database::open(self.config.database_url.expose(), &self.data_dir())
                .await
                .unwrap();
        assert!(
            database
                .keys()
                .revoke_key(name, runcell_core::clock::now_ms())
                .await
                .unwrap()
        );
        database.close().await;
    }

    /// Waits until the server answers `/healthz`.
    pub async fn ready(&self) {
        let deadline = tokio::time::Instant::now() + PATIENCE;
        loop {
            if let Ok(response) = reqwest::get(self.url("/healthz")).await
                && response.status() == 200
            {
                return;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "the server never answered"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// An access token for `key`, from `POST /v1/auth/token`.
    pub async fn token_for(&self, key: &str) -> String {
        let response = reqwest::Client::new()
            .post(self.url("/v1/auth/token"))
            .json(&serde_json::json!({ "api_key": key }))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200);
        let body: serde_json::Value = response.json().await.unwrap();
        body["access_token"].as_str().unwrap().to_string()
    }

    /// A client for `/v1` with a fresh key's access token.
    pub async fn api(&self) -> reqwest::Client {
        let key = self
            .api_key(&format!("test-{}", uuid::Uuid::new_v4().simple()))
            .await;
        bearer(&self.token_for(&key).await)
    }

    /// Where the server keeps its files.
    pub fn data_dir(&self) -> std::path::PathBuf {
        self.config.data_dir.clone()
    }

    /// A new session of [`OWNER`]'s; its id.
    pub async fn new_session(&self) -> String {
        self.new_session_of(OWNER).await
    }

    pub async fn new_session_of(&self, owner: &str) -> String {
        let response = http_as(Some(owner))
            .post(self.url("/api/sessions"))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 201);
        let body: serde_json::Value = response.json().await.unwrap();
        body["id"].as_str().unwrap().to_string()
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    pub fn ws_url(&self, path: &str) -> String {
        format!("ws://{}{path}", self.addr)
    }

    pub async fn connect(&self, session: &str, after: u64) -> Client {
        Client::connect(&self.ws_url(&format!("/ws/sessions/{session}?after={after}"))).await
    }

    /// What a WebSocket handshake for `session` gets, as `owner` (or with
    /// no cookie): the error status if it is refused.
    pub async fn try_connect_as(&self, session: &str, owner: Option<&str>) -> Result<Client, u16> {
        Client::try_connect(
            &self.ws_url(&format!("/ws/sessions/{session}?after=0")),
            owner,
        )
        .await
    }

    /// A page that joins a session from its start, past the welcome frame.
    pub async fn join(&self, session: &str) -> Client {
        let mut client = self.connect(session, 0).await;
        client.welcome().await;
        client
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}

/// An HTTP client that is [`OWNER`] and does not follow redirects.
pub fn http() -> reqwest::Client {
    http_as(Some(OWNER))
}

/// `events` as a page's socket sends them: each question and explanation
/// with its markup (the page renders no markdown). What API clients read
/// has none.
pub fn as_a_page_is_sent(events: &[SessionEvent]) -> Vec<SessionEvent> {
    let mut markup = runcell_protocol::render::for_pages::PageMarkup::default();
    events.iter().cloned().map(|e| markup.mark(e)).collect()
}

/// The page at `path` as [`OWNER`] is sent it: its HTML.
pub async fn page_html(server: &TestServer, path: &str) -> String {
    let response = http().get(server.url(path)).send().await.unwrap();
    response.text().await.unwrap()
}

/// An HTTP client that is `owner`, or a stranger with no cookie at all.
pub fn http_as(owner: Option<&str>) -> reqwest::Client {
    client_sending(owner.map(|owner| (reqwest::header::COOKIE, cookie_of(owner))))
}

/// A client that does not follow redirects and sends `header` (if any)
/// with every request.
fn client_sending(header: Option<(reqwest::header::HeaderName, String)>) -> reqwest::Client {
    match header {
        Some((name, value)) => client_with(&[(name.as_str(), &value)]),
        None => client_with(&[]),
    }
}

/// A client that does not follow redirects and sends `headers` with every
/// request.
pub fn client_with(pairs: &[(&str, &str)]) -> reqwest::Client {
    let mut headers = reqwest::header::HeaderMap::new();
    for (name, value) in pairs {
        headers.insert(
            reqwest::header::HeaderName::from_bytes(name.as_bytes()).unwrap(),
            HeaderValue::from_str(value).unwrap(),
        );
    }
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .default_headers(headers)
        .build()
        .unwrap()
}

/// An HTTP client that sends `Authorization: Bearer <token>`.
pub fn bearer(token: &str) -> reqwest::Client {
    client_sending(Some((
        reqwest::header::AUTHORIZATION,
        format!("Bearer {token}"),
    )))
}

/// A session id nobody has.
pub fn random_session_id() -> String {
    uuid::Uuid::new_v4().to_string()
}

/// A page's side of the session socket.
pub struct Client {
    pub ws: WebSocketStream<MaybeTlsStream<TcpStream>>,
}

impl Client {
    pub async fn connect(url: &str) -> Self {
        match Self::try_connect(url, Some(OWNER)).await {
            Ok(client) => client,
            Err(status) => panic!("the handshake was refused with {status}"),
        }
    }

    pub async fn try_connect(url: &str, owner: Option<&str>) -> Result<Self, u16> {
        let mut request = url.into_client_request().unwrap();
        request.headers_mut().insert(
            "sec-websocket-protocol",
            HeaderValue::from_static(SUBPROTOCOL),
        );
        if let Some(owner) = owner {
            request
                .headers_mut()
                .insert("cookie", HeaderValue::from_str(&cookie_of(owner)).unwrap());
        }
        let (ws, response) = match tokio_tungstenite::connect_async(request).await {
            Ok(connected) => connected,
            Err(tokio_tungstenite::tungstenite::Error::Http(response)) => {
                return Err(response.status().as_u16());
            }
            Err(err) => panic!("cannot connect: {err}"),
        };
        assert_eq!(
            response
                .headers()
                .get("sec-websocket-protocol")
                .map(|v| v.as_bytes()),
            Some(SUBPROTOCOL.as_bytes())
        );
        Ok(Self { ws })
    }

    pub async fn send_raw(&mut self, message: Message) {
        self.ws.send(message).await.unwrap();
    }

    pub async fn ask(&mut self, text: &str) {
        let frame = serde_json::to_string(&ClientMessage::Ask {
            alternative_to: None,
            text: text.into(),
            model: None,
            backend: None,
        })
        .unwrap();
        self.send_raw(Message::text(frame)).await;
    }

    /// The next protocol frame; `None` when the server closed.
    pub async fn next(&mut self) -> Option<ServerMessage> {
        self.next_within(PATIENCE).await
    }

    /// The next protocol frame, waiting up to `patience` for it (a real
    /// model's prefill on a loaded machine sends nothing for a while).
    pub async fn next_within(&mut self, patience: Duration) -> Option<ServerMessage> {
        loop {
            let frame = tokio::time::timeout(patience, self.ws.next())
                .await
                .expect("no frame in time");
            match frame {
                Some(Ok(Message::Text(text))) => {
                    return Some(serde_json::from_str(text.as_str()).unwrap());
                }
                Some(Ok(Message::Ping(_) | Message::Pong(_))) => {}
                Some(Ok(Message::Close(_)) | Err(_)) | None => return None,
                Some(Ok(other)) => panic!("unexpected frame {other:?}"),
            }
        }
    }

    pub async fn next_event(&mut self) -> SessionEvent {
        match self.next().await {
            Some(ServerMessage::Event(event)) => event,
            other => panic!("expected an event, got {other:?}"),
        }
    }

    /// Events up to and including the next `turn_finished`.
    pub async fn events_until_finished(&mut self) -> Vec<SessionEvent> {
        let mut events = Vec::new();
        loop {
            let event = self.next_event().await;
            let done = matches!(event.event, EventBody::TurnFinished { .. });
            events.push(event);
            if done {
                return events;
            }
        }
    }

    pub async fn welcome(&mut self) -> (u32, String, u64) {
        match self.next().await {
            Some(ServerMessage::Welcome {
                protocol,
                session_id,
                last_seq,
            }) => (protocol, session_id, last_seq),
            other => panic!("expected a welcome, got {other:?}"),
        }
    }
}

/// The scripted model, streaming quickly: what tests talk to.
pub fn scripted() -> LlmConfig {
    LlmConfig {
        backend: LlmBackend::Scripted,
        scripted_delay_ms: 5,
        ..LlmConfig::default()
    }
}

/// The cells of a question answered at the first attempt, in order.
pub const ASKED: [CellKind; 4] = [
    CellKind::User,
    CellKind::Code,
    CellKind::Result,
    CellKind::Explanation,
];

/// A loopback port nothing listens on (a dead model server).
pub fn closed_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .unwrap()
        .port()
}

/// The program the scripted model writes for a message without code.
pub fn printed(text: &str) -> String {
    format!("print({})", serde_json::Value::from(text))
}

/// The lines of an NDJSON answer of the notebook API, each a WebSocket
/// frame carrying an event.
pub async fn ndjson_events(response: reqwest::Response) -> Vec<SessionEvent> {
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["content-type"], "application/x-ndjson");
    let text = tokio::time::timeout(PATIENCE * 3, response.text())
        .await
        .unwrap()
        .unwrap();
    assert!(text.is_empty() || text.ends_with('\n'));
    text.lines()
        .map(|line| match serde_json::from_str(line).unwrap() {
            ServerMessage::Event(event) => event,
            other => panic!("expected an event, got {other:?}"),
        })
        .collect()
}

/// Asks a question in a notebook session over `/api/sessions/{id}/ask` as
/// [`OWNER`]; the turn's events.
pub async fn ask(server: &TestServer, id: &str, text: &str) -> Vec<SessionEvent> {
    ask_at(&server.url(""), id, text).await
}

/// [`ask`] of the server at `base` (`http://host:port`).
pub async fn ask_at(base: &str, id: &str, text: &str) -> Vec<SessionEvent> {
    let response = http()
        .post(format!("{base}/api/sessions/{id}/ask"))
        .json(&serde_json::json!({ "text": text }))
        .send()
        .await
        .unwrap();
    ndjson_events(response).await
}

/// A notebook session's whole history, as `/api/sessions/{id}/events` gives it.
pub async fn history(server: &TestServer, id: &str) -> Vec<SessionEvent> {
    history_at(&server.url(""), id).await
}

/// [`history`] of the server at `base`.
pub async fn history_at(base: &str, id: &str) -> Vec<SessionEvent> {
    ndjson_events(
        http()
            .get(format!("{base}/api/sessions/{id}/events"))
            .send()
            .await
            .unwrap(),
    )
    .await
}

/// This process's resident memory, in bytes (the server runs in it).
pub fn rss_bytes() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .unwrap_or_default()
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|rest| {
            rest.trim()
                .trim_end_matches("kB")
                .trim()
                .parse::<u64>()
                .ok()
        })
        .map_or(0, |kib| kib * 1024)
}

/// The bytes waiting under `<data_dir>/spool`, and how many files hold them.
pub fn spooled(server: &TestServer) -> (u64, usize) {
    let Ok(dir) = std::fs::read_dir(server.data_dir().join("spool")) else {
        return (0, 0);
    };
    dir.flatten()
        .filter_map(|entry| entry.metadata().ok())
        .fold((0, 0), |(bytes, files), meta| {
            (bytes + meta.len(), files + 1)
        })
}

/// Waits until the spool holds at least `bytes` in `files` files; panics
/// (saying what it holds) if it never does.
pub async fn wait_for_spool(server: &TestServer, bytes: u64, files: usize) {
    let deadline = tokio::time::Instant::now() + PATIENCE * 3;
    loop {
        let held = spooled(server);
        if held.0 >= bytes && held.1 >= files {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the spool holds {held:?}, not {bytes} bytes in {files} files: bodies are not waiting on disk"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A request sent by hand on its own connection: its head (with
/// `Content-Length: length`), then `sent` bytes of its body, and no more
/// until the caller says (the connection is kept open).
pub async fn unfinished_request(
    server: &TestServer,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    length: usize,
    sent: usize,
) -> TcpStream {
    use tokio::io::AsyncWriteExt;
    let mut stream = TcpStream::connect(server.addr).await.unwrap();
    let mut head = format!(
        "{method} {path} HTTP/1.1\r\nhost: {}\r\ncontent-length: {length}\r\n",
        server.addr
    );
    for (name, value) in headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str("\r\n");
    stream.write_all(head.as_bytes()).await.unwrap();
    let piece = vec![b'x'; 1024 * 1024];
    let mut left = sent;
    while left > 0 {
        let n = left.min(piece.len());
        stream.write_all(&piece[..n]).await.unwrap();
        left -= n;
    }
    stream.flush().await.unwrap();
    stream
}

/// The status line and body of the answer on a hand-made connection.
pub async fn answer_of(stream: &mut TcpStream) -> (u16, String) {
    use tokio::io::AsyncReadExt;
    let mut text = Vec::new();
    let mut piece = [0u8; 4096];
    let read = tokio::time::timeout(PATIENCE, async {
        loop {
            match stream.read(&mut piece).await {
                Ok(0) | Err(_) => break,
                Ok(n) => text.extend_from_slice(&piece[..n]),
            }
            let so_far = String::from_utf8_lossy(&text);
            if let Some((head, body)) = so_far.split_once("\r\n\r\n") {
                let length = head
                    .lines()
                    .find_map(|l| {
                        l.to_ascii_lowercase()
                            .strip_prefix("content-length:")
                            .map(|v| v.trim().to_string())
                    })
                    .and_then(|v| v.parse::<usize>().ok());
                if length.is_some_and(|n| body.len() >= n) {
                    break;
                }
            }
        }
    })
    .await;
    assert!(read.is_ok(), "no answer came");
    let text = String::from_utf8_lossy(&text).into_owned();
    let status = text
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let body = text
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default();
    (status, body)
}

/// A new `/v1` session of `client`'s key; its id.
pub async fn new_v1_session(client: &reqwest::Client, server: &TestServer) -> String {
    let created: serde_json::Value = client
        .post(server.url("/v1/code_interpreter/sessions"))
        .json(&serde_json::json!({}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    created["session_id"].as_str().unwrap().to_string()
}

/// Whether a streamed response (an MCP session's own stream, an NDJSON
/// turn) ends within `patience`: read to its end, or to its first error.
pub async fn ends_within(response: reqwest::Response, patience: Duration) -> bool {
    let mut bytes = response.bytes_stream();
    tokio::time::timeout(patience, async {
        while let Some(Ok(_)) = bytes.next().await {}
    })
    .await
    .is_ok()
}
