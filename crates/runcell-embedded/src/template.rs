//! The prompt: the GGUF's own `tokenizer.chat_template` (Jinja), rendered with
//! minijinja the way Hugging Face's `apply_chat_template` renders it.

use minijinja::{Environment, Error, ErrorKind, Value, context};
use serde_json::json;

use runcell_llm::{Message, Role, ToolSpec};

/// Used when a GGUF carries no template: ChatML, which Qwen and SmolLM2 speak.
const CHATML: &str = "{%- for message in messages %}{{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>\\n' }}{%- endfor %}{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}";

/// A compiled chat template.
pub(crate) struct ChatTemplate {
    env: Environment<'static>,
    source: String,
    bos: String,
    eos: String,
}

impl std::fmt::Debug for ChatTemplate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChatTemplate")
            .field("chars", &self.source.len())
            .finish_non_exhaustive()
    }
}

/// Python's `json.dumps(value, ensure_ascii=False)`: `", "` and `": "`
/// separators, as the Hugging Face `tojson` filter writes them.
fn py_json(value: &serde_json::Value) -> String {
    match value {
        serde_json::Value::Array(items) => {
            let inner: Vec<String> = items.iter().map(py_json).collect();
            format!("[{}]", inner.join(", "))
        }
        serde_json::Value::Object(map) => {
            let inner: Vec<String> = map
                .iter()
                .map(|(k, v)| format!("{}: {}", serde_json::Value::from(k.as_str()), py_json(v)))
                .collect();
            format!("{{{}}}", inner.join(", "))
        }
        other => other.to_string(),
    }
}

fn tojson(value: &Value) -> Result<Value, Error> {
    let json = serde_json::to_value(value)
        .map_err(|e| Error::new(ErrorKind::InvalidOperation, e.to_string()))?;
    Ok(Value::from_safe_string(py_json(&json)))
}

fn raise_exception(message: String) -> Result<Value, Error> {
    Err(Error::new(ErrorKind::InvalidOperation, message))
}

fn role_name(role: Role) -> &'static str {
    match role {
        Role::System => "system",
        Role::User => "user",
        Role::Assistant => "assistant",
        Role::Tool => "tool",
    }
}

/// A message in the dict shape chat templates expect (tool-call arguments as
/// objects, not strings).
fn message_value(m: &Message) -> serde_json::Value {
    let calls: Vec<serde_json::Value> = m
        .tool_calls
        .iter()
        .map(|c| {
            let arguments = serde_json::from_str::<serde_json::Value>(&c.arguments)
                .unwrap_or_else(|_| serde_json::Value::String(c.arguments.clone()));
            json!({
                "id": c.id,
                "type": "function",
                "function": { "name": c.name, "arguments": arguments },
            })
        })
        .collect();
    let mut v = json!({ "role": role_name(m.role), "content": m.content });
    if !calls.is_empty() {
        v["tool_calls"] = serde_json::Value::Array(calls);
    }
    if let Some(id) = &m.tool_call_id {
        v["tool_call_id"] = json!(id);
    }
    v
}

fn tool_value(t: &ToolSpec) -> serde_json::Value {
    json!({
        "type": "function",
        "function": {
            "name": t.name,
            "description": t.description,
            "parameters": t.parameters,
        },
    })
}

impl ChatTemplate {
    /// Compiles `source` (or ChatML when the GGUF has none).
    pub(crate) fn new(source: Option<String>, bos: &str, eos: &str) -> Result<Self, String> {
        let source = source.unwrap_or_else(|| CHATML.to_string());
        let mut env = Environment::new();
        minijinja_contrib::add_to_environment(&mut env);
        env.set_unknown_method_callback(minijinja_contrib::pycompat::unknown_method_callback);
        env.set_trim_blocks(true);
        env.set_lstrip_blocks(true);
        env.add_filter("tojson", tojson);
        env.add_function("raise_exception", raise_exception);
        env.add_template_owned("chat", source.clone())
            .map_err(|e| format!("chat template: {e}"))?;
        Ok(Self {
            env,
            source,
            bos: bos.to_string(),
            eos: eos.to_string(),
        })
    }

    /// Whether the template knows Qwen/Hermes-style `<tool_call>` tags.
    pub(crate) fn uses_tool_call_tags(&self) -> bool {
        self.source.contains("<tool_call>")
    }

    /// The prompt for `messages` (and `tools` when any), ending with the
    /// assistant's turn opener.
    pub(crate) fn render(
        &self,
        messages: &[Message],
        tools: &[ToolSpec],
    ) -> Result<String, String> {
        self.render_as(messages, tools, true)
    }

    /// `messages` as the start of a longer prompt: without the assistant's
    /// turn opener (what a prompt cache reads ahead, or keeps as a prefix).
    pub(crate) fn render_start(
        &self,
        messages: &[Message],
        tools: &[ToolSpec],
    ) -> Result<String, String> {
        self.render_as(messages, tools, false)
    }

    fn render_as(
        &self,
        messages: &[Message],
        tools: &[ToolSpec],
        add_generation_prompt: bool,
    ) -> Result<String, String> {
        let messages: Vec<serde_json::Value> = messages.iter().map(message_value).collect();
        let tools: Option<Vec<serde_json::Value>> =
            (!tools.is_empty()).then(|| tools.iter().map(tool_value).collect());
        let template = self
            .env
            .get_template("chat")
            .map_err(|e| format!("chat template: {e}"))?;
        template
            .render(context! {
                messages => messages,
                tools => tools,
                add_generation_prompt => add_generation_prompt,
                bos_token => self.bos,
                eos_token => self.eos,
            })
            .map_err(|e| format!("chat template: {e}"))
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use runcell_llm::ToolCall;

    /// Qwen2.5-Coder's template, as its GGUF carries it.
    const QWEN: &str = include_str!("testdata/qwen2.5-chat-template.jinja");

    fn execute_code() -> ToolSpec {
        runcell_llm::tools::execute_code_spec()
    }

    #[test]
    fn qwen_template_without_tools() {
        let t = ChatTemplate::new(Some(QWEN.to_string()), "", "<|im_end|>").unwrap();
        let got = t
            .render(&[Message::system("Be brief."), Message::user("Hi")], &[])
            .unwrap();
        assert_eq!(
            got,
            "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"
        );
        let got = t.render(&[Message::user("Hi")], &[]).unwrap();
        assert!(got.starts_with("<|im_start|>system\nYou are Qwen"), "{got}");
        assert!(!t.uses_tool_call_tags() || QWEN.contains("<tool_call>"));
    }

    #[test]
    fn qwen_template_with_tools_and_a_tool_round() {
        let t = ChatTemplate::new(Some(QWEN.to_string()), "", "<|im_end|>").unwrap();
        let mut call = Message::assistant("");
        call.tool_calls.push(ToolCall {
            id: "call_0".into(),
            name: "execute_code".into(),
            arguments: r#"{"language":"python","code":"print(1)"}"#.into(),
        });
        let got = t
            .render(
                &[
                    Message::user("Run it"),
                    call,
                    Message::tool("call_0", "1\n"),
                ],
                &[execute_code()],
            )
            .unwrap();
        assert!(got.contains("# Tools"), "{got}");
        assert!(
            got.contains(
                r#"{"type": "function", "function": {"name": "execute_code", "description": "#
            ),
            "tools are written as Python's json.dumps would: {got}"
        );
        assert!(
            got.contains(
                r#""enum": ["python", "javascript", "typescript", "r", "java", "bash", "c"]"#
            ),
            "{got}"
        );
        assert!(
            got.contains("<tool_call>\n{\"name\": \"execute_code\", \"arguments\": {\"language\": \"python\", \"code\": \"print(1)\"}}\n</tool_call><|im_end|>"),
            "{got}"
        );
        assert!(
            got.contains("<|im_start|>user\n<tool_response>\n1\n\n</tool_response><|im_end|>\n"),
            "{got}"
        );
        assert!(got.ends_with("<|im_start|>assistant\n"));
        assert!(t.uses_tool_call_tags());
    }

    #[test]
    fn missing_template_falls_back_to_chatml() {
        let t = ChatTemplate::new(None, "", "").unwrap();
        let got = t.render(&[Message::user("Hi")], &[]).unwrap();
        assert_eq!(
            got,
            "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"
        );
    }

    #[test]
    fn py_json_matches_python() {
        let v = json!({"a": {"c": null}, "b": [1, "x"]});
        assert_eq!(py_json(&v), r#"{"a": {"c": null}, "b": [1, "x"]}"#);
    }
}
