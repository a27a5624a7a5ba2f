//! Every GGUF file in the models folder, one loaded at a time.
//!
//! The picker lists each `.gguf` under `<data-dir>/models/` (and the
//! configured file, wherever it is) by its stem. A request that names
//! another file than the loaded one waits while the old weights are dropped
//! (their worker finishes its queued jobs first) and the new ones load.
//! The default file starts loading when the server starts; others load on
//! first use. A request's `model` is only ever compared with the names
//! found on disk: it never becomes part of a path.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use tokio::sync::Mutex;
use tokio::task::JoinHandle;

use super::{CAPABILITIES, EmbeddedConfig, EmbeddedModel, model_file_error};
use runcell_llm::{Capabilities, ChatRequest, ChatStream, Llm, LlmError, ModelInfo};

/// What is in memory.
enum Slot {
    Empty,
    Loading {
        path: PathBuf,
        handle: JoinHandle<Result<EmbeddedModel, LlmError>>,
    },
    Ready {
        path: PathBuf,
        model: EmbeddedModel,
    },
}

pub(crate) struct Shelf {
    /// `<data-dir>/models`.
    dir: PathBuf,
    /// The file a request that names no model (or `embedded`) gets; its
    /// threads and limits apply to every file.
    default: EmbeddedConfig,
    slot: Mutex<Slot>,
}

impl std::fmt::Debug for Shelf {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Shelf")
            .field("dir", &self.dir)
            .field("default", &self.default.path)
            .finish_non_exhaustive()
    }
}

/// The id a file is listed under: its stem.
fn id_of(path: &Path) -> String {
    path.file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default()
}

impl Shelf {
    /// Nothing is loaded until [`Self::preload`] or the first request.
    pub(crate) fn new(dir: PathBuf, default: EmbeddedConfig) -> Arc<Self> {
        Arc::new(Self {
            dir,
            default,
            slot: Mutex::new(Slot::Empty),
        })
    }

    /// Starts loading the default file in the background.
    pub(crate) fn preload(self: &Arc<Self>) {
        let shelf = Arc::clone(self);
        tokio::spawn(async move {
            // A failure is logged here and reported to each request.
            if let Err(e) = shelf.get(&shelf.default.path).await {
                tracing::error!(error = %e, "the default model did not load");
            }
        });
    }

    /// The files on offer: the default first (when it exists), then every
    /// other `.gguf` in the folder, by name.
    fn files(&self) -> Vec<PathBuf> {
        let mut found: Vec<PathBuf> = std::fs::read_dir(&self.dir)
            .into_iter()
            .flatten()
            .filter_map(Result::ok)
            .map(|entry| entry.path())
            .filter(|p| p.extension().is_some_and(|e| e == "gguf") && p.is_file())
            .filter(|p| *p != self.default.path)
            .collect();
        found.sort();
        if self.default.path.is_file() {
            found.insert(0, self.default.path.clone());
        }
        found
    }

    /// The file `model` names: `None` or `embedded` is the default; else a
    /// file's stem or file name.
    fn resolve(&self, model: Option<&str>) -> Result<PathBuf, LlmError> {
        let Some(model) = model.filter(|m| *m != "embedded" && !m.is_empty()) else {
            return Ok(self.default.path.clone());
        };
        if model == id_of(&self.default.path) {
            return Ok(self.default.path.clone());
        }
        let files = self.files();
        if let Some(path) = files
            .iter()
            .find(|p| id_of(p) == model || p.file_name().is_some_and(|n| n == model))
        {
            return Ok(path.clone());
        }
        let offered: Vec<String> = files.iter().map(|p| id_of(p)).collect();
        Err(LlmError::ModelNotFound {
            model: model.chars().take(100).collect(),
            message: format!(
                "the embedded backend has {} in {}",
                if offered.is_empty() {
                    "no model files".to_string()
                } else {
                    offered.join(", ")
                },
                self.dir.display()
            ),
        })
    }

    /// The model from `path`, loading it (and unloading any other) first.
    pub(crate) async fn get(&self, path: &Path) -> Result<EmbeddedModel, LlmError> {
        let mut slot = self.slot.lock().await;
        loop {
            match &mut *slot {
                Slot::Ready {
                    path: loaded,
                    model,
                } if loaded.as_path() == path => {
                    return Ok(model.clone());
                }
                Slot::Ready { .. } => {
                    let Slot::Ready { path: old, model } =
                        std::mem::replace(&mut *slot, Slot::Empty)
                    else {
                        continue;
                    };
                    tracing::info!(from = %old.display(), to = %path.display(), "switching the embedded model");
                    // Waits for the old worker's queued jobs: one model in memory.
                    tokio::task::spawn_blocking(move || model.unload())
                        .await
                        .map_err(|e| LlmError::Backend(format!("unloading the model: {e}")))?;
                }
                Slot::Loading {
                    path: loading,
                    handle,
                } => {
                    // The handle stays in the slot while it is awaited, so a
                    // waiter that is cancelled leaves it for the next one.
                    let loaded = handle.await;
                    let loading = std::mem::take(loading);
                    *slot = Slot::Empty;
                    match loaded {
                        Ok(Ok(model)) => {
                            *slot = Slot::Ready {
                                path: loading,
                                model,
                            };
                        }
                        Ok(Err(e)) if loading == path => return Err(e),
                        Ok(Err(_)) => {}
                        Err(e) => {
                            return Err(LlmError::Backend(format!("the model loader died: {e}")));
                        }
                    }
                }
                Slot::Empty => {
                    let config = EmbeddedConfig {
                        path: path.to_path_buf(),
                        ..self.default.clone()
                    };
                    if !config.path.is_file() {
                        return Err(model_file_error(&config.path, "no such file"));
                    }
                    tracing::info!(path = %config.path.display(), "loading the embedded model");
                    *slot = Slot::Loading {
                        path: path.to_path_buf(),
                        handle: tokio::task::spawn_blocking(move || EmbeddedModel::load(config)),
                    };
                }
            }
        }
    }
}

#[async_trait::async_trait]
impl Llm for Shelf {
    fn backend(&self) -> &'static str {
        "embedded"
    }

    fn capabilities(&self) -> Capabilities {
        CAPABILITIES
    }

    async fn models(&self) -> Result<Vec<ModelInfo>, LlmError> {
        let files = self.files();
        if files.is_empty() {
            return Err(model_file_error(&self.default.path, "no such file"));
        }
        Ok(files
            .iter()
            .map(|p| ModelInfo {
                id: id_of(p),
                owned_by: Some("embedded".into()),
            })
            .collect())
    }

    async fn chat(&self, mut request: ChatRequest) -> Result<ChatStream, LlmError> {
        let path = self.resolve(request.model.as_deref())?;
        let model = self.get(&path).await?;
        request.model = None;
        model.chat(request).await
    }

    async fn prefill(&self, mut request: ChatRequest) -> Result<(), LlmError> {
        let path = self.resolve(request.model.as_deref())?;
        let model = self.get(&path).await?;
        request.model = None;
        model.prefill(request).await
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use futures::StreamExt;

    use super::*;
    use crate::tests::test_model_path;
    use runcell_llm::Message;

    fn shelf_in(dir: &Path, default: &str) -> Arc<Shelf> {
        Shelf::new(
            dir.to_path_buf(),
            EmbeddedConfig {
                path: dir.join(default),
                ..EmbeddedConfig::default()
            },
        )
    }

    #[tokio::test]
    async fn every_gguf_in_the_folder_is_listed_the_default_first() {
        let dir = tempfile::tempdir().unwrap();
        for name in ["b.gguf", "a.gguf", "default.gguf", "notes.txt"] {
            std::fs::write(dir.path().join(name), b"x").unwrap();
        }
        std::fs::create_dir(dir.path().join("dir.gguf")).unwrap();
        let shelf = shelf_in(dir.path(), "default.gguf");
        let ids: Vec<String> = shelf
            .models()
            .await
            .unwrap()
            .into_iter()
            .map(|m| m.id)
            .collect();
        assert_eq!(ids, ["default", "a", "b"]);

        // Names resolve to files found there, and nothing else.
        let resolve = |m: Option<&str>| shelf.resolve(m).map(|p| id_of(&p));
        assert_eq!(resolve(None).unwrap(), "default");
        assert_eq!(resolve(Some("embedded")).unwrap(), "default");
        assert_eq!(resolve(Some("b")).unwrap(), "b");
        assert_eq!(resolve(Some("a.gguf")).unwrap(), "a");
        for bad in ["c", "../a", "notes", "dir"] {
            let err = resolve(Some(bad)).unwrap_err();
            assert_eq!(err.code(), "llm_model_not_found", "{bad}");
        }
    }

    #[tokio::test]
    async fn an_empty_folder_says_how_to_fetch_a_model() {
        let dir = tempfile::tempdir().unwrap();
        let shelf = shelf_in(dir.path(), "default.gguf");
        let err = shelf.models().await.unwrap_err();
        assert_eq!(err.code(), "llm_model_file");
        let err = shelf.chat(ChatRequest::default()).await.err().unwrap();
        assert_eq!(err.code(), "llm_model_file");
        assert!(err.to_string().contains("fetch-model.sh"), "{err}");
    }

    #[tokio::test]
    async fn a_bad_file_is_a_model_file_error_and_the_good_one_still_loads() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("broken.gguf"),
            b"GGUF\x03\x00\x00\x00garbage",
        )
        .unwrap();
        let shelf = shelf_in(dir.path(), "default.gguf");
        for _ in 0..2 {
            let request = ChatRequest {
                model: Some("broken".into()),
                messages: vec![Message::user("hi")],
                ..ChatRequest::default()
            };
            let err = shelf.chat(request).await.err().unwrap();
            assert_eq!(err.code(), "llm_model_file", "{err}");
        }
    }

    /// The real model under two names: a request for the other file unloads
    /// the first and loads the second; both answer.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_request_naming_another_file_switches_the_model() {
        let Some(model) = test_model_path() else {
            return;
        };
        let dir = tempfile::tempdir().unwrap();
        for name in ["one.gguf", "two.gguf"] {
            std::fs::hard_link(&model, dir.path().join(name))
                .or_else(|_| std::fs::copy(&model, dir.path().join(name)).map(|_| ()))
                .unwrap();
        }
        let shelf = shelf_in(dir.path(), "one.gguf");
        shelf.preload();
        for name in [None, Some("two"), Some("one"), Some("two")] {
            let request = ChatRequest {
                model: name.map(str::to_string),
                messages: vec![Message::user("Say OK.")],
                max_tokens: Some(3),
                ..ChatRequest::default()
            };
            let mut stream = shelf.chat(request).await.unwrap();
            let mut done = false;
            while let Some(event) = stream.next().await {
                done |= matches!(event.unwrap(), runcell_llm::LlmEvent::Done(_));
            }
            assert!(done);
            let slot = shelf.slot.lock().await;
            let Slot::Ready { model, .. } = &*slot else {
                panic!("nothing loaded")
            };
            assert_eq!(model.id(), name.unwrap_or("one"));
        }
    }
}
