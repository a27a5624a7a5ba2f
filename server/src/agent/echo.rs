use std::time::{Duration, Instant};

use app::protocol::{CellKind, CellStatus, EventBody};
use tokio_util::sync::CancellationToken;

use crate::session::SessionChannel;

/// The most frames one answer is cut into, however long the message.
const MAX_CHUNKS: usize = 48;

/// Answers a message by streaming it back, a few words a frame: exercises the
/// whole path (turns, cells, deltas, ordering, resume) before the real agent.
#[derive(Clone, Debug)]
pub struct EchoResponder {
    /// The pause before each frame, so that streaming is visible.
    pub frame_delay: Duration,
}

impl Default for EchoResponder {
    fn default() -> Self {
        Self {
            frame_delay: Duration::from_millis(40),
        }
    }
}

impl EchoResponder {
    /// Runs one turn: records the message, then streams the answer cell.
    /// Turns in a session run one after another. Cancelling finishes the
    /// answer cell as `cancelled`.
    #[tracing::instrument(name = "turn", skip_all, fields(session.id = %session.id()))]
    pub async fn run_turn(
        &self,
        session: &SessionChannel,
        text: String,
        cancel: CancellationToken,
    ) {
        let _turn = session.turn.lock().await;
        let started = Instant::now();
        session.publish(EventBody::UserMessage {
            cell_id: session.next_cell_id(),
            text: text.clone(),
        });
        let cell_id = session.next_cell_id();
        session.publish(EventBody::CellStarted {
            cell_id,
            cell_kind: CellKind::Echo,
        });
        let mut status = CellStatus::Ok;
        for chunk in chunks(&text) {
            tokio::select! {
                () = cancel.cancelled() => {
                    status = CellStatus::Cancelled;
                    break;
                }
                () = tokio::time::sleep(self.frame_delay) => {}
            }
            session.publish(EventBody::CellDelta {
                cell_id,
                text: chunk.to_string(),
            });
        }
        let elapsed_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
        session.publish(EventBody::CellFinished {
            cell_id,
            status,
            elapsed_ms,
        });
        tracing::info!(duration_ms = elapsed_ms, ?status, "turn finished");
    }
}

/// Cuts `text` into at most [`MAX_CHUNKS`] pieces at word ends; the pieces put
/// together are `text` again.
pub fn chunks(text: &str) -> Vec<&str> {
    let target = text.len().div_ceil(MAX_CHUNKS).max(1);
    let mut pieces = Vec::new();
    let mut start = 0;
    let mut end = 0;
    for word in text.split_inclusive(char::is_whitespace) {
        end += word.len();
        if end - start >= target {
            pieces.push(&text[start..end]);
            start = end;
        }
    }
    if start < text.len() {
        pieces.push(&text[start..]);
    }
    pieces
}

#[cfg(test)]
mod tests {
    use app::notebook::Notebook;
    use proptest::prelude::*;

    use super::*;
    use crate::session::{SessionHub, SessionId};

    fn fresh_channel() -> std::sync::Arc<SessionChannel> {
        SessionHub::new().channel(SessionId::random())
    }

    fn echo(frame_delay: Duration) -> EchoResponder {
        EchoResponder { frame_delay }
    }

    #[test]
    fn short_messages_go_a_word_a_frame() {
        assert_eq!(chunks("how many r's"), vec!["how ", "many ", "r's"]);
        assert_eq!(chunks("x"), vec!["x"]);
        assert!(chunks("").is_empty());
    }

    proptest! {
        #[test]
        fn chunks_rebuild_the_text_within_the_frame_limit(text in "\\PC{0,2000}") {
            let pieces = chunks(&text);
            prop_assert_eq!(pieces.concat(), text.clone());
            prop_assert!(pieces.len() <= MAX_CHUNKS + 1, "{} pieces", pieces.len());
        }
    }

    #[tokio::test]
    async fn a_turn_streams_the_message_back() {
        let channel = fresh_channel();
        let echo = echo(Duration::ZERO);
        echo.run_turn(&channel, "one two three".into(), CancellationToken::new())
            .await;
        let events = channel.events_after(0);
        let deltas = events
            .iter()
            .filter(|e| matches!(e.event, EventBody::CellDelta { .. }))
            .count();
        assert_eq!(deltas, 3);
        let notebook = Notebook::from_events(&events);
        assert_eq!(notebook.cells().len(), 2);
        assert_eq!(notebook.cells()[1].text, "one two three");
        assert_eq!(notebook.cells()[1].status, CellStatus::Ok);
    }

    #[tokio::test]
    async fn a_cancelled_turn_finishes_its_cell_as_cancelled() {
        let channel = fresh_channel();
        let echo = echo(Duration::from_secs(3600));
        let cancel = CancellationToken::new();
        cancel.cancel();
        echo.run_turn(&channel, "never streamed".into(), cancel)
            .await;
        let notebook = Notebook::from_events(&channel.events_after(0));
        assert_eq!(notebook.cells()[1].status, CellStatus::Cancelled);
        assert_eq!(notebook.cells()[1].text, "");
    }

    #[tokio::test]
    async fn turns_in_one_session_do_not_interleave() {
        let channel = fresh_channel();
        let echo = echo(Duration::from_millis(1));
        let token = CancellationToken::new();
        tokio::join!(
            echo.run_turn(&channel, "a b c".into(), token.clone()),
            echo.run_turn(&channel, "d e f".into(), token.clone()),
        );
        let notebook = Notebook::from_events(&channel.events_after(0));
        let texts: Vec<&str> = notebook.cells().iter().map(|c| c.text.as_str()).collect();
        assert!(
            texts == ["a b c", "a b c", "d e f", "d e f"]
                || texts == ["d e f", "d e f", "a b c", "a b c"],
            "{texts:?}"
        );
    }
}
