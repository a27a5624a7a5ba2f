//! Revocation on live connections: a key's tokens stop working at once, but
//! what it opened before (a Jupyter socket and kernel, an MCP session, an
//! E2B sandbox, a `/v1` session) would keep running code. A watch looks at
//! the key store every `auth.revocation_check_secs` for revoked keys, and
//! closes whatever of theirs is still open here. It reads the store rather
//! than waiting for an event, so a key revoked by `runcell keys revoke`
//! (another process) or on another node sharing PostgreSQL is seen too, and
//! it reads only the keys revoked since its last look (an index on
//! `revoked_ms`), never every key each time: a person who made thousands of
//! keys costs each node nothing per tick.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
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
    // The first look reads every revoked key; later ones from the last.
    let since = Arc::new(AtomicU64::new(0));
    spawn_every(every, shutdown, move || {
        let (auth, holders, since) = (Arc::clone(&auth), Arc::clone(&holders), Arc::clone(&since));
        async move {
            let from = since.load(Ordering::Relaxed);
            if let Some(next) = close_revoked(&auth, &holders, from).await {
                since.store(next, Ordering::Relaxed);
            }
        }
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

/// How far before the last look the next one reads again: a node whose
/// clock is behind this one's may write a revocation time a little in the
/// past, and such a key must not slip between two looks.
const CLOCK_MARGIN_MS: u64 = 120_000;

/// One look: the live things of every key revoked since `since_ms` are
/// closed. What the next look reads from; `None` if the store could not be
/// read (the next look reads from `since_ms` again).
pub async fn close_revoked(
    auth: &Auth,
    holders: &[Arc<dyn HeldByKey>],
    since_ms: u64,
) -> Option<u64> {
    let looked_at = runcell_core::clock::now_ms();
    let revoked = match auth.revoked_key_ids_since(since_ms).await {
        Ok(revoked) => revoked,
        Err(err) => {
            tracing::warn!(%err, "cannot read the revoked keys");
            return None;
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
    Some(looked_at.saturating_sub(CLOCK_MARGIN_MS))
}
