//! The conversation a question opens, and the one each session's last turn
//! sent, kept so that the next question's request begins with it exactly as
//! it was sent (its question with notes, its programs as generated, their
//! results, the explanation as generated): a model that keeps a prompt's
//! reading then reads only the new question. It is used only while the notebook's turns are still the
//! ones it was sent for; an edit, a regenerate, a branch switch, a fork, a
//! kernel lost or a run of the person's own code make the next question
//! rebuild its memory from the notebook ([`super::prompt::history`]).
//!
//! Bounded: one conversation a session, [`MAX_BYTES`] each, the
//! [`MAX_SESSIONS`] most recently used sessions in all.

use std::collections::VecDeque;

use parking_lot::Mutex;
use runcell_protocol::notebook::Notebook;
use runcell_protocol::{CellKind, TurnId};

use super::{Agent, prompt};
use crate::session::SessionLog;
use runcell_llm::Message;
use runcell_protocol::SessionId;

/// The most sessions whose conversation is kept.
const MAX_SESSIONS: usize = 64;

/// The longest conversation kept, in bytes of message text.
const MAX_BYTES: usize = 128 * 1024;

/// A conversation as sent, and the session's turns it holds.
struct Kept {
    session: SessionId,
    /// The branch's turns, in order, the last the one that sent it.
    turns: Vec<TurnId>,
    messages: Vec<Message>,
}

/// Each session's last conversation, most recently used last.
#[derive(Default)]
pub(super) struct Conversations {
    kept: Mutex<VecDeque<Kept>>,
}

impl Conversations {
    /// Keeps `messages`, the conversation the session's turn `turns.last()`
    /// sent, in place of the session's earlier one. One too long is not
    /// kept.
    pub(super) fn keep(&self, session: SessionId, turns: Vec<TurnId>, messages: Vec<Message>) {
        let mut kept = self.kept.lock();
        kept.retain(|k| k.session != session);
        let bytes: usize = messages.iter().map(|m| m.content.len()).sum();
        if bytes > MAX_BYTES || turns.is_empty() {
            return;
        }
        if kept.len() >= MAX_SESSIONS {
            kept.pop_front();
        }
        kept.push_back(Kept {
            session,
            turns,
            messages,
        });
    }

    /// The session's kept conversation, when the branch's finished turns
    /// are still `turns` and it opens with `head` (the same system prompt
    /// and files note); a conversation that no longer matches is dropped.
    pub(super) fn matching(
        &self,
        session: SessionId,
        turns: &[TurnId],
        head: &[Message],
    ) -> Option<Vec<Message>> {
        let mut kept = self.kept.lock();
        let at = kept.iter().position(|k| k.session == session)?;
        let found = kept.remove(at)?;
        if found.turns != turns || !found.messages.starts_with(head) {
            return None;
        }
        let messages = found.messages.clone();
        kept.push_back(found);
        Some(messages)
    }

    /// Drops the session's conversation (the session ended).
    pub(super) fn forget(&self, session: SessionId) {
        self.kept.lock().retain(|k| k.session != session);
    }
}

impl Agent {
    /// The conversation a question opens: the server's own system prompt
    /// (the rules and the environment: the same for every question, so
    /// shared), the person's files, the memory of the earlier turns, and
    /// the question with the notes on what it asks for last. The memory is
    /// the session's last conversation exactly as it was sent while the
    /// notebook's turns still match it, so that each request extends the
    /// one before; else it is rebuilt from the notebook.
    pub(super) async fn opening(
        &self,
        session: &SessionLog,
        history: &Notebook,
        text: &str,
    ) -> Vec<Message> {
        let mut head = vec![Message::system(self.system_prompt(session))];
        // The person's files, so that "summarise the uploaded CSV" reads it.
        if let Some(note) = self.kernels.files_note(session.id(), session.owner()).await {
            head.push(Message::system(note));
        }
        // A rebuild for this branch that failed part-way lost variables too.
        let restore_failed = history
            .all_turns()
            .last()
            .and_then(|t| t.restored.as_ref())
            .is_some_and(|r| r.error.is_some());
        let kernel_lost = history.kernel_lost().is_some() || restore_failed;
        let question = prompt::question_message(text, kernel_lost, &question_notes(text));
        let head_tokens: usize = head.iter().map(|m| prompt::approx_tokens(&m.content)).sum();
        let budget = (self.settings.context_tokens as usize)
            .saturating_sub(self.settings.max_tokens as usize)
            .saturating_sub(head_tokens + prompt::approx_tokens(&question.content) + 256);
        let finished = finished_turns(history);
        let kept = (!kernel_lost)
            .then(|| self.conversations.matching(session.id(), &finished, &head))
            .flatten()
            .filter(|kept| {
                let tokens: usize = kept[head.len()..]
                    .iter()
                    .map(|m| prompt::approx_tokens(&m.content))
                    .sum();
                tokens <= budget
            });
        let mut messages = match kept {
            Some(kept) => kept,
            None => {
                head.extend(prompt::history(history, budget));
                head
            }
        };
        messages.push(question);
        messages
    }

    /// The first message of every request: the rules, and the note on the
    /// environment the programs run in (which depends on the server's
    /// sandboxes and the session's choice among them, nothing a person
    /// wrote or uploaded).
    fn system_prompt(&self, session: &SessionLog) -> String {
        match self.kernels.environment_note(session.id()) {
            Some(note) => format!("{} {note}", prompt::SYSTEM_PROMPT),
            None => prompt::SYSTEM_PROMPT.to_string(),
        }
    }
}

/// The text of the explanation cell published after event `before`, when
/// it stood as the model first wrote it (no draft of it was held and
/// asked again).
pub(super) fn first_explanation(session: &SessionLog, before: u64) -> Option<String> {
    use runcell_protocol::EventBody;
    let events = session.events_after(before);
    let cell = events.iter().find_map(|e| match &e.event {
        EventBody::CellStarted {
            cell_id,
            cell_kind: CellKind::Explanation,
            ..
        } => Some(*cell_id),
        _ => None,
    })?;
    let mut text = String::new();
    for event in &events {
        match &event.event {
            EventBody::CellReset { cell_id } if *cell_id == cell => return None,
            EventBody::CellDelta {
                cell_id,
                text: piece,
                ..
            } if *cell_id == cell => text.push_str(piece),
            _ => {}
        }
    }
    (!text.is_empty()).then_some(text)
}

/// The notes added after a question, for what it asks for. Only those
/// that cannot make a right program wrong: how to draw a chart the person
/// asked to hover or zoom, and the question's own answer template restated.
fn question_notes(text: &str) -> Vec<&'static str> {
    let mut notes = Vec::new();
    if let Some(note) = prompt::chart_note(text) {
        notes.push(note);
        runcell_core::metrics::prompt_note("chart");
    }
    if let Some(note) = prompt::format_note(text) {
        notes.push(note);
        runcell_core::metrics::prompt_note("format");
    }
    notes
}

/// The branch's finished turns, in order: what a kept conversation must
/// have been sent for.
pub(super) fn finished_turns(history: &Notebook) -> Vec<TurnId> {
    history
        .turns()
        .filter(|t| t.status.is_some())
        .map(|t| t.id)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_conversation_is_used_only_while_its_turns_and_head_match() {
        let conversations = Conversations::default();
        let sessions = [SessionId::random(), SessionId::random()];
        let session = |n: usize| sessions[n - 1];
        let head = vec![Message::system("rules")];
        let sent = vec![
            Message::system("rules"),
            Message::user("q1"),
            Message::assistant("a1"),
        ];
        conversations.keep(session(1), vec![TurnId(1)], sent.clone());
        assert_eq!(
            conversations.matching(session(1), &[TurnId(1)], &head),
            Some(sent.clone())
        );
        // Still there after a match; another session's is not this one's.
        assert_eq!(
            conversations.matching(session(1), &[TurnId(1)], &head),
            Some(sent.clone())
        );
        assert_eq!(
            conversations.matching(session(2), &[TurnId(1)], &head),
            None
        );
        // A regenerate (another turn list) drops it.
        assert_eq!(
            conversations.matching(session(1), &[TurnId(2)], &head),
            None
        );
        assert_eq!(
            conversations.matching(session(1), &[TurnId(1)], &head),
            None
        );
        // Another files note: dropped.
        conversations.keep(session(1), vec![TurnId(1)], sent.clone());
        let other = vec![Message::system("rules"), Message::system("files")];
        assert_eq!(
            conversations.matching(session(1), &[TurnId(1)], &other),
            None
        );
        // A session that ended.
        conversations.keep(session(1), vec![TurnId(1)], sent);
        conversations.forget(session(1));
        assert_eq!(
            conversations.matching(session(1), &[TurnId(1)], &head),
            None
        );
    }

    #[test]
    fn conversations_are_bounded_in_size_and_number() {
        let conversations = Conversations::default();
        let sessions: Vec<SessionId> = (0..=MAX_SESSIONS + 1)
            .map(|_| SessionId::random())
            .collect();
        let session = |n: usize| sessions[n];
        let long = vec![Message::user("x".repeat(MAX_BYTES + 1))];
        conversations.keep(session(1), vec![TurnId(1)], long);
        assert_eq!(conversations.matching(session(1), &[TurnId(1)], &[]), None);
        for n in 0..=MAX_SESSIONS {
            conversations.keep(session(n), vec![TurnId(1)], vec![Message::user("q")]);
        }
        assert_eq!(conversations.kept.lock().len(), MAX_SESSIONS);
        // The least recently used went first.
        assert_eq!(conversations.matching(session(0), &[TurnId(1)], &[]), None);
        assert!(
            conversations
                .matching(session(MAX_SESSIONS), &[TurnId(1)], &[])
                .is_some()
        );
    }
}
