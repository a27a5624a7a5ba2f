//! The page's read port ([`SessionLogs`]) over the hub and its store.

use app::api::ports::{LogError, OwnedSession, SessionLogs};
use app::api::{SessionSummary, ShareLinkLog};
use async_trait::async_trait;

use super::{OwnerId, SessionHub, SessionId, ShareToken};
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
impl SessionLogs for SessionHub {
    async fn session(&self, viewer: &str, session_id: &str) -> Result<OwnedSession, LogError> {
        let id: SessionId = session_id.parse().map_err(|_| LogError::InvalidId)?;
        let owner: OwnerId = viewer.parse().map_err(|_| LogError::NotFound)?;
        let channel = self
            .open_owned(id, owner)
            .await
            .map_err(unavailable)?
            .ok_or(LogError::NotFound)?;
        let record = self.store().session(id).await.map_err(unavailable)?;
        let share = self.store().share_of(id).await.map_err(unavailable)?;
        Ok(OwnedSession {
            title: record.map(|r| r.title).unwrap_or_default(),
            events: channel.events_after(0),
            share_files: share.as_ref().is_some_and(|s| s.files),
            share_path: share.map(|s| s.token.path()),
        })
    }

    async fn sessions(&self, viewer: &str) -> Result<Vec<SessionSummary>, LogError> {
        let Ok(owner) = viewer.parse::<OwnerId>() else {
            return Ok(Vec::new());
        };
        Ok(self
            .store()
            .sessions_of(owner)
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

    async fn shared(&self, token: &str) -> Result<ShareLinkLog, LogError> {
        let token: ShareToken = token.parse().map_err(|_| LogError::NotFound)?;
        let (record, events) = self
            .shared_events(&token)
            .await
            .map_err(unavailable)?
            .ok_or(LogError::NotFound)?;
        Ok(ShareLinkLog {
            token: token.to_string(),
            title: record.title,
            events,
            files: Vec::new(),
        })
    }
}
