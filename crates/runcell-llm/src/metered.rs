//! Any backend, measured: requests, time to first token, duration and token
//! counts go to the metrics (`runcell_llm_*`).

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use futures::Stream;

use super::{Capabilities, ChatRequest, ChatStream, Llm, LlmError, LlmEvent, ModelInfo};

pub struct Metered(pub Arc<dyn Llm>);

tokio::task_local! {
    /// The model's time spent on the task's behalf, in milliseconds: set by
    /// [`model_time_of`] around a piece of work (a notebook turn) that is
    /// accounted to someone.
    static MODEL_TIME: Arc<std::sync::atomic::AtomicU64>;
}

/// Runs `work`, and what the model's streams opened within it took (from
/// the request to the stream's end or drop), in milliseconds.
pub async fn model_time_of<F: Future>(work: F) -> (F::Output, u64) {
    let spent = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let output = MODEL_TIME.scope(Arc::clone(&spent), work).await;
    (output, spent.load(std::sync::atomic::Ordering::Relaxed))
}

#[async_trait::async_trait]
impl Llm for Metered {
    fn backend(&self) -> &'static str {
        self.0.backend()
    }

    fn capabilities(&self) -> Capabilities {
        self.0.capabilities()
    }

    async fn models(&self) -> Result<Vec<ModelInfo>, LlmError> {
        self.0.models().await
    }

    async fn chat(&self, request: ChatRequest) -> Result<ChatStream, LlmError> {
        let started = Instant::now();
        let backend = self.0.backend();
        match self.0.chat(request).await {
            Ok(inner) => Ok(Box::pin(MeteredStream {
                inner,
                backend,
                started,
                first_token: None,
                pieces: 0,
                usage: None,
                outcome: None,
            })),
            Err(err) => {
                runcell_core::metrics::llm_finished(
                    backend,
                    "error",
                    started.elapsed(),
                    None,
                    runcell_core::metrics::Tokens::default(),
                );
                Err(err)
            }
        }
    }

    async fn prefill(&self, request: ChatRequest) -> Result<(), LlmError> {
        self.0.prefill(request).await
    }
}

struct MeteredStream {
    inner: ChatStream,
    backend: &'static str,
    started: Instant,
    first_token: Option<Duration>,
    /// Deltas seen: the completion's token count when the backend reports none.
    pieces: u64,
    usage: Option<super::Usage>,
    outcome: Option<&'static str>,
}

impl Stream for MeteredStream {
    type Item = Result<LlmEvent, LlmError>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let item = self.inner.as_mut().poll_next(cx);
        if let Poll::Ready(item) = &item {
            match item {
                Some(Ok(LlmEvent::Text(_) | LlmEvent::ToolCallDelta { .. })) => {
                    if self.first_token.is_none() {
                        self.first_token = Some(self.started.elapsed());
                    }
                    self.pieces += 1;
                }
                Some(Ok(LlmEvent::Done(completion))) => {
                    self.usage = completion.usage;
                    self.outcome = Some("ok");
                }
                Some(Err(_)) => self.outcome = Some("error"),
                None => {}
            }
        }
        item
    }
}

impl Drop for MeteredStream {
    fn drop(&mut self) {
        let (prompt, completion, reused) = match self.usage {
            Some(usage) => (
                u64::from(usage.prompt_tokens),
                u64::from(usage.completion_tokens),
                u64::from(usage.cached_tokens.min(usage.prompt_tokens)),
            ),
            None => (0, self.pieces, 0),
        };
        let took = u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX);
        // Outside an accounted piece of work (a bench, a probe): nobody's.
        let _ = MODEL_TIME.try_with(|spent| {
            spent.fetch_add(took, std::sync::atomic::Ordering::Relaxed);
        });
        runcell_core::metrics::llm_finished(
            self.backend,
            // Dropped before its end: stopped by the reader.
            self.outcome.unwrap_or("cancelled"),
            self.started.elapsed(),
            self.first_token,
            runcell_core::metrics::Tokens {
                prompt,
                reused,
                completion,
            },
        );
    }
}
