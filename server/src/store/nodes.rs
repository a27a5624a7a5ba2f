//! The nodes on a shared database. Sessions cannot move between nodes yet
//! (a node keeps a session's kernel, its live feed and the next `seq` in
//! memory), so a second node on the same PostgreSQL database would record a
//! live session as cut short and write into its log: a node claims the
//! database as its only live node, keeps the claim fresh with a heartbeat,
//! and a second one refuses to start, naming the first. A node that died
//! without a word is taken over once its heartbeat is [`STALE_AFTER_MS`] old.

use std::time::Duration;

use sqlx::Row;
use tokio_util::sync::CancellationToken;

use super::{PostgresStore, StoreError};

/// A node's heartbeat, this often.
pub const HEARTBEAT: Duration = Duration::from_secs(5);
/// A node whose last heartbeat is this old is gone.
pub const STALE_AFTER_MS: i64 = 20_000;

/// The database's clock in milliseconds (one clock for every node).
const NOW_MS: &str = "(EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::BIGINT";

/// This process as a node.
#[derive(Clone, Debug)]
pub struct Node {
    pub id: String,
    pub addr: String,
}

impl Node {
    pub fn new(addr: &str) -> Self {
        Self {
            id: uuid::Uuid::new_v4().to_string(),
            addr: addr.to_string(),
        }
    }
}

impl PostgresStore {
    /// Claims the database for `node`: refused ([`StoreError::NodeBusy`])
    /// while another node's heartbeat is fresh.
    pub async fn claim_sole_node(&self, node: &Node) -> Result<(), StoreError> {
        let mut tx = self.pool.begin().await?;
        // One claim at a time, whoever comes.
        sqlx::query("LOCK TABLE nodes IN EXCLUSIVE MODE")
            .execute(&mut *tx)
            .await?;
        sqlx::query(&format!("DELETE FROM nodes WHERE seen_ms < {NOW_MS} - $1"))
            .bind(STALE_AFTER_MS)
            .execute(&mut *tx)
            .await?;
        let other = sqlx::query(&format!(
            "SELECT id, addr, {NOW_MS} - seen_ms AS age_ms FROM nodes WHERE id <> $1 LIMIT 1"
        ))
        .bind(&node.id)
        .fetch_optional(&mut *tx)
        .await?;
        if let Some(row) = other {
            return Err(StoreError::NodeBusy {
                addr: row.try_get("addr")?,
                seen_ms_ago: row.try_get("age_ms")?,
            });
        }
        sqlx::query(&format!(
            "INSERT INTO nodes (id, addr, started_ms, seen_ms) VALUES ($1, $2, {NOW_MS}, {NOW_MS})
             ON CONFLICT (id) DO UPDATE SET seen_ms = excluded.seen_ms"
        ))
        .bind(&node.id)
        .bind(super::postgres::text(&node.addr))
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(())
    }

    /// Renews the claim; false if it was lost (taken over as stale).
    pub async fn heartbeat(&self, node: &Node) -> Result<bool, StoreError> {
        let done = sqlx::query(&format!(
            "UPDATE nodes SET seen_ms = {NOW_MS} WHERE id = $1"
        ))
        .bind(&node.id)
        .execute(&self.pool)
        .await?;
        Ok(done.rows_affected() > 0)
    }

    /// Gives the claim up (a clean stop), so the next node need not wait.
    pub async fn release_node(&self, node: &Node) -> Result<(), StoreError> {
        sqlx::query("DELETE FROM nodes WHERE id = $1")
            .bind(&node.id)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    /// Keeps `node`'s claim fresh until `shutdown`. A lost claim (another
    /// node took over after a long silence) or a database that does not
    /// answer is logged.
    pub fn spawn_heartbeat(
        self: std::sync::Arc<Self>,
        node: Node,
        shutdown: CancellationToken,
    ) -> tokio::task::JoinHandle<()> {
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(HEARTBEAT);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tokio::select! {
                    biased;
                    () = shutdown.cancelled() => break,
                    _ = tick.tick() => {}
                }
                match self.heartbeat(&node).await {
                    Ok(true) => {}
                    Ok(false) => tracing::error!(
                        node = %node.id,
                        "this node's claim on the database was taken over (its heartbeat was late); stop it"
                    ),
                    Err(e) => tracing::warn!(error = %e, "the database missed a heartbeat"),
                }
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::super::scratch::ScratchDatabase;
    use super::*;

    #[tokio::test]
    async fn one_live_node_at_a_time_and_a_dead_one_is_taken_over() {
        let Some(db) = ScratchDatabase::create("nodes").await else {
            return;
        };
        let store = PostgresStore::open(&db.url).await.unwrap();
        let a = Node::new("127.0.0.1:1001");
        let b = Node::new("127.0.0.1:1002");
        store.claim_sole_node(&a).await.unwrap();
        // Claiming again (a retry) is fine; another node is refused by name.
        store.claim_sole_node(&a).await.unwrap();
        let Err(StoreError::NodeBusy { addr, .. }) = store.claim_sole_node(&b).await else {
            panic!("a second node claimed the database");
        };
        assert_eq!(addr, "127.0.0.1:1001");
        assert!(store.heartbeat(&a).await.unwrap());

        // A clean stop frees it at once.
        store.release_node(&a).await.unwrap();
        store.claim_sole_node(&b).await.unwrap();
        assert!(!store.heartbeat(&a).await.unwrap());

        // A node that died without a word: once its heartbeat is stale, the
        // next one takes over.
        sqlx::query("UPDATE nodes SET seen_ms = seen_ms - $1")
            .bind(STALE_AFTER_MS + 1)
            .execute(&store.pool)
            .await
            .unwrap();
        store.claim_sole_node(&a).await.unwrap();
        assert!(
            !store.heartbeat(&b).await.unwrap(),
            "b's claim was taken over"
        );
        store.close().await;
        db.drop_now().await;
    }
}
