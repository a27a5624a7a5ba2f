//! Language models behind one trait: an OpenAI-compatible server and the
//! scripted model for tests here; the embedded CPU model in
//! `runcell-embedded`, above this crate, which implements the same trait.
//!
//! The agent sees only [`Llm`]: it asks for a streamed chat and receives
//! [`LlmEvent`]s. Which backend answers is decided once, from the
//! configuration, by [`from_settings`].

pub mod catalog;
pub mod config;
#[cfg(any(test, feature = "conformance"))]
pub mod conformance;
pub mod fenced;
mod metered;
pub use metered::model_time_of;
pub mod openai;
pub mod requests;
pub mod scripted;
pub mod tools;
mod types;

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

pub use types::*;

use self::config::{LlmBackend, LlmConfig};

/// A backend that could not be set up: every request says why.
struct Broken(LlmError);

#[async_trait::async_trait]
impl Llm for Broken {
    fn backend(&self) -> &'static str {
        "unavailable"
    }
    fn capabilities(&self) -> Capabilities {
        Capabilities {
            tools: false,
            structured_output: false,
            streaming: false,
        }
    }
    async fn models(&self) -> Result<Vec<ModelInfo>, LlmError> {
        Err(self.0.clone())
    }
    async fn chat(&self, _request: ChatRequest) -> Result<ChatStream, LlmError> {
        Err(self.0.clone())
    }
}

/// The backend the configuration names; `embedded` makes the embedded
/// model's (`runcell_embedded::from_settings`: that crate sits above this
/// one, so it is handed in). The embedded model loads in the background
/// (seconds); requests wait for it, and a missing model file is reported on
/// each request rather than stopping the server. `data_dir` is the server's
/// data directory (models live in its `models/`).
pub fn from_settings(
    llm: &LlmConfig,
    data_dir: &Path,
    embedded: fn(&LlmConfig, &Path) -> Arc<dyn Llm>,
) -> Arc<dyn Llm> {
    Arc::new(metered::Metered(backend_of(llm, data_dir, embedded)))
}

fn backend_of(
    llm: &LlmConfig,
    data_dir: &Path,
    embedded: fn(&LlmConfig, &Path) -> Arc<dyn Llm>,
) -> Arc<dyn Llm> {
    match llm.effective_backend() {
        LlmBackend::Scripted => Arc::new(scripted::ScriptedLlm {
            mode: llm.scripted_mode,
            frame_delay: Duration::from_millis(llm.scripted_delay_ms),
            ..scripted::ScriptedLlm::default()
        }),
        LlmBackend::Auto | LlmBackend::Openai => {
            let settings = openai::OpenAiConfig {
                api_key: Some(llm.api_key.expose())
                    .filter(|k| !k.trim().is_empty())
                    .map(Into::into),
                model: Some(llm.model.clone()).filter(|m| !m.trim().is_empty()),
                request_timeout: Duration::from_secs(llm.timeout_secs),
                max_retries: llm.max_retries,
                tools: llm.tools,
                structured_output: llm.structured_output,
                ..openai::OpenAiConfig::new(llm.base_url.trim())
            };
            match openai::OpenAiClient::new(settings) {
                Ok(client) => Arc::new(client),
                Err(e) => Arc::new(Broken(e)),
            }
        }
        LlmBackend::Embedded => embedded(llm, data_dir),
    }
}
