//! Where the server is and how to talk to it.

use std::fmt;
use std::time::Duration;

use secrecy::SecretString;
use serde::{Deserialize, Serialize};

use super::display_url;

/// How to ask for structured output (`ChatRequest::response_schema`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StructuredOutputMode {
    /// `json_schema` first; `json_object` with the schema if the server
    /// refuses it (remembered for later requests).
    #[default]
    Auto,
    /// `{"type":"json_schema","json_schema":{name,schema,strict}}` (OpenAI, vLLM).
    JsonSchema,
    /// `{"type":"json_object","schema":...}` (`llama_cpp.server`, llama.cpp).
    JsonObject,
    /// Never send `response_format`.
    Off,
}

/// Where the server is and how to talk to it.
#[derive(Clone)]
pub struct OpenAiConfig {
    /// The API base, `/v1` included, as `OPENAI_BASE_URL` conventionally
    /// is: `http://127.0.0.1:8080/v1`, `https://api.openai.com/v1`.
    pub base_url: String,
    /// Sent as `Authorization: Bearer`; redacted in `Debug`.
    pub api_key: Option<SecretString>,
    /// The model when a request names none; when this is `None` too, the
    /// first model the server lists.
    pub model: Option<String>,
    /// The longest wait for response headers, and for each next piece of
    /// a streamed reply (not for the whole reply).
    pub request_timeout: Duration,
    /// Extra attempts after a failure that may pass.
    pub max_retries: u32,
    /// The first backoff; it doubles with each retry.
    pub retry_base_delay: Duration,
    /// The server takes `tools` (most do).
    pub tools: bool,
    pub structured_output: StructuredOutputMode,
}

impl OpenAiConfig {
    /// The defaults, for the server at `base_url`.
    pub fn new(base_url: impl Into<String>) -> Self {
        Self {
            base_url: base_url.into(),
            api_key: None,
            model: None,
            request_timeout: Duration::from_secs(120),
            max_retries: 2,
            retry_base_delay: Duration::from_millis(500),
            tools: true,
            structured_output: StructuredOutputMode::Auto,
        }
    }
}

impl Default for OpenAiConfig {
    fn default() -> Self {
        Self::new("https://api.openai.com/v1")
    }
}

impl fmt::Debug for OpenAiConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OpenAiConfig")
            .field("base_url", &display_url(&self.base_url))
            .field("api_key", &self.api_key.as_ref().map(|_| "[redacted]"))
            .field("model", &self.model)
            .field("request_timeout", &self.request_timeout)
            .field("max_retries", &self.max_retries)
            .field("retry_base_delay", &self.retry_base_delay)
            .field("tools", &self.tools)
            .field("structured_output", &self.structured_output)
            .finish()
    }
}
