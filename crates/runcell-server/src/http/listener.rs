//! The listener: accepts connections under a cap (in all, and per client
//! address), serves each with hyper under a header-read timeout (which also
//! ends a keep-alive connection left idle), a small header buffer and an
//! idle timeout on request bodies, and closes them all on shutdown.
//!
//! What a stranger can make the server hold before any route or key is
//! checked is bounded here: at most `max_connections` sockets, each with at
//! most `max_header_bytes` of unparsed request, for at most
//! `header_read_timeout` while its request head is incomplete, or while it
//! sends nothing with no request under way (before its first request, or
//! kept alive between two). A connection over a cap gets a `503` with
//! `Retry-After` and is closed at once.

use std::collections::HashMap;
use std::future::Future;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::Router;
use axum::extract::ConnectInfo;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::time::{Instant, Sleep};
use tokio_util::sync::CancellationToken;
use tower::ServiceBuilder;
use tower_http::timeout::RequestBodyTimeoutLayer;

use crate::config::HttpConfig;

/// How long a refused connection is given to take its `503`.
const REFUSAL_WRITE: Duration = Duration::from_secs(1);

/// How long live connections get to finish once shutdown begins.
const CLOSE_GRACE: Duration = Duration::from_secs(2);

/// How long the listener waits after `accept` fails (out of descriptors,
/// say) before it tries again, so that a flood cannot spin it.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(100);

/// The answer to a connection over a cap: written whole, then closed.
const REFUSAL: &[u8] = b"HTTP/1.1 503 Service Unavailable\r\n\
content-type: application/json\r\n\
retry-after: 1\r\n\
connection: close\r\n\
content-length: 88\r\n\
\r\n\
{\"error\":{\"code\":\"unavailable\",\"message\":\"too many connections; try again in a second\"}}";

/// The bounds on connections, from the `[http]` settings.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConnectionLimits {
    /// Connections open at once, from everyone.
    pub max_connections: usize,
    /// Connections open at once from one client address (an IPv6 client's
    /// whole /64).
    pub max_per_address: usize,
    /// How long a request's head may take to arrive, and how long a
    /// keep-alive connection may wait for its next request.
    pub header_read_timeout: Duration,
    /// How long a request body may go without sending a byte.
    pub body_idle_timeout: Duration,
    /// The most bytes of request head kept for one connection.
    pub max_header_bytes: usize,
}

impl From<&HttpConfig> for ConnectionLimits {
    fn from(http: &HttpConfig) -> Self {
        Self {
            max_connections: http.max_connections,
            max_per_address: http.max_connections_per_address,
            header_read_timeout: Duration::from_secs(http.header_read_timeout_secs),
            body_idle_timeout: Duration::from_secs(http.body_idle_timeout_secs),
            // hyper's smallest read buffer is 8 KiB.
            max_header_bytes: (http.max_header_kib.saturating_mul(1024)).max(8192),
        }
    }
}

/// Serves `app` on `listener` until `shutdown` is cancelled; then stops
/// accepting, asks every connection to close and gives them [`CLOSE_GRACE`].
pub async fn serve(
    listener: TcpListener,
    app: Router,
    limits: ConnectionLimits,
    shutdown: CancellationToken,
) {
    let counts = Counts::default();
    let graceful = GracefulShutdown::new();
    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_read_timeout)
        .max_buf_size(limits.max_header_bytes);
    builder
        .http2()
        .timer(TokioTimer::new())
        .max_header_list_size(u32::try_from(limits.max_header_bytes).unwrap_or(u32::MAX))
        .max_concurrent_streams(64)
        .keep_alive_interval(Some(limits.header_read_timeout))
        .keep_alive_timeout(limits.header_read_timeout);
    loop {
        let (stream, peer) = tokio::select! {
            () = shutdown.cancelled() => break,
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(err) => {
                    // Out of descriptors, or a connection reset before it
                    // was taken: the listener lives on.
                    tracing::warn!(%err, "accepting a connection failed");
                    tokio::time::sleep(ACCEPT_BACKOFF).await;
                    continue;
                }
            },
        };
        let Some(slot) = counts.admit(peer.ip(), &limits) else {
            runcell_core::metrics::connection_refused();
            tokio::spawn(refuse(stream));
            continue;
        };
        let _ = stream.set_nodelay(true);
        let activity = Arc::new(Activity::default());
        let busy = Arc::clone(&activity);
        let service = ServiceBuilder::new()
            .map_future(move |answer| Busy::track(Arc::clone(&busy), answer))
            .layer(axum::Extension(ConnectInfo(peer)))
            .layer(RequestBodyTimeoutLayer::new(limits.body_idle_timeout))
            .service(app.clone());
        let stream = IdleIo::new(stream, activity, limits.header_read_timeout);
        let connection = builder
            .serve_connection_with_upgrades(TokioIo::new(stream), TowerToHyperService::new(service))
            .into_owned();
        let connection = graceful.watch(connection);
        tokio::spawn(async move {
            if let Err(err) = connection.await {
                tracing::debug!(%err, "connection ended with an error");
            }
            drop(slot);
        });
    }
    drop(listener);
    if tokio::time::timeout(CLOSE_GRACE, graceful.shutdown())
        .await
        .is_err()
    {
        tracing::debug!("some connections did not close in time");
    }
}

/// Tells a connection over a cap so, and closes it.
async fn refuse(mut stream: TcpStream) {
    let _ = tokio::time::timeout(REFUSAL_WRITE, async {
        stream.write_all(REFUSAL).await?;
        stream.shutdown().await
    })
    .await;
}

/// What a connection is doing, as its reads need to know: how many of its
/// requests are under way (from their head to the end of their answer's
/// body), and whether it has become a WebSocket (which keeps its own time).
#[derive(Default)]
struct Activity {
    requests: AtomicUsize,
    upgraded: AtomicBool,
}

/// One request under way on a connection, until its answer's body ends.
struct Busy(Arc<Activity>);

impl Busy {
    fn new(activity: Arc<Activity>) -> Self {
        activity.requests.fetch_add(1, Ordering::SeqCst);
        Self(activity)
    }

    /// Counts a request from its start to the end of its answer.
    fn track<F, E>(
        activity: Arc<Activity>,
        answer: F,
    ) -> impl Future<Output = Result<axum::response::Response, E>> + Send + 'static
    where
        F: Future<Output = Result<axum::response::Response, E>> + Send + 'static,
    {
        let busy = Self::new(activity);
        async move {
            let response = answer.await?;
            if response.status() == axum::http::StatusCode::SWITCHING_PROTOCOLS {
                busy.0.upgraded.store(true, Ordering::SeqCst);
            }
            let (parts, body) = response.into_parts();
            Ok(axum::response::Response::from_parts(
                parts,
                axum::body::Body::new(BusyBody { body, _busy: busy }),
            ))
        }
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        self.0.requests.fetch_sub(1, Ordering::SeqCst);
    }
}

/// An answer's body that keeps its request counted until it is dropped.
struct BusyBody {
    body: axum::body::Body,
    _busy: Busy,
}

impl http_body::Body for BusyBody {
    type Data = bytes::Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Self::Data>, Self::Error>>> {
        Pin::new(&mut self.body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.body.size_hint()
    }
}

/// A connection's socket that fails its read once it has been silent for
/// `idle` with no request under way, which makes hyper close it. hyper's
/// own header-read timeout starts only at a head's first byte; this covers
/// a connection that never sends one.
struct IdleIo {
    stream: TcpStream,
    activity: Arc<Activity>,
    idle: Duration,
    deadline: Pin<Box<Sleep>>,
    armed: bool,
}

impl IdleIo {
    fn new(stream: TcpStream, activity: Arc<Activity>, idle: Duration) -> Self {
        Self {
            stream,
            activity,
            idle,
            deadline: Box::pin(tokio::time::sleep(idle)),
            armed: false,
        }
    }

    fn waiting_for_a_request(&self) -> bool {
        self.activity.requests.load(Ordering::SeqCst) == 0
            && !self.activity.upgraded.load(Ordering::SeqCst)
    }
}

impl AsyncRead for IdleIo {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let this = &mut *self;
        match Pin::new(&mut this.stream).poll_read(cx, buf) {
            Poll::Ready(read) => {
                this.armed = false;
                Poll::Ready(read)
            }
            Poll::Pending if this.waiting_for_a_request() => {
                if !this.armed {
                    this.armed = true;
                    let at = Instant::now() + this.idle;
                    this.deadline.as_mut().reset(at);
                }
                match this.deadline.as_mut().poll(cx) {
                    Poll::Ready(()) => Poll::Ready(Err(std::io::Error::new(
                        std::io::ErrorKind::TimedOut,
                        "idle connection",
                    ))),
                    Poll::Pending => Poll::Pending,
                }
            }
            Poll::Pending => {
                this.armed = false;
                Poll::Pending
            }
        }
    }
}

impl AsyncWrite for IdleIo {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.stream).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.stream).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.stream).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.stream).poll_shutdown(cx)
    }
}

/// The connections open, in all and per client address.
#[derive(Clone, Default)]
struct Counts(Arc<Mutex<CountsInner>>);

#[derive(Default)]
struct CountsInner {
    total: usize,
    by_address: HashMap<IpAddr, usize>,
}

impl Counts {
    /// A slot for a connection from `ip`, or `None` when a cap is reached.
    fn admit(&self, ip: IpAddr, limits: &ConnectionLimits) -> Option<Slot> {
        let key = address_key(ip);
        let mut inner = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let from_address = inner.by_address.get(&key).copied().unwrap_or(0);
        if inner.total >= limits.max_connections || from_address >= limits.max_per_address {
            return None;
        }
        inner.total += 1;
        *inner.by_address.entry(key).or_insert(0) += 1;
        runcell_core::metrics::connections_open(inner.total);
        Some(Slot {
            counts: self.clone(),
            key,
        })
    }
}

/// One admitted connection; dropping it frees its place.
struct Slot {
    counts: Counts,
    key: IpAddr,
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut inner = self
            .counts
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        inner.total = inner.total.saturating_sub(1);
        if let Some(count) = inner.by_address.get_mut(&self.key) {
            *count = count.saturating_sub(1);
            if *count == 0 {
                inner.by_address.remove(&self.key);
            }
        }
        runcell_core::metrics::connections_open(inner.total);
    }
}

pub(crate) use runcell_core::address_key;

/// The client address of a request, as the listener saw it.
pub fn peer_of(request: &axum::extract::Request) -> Option<SocketAddr> {
    request
        .extensions()
        .get::<ConnectInfo<SocketAddr>>()
        .map(|ConnectInfo(addr)| *addr)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits(total: usize, per_address: usize) -> ConnectionLimits {
        ConnectionLimits {
            max_connections: total,
            max_per_address: per_address,
            header_read_timeout: Duration::from_secs(1),
            body_idle_timeout: Duration::from_secs(1),
            max_header_bytes: 8192,
        }
    }

    #[test]
    fn caps_hold_in_all_and_per_address_and_free_on_drop() {
        let counts = Counts::default();
        let limits = limits(3, 2);
        let a: IpAddr = "127.0.0.2".parse().unwrap();
        let b: IpAddr = "127.0.0.3".parse().unwrap();
        let first = counts.admit(a, &limits).unwrap();
        let _second = counts.admit(a, &limits).unwrap();
        assert!(counts.admit(a, &limits).is_none(), "two per address");
        let _third = counts.admit(b, &limits).unwrap();
        assert!(counts.admit(b, &limits).is_none(), "three in all");
        drop(first);
        assert!(
            counts.admit(b, &limits).is_some(),
            "a closed connection frees its place"
        );
    }

    #[test]
    fn an_ipv6_client_is_counted_by_its_64() {
        let one: IpAddr = "2001:db8:1:2:aaaa::1".parse().unwrap();
        let other: IpAddr = "2001:db8:1:2:bbbb::9".parse().unwrap();
        let elsewhere: IpAddr = "2001:db8:1:3::1".parse().unwrap();
        assert_eq!(address_key(one), address_key(other));
        assert_ne!(address_key(one), address_key(elsewhere));
        let mapped: IpAddr = "::ffff:127.0.0.1".parse().unwrap();
        assert_eq!(address_key(mapped), "127.0.0.1".parse::<IpAddr>().unwrap());
    }

    #[test]
    fn the_refusal_is_a_whole_http_response() {
        let text = std::str::from_utf8(REFUSAL).unwrap();
        let (head, body) = text.split_once("\r\n\r\n").unwrap();
        assert!(head.starts_with("HTTP/1.1 503 "));
        assert!(
            head.contains(&format!("content-length: {}", body.len())),
            "{head}"
        );
        let parsed: serde_json::Value = serde_json::from_str(body).unwrap();
        assert_eq!(parsed["error"]["code"], "unavailable");
    }
}
