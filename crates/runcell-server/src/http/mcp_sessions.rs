//! The MCP sessions of `/mcp`, each bound to the API key that opened it:
//! at most `auth.mcp_sessions_per_key` per key (all of a person's keys
//! together count as one: [`crate::auth::Caller::budget`]), closed after
//! `auth.mcp_session_idle_secs` unused or when the key is revoked, and
//! forgotten once closed, so that nothing a key opens outlives its use.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{SessionId, SessionManager};
use tokio_util::sync::CancellationToken;

/// How often idle sessions are looked for, at most and at least.
const SWEEP_LONGEST: Duration = Duration::from_secs(30);
const SWEEP_SHORTEST: Duration = Duration::from_millis(250);

struct Bound {
    key: String,
    /// Whose budget it counts in.
    budget: String,
    last_used: Instant,
}

#[derive(Default)]
struct Held {
    by_id: HashMap<String, Bound>,
    /// Sessions being opened, per budget: counted with the open ones, so
    /// that opens at once cannot all pass the cap.
    opening: HashMap<String, usize>,
}

pub struct McpSessions {
    manager: Arc<LocalSessionManager>,
    per_key: usize,
    idle: Duration,
    held: Arc<Mutex<Held>>,
}

impl std::fmt::Debug for McpSessions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpSessions")
            .field("per_key", &self.per_key)
            .field("idle", &self.idle)
            .finish_non_exhaustive()
    }
}

/// A key's session being opened, counted until dropped.
pub struct Opening {
    held: Arc<Mutex<Held>>,
    key: String,
    budget: String,
}

impl Drop for Opening {
    fn drop(&mut self) {
        let mut held = self.held.lock();
        if let Some(pending) = held.opening.get_mut(&self.budget) {
            *pending = pending.saturating_sub(1);
            if *pending == 0 {
                held.opening.remove(&self.budget);
            }
        }
    }
}

/// Whose a session named in a request is.
#[derive(Debug, PartialEq, Eq)]
pub enum Whose {
    /// The caller's (now marked used), or one we do not know (rmcp answers).
    Callers,
    /// Another key's: not found, for the caller.
    Other,
}

impl McpSessions {
    pub fn new(per_key: usize, idle: Duration) -> Arc<Self> {
        let mut manager = LocalSessionManager::default();
        // rmcp's own idle timeout is ours: its worker ends with the session.
        manager.session_config.keep_alive = Some(idle);
        Arc::new(Self {
            manager: Arc::new(manager),
            per_key: per_key.max(1),
            idle,
            held: Arc::new(Mutex::new(Held::default())),
        })
    }

    /// As the configuration says.
    pub fn from_config(auth: &crate::config::AuthConfig) -> Arc<Self> {
        Self::new(
            usize::try_from(auth.mcp_sessions_per_key).unwrap_or(usize::MAX),
            Duration::from_secs(auth.mcp_session_idle_secs),
        )
    }

    /// The session manager `/mcp` serves its sessions from.
    pub fn manager(&self) -> Arc<LocalSessionManager> {
        Arc::clone(&self.manager)
    }

    /// The most sessions one key may hold.
    pub fn per_key(&self) -> usize {
        self.per_key
    }

    /// Whose session `id` is, marking it used if it is `key`'s.
    pub fn used(&self, id: &str, key: &str) -> Whose {
        match self.held.lock().by_id.get_mut(id) {
            Some(bound) if bound.key != key => Whose::Other,
            Some(bound) => {
                bound.last_used = Instant::now();
                Whose::Callers
            }
            None => Whose::Callers,
        }
    }

    /// Room for one more session of `key`'s, counted in `budget` (the
    /// key's own, or its person's), or `None` when the budget holds as many
    /// as it may.
    pub fn begin_open(&self, key: &str, budget: &str) -> Option<Opening> {
        let mut held = self.held.lock();
        let open = held.by_id.values().filter(|b| b.budget == budget).count();
        let pending = held.opening.get(budget).copied().unwrap_or(0);
        if open + pending >= self.per_key {
            return None;
        }
        *held.opening.entry(budget.to_string()).or_insert(0) += 1;
        Some(Opening {
            held: Arc::clone(&self.held),
            key: key.to_string(),
            budget: budget.to_string(),
        })
    }

    /// Session `id` was opened by `key` (ending its `Opening`).
    pub fn opened(&self, id: &str, opening: Opening) {
        self.held.lock().by_id.insert(
            id.to_string(),
            Bound {
                key: opening.key.clone(),
                budget: opening.budget.clone(),
                last_used: Instant::now(),
            },
        );
        drop(opening);
    }

    /// Session `id` was closed by its client.
    pub fn forget(&self, id: &str) {
        self.held.lock().by_id.remove(id);
    }

    /// The sessions `key` holds.
    pub fn count_of(&self, key: &str) -> usize {
        self.held
            .lock()
            .by_id
            .values()
            .filter(|b| b.key == key)
            .count()
    }

    /// Closes every session of `key`'s (it was revoked); how many.
    pub async fn close_key(&self, key: &str) -> usize {
        self.close_where(|_, b| b.key == key).await
    }

    /// Closes the sessions unused for longer than the idle time, and
    /// forgets those rmcp ended itself; how many.
    pub async fn close_idle(&self) -> usize {
        let live: std::collections::HashSet<String> = self
            .manager
            .sessions
            .read()
            .await
            .keys()
            .map(ToString::to_string)
            .collect();
        self.close_where(|id, b| b.last_used.elapsed() > self.idle || !live.contains(id))
            .await
    }

    /// Forgets the sessions `which` picks, then closes them; how many.
    async fn close_where(&self, which: impl Fn(&str, &Bound) -> bool) -> usize {
        let ids: Vec<String> = {
            let mut held = self.held.lock();
            let ids: Vec<String> = held
                .by_id
                .iter()
                .filter(|(id, b)| which(id, b))
                .map(|(id, _)| id.clone())
                .collect();
            for id in &ids {
                held.by_id.remove(id);
            }
            ids
        };
        self.close_all(&ids).await;
        ids.len()
    }

    async fn close_all(&self, ids: &[String]) {
        for id in ids {
            let id: SessionId = id.as_str().into();
            if let Err(err) = self.manager.close_session(&id).await {
                tracing::debug!(%err, "an MCP session was gone already");
            }
        }
    }

    /// Closes idle sessions until `shutdown`.
    pub fn spawn_maintenance(self: &Arc<Self>, shutdown: CancellationToken) {
        let this = Arc::clone(self);
        let every = (self.idle / 4).clamp(SWEEP_SHORTEST, SWEEP_LONGEST);
        tokio::spawn(async move {
            let mut sweep = tokio::time::interval(every);
            loop {
                tokio::select! {
                    () = shutdown.cancelled() => break,
                    _ = sweep.tick() => {
                        let closed = this.close_idle().await;
                        if closed > 0 {
                            tracing::info!(closed, "closed idle MCP sessions");
                        }
                    }
                }
            }
        });
    }
}

#[async_trait::async_trait]
impl crate::auth::revocation::HeldByKey for McpSessions {
    fn what(&self) -> &'static str {
        "MCP sessions"
    }

    async fn close_key(&self, key_id: &str) -> usize {
        McpSessions::close_key(self, key_id).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_key_holds_a_few_sessions_and_idle_ones_are_forgotten() {
        let sessions = McpSessions::new(2, Duration::from_millis(50));
        let first = sessions.begin_open("k", "k").expect("room");
        let second = sessions.begin_open("k", "k").expect("room");
        assert!(
            sessions.begin_open("k", "k").is_none(),
            "opening ones count"
        );
        assert!(sessions.begin_open("other", "other").is_some());
        sessions.opened("a", first);
        drop(second);
        assert_eq!(sessions.count_of("k"), 1);
        assert_eq!(sessions.used("a", "other"), Whose::Other);
        assert_eq!(sessions.used("a", "k"), Whose::Callers);
        tokio::time::sleep(Duration::from_millis(80)).await;
        assert_eq!(sessions.close_idle().await, 1);
        assert_eq!(sessions.count_of("k"), 0);
        sessions.opened("b", sessions.begin_open("k", "k").expect("room again"));
        assert_eq!(sessions.close_key("k").await, 1);
        assert_eq!(sessions.count_of("k"), 0);
    }

    #[test]
    fn a_persons_keys_share_one_budget() {
        let sessions = McpSessions::new(2, Duration::from_secs(60));
        sessions.opened("a", sessions.begin_open("k1", "user:p").expect("room"));
        sessions.opened("b", sessions.begin_open("k2", "user:p").expect("room"));
        assert!(
            sessions.begin_open("k3", "user:p").is_none(),
            "a third key of the same person finds the budget spent"
        );
        assert!(sessions.begin_open("k4", "user:q").is_some());
        assert_eq!(
            sessions.used("a", "k2"),
            Whose::Other,
            "still each key's own"
        );
    }
}
