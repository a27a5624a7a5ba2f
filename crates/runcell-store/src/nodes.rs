//! The runcell nodes on a shared PostgreSQL database and the sessions each
//! holds. A node joins at start and heartbeats every [`HEARTBEAT`]; a
//! session is leased to one node (its kernel, its turns and the next `seq`
//! live there), and the lease lasts while that node's heartbeat is fresh,
//! so a node that dies loses all its leases [`STALE_AFTER_MS`] after its
//! last beat, and the next node that needs one of its sessions takes it
//! over. Times are the database's clock, one for every node.

use std::path::Path;
use std::time::Duration;

use sqlx::Row;
use sqlx::postgres::PgRow;

use super::sql::Backend;
use super::{PostgresStore, StoreError};
use runcell_protocol::SessionId;

/// A node's heartbeat, this often.
pub const HEARTBEAT: Duration = Duration::from_secs(5);
/// A node whose last heartbeat is this old is gone, with its leases.
pub const STALE_AFTER_MS: i64 = 20_000;

/// Calls between nodes are kept at most this long (a caller waits a minute
/// at most).
const CALLS_KEPT_MS: i64 = 10 * 60 * 1000;

/// The database's clock in milliseconds (kept beside the store, whose
/// leases it also stamps).
pub use super::postgres::NOW_MS;

/// Where a node keeps its id, in its data directory: a node that restarts
/// is the same node, and takes its sessions back at once rather than
/// waiting for its old leases to go stale.
const NODE_ID_FILE: &str = "node-id";

/// This process as a node.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Node {
    pub id: String,
    /// Where it listens, for messages and logs.
    pub addr: String,
}

impl Node {
    /// A node with a fresh id (tests).
    pub fn new(addr: &str) -> Self {
        Self {
            id: uuid::Uuid::new_v4().to_string(),
            addr: addr.to_string(),
        }
    }

    /// The node whose id is kept in `data_dir` (made on first start).
    pub fn of_data_dir(data_dir: &Path, addr: &str) -> std::io::Result<Self> {
        let path = data_dir.join(NODE_ID_FILE);
        let kept = match std::fs::read_to_string(&path) {
            Ok(text) => uuid::Uuid::parse_str(text.trim()).ok(),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            Err(e) => return Err(e),
        };
        let id = match kept {
            Some(id) => id,
            None => {
                let id = uuid::Uuid::new_v4();
                std::fs::create_dir_all(data_dir)?;
                std::fs::write(&path, format!("{id}\n"))?;
                id
            }
        };
        Ok(Self {
            id: id.to_string(),
            addr: addr.to_string(),
        })
    }
}

/// Who holds a session.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Lease {
    /// This node: it had the lease already (`kept`), or took it now (a new
    /// lease, or one whose node went silent).
    Mine { kept: bool },
    /// Another live node.
    Held(Node),
}

impl PostgresStore {
    /// Joins the database's nodes as `node` (again, after a restart): from
    /// now on the sessions this store makes are leased to it, and it stores
    /// events only of the sessions it holds. Rows of nodes long gone are
    /// cleared.
    pub async fn join(&self, node: &Node) -> Result<(), StoreError> {
        sqlx::query(&format!(
            "DELETE FROM nodes WHERE seen_ms < {NOW_MS} - $1 AND id <> $2"
        ))
        .bind(STALE_AFTER_MS)
        .bind(&node.id)
        .execute(&self.pool)
        .await?;
        self.beat(node).await?;
        let _ = self.node.set(node.id.clone());
        Ok(())
    }

    /// Renews `node`'s heartbeat (and so every lease it holds).
    async fn beat(&self, node: &Node) -> Result<(), StoreError> {
        sqlx::query(&format!(
            "INSERT INTO nodes (id, addr, started_ms, seen_ms) VALUES ($1, $2, {NOW_MS}, {NOW_MS})
             ON CONFLICT (id) DO UPDATE SET seen_ms = excluded.seen_ms, addr = excluded.addr"
        ))
        .bind(&node.id)
        .bind(PostgresStore::text(&node.addr))
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    /// The heartbeat: renews every lease the node holds (a node whose row
    /// was cleared as long gone is back).
    pub async fn heartbeat(&self, node: &Node) -> Result<(), StoreError> {
        self.beat(node).await?;
        // Calls nobody came back for (a caller that died waiting).
        sqlx::query(&format!(
            "DELETE FROM node_calls WHERE created_ms < {NOW_MS} - $1"
        ))
        .bind(CALLS_KEPT_MS)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    /// Leaves: gives up every lease (the sessions' next users take them at
    /// once, recording that the kernel is gone) and the node's row.
    pub async fn leave(&self, node: &Node) -> Result<(), StoreError> {
        let mut tx = self.pool.begin().await?;
        sqlx::query("DELETE FROM session_leases WHERE node_id = $1")
            .bind(&node.id)
            .execute(&mut *tx)
            .await?;
        sqlx::query("DELETE FROM nodes WHERE id = $1")
            .bind(&node.id)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(())
    }

    /// The live nodes, oldest first.
    pub async fn live_nodes(&self) -> Result<Vec<Node>, StoreError> {
        let rows = sqlx::query(&format!(
            "SELECT id, addr FROM nodes WHERE seen_ms >= {NOW_MS} - $1 ORDER BY started_ms, id"
        ))
        .bind(STALE_AFTER_MS)
        .fetch_all(&self.pool)
        .await?;
        Ok(rows.iter().map(node_of).collect::<Result<_, _>>()?)
    }

    /// Who holds `session`, taking the lease for `node` when nobody live
    /// does. The session must exist.
    pub async fn acquire(&self, session: SessionId, node: &Node) -> Result<Lease, StoreError> {
        let mut tx = self.pool.begin().await?;
        let id = session.to_string();
        let held = sqlx::query(&format!(
            "SELECT l.node_id, n.addr, COALESCE(n.seen_ms >= {NOW_MS} - $2, FALSE) AS live
             FROM session_leases l LEFT JOIN nodes n ON n.id = l.node_id
             WHERE l.session_id = $1 FOR UPDATE OF l"
        ))
        .bind(&id)
        .bind(STALE_AFTER_MS)
        .fetch_optional(&mut *tx)
        .await?;
        let lease = match held {
            Some(row) => {
                let holder: String = row.try_get("node_id")?;
                let live: bool = row.try_get("live")?;
                if holder == node.id {
                    Lease::Mine { kept: true }
                } else if live {
                    Lease::Held(Node {
                        id: holder,
                        addr: row
                            .try_get::<Option<String>, _>("addr")?
                            .unwrap_or_default(),
                    })
                } else {
                    sqlx::query(&format!(
                        "UPDATE session_leases SET node_id = $2, since_ms = {NOW_MS} WHERE session_id = $1"
                    ))
                    .bind(&id)
                    .bind(&node.id)
                    .execute(&mut *tx)
                    .await?;
                    tracing::info!(%session, from = %holder, "session taken over from a silent node");
                    Lease::Mine { kept: false }
                }
            }
            None => {
                // Nobody held it (made before leases, or its node left):
                // a concurrent taker makes this insert wait, then fail.
                let taken = sqlx::query(&format!(
                    "INSERT INTO session_leases (session_id, node_id, since_ms)
                     SELECT $1, $2, {NOW_MS} WHERE EXISTS (SELECT 1 FROM sessions WHERE id = $1)
                     ON CONFLICT (session_id) DO NOTHING"
                ))
                .bind(&id)
                .bind(&node.id)
                .execute(&mut *tx)
                .await?;
                if taken.rows_affected() == 0 {
                    tx.rollback().await?;
                    return Box::pin(self.acquire(session, node)).await;
                }
                Lease::Mine { kept: false }
            }
        };
        tx.commit().await?;
        Ok(lease)
    }

    /// The live node that holds `session`, if one does (nothing is taken).
    pub async fn holder(&self, session: SessionId) -> Result<Option<Node>, StoreError> {
        Ok(self.holders(&[session]).await?.pop().map(|(_, node)| node))
    }

    /// The live holders of those of `sessions` a live node holds.
    pub async fn holders(
        &self,
        sessions: &[SessionId],
    ) -> Result<Vec<(SessionId, Node)>, StoreError> {
        let ids = texts(sessions);
        let rows = sqlx::query(&format!(
            "SELECT l.session_id, n.id, n.addr FROM session_leases l JOIN nodes n ON n.id = l.node_id
             WHERE l.session_id = ANY($1) AND n.seen_ms >= {NOW_MS} - $2"
        ))
        .bind(&ids)
        .bind(STALE_AFTER_MS)
        .fetch_all(&self.pool)
        .await?;
        Ok(rows
            .iter()
            .filter_map(|row| Some((session_of(row)?, node_of(row).ok()?)))
            .collect())
    }

    /// Of `sessions` (held here, as this node believes), those now leased
    /// to another node: this node was silent long enough to be taken over.
    pub async fn lost(
        &self,
        sessions: &[SessionId],
        node: &Node,
    ) -> Result<Vec<SessionId>, StoreError> {
        let ids = texts(sessions);
        let rows = sqlx::query(
            "SELECT session_id FROM session_leases WHERE session_id = ANY($1) AND node_id <> $2",
        )
        .bind(&ids)
        .bind(&node.id)
        .fetch_all(&self.pool)
        .await?;
        Ok(rows.iter().filter_map(session_of).collect())
    }

    /// The newest stored `seq` of each of `sessions` that has events.
    pub async fn newest_seqs(
        &self,
        sessions: &[SessionId],
    ) -> Result<Vec<(SessionId, u64)>, StoreError> {
        let ids = texts(sessions);
        let rows = sqlx::query(
            "SELECT session_id, MAX(seq) AS seq FROM events WHERE session_id = ANY($1) GROUP BY session_id",
        )
        .bind(&ids)
        .fetch_all(&self.pool)
        .await?;
        Ok(rows
            .iter()
            .filter_map(|row| {
                let seq: i64 = row.try_get("seq").ok()?;
                Some((session_of(row)?, u64::try_from(seq).ok()?))
            })
            .collect())
    }
}

/// Session ids as the database's `text[]` takes them.
fn texts(sessions: &[SessionId]) -> Vec<String> {
    sessions.iter().map(ToString::to_string).collect()
}

/// A row's `session_id`; `None` if it is not one.
fn session_of(row: &PgRow) -> Option<SessionId> {
    row.try_get::<String, _>("session_id").ok()?.parse().ok()
}

/// A row's node (`id`, `addr`).
fn node_of(row: &PgRow) -> Result<Node, sqlx::Error> {
    Ok(Node {
        id: row.try_get("id")?,
        addr: row.try_get("addr")?,
    })
}

#[cfg(test)]
mod tests {
    use super::super::scratch::ScratchDatabase;
    use super::super::{SessionRecord, Store};
    use super::*;
    use runcell_protocol::OwnerId;

    async fn session(store: &PostgresStore) -> SessionId {
        let id = SessionId::random();
        store
            .create_session(&SessionRecord {
                id,
                owner: OwnerId::random(),
                title: String::new(),
                created_ms: 1,
                updated_ms: 1,
                forked_from: None,
            })
            .await
            .unwrap();
        id
    }

    #[tokio::test]
    async fn a_session_is_held_by_one_live_node_and_taken_over_when_it_goes_silent() {
        let Some(db) = ScratchDatabase::create("leases").await else {
            return;
        };
        let a_store = PostgresStore::open(&db.url).await.unwrap();
        let b_store = PostgresStore::open(&db.url).await.unwrap();
        let a = Node::new("127.0.0.1:1001");
        let b = Node::new("127.0.0.1:1002");
        a_store.join(&a).await.unwrap();
        b_store.join(&b).await.unwrap();
        assert_eq!(
            a_store.live_nodes().await.unwrap(),
            vec![a.clone(), b.clone()]
        );

        // A made it, so A holds it; B follows.
        let id = session(&a_store).await;
        assert_eq!(
            a_store.acquire(id, &a).await.unwrap(),
            Lease::Mine { kept: true }
        );
        assert_eq!(
            b_store.acquire(id, &b).await.unwrap(),
            Lease::Held(a.clone())
        );
        assert_eq!(b_store.holders(&[id]).await.unwrap(), vec![(id, a.clone())]);
        assert_eq!(b_store.holder(id).await.unwrap(), Some(a.clone()));

        // A goes silent: its lease lapses with its heartbeat.
        sqlx::query("UPDATE nodes SET seen_ms = seen_ms - $1 WHERE id = $2")
            .bind(STALE_AFTER_MS + 1)
            .bind(&a.id)
            .execute(&a_store.pool)
            .await
            .unwrap();
        assert!(b_store.holders(&[id]).await.unwrap().is_empty());
        assert_eq!(b_store.holder(id).await.unwrap(), None);
        assert_eq!(
            b_store.acquire(id, &b).await.unwrap(),
            Lease::Mine { kept: false }
        );
        // A, back, learns it lost the session, and follows B.
        a_store.heartbeat(&a).await.unwrap();
        assert_eq!(a_store.lost(&[id], &a).await.unwrap(), vec![id]);
        assert_eq!(
            a_store.acquire(id, &a).await.unwrap(),
            Lease::Held(b.clone())
        );

        // A clean stop gives the leases up at once.
        b_store.leave(&b).await.unwrap();
        assert!(a_store.holders(&[id]).await.unwrap().is_empty());
        assert_eq!(
            a_store.acquire(id, &a).await.unwrap(),
            Lease::Mine { kept: false }
        );
        a_store.close().await;
        b_store.close().await;
        db.drop_now().await;
    }

    #[tokio::test]
    async fn only_the_holder_writes_a_sessions_log() {
        let Some(db) = ScratchDatabase::create("fence").await else {
            return;
        };
        let a_store = PostgresStore::open(&db.url).await.unwrap();
        let b_store = PostgresStore::open(&db.url).await.unwrap();
        let (a, b) = (Node::new("a"), Node::new("b"));
        a_store.join(&a).await.unwrap();
        b_store.join(&b).await.unwrap();
        let id = session(&a_store).await;
        let event = |seq| runcell_protocol::SessionEvent {
            seq,
            ts_ms: 5,
            event: runcell_protocol::EventBody::KernelLost {
                reason: runcell_protocol::KernelLoss::ServerRestart,
            },
        };
        a_store.append_events(&[(id, event(1))]).await.unwrap();
        // B does not hold it: what it writes is not stored.
        b_store.append_events(&[(id, event(2))]).await.unwrap();
        assert_eq!(b_store.events(id).await.unwrap().len(), 1);
        assert_eq!(b_store.newest_seqs(&[id]).await.unwrap(), vec![(id, 1)]);
        assert_eq!(b_store.events_after(id, 1).await.unwrap(), vec![]);
        a_store.close().await;
        b_store.close().await;
        db.drop_now().await;
    }

    #[test]
    fn a_node_keeps_its_id_in_its_data_directory() {
        let dir = tempfile::tempdir().unwrap();
        let first = Node::of_data_dir(dir.path(), "x").unwrap();
        assert_eq!(Node::of_data_dir(dir.path(), "y").unwrap().id, first.id);
        std::fs::write(dir.path().join(NODE_ID_FILE), "garbage").unwrap();
        assert_ne!(Node::of_data_dir(dir.path(), "x").unwrap().id, first.id);
    }
}
