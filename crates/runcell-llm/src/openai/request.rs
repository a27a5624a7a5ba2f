//! What is sent: the JSON body of a streamed chat request and the
//! `response_format` asked for.

use std::sync::atomic::Ordering;

use serde_json::{Value, json};

use super::{FORMAT_OBJECT, OpenAiClient, StructuredOutputMode};
use crate::{ChatRequest, Role, ToolChoice};

impl OpenAiClient {
    /// The `response_format` to send now, if any.
    pub(super) fn response_format(&self, request: &ChatRequest) -> Option<Value> {
        let schema = request.response_schema.as_ref()?;
        let object = match self.config.structured_output {
            StructuredOutputMode::Off => return None,
            StructuredOutputMode::JsonSchema => false,
            StructuredOutputMode::JsonObject => true,
            StructuredOutputMode::Auto => self.format.load(Ordering::Relaxed) == FORMAT_OBJECT,
        };
        Some(if object {
            json!({"type": "json_object", "schema": schema.schema})
        } else {
            json!({"type": "json_schema", "json_schema": {
                "name": schema_name(&schema.name),
                "schema": schema.schema,
                "strict": true,
            }})
        })
    }
}

/// The JSON body of a streamed chat request.
pub(super) fn request_body(
    request: &ChatRequest,
    model: &str,
    tools: bool,
    stream_options: bool,
    response_format: Option<Value>,
) -> Value {
    let messages: Vec<Value> = request
        .messages
        .iter()
        .map(|m| {
            let role = match m.role {
                Role::System => "system",
                Role::User => "user",
                Role::Assistant => "assistant",
                Role::Tool => "tool",
            };
            // Never `null`: llama_cpp.server refuses it.
            let mut message = json!({"role": role, "content": m.content});
            if !m.tool_calls.is_empty() {
                message["tool_calls"] = m
                    .tool_calls
                    .iter()
                    .map(|c| {
                        json!({"id": c.id, "type": "function",
                               "function": {"name": c.name, "arguments": c.arguments}})
                    })
                    .collect();
            }
            if let Some(id) = &m.tool_call_id {
                message["tool_call_id"] = json!(id);
            }
            message
        })
        .collect();
    let mut body = json!({"model": model, "messages": messages, "stream": true});
    if stream_options {
        body["stream_options"] = json!({"include_usage": true});
    }
    if tools && !request.tools.is_empty() {
        body["tools"] = request
            .tools
            .iter()
            .map(|t| {
                json!({"type": "function", "function": {
                    "name": t.name, "description": t.description, "parameters": t.parameters}})
            })
            .collect();
        body["tool_choice"] = match &request.tool_choice {
            ToolChoice::Auto => json!("auto"),
            ToolChoice::Required => json!("required"),
            ToolChoice::None => json!("none"),
            ToolChoice::Named(name) => json!({"type": "function", "function": {"name": name}}),
        };
    }
    if let Some(t) = request.temperature {
        body["temperature"] = json!(t);
    }
    if let Some(seed) = request.seed {
        body["seed"] = json!(seed);
    }
    if let Some(n) = request.max_tokens {
        body["max_tokens"] = json!(n);
    }
    if let Some(format) = response_format {
        body["response_format"] = format;
    }
    body
}

/// OpenAI wants `^[a-zA-Z0-9_-]{1,64}$`.
fn schema_name(name: &str) -> String {
    let clean: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' {
                c
            } else {
                '_'
            }
        })
        .take(64)
        .collect();
    if clean.is_empty() {
        "reply".to_owned()
    } else {
        clean
    }
}
