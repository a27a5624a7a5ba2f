//! The page's ports (`app::api::ports`), which its server functions call:
//! each answered by the notebook service.

use app::api::ports::{LogError, OwnedSession, SandboxChoices, SessionLogs, ShareLinkFiles};
use app::api::{FileItem, SessionSummary, ShareLinkLog};
use app::protocol::SandboxKind;
use async_trait::async_trait;

use super::Notebooks;
use crate::session::{OwnerId, SessionId, ShareToken};
use crate::store::StoreError;

#[expect(
    clippy::needless_pass_by_value,
    reason = "used as map_err(unavailable)"
)]
fn unavailable(err: StoreError) -> LogError {
    tracing::error!(%err, "reading the session store failed");
    LogError::Unavailable
}

#[async_trait]
impl SessionLogs for Notebooks {
    async fn session(&self, viewer: OwnerId, id: SessionId) -> Result<OwnedSession, LogError> {
        let channel = self
            .hub
            .open_owned(id, viewer)
            .await
            .map_err(unavailable)?
            .ok_or(LogError::NotFound)?;
        let record = self.store().session(id).await.map_err(unavailable)?;
        let share = self.store().share_of(id).await.map_err(unavailable)?;
        Ok(OwnedSession {
            title: record.map(|r| r.title).unwrap_or_default(),
            events: super::figures::by_address(
                channel.log().events_after(0),
                &format!("/sessions/{id}/figures"),
            ),
            share_files: share.as_ref().is_some_and(|s| s.files),
            share_path: share.map(|s| s.token.path()),
        })
    }

    async fn sessions(&self, viewer: OwnerId) -> Result<Vec<SessionSummary>, LogError> {
        Ok(self
            .store()
            .sessions_of(viewer)
            .await
            .map_err(unavailable)?
            .into_iter()
            .map(|s| SessionSummary {
                id: s.id.to_string(),
                title: s.title,
                updated_ms: s.updated_ms,
            })
            .collect())
    }

    async fn shared(&self, token: &ShareToken) -> Result<ShareLinkLog, LogError> {
        let (record, events) = self
            .hub
            .shared_events(token)
            .await
            .map_err(unavailable)?
            .ok_or(LogError::NotFound)?;
        let events = super::figures::by_address(events, &format!("/s/{token}/figures"));
        let (events, cut) = super::sharing::page_part(events, super::sharing::SHARE_PAGE_BYTES);
        Ok(ShareLinkLog {
            token: token.to_string(),
            title: record.title,
            events,
            files: Vec::new(),
            cut,
        })
    }
}

impl SandboxChoices for Notebooks {
    fn backends(&self) -> Vec<SandboxKind> {
        self.kernels().backends()
    }

    fn chosen(&self, id: SessionId) -> Option<SandboxKind> {
        Some(self.kernels().chosen(id))
    }

    fn pyodide_url(&self) -> Option<String> {
        self.pyodide_url.clone()
    }
}

#[async_trait]
impl ShareLinkFiles for Notebooks {
    async fn files(&self, token: &ShareToken) -> Vec<FileItem> {
        self.shared_files(token)
            .await
            .into_iter()
            .map(|entry| FileItem {
                path: entry.path,
                name: entry.name,
                kind: "file".into(),
                size: entry.size,
                modified_ms: entry.modified_ms,
            })
            .collect()
    }
}
