//! The scripted model: deterministic answers for tests and demos, no weights.
//!
//! - A fenced code block in the last user message becomes an `execute_code`
//!   tool call with that code (or, in `fenced` mode or when no tool is
//!   offered, a prose reply containing the block).
//! - After a result (a tool message, or a user message written by
//!   `tools::result_message`) it explains, quoting the result; asked for a
//!   fix of a failed program (a tool choice other than `none`), it sends the
//!   code as written again.
//! - `fail_first`: the first attempt's code raises; the fix is the code as
//!   written.
//! - `slow`: everything streams slowly, for Stop tests.
//! - `invent`: every explanation names a figure the output does not show;
//!   `invent_once`: only the first, asked again it quotes the output.
//! - `silent_first`: the first attempt prints nothing; the fix is the code
//!   as written.
//! - `prose_invent`: never a program: every reply is an answer from memory
//!   naming a figure nothing computed.
//! - Anything else is answered by streaming the message back.
//!
//! A message may pick its own mode with a first line `#scripted: MODE`.
//! See `docs/testing.md`.

use std::str::FromStr;
use std::time::Duration;

use futures::StreamExt;
use serde::{Deserialize, Serialize};

use super::fenced::extract_code;
use super::requests as prompt;
use super::tools::{EXECUTE_CODE, ExecuteCode, result_of};
use super::{
    Capabilities, ChatRequest, ChatStream, Completion, FinishReason, Llm, LlmError, LlmEvent,
    Message, ModelInfo, Role, ToolCall, ToolChoice, Usage,
};

/// The one model the scripted backend serves.
pub const MODEL: &str = "scripted";

/// The most frames one answer is cut into, however long.
const MAX_CHUNKS: usize = 48;

/// How the scripted model behaves.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ScriptedMode {
    /// Code becomes a tool call.
    #[default]
    Tool,
    /// Code comes back as a fenced block in prose (a model without tools).
    Fenced,
    /// The first attempt fails; the retry is right.
    FailFirst,
    /// Like `tool`, streamed slowly.
    Slow,
    /// Every explanation names a figure the output does not show.
    Invent,
    /// The first explanation invents a figure; asked again, it quotes.
    InventOnce,
    /// The first attempt runs but prints nothing; the fix is right.
    SilentFirst,
    /// No program, ever: answers from memory with a made-up figure.
    ProseInvent,
}

/// The figure the `invent` modes make up.
pub const INVENTED: &str = "12,345";

/// The code the first attempt runs in `silent_first` mode.
pub const SILENT_CODE: &str = "silent = True";

impl FromStr for ScriptedMode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim() {
            "tool" => Ok(Self::Tool),
            "fenced" => Ok(Self::Fenced),
            "fail_first" => Ok(Self::FailFirst),
            "slow" => Ok(Self::Slow),
            "invent" => Ok(Self::Invent),
            "invent_once" => Ok(Self::InventOnce),
            "prose_invent" => Ok(Self::ProseInvent),
            "silent_first" => Ok(Self::SilentFirst),
            other => Err(format!(
                "unknown scripted mode `{other}` (tool, fenced, fail_first, slow, invent, \
                 invent_once, silent_first, prose_invent)"
            )),
        }
    }
}

/// The code the first attempt runs in `fail_first` mode.
pub const FAILING_CODE: &str = "raise RuntimeError('scripted failure: first attempt')";

#[derive(Clone, Debug)]
pub struct ScriptedLlm {
    pub mode: ScriptedMode,
    /// The pause before each streamed frame.
    pub frame_delay: Duration,
    /// The pause in `slow` mode.
    pub slow_delay: Duration,
}

impl Default for ScriptedLlm {
    fn default() -> Self {
        Self {
            mode: ScriptedMode::Tool,
            frame_delay: Duration::from_millis(40),
            slow_delay: Duration::from_millis(500),
        }
    }
}

/// What the model decided to say.
#[derive(Debug, PartialEq)]
enum Reply {
    Text(String),
    Call(ExecuteCode),
}

impl ScriptedLlm {
    fn decide(&self, request: &ChatRequest) -> (Reply, ScriptedMode) {
        fn result_in(m: &Message) -> Option<&str> {
            match m.role {
                Role::Tool => Some(result_of(&m.content).unwrap_or(&m.content)),
                Role::User => result_of(&m.content),
                _ => None,
            }
        }
        let question = request.messages.iter().rposition(|m| {
            m.role == Role::User
                && result_in(m).is_none()
                && !m.content.starts_with(prompt::REGROUNDING_OPEN)
        });
        let user_text = question.map_or("", |i| request.messages[i].content.as_str());
        let (mode, user_text) = mode_directive(user_text).unwrap_or((self.mode, user_text));
        let since_question = question.map_or(&request.messages[..], |i| &request.messages[i + 1..]);
        let tools_offered = request.tools.iter().any(|t| t.name == EXECUTE_CODE)
            && request.tool_choice != ToolChoice::None;
        let wants_code = extract_code(user_text);
        if mode == ScriptedMode::ProseInvent {
            return (Reply::Text(format!("The answer is {INVENTED}.")), mode);
        }

        if let Some(result) = since_question.iter().rev().find_map(result_in) {
            let failed = looks_failed(result);
            // A fix is asked for in the message that carries the result;
            // an explanation is asked for with the tools put away.
            let fixing = request.tool_choice != ToolChoice::None
                && since_question
                    .last()
                    .is_some_and(|m| !m.content.ends_with(prompt::EXPLAIN_REQUEST));
            if let Some(code) = wants_code.filter(|_| fixing) {
                return (self.code_reply(code, tools_offered, mode), mode);
            }
            let asked_again = since_question
                .iter()
                .any(|m| m.content.starts_with(prompt::REGROUNDING_OPEN));
            let mut text = explanation(result, failed);
            if mode == ScriptedMode::Invent || (mode == ScriptedMode::InventOnce && !asked_again) {
                text.push_str(&format!(" The total is {INVENTED}."));
            }
            return (Reply::Text(text), mode);
        }
        match wants_code {
            Some(mut code) => {
                if mode == ScriptedMode::FailFirst {
                    code.code = FAILING_CODE.into();
                    code.language = "python".into();
                }
                if mode == ScriptedMode::SilentFirst {
                    code.code = SILENT_CODE.into();
                    code.language = "python".into();
                }
                (self.code_reply(code, tools_offered, mode), mode)
            }
            None if matches!(
                request.tool_choice,
                ToolChoice::Required | ToolChoice::Named(_)
            ) && tools_offered =>
            {
                let code = format!("print({})", serde_json::Value::from(user_text));
                (
                    Reply::Call(ExecuteCode {
                        language: "python".into(),
                        code,
                    }),
                    mode,
                )
            }
            None => (Reply::Text(user_text.to_string()), mode),
        }
    }

    fn code_reply(&self, code: ExecuteCode, tools_offered: bool, mode: ScriptedMode) -> Reply {
        if tools_offered && mode != ScriptedMode::Fenced {
            Reply::Call(code)
        } else {
            Reply::Text(format!(
                "Here is the code:\n\n```{}\n{}\n```\n",
                code.language, code.code
            ))
        }
    }
}

/// A first line `#scripted: MODE` picks the mode for this message.
fn mode_directive(text: &str) -> Option<(ScriptedMode, &str)> {
    let rest = text.trim_start().strip_prefix("#scripted:")?;
    let (mode, rest) = rest.split_once('\n').unwrap_or((rest, ""));
    Some((mode.parse().ok()?, rest))
}

fn looks_failed(result: &str) -> bool {
    ["Traceback", "Error", "error:", "exit code"]
        .iter()
        .any(|mark| result.contains(mark))
}

fn explanation(result: &str, failed: bool) -> String {
    let result = result.trim();
    let mut quoted: String = result.chars().take(200).collect();
    // Never a number cut in half: that would be a figure the output lacks.
    if quoted.len() < result.len()
        && let Some(space) = quoted.rfind(char::is_whitespace)
    {
        quoted.truncate(space);
    }
    if failed {
        format!("The code failed. The error was: «{quoted}»")
    } else if quoted.is_empty() {
        "The code ran and printed nothing.".into()
    } else {
        format!("The code ran. Its output was: «{quoted}»")
    }
}

/// Cuts `text` into at most [`MAX_CHUNKS`] pieces at word ends; the pieces
/// put together are `text` again.
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

/// A rough token count: words and punctuation.
fn count_tokens(text: &str) -> u32 {
    u32::try_from(text.split_whitespace().count()).unwrap_or(u32::MAX)
}

#[async_trait::async_trait]
impl Llm for ScriptedLlm {
    fn backend(&self) -> &'static str {
        "scripted"
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities {
            tools: true,
            structured_output: false,
            streaming: true,
        }
    }

    async fn models(&self) -> Result<Vec<ModelInfo>, LlmError> {
        Ok(vec![ModelInfo {
            id: MODEL.into(),
            owned_by: Some("runcell".into()),
        }])
    }

    async fn chat(&self, request: ChatRequest) -> Result<ChatStream, LlmError> {
        if let Some(model) = request.model.as_deref().filter(|m| *m != MODEL) {
            return Err(LlmError::ModelNotFound {
                model: model.chars().take(100).collect(),
                message: format!("the scripted backend serves only `{MODEL}`"),
            });
        }
        let (reply, mode) = self.decide(&request);
        let delay = if mode == ScriptedMode::Slow {
            self.slow_delay
        } else {
            self.frame_delay
        };
        let prompt_tokens = request
            .messages
            .iter()
            .map(|m: &Message| count_tokens(&m.content))
            .sum();
        let (frames, completion) = match reply {
            Reply::Text(text) => {
                let frames: Vec<LlmEvent> = chunks(&text)
                    .into_iter()
                    .map(|piece| LlmEvent::Text(piece.to_string()))
                    .collect();
                let completion = Completion {
                    usage: Some(Usage {
                        prompt_tokens,
                        completion_tokens: count_tokens(&text),
                        cached_tokens: 0,
                    }),
                    text,
                    tool_calls: Vec::new(),
                    finish_reason: FinishReason::Stop,
                };
                (frames, completion)
            }
            Reply::Call(call) => {
                let arguments =
                    serde_json::json!({"language": call.language, "code": call.code}).to_string();
                let frames: Vec<LlmEvent> = chunks(&arguments)
                    .into_iter()
                    .enumerate()
                    .map(|(i, piece)| LlmEvent::ToolCallDelta {
                        index: 0,
                        id: (i == 0).then(|| "call_0".to_string()),
                        name: (i == 0).then(|| EXECUTE_CODE.to_string()),
                        arguments: piece.to_string(),
                    })
                    .collect();
                let completion = Completion {
                    usage: Some(Usage {
                        prompt_tokens,
                        completion_tokens: count_tokens(&arguments),
                        cached_tokens: 0,
                    }),
                    text: String::new(),
                    tool_calls: vec![ToolCall {
                        id: "call_0".into(),
                        name: EXECUTE_CODE.into(),
                        arguments,
                    }],
                    finish_reason: FinishReason::ToolCalls,
                };
                (frames, completion)
            }
        };
        let events = frames
            .into_iter()
            .chain(std::iter::once(LlmEvent::Done(completion)));
        let stream = futures::stream::iter(events).then(move |event| async move {
            if !matches!(event, LlmEvent::Done(_)) {
                tokio::time::sleep(delay).await;
            }
            Ok(event)
        });
        Ok(Box::pin(stream))
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::conformance;
    use crate::tools::execute_code_spec;

    fn quick() -> ScriptedLlm {
        ScriptedLlm {
            frame_delay: Duration::ZERO,
            slow_delay: Duration::from_millis(200),
            ..ScriptedLlm::default()
        }
    }

    fn ask(text: &str) -> ChatRequest {
        ChatRequest {
            messages: vec![Message::system("be useful"), Message::user(text)],
            tools: vec![execute_code_spec()],
            ..ChatRequest::default()
        }
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

    #[test]
    fn decisions_follow_the_script() {
        let llm = quick();
        let code = ExecuteCode {
            language: "python".into(),
            code: "print(6*7)".into(),
        };
        let asked = "run this\n```python\nprint(6*7)\n```";
        assert_eq!(llm.decide(&ask(asked)).0, Reply::Call(code.clone()));
        let fenced = format!("#scripted: fenced\n{asked}");
        assert!(
            matches!(llm.decide(&ask(&fenced)).0, Reply::Text(t) if t.contains("```python\nprint(6*7)"))
        );
        assert_eq!(
            llm.decide(&ask("hello there")).0,
            Reply::Text("hello there".into())
        );

        // fail_first: a failing first attempt, the real code after the error.
        let failing = format!("#scripted: fail_first\n{asked}");
        let mut request = ask(&failing);
        assert!(matches!(llm.decide(&request).0, Reply::Call(c) if c.code == FAILING_CODE));
        request.messages.push(Message::tool(
            "call_0",
            "Traceback ...\nRuntimeError: scripted failure",
        ));
        assert_eq!(llm.decide(&request).0, Reply::Call(code));
        request.messages.push(Message::tool(
            "call_1",
            crate::tools::result_message("42\n", prompt::EXPLAIN_REQUEST),
        ));
        assert!(matches!(llm.decide(&request).0, Reply::Text(t) if t.contains("«42»")));

        // invent_once: a made-up figure, then, asked again, none.
        let mut request = ask(&format!("#scripted: invent_once\n{asked}"));
        request.messages.push(Message::tool(
            "call_0",
            crate::tools::result_message("42\n", prompt::EXPLAIN_REQUEST),
        ));
        request.tool_choice = ToolChoice::None;
        assert!(matches!(llm.decide(&request).0, Reply::Text(t) if t.contains(INVENTED)));
        request
            .messages
            .push(Message::assistant("The total is 12,345."));
        request.messages.push(Message::user(format!(
            "{}`{INVENTED}`, which the program's output does not show.",
            prompt::REGROUNDING_OPEN
        )));
        assert!(
            matches!(llm.decide(&request).0, Reply::Text(t) if t.contains("«42»") && !t.contains(INVENTED))
        );
    }

    #[tokio::test]
    async fn the_scripted_model_passes_the_conformance_suite() {
        let llm = quick();
        conformance::streams_text(&llm, "say something short").await;
        conformance::calls_the_tool(&llm, "Write Python that prints the factorial of 5\n```python\nimport math\nprint(math.factorial(5))\n```").await;
        conformance::cancels_mid_stream(
            &llm,
            "#scripted: slow\nwords words words words words words",
        )
        .await;
        conformance::refuses_an_unknown_model(&llm).await;
    }
}
