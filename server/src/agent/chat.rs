use std::sync::Arc;
use std::time::{Duration, Instant};

use app::protocol::{CellError, CellId, CellKind, CellStatus, EventBody};
use futures::StreamExt;
use tokio_util::sync::CancellationToken;

use crate::clock::millis;
use crate::llm::tools::{EXECUTE_CODE, PartialCode, execute_code_spec, program_of};
use crate::llm::{
    ChatRequest, Completion, FinishReason, Llm, LlmError, LlmEvent, Message, ToolChoice,
};
use crate::session::SessionChannel;

/// What the model is told it is.
/// Asking for a labelled answer made the small default model compute rather
/// than guess (it answered "how many r's are in strawberry?" with
/// `print("strawberry" * 5)` when asked only to print "its result"); it then
/// wrote command-line tools reading `sys.argv`, hence the last sentence.
pub const SYSTEM_PROMPT: &str = "You are runcell, a Python code interpreter. For every \
request, write one complete Python program that computes the answer and prints it with a \
short label. Include the imports it needs. Put the values from the request in the code: \
never read input() or command-line arguments.";

/// Answers a message by streaming the model's reply into an answer cell.
///
/// Running the code the model writes belongs to the notebook agent; this
/// responder shows the program as a fenced block in the answer, streamed as
/// the tool call's arguments arrive.
pub struct ChatResponder {
    pub llm: Arc<dyn Llm>,
    /// The longest answer, in tokens.
    pub max_tokens: u32,
    /// The longest a whole answer may take (a server that trickles
    /// keep-alives must not hold the session for ever).
    pub answer_timeout: Duration,
}

/// What has been published in the answer cell so far.
#[derive(Default)]
struct Shown {
    code: ShownCode,
    wrote_text: bool,
    first_token: Option<Duration>,
    calls_started: bool,
}

impl ChatResponder {
    /// Runs one turn: records the message, then streams the answer cell.
    /// Turns in a session run one after another. Cancelling drops the model's
    /// stream at once and finishes the cell as `cancelled`.
    #[tracing::instrument(name = "turn", skip_all, fields(session.id = %session.id(), llm.backend = self.llm.backend()))]
    pub async fn run_turn(
        &self,
        session: &SessionChannel,
        text: String,
        model: Option<String>,
        cancel: CancellationToken,
    ) {
        let _turn = tokio::select! {
            biased;
            // Cancelled while waiting for the turn before: nothing to show.
            () = cancel.cancelled() => return,
            turn = session.turn.lock() => turn,
        };
        let started = Instant::now();
        session.publish(EventBody::UserMessage {
            cell_id: session.next_cell_id(),
            text: text.clone(),
        });
        let cell_id = session.next_cell_id();
        session.publish(EventBody::CellStarted {
            cell_id,
            cell_kind: CellKind::Answer,
        });
        let request = self.request(text, model);
        let mut shown = Shown::default();
        let outcome = tokio::select! {
            () = cancel.cancelled() => Outcome::Cancelled,
            () = tokio::time::sleep(self.answer_timeout) => {
                Outcome::Failed(LlmError::Timeout(self.answer_timeout))
            }
            outcome = self.stream_answer(session, cell_id, request, started, &mut shown) => outcome,
        };
        // A program shown as it streamed is closed whatever happened next.
        let mut rest = String::new();
        if shown.code.open {
            rest.push_str(if shown.code.ends_with_newline {
                "```"
            } else {
                "\n```"
            });
        }
        let (status, error) = match outcome {
            Outcome::Answered(completion) => {
                match program_of(&completion) {
                    Some(code) if !shown.code.open && !completion.text.contains("```") => {
                        rest.push_str(&format!(
                            "{}```{}\n{}\n```",
                            if completion.text.is_empty() {
                                ""
                            } else {
                                "\n\n"
                            },
                            code.language,
                            code.code
                        ));
                    }
                    _ => {}
                }
                if completion.finish_reason == FinishReason::Length {
                    rest.push_str("\n\n(cut off at the answer's token limit)");
                }
                if program_of(&completion).is_none() && completion.text.trim().is_empty() {
                    (
                        CellStatus::Error,
                        Some(CellError {
                            code: "llm_no_answer".into(),
                            message: "the model answered with neither text nor a program".into(),
                        }),
                    )
                } else {
                    (CellStatus::Ok, None)
                }
            }
            Outcome::Cancelled => (CellStatus::Cancelled, None),
            Outcome::Failed(e) => {
                tracing::warn!(code = e.code(), error = %e, "the model failed");
                (
                    CellStatus::Error,
                    Some(CellError {
                        code: e.code().into(),
                        message: e.to_string(),
                    }),
                )
            }
        };
        if !rest.is_empty() {
            session.publish(EventBody::CellDelta {
                cell_id,
                text: rest,
            });
        }
        let elapsed_ms = millis(started.elapsed());
        session.publish(EventBody::CellFinished {
            cell_id,
            status,
            elapsed_ms,
            error,
        });
        tracing::info!(duration_ms = elapsed_ms, ?status, "turn finished");
    }

    /// Every answer is a program: a backend with tools must call
    /// `execute_code` (the embedded model then decodes under a grammar, which
    /// made 8 of 8 eval programs runnable against 5 of 8 left free); one
    /// without tools is asked in prose and its fenced block is taken.
    fn request(&self, text: String, model: Option<String>) -> ChatRequest {
        let tools = self.llm.capabilities().tools;
        ChatRequest {
            model,
            messages: vec![Message::system(SYSTEM_PROMPT), Message::user(text)],
            tools: if tools {
                vec![execute_code_spec()]
            } else {
                Vec::new()
            },
            tool_choice: if tools {
                ToolChoice::Named(EXECUTE_CODE.into())
            } else {
                ToolChoice::Auto
            },
            max_tokens: Some(self.max_tokens),
            temperature: Some(0.0),
            ..ChatRequest::default()
        }
    }

    async fn stream_answer(
        &self,
        session: &SessionChannel,
        cell_id: CellId,
        request: ChatRequest,
        started: Instant,
        shown: &mut Shown,
    ) -> Outcome {
        let mut stream = match self.llm.chat(request).await {
            Ok(stream) => stream,
            Err(e) => return Outcome::Failed(e),
        };
        while let Some(item) = stream.next().await {
            match item {
                Ok(LlmEvent::Text(text)) => {
                    shown.first_token.get_or_insert_with(|| started.elapsed());
                    shown.wrote_text |= !text.is_empty();
                    session.publish(EventBody::CellDelta { cell_id, text });
                }
                Ok(LlmEvent::ToolCallDelta {
                    index, arguments, ..
                }) => {
                    shown.first_token.get_or_insert_with(|| started.elapsed());
                    shown.calls_started = true;
                    if index == 0 {
                        shown.code.arguments.push_str(&arguments);
                        if let Some(text) = shown.code.advance(shown.wrote_text) {
                            session.publish(EventBody::CellDelta { cell_id, text });
                        }
                    }
                }
                Ok(LlmEvent::Done(completion)) => {
                    tracing::info!(
                        ttft_ms = shown.first_token.map(millis),
                        prompt_tokens = completion.usage.map(|u| u.prompt_tokens),
                        completion_tokens = completion.usage.map(|u| u.completion_tokens),
                        tool_calls = completion.tool_calls.len(),
                        "model answered"
                    );
                    return Outcome::Answered(completion);
                }
                Err(e) => return Outcome::Failed(e),
            }
        }
        let detail = if shown.calls_started {
            "a tool call"
        } else {
            "the answer"
        };
        Outcome::Failed(LlmError::MalformedStream(format!(
            "the stream ended in the middle of {detail}"
        )))
    }
}

/// The first tool call's program, shown while its arguments stream.
#[derive(Default)]
struct ShownCode {
    arguments: String,
    /// Bytes of code published so far.
    code_len: usize,
    /// The opening fence has been published.
    open: bool,
    /// The code published so far ends a line.
    ends_with_newline: bool,
}

impl ShownCode {
    /// The text to append to the cell now, if any.
    fn advance(&mut self, after_text: bool) -> Option<String> {
        let partial = PartialCode::read(&self.arguments);
        let new = partial
            .code
            .get(self.code_len..)
            .filter(|s| !s.is_empty())?;
        let mut text = String::new();
        if !self.open {
            self.open = true;
            if after_text {
                text.push_str("\n\n");
            }
            let language = partial.language.as_deref().unwrap_or("python");
            text.push_str("```");
            text.push_str(language);
            text.push('\n');
        }
        text.push_str(new);
        self.ends_with_newline = new.ends_with('\n');
        self.code_len = partial.code.len();
        Some(text)
    }
}

enum Outcome {
    Answered(Completion),
    Cancelled,
    Failed(LlmError),
}

#[cfg(test)]
mod tests {
    use app::notebook::Notebook;

    use super::*;
    use crate::llm::scripted::ScriptedLlm;
    use crate::session::{SessionHub, SessionId};

    fn fresh_channel() -> Arc<SessionChannel> {
        SessionHub::new().channel(SessionId::random())
    }

    fn responder(frame_delay: Duration) -> ChatResponder {
        ChatResponder {
            llm: Arc::new(ScriptedLlm {
                frame_delay,
                ..ScriptedLlm::default()
            }),
            max_tokens: 256,
            answer_timeout: Duration::from_secs(60),
        }
    }

    /// The answer the scripted model gives a message without code.
    fn printed(text: &str) -> String {
        format!("```python\nprint({})\n```", serde_json::Value::from(text))
    }

    async fn turn(responder: &ChatResponder, text: &str) -> Notebook {
        let channel = fresh_channel();
        responder
            .run_turn(&channel, text.into(), None, CancellationToken::new())
            .await;
        Notebook::from_events(&channel.events_after(0))
    }

    #[tokio::test]
    async fn a_turn_streams_the_answer() {
        let channel = fresh_channel();
        responder(Duration::ZERO)
            .run_turn(
                &channel,
                "one two three".into(),
                None,
                CancellationToken::new(),
            )
            .await;
        let events = channel.events_after(0);
        let deltas = events
            .iter()
            .filter(|e| matches!(e.event, EventBody::CellDelta { .. }))
            .count();
        assert!(deltas >= 3, "{deltas} deltas");
        let notebook = Notebook::from_events(&events);
        assert_eq!(notebook.cells().len(), 2);
        // The scripted model, made to call the tool, prints the message.
        assert_eq!(notebook.cells()[1].text, printed("one two three"));
        assert_eq!(notebook.cells()[1].status, CellStatus::Ok);
    }

    #[tokio::test]
    async fn a_tool_call_is_shown_as_its_program() {
        let notebook = turn(&responder(Duration::ZERO), "```python\nprint(42)\n```").await;
        assert_eq!(notebook.cells()[1].text, "```python\nprint(42)\n```");
    }

    #[tokio::test]
    async fn the_program_streams_while_its_arguments_arrive() {
        let channel = fresh_channel();
        let program = "for i in range(3):\n    print(i, 'squared is', i * i)";
        responder(Duration::ZERO)
            .run_turn(
                &channel,
                format!("```python\n{program}\n```"),
                None,
                CancellationToken::new(),
            )
            .await;
        let events = channel.events_after(0);
        let deltas = events
            .iter()
            .filter(|e| matches!(e.event, EventBody::CellDelta { .. }))
            .count();
        assert!(deltas > 3, "{deltas} deltas");
        let notebook = Notebook::from_events(&events);
        assert_eq!(
            notebook.cells()[1].text,
            format!("```python\n{program}\n```")
        );
    }

    #[tokio::test]
    async fn model_errors_finish_the_cell_with_a_reason() {
        let notebook = {
            let channel = fresh_channel();
            responder(Duration::ZERO)
                .run_turn(
                    &channel,
                    "hi".into(),
                    Some("gpt-9".into()),
                    CancellationToken::new(),
                )
                .await;
            Notebook::from_events(&channel.events_after(0))
        };
        let cell = &notebook.cells()[1];
        assert_eq!(cell.status, CellStatus::Error);
        let error = cell
            .error
            .clone()
            .unwrap_or_else(|| panic!("no error in {cell:?}"));
        assert_eq!(error.code, "llm_model_not_found");
        assert!(error.message.contains("gpt-9"), "{error:?}");
    }

    #[tokio::test]
    async fn a_cancelled_turn_finishes_its_cell_as_cancelled() {
        let channel = fresh_channel();
        let cancel = CancellationToken::new();
        let stop = cancel.clone();
        let slow = responder(Duration::from_millis(200));
        let program = "```python\nfor i in range(10):\n    print(i, i * i, i ** 3)\n```";
        let turn = slow.run_turn(&channel, program.into(), None, cancel);
        let stopper = async {
            // Cancel once some of the program has been shown.
            while channel.events_after(0).len() < 4 {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            stop.cancel();
        };
        tokio::join!(turn, stopper);
        let notebook = Notebook::from_events(&channel.events_after(0));
        let answer = &notebook.cells()[1];
        assert_eq!(answer.status, CellStatus::Cancelled);
        // The program shown so far is closed, not left open.
        assert!(answer.text.starts_with("```python\n"), "{:?}", answer.text);
        assert!(
            answer.text.ends_with("```") && answer.text.len() < program.len(),
            "{:?}",
            answer.text
        );
    }

    #[tokio::test]
    async fn a_turn_cancelled_while_waiting_shows_nothing() {
        let channel = fresh_channel();
        let cancel = CancellationToken::new();
        cancel.cancel();
        responder(Duration::ZERO)
            .run_turn(&channel, "never asked".into(), None, cancel)
            .await;
        assert!(channel.events_after(0).is_empty());
    }

    #[tokio::test]
    async fn turns_in_one_session_do_not_interleave() {
        let channel = fresh_channel();
        let responder = responder(Duration::from_millis(1));
        let token = CancellationToken::new();
        tokio::join!(
            responder.run_turn(&channel, "a b c".into(), None, token.clone()),
            responder.run_turn(&channel, "d e f".into(), None, token.clone()),
        );
        let notebook = Notebook::from_events(&channel.events_after(0));
        let texts: Vec<&str> = notebook.cells().iter().map(|c| c.text.as_str()).collect();
        let (abc, def) = (printed("a b c"), printed("d e f"));
        assert!(
            texts == ["a b c", &abc, "d e f", &def] || texts == ["d e f", &def, "a b c", &abc],
            "{texts:?}"
        );
    }
}
