//! `runcell bench stream`: the latency runcell adds between an event
//! reaching the server (a model token, a chunk of a program's stdout) and
//! it reaching a page's WebSocket, with many sessions streaming at once.
//!
//! The real router serves on `127.0.0.1:0`; one WebSocket client per
//! session connects as a page does. Each session's events are published
//! into its channel (the point where the agent hands over a token or an
//! output chunk) carrying the time they were published; each client reads
//! them, parses the frame and records the difference, and checks that
//! sequence numbers arrive in order without gaps.

use std::time::{Duration, Instant};

use futures::StreamExt;
use runcell_protocol::{CellId, CellKind, EventBody, Output, SUBPROTOCOL, ServerMessage};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::http::HeaderValue;
use tokio_util::sync::CancellationToken;

use crate::sandbox::stats;
use crate::{BenchError, fail};
use runcell_server::config::{Config, LlmBackend, SandboxConfig};
use runcell_server::http::state::AppState;

/// What one client saw.
struct Seen {
    latencies: Vec<Duration>,
    lost: u64,
    reordered: u64,
}

pub struct StreamBenchOptions {
    pub sessions: usize,
    pub events_per_session: usize,
    /// The pause between two events of one session (a fast model's pace
    /// is 10-30 ms a token; less is a harsher test).
    pub interval: Duration,
}

pub async fn run(options: StreamBenchOptions) -> Result<(), BenchError> {
    println!(
        "runcell bench stream: {} sessions x {} events, one every {} ms per session, loopback WebSocket",
        options.sessions,
        options.events_per_session,
        options.interval.as_millis()
    );
    let node = Node::start(&options, None).await?;
    let measured = measure(&node, &node, &options).await;
    node.stop().await;
    let measured = measured?;
    println!();
    print_header();
    measured.print("published -> parsed by a page's socket", "p99 <= 5 ms");
    measured.check()
}

/// `runcell bench cluster`: the same streams on two nodes sharing the
/// PostgreSQL database at `database_url`, published on the node that holds
/// the sessions and read by pages on the other; beside the single-node
/// figures on SQLite and on PostgreSQL.
pub async fn run_cluster(
    options: StreamBenchOptions,
    database_url: &str,
) -> Result<(), BenchError> {
    println!(
        "runcell bench cluster: {} sessions x {} events, one every {} ms per session; database {}",
        options.sessions,
        options.events_per_session,
        options.interval.as_millis(),
        runcell_store::redact_database_url(database_url)
    );
    let mut rows = Vec::new();
    let single = Node::start(&options, None).await?;
    let measured = measure(&single, &single, &options).await;
    single.stop().await;
    rows.push(("one node, SQLite", measured?));
    let a = Node::start(&options, Some(database_url)).await?;
    let b = match Node::start(&options, Some(database_url)).await {
        Ok(b) => b,
        Err(e) => {
            a.stop().await;
            return Err(e);
        }
    };
    let same = measure(&a, &a, &options).await;
    let across = measure(&a, &b, &options).await;
    a.stop().await;
    b.stop().await;
    rows.push(("one node, PostgreSQL", same?));
    rows.push(("node A publishes, a page on node B", across?));
    println!();
    print_header();
    for (name, measured) in &rows {
        measured.print(name, "");
    }
    for (_, measured) in &rows {
        measured.check()?;
    }
    Ok(())
}

/// A node of the bench: the real router on `127.0.0.1:0`, the real store.
struct Node {
    state: AppState,
    database: runcell_store::Database,
    addr: std::net::SocketAddr,
    shutdown: CancellationToken,
    server: tokio::task::JoinHandle<Result<(), std::io::Error>>,
    cluster: Option<tokio::task::JoinHandle<()>>,
    _data: tempfile::TempDir,
}

impl Node {
    async fn start(
        options: &StreamBenchOptions,
        database_url: Option<&str>,
    ) -> Result<Self, BenchError> {
        let data = tempfile::tempdir().map_err(fail)?;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .map_err(fail)?;
        let addr = listener.local_addr().map_err(fail)?;
        let mut config = Config {
            addr,
            data_dir: data.path().join("data"),
            site_root: data.path().join("site"),
            database_url: database_url.unwrap_or_default().into(),
            sandbox: SandboxConfig {
                pool_size: 0,
                ..SandboxConfig::default()
            },
            ..Config::default()
        };
        config.llm.backend = LlmBackend::Scripted;
        // One owner opens every session of the bench.
        config.notebook.session_burst = u32::try_from(options.sessions)
            .unwrap_or(u32::MAX)
            .max(config.notebook.session_burst);
        let shutdown = CancellationToken::new();
        // The store is real: every event the bench publishes is also
        // written to it, as in the server.
        let (state, database) = AppState::open(config, shutdown.clone())
            .await
            .map_err(fail)?;
        let cluster = state
            .cluster
            .as_ref()
            .map(|cluster| cluster.spawn(shutdown.clone()));
        let app = runcell_server::http::router(state.clone());
        let server = tokio::spawn(
            axum::serve(listener, app)
                .with_graceful_shutdown(shutdown.clone().cancelled_owned())
                .into_future(),
        );
        Ok(Self {
            state,
            database,
            addr,
            shutdown,
            server,
            cluster,
            _data: data,
        })
    }

    async fn stop(self) {
        self.shutdown.cancel();
        let _ = self.server.await;
        self.state.notebooks.flush().await;
        if let Some(cluster) = self.cluster {
            let _ = cluster.await;
        }
        if let Some(cluster) = &self.state.cluster {
            cluster.leave().await;
        }
        self.database.close().await;
    }
}

/// What one measure saw.
struct Measured {
    latencies: Vec<Duration>,
    lost: u64,
    reordered: u64,
    wall: Duration,
    stored: usize,
    published: usize,
    flush_wait: Duration,
}

fn print_header() {
    println!(
        "{:<40} {:>9} {:>9} {:>9} {:>8} {:>6} {:>9}  target",
        "published -> parsed by a page (ms)", "p50", "p99", "max", "ev/s", "lost", "stored"
    );
}

impl Measured {
    fn print(&self, name: &str, target: &str) {
        let mut latencies = self.latencies.clone();
        let (p50, p99) = stats(&mut latencies);
        let max = latencies.last().copied().unwrap_or_default();
        println!(
            "{name:<40} {p50:>9.3} {p99:>9.3} {:>9.3} {:>8.0} {:>6} {:>9}  {target}",
            max.as_secs_f64() * 1000.0,
            latencies.len() as f64 / self.wall.as_secs_f64(),
            self.lost + self.reordered,
            format!("{}/{}", self.stored, self.published),
        );
        println!(
            "{:<40} store behind by {:.1} ms at the end",
            "",
            self.flush_wait.as_secs_f64() * 1000.0
        );
    }

    fn check(&self) -> Result<(), BenchError> {
        if self.stored != self.published {
            return Err(BenchError(format!(
                "{} of {} events were stored",
                self.stored, self.published
            )));
        }
        if self.lost + self.reordered > 0 {
            return Err(BenchError(format!(
                "{} events lost and {} out of order",
                self.lost, self.reordered
            )));
        }
        Ok(())
    }
}

/// Sessions made on `holder` publish; pages on `pages` read.
async fn measure(
    holder: &Node,
    pages: &Node,
    options: &StreamBenchOptions,
) -> Result<Measured, BenchError> {
    let store = holder.database.store();
    let owner = runcell_protocol::OwnerId::random();
    let cookie = runcell_server::http::owner::owner_cookie(owner, false);
    let cookie = cookie.split(';').next().unwrap_or_default().to_string();
    let base = Instant::now();
    let mut clients = Vec::new();
    let mut channels = Vec::new();
    let mut ids = Vec::new();
    for _ in 0..options.sessions {
        let channel = holder.state.notebooks.create(owner).await.map_err(fail)?;
        let id = channel.id();
        let url = format!("ws://{}/ws/sessions/{id}?after=0", pages.addr);
        let mut request = url.into_client_request().map_err(fail)?;
        request.headers_mut().insert(
            "sec-websocket-protocol",
            HeaderValue::from_static(SUBPROTOCOL),
        );
        request
            .headers_mut()
            .insert("cookie", HeaderValue::from_str(&cookie).map_err(fail)?);
        let (ws, _) = tokio_tungstenite::connect_async(request)
            .await
            .map_err(fail)?;
        // Each session: a cell started, then the events, then its end.
        let expected = options.events_per_session as u64 + 2;
        clients.push(tokio::spawn(read(ws, base, expected)));
        ids.push(id);
        channels.push(channel);
    }
    // Every client has its welcome before anything is published.
    tokio::time::sleep(Duration::from_millis(200)).await;

    let started = Instant::now();
    let publishers: Vec<_> = channels
        .into_iter()
        .map(|channel| {
            let events = options.events_per_session;
            let interval = options.interval;
            tokio::spawn(async move { publish(&channel, base, events, interval).await })
        })
        .collect();
    for publisher in publishers {
        publisher.await.map_err(fail)?;
    }
    let mut latencies = Vec::new();
    let (mut lost, mut reordered) = (0, 0);
    for client in clients {
        let seen = tokio::time::timeout(Duration::from_secs(60), client)
            .await
            .map_err(|_| BenchError("a client did not get all its events in 60 s".into()))?
            .map_err(fail)??;
        latencies.extend(seen.latencies);
        lost += seen.lost;
        reordered += seen.reordered;
    }
    let wall = started.elapsed();
    // Every event was also stored: wait for the writer, count.
    let flushing = Instant::now();
    holder.state.notebooks.flush().await;
    let flush_wait = flushing.elapsed();
    let mut stored = 0;
    for id in &ids {
        stored += store.events(*id).await.map_err(fail)?.len();
    }
    Ok(Measured {
        latencies,
        lost,
        reordered,
        wall,
        stored,
        published: ids.len() * (options.events_per_session + 2),
        flush_wait,
    })
}

/// Publishes a code cell's tokens and a result's stdout chunks, half each,
/// every one carrying its publication time (ns since `base`).
async fn publish(
    channel: &runcell_agent::session::SessionChannel,
    base: Instant,
    events: usize,
    interval: Duration,
) {
    let cell_id: CellId = channel.log().next_cell_id();
    channel.log().publish(EventBody::CellStarted {
        cell_id,
        cell_kind: CellKind::Code,
        language: Some("python".into()),
        attempt: Some(1),
        source: None,
    });
    // `interval` panics on zero.
    let mut ticker = tokio::time::interval(interval.max(Duration::from_micros(50)));
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    for i in 0..events {
        ticker.tick().await;
        let stamp = base.elapsed().as_nanos().to_string();
        let body = if i % 2 == 0 {
            EventBody::CellDelta {
                cell_id,
                text: stamp,
                highlight: None,
            }
        } else {
            EventBody::CellOutput {
                cell_id,
                output: Output::Stdout { text: stamp },
            }
        };
        channel.log().publish(body);
    }
    channel.log().publish(EventBody::CellFinished {
        cell_id,
        status: runcell_protocol::CellStatus::Ok,
        elapsed_ms: 0,
        error: None,
    });
}

type Socket =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// Reads frames until `expected` events have arrived.
async fn read(mut ws: Socket, base: Instant, expected: u64) -> Result<Seen, BenchError> {
    let mut seen = Seen {
        latencies: Vec::new(),
        lost: 0,
        reordered: 0,
    };
    let mut last_seq = 0;
    let mut events = 0;
    while events < expected {
        let Some(frame) = ws.next().await else {
            return Err(BenchError("the server closed a socket".into()));
        };
        let Message::Text(text) = frame.map_err(fail)? else {
            continue;
        };
        let message: ServerMessage = serde_json::from_str(text.as_str()).map_err(fail)?;
        let ServerMessage::Event(event) = message else {
            continue;
        };
        let now = base.elapsed();
        events += 1;
        if event.seq <= last_seq {
            seen.reordered += 1;
        } else if event.seq > last_seq + 1 {
            seen.lost += event.seq - last_seq - 1;
        }
        last_seq = last_seq.max(event.seq);
        let stamp = match &event.event {
            EventBody::CellDelta { text, .. }
            | EventBody::CellOutput {
                output: Output::Stdout { text },
                ..
            } => text.parse::<u64>().ok(),
            _ => None,
        };
        if let Some(ns) = stamp {
            seen.latencies
                .push(now.saturating_sub(Duration::from_nanos(ns)));
        }
    }
    Ok(seen)
}
