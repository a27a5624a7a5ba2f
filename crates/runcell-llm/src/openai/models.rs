//! Which model answers: the server's list (read at most once a minute), the
//! configured default, and the names a server does not serve refused.

use std::time::Duration;

use serde_json::Value;

use super::error::{self, is_retryable};
use super::{Failure, OpenAiClient};
use crate::{ChatRequest, Llm, LlmError, ModelInfo};

/// How long a read model list is trusted.
const MODEL_LIST_TTL: Duration = Duration::from_secs(60);

impl OpenAiClient {
    pub(super) async fn list_models(&self) -> Result<Vec<ModelInfo>, Failure> {
        let url = format!("{}/models", self.base);
        let response = self.send(self.authorized(self.http.get(&url))).await?;
        let status = response.status();
        if !status.is_success() {
            let retry_after = error::retry_after(response.headers());
            let body = self.error_body(response).await;
            let err = if status.as_u16() == 404 {
                LlmError::BadRequest {
                    status: 404,
                    message: format!(
                        "{}/models does not exist; does the base URL end in /v1?",
                        self.shown_url
                    ),
                }
            } else {
                error::from_status(status.as_u16(), &body, retry_after, "")
            };
            let err = self.redact(err);
            return Err(if is_retryable(&err) {
                Failure::Retry(err, retry_after)
            } else {
                Failure::Fatal(err)
            });
        }
        let body = tokio::time::timeout(self.config.request_timeout, response.bytes())
            .await
            .map_err(|_| Failure::Retry(LlmError::Timeout(self.config.request_timeout), None))?
            .map_err(|e| Failure::Retry(self.transport(&e), None))?;
        let value: Value = serde_json::from_slice(&body).map_err(|e| {
            Failure::Fatal(LlmError::MalformedStream(format!(
                "the model list is not JSON: {e}"
            )))
        })?;
        Ok(parse_models(&value))
    }

    /// The request's model, the configured one, or the first listed.
    pub(super) async fn model_for(&self, request: &ChatRequest) -> Result<String, LlmError> {
        if let Some(model) = request.model.as_ref().filter(|m| !m.is_empty()) {
            if self.config.model.as_ref() != Some(model) {
                self.check_listed(model).await?;
            }
            return Ok(model.clone());
        }
        if let Some(model) = self.config.model.as_ref().filter(|m| !m.is_empty()) {
            return Ok(model.clone());
        }
        self.listed_ids()
            .await?
            .into_iter()
            .next()
            .ok_or_else(|| LlmError::ModelNotFound {
                model: String::new(),
                message: "no model is configured and the server lists none".to_owned(),
            })
    }

    /// The ids the server lists, read at most once per [`MODEL_LIST_TTL`].
    async fn listed_ids(&self) -> Result<Vec<String>, LlmError> {
        let cached = self
            .known_models
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
            .filter(|(read, _)| read.elapsed() < MODEL_LIST_TTL)
            .map(|(_, ids)| ids);
        if let Some(ids) = cached {
            return Ok(ids);
        }
        let ids: Vec<String> = self.models().await?.into_iter().map(|m| m.id).collect();
        *self.known_models.lock().unwrap_or_else(|p| p.into_inner()) =
            Some((std::time::Instant::now(), ids.clone()));
        Ok(ids)
    }

    /// Refuses a model the server does not list. A list that cannot be read
    /// (some servers have no `/models`) or is empty lets every name through;
    /// Ollama's `name` for `name:latest` passes.
    async fn check_listed(&self, model: &str) -> Result<(), LlmError> {
        let ids = match self.listed_ids().await {
            Ok(ids) => ids,
            // The server is not there: say so now rather than retry it.
            Err(
                e @ (LlmError::Unreachable { .. } | LlmError::Timeout(_) | LlmError::Auth { .. }),
            ) => {
                return Err(e);
            }
            Err(e) => {
                tracing::debug!(error = %e, "cannot list models; not checking the name");
                return Ok(());
            }
        };
        let served = ids.is_empty()
            || ids
                .iter()
                .any(|id| id == model || id.strip_suffix(":latest") == Some(model));
        if served {
            return Ok(());
        }
        let mut listed: Vec<&str> = ids.iter().map(String::as_str).take(10).collect();
        if ids.len() > listed.len() {
            listed.push("...");
        }
        Err(LlmError::ModelNotFound {
            model: model.chars().take(100).collect(),
            message: format!("the server lists {}", listed.join(", ")),
        })
    }
}

/// Models from `{"data":[{"id","owned_by"}]}` (OpenAI, vLLM, llama.cpp,
/// Ollama's `/v1`), `{"models":[{"name"|"model"}]}` (Ollama's and
/// llama-server's native lists) or a bare array.
pub(super) fn parse_models(value: &Value) -> Vec<ModelInfo> {
    let lists = [value.get("data"), value.get("models"), Some(value)];
    let mut models: Vec<ModelInfo> = Vec::new();
    for item in lists
        .into_iter()
        .flatten()
        .filter_map(Value::as_array)
        .flatten()
    {
        let id = match item {
            Value::String(s) => Some(s.as_str()),
            _ => ["id", "model", "name"]
                .iter()
                .find_map(|k| item.get(k).and_then(Value::as_str)),
        };
        let Some(id) = id.filter(|id| !id.is_empty()) else {
            continue;
        };
        if models.iter().any(|m| m.id == id) {
            continue;
        }
        models.push(ModelInfo {
            id: id.to_owned(),
            owned_by: item
                .get("owned_by")
                .and_then(Value::as_str)
                .map(str::to_owned),
        });
    }
    models
}
