//! What the notebook's pages show: a session of its owner's, the owner's
//! list, a share link's session and files, and where programs may run. The
//! server crate answers the page's ports (`app::api::ports`) with these;
//! `Ok(None)` is "no such thing, or not the viewer's" (the two look the same).

use runcell_protocol::SandboxKind;
use runcell_protocol::page::{FileItem, SessionPage, SessionSummary, ShareLinkLog};

use super::Notebooks;
use runcell_protocol::{OwnerId, SessionId, ShareToken};
use runcell_store::StoreError;

impl Notebooks {
    /// A session of `viewer`'s, as its page shows it.
    pub async fn session_page(
        &self,
        viewer: OwnerId,
        id: SessionId,
    ) -> Result<Option<SessionPage>, StoreError> {
        let Some(channel) = self.hub.open_owned(id, viewer).await? else {
            return Ok(None);
        };
        let record = self.store().session(id).await?;
        let share = self.store().share_of(id).await?;
        Ok(Some(SessionPage {
            title: record.map(|r| r.title).unwrap_or_default(),
            events: super::figures::by_address(
                channel.log().events_after(0),
                &format!("/sessions/{id}/figures"),
            ),
            share_files: share.as_ref().is_some_and(|s| s.files),
            share_path: share.map(|s| s.token.path()),
        }))
    }

    /// `viewer`'s sessions that have begun, most recent first.
    pub async fn session_list(&self, viewer: OwnerId) -> Result<Vec<SessionSummary>, StoreError> {
        Ok(self
            .store()
            .sessions_of(viewer)
            .await?
            .into_iter()
            .map(|s| SessionSummary {
                id: s.id.to_string(),
                title: s.title,
                updated_ms: s.updated_ms,
            })
            .collect())
    }

    /// What the share link `token` shows (its first part, when long).
    pub async fn share_link_page(
        &self,
        token: &ShareToken,
    ) -> Result<Option<ShareLinkLog>, StoreError> {
        let Some((record, events)) = self.hub.shared_events(token).await? else {
            return Ok(None);
        };
        let events = super::figures::by_address(events, &format!("/s/{token}/figures"));
        let (events, cut) = super::sharing::page_part(events, super::sharing::SHARE_PAGE_BYTES);
        Ok(Some(ShareLinkLog {
            token: token.to_string(),
            title: record.title,
            events,
            files: Vec::new(),
            cut,
        }))
    }

    /// The files the share link `token` offers (none, unless its owner
    /// shared the session's files with it).
    pub async fn share_link_files(&self, token: &ShareToken) -> Vec<FileItem> {
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

    /// The backends a notebook may pick, the default first.
    pub fn backends(&self) -> Vec<SandboxKind> {
        self.kernels().backends()
    }

    /// The backend session `id`'s programs run on now.
    pub fn backend_of(&self, id: SessionId) -> SandboxKind {
        self.kernels().chosen(id)
    }

    /// Where pages load Pyodide from, when `browser` is on offer.
    pub fn pyodide_url(&self) -> Option<String> {
        self.pyodide_url.clone()
    }
}
