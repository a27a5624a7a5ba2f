//! Asking the model: how this backend hands over programs, a program
//! streamed into a new code cell, and one reply streamed event by event.

use std::time::Instant;

use futures::StreamExt;
use runcell_protocol::{CellError, CellId, CellStatus};
use tokio_util::sync::CancellationToken;

use super::Agent;
use super::code::{CodeCell, CodeDelivery};
use super::publish::llm_cell_error;
use crate::session::SessionLog;
use runcell_llm::fenced::program_of;
use runcell_llm::tools::{EXECUTE_CODE, ExecuteCode, execute_code_spec};
use runcell_llm::{
    ChatRequest, Completion, FinishReason, LlmError, LlmEvent, Message, Requester, ResponseSchema,
    ToolChoice,
};
use runcell_sandbox::slots::Claim;

/// How a model call ended.
pub(super) enum Reply {
    Program {
        program: ExecuteCode,
        cell: CellId,
    },
    /// The model answered in words only.
    Prose(String),
    /// The reply should have been a program and none could be read from it
    /// (a malformed call, a program cut at the token limit).
    NoProgram,
    Cancelled,
    Failed,
}

impl Agent {
    /// How this backend hands over programs: tool calls where it has them
    /// (the embedded model then decodes under a grammar: 8 of 8 eval
    /// programs runnable against 5 of 8 left free), else a reply constrained
    /// to the tool's schema, else a fenced block in prose.
    pub(super) fn code_channel(&self) -> CodeDelivery {
        let capabilities = self.llm.capabilities();
        if capabilities.tools {
            CodeDelivery::Tool
        } else if capabilities.structured_output {
            CodeDelivery::Structured
        } else {
            CodeDelivery::Fenced
        }
    }

    pub(super) fn code_request(
        &self,
        messages: &[Message],
        model: Option<String>,
        channel: CodeDelivery,
    ) -> ChatRequest {
        let spec = execute_code_spec();
        ChatRequest {
            model,
            messages: messages.to_vec(),
            tools: if channel == CodeDelivery::Tool {
                vec![spec.clone()]
            } else {
                Vec::new()
            },
            tool_choice: if channel == CodeDelivery::Tool {
                ToolChoice::Named(EXECUTE_CODE.into())
            } else {
                ToolChoice::Auto
            },
            response_schema: (channel == CodeDelivery::Structured).then(|| ResponseSchema {
                name: spec.name.clone(),
                schema: spec.parameters.clone(),
            }),
            max_tokens: Some(self.settings.max_tokens),
            temperature: Some(0.0),
            seed: None,
            requester: Requester::Unnamed,
            shared_messages: super::prompt::shared_messages(messages),
            conversation: None,
        }
    }

    /// Whom the session's model requests are for: its owner when signed in,
    /// else the anonymous pages of its owner's address together (a shared
    /// model is fair between these).
    pub(super) fn requester(&self, session: &SessionLog) -> Requester {
        match self.kernels.claim_of(session.owner()) {
            Claim::Known => Requester::Known(session.owner().to_string()),
            Claim::Anonymous {
                client: Some(address),
            } => Requester::Anonymous(address.to_string()),
            Claim::Anonymous { client: None } => Requester::Anonymous("unknown".into()),
        }
    }

    /// Streams the model's program into a new code cell.
    #[allow(clippy::too_many_arguments)]
    pub(super) async fn write_code(
        &self,
        session: &SessionLog,
        messages: &[Message],
        model: Option<String>,
        attempt: u32,
        (temperature, seed): (f32, Option<u64>),
        channel: CodeDelivery,
        cancel: &CancellationToken,
    ) -> Reply {
        let request = ChatRequest {
            requester: self.requester(session),
            conversation: Some(session.id().to_string()),
            temperature: Some(temperature),
            seed,
            ..self.code_request(messages, model, channel)
        };
        let mut cell = CodeCell::new(session, &self.highlighter, attempt);
        let mut prose = String::new();
        let streamed = tokio::select! {
            biased;
            () = cancel.cancelled() => Err(None),
            () = tokio::time::sleep(self.settings.answer_timeout) => {
                Err(Some(LlmError::Timeout(self.settings.answer_timeout)))
            }
            outcome = self.stream(request, |event| match event {
                LlmEvent::Text(text) => {
                    prose.push_str(&text);
                    match channel {
                        CodeDelivery::Tool => {}
                        CodeDelivery::Structured | CodeDelivery::Fenced => cell.push(channel, &text),
                    }
                }
                LlmEvent::ToolCallDelta { index: 0, arguments, .. } => cell.push(CodeDelivery::Tool, &arguments),
                _ => {}
            }) => outcome.map_err(Some),
        };
        let completion = match streamed {
            Ok(completion) => completion,
            Err(None) => {
                cell.finish(CellStatus::Cancelled, None);
                return Reply::Cancelled;
            }
            Err(Some(e)) => {
                tracing::warn!(code = e.code(), error = %e, "the model failed");
                cell.finish(CellStatus::Error, Some(llm_cell_error(&e)));
                return Reply::Failed;
            }
        };
        let program = program_of(&completion).or_else(|| {
            (channel == CodeDelivery::Structured)
                .then(|| ExecuteCode::parse(EXECUTE_CODE, &completion.text).ok())
                .flatten()
        });
        match program {
            Some(program) => {
                let id = cell.complete(&program);
                if completion.finish_reason == FinishReason::Length {
                    tracing::info!("the program was cut at the token limit");
                }
                Reply::Program { program, cell: id }
            }
            None if !prose.trim().is_empty() && !cell.is_open() => Reply::Prose(prose),
            None => {
                let error = LlmError::MalformedStream(
                    if completion.finish_reason == FinishReason::Length {
                        "the program was cut off at the answer's token limit".into()
                    } else {
                        "the model answered with neither text nor a program".into()
                    },
                );
                cell.finish(
                    CellStatus::Error,
                    Some(CellError {
                        code: "llm_no_answer".into(),
                        message: error.to_string(),
                    }),
                );
                Reply::NoProgram
            }
        }
    }

    /// Streams one model reply, handing each event to `on_event`.
    /// Every request opens with the server's own system prompt, shared
    /// between requesters (a request built elsewhere says so here too).
    pub(super) async fn stream(
        &self,
        mut request: ChatRequest,
        mut on_event: impl FnMut(LlmEvent),
    ) -> Result<Completion, LlmError> {
        request.shared_messages = super::prompt::shared_messages(&request.messages);
        let started = Instant::now();
        let mut first_token = None;
        let mut stream = self.llm.chat(request).await?;
        while let Some(item) = stream.next().await {
            match item? {
                LlmEvent::Done(completion) => {
                    tracing::info!(
                        ttft_ms = first_token.map(runcell_core::clock::millis),
                        prompt_tokens = completion.usage.map(|u| u.prompt_tokens),
                        completion_tokens = completion.usage.map(|u| u.completion_tokens),
                        "model answered"
                    );
                    return Ok(completion);
                }
                event => {
                    first_token.get_or_insert_with(|| started.elapsed());
                    on_event(event);
                }
            }
        }
        Err(LlmError::MalformedStream(
            "the stream ended before the answer did".into(),
        ))
    }
}
