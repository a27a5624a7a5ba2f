//! The language model's settings: which backend answers and how runcell
//! talks to it. The server's configuration file holds them as its `[llm]`
//! section.

use std::path::{Path, PathBuf};

use runcell_core::{REDACTED, Secret};
use serde::{Deserialize, Serialize};

/// Which language model answers, and how runcell talks to it.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LlmConfig {
    /// `auto` (an OpenAI-compatible server when `base_url` is set, else the
    /// embedded model), `openai`, `embedded` or `scripted` (tests).
    pub backend: LlmBackend,
    /// The OpenAI-compatible API base, `/v1` included (`OPENAI_BASE_URL`).
    pub base_url: String,
    /// Sent as a bearer token (`OPENAI_API_KEY`); never printed.
    pub api_key: Secret,
    /// The model to ask for (`RUNCELL_MODEL`); empty: the server's first.
    pub model: String,
    /// The embedded model's GGUF file (`RUNCELL_MODEL_PATH`); empty: the
    /// default model under `<data_dir>/models/`.
    pub model_path: PathBuf,
    /// Threads the embedded model computes on.
    pub threads: usize,
    /// The embedded model's context window, in tokens (capped by the model's).
    pub context_tokens: usize,
    /// The longest answer, in tokens.
    pub max_tokens: u32,
    /// Requests that may wait for the embedded model (one runs at a time),
    /// anonymous pages' at most half of them; past it a turn is told the
    /// model is busy.
    pub queued_requests: usize,
    /// Of those, one requester's (a signed-in person or a key; anonymous
    /// pages per client address).
    pub queued_per_requester: usize,
    /// Memory the embedded model may use to keep conversations' readings
    /// (its prompt cache: the system prompt for everyone, each live
    /// conversation for itself), in MiB, besides the one being computed.
    pub prompt_cache_mib: usize,
    /// Fixes the model may write after a program fails (so at most
    /// `1 + max_fixes` attempts a question).
    pub max_fixes: u32,
    /// Seconds to wait for a server's first byte, and between streamed chunks.
    pub timeout_secs: u64,
    /// Retries on 429, 5xx and dropped connections, before any token arrived.
    pub max_retries: u32,
    /// The longest a whole answer may take, however the server trickles.
    pub answer_timeout_secs: u64,
    /// Whether to send `tools` to the server (off for servers that reject them).
    pub tools: bool,
    /// `auto`, `json_schema`, `json_object` or `off`.
    pub structured_output: StructuredOutputMode,
    /// The scripted model: `tool`, `fenced`, `fail_first`, `slow`… (tests).
    pub scripted_mode: ScriptedMode,
    /// The scripted model's pause between streamed pieces, in milliseconds.
    pub scripted_delay_ms: u64,
}

/// Where answers come from.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LlmBackend {
    #[default]
    Auto,
    Openai,
    Embedded,
    Scripted,
}

/// The default model's file, as `scripts/fetch-model.sh` installs it under
/// `<data-dir>/models/`: Qwen2.5-Coder-1.5B-Instruct Q4_K_M (Apache-2.0),
/// chosen over the 0.5B by `runcell bench agent` (see the README's table).
pub const DEFAULT_MODEL_FILE: &str = "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf";
pub use super::openai::StructuredOutputMode;
pub use super::scripted::ScriptedMode;

impl LlmConfig {
    /// The backend `auto` stands for, given the other settings.
    pub fn effective_backend(&self) -> LlmBackend {
        match self.backend {
            LlmBackend::Auto if self.base_url.trim().is_empty() => LlmBackend::Embedded,
            LlmBackend::Auto => LlmBackend::Openai,
            other => other,
        }
    }

    /// The embedded model's file.
    pub fn model_file(&self, data_dir: &Path) -> PathBuf {
        if self.model_path.as_os_str().is_empty() {
            data_dir.join("models").join(DEFAULT_MODEL_FILE)
        } else {
            self.model_path.clone()
        }
    }
}

/// The most fixes a question may get ([`LlmConfig::max_fixes`]).
pub const MAX_FIXES: u32 = 10;

/// A setting of the `[llm]` section that cannot be used, named as the
/// configuration file spells it.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum LlmConfigError {
    /// A count, size or timeout that is 0.
    #[error("invalid setting `{0}`: must be more than 0")]
    Zero(&'static str),
    #[error("invalid setting `llm.max_fixes`: must be at most {}", MAX_FIXES)]
    TooManyFixes,
    #[error(
        "invalid setting `llm.base_url`: the openai backend needs a server address (OPENAI_BASE_URL)"
    )]
    NoServer,
    /// The key is what `runcell config` printed in its place.
    #[error(
        "invalid setting `llm.api_key`: is the placeholder `runcell config` prints; put the real key here"
    )]
    PlaceholderKey,
    /// The address as given.
    #[error("invalid setting `llm.base_url`: `{0}` is not an http:// or https:// address")]
    NotHttp(String),
}

impl LlmConfigError {
    /// The setting refused, e.g. `llm.base_url`.
    pub fn setting(&self) -> &'static str {
        match self {
            Self::Zero(setting) => setting,
            Self::TooManyFixes => "llm.max_fixes",
            Self::NoServer | Self::NotHttp(_) => "llm.base_url",
            Self::PlaceholderKey => "llm.api_key",
        }
    }
}

impl LlmConfig {
    /// Whether these settings can be used: the model's sizes and timeouts
    /// more than 0, at most [`MAX_FIXES`] fixes, an http(s) server address
    /// (which the openai backend needs), and a key that is not the
    /// placeholder `runcell config` prints.
    pub fn validate(&self) -> Result<(), LlmConfigError> {
        for (setting, value) in [
            ("llm.threads", self.threads as u64),
            ("llm.context_tokens", self.context_tokens as u64),
            ("llm.max_tokens", u64::from(self.max_tokens)),
            ("llm.timeout_secs", self.timeout_secs),
            ("llm.answer_timeout_secs", self.answer_timeout_secs),
        ] {
            if value == 0 {
                return Err(LlmConfigError::Zero(setting));
            }
        }
        if self.max_fixes > MAX_FIXES {
            return Err(LlmConfigError::TooManyFixes);
        }
        let base_url = self.base_url.trim();
        if self.effective_backend() == LlmBackend::Openai && base_url.is_empty() {
            return Err(LlmConfigError::NoServer);
        }
        if self.api_key.expose() == REDACTED {
            return Err(LlmConfigError::PlaceholderKey);
        }
        if !(base_url.is_empty()
            || base_url.starts_with("http://")
            || base_url.starts_with("https://"))
        {
            return Err(LlmConfigError::NotHttp(self.base_url.clone()));
        }
        Ok(())
    }
}

impl Default for LlmConfig {
    fn default() -> Self {
        Self {
            backend: LlmBackend::Auto,
            base_url: String::new(),
            api_key: Secret::default(),
            model: String::new(),
            model_path: PathBuf::new(),
            threads: 2,
            context_tokens: 8192,
            max_tokens: 1024,
            queued_requests: 32,
            queued_per_requester: 4,
            prompt_cache_mib: 512,
            max_fixes: 2,
            timeout_secs: 120,
            max_retries: 3,
            answer_timeout_secs: 600,
            tools: true,
            structured_output: StructuredOutputMode::Auto,
            scripted_mode: ScriptedMode::Tool,
            scripted_delay_ms: 40,
        }
    }
}

impl std::fmt::Debug for LlmConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LlmConfig")
            .field("backend", &self.backend)
            .field("base_url", &shown_url(&self.base_url))
            .field("api_key", &self.api_key)
            .field("model", &self.model)
            .field("model_path", &self.model_path)
            .field("threads", &self.threads)
            .field("max_tokens", &self.max_tokens)
            .field("max_fixes", &self.max_fixes)
            .finish_non_exhaustive()
    }
}

/// A server address as printed: without credentials or query.
pub fn shown_url(url: &str) -> String {
    if url.trim().is_empty() {
        String::new()
    } else {
        super::openai::display_url(url.trim())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_defaults_pass() {
        assert_eq!(LlmConfig::default().validate(), Ok(()));
    }

    #[test]
    fn bad_values_are_refused_by_name() {
        type Change = fn(&mut LlmConfig);
        let cases: [(Change, Result<(), &str>); 13] = [
            (
                |c| c.threads = 0,
                Err("invalid setting `llm.threads`: must be more than 0"),
            ),
            (
                |c| c.context_tokens = 0,
                Err("invalid setting `llm.context_tokens`: must be more than 0"),
            ),
            (
                |c| c.max_tokens = 0,
                Err("invalid setting `llm.max_tokens`: must be more than 0"),
            ),
            (
                |c| c.timeout_secs = 0,
                Err("invalid setting `llm.timeout_secs`: must be more than 0"),
            ),
            (
                |c| c.answer_timeout_secs = 0,
                Err("invalid setting `llm.answer_timeout_secs`: must be more than 0"),
            ),
            (|c| c.max_fixes = 0, Ok(())),
            (|c| c.max_fixes = 10, Ok(())),
            (
                |c| c.max_fixes = 11,
                Err("invalid setting `llm.max_fixes`: must be at most 10"),
            ),
            (
                |c| c.backend = LlmBackend::Openai,
                Err(
                    "invalid setting `llm.base_url`: the openai backend needs a server address (OPENAI_BASE_URL)",
                ),
            ),
            (
                |c| c.api_key = REDACTED.into(),
                Err(
                    "invalid setting `llm.api_key`: is the placeholder `runcell config` prints; put the real key here",
                ),
            ),
            (
                |c| c.base_url = "127.0.0.1:8080".into(),
                Err(
                    "invalid setting `llm.base_url`: `127.0.0.1:8080` is not an http:// or https:// address",
                ),
            ),
            (|c| c.base_url = " http://127.0.0.1:8080/v1 ".into(), Ok(())),
            // A blank address is no address: the openai backend needs one.
            (
                |c| (c.backend, c.base_url) = (LlmBackend::Openai, "  ".into()),
                Err(
                    "invalid setting `llm.base_url`: the openai backend needs a server address (OPENAI_BASE_URL)",
                ),
            ),
        ];
        for (change, says) in cases {
            let mut config = LlmConfig::default();
            change(&mut config);
            let said = config.validate().map_err(|e| e.to_string());
            assert_eq!(said, says.map_err(String::from));
        }
    }

    #[test]
    fn an_error_names_its_setting() {
        let config = LlmConfig {
            base_url: "ftp://models.example".into(),
            ..LlmConfig::default()
        };
        let err = config.validate().unwrap_err();
        assert_eq!(err, LlmConfigError::NotHttp("ftp://models.example".into()));
        assert_eq!(err.setting(), "llm.base_url");
    }
}
