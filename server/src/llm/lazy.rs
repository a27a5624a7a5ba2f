//! A backend that becomes ready later: the embedded model takes seconds to
//! load, and the server should answer pages meanwhile. Requests wait for the
//! load; a failed load is reported on every request, so the person sees why
//! and how to fix it.

use std::sync::Arc;

use tokio::sync::OnceCell;

use super::{Capabilities, ChatRequest, ChatStream, Llm, LlmError, ModelInfo};

type Loaded = Result<Arc<dyn Llm>, LlmError>;

pub struct Lazy {
    backend: &'static str,
    capabilities: Capabilities,
    cell: Arc<OnceCell<Loaded>>,
    loader: tokio::sync::Mutex<Option<tokio::task::JoinHandle<Loaded>>>,
}

impl Lazy {
    /// Starts `load` on a blocking thread at once.
    pub fn spawn<F>(backend: &'static str, capabilities: Capabilities, load: F) -> Self
    where
        F: FnOnce() -> Loaded + Send + 'static,
    {
        Self {
            backend,
            capabilities,
            cell: Arc::new(OnceCell::new()),
            loader: tokio::sync::Mutex::new(Some(tokio::task::spawn_blocking(load))),
        }
    }

    /// The loaded backend, waiting for the load if it is still going.
    pub async fn get(&self) -> Result<Arc<dyn Llm>, LlmError> {
        let loaded = self
            .cell
            .get_or_init(|| async {
                // The handle stays in place while it is awaited, so a waiter
                // that is cancelled leaves it for the next one.
                let mut guard = self.loader.lock().await;
                match guard.as_mut() {
                    Some(handle) => match handle.await {
                        Ok(loaded) => {
                            if let Err(e) = &loaded {
                                tracing::error!(backend = self.backend, error = %e, "model not loaded");
                            }
                            loaded
                        }
                        Err(e) => Err(LlmError::Backend(format!("the model loader died: {e}"))),
                    },
                    None => Err(LlmError::Backend("the model loader was lost".into())),
                }
            })
            .await;
        loaded.clone()
    }
}

#[async_trait::async_trait]
impl Llm for Lazy {
    fn backend(&self) -> &'static str {
        self.backend
    }

    fn capabilities(&self) -> Capabilities {
        self.capabilities
    }

    async fn models(&self) -> Result<Vec<ModelInfo>, LlmError> {
        self.get().await?.models().await
    }

    async fn chat(&self, request: ChatRequest) -> Result<ChatStream, LlmError> {
        self.get().await?.chat(request).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::llm::scripted::ScriptedLlm;

    const CAPS: Capabilities = Capabilities {
        tools: true,
        structured_output: false,
        streaming: true,
    };

    #[tokio::test]
    async fn requests_wait_for_the_load() {
        let lazy = Lazy::spawn("scripted", CAPS, || {
            std::thread::sleep(std::time::Duration::from_millis(50));
            Ok(Arc::new(ScriptedLlm::default()) as Arc<dyn Llm>)
        });
        let models = lazy.models().await.map(|m| m.len());
        assert_eq!(models, Ok(1));
    }

    #[tokio::test]
    async fn a_waiter_cancelled_mid_load_does_not_lose_the_model() {
        let lazy = Lazy::spawn("scripted", CAPS, || {
            std::thread::sleep(std::time::Duration::from_millis(200));
            Ok(Arc::new(ScriptedLlm::default()) as Arc<dyn Llm>)
        });
        let early = tokio::time::timeout(std::time::Duration::from_millis(20), lazy.get()).await;
        assert!(early.is_err(), "the load cannot be done yet");
        assert!(lazy.get().await.is_ok());
    }

    #[tokio::test]
    async fn a_failed_load_is_reported_every_time() {
        let lazy = Lazy::spawn("embedded", CAPS, || {
            Err(LlmError::ModelFile {
                path: "m.gguf".into(),
                detail: "missing".into(),
                hint: "fetch it".into(),
            })
        });
        for _ in 0..2 {
            let err = lazy.chat(ChatRequest::default()).await.err();
            assert!(matches!(err, Some(LlmError::ModelFile { .. })), "{err:?}");
        }
    }
}
