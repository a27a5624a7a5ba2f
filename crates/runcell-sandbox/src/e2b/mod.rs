//! The E2B backend: runcell's sandbox trait over E2B's sandboxes. A one-shot
//! run makes a sandbox, runs and kills it; a session is one sandbox, kept
//! alive (its timeout renewed) while the session lasts and killed when it
//! ends. Each language's default context keeps its state, as in E2B.

pub mod client;
pub mod protocol;

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use self::client::{Client, E2bSettings, Handle, Place, file_entry};
use self::protocol::EntryInfo;
use crate::files::{FileEntry, Files, confine, sandbox_path};
use crate::{
    Capabilities, Contexts, Language, RunEvent, RunOutcome, RunRequest, Sandbox, SandboxError,
    SandboxKind, SandboxSession, validate_code,
};

/// The languages E2B's code interpreter template runs that runcell knows.
const LANGUAGES: [Language; 6] = [
    Language::Python,
    Language::Javascript,
    Language::Typescript,
    Language::R,
    Language::Java,
    Language::Bash,
];

pub struct E2bSandbox {
    client: Arc<Client>,
}

impl std::fmt::Debug for E2bSandbox {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("E2bSandbox").finish_non_exhaustive()
    }
}

impl E2bSandbox {
    pub fn new(settings: E2bSettings) -> Result<Arc<Self>, SandboxError> {
        Ok(Arc::new(Self {
            client: Arc::new(Client::new(settings)?),
        }))
    }
}

fn check(request: &RunRequest) -> Result<(), SandboxError> {
    validate_code(&request.code)?;
    if !LANGUAGES.contains(&request.language) {
        return Err(SandboxError::InvalidInput(format!(
            "E2B's code interpreter does not run {}",
            request.language.name()
        )));
    }
    Ok(())
}

#[async_trait::async_trait]
impl Sandbox for E2bSandbox {
    fn capabilities(&self) -> Capabilities {
        Capabilities {
            backend: SandboxKind::E2b,
            languages: LANGUAGES.to_vec(),
            stateful: true,
            files: true,
            interrupt: true,
            one_shot: true,
            isolated_sessions: true,
            contexts: true,
        }
    }

    #[tracing::instrument(name = "run", skip_all, fields(sandbox.backend = SandboxKind::E2b.name(), language = request.language.name()))]
    async fn run(
        &self,
        request: RunRequest,
        events: Option<mpsc::Sender<RunEvent>>,
        cancel: CancellationToken,
    ) -> Result<RunOutcome, SandboxError> {
        check(&request)?;
        let handle = self.client.create().await?;
        let outcome = self
            .client
            .execute(
                &handle,
                &request.code,
                Place::Language(request.language.name()),
                &request.limits,
                events.as_ref(),
                &cancel,
            )
            .await;
        if let Err(e) = self.client.kill(&handle).await {
            tracing::warn!(%e, sandbox.id = %handle.id, "cannot kill an E2B sandbox");
        }
        outcome
    }

    async fn open_session(&self) -> Result<Box<dyn SandboxSession>, SandboxError> {
        let handle = self.client.create().await?;
        let alive = CancellationToken::new();
        // Renew the sandbox's timeout while the session lasts: a third of the
        // way through each period, so one lost call does not end it.
        let timeout = self.client.settings().sandbox_timeout;
        let every = (timeout / 3).max(Duration::from_secs(1));
        let (client, renewed, stop) = (Arc::clone(&self.client), handle.clone(), alive.clone());
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    () = stop.cancelled() => break,
                    () = tokio::time::sleep(every) => {
                        if let Err(e) = client.set_timeout(&renewed, timeout).await {
                            tracing::warn!(%e, sandbox.id = %renewed.id, "cannot keep an E2B sandbox alive");
                            if matches!(e, SandboxError::NotFound(_)) {
                                break;
                            }
                        }
                    }
                }
            }
        });
        Ok(Box::new(E2bSession {
            client: Arc::clone(&self.client),
            handle,
            alive,
        }))
    }
}

pub struct E2bSession {
    client: Arc<Client>,
    handle: Handle,
    /// Cancelled when the session ends: stops the keep-alive.
    alive: CancellationToken,
}

#[async_trait::async_trait]
impl SandboxSession for E2bSession {
    fn id(&self) -> &str {
        &self.handle.id
    }

    async fn run(
        &self,
        request: &RunRequest,
        events: Option<&mpsc::Sender<RunEvent>>,
        cancel: &CancellationToken,
    ) -> Result<RunOutcome, SandboxError> {
        check(request)?;
        self.client
            .execute(
                &self.handle,
                &request.code,
                Place::Language(request.language.name()),
                &request.limits,
                events,
                cancel,
            )
            .await
    }

    async fn close(&self) {
        self.alive.cancel();
        if let Err(e) = self.client.kill(&self.handle).await {
            tracing::warn!(%e, sandbox.id = %self.handle.id, "cannot kill an E2B sandbox");
        }
    }

    fn files(&self) -> Option<&dyn Files> {
        Some(self)
    }

    fn contexts(&self) -> Option<&dyn Contexts> {
        Some(self)
    }
}

#[async_trait::async_trait]
impl Contexts for E2bSession {
    async fn create_context(
        &self,
        language: Language,
        cwd: Option<&str>,
    ) -> Result<String, SandboxError> {
        self.client
            .create_context(&self.handle, language.name(), cwd)
            .await
    }

    async fn run_in_context(
        &self,
        context: &str,
        request: &RunRequest,
        events: Option<&mpsc::Sender<RunEvent>>,
        cancel: &CancellationToken,
    ) -> Result<RunOutcome, SandboxError> {
        check(request)?;
        self.client
            .execute(
                &self.handle,
                &request.code,
                Place::Context(context),
                &request.limits,
                events,
                cancel,
            )
            .await
    }

    async fn restart_context(&self, context: &str) -> Result<(), SandboxError> {
        self.client.restart_context(&self.handle, context).await
    }

    async fn delete_context(&self, context: &str) -> Result<(), SandboxError> {
        self.client.delete_context(&self.handle, context).await
    }
}

/// The largest file read back from E2B.
const MAX_DOWNLOAD: u64 = 256 * 1024 * 1024;

/// Files in the E2B sandbox, confined to `/home/user` as the jail's are.
#[async_trait::async_trait]
impl Files for E2bSession {
    async fn write(
        &self,
        path: &str,
        bytes: crate::files::Contents,
    ) -> Result<FileEntry, SandboxError> {
        let path = sandbox_path(&confine(path)?);
        self.client.upload(&self.handle, &path, bytes).await?;
        self.stat(&path).await
    }

    async fn read(&self, path: &str) -> Result<Vec<u8>, SandboxError> {
        let path = sandbox_path(&confine(path)?);
        self.client
            .download(&self.handle, &path, MAX_DOWNLOAD)
            .await
    }

    async fn list(&self, path: &str, depth: u32) -> Result<Vec<FileEntry>, SandboxError> {
        let path = sandbox_path(&confine(path)?);
        let answer = self
            .client
            .connect_unary(
                &self.handle,
                "filesystem.Filesystem/ListDir",
                &serde_json::json!({"path": path, "depth": depth.max(1)}),
            )
            .await?;
        let entries: Vec<EntryInfo> = answer
            .get("entries")
            .cloned()
            .map(serde_json::from_value)
            .transpose()
            .map_err(|e| {
                SandboxError::Unavailable(format!("E2B's listing is not understood: {e}"))
            })?
            .unwrap_or_default();
        let mut entries: Vec<FileEntry> = entries.into_iter().map(file_entry).collect();
        entries.sort_by(|a, b| a.path.cmp(&b.path));
        Ok(entries)
    }

    async fn stat(&self, path: &str) -> Result<FileEntry, SandboxError> {
        let path = sandbox_path(&confine(path)?);
        let answer = self
            .client
            .connect_unary(
                &self.handle,
                "filesystem.Filesystem/Stat",
                &serde_json::json!({"path": path}),
            )
            .await?;
        let entry: EntryInfo = answer
            .get("entry")
            .cloned()
            .map(serde_json::from_value)
            .transpose()
            .map_err(|e| SandboxError::Unavailable(format!("E2B's entry is not understood: {e}")))?
            .ok_or_else(|| SandboxError::NotFound(format!("'{path}' does not exist")))?;
        Ok(file_entry(entry))
    }

    async fn make_dir(&self, path: &str) -> Result<bool, SandboxError> {
        let path = sandbox_path(&confine(path)?);
        match self
            .client
            .connect_unary(
                &self.handle,
                "filesystem.Filesystem/MakeDir",
                &serde_json::json!({"path": path}),
            )
            .await
        {
            Ok(_) => Ok(true),
            Err(SandboxError::InvalidInput(m)) if m.starts_with("exists already") => Ok(false),
            Err(e) => Err(e),
        }
    }

    async fn remove(&self, path: &str) -> Result<(), SandboxError> {
        let relative = confine(path)?;
        if relative.as_os_str().is_empty() {
            return Err(SandboxError::InvalidInput(
                "/home/user itself cannot be removed".into(),
            ));
        }
        self.client
            .connect_unary(
                &self.handle,
                "filesystem.Filesystem/Remove",
                &serde_json::json!({"path": sandbox_path(&relative)}),
            )
            .await
            .map(drop)
    }
}
