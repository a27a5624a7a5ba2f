//! The explanation cell: it streams a sentence at a time, each shown once
//! every figure it names is grounded in the output, the question or the
//! program.

use std::time::Instant;

use runcell_protocol::{CellError, CellId, CellKind, CellStatus, EventBody};
use tokio_util::sync::CancellationToken;

use super::execute::Ran;
use super::publish::{llm_cell_error, publish_rendered};
use super::{Agent, grounding, prompt};
use crate::session::SessionLog;
use runcell_llm::{ChatRequest, Completion, LlmError, LlmEvent, Message, ToolChoice};

impl Agent {
    /// Writes the explanation: it continues the conversation the program
    /// was written in (whose last message is the result with the request
    /// for an explanation). It streams a sentence at a time, each shown once
    /// it is complete and every figure it names is in the output, the
    /// question or the program; the first sentence that names another is
    /// held, with all after it. Such a draft is never shown as text that
    /// stands: the model is asked once more, saying which figures, and the
    /// cell starts over in place ([`EventBody::CellReset`]); if it still
    /// invents one, the grounded sentences of that draft (or a plain
    /// statement quoting the output) replace it. False if no explanation
    /// could be written at all.
    #[allow(clippy::too_many_arguments)]
    pub(super) async fn explain(
        &self,
        session: &SessionLog,
        question: &str,
        code: &str,
        mut messages: Vec<Message>,
        tools: Vec<runcell_llm::ToolSpec>,
        ran: &Ran,
        model: Option<String>,
        cancel: &CancellationToken,
    ) -> bool {
        let sources = [ran.report.as_str(), question, code];
        let started = Instant::now();
        let cell_id = session.next_cell_id();
        session.publish(EventBody::CellStarted {
            cell_id,
            cell_kind: CellKind::Explanation,
            language: None,
            attempt: None,
            source: None,
        });
        let mut last_text = None;
        for round in 0..2 {
            let request =
                self.explanation_request(session, model.clone(), messages.clone(), tools.clone());
            if round > 0 {
                session.publish(EventBody::CellReset { cell_id });
            }
            let mut gate = grounding::Gate::new(&sources, code);
            let outcome = self
                .stream_explanation(session, cell_id, &mut gate, request, cancel)
                .await;
            let text = match outcome {
                Ok(completion) if !completion.text.trim().is_empty() => completion.text,
                unanswered => {
                    let (status, error) = unexplained(unanswered);
                    self.finish_explanation(session, cell_id, started, status, error);
                    return false;
                }
            };
            let invented = grounding::invented(&text, &sources, code);
            if invented.is_empty() {
                if let Some(rest) = gate.finish() {
                    session.publish(EventBody::CellDelta {
                        cell_id,
                        text: rest,
                        highlight: None,
                    });
                }
                publish_rendered(session, cell_id, &grounding::plain_figures(&text));
                self.finish_explanation(session, cell_id, started, CellStatus::Ok, None);
                runcell_core::metrics::explained(if round == 0 {
                    "grounded"
                } else {
                    "regrounded"
                });
                return true;
            }
            tracing::info!(round, invented = ?invented, "the explanation names figures the output does not show; held");
            messages.push(Message::assistant(text.clone()));
            messages.push(Message::user(prompt::regrounding_request(&invented)));
            last_text = Some(text);
        }
        // What stands: the grounded sentences of the second explanation when
        // its first (the answer) is grounded, with the output quoted.
        let (text, pruned) = grounding::stand_in(last_text.as_deref(), &ran.report, &sources, code);
        runcell_core::metrics::explained(if pruned { "pruned" } else { "fallback" });
        session.publish(EventBody::CellReset { cell_id });
        session.publish(EventBody::CellDelta {
            cell_id,
            text: text.clone(),
            highlight: None,
        });
        publish_rendered(session, cell_id, &text);
        self.finish_explanation(session, cell_id, started, CellStatus::Ok, None);
        true
    }

    /// The request for an explanation: the conversation so far, answered
    /// in text alone, briefly and greedily.
    fn explanation_request(
        &self,
        session: &SessionLog,
        model: Option<String>,
        messages: Vec<Message>,
        tools: Vec<runcell_llm::ToolSpec>,
    ) -> ChatRequest {
        ChatRequest {
            model,
            messages,
            tools,
            tool_choice: ToolChoice::None,
            response_schema: None,
            max_tokens: Some(self.settings.max_tokens.min(400)),
            temperature: Some(0.0),
            seed: None,
            requester: self.requester(session),
            shared_messages: 0,
            conversation: Some(session.id().to_string()),
        }
    }

    /// Streams the model's reply into the open explanation cell, through
    /// `gate`: only grounded sentences are shown while it streams.
    async fn stream_explanation(
        &self,
        session: &SessionLog,
        cell_id: CellId,
        gate: &mut grounding::Gate<'_>,
        request: ChatRequest,
        cancel: &CancellationToken,
    ) -> Result<Completion, Option<LlmError>> {
        // A small model now and then ends its reply at once; asked again,
        // a little less greedily, it answers.
        let mut outcome = Err(None);
        for temperature in [0.0, 0.5] {
            let request = ChatRequest {
                temperature: Some(temperature),
                ..request.clone()
            };
            outcome = tokio::select! {
                biased;
                () = cancel.cancelled() => Err(None),
                () = tokio::time::sleep(self.settings.answer_timeout) => {
                    Err(Some(LlmError::Timeout(self.settings.answer_timeout)))
                }
                outcome = self.stream(request, |event| {
                    if let LlmEvent::Text(text) = event
                        && let Some(shown) = gate.push(&text)
                    {
                        session.publish(EventBody::CellDelta { cell_id, text: shown, highlight: None });
                    }
                }) => outcome.map_err(Some),
            };
            match &outcome {
                Ok(completion) if completion.text.trim().is_empty() => {
                    tracing::info!("the explanation came back empty; asking again");
                }
                _ => break,
            }
        }
        outcome
    }

    fn finish_explanation(
        &self,
        session: &SessionLog,
        cell_id: CellId,
        started: Instant,
        status: CellStatus,
        error: Option<CellError>,
    ) {
        session.publish(EventBody::CellFinished {
            cell_id,
            status,
            elapsed_ms: runcell_core::clock::millis(started.elapsed()),
            error,
        });
    }
}

/// How the explanation cell ends when the model wrote nothing to show:
/// `outcome` is an empty answer, a cancel (`Err(None)`) or the model's
/// error.
fn unexplained(outcome: Result<Completion, Option<LlmError>>) -> (CellStatus, Option<CellError>) {
    match outcome {
        Ok(_) => (
            CellStatus::Error,
            Some(CellError {
                code: "llm_no_answer".into(),
                message: "the model wrote no explanation".into(),
            }),
        ),
        Err(None) => (CellStatus::Cancelled, None),
        Err(Some(e)) => {
            tracing::warn!(code = e.code(), error = %e, "the model failed to explain");
            (CellStatus::Error, Some(llm_cell_error(&e)))
        }
    }
}
