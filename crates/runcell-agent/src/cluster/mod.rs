//! Several runcell nodes on one PostgreSQL database. Each session is held
//! by one node at a time (a lease in the database, `store::nodes`); the
//! others follow it: its events reach them through the store, announced by
//! NOTIFY when the holder commits them and read back by `seq` (so nothing
//! is lost or reordered, and a missed notification is made up at the next
//! sweep), and what their pages ask of it is sent to the holder as a call
//! through the database ([`calls`]). When the holder stops or goes silent,
//! a node that follows the session takes it over and records that the
//! kernel is gone.
//!
//! Nodes talk only through the database: no node needs another's address,
//! and nothing new listens on the network.

pub mod calls;

use std::collections::HashMap;
use std::sync::{Arc, Weak};
use std::time::Duration;

use parking_lot::Mutex;
use sqlx::postgres::PgListener;
use tokio_util::sync::CancellationToken;

use runcell_protocol::SessionEvent;
use runcell_protocol::SessionId;
use runcell_store::nodes::{HEARTBEAT, Lease, Node};
use runcell_store::{EVENTS_CHANNEL, PostgresStore, StoreError, parse_event_note};

pub use calls::{CALLS_CHANNEL, CallError, IncomingCall, REPLIES_CHANNEL};

/// How often a node looks at the sessions it follows: a holder gone
/// silent, events whose notification was missed.
const SWEEP: Duration = Duration::from_secs(2);

/// A session as the cluster sees it: followed while another node holds it,
/// held by this one otherwise.
pub trait Replica: Send + Sync + 'static {
    fn session(&self) -> SessionId;
    /// The newest event it has.
    fn last_seq(&self) -> u64;
    /// Appends events the holding node stored (skipping those it has,
    /// stopping at a gap).
    fn mirror(&self, events: Vec<SessionEvent>);
    /// This node now holds it: `events` (the store's, after its last holder
    /// stopped) appended, what that node cut short closed, its kernel
    /// recorded as lost.
    fn take_over(&self, events: Vec<SessionEvent>);
    /// The other node that holds it, if another does.
    fn holder(&self) -> Option<Node>;
    fn set_holder(&self, node: Node);
    /// Another node took it over while this one was silent: its turns stop
    /// here.
    fn retire(&self);
}

/// This node's part in the cluster.
pub struct Cluster {
    db: Arc<PostgresStore>,
    node: Node,
    /// Sessions held by other nodes that this node has in memory.
    followed: Mutex<HashMap<SessionId, Weak<dyn Replica>>>,
    /// Sessions this node holds, as far as it knows: checked by the sweep
    /// in case this node was silent long enough to be taken over.
    held: Mutex<HashMap<SessionId, Weak<dyn Replica>>>,
    /// Followed sessions being read now, and whether more was announced
    /// meanwhile (one read at a time per session, however many notes come).
    pulling: Mutex<HashMap<SessionId, bool>>,
    calls: calls::CallState,
}

impl Cluster {
    /// Joins the database's nodes as `node`.
    pub async fn join(db: Arc<PostgresStore>, node: Node) -> Result<Arc<Self>, StoreError> {
        db.join(&node).await?;
        tracing::info!(node = %node.id, addr = %node.addr, "joined the database's nodes");
        Ok(Arc::new(Self {
            db,
            node,
            followed: Mutex::new(HashMap::new()),
            pulling: Mutex::new(HashMap::new()),
            held: Mutex::new(HashMap::new()),
            calls: calls::CallState::default(),
        }))
    }

    pub fn node(&self) -> &Node {
        &self.node
    }

    pub fn db(&self) -> &Arc<PostgresStore> {
        &self.db
    }

    /// Who holds `session`, taking it when no live node does.
    pub async fn acquire(&self, session: SessionId) -> Result<Lease, StoreError> {
        self.db.acquire(session, &self.node).await
    }

    /// Follows `channel`, held by another node: its new events are
    /// mirrored here as the holder stores them.
    pub fn follow<R: Replica>(&self, channel: &Arc<R>) {
        let weak: Weak<dyn Replica> = Arc::downgrade(channel) as Weak<R>;
        self.followed.lock().insert(channel.session(), weak);
    }

    /// `channel` is held here (made here, or its lease taken).
    pub fn hold<R: Replica>(&self, channel: &Arc<R>) {
        let weak: Weak<dyn Replica> = Arc::downgrade(channel) as Weak<R>;
        self.held.lock().insert(channel.session(), weak);
    }

    fn followed(&self, session: SessionId) -> Option<Arc<dyn Replica>> {
        let mut followed = self.followed.lock();
        let channel = followed.get(&session)?.upgrade();
        if channel.is_none() {
            followed.remove(&session);
        }
        channel
    }

    /// The followed sessions still in memory (the others are forgotten).
    fn all_followed(&self) -> Vec<Arc<dyn Replica>> {
        let mut followed = self.followed.lock();
        followed.retain(|_, c| c.strong_count() > 0);
        followed.values().filter_map(Weak::upgrade).collect()
    }

    /// Reads what the holder stored after what `channel` has.
    async fn catch_up(&self, channel: &dyn Replica) {
        match self
            .db
            .events_after(channel.session(), channel.last_seq())
            .await
        {
            Ok(events) if !events.is_empty() => {
                channel.mirror(events);
            }
            Ok(_) => {}
            Err(e) => {
                tracing::warn!(session = %channel.session(), error = %e, "a followed session's events could not be read");
            }
        }
    }

    /// Reads what the holder stored after what `channel` has, unless a
    /// read is under way (which then reads once more when it is done).
    fn pull(self: &Arc<Self>, channel: Arc<dyn Replica>) {
        let id = channel.session();
        {
            let mut pulling = self.pulling.lock();
            if let Some(again) = pulling.get_mut(&id) {
                *again = true;
                return;
            }
            pulling.insert(id, false);
        }
        let cluster = Arc::clone(self);
        tokio::spawn(async move {
            loop {
                cluster.catch_up(channel.as_ref()).await;
                let mut pulling = cluster.pulling.lock();
                if pulling.get(&id) == Some(&true) {
                    pulling.insert(id, false);
                } else {
                    pulling.remove(&id);
                    return;
                }
            }
        });
    }

    /// Takes over a followed session whose holder is gone: the events it
    /// stored, then what it cut short closed and its kernel marked lost.
    async fn take_over(&self, channel: &Arc<dyn Replica>) -> Result<(), StoreError> {
        match self.acquire(channel.session()).await? {
            Lease::Mine { .. } => {
                let events = self
                    .db
                    .events_after(channel.session(), channel.last_seq())
                    .await?;
                channel.take_over(events);
                self.followed.lock().remove(&channel.session());
                self.held
                    .lock()
                    .insert(channel.session(), Arc::downgrade(channel));
                tracing::info!(session = %channel.session(), "took over a session whose node is gone");
            }
            Lease::Held(node) => channel.set_holder(node),
        }
        Ok(())
    }

    /// One look at the followed sessions: holders gone are taken over,
    /// events missed are read.
    async fn sweep(&self) -> Result<(), StoreError> {
        self.retire_lost().await?;
        let channels = self.all_followed();
        if channels.is_empty() {
            return Ok(());
        }
        let ids: Vec<SessionId> = channels.iter().map(|c| c.session()).collect();
        let newest: HashMap<SessionId, u64> =
            self.db.newest_seqs(&ids).await?.into_iter().collect();
        for channel in &channels {
            if newest
                .get(&channel.session())
                .is_some_and(|seq| *seq > channel.last_seq())
            {
                self.catch_up(channel.as_ref()).await;
            }
        }
        let holders: HashMap<SessionId, Node> = self.db.holders(&ids).await?.into_iter().collect();
        for channel in &channels {
            match holders.get(&channel.session()) {
                // Held elsewhere: by the node it knew, or by a third one
                // that took it over meanwhile.
                Some(node) if node.id != self.node.id => {
                    if channel.holder().as_ref() != Some(node) {
                        channel.set_holder(node.clone());
                    }
                }
                // Nobody live holds it (or this node, after a restart).
                _ => self.take_over(channel).await?,
            }
        }
        Ok(())
    }

    /// Sessions this node believed it held that another node took over
    /// (this one was silent past the lease): retired here, so that their
    /// turns stop and their pages reconnect to the session as it is.
    async fn retire_lost(&self) -> Result<(), StoreError> {
        let held: Vec<Arc<dyn Replica>> = {
            let mut held = self.held.lock();
            held.retain(|_, c| c.strong_count() > 0);
            held.values().filter_map(Weak::upgrade).collect()
        };
        if held.is_empty() {
            return Ok(());
        }
        let ids: Vec<SessionId> = held.iter().map(|c| c.session()).collect();
        for id in self.db.lost(&ids, &self.node).await? {
            if let Some(channel) = held.iter().find(|c| c.session() == id) {
                tracing::error!(session = %id, "another node took this session over while this node was silent; retired here");
                channel.retire();
                self.held.lock().remove(&id);
            }
        }
        Ok(())
    }

    /// Starts the node's tasks: the heartbeat, the sweep and the listener.
    /// They end with `shutdown`; wait for the handle before [`Self::leave`].
    pub fn spawn(self: &Arc<Self>, shutdown: CancellationToken) -> tokio::task::JoinHandle<()> {
        let heartbeat = tokio::spawn(Arc::clone(self).heartbeat_loop(shutdown.clone()));
        let sweep = tokio::spawn(Arc::clone(self).sweep_loop(shutdown.clone()));
        let listen = tokio::spawn(Arc::clone(self).listen_loop(shutdown));
        tokio::spawn(async move {
            let _ = tokio::join!(heartbeat, sweep, listen);
        })
    }

    async fn heartbeat_loop(self: Arc<Self>, shutdown: CancellationToken) {
        let mut tick = tokio::time::interval(HEARTBEAT);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                biased;
                () = shutdown.cancelled() => break,
                _ = tick.tick() => {}
            }
            if let Err(e) = self.db.heartbeat(&self.node).await {
                tracing::warn!(error = %e, "the database missed a heartbeat");
            }
        }
    }

    async fn sweep_loop(self: Arc<Self>, shutdown: CancellationToken) {
        let mut tick = tokio::time::interval(SWEEP);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                biased;
                () = shutdown.cancelled() => break,
                _ = tick.tick() => {}
            }
            if let Err(e) = self.sweep().await {
                tracing::warn!(error = %e, "the followed sessions could not be checked");
            }
            // Calls whose notification was missed.
            self.calls.wake_server();
        }
    }

    async fn listen_loop(self: Arc<Self>, shutdown: CancellationToken) {
        loop {
            tokio::select! {
                biased;
                () = shutdown.cancelled() => return,
                () = self.listen() => {}
            }
            tokio::select! {
                () = shutdown.cancelled() => return,
                () = tokio::time::sleep(Duration::from_secs(1)) => {}
            }
        }
    }

    /// Listens until the connection fails; every notification missed
    /// meanwhile is made up by reading the store.
    async fn listen(self: &Arc<Self>) {
        let mut listener = match PgListener::connect_with(self.db.pool()).await {
            Ok(listener) => listener,
            Err(e) => {
                tracing::warn!(error = %e, "cannot listen to the database");
                return;
            }
        };
        if let Err(e) = listener
            .listen_all([EVENTS_CHANNEL, CALLS_CHANNEL, REPLIES_CHANNEL])
            .await
        {
            tracing::warn!(error = %e, "cannot listen to the database");
            return;
        }
        loop {
            match listener.try_recv().await {
                Ok(Some(note)) => self.notified(note.channel(), note.payload()),
                Ok(None) => {
                    tracing::warn!("the database connection that listens was lost; catching up");
                    for channel in self.all_followed() {
                        self.catch_up(channel.as_ref()).await;
                    }
                    self.calls.wake_all();
                }
                Err(e) => {
                    tracing::warn!(error = %e, "listening to the database failed");
                    return;
                }
            }
        }
    }

    /// A notification (its payload bounded by PostgreSQL at 8,000 bytes;
    /// any node may send one, so it is parsed as untrusted). Events a note
    /// carries are mirrored only where they continue the history; the
    /// store stays the truth, read whenever a note leaves a gap.
    fn notified(self: &Arc<Self>, channel: &str, payload: &str) {
        match channel {
            EVENTS_CHANNEL => {
                let Some((id, seq, events)) = parse_event_note(payload) else {
                    tracing::debug!("an unreadable events notification");
                    return;
                };
                let Some(channel) = self.followed(id) else {
                    return;
                };
                // The events came along: no read unless they leave a gap.
                if events
                    .first()
                    .is_some_and(|e| e.seq <= channel.last_seq() + 1)
                {
                    channel.mirror(events);
                }
                if seq > channel.last_seq() {
                    self.pull(channel);
                }
            }
            CALLS_CHANNEL if payload == self.node.id => self.calls.wake_server(),
            REPLIES_CHANNEL => self.calls.replied(&self.node.id, payload),
            _ => {}
        }
    }

    /// Leaves the database's nodes: every lease this node held is given
    /// up, so the sessions' next users take them at once.
    pub async fn leave(&self) {
        if let Err(e) = self.db.leave(&self.node).await {
            tracing::warn!(error = %e, "could not leave the database's nodes");
        }
    }
}
