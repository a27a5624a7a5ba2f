//! The models a person can pick from, read from the backend in the
//! background so that rendering a page never waits on a model server.

use std::sync::Arc;
use std::time::Duration;

use parking_lot::RwLock;
use runcell_protocol::page::ModelChoices;
use tokio_util::sync::CancellationToken;

use super::Llm;

/// How often the list is read again.
const REFRESH: Duration = Duration::from_secs(30);

pub struct Catalog {
    llm: Arc<dyn Llm>,
    /// The configured model; empty: the backend's first.
    configured: String,
    choices: RwLock<ModelChoices>,
}

impl Catalog {
    pub fn new(llm: Arc<dyn Llm>, configured: String) -> Arc<Self> {
        let choices = ModelChoices {
            backend: llm.backend().into(),
            default_model: if configured.is_empty() {
                "default".into()
            } else {
                configured.clone()
            },
            models: Vec::new(),
            problem: None,
        };
        Arc::new(Self {
            llm,
            configured,
            choices: RwLock::new(choices),
        })
    }

    /// Reads the list now.
    pub async fn refresh(&self) {
        let mut next = self.choices.read().clone();
        match self.llm.models().await {
            Ok(models) => {
                next.models = models.into_iter().map(|m| m.id).collect();
                if let Some(first) = next.models.first().filter(|_| self.configured.is_empty()) {
                    next.default_model.clone_from(first);
                }
                next.problem = None;
            }
            Err(e) => {
                tracing::warn!(code = e.code(), error = %e, "cannot list models");
                next.problem = Some(e.to_string());
            }
        }
        *self.choices.write() = next;
    }

    /// Refreshes now and then every [`REFRESH`] until `stop`.
    pub fn keep_fresh(self: &Arc<Self>, stop: CancellationToken) {
        let catalog = Arc::clone(self);
        tokio::spawn(async move {
            loop {
                catalog.refresh().await;
                tokio::select! {
                    () = stop.cancelled() => break,
                    () = tokio::time::sleep(REFRESH) => {}
                }
            }
        });
    }
}

impl Catalog {
    /// The models on offer, as last read from the backend.
    pub fn choices(&self) -> ModelChoices {
        self.choices.read().clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scripted::ScriptedLlm;

    #[tokio::test]
    async fn the_list_comes_from_the_backend() {
        let catalog = Catalog::new(Arc::new(ScriptedLlm::default()), String::new());
        assert_eq!(catalog.choices().default_model, "default");
        catalog.refresh().await;
        let choices = catalog.choices();
        assert_eq!(choices.backend, "scripted");
        assert_eq!(choices.models, vec!["scripted".to_string()]);
        assert_eq!(choices.default_model, "scripted");
        assert_eq!(choices.problem, None);
    }
}
