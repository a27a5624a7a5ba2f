//! Asking, running, re-running and stopping: a session's turns.

use std::sync::Arc;

use runcell_protocol::notebook::Notebook;
use runcell_protocol::{CellId, EventBody, SandboxKind, SessionEvent, TurnId, TurnKind};
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;

use super::Notebooks;
use crate::agent::{TurnRefusal, TurnRequest, parse_language};
use crate::session::{Follower, SessionChannel};

/// A turn as a page or a program asks for it, before it is checked.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum AskedTurn {
    /// A question for the model.
    Ask {
        text: String,
        model: Option<String>,
        /// The sandbox backend the session's programs run on from now on.
        backend: Option<SandboxKind>,
        /// The question this one is another version of (an edit, a
        /// regenerate): it follows the same turn, on a branch of its own.
        #[serde(default)]
        alternative_to: Option<TurnId>,
    },
    /// Code run as written, with no model.
    Run {
        code: String,
        /// `python`, `javascript`, `bash` or `c`, in any case, as sent: an
        /// unknown one is refused as code that cannot run.
        language: String,
        /// The cell it was edited from.
        source: Option<CellId>,
        backend: Option<SandboxKind>,
    },
    /// "Re-run all": a fresh kernel runs the code cells that stood.
    RerunAll,
}

impl AskedTurn {
    /// A question with the server's model, on the session's backend, after
    /// the branch on show (what a form posts).
    pub fn question(text: &str) -> Self {
        Self::Ask {
            text: text.to_string(),
            model: None,
            backend: None,
            alternative_to: None,
        }
    }
}

/// The live events of one turn, from its `turn_started` to its
/// `turn_finished`, in order and without gaps; ends early when the server
/// shuts down.
pub type TurnEvents = ReceiverStream<SessionEvent>;

/// Events buffered for a slow follower of a turn before the turn's
/// forwarder waits for it.
const FOLLOW_BUFFER: usize = 64;

impl Notebooks {
    /// Checks `turn` and queues it as the session's next.
    pub async fn start(
        &self,
        channel: &Arc<SessionChannel>,
        turn: AskedTurn,
    ) -> Result<TurnId, TurnRefusal> {
        if channel.is_retired() {
            return Err(moved());
        }
        let renames = naming_question(channel, &turn);
        let started = self.holder(channel).start(turn).await?;
        if let Some((before, after)) = renames {
            self.retitle(channel, &before, &after).await;
        }
        Ok(started)
    }

    /// Names the session after `after`, an edit of its first question
    /// `before`, if the session's title is still the one `before` gave it
    /// (or none yet): a title the person chose stays.
    async fn retitle(&self, channel: &SessionChannel, before: &str, after: &str) {
        let id = channel.id();
        let title = match self.store().session(id).await {
            Ok(Some(record)) => record.title,
            Ok(None) => return,
            Err(err) => {
                tracing::warn!(session = %id, error = %err, "the session's title was not read");
                return;
            }
        };
        let Some(renamed) = runcell_protocol::page::title_after_edit(&title, before, after) else {
            return;
        };
        if let Err(err) = self.store().rename_session(id, &renamed).await {
            tracing::warn!(session = %id, error = %err, "the edited question did not rename the session");
        }
    }

    /// Starts `turn` and follows it: the events of that turn alone, as they
    /// happen. The turn runs on if the follower goes away (a Stop stops it).
    pub async fn start_followed(
        &self,
        channel: Arc<SessionChannel>,
        turn: AskedTurn,
    ) -> Result<TurnEvents, TurnRefusal> {
        // Listen before starting, so that nothing of the turn is missed.
        let (_, events) = Follower::after(Arc::clone(&channel), u64::MAX);
        let turn = self.start(&channel, turn).await?;
        let (sender, receiver) = mpsc::channel(FOLLOW_BUFFER);
        let shutdown = self.shutdown.clone();
        tokio::spawn(async move {
            tokio::select! {
                () = forward_turn(events, turn, &sender) => {}
                () = shutdown.cancelled() => {}
            }
        });
        Ok(ReceiverStream::new(receiver))
    }

    /// Shows the branch through `turn` from now on (its newest end); new
    /// turns follow it. Refused while a turn runs: the running turn's
    /// branch is the one on show until it ends.
    pub async fn select_branch(
        &self,
        channel: &Arc<SessionChannel>,
        turn: TurnId,
    ) -> Result<(), TurnRefusal> {
        if channel.is_retired() {
            return Err(moved());
        }
        self.holder(channel).select_branch(turn).await
    }

    /// Stops the session's running turn and the turns waiting behind it.
    pub fn stop(&self, channel: &Arc<SessionChannel>) {
        self.holder(channel).stop();
    }

    /// The person is writing a question: the model reads the session's
    /// conversation ahead, in the background, when this node runs its
    /// turns (a model name longer than any real one is not passed on).
    pub fn composing(&self, channel: &Arc<SessionChannel>, model: Option<String>) {
        if channel.is_retired() || channel.remote_holder().is_some() {
            return;
        }
        let model = model.filter(|m| m.len() <= 256);
        let agent = Arc::clone(self.runner.agent());
        let channel = Arc::clone(channel);
        tokio::spawn(async move { agent.read_ahead(channel.log(), model).await });
    }

    /// The request the agent runs for `turn`: the language known, the
    /// backend picked (a pick stays for the session's later turns).
    pub(super) fn prepare(
        &self,
        channel: &SessionChannel,
        turn: AskedTurn,
    ) -> Result<TurnRequest, TurnRefusal> {
        match turn {
            AskedTurn::Ask {
                text,
                model,
                backend,
                alternative_to,
            } => {
                if let Some(replaced) = alternative_to {
                    let history = Notebook::from_events(&channel.log().events_after(0));
                    if !history
                        .turn(replaced)
                        .is_some_and(|t| t.kind == TurnKind::Ask && t.status.is_some())
                    {
                        return Err(TurnRefusal::UnknownTurn(format!(
                            "turn {} is no finished question of this session",
                            replaced.0
                        )));
                    }
                }
                self.runner.choose_backend(channel, backend)?;
                Ok(TurnRequest::Ask {
                    text,
                    model,
                    alternative_to,
                })
            }
            AskedTurn::Run {
                code,
                language,
                source,
                backend,
            } => {
                let language = parse_language(&language)?;
                self.runner.choose_backend(channel, backend)?;
                Ok(TurnRequest::Run {
                    code,
                    language,
                    source,
                })
            }
            AskedTurn::RerunAll => Ok(TurnRequest::RerunAll),
        }
    }
}

/// The question `turn` replaces and its new text, when `turn` is an edit
/// of the session's first question on show (the one that named it).
fn naming_question(channel: &SessionChannel, turn: &AskedTurn) -> Option<(String, String)> {
    let AskedTurn::Ask {
        text,
        alternative_to: Some(replaced),
        ..
    } = turn
    else {
        return None;
    };
    let history = Notebook::from_events(&channel.log().events_after(0));
    let first = history.turns().find(|t| t.kind == TurnKind::Ask)?;
    if first.id != *replaced {
        return None;
    }
    let before = history.question(first.id)?;
    (before != text).then(|| (before.to_string(), text.clone()))
}

/// Why a turn is not started in a session this node lost to another.
pub(super) fn moved() -> TurnRefusal {
    TurnRefusal::Unreachable("this session moved to another node; reload the page".into())
}

/// Sends the events of `turn`, in order and without gaps, until it finishes
/// or the follower goes away.
async fn forward_turn(mut events: Follower, turn: TurnId, follower: &mpsc::Sender<SessionEvent>) {
    let mut started = false;
    while let Some(batch) = events.next().await {
        for event in batch {
            let (first, last) = match &event.event {
                EventBody::TurnStarted { turn: t, .. } => (*t == turn, false),
                EventBody::TurnFinished { turn: t, .. } => (false, *t == turn),
                _ => (false, false),
            };
            started |= first;
            if !started {
                // An earlier turn of the session, still running.
                continue;
            }
            if follower.send(event).await.is_err() || last {
                return;
            }
        }
    }
}
