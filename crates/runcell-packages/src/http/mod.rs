//! The jail-facing HTTP side, on hyper itself: three routes that parse,
//! ask the index and map its answer ([`answer`]), and the listener that
//! serves them for one account.

mod answer;
mod respond;
mod route;

#[cfg(test)]
mod tests;

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use tokio::net::TcpListener;
use tokio::task::JoinSet;

pub(crate) use answer::answer;
pub use respond::ResponseBody;

use crate::PackageIndex;
use crate::account::Account;

/// How long a request head may take, and a kept-alive connection may idle.
const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(30);
/// How long the listener waits after `accept` fails before it tries again.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(100);

/// Serves the index on `listener` for `account`, over HTTP/1 only (one
/// request at a time per connection: HTTP/2's many streams on one
/// connection would let a jail past the connection cap): at most
/// [`crate::account::MAX_CONNECTIONS`] connections of the account's at once,
/// over all its listeners (a session has one for each of its jails); a
/// connection over that is taken and waits for one to end (the next ones
/// wait in the listen queue). Each ends when this future is dropped.
///
/// The permit is asked for after `accept`, never before: a listener idle
/// in `accept` holds none, so a session with more jails than permits (its
/// kernels, contexts and a command) still has them all for the one that
/// installs.
pub(crate) async fn serve(index: Arc<PackageIndex>, listener: TcpListener, account: Arc<Account>) {
    let service = {
        let account = Arc::clone(&account);
        service_fn(move |request: http::Request<Incoming>| {
            let (index, account) = (Arc::clone(&index), Arc::clone(&account));
            async move { Ok::<_, Infallible>(answer(&index, &account, request).await) }
        })
    };
    let mut builder = auto::Builder::new(TokioExecutor::new()).http1_only();
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(HEADER_READ_TIMEOUT);
    let mut connections = JoinSet::new();
    loop {
        while connections.try_join_next().is_some() {}
        let stream = match listener.accept().await {
            Ok((stream, _)) => stream,
            Err(err) if is_transient(&err) => {
                tracing::warn!(%err, account = account.label(), "the package index's listener failed to accept");
                tokio::time::sleep(ACCEPT_BACKOFF).await;
                continue;
            }
            Err(err) => {
                tracing::warn!(%err, account = account.label(), "the package index's listener failed");
                return;
            }
        };
        let Ok(permit) = Arc::clone(&account.connections).acquire_owned().await else {
            return;
        };
        let connection = builder
            .serve_connection(TokioIo::new(stream), service.clone())
            .into_owned();
        connections.spawn(async move {
            if let Err(err) = connection.await {
                tracing::debug!(%err, "a package index connection ended with an error");
            }
            drop(permit);
        });
    }
}

/// Whether `accept` failed for this once (a connection gone before it was
/// taken, or out of descriptors or memory for now) rather than for good.
fn is_transient(err: &std::io::Error) -> bool {
    use std::io::ErrorKind;
    matches!(
        err.kind(),
        ErrorKind::ConnectionAborted
            | ErrorKind::ConnectionReset
            | ErrorKind::Interrupted
            | ErrorKind::WouldBlock
    ) || matches!(err.raw_os_error(), Some(12 | 23 | 24 | 105))
}
