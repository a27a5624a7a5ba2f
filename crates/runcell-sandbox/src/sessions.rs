//! The live sandbox sessions: created on request (from a warm pool when one
//! is ready), found by id, reaped when idle, closed on shutdown.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use serde::Serialize;
use tokio::sync::{Notify, mpsc};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::slots::{Claim, Slot, SlotError, SlotSettings, Slots};
use super::{
    Language, Limits, RunEvent, RunOutcome, RunRequest, Sandbox, SandboxError, SandboxKind,
    SandboxSession, SandboxSessionExt, now_ms,
};

/// How often idle sessions are looked for.
const REAP_EVERY: Duration = Duration::from_secs(5);

#[derive(Clone, Debug)]
pub struct SessionSettings {
    /// Sessions kept started and waiting, so that a new one is ready at once.
    pub pool_size: usize,
    /// A session unused this long is closed.
    pub idle_ttl: Duration,
    /// Live sessions at most; more are refused.
    pub max_sessions: usize,
    /// The part of `max_sessions`, in percent, that anonymous owners'
    /// notebooks may hold together.
    pub anonymous_share_percent: u8,
    /// Sessions the anonymous owners of one client address may hold.
    pub anonymous_per_client: usize,
    /// The limits a session's runs may use at most.
    pub limits: Limits,
}

impl Default for SessionSettings {
    fn default() -> Self {
        Self {
            pool_size: 2,
            idle_ttl: Duration::from_secs(15 * 60),
            max_sessions: 32,
            anonymous_share_percent: 50,
            anonymous_per_client: 4,
            limits: Limits {
                wall: super::MAX_WALL,
                ..Limits::default()
            },
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum SandboxSessionError {
    #[error("no sandbox session {0}")]
    NotFound(String),
    #[error("{0} sandbox sessions are open already; close one first")]
    TooMany(usize),
    /// Anonymous pages hold their whole share of the sessions.
    #[error("{}", SlotError::AnonymousFull(*.0))]
    AnonymousFull(usize),
    /// Anonymous pages from one client address hold as many as they may.
    #[error("{}", SlotError::ClientFull(*.0))]
    ClientFull(usize),
    /// One owner's notebooks hold as many kernels as they may, all running.
    #[error(
        "your sessions hold {0} kernels, all running; stop one or wait for one to end (“Kernels in use” in the sessions list shows them)"
    )]
    OwnerFull(usize),
    #[error(transparent)]
    Sandbox(#[from] SandboxError),
}

impl From<SlotError> for SandboxSessionError {
    fn from(err: SlotError) -> Self {
        match err {
            SlotError::Full(total) => Self::TooMany(total),
            SlotError::AnonymousFull(share) => Self::AnonymousFull(share),
            SlotError::ClientFull(held) => Self::ClientFull(held),
        }
    }
}

impl SandboxSessionError {
    /// Whether the server has no room for another session now (a `503`
    /// that is worth retrying later), rather than anything being wrong.
    pub fn is_no_room(&self) -> bool {
        matches!(
            self,
            Self::TooMany(_) | Self::AnonymousFull(_) | Self::ClientFull(_)
        )
    }
}

/// What the API says about a session.
#[derive(Clone, Debug, Serialize)]
#[cfg_attr(feature = "schema", derive(utoipa::ToSchema))]
pub struct SessionInfo {
    pub session_id: String,
    pub language: Language,
    /// Where it runs: `jail` or `e2b`.
    pub backend: SandboxKind,
    pub created_at_ms: u64,
    pub idle_ms: u64,
}

struct Live {
    session: Arc<dyn SandboxSession>,
    language: Language,
    /// The API key whose session it is; `None` for a notebook session's
    /// kernel, which is never listed, run or closed through the `/v1` API.
    owner: Option<String>,
    created_at_ms: u64,
    last_used: Mutex<Instant>,
    /// When set, the session is closed at this time rather than when idle
    /// (an E2B sandbox's timeout).
    deadline: Mutex<Option<Instant>>,
    /// The slot it holds, given back when the last use of it ends.
    _slot: Slot,
}

impl Live {
    fn expired(&self, idle_ttl: Duration) -> bool {
        match *self.deadline.lock() {
            Some(deadline) => Instant::now() >= deadline,
            None => self.last_used.lock().elapsed() > idle_ttl,
        }
    }
}

impl Live {
    fn info(&self, backend: SandboxKind) -> SessionInfo {
        SessionInfo {
            session_id: self.session.id().to_string(),
            language: self.language,
            backend,
            created_at_ms: self.created_at_ms,
            idle_ms: runcell_core::clock::millis(self.last_used.lock().elapsed()),
        }
    }
}

pub struct SandboxSessions {
    sandbox: Arc<dyn Sandbox>,
    settings: SessionSettings,
    live: Mutex<HashMap<String, Arc<Live>>>,
    /// What `live` may hold, reserved before a session starts.
    slots: Arc<Slots>,
    warm: tokio::sync::Mutex<Vec<Box<dyn SandboxSession>>>,
    refill: Notify,
}

impl std::fmt::Debug for SandboxSessions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sessions")
            .field("backend", &self.backend())
            .field("live", &self.live_count())
            .finish_non_exhaustive()
    }
}

impl SandboxSessions {
    pub fn new(sandbox: Arc<dyn Sandbox>, settings: SessionSettings) -> Arc<Self> {
        let slots = Slots::new(SlotSettings::shared(
            settings.max_sessions,
            settings.anonymous_share_percent,
            settings.anonymous_per_client,
        ));
        Arc::new(Self {
            sandbox,
            settings,
            live: Mutex::new(HashMap::new()),
            slots,
            warm: tokio::sync::Mutex::new(Vec::new()),
            refill: Notify::new(),
        })
    }

    /// Keeps the pool filled and reaps idle sessions until `shutdown`, then
    /// closes every session.
    pub fn spawn_maintenance(self: &Arc<Self>, tracker: &TaskTracker, shutdown: CancellationToken) {
        let this = Arc::clone(self);
        tracker.spawn(async move {
            let mut reap = tokio::time::interval(REAP_EVERY);
            loop {
                this.fill_pool().await;
                tokio::select! {
                    () = shutdown.cancelled() => break,
                    () = this.refill.notified() => {}
                    _ = reap.tick() => this.reap_idle().await,
                }
            }
            this.close_all().await;
        });
    }

    async fn fill_pool(&self) {
        loop {
            if self.warm.lock().await.len() >= self.settings.pool_size {
                return;
            }
            match self.sandbox.open_session().await {
                Ok(session) => self.warm.lock().await.push(session),
                Err(e) => {
                    tracing::debug!(%e, "cannot start a pooled sandbox session");
                    return;
                }
            }
        }
    }

    /// A session for the `/v1` API, of the API key `owner`.
    pub async fn create(
        &self,
        language: Language,
        owner: &str,
    ) -> Result<SessionInfo, SandboxSessionError> {
        self.open(language, Some(owner.to_string()), Claim::Known)
            .await
    }

    /// A notebook session's kernel: hidden from the `/v1` API (`list`, `get`,
    /// `delete_public` do not see it), reached only through its notebook.
    /// `claim` says whose notebook it is (anonymous pages share a part of
    /// the slots).
    pub async fn create_for_notebook(
        &self,
        language: Language,
        claim: Claim,
    ) -> Result<SessionInfo, SandboxSessionError> {
        self.open(language, None, claim).await
    }

    async fn open(
        &self,
        language: Language,
        owner: Option<String>,
        claim: Claim,
    ) -> Result<SessionInfo, SandboxSessionError> {
        // Reserved before any await: opens at once cannot all pass the cap,
        // and a failed start gives the slot back as `slot` drops.
        let slot = self.slots.reserve(claim)?;
        let pooled = self.warm.lock().await.pop();
        self.refill.notify_one();
        let session = match pooled {
            Some(session) => session,
            None => self.sandbox.open_session().await?,
        };
        let live = Arc::new(Live {
            session: Arc::from(session),
            language,
            owner,
            created_at_ms: now_ms(),
            last_used: Mutex::new(Instant::now()),
            deadline: Mutex::new(None),
            _slot: slot,
        });
        let info = live.info(self.backend());
        self.live.lock().insert(info.session_id.clone(), live);
        tracing::info!(session.id = %info.session_id, "sandbox session opened");
        Ok(info)
    }

    /// The `/v1` sessions of the key `owner` (notebook kernels and other
    /// keys' sessions are not among them).
    pub fn list(&self, owner: &str) -> Vec<SessionInfo> {
        let mut sessions: Vec<SessionInfo> = self
            .live
            .lock()
            .values()
            .filter(|l| l.owner.as_deref() == Some(owner))
            .map(|l| l.info(self.backend()))
            .collect();
        sessions.sort_by_key(|s| s.created_at_ms);
        sessions
    }

    /// How many `/v1` sessions the key `owner` holds.
    pub fn count_of(&self, owner: &str) -> usize {
        self.live
            .lock()
            .values()
            .filter(|l| l.owner.as_deref() == Some(owner))
            .count()
    }

    /// One of the key `owner`'s `/v1` sessions.
    pub fn get(&self, id: &str, owner: &str) -> Option<SessionInfo> {
        self.live
            .lock()
            .get(id)
            .filter(|l| l.owner.as_deref() == Some(owner))
            .map(|l| l.info(self.backend()))
    }

    /// Closes one of the key `owner`'s `/v1` sessions; a notebook's kernel
    /// or another key's session is `NotFound` here.
    pub async fn delete_public(&self, id: &str, owner: &str) -> Result<(), SandboxSessionError> {
        if self.get(id, owner).is_none() {
            return Err(SandboxSessionError::NotFound(id.to_string()));
        }
        self.delete(id).await
    }

    pub async fn delete(&self, id: &str) -> Result<(), SandboxSessionError> {
        let live = self
            .live
            .lock()
            .remove(id)
            .ok_or_else(|| SandboxSessionError::NotFound(id.to_string()))?;
        live.session.close().await;
        tracing::info!(session.id = %id, "sandbox session closed");
        Ok(())
    }

    /// Which backend this is.
    pub fn backend(&self) -> SandboxKind {
        self.sandbox.capabilities().backend
    }

    /// The languages the backend runs.
    pub fn languages(&self) -> Vec<Language> {
        self.sandbox.capabilities().languages
    }

    /// A live session itself, for its files and contexts; counts as a use.
    pub fn session(&self, id: &str) -> Option<Arc<dyn SandboxSession>> {
        let live = self.live.lock().get(id).cloned()?;
        *live.last_used.lock() = Instant::now();
        Some(Arc::clone(&live.session))
    }

    /// Closes the session at `deadline` instead of when it has been idle too
    /// long. `false` if there is no such session.
    pub fn set_deadline(&self, id: &str, deadline: Instant) -> bool {
        match self.live.lock().get(id) {
            Some(live) => {
                *live.deadline.lock() = Some(deadline);
                true
            }
            None => false,
        }
    }

    /// Whether `id` is a live session of this backend.
    pub fn contains(&self, id: &str) -> bool {
        self.live.lock().contains_key(id)
    }

    /// Runs in a context of the session (see [`SandboxSessionExt::create_context`]).
    pub async fn run_in_context(
        &self,
        id: &str,
        context: &str,
        request: &RunRequest,
        events: Option<&mpsc::Sender<RunEvent>>,
        cancel: &CancellationToken,
    ) -> Result<RunOutcome, SandboxSessionError> {
        let session = self
            .session(id)
            .ok_or_else(|| SandboxSessionError::NotFound(id.to_string()))?;
        let started = Instant::now();
        let outcome = session
            .run_in_context(context, request, events, cancel)
            .await;
        self.record(request.language, &outcome, started);
        self.session(id);
        Ok(outcome?)
    }

    pub async fn run(
        &self,
        id: &str,
        request: &RunRequest,
        events: Option<&mpsc::Sender<RunEvent>>,
        cancel: &CancellationToken,
    ) -> Result<RunOutcome, SandboxSessionError> {
        let live = self
            .live
            .lock()
            .get(id)
            .cloned()
            .ok_or_else(|| SandboxSessionError::NotFound(id.to_string()))?;
        *live.last_used.lock() = Instant::now();
        let started = Instant::now();
        let outcome = live.session.run(request, events, cancel).await;
        self.record(request.language, &outcome, started);
        *live.last_used.lock() = Instant::now();
        Ok(outcome?)
    }

    /// Runs one program in a fresh, throw-away sandbox.
    pub async fn run_once(
        &self,
        request: RunRequest,
        events: Option<mpsc::Sender<RunEvent>>,
        cancel: CancellationToken,
    ) -> Result<RunOutcome, SandboxError> {
        let started = Instant::now();
        let language = request.language;
        let outcome = self.sandbox.run(request, events, cancel).await;
        self.record(language, &outcome, started);
        outcome
    }

    fn record(
        &self,
        language: Language,
        outcome: &Result<RunOutcome, SandboxError>,
        started: Instant,
    ) {
        runcell_core::metrics::run_finished(
            language,
            self.sandbox.capabilities().backend,
            super::outcome_label(outcome),
            started.elapsed(),
        );
    }

    /// Live sessions, notebook kernels included (for metrics).
    pub fn live_count(&self) -> usize {
        self.live.lock().len()
    }

    async fn reap_idle(&self) {
        let idle: Vec<String> = self
            .live
            .lock()
            .iter()
            .filter(|(_, l)| l.expired(self.settings.idle_ttl))
            .map(|(id, _)| id.clone())
            .collect();
        for id in idle {
            tracing::info!(session.id = %id, "closing an idle or expired sandbox session");
            let _ = self.delete(&id).await;
        }
    }

    async fn close_all(&self) {
        let live: Vec<Arc<Live>> = self.live.lock().drain().map(|(_, l)| l).collect();
        for session in live {
            session.session.close().await;
        }
        for session in self.warm.lock().await.drain(..) {
            session.close().await;
        }
    }

    /// Sessions ready in the pool (for tests and health).
    pub async fn pooled(&self) -> usize {
        self.warm.lock().await.len()
    }
}

/// A revoked key's `/v1` sessions are closed.
#[async_trait::async_trait]
impl runcell_core::HeldByKey for SandboxSessions {
    fn what(&self) -> &'static str {
        "sandbox sessions"
    }

    async fn close_key(&self, key_id: &str) -> usize {
        let ids: Vec<String> = self
            .live
            .lock()
            .iter()
            .filter(|(_, l)| l.owner.as_deref() == Some(key_id))
            .map(|(id, _)| id.clone())
            .collect();
        let mut closed = 0;
        for id in ids {
            if self.delete(&id).await.is_ok() {
                closed += 1;
            }
        }
        closed
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::super::Capabilities;
    use super::*;

    /// A sandbox whose sessions take a while to start, and which counts
    /// how many it started.
    #[derive(Default)]
    struct Slow {
        started: AtomicUsize,
    }

    struct Nothing(String);

    #[async_trait::async_trait]
    impl SandboxSession for Nothing {
        fn id(&self) -> &str {
            &self.0
        }
        async fn run(
            &self,
            _: &RunRequest,
            _: Option<&mpsc::Sender<RunEvent>>,
            _: &CancellationToken,
        ) -> Result<RunOutcome, SandboxError> {
            Err(SandboxError::NotSupported("nothing runs here".into()))
        }
        async fn close(&self) {}
    }

    #[async_trait::async_trait]
    impl Sandbox for Slow {
        fn capabilities(&self) -> Capabilities {
            Capabilities {
                backend: SandboxKind::Jail,
                languages: vec![Language::Python],
                stateful: true,
                files: false,
                interrupt: false,
                one_shot: false,
                isolated_sessions: true,
                contexts: false,
            }
        }
        async fn run(
            &self,
            _: RunRequest,
            _: Option<mpsc::Sender<RunEvent>>,
            _: CancellationToken,
        ) -> Result<RunOutcome, SandboxError> {
            Err(SandboxError::NotSupported("no one-shot runs".into()))
        }
        async fn open_session(&self) -> Result<Box<dyn SandboxSession>, SandboxError> {
            tokio::time::sleep(Duration::from_millis(20)).await;
            let n = self.started.fetch_add(1, Ordering::SeqCst);
            Ok(Box::new(Nothing(format!("s{n}"))))
        }
    }

    #[tokio::test]
    async fn sessions_opened_at_once_never_pass_the_cap() {
        let sandbox = Arc::new(Slow::default());
        let sessions = SandboxSessions::new(
            Arc::clone(&sandbox) as Arc<dyn Sandbox>,
            SessionSettings {
                pool_size: 0,
                max_sessions: 4,
                ..SessionSettings::default()
            },
        );
        let opens = (0..20).map(|i| {
            let sessions = Arc::clone(&sessions);
            async move { sessions.create(Language::Python, &format!("key{i}")).await }
        });
        let results = futures::future::join_all(opens).await;
        let opened = results.iter().filter(|r| r.is_ok()).count();
        assert_eq!(opened, 4, "{results:?}");
        assert!(
            results
                .iter()
                .filter_map(|r| r.as_ref().err())
                .all(|e| matches!(e, SandboxSessionError::TooMany(4)))
        );
        assert_eq!(sandbox.started.load(Ordering::SeqCst), 4, "kernels started");
        // A closed session gives its slot back.
        let id = results
            .iter()
            .find_map(|r| r.as_ref().ok())
            .map(|s| s.session_id.clone())
            .expect("an open session");
        sessions.delete(&id).await.expect("closed");
        assert!(sessions.create(Language::Python, "late").await.is_ok());
        // An anonymous page's kernel takes from the anonymous share only.
        assert!(matches!(
            sessions
                .create_for_notebook(Language::Python, Claim::Anonymous { client: None })
                .await,
            Err(SandboxSessionError::TooMany(4))
        ));
    }
}
