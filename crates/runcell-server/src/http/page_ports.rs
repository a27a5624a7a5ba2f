//! The page's ports (`app::api::ports`), which its server functions call,
//! answered here by the notebook service and the model catalog: the domain
//! crates know nothing of the page's framework.

use std::sync::Arc;

use app::api::ports::{LogError, ModelCatalog, SandboxChoices, SessionPages, ShareLinkFiles};
use async_trait::async_trait;
use runcell_agent::notebook::Notebooks;
use runcell_llm::catalog::Catalog;
use runcell_protocol::SandboxKind;
use runcell_protocol::page::{FileItem, ModelChoices, SessionPage, SessionSummary, ShareLinkLog};
// Pages are sent their questions' and explanations' markup (the bundle
// renders no markdown).
use runcell_protocol::render::for_pages::marked;
use runcell_protocol::{OwnerId, SessionId, ShareToken};
use runcell_store::StoreError;

/// The notebook service, as the page's session, sandbox and share-link ports.
pub struct NotebookPorts(pub Arc<Notebooks>);

/// The model catalog, as the page's model port.
pub struct ModelPort(pub Arc<Catalog>);

#[expect(
    clippy::needless_pass_by_value,
    reason = "used as map_err(unavailable)"
)]
fn unavailable(err: StoreError) -> LogError {
    tracing::error!(%err, "reading the session store failed");
    LogError::Unavailable
}

#[async_trait]
impl SessionPages for NotebookPorts {
    async fn session(&self, viewer: OwnerId, id: SessionId) -> Result<SessionPage, LogError> {
        let mut page = self
            .0
            .session_page(viewer, id)
            .await
            .map_err(unavailable)?
            .ok_or(LogError::NotFound)?;
        page.events = marked(page.events);
        Ok(page)
    }

    async fn sessions(&self, viewer: OwnerId) -> Result<Vec<SessionSummary>, LogError> {
        self.0.session_list(viewer).await.map_err(unavailable)
    }

    async fn shared(&self, token: &ShareToken) -> Result<ShareLinkLog, LogError> {
        let mut page = self
            .0
            .share_link_page(token)
            .await
            .map_err(unavailable)?
            .ok_or(LogError::NotFound)?;
        page.events = marked(page.events);
        Ok(page)
    }
}

impl SandboxChoices for NotebookPorts {
    fn backends(&self) -> Vec<SandboxKind> {
        self.0.backends()
    }

    fn chosen(&self, id: SessionId) -> Option<SandboxKind> {
        Some(self.0.backend_of(id))
    }

    fn pyodide_url(&self) -> Option<String> {
        self.0.pyodide_url()
    }
}

#[async_trait]
impl ShareLinkFiles for NotebookPorts {
    async fn files(&self, token: &ShareToken) -> Vec<FileItem> {
        self.0.share_link_files(token).await
    }
}

impl ModelCatalog for ModelPort {
    fn choices(&self) -> ModelChoices {
        self.0.choices()
    }
}
