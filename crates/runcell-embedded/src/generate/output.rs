//! Token bytes turned into the events a chat stream carries, per mode:
//! text as it comes, a tool call's arguments without their wrapper, and a
//! fenced code block streamed as `execute_code`'s JSON arguments.

use tokio::sync::mpsc::Sender;

use super::super::tokenizer::Utf8Stream;
use super::Mode;
use runcell_llm::fenced::{TOOL_OPEN, parse_tool_calls};
use runcell_llm::{Completion, FinishReason, LlmError, LlmEvent, ToolCall, Usage};

const CALL_NAME: &str = "{\"name\": ";
const CALL_ARGS: &str = ", \"arguments\": ";

/// Turns token bytes into events, per mode.
pub(super) struct Output<'a> {
    mode: Mode,
    tx: &'a Sender<Result<LlmEvent, LlmError>>,
    utf8: Utf8Stream,
    /// All the text so far.
    text: String,
    /// How much of `text` (plain modes) or of the arguments (tool-call mode)
    /// has been sent.
    sent: usize,
    /// Tool-call mode: the name, once the model wrote it.
    name: Option<String>,
    /// Fenced-code mode: the arguments JSON sent so far.
    args: String,
}

const FENCE: &str = "```";

/// `s` escaped as inside a JSON string (piece by piece, it concatenates).
fn json_escape(s: &str) -> String {
    let quoted = serde_json::Value::from(s).to_string();
    quoted[1..quoted.len() - 1].to_string()
}

impl<'a> Output<'a> {
    pub(super) fn new(mode: Mode, tx: &'a Sender<Result<LlmEvent, LlmError>>) -> Self {
        Self {
            mode,
            tx,
            utf8: Utf8Stream::default(),
            text: String::new(),
            sent: 0,
            name: None,
            args: String::new(),
        }
    }

    fn send(&self, event: LlmEvent) -> bool {
        self.tx.blocking_send(Ok(event)).is_ok()
    }

    /// False when the receiver is gone.
    pub(super) fn push(&mut self, bytes: &[u8]) -> bool {
        let piece = self.utf8.push(bytes);
        if piece.is_empty() {
            return !self.tx.is_closed();
        }
        self.text.push_str(&piece);
        self.flush(false)
    }

    /// Sends what can be sent now (everything when `last`).
    fn flush(&mut self, last: bool) -> bool {
        match &self.mode {
            Mode::FencedCode { tool, .. } => {
                let Some(nl) = self.text.find('\n') else {
                    return !self.tx.is_closed();
                };
                let body = &self.text[nl + 1..];
                let end = match body.find(FENCE) {
                    Some(i) => i,
                    None if last => body.len(),
                    None => body.len() - partial_suffix(body, FENCE),
                };
                let first = self.name.is_none();
                let mut fragment = String::new();
                if first {
                    let language = self.text.get(FENCE.len()..nl).unwrap_or_default();
                    fragment = format!(
                        "{{\"language\": {}, \"code\": \"",
                        serde_json::Value::from(language.trim())
                    );
                    self.name = Some(tool.clone());
                }
                if end > self.sent {
                    fragment.push_str(&json_escape(&body[self.sent..end]));
                    self.sent = end;
                }
                if fragment.is_empty() {
                    return !self.tx.is_closed();
                }
                self.args.push_str(&fragment);
                self.send(LlmEvent::ToolCallDelta {
                    index: 0,
                    id: first.then(|| "call_0".to_string()),
                    name: if first { self.name.clone() } else { None },
                    arguments: fragment,
                })
            }
            Mode::Text | Mode::Json(_) => {
                let new = self.text[self.sent..].to_string();
                self.sent = self.text.len();
                new.is_empty() || self.send(LlmEvent::Text(new))
            }
            Mode::TextOrToolCall => {
                // Text up to a tool call is sent as it comes; a possible
                // start of `<tool_call>` waits until it is clearly not one.
                let end = match self.text.find(TOOL_OPEN) {
                    Some(i) => i,
                    None if last => self.text.len(),
                    None => self.text.len() - partial_suffix(&self.text, TOOL_OPEN),
                };
                if end <= self.sent {
                    return !self.tx.is_closed();
                }
                let new = self.text[self.sent..end].to_string();
                self.sent = end;
                self.send(LlmEvent::Text(new))
            }
            Mode::ToolCall { .. } => {
                let Some(args_at) = self.text.find(CALL_ARGS) else {
                    return !self.tx.is_closed();
                };
                let args = &self.text[args_at + CALL_ARGS.len()..];
                // What follows the arguments (`}` and the tail) is not sent.
                let end = json_end(args).unwrap_or(args.len());
                let first = self.name.is_none();
                if first {
                    let name_json = self.text[..args_at]
                        .strip_prefix(CALL_NAME)
                        .unwrap_or_default();
                    self.name = Some(serde_json::from_str(name_json).unwrap_or_default());
                }
                if end <= self.sent && !first {
                    return !self.tx.is_closed();
                }
                let fragment = args[self.sent.min(end)..end].to_string();
                self.sent = end.max(self.sent);
                self.send(LlmEvent::ToolCallDelta {
                    index: 0,
                    id: first.then(|| "call_0".to_string()),
                    name: if first { self.name.clone() } else { None },
                    arguments: fragment,
                })
            }
        }
    }

    pub(super) fn finish(mut self, finish: FinishReason, usage: Usage) {
        let rest = self.utf8.finish();
        self.text.push_str(&rest);
        if !self.flush(true) {
            return;
        }
        let mut completion = Completion {
            text: String::new(),
            tool_calls: Vec::new(),
            finish_reason: finish.clone(),
            usage: Some(usage),
        };
        match &self.mode {
            Mode::FencedCode { .. } => {
                let closed = self
                    .text
                    .find('\n')
                    .is_some_and(|nl| self.text[nl + 1..].contains(FENCE));
                match (finish, closed, self.name.take()) {
                    (FinishReason::Stop, true, Some(name)) => {
                        if !self.send(LlmEvent::ToolCallDelta {
                            index: 0,
                            id: None,
                            name: None,
                            arguments: "\"}".into(),
                        }) {
                            return;
                        }
                        self.args.push_str("\"}");
                        completion.finish_reason = FinishReason::ToolCalls;
                        completion.tool_calls.push(ToolCall {
                            id: "call_0".into(),
                            name,
                            arguments: std::mem::take(&mut self.args),
                        });
                    }
                    _ => completion.text = std::mem::take(&mut self.text),
                }
            }
            Mode::Text | Mode::Json(_) => completion.text = std::mem::take(&mut self.text),
            Mode::TextOrToolCall => {
                let (text, calls) = parse_tool_calls(&self.text);
                completion.text = text;
                for (index, call) in calls.iter().enumerate() {
                    let delta = LlmEvent::ToolCallDelta {
                        index,
                        id: Some(call.id.clone()),
                        name: Some(call.name.clone()),
                        arguments: call.arguments.clone(),
                    };
                    if !self.send(delta) {
                        return;
                    }
                }
                if !calls.is_empty() {
                    completion.finish_reason = FinishReason::ToolCalls;
                }
                completion.tool_calls = calls;
            }
            Mode::ToolCall { .. } => {
                let args = self
                    .text
                    .find(CALL_ARGS)
                    .map(|at| &self.text[at + CALL_ARGS.len()..])
                    .and_then(|args| json_end(args).map(|end| &args[..end]));
                match (finish, args, self.name.take()) {
                    (FinishReason::Stop, Some(args), Some(name)) => {
                        completion.finish_reason = FinishReason::ToolCalls;
                        completion.tool_calls.push(ToolCall {
                            id: "call_0".into(),
                            name,
                            arguments: args.to_string(),
                        });
                    }
                    // Cut off before the call was complete.
                    _ => completion.text = std::mem::take(&mut self.text),
                }
            }
        }
        let _ = self.send(LlmEvent::Done(completion));
    }
}

/// Where the JSON object or array at the start of `text` ends (the byte after
/// its closing bracket), if it is complete.
fn json_end(text: &str) -> Option<usize> {
    let mut depth = 0usize;
    let mut in_string = false;
    let mut escaped = false;
    for (i, c) in text.char_indices() {
        if in_string {
            match c {
                _ if escaped => escaped = false,
                '\\' => escaped = true,
                '"' => in_string = false,
                _ => {}
            }
            continue;
        }
        match c {
            '"' => in_string = true,
            '{' | '[' => depth += 1,
            '}' | ']' => {
                depth = depth.checked_sub(1)?;
                if depth == 0 {
                    return Some(i + 1);
                }
            }
            _ => {}
        }
    }
    None
}

/// The length of the longest suffix of `text` that is a proper prefix of
/// `tag`.
fn partial_suffix(text: &str, tag: &str) -> usize {
    (1..tag.len())
        .rev()
        .find(|&n| text.ends_with(&tag[..n]))
        .unwrap_or(0)
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn json_ends() {
        assert_eq!(json_end(r#"{"a": "}\"}"} tail"#), Some(13));
        assert_eq!(json_end(r#"{"a": [1, {}]}}"#), Some(14));
        assert_eq!(json_end(r#"{"a": "#), None);
    }

    #[test]
    fn partial_tag_suffixes() {
        assert_eq!(partial_suffix("abc <tool", TOOL_OPEN), 5);
        assert_eq!(partial_suffix("abc <", TOOL_OPEN), 1);
        assert_eq!(partial_suffix("abc", TOOL_OPEN), 0);
    }

    fn drain(rx: &mut tokio::sync::mpsc::Receiver<Result<LlmEvent, LlmError>>) -> Vec<LlmEvent> {
        let mut events = Vec::new();
        while let Ok(e) = rx.try_recv() {
            events.push(e.unwrap());
        }
        events
    }

    #[test]
    fn tool_call_output_streams_arguments_without_the_wrapper() {
        let (tx, mut rx) = tokio::sync::mpsc::channel(64);
        let mode = Mode::ToolCall {
            tools: Vec::new(),
            tail: "\n</tool_call>".into(),
        };
        let mut out = Output::new(mode, &tx);
        for piece in [
            "{\"name\": ",
            "\"execute_code\"",
            ", \"arguments\": ",
            "{\"language\": \"python\", ",
            "\"code\": \"print('{é}\\\"')\"",
            "}}\n",
            "</tool_call>",
        ] {
            assert!(out.push(piece.as_bytes()));
        }
        out.finish(FinishReason::Stop, Usage::default());
        let events = drain(&mut rx);
        let mut args = String::new();
        let mut names = Vec::new();
        let mut done = None;
        for e in events {
            match e {
                LlmEvent::ToolCallDelta {
                    index: 0,
                    name,
                    arguments,
                    ..
                } => {
                    names.extend(name);
                    args.push_str(&arguments);
                }
                LlmEvent::Done(c) => done = Some(c),
                other => panic!("{other:?}"),
            }
        }
        let done = done.unwrap();
        assert_eq!(names, ["execute_code"]);
        assert_eq!(args, r#"{"language": "python", "code": "print('{é}\"')"}"#);
        assert_eq!(done.tool_calls[0].arguments, args);
        assert_eq!(done.finish_reason, FinishReason::ToolCalls);
    }

    #[test]
    fn fenced_code_streams_as_execute_code_arguments() {
        let (tx, mut rx) = tokio::sync::mpsc::channel(64);
        let mode = Mode::FencedCode {
            tool: "execute_code".into(),
            languages: vec!["python".into()],
        };
        let mut out = Output::new(mode, &tx);
        for piece in ["```", "python\nimport", " math\nprint(\"a`b\")\n`", "``"] {
            assert!(out.push(piece.as_bytes()));
        }
        out.finish(FinishReason::Stop, Usage::default());
        let mut args = String::new();
        let mut done = None;
        for e in drain(&mut rx) {
            match e {
                LlmEvent::ToolCallDelta { arguments, .. } => args.push_str(&arguments),
                LlmEvent::Done(c) => done = Some(c),
                other => panic!("{other:?}"),
            }
        }
        let done = done.unwrap();
        assert_eq!(done.tool_calls[0].arguments, args);
        assert_eq!(done.tool_calls[0].name, "execute_code");
        let v: serde_json::Value = serde_json::from_str(&args).unwrap();
        assert_eq!(v["language"], "python");
        assert_eq!(v["code"], "import math\nprint(\"a`b\")\n");
    }

    #[test]
    fn auto_mode_holds_back_a_tool_call() {
        let (tx, mut rx) = tokio::sync::mpsc::channel(64);
        let mut out = Output::new(Mode::TextOrToolCall, &tx);
        for piece in [
            "Let me run it.\n",
            "<tool",
            "_call>\n{\"name\": \"x\", \"arguments\": {}}\n",
            "</tool_call>",
        ] {
            assert!(out.push(piece.as_bytes()));
        }
        out.finish(FinishReason::Stop, Usage::default());
        let events = drain(&mut rx);
        let text: String = events
            .iter()
            .filter_map(|e| match e {
                LlmEvent::Text(t) => Some(t.as_str()),
                _ => None,
            })
            .collect();
        assert_eq!(text, "Let me run it.\n");
        let Some(LlmEvent::Done(done)) = events.last() else {
            panic!("{events:?}")
        };
        assert_eq!(done.tool_calls.len(), 1);
        assert_eq!(done.text, "Let me run it.\n");
        assert_eq!(done.finish_reason, FinishReason::ToolCalls);
    }
}
