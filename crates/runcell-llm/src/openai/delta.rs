//! The streamed chat format: each SSE payload is a `chat.completion.chunk`
//! whose `choices[0].delta` carries text and tool-call fragments. The
//! [`Assembler`] turns payloads into [`LlmEvent`]s and, at the end, into the
//! one [`Completion`].

use serde::Deserialize;

use super::error;
use crate::{Completion, FinishReason, LlmError, LlmEvent, ToolCall, Usage};

#[derive(Debug, Deserialize)]
struct Chunk {
    #[serde(default)]
    choices: Option<Vec<Choice>>,
    #[serde(default)]
    usage: Option<RawUsage>,
    #[serde(default)]
    error: Option<serde_json::Value>,
}

#[derive(Debug, Deserialize)]
struct Choice {
    #[serde(default)]
    index: Option<u64>,
    /// `message` when a server answered without streaming.
    #[serde(default, alias = "message")]
    delta: Option<Delta>,
    #[serde(default)]
    finish_reason: Option<String>,
}

#[derive(Debug, Deserialize)]
struct Delta {
    #[serde(default)]
    content: Option<String>,
    #[serde(default)]
    tool_calls: Option<Vec<ToolFragment>>,
    // `role`, `reasoning_content`, `reasoning`, `refusal`: ignored.
}

#[derive(Debug, Deserialize)]
struct ToolFragment {
    #[serde(default)]
    index: Option<usize>,
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    function: Option<FunctionFragment>,
}

#[derive(Debug, Deserialize)]
struct FunctionFragment {
    #[serde(default)]
    name: Option<String>,
    /// A string piece, or (some servers) the whole arguments object.
    #[serde(default)]
    arguments: Option<serde_json::Value>,
}

#[derive(Debug, Deserialize)]
struct RawUsage {
    #[serde(default)]
    prompt_tokens: Option<u64>,
    #[serde(default)]
    completion_tokens: Option<u64>,
    /// OpenAI's `prompt_tokens_details.cached_tokens` (servers with a
    /// prompt cache report what they reused there).
    #[serde(default)]
    prompt_tokens_details: Option<RawPromptDetails>,
}

#[derive(Debug, Deserialize)]
struct RawPromptDetails {
    #[serde(default)]
    cached_tokens: Option<u64>,
}

/// A tool call being assembled.
#[derive(Debug)]
struct Slot {
    /// The server's `index`, when it sent one.
    server_index: Option<usize>,
    id: String,
    /// The id came from the server, not from us.
    server_id: bool,
    name: String,
    arguments: String,
}

/// What happened to a payload.
#[derive(Debug, PartialEq)]
pub(crate) enum Fed {
    /// Go on reading.
    More,
    /// `[DONE]`: the reply is complete.
    Done,
}

/// Reads the payloads of one streamed reply.
#[derive(Debug)]
pub(crate) struct Assembler {
    model: String,
    text: String,
    slots: Vec<Slot>,
    finish: Option<String>,
    usage: Option<Usage>,
}

impl Assembler {
    pub fn new(model: &str) -> Self {
        Self {
            model: model.to_owned(),
            text: String::new(),
            slots: Vec::new(),
            finish: None,
            usage: None,
        }
    }

    /// Reads one SSE payload, appending the events it carries to `out`.
    pub fn feed(
        &mut self,
        event: Option<&str>,
        data: &str,
        out: &mut Vec<LlmEvent>,
    ) -> Result<Fed, LlmError> {
        if event == Some("error") {
            return Err(error::from_event(data, &self.model));
        }
        let data = data.trim();
        if data == "[DONE]" {
            return Ok(Fed::Done);
        }
        if data.is_empty() {
            return Ok(Fed::More);
        }
        let chunk: Chunk = serde_json::from_str(data).map_err(|e| {
            let mut shown: String = data.chars().take(120).collect();
            if shown.len() < data.len() {
                shown.push('…');
            }
            LlmError::MalformedStream(format!("a payload is not a chunk ({e}): {shown}"))
        })?;
        if chunk.error.as_ref().is_some_and(|e| !e.is_null()) {
            return Err(error::from_event(data, &self.model));
        }
        if let Some(usage) = chunk.usage {
            let count = |n: Option<u64>| n.and_then(|n| u32::try_from(n).ok()).unwrap_or(0);
            self.usage = Some(Usage {
                prompt_tokens: count(usage.prompt_tokens),
                completion_tokens: count(usage.completion_tokens),
                cached_tokens: count(usage.prompt_tokens_details.and_then(|d| d.cached_tokens)),
            });
        }
        let choices = chunk.choices.unwrap_or_default();
        let choice = choices
            .iter()
            .find(|c| c.index == Some(0))
            .or_else(|| choices.first());
        let Some(choice) = choice else {
            return Ok(Fed::More);
        };
        if let Some(delta) = &choice.delta {
            if let Some(text) = delta.content.as_deref().filter(|t| !t.is_empty()) {
                self.text.push_str(text);
                out.push(LlmEvent::Text(text.to_owned()));
            }
            for fragment in delta.tool_calls.iter().flatten() {
                self.tool_fragment(fragment, out);
            }
        }
        if let Some(reason) = &choice.finish_reason {
            self.finish = Some(reason.clone());
        }
        Ok(Fed::More)
    }

    fn tool_fragment(&mut self, fragment: &ToolFragment, out: &mut Vec<LlmEvent>) {
        let id = fragment.id.as_deref().filter(|id| !id.is_empty());
        let function = fragment.function.as_ref();
        let name = function
            .and_then(|f| f.name.as_deref())
            .filter(|n| !n.is_empty());
        let arguments = match function.and_then(|f| f.arguments.as_ref()) {
            Some(serde_json::Value::String(s)) => s.clone(),
            Some(serde_json::Value::Null) | None => String::new(),
            Some(other) => other.to_string(),
        };
        let (slot, created) = self.slot_for(fragment.index, id, name);
        let slot_ref = &mut self.slots[slot];
        // A call's first event carries its id, ours when the server sent none.
        let mut new_id = (created && id.is_none()).then(|| slot_ref.id.clone());
        if let Some(id) = id.filter(|_| !slot_ref.server_id) {
            id.clone_into(&mut slot_ref.id);
            slot_ref.server_id = true;
            new_id = Some(id.to_owned());
        }
        let mut new_name = None;
        if let Some(name) = name.filter(|_| slot_ref.name.is_empty()) {
            name.clone_into(&mut slot_ref.name);
            new_name = Some(name.to_owned());
        }
        slot_ref.arguments.push_str(&arguments);
        if new_id.is_some() || new_name.is_some() || !arguments.is_empty() {
            out.push(LlmEvent::ToolCallDelta {
                index: slot,
                id: new_id,
                name: new_name,
                arguments,
            });
        }
    }

    /// Which call a fragment continues, or a new one. A fragment with an
    /// index continues the call of that index, unless it brings a different
    /// id (Ollama numbers every streamed call 0); one without an index (a
    /// whole call in one chunk) starts a call when it has an id or a name
    /// and continues the last call otherwise.
    fn slot_for(
        &mut self,
        index: Option<usize>,
        id: Option<&str>,
        name: Option<&str>,
    ) -> (usize, bool) {
        let same_id = |s: &Slot| id.is_none() || !s.server_id || Some(s.id.as_str()) == id;
        let found = match index {
            Some(i) => self
                .slots
                .iter()
                .rposition(|s| s.server_index == Some(i))
                .filter(|&at| same_id(&self.slots[at])),
            None if id.is_some() => self.slots.iter().position(|s| Some(s.id.as_str()) == id),
            None if name.is_some() => None,
            None => self.slots.len().checked_sub(1),
        };
        if let Some(at) = found {
            return (at, false);
        }
        let at = self.slots.len();
        self.slots.push(Slot {
            server_index: index,
            id: format!("call_{at}"),
            server_id: false,
            name: String::new(),
            arguments: String::new(),
        });
        (at, true)
    }

    /// The reply has a finish reason: a stream that ends now is complete.
    pub fn finished(&self) -> bool {
        self.finish.is_some()
    }

    /// The assembled reply.
    pub fn completion(self) -> Completion {
        let tool_calls: Vec<ToolCall> = self
            .slots
            .into_iter()
            .map(|s| ToolCall {
                id: s.id,
                name: s.name,
                arguments: s.arguments,
            })
            .collect();
        let finish_reason = match self.finish.as_deref() {
            Some("stop" | "eos" | "end_turn" | "stop_sequence") | None
                if !tool_calls.is_empty() =>
            {
                FinishReason::ToolCalls
            }
            Some("stop" | "eos" | "end_turn" | "stop_sequence") => FinishReason::Stop,
            Some("length" | "max_tokens") => FinishReason::Length,
            Some("tool_calls" | "function_call" | "tool_use") => FinishReason::ToolCalls,
            Some("content_filter") => FinishReason::ContentFilter,
            Some(other) => FinishReason::Other(other.to_owned()),
            None => FinishReason::Other(String::new()),
        };
        Completion {
            text: self.text,
            tool_calls,
            finish_reason,
            usage: self.usage,
        }
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use serde_json::json;

    use super::*;

    fn chunk(delta: &serde_json::Value, finish: Option<&str>) -> String {
        json!({
            "id": "chatcmpl-1",
            "object": "chat.completion.chunk",
            "created": 1,
            "model": "m",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        })
        .to_string()
    }

    fn run(payloads: &[String]) -> (Vec<LlmEvent>, Completion) {
        let mut asm = Assembler::new("m");
        let mut out = Vec::new();
        for p in payloads {
            asm.feed(None, p, &mut out).unwrap();
        }
        (out, asm.completion())
    }

    #[test]
    fn ollama_calls_all_numbered_zero_stay_apart() {
        let call = |id: &str, name: &str| {
            chunk(
                &json!({"role": "assistant", "content": "", "tool_calls": [
                    {"id": id, "index": 0, "type": "function",
                     "function": {"name": name, "arguments": "{}"}}]}),
                None,
            )
        };
        let (_, done) = run(&[
            call("a", "f"),
            call("b", "g"),
            chunk(&json!({}), Some("stop")),
        ]);
        let names: Vec<_> = done.tool_calls.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["f", "g"]);
        assert_eq!(done.finish_reason, FinishReason::ToolCalls);
    }

    #[test]
    fn calls_without_index_or_id_get_positions_and_ids() {
        let (events, done) = run(&[chunk(
            &json!({"tool_calls": [
                {"function": {"name": "f", "arguments": {"x": 1}}},
                {"function": {"name": "g", "arguments": "{}"}}]}),
            Some("tool_calls"),
        )]);
        assert_eq!(done.tool_calls[0].id, "call_0");
        assert_eq!(done.tool_calls[0].arguments, r#"{"x":1}"#);
        assert_eq!(done.tool_calls[1].id, "call_1");
        assert!(matches!(
            &events[1],
            LlmEvent::ToolCallDelta { index: 1, .. }
        ));
    }

    #[test]
    fn finish_reasons_map() {
        let cases: &[(Option<&str>, FinishReason)] = &[
            (Some("stop"), FinishReason::Stop),
            (Some("length"), FinishReason::Length),
            (Some("tool_calls"), FinishReason::ToolCalls),
            (Some("function_call"), FinishReason::ToolCalls),
            (Some("content_filter"), FinishReason::ContentFilter),
            (Some("weird"), FinishReason::Other("weird".into())),
            (None, FinishReason::Other(String::new())),
        ];
        for (reason, expect) in cases {
            let (_, done) = run(&[chunk(&json!({"content": "x"}), *reason)]);
            assert_eq!(&done.finish_reason, expect, "{reason:?}");
        }
    }

    #[test]
    fn garbage_is_malformed_and_errors_are_typed() {
        let mut asm = Assembler::new("m");
        let mut out = Vec::new();
        let err = asm.feed(None, "{not json", &mut out).unwrap_err();
        assert_eq!(err.code(), "llm_malformed_stream");
        let err = asm
            .feed(None, r#"{"error":{"message":"x","code":503}}"#, &mut out)
            .unwrap_err();
        assert_eq!(err.code(), "llm_server_error");
        let err = asm
            .feed(Some("error"), r#"{"message":"x"}"#, &mut out)
            .unwrap_err();
        assert_eq!(err.code(), "llm_server_error");
    }

    /// Splits `s` at `cuts` (taken modulo its char count).
    fn fragments(s: &str, cuts: &[usize]) -> Vec<String> {
        let chars: Vec<char> = s.chars().collect();
        let mut cuts: Vec<usize> = cuts.iter().map(|c| c % (chars.len() + 1)).collect();
        cuts.push(chars.len());
        cuts.sort_unstable();
        let mut start = 0;
        cuts.into_iter()
            .map(|c| {
                let piece: String = chars[start..c].iter().collect();
                start = c;
                piece
            })
            .collect()
    }

    proptest! {
        #[test]
        fn arguments_rebuild_from_any_fragmentation(
            code in "\\PC{0,80}",
            other in "\\PC{0,20}",
            cuts_a in proptest::collection::vec(any::<usize>(), 0..12),
            cuts_b in proptest::collection::vec(any::<usize>(), 0..12),
        ) {
            let args_a = json!({"code": code}).to_string();
            let args_b = json!({"q": other}).to_string();
            let a = fragments(&args_a, &cuts_a);
            let b = fragments(&args_b, &cuts_b);
            let mut payloads = vec![
                chunk(&json!({"role": "assistant", "content": null}), None),
                chunk(&json!({"tool_calls": [{"index": 0, "id": "call_a", "type": "function",
                    "function": {"name": "run", "arguments": ""}}]}), None),
                chunk(&json!({"tool_calls": [{"index": 1, "id": "call_b", "type": "function",
                    "function": {"name": "ask", "arguments": ""}}]}), None),
            ];
            // Interleave the two calls' fragments.
            for i in 0..a.len().max(b.len()) {
                if let Some(piece) = a.get(i) {
                    payloads.push(chunk(&json!({"tool_calls": [{"index": 0, "function": {"arguments": piece}}]}), None));
                }
                if let Some(piece) = b.get(i) {
                    payloads.push(chunk(&json!({"tool_calls": [{"index": 1, "function": {"arguments": piece}}]}), None));
                }
            }
            payloads.push(chunk(&json!({}), Some("tool_calls")));
            let (events, done) = run(&payloads);
            prop_assert_eq!(&done.tool_calls[0].arguments, &args_a);
            prop_assert_eq!(&done.tool_calls[1].arguments, &args_b);
            prop_assert_eq!(&done.tool_calls[1].id, "call_b");
            let streamed: String = events.iter().filter_map(|e| match e {
                LlmEvent::ToolCallDelta { index: 0, arguments, .. } => Some(arguments.as_str()),
                _ => None,
            }).collect();
            prop_assert_eq!(streamed, args_a);
        }
    }
}
