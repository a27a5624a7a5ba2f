//! runcell's engine in this process (`--embedded`): the configuration
//! `runcell serve` would use (the embedded model, the local jail, SQLite in
//! the data directory), without HTTP. The notebook service is called
//! directly; its sessions are those of the data directory, owned by this
//! client's owner id for that directory.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use app::protocol::ServerMessage;
use async_trait::async_trait;
use futures::StreamExt;
use parking_lot::Mutex;
use tokio_util::sync::CancellationToken;

use super::engine::{Backend, ClientError, FileSummary, Frame, TurnStream, Uploaded};
use super::identity::Identities;
use runcell_agent::notebook::remote::Failure;
use runcell_agent::notebook::{AskedTurn, NotebookError, Notebooks, parse_session_id};
use runcell_agent::session::SessionChannel;
use runcell_protocol::OwnerId;
use runcell_server::config::Config;
use runcell_server::http::error::ApiError;
use runcell_server::server::Engine;

pub struct InProcess {
    core: Mutex<Option<Engine>>,
    notebooks: Arc<Notebooks>,
    owner: OwnerId,
    data_dir: PathBuf,
    upload_limit: usize,
}

impl InProcess {
    /// Starts the engine on `config`'s data directory.
    pub async fn start(config: Config, identities: &Identities) -> Result<Self, ClientError> {
        let data_dir = std::fs::create_dir_all(&config.data_dir)
            .and_then(|()| config.data_dir.canonicalize())
            .map_err(|e| {
                ClientError::Local(format!(
                    "cannot use the data directory {}: {e}",
                    config.data_dir.display()
                ))
            })?;
        let place = place_of(&data_dir);
        let owner = match identities.owner(&place) {
            Some(owner) => owner,
            None => {
                let owner = OwnerId::random();
                identities.remember(&place, owner)?;
                owner
            }
        };
        let upload_limit = config.sandbox.upload_bytes();
        let core = Engine::start(config, CancellationToken::new())
            .await
            .map_err(|e| ClientError::Local(e.to_string()))?;
        Ok(Self {
            notebooks: Arc::clone(&core.state.notebooks),
            core: Mutex::new(Some(core)),
            owner,
            data_dir,
            upload_limit,
        })
    }

    async fn channel(&self, id: &str) -> Result<Arc<SessionChannel>, ClientError> {
        let id = parse_session_id(id).map_err(refusal)?;
        self.notebooks
            .open_owned(self.owner, id)
            .await
            .map_err(refusal)
    }

    async fn follow(&self, id: &str, turn: AskedTurn) -> Result<TurnStream, ClientError> {
        let channel = self.channel(id).await?;
        let events = self
            .notebooks
            .start_followed(channel, turn)
            .await
            .map_err(|e| refusal(e.into()))?;
        Ok(events
            .map(|event| {
                let line = serde_json::to_string(&ServerMessage::Event(event.clone()))
                    .map_err(|e| ClientError::Protocol(e.to_string()))?;
                Ok(Frame { line, event })
            })
            .boxed())
    }
}

/// Where the owner id of a data directory is kept among the client's.
fn place_of(data_dir: &Path) -> String {
    format!("embedded:{}", data_dir.display())
}

/// A notebook error as the HTTP API would answer it: read as another
/// node's answer is, by `Failure::of`, with the status the HTTP layer
/// gives that kind of failure.
#[expect(
    clippy::needless_pass_by_value,
    reason = "taken by value to be `map_err(refusal)`"
)]
fn refusal(error: NotebookError) -> ClientError {
    let failure = Failure::of(&error);
    let status = ApiError::from(NotebookError::Remote(failure.clone())).status();
    ClientError::Refused {
        status: status.as_u16(),
        code: String::new(),
        message: failure.message,
    }
}

#[async_trait]
impl Backend for InProcess {
    fn describe(&self) -> String {
        format!("this process (data in {})", self.data_dir.display())
    }

    async fn default_model(&self) -> Option<String> {
        let core = self.core.lock();
        core.as_ref()
            .map(|core| core.state.models.choices().default_model)
    }

    async fn new_session(&self) -> Result<String, ClientError> {
        let channel = self.notebooks.create(self.owner).await.map_err(refusal)?;
        Ok(channel.id().to_string())
    }

    async fn check_session(&self, id: &str) -> Result<(), ClientError> {
        self.channel(id).await.map(|_| ())
    }

    async fn ask(
        &self,
        id: &str,
        text: &str,
        model: Option<&str>,
    ) -> Result<TurnStream, ClientError> {
        let turn = AskedTurn::Ask {
            text: text.to_string(),
            model: model.map(str::to_string),
            backend: None,
            alternative_to: None,
        };
        self.follow(id, turn).await
    }

    async fn rerun(&self, id: &str) -> Result<TurnStream, ClientError> {
        self.follow(id, AskedTurn::RerunAll).await
    }

    async fn stop(&self, id: &str) -> Result<(), ClientError> {
        let channel = self.channel(id).await?;
        self.notebooks.stop(&channel);
        Ok(())
    }

    async fn upload(
        &self,
        id: &str,
        name: &str,
        bytes: Vec<u8>,
        replace: bool,
    ) -> Result<Uploaded, ClientError> {
        if bytes.len() > self.upload_limit {
            return Err(ClientError::Refused {
                status: 413,
                code: String::new(),
                message: format!("the file is over the {} byte limit", self.upload_limit),
            });
        }
        let channel = self.channel(id).await?;
        match self
            .notebooks
            .upload(&channel, name, bytes.into(), replace)
            .await
        {
            Ok(entry) => Ok(Uploaded::Written(FileSummary {
                path: entry.path,
                name: entry.name,
                size: entry.size,
                kind: "file".into(),
            })),
            Err(NotebookError::Files(runcell_agent::agent::FilesError::Exists(_))) => {
                Ok(Uploaded::Exists)
            }
            Err(e) => Err(refusal(e)),
        }
    }

    async fn files(&self, id: &str) -> Result<Vec<FileSummary>, ClientError> {
        let channel = self.channel(id).await?;
        let files = self.notebooks.list_files(&channel).await.map_err(refusal)?;
        Ok(files
            .into_iter()
            .map(|entry| FileSummary {
                path: entry.path,
                name: entry.name,
                size: entry.size,
                kind: serde_json::to_value(entry.kind)
                    .ok()
                    .and_then(|v| v.as_str().map(str::to_string))
                    .unwrap_or_default(),
            })
            .collect())
    }

    async fn download(&self, id: &str, path: &str) -> Result<Vec<u8>, ClientError> {
        let channel = self.channel(id).await?;
        let (_, bytes) = self
            .notebooks
            .read_file(&channel, path)
            .await
            .map_err(refusal)?;
        Ok(bytes)
    }

    async fn share(&self, id: &str) -> Result<String, ClientError> {
        let channel = self.channel(id).await?;
        let link = self
            .notebooks
            .share(&channel, false)
            .await
            .map_err(refusal)?;
        Ok(format!(
            "{} (it opens on a server serving this data directory: runcell serve --data-dir {})",
            link.token.path(),
            self.data_dir.display()
        ))
    }

    fn page(&self, _id: &str) -> Option<String> {
        None
    }

    async fn close(&self) {
        let core = self.core.lock().take();
        if let Some(core) = core {
            core.stop().await;
        }
    }
}
