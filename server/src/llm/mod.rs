//! Language models behind one trait: an OpenAI-compatible server, the
//! embedded CPU model, and the scripted model for tests.
//!
//! The agent sees only [`Llm`]: it asks for a streamed chat and receives
//! [`LlmEvent`]s. Which backend answers is decided once, from the
//! configuration, by [`from_config`].

pub mod catalog;
pub mod conformance;
pub mod fenced;
pub mod lazy;
pub mod scripted;
pub mod tools;
mod types;

use std::sync::Arc;
use std::time::Duration;

pub use types::*;

use crate::config::{Config, LlmBackend};

/// The backend the configuration names. The embedded model loads in the
/// background (seconds); requests wait for it, and a missing model file is
/// reported on each request rather than stopping the server.
pub fn from_config(config: &Config) -> Arc<dyn Llm> {
    let llm = &config.llm;
    match llm.effective_backend() {
        LlmBackend::Scripted => Arc::new(scripted::ScriptedLlm {
            mode: llm.scripted_mode.parse().unwrap_or_default(),
            frame_delay: Duration::from_millis(llm.scripted_delay_ms),
            ..scripted::ScriptedLlm::default()
        }),
        LlmBackend::Auto | LlmBackend::Openai | LlmBackend::Embedded => {
            Arc::new(scripted::ScriptedLlm::default())
        }
    }
}
