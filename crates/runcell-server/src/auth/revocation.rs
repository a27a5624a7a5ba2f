//! Revocation on live connections: a key's tokens stop working at once, but
//! what it opened before (a Jupyter socket and kernel, an MCP session, an
//! E2B sandbox, a `/v1` session) would keep running code. A watch looks at
//! the key store every `auth.revocation_check_secs` for revoked keys, and
//! closes whatever of theirs is still open here. It reads the store rather
//! than waiting for an event, so a key revoked by `runcell keys revoke`
//! (another process) or on another node sharing PostgreSQL is seen too.

use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::Auth;

pub use runcell_core::HeldByKey;

/// Closes what revoked keys hold, every `every`, until `shutdown`.
pub fn spawn_watch(
    auth: Arc<Auth>,
    holders: Vec<Arc<dyn HeldByKey>>,
    every: Duration,
    shutdown: CancellationToken,
) -> tokio::task::JoinHandle<()> {
    let holders: Arc<[Arc<dyn HeldByKey>]> = holders.into();
    spawn_every(every, shutdown, move || {
        let (auth, holders) = (Arc::clone(&auth), Arc::clone(&holders));
        async move { close_revoked(&auth, &holders).await }
    })
}

/// Runs `look` at once and then every `every` (a late look delays the
/// next, never doubles it), until `shutdown`: the store watches' loop.
pub fn spawn_every<F, Fut>(
    every: Duration,
    shutdown: CancellationToken,
    mut look: F,
) -> tokio::task::JoinHandle<()>
where
    F: FnMut() -> Fut + Send + 'static,
    Fut: Future<Output = ()> + Send,
{
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(every);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                () = shutdown.cancelled() => break,
                _ = tick.tick() => look().await,
            }
        }
    })
}

/// One look: every revoked key's live things are closed.
pub async fn close_revoked(auth: &Auth, holders: &[Arc<dyn HeldByKey>]) {
    let revoked = match auth.revoked_key_ids().await {
        Ok(revoked) => revoked,
        Err(err) => {
            tracing::warn!(%err, "cannot read the revoked keys");
            return;
        }
    };
    for key in &revoked {
        for holder in holders {
            let closed = holder.close_key(key).await;
            if closed > 0 {
                tracing::info!(
                    key = %key,
                    closed,
                    what = holder.what(),
                    "closed what a revoked key held"
                );
            }
        }
    }
}
