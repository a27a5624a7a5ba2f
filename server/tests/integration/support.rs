use std::net::SocketAddr;
use std::time::Duration;

use app::protocol::{CellKind, ClientMessage, EventBody, SUBPROTOCOL, ServerMessage, SessionEvent};
use futures::{SinkExt, StreamExt};
use runcell::config::{LlmBackend, LlmConfig, SandboxConfig};
use runcell::{Config, launch_with_listener};
use tokio::net::TcpStream;
use tokio::task::JoinHandle;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::http::HeaderValue;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};
use tokio_util::sync::CancellationToken;

/// Long enough for anything these tests wait for; only a failing test waits it out.
pub const PATIENCE: Duration = Duration::from_secs(20);

/// A server on an ephemeral port with its own data directory, stopped on drop.
pub struct TestServer {
    pub addr: SocketAddr,
    pub shutdown: CancellationToken,
    pub task: Option<JoinHandle<Result<(), runcell::ServeError>>>,
    _data: tempfile::TempDir,
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
        let data = tempfile::tempdir().unwrap();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let config = Config {
            addr,
            data_dir: data.path().join("data"),
            site_root: data.path().join("site"),
            log: "warn".into(),
            sandbox,
            llm,
        };
        let shutdown = CancellationToken::new();
        let task = tokio::spawn(launch_with_listener(config, listener, shutdown.clone()));
        Self {
            addr,
            shutdown,
            task: Some(task),
            _data: data,
        }
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

pub fn http() -> reqwest::Client {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
}

pub fn new_session_id() -> String {
    uuid::Uuid::new_v4().to_string()
}

/// A page's side of the session socket.
pub struct Client {
    pub ws: WebSocketStream<MaybeTlsStream<TcpStream>>,
}

impl Client {
    pub async fn connect(url: &str) -> Self {
        let mut request = url.into_client_request().unwrap();
        request.headers_mut().insert(
            "sec-websocket-protocol",
            HeaderValue::from_static(SUBPROTOCOL),
        );
        let (ws, response) = tokio_tungstenite::connect_async(request).await.unwrap();
        assert_eq!(
            response
                .headers()
                .get("sec-websocket-protocol")
                .map(|v| v.as_bytes()),
            Some(SUBPROTOCOL.as_bytes())
        );
        Self { ws }
    }

    pub async fn send_raw(&mut self, message: Message) {
        self.ws.send(message).await.unwrap();
    }

    pub async fn ask(&mut self, text: &str) {
        let frame = serde_json::to_string(&ClientMessage::Ask {
            text: text.into(),
            model: None,
        })
        .unwrap();
        self.send_raw(Message::text(frame)).await;
    }

    /// The next protocol frame; `None` when the server closed.
    pub async fn next(&mut self) -> Option<ServerMessage> {
        loop {
            let frame = tokio::time::timeout(PATIENCE, self.ws.next())
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
