//! Reading a session's conversation ahead of its next question: while the
//! person types one (or just gave the notebook a file), the model reads
//! what that question's request will begin with — the system prompt, the
//! files note, the earlier turns — so that the question, once sent, pays
//! only for its own tokens. Best effort: the model gives way to any request
//! that waits, a session is read ahead at most once every
//! [`MIN_INTERVAL`] and never twice for the same conversation, and a
//! failure only means the question reads its prompt itself.

use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use runcell_protocol::notebook::Notebook;

use super::Agent;
use crate::session::SessionLog;
use runcell_llm::{ChatRequest, Message};
use runcell_protocol::SessionId;

/// The least time between two readings ahead of one session.
const MIN_INTERVAL: Duration = Duration::from_secs(5);

/// Sessions remembered (beyond it, the oldest are forgotten).
const MAX_SESSIONS: usize = 1024;

/// When each session was last read ahead, and what.
#[derive(Default)]
pub(super) struct ReadAhead {
    last: Mutex<HashMap<SessionId, (Instant, u64)>>,
}

impl ReadAhead {
    /// Whether `session` may be read ahead now, for a conversation whose
    /// fingerprint is `print`; if so, it is marked as read.
    fn claim(&self, session: SessionId, print: u64, now: Instant) -> bool {
        let mut last = self.last.lock();
        if let Some(&(when, seen)) = last.get(&session)
            && (seen == print || now.duration_since(when) < MIN_INTERVAL)
        {
            return false;
        }
        if last.len() >= MAX_SESSIONS && !last.contains_key(&session) {
            let oldest = last
                .iter()
                .min_by_key(|(_, (when, _))| *when)
                .map(|(id, _)| *id);
            if let Some(oldest) = oldest {
                last.remove(&oldest);
            }
        }
        last.insert(session, (now, print));
        true
    }
}

fn fingerprint(messages: &[Message]) -> u64 {
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    for message in messages {
        format!("{:?}", message.role).hash(&mut hasher);
        message.content.hash(&mut hasher);
    }
    hasher.finish()
}

impl Agent {
    /// Has the model read `session`'s conversation up to where its next
    /// question goes, in `model` (the server's default when `None`); does
    /// nothing while a turn runs, or when that was just done.
    pub async fn read_ahead(&self, session: &SessionLog, model: Option<String>) {
        let history = Notebook::from_events(&session.events_after(0));
        if history.is_busy() {
            return;
        }
        // The opening of an empty question, without it.
        let mut messages = self.opening(session, &history, "").await;
        messages.pop();
        if !self
            .read_ahead
            .claim(session.id(), fingerprint(&messages), Instant::now())
        {
            return;
        }
        let request = ChatRequest {
            requester: self.requester(session),
            conversation: Some(session.id().to_string()),
            shared_messages: super::prompt::shared_messages(&messages),
            ..self.code_request(&messages, model, self.code_channel())
        };
        if let Err(e) = self.llm.prefill(request).await {
            tracing::debug!(error = %e, "reading a conversation ahead failed");
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn a_session_is_read_ahead_once_per_conversation_and_not_too_often() {
        let ahead = ReadAhead::default();
        let (a, b) = (SessionId::random(), SessionId::random());
        let t0 = Instant::now();
        assert!(ahead.claim(a, 1, t0));
        // The same conversation again, even later: nothing new to read.
        assert!(!ahead.claim(a, 1, t0 + Duration::from_secs(60)));
        // Another conversation too soon, then late enough.
        assert!(!ahead.claim(a, 2, t0 + Duration::from_secs(1)));
        assert!(ahead.claim(a, 2, t0 + Duration::from_secs(6)));
        // Sessions are apart.
        assert!(ahead.claim(b, 1, t0));
    }
}
