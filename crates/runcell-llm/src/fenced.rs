//! The fallback for models that answer in prose instead of calling the tool:
//! the program is taken from the reply's first fenced code block, or from a
//! `<tool_call>` object written as text (what Qwen-style models do untrained
//! for the server's tool format).

use super::tools::ExecuteCode;
use super::{Completion, ToolCall};

/// The program an answer carries: its first `execute_code` call that
/// parses, or else one written in its text (a fenced block, a tool call
/// written out).
pub fn program_of(completion: &Completion) -> Option<ExecuteCode> {
    completion
        .tool_calls
        .iter()
        .find_map(|call| ExecuteCode::parse(&call.name, &call.arguments).ok())
        .or_else(|| extract_code(&completion.text))
}

/// The program a plain reply contains, if any. A fenced block tagged with a
/// language runcell does not run (`json`, `text`, `output`...) is skipped; an
/// untagged one is taken as Python. A block the model did not close (it hit
/// its token limit) is taken up to the end.
pub fn extract_code(reply: &str) -> Option<ExecuteCode> {
    if let Some(call) = tool_call_in_text(reply) {
        return Some(call);
    }
    let mut rest = reply;
    while let Some((fence, start)) = next_fence(rest) {
        let after = &rest[start + fence.len()..];
        let (info, body) = after.split_once('\n').unwrap_or((after, ""));
        let (code, remaining) = match find_closing(body, fence) {
            Some((end, next)) => (&body[..end], &body[next..]),
            None => (body, ""),
        };
        if info.trim().eq_ignore_ascii_case("json") {
            // A tool call written out as a JSON block.
            if let Some(call) = tool_call_json(code) {
                return Some(call);
            }
        }
        if let Some(language) = language_of(info) {
            let code = code.trim_end_matches(['\n', '\r']);
            if !code.trim().is_empty() {
                return Some(ExecuteCode {
                    language: language.into(),
                    code: code.to_string(),
                });
            }
        }
        rest = remaining;
    }
    None
}

/// The next opening fence (at the start of a line, after at most three
/// spaces): which fence and the byte offset where it starts.
fn next_fence(text: &str) -> Option<(&'static str, usize)> {
    let mut offset = 0;
    for line in text.split_inclusive('\n') {
        let trimmed = line.trim_start_matches(' ');
        if line.len() - trimmed.len() <= 3 {
            for fence in ["```", "~~~"] {
                if trimmed.starts_with(fence) {
                    return Some((fence, offset + line.len() - trimmed.len()));
                }
            }
        }
        offset += line.len();
    }
    None
}

/// Where the block's closing fence starts and where the text after it begins.
fn find_closing(body: &str, fence: &str) -> Option<(usize, usize)> {
    let mut offset = 0;
    for line in body.split_inclusive('\n') {
        let trimmed = line.trim();
        if trimmed.starts_with(fence)
            && trimmed
                .trim_start_matches(fence.as_bytes()[0] as char)
                .is_empty()
        {
            return Some((offset, offset + line.len()));
        }
        offset += line.len();
    }
    None
}

/// The sandbox language a fence's info string names; `None` for languages
/// runcell does not run.
fn language_of(info: &str) -> Option<&'static str> {
    let tag = info
        .trim()
        .trim_start_matches('{')
        .split(|c: char| c.is_whitespace() || c == ',' || c == '}')
        .next()
        .unwrap_or("")
        .trim_start_matches('.')
        .to_ascii_lowercase();
    match tag.as_str() {
        "" | "python" | "py" | "python3" | "ipython" | "ipython3" => Some("python"),
        "javascript" | "js" | "node" | "nodejs" => Some("javascript"),
        "bash" | "sh" | "shell" | "zsh" => Some("bash"),
        "c" => Some("c"),
        _ => None,
    }
}

/// Where a Qwen/Hermes-style tool call written as text opens and closes.
pub const TOOL_OPEN: &str = "<tool_call>";
pub const TOOL_CLOSE: &str = "</tool_call>";

/// The first `execute_code` call among the `<tool_call>`s written in text.
fn tool_call_in_text(reply: &str) -> Option<ExecuteCode> {
    parse_tool_calls(reply)
        .1
        .iter()
        .find_map(|call| ExecuteCode::parse(&call.name, &call.arguments).ok())
}

/// An `execute_code` call written as a JSON object.
fn tool_call_json(body: &str) -> Option<ExecuteCode> {
    let call = call_from_json(body, 0)?;
    ExecuteCode::parse(&call.name, &call.arguments).ok()
}

/// `{"name": ..., "arguments": ...}` as a [`ToolCall`] (`parameters` for
/// `arguments` too; arguments as an object or as JSON text), numbered `index`.
fn call_from_json(body: &str, index: usize) -> Option<ToolCall> {
    let serde_json::Value::Object(call) = serde_json::from_str(body.trim()).ok()? else {
        return None;
    };
    let serde_json::Value::String(name) = call.get("name")? else {
        return None;
    };
    let arguments = match call.get("arguments").or_else(|| call.get("parameters")) {
        Some(serde_json::Value::String(s)) => s.clone(),
        Some(v) => v.to_string(),
        None => "{}".to_string(),
    };
    Some(ToolCall {
        id: format!("call_{index}"),
        name: name.clone(),
        arguments,
    })
}

/// Splits a free reply into its text and the `<tool_call>{...}</tool_call>`
/// calls it contains (Qwen/Hermes style). An unclosed last call counts when
/// its JSON is complete.
pub fn parse_tool_calls(reply: &str) -> (String, Vec<ToolCall>) {
    let Some(first) = reply.find(TOOL_OPEN) else {
        return (reply.to_string(), Vec::new());
    };
    // The text is what was streamed before the call.
    let text = reply[..first].to_string();
    let mut calls = Vec::new();
    let mut rest = &reply[first..];
    while let Some(open) = rest.find(TOOL_OPEN) {
        let body_start = open + TOOL_OPEN.len();
        let (body, next) = match rest[body_start..].find(TOOL_CLOSE) {
            Some(close) => (
                &rest[body_start..body_start + close],
                &rest[body_start + close + TOOL_CLOSE.len()..],
            ),
            None => (&rest[body_start..], ""),
        };
        if let Some(call) = call_from_json(body, calls.len()) {
            calls.push(call);
        }
        rest = next;
    }
    if calls.is_empty() {
        return (reply.to_string(), calls);
    }
    (text, calls)
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn check(reply: &str, expect: Option<(&str, &str)>) {
        let got = extract_code(reply);
        let got = got.as_ref().map(|c| (c.language.as_str(), c.code.as_str()));
        assert_eq!(got, expect, "reply: {reply:?}");
    }

    #[test]
    fn fenced_blocks_are_found() {
        check(
            "Here:\n```python\nprint(1)\n```\nDone.",
            Some(("python", "print(1)")),
        );
        check(
            "```\nx = 2\nprint(x)\n```",
            Some(("python", "x = 2\nprint(x)")),
        );
        check("```py\nprint(1)", Some(("python", "print(1)")));
        check(
            "```js\nconsole.log(1)\n```",
            Some(("javascript", "console.log(1)")),
        );
        check("~~~bash\necho hi\n~~~", Some(("bash", "echo hi")));
        check(
            "```json\n{}\n```\n```c\nint main(){}\n```",
            Some(("c", "int main(){}")),
        );
        check("```python\n\n```", None);
        check("no code here", None);
        check("inline ```python print(1)``` is not a block", None);
        check("```text\nout\n```", None);
        check(
            "```python\ns = '```'\nprint(s)\n```",
            Some(("python", "s = '```'\nprint(s)")),
        );
    }

    #[test]
    fn tool_calls_written_as_text_are_found() {
        check(
            "<tool_call>\n{\"name\": \"execute_code\", \"arguments\": {\"language\": \"python\", \"code\": \"print(2)\"}}\n</tool_call>",
            Some(("python", "print(2)")),
        );
        check(
            "<tool_call>{\"name\": \"execute_code\", \"arguments\": \"{\\\"code\\\": \\\"print(3)\\\"}\"}",
            Some(("python", "print(3)")),
        );
        check(
            "<tool_call>{\"name\": \"other\", \"arguments\": {}}</tool_call>",
            None,
        );
    }

    #[test]
    fn tool_calls_written_as_json_blocks_are_found() {
        check(
            "```json\n{\n  \"name\": \"execute_code\",\n  \"arguments\": {\"language\": \"python\", \"code\": \"print(5)\"}\n}\n```",
            Some(("python", "print(5)")),
        );
        check("```json\n{\"name\": \"x\"}\n```", None);
    }

    #[test]
    fn tool_calls_in_text() {
        let check = |reply: &str, text: &str, calls: &[(&str, &str)]| {
            let (got_text, got) = parse_tool_calls(reply);
            assert_eq!(got_text, text, "{reply}");
            let got: Vec<(&str, &str)> = got
                .iter()
                .map(|c| (c.name.as_str(), c.arguments.as_str()))
                .collect();
            assert_eq!(got, calls, "{reply}");
        };
        check("just text", "just text", &[]);
        check(
            "Sure.\n<tool_call>\n{\"name\": \"execute_code\", \"arguments\": {\"code\": \"print(1)\"}}\n</tool_call>",
            "Sure.\n",
            &[("execute_code", r#"{"code":"print(1)"}"#)],
        );
        check(
            "<tool_call>{\"name\": \"a\", \"arguments\": \"{}\"}</tool_call><tool_call>{\"name\": \"b\", \"arguments\": {}}",
            "",
            &[("a", "{}"), ("b", "{}")],
        );
        check(
            "<tool_call>not json</tool_call>",
            "<tool_call>not json</tool_call>",
            &[],
        );
    }

    proptest! {
        #[test]
        fn any_program_survives_the_fence(
            before in "[a-zA-Z .,!?\n]{0,80}",
            code in "[a-zA-Z0-9 _=+()'\"\\[\\]:#.\n-]{1,200}",
            after in "[a-zA-Z .,!?\n]{0,80}",
        ) {
            prop_assume!(!code.trim().is_empty());
            let code = code.trim_end_matches('\n');
            let reply = format!("{before}\n```python\n{code}\n```\n{after}");
            let got = extract_code(&reply);
            prop_assert_eq!(got.map(|c| c.code), Some(code.to_string()));
        }

        #[test]
        fn never_panics(reply in "\\PC{0,300}") {
            let _ = extract_code(&reply);
        }
    }
}
