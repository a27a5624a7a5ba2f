//! Calls from one node to the node that holds a session, through the
//! database: the caller writes a row and announces it on
//! [`CALLS_CHANNEL`] (payload: the callee's node id); the callee takes its
//! rows, does what they ask and writes the reply, announced on
//! [`REPLIES_CHANNEL`] (`<caller> <call id>`); the caller reads the reply
//! and deletes the row. What a call asks and answers is the notebook
//! service's business (`notebook::remote`); this is only the transport.

use std::collections::HashMap;
use std::time::Duration;

use parking_lot::Mutex;
use sqlx::Row;
use tokio::sync::{Notify, oneshot};

use super::Cluster;
use runcell_protocol::SessionId;
use runcell_store::StoreError;
use runcell_store::nodes::{NOW_MS, Node};

pub const CALLS_CHANNEL: &str = "runcell_calls";
pub const REPLIES_CHANNEL: &str = "runcell_replies";

/// The most a call's request or reply may hold, bytes included: a caller or
/// a callee that sends more is refused, not trusted.
pub const MAX_CALL_BYTES: usize = 128 * 1024 * 1024;

/// Why a call got no answer.
#[derive(Debug, thiserror::Error)]
pub enum CallError {
    #[error(
        "the node holding this session ({0}) did not answer in time; if it is gone, another node takes the session over 20 s after its last heartbeat"
    )]
    NoAnswer(String),
    #[error("the call is too large ({0} bytes)")]
    TooLarge(usize),
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl From<sqlx::Error> for CallError {
    fn from(e: sqlx::Error) -> Self {
        Self::Store(e.into())
    }
}

/// A call this node was asked to answer.
#[derive(Debug)]
pub struct IncomingCall {
    pub id: i64,
    pub caller: String,
    pub session: SessionId,
    pub request: String,
    pub payload: Option<Vec<u8>>,
}

/// A reply: what the call's request format says, and bytes.
pub struct Reply {
    pub text: String,
    pub payload: Option<Vec<u8>>,
}

#[derive(Default)]
pub(super) struct CallState {
    /// Callers waiting for a reply, by call id.
    waiting: Mutex<HashMap<i64, oneshot::Sender<()>>>,
    /// Woken when calls for this node may be waiting.
    server: Notify,
}

impl CallState {
    pub(super) fn wake_server(&self) {
        self.server.notify_one();
    }

    /// A reply was announced: `<caller> <call id>`.
    pub(super) fn replied(&self, me: &str, payload: &str) {
        let Some((caller, id)) = payload.split_once(' ') else {
            return;
        };
        if caller != me {
            return;
        }
        if let Ok(id) = id.parse::<i64>()
            && let Some(waiter) = self.waiting.lock().remove(&id)
        {
            let _ = waiter.send(());
        }
    }

    /// Notifications may have been missed: every waiter looks at its row.
    pub(super) fn wake_all(&self) {
        for (_, waiter) in self.waiting.lock().drain() {
            let _ = waiter.send(());
        }
        self.server.notify_one();
    }
}

/// How often a waiting caller looks at its row, in case the reply's
/// notification was missed.
const RECHECK: Duration = Duration::from_millis(500);

impl Cluster {
    /// Asks `holder` to do `request` (with `payload`) for `session`, and
    /// waits up to `timeout` for its reply.
    pub async fn call(
        &self,
        holder: &Node,
        session: SessionId,
        request: String,
        payload: Option<Vec<u8>>,
        timeout: Duration,
    ) -> Result<Reply, CallError> {
        let size = request.len() + payload.as_ref().map_or(0, Vec::len);
        if size > MAX_CALL_BYTES {
            return Err(CallError::TooLarge(size));
        }
        let mut tx = self.db.pool().begin().await?;
        let id: i64 = sqlx::query(&format!(
            "INSERT INTO node_calls (caller, node_id, session_id, request, payload, created_ms)
             VALUES ($1, $2, $3, $4, $5, {NOW_MS}) RETURNING id",
        ))
        .bind(&self.node.id)
        .bind(&holder.id)
        .bind(session.to_string())
        .bind(&request)
        .bind(payload)
        .fetch_one(&mut *tx)
        .await?
        .try_get("id")?;
        sqlx::query("SELECT pg_notify($1, $2)")
            .bind(CALLS_CHANNEL)
            .bind(&holder.id)
            .execute(&mut *tx)
            .await?;
        // The waiter is in place before the call is committed, so that no
        // reply's notification comes before it.
        let (wake, mut woken) = oneshot::channel();
        self.calls.waiting.lock().insert(id, wake);
        if let Err(e) = tx.commit().await {
            self.calls.waiting.lock().remove(&id);
            return Err(e.into());
        }
        let deadline = tokio::time::Instant::now() + timeout;
        let reply = loop {
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            if left.is_zero() {
                break None;
            }
            if tokio::time::timeout(RECHECK.min(left), &mut woken)
                .await
                .is_ok()
            {
                // Woken (or its waker dropped): wait afresh after reading.
                let (wake, next) = oneshot::channel();
                self.calls.waiting.lock().insert(id, wake);
                woken = next;
            }
            if let Some(reply) = self.read_reply(id).await? {
                break Some(reply);
            }
        };
        self.calls.waiting.lock().remove(&id);
        sqlx::query("DELETE FROM node_calls WHERE id = $1")
            .bind(id)
            .execute(self.db.pool())
            .await?;
        reply.ok_or_else(|| CallError::NoAnswer(holder.addr.clone()))
    }

    async fn read_reply(&self, id: i64) -> Result<Option<Reply>, CallError> {
        let row = sqlx::query(
            "SELECT reply, reply_payload FROM node_calls WHERE id = $1 AND reply IS NOT NULL",
        )
        .bind(id)
        .fetch_optional(self.db.pool())
        .await?;
        let Some(row) = row else {
            return Ok(None);
        };
        let text: String = row.try_get("reply")?;
        let payload: Option<Vec<u8>> = row.try_get("reply_payload")?;
        let size = text.len() + payload.as_ref().map_or(0, Vec::len);
        if size > MAX_CALL_BYTES {
            return Err(CallError::TooLarge(size));
        }
        Ok(Some(Reply { text, payload }))
    }

    /// Waits until calls for this node may have come, then takes them (a
    /// call is taken once, by its callee).
    pub async fn next_calls(&self) -> Result<Vec<IncomingCall>, CallError> {
        loop {
            let calls = self.take_calls().await?;
            if !calls.is_empty() {
                return Ok(calls);
            }
            self.calls.server.notified().await;
        }
    }

    async fn take_calls(&self) -> Result<Vec<IncomingCall>, CallError> {
        let rows = sqlx::query(
            "UPDATE node_calls SET taken = TRUE WHERE node_id = $1 AND NOT taken
             RETURNING id, caller, session_id, request, payload",
        )
        .bind(&self.node.id)
        .fetch_all(self.db.pool())
        .await?;
        let mut calls = Vec::with_capacity(rows.len());
        for row in rows {
            let session: String = row.try_get("session_id")?;
            let Ok(session) = session.parse() else {
                tracing::warn!("a call names no session; dropped");
                continue;
            };
            calls.push(IncomingCall {
                id: row.try_get("id")?,
                caller: row.try_get("caller")?,
                session,
                request: row.try_get("request")?,
                payload: row.try_get("payload")?,
            });
        }
        Ok(calls)
    }

    /// Answers `call`.
    pub async fn answer(&self, call: &IncomingCall, reply: Reply) -> Result<(), CallError> {
        let mut tx = self.db.pool().begin().await?;
        sqlx::query("UPDATE node_calls SET reply = $2, reply_payload = $3 WHERE id = $1")
            .bind(call.id)
            .bind(&reply.text)
            .bind(reply.payload)
            .execute(&mut *tx)
            .await?;
        sqlx::query("SELECT pg_notify($1, $2)")
            .bind(REPLIES_CHANNEL)
            .bind(format!("{} {}", call.caller, call.id))
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(())
    }
}
