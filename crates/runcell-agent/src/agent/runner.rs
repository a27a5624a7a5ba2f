//! Starting and stopping turns: the one path every way of asking takes (the
//! page's WebSocket and the NDJSON API alike).

use std::sync::Arc;

use runcell_protocol::{ErrorCode, MAX_ASK_BYTES, TurnId, UnknownLanguage, validate_ask};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::session::quota::OwnerQuotas;

use super::{Agent, TurnRequest};
use crate::session::{MAX_PENDING_TURNS, SessionChannel};
use runcell_sandbox::{Language, SandboxKind, validate_code};

/// Why a turn was not started.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error, serde::Serialize, serde::Deserialize)]
pub enum TurnRefusal {
    #[error("not sent: the message is empty")]
    Empty,
    #[error("not sent: the message is longer than {MAX_ASK_BYTES} bytes")]
    TooLong,
    #[error("not run: {0}")]
    InvalidCode(String),
    #[error("not sent: {MAX_PENDING_TURNS} turns are already waiting in this session")]
    Busy,
    #[error("the server is shutting down")]
    ShuttingDown,
    #[error("this session was deleted")]
    Deleted,
    #[error("not sent: {0}")]
    Backend(String),
    /// An edit, a regenerate or a branch switch named no finished question
    /// of the session's.
    #[error("not sent: {0}")]
    UnknownTurn(String),
    /// The session is held by another node that did not take the turn.
    #[error("not sent: {0}")]
    Unreachable(String),
    /// A limit of the person's (turns a minute, the model's time a day).
    #[error("not sent: {0}")]
    OverQuota(String),
}

impl TurnRefusal {
    pub fn code(&self) -> ErrorCode {
        match self {
            Self::Empty => ErrorCode::EmptyMessage,
            Self::TooLong => ErrorCode::MessageTooLong,
            Self::InvalidCode(_) => ErrorCode::InvalidCode,
            Self::Backend(_) => ErrorCode::BadFrame,
            Self::UnknownTurn(_) => ErrorCode::UnknownTurn,
            Self::Busy | Self::OverQuota(_) => ErrorCode::Busy,
            Self::ShuttingDown | Self::Deleted | Self::Unreachable(_) => ErrorCode::Unavailable,
        }
    }
}

/// Runs turns as tasks of their own, so that a page that goes away does not
/// stop them.
pub struct TurnRunner {
    agent: Arc<Agent>,
    tracker: TaskTracker,
    shutdown: CancellationToken,
    /// People's limits, and where their turns' model time is counted.
    quotas: Option<Arc<dyn OwnerQuotas>>,
}

impl TurnRunner {
    pub fn new(agent: Arc<Agent>, tracker: TaskTracker, shutdown: CancellationToken) -> Self {
        Self {
            agent,
            tracker,
            shutdown,
            quotas: None,
        }
    }

    /// Turns are admitted and accounted by `quotas`.
    pub fn with_quotas(mut self, quotas: Arc<dyn OwnerQuotas>) -> Self {
        self.quotas = Some(quotas);
        self
    }

    pub fn agent(&self) -> &Arc<Agent> {
        &self.agent
    }

    /// Runs the session's next programs on the sandbox backend `backend`
    /// (`None` keeps the one it has).
    pub fn choose_backend(
        &self,
        channel: &SessionChannel,
        backend: Option<SandboxKind>,
    ) -> Result<(), TurnRefusal> {
        match backend {
            None => Ok(()),
            Some(backend) => self
                .agent
                .kernels()
                .choose(channel.id(), backend)
                .map_err(|e| TurnRefusal::Backend(e.to_string())),
        }
    }

    /// Checks `request` and queues it as the session's next turn.
    pub fn start(
        &self,
        channel: &Arc<SessionChannel>,
        request: TurnRequest,
    ) -> Result<TurnId, TurnRefusal> {
        match &request {
            TurnRequest::Ask { text, .. } => validate_ask(text).map_err(|e| match e {
                runcell_protocol::AskError::Empty => TurnRefusal::Empty,
                runcell_protocol::AskError::TooLong => TurnRefusal::TooLong,
            })?,
            TurnRequest::Run { code, .. } => {
                if code.trim().is_empty() {
                    return Err(TurnRefusal::InvalidCode("the code is empty".into()));
                }
                validate_code(code).map_err(|e| TurnRefusal::InvalidCode(e.to_string()))?;
            }
            TurnRequest::RerunAll => {}
        }
        if self.shutdown.is_cancelled() {
            return Err(TurnRefusal::ShuttingDown);
        }
        if channel.is_closed() {
            return Err(TurnRefusal::Deleted);
        }
        let owner = channel.owner();
        if let Some(quotas) = &self.quotas {
            quotas
                .admit_turn(owner)
                .map_err(|over| TurnRefusal::OverQuota(over.0))?;
        }
        let slot = channel.reserve_turn().ok_or(TurnRefusal::Busy)?;
        let turn = channel.next_turn_id();
        let cancel = self.shutdown.child_token();
        let stop = channel.stop_token();
        let agent = Arc::clone(&self.agent);
        let quotas = self.quotas.clone();
        self.tracker.spawn(async move {
            let channel = slot.channel();
            let run = async {
                // One turn at a time per session, in the order asked.
                let _turn = channel.turn.lock().await;
                let ((), model_ms) = runcell_llm::model_time_of(agent.run_turn(
                    channel.log(),
                    turn,
                    request,
                    cancel.clone(),
                ))
                .await;
                if let Some(quotas) = &quotas {
                    quotas.turn_used(owner, model_ms);
                }
            };
            tokio::pin!(run);
            tokio::select! {
                () = &mut run => return,
                () = stop.cancelled() => cancel.cancel(),
            }
            // Stopped: the turn finishes at once, as cancelled.
            run.await;
        });
        Ok(turn)
    }

    /// Stops the session's running turn and the turns waiting behind it.
    pub fn stop(&self, channel: &SessionChannel) {
        channel.stop_turns();
    }
}

/// The language named in a run request, in any case.
pub fn parse_language(name: &str) -> Result<Language, TurnRefusal> {
    name.to_ascii_lowercase()
        .parse()
        .map_err(|_| TurnRefusal::InvalidCode(UnknownLanguage(name.to_string()).to_string()))
}
