//! Share links: making, moving on and revoking one, what it offers, and
//! forking the session it shows.

use std::sync::Arc;

use super::remote::{Answer, Call, unexpected};
use super::{NotebookError, Notebooks};
use crate::session::SessionChannel;
use runcell_protocol::{OwnerId, SessionId, ShareToken};
use runcell_sandbox::files::{FileEntry, FileKind};
use runcell_store::ShareRecord;
use runcell_store::nodes::Node;

impl Notebooks {
    /// The session's link (made, or moved on to include what happened
    /// since), with a copy of the session's files if `files`.
    ///
    /// The steps go in this order: what is queued is stored first, so the
    /// link shows what the owner sees; the copy of the files is made (or
    /// dropped) before the link says whether it has one.
    pub async fn share(
        &self,
        channel: &Arc<SessionChannel>,
        files: bool,
    ) -> Result<ShareRecord, NotebookError> {
        self.holder(channel).share(files).await
    }

    /// Revokes the session's link (it is "not found" from now on), then
    /// drops the copy of the files it offered.
    pub async fn unshare(&self, channel: &Arc<SessionChannel>) -> Result<(), NotebookError> {
        self.holder(channel).unshare().await
    }

    /// A new session of `owner`'s holding the cells the link `token` shows
    /// (cut short cells closed, the kernel marked as a fork's), and the
    /// files it offers, if it offers them.
    pub async fn fork(
        &self,
        owner: OwnerId,
        token: &ShareToken,
    ) -> Result<Arc<SessionChannel>, NotebookError> {
        let link = self
            .store()
            .shared(token)
            .await?
            .ok_or(NotebookError::LinkGone)?;
        let (record, events) = self
            .hub
            .link_events(&link)
            .await?
            .ok_or(NotebookError::LinkGone)?;
        let title = fork_title(&record.title, &events);
        let files_left_behind = !link.files && self.has_files(link.session_id).await;
        let room = self.notebook_room(owner).await?;
        let channel = self
            .hub
            .fork(owner, &title, token, events, files_left_behind)
            .await?;
        drop(room);
        if link.files {
            match self.holder_elsewhere(link.session_id).await {
                Some(holder) => {
                    self.fork_remote_files(&holder, link.session_id, channel.id())
                        .await?;
                }
                None => {
                    self.kernels()
                        .fork_files(link.session_id, channel.id())
                        .await?;
                }
            }
        }
        tracing::info!(from = ?token, to = %channel.id(), files = link.files, "session forked");
        Ok(channel)
    }

    /// A fork made here of a link whose session another node holds: the
    /// files the link offers are read from that node, one by one, into the
    /// fork.
    async fn fork_remote_files(
        &self,
        holder: &Node,
        from: SessionId,
        to: SessionId,
    ) -> Result<(), NotebookError> {
        let files = match self
            .ask_holder(holder, from, Call::SharedFiles, None)
            .await?
        {
            (Answer::Files(files), _) => files,
            (other, _) => return Err(unexpected(other)),
        };
        for file in files.iter().filter(|f| f.kind == FileKind::File) {
            let call = Call::ReadSharedFile {
                path: file.path.clone(),
            };
            let bytes = match self.ask_holder(holder, from, call, None).await? {
                (Answer::File(_), bytes) => bytes.unwrap_or_default(),
                (other, _) => return Err(unexpected(other)),
            };
            self.kernels()
                .upload(to, &file.path, bytes.into(), true)
                .await?;
        }
        Ok(())
    }

    /// Whether the session has files in its home now (on whichever node
    /// holds it); false when they cannot be listed.
    async fn has_files(&self, session: SessionId) -> bool {
        let listed = match self.holder_elsewhere(session).await {
            Some(holder) => match self
                .ask_holder(&holder, session, Call::ListFiles, None)
                .await
            {
                Ok((Answer::Files(files), _)) => Ok(files),
                Ok((other, _)) => Err(unexpected(other)),
                Err(e) => Err(e),
            },
            None => self
                .kernels()
                .list_files(session)
                .await
                .map_err(NotebookError::from),
        };
        match listed {
            Ok(files) => files.iter().any(|f| f.kind == FileKind::File),
            Err(e) => {
                tracing::warn!(%session, error = %e, "a shared session's files could not be listed");
                false
            }
        }
    }

    /// The live link behind `token`, if it offers files.
    async fn files_link(&self, token: &ShareToken) -> Option<ShareRecord> {
        match self.store().shared(token).await {
            Ok(Some(link)) if link.files => Some(link),
            Ok(_) => None,
            Err(err) => {
                tracing::warn!(%err, "a share link could not be read");
                None
            }
        }
    }

    /// The files the link `token` offers, as they were when shared; none
    /// when it offers none or is gone.
    pub async fn shared_files(&self, token: &ShareToken) -> Vec<FileEntry> {
        let Some(link) = self.files_link(token).await else {
            return Vec::new();
        };
        match self.holder_elsewhere(link.session_id).await {
            Some(holder) => match self
                .ask_holder(&holder, link.session_id, Call::SharedFiles, None)
                .await
            {
                Ok((Answer::Files(files), _)) => files,
                Ok((other, _)) => {
                    tracing::warn!(error = %unexpected(other), "a share's files could not be listed");
                    Vec::new()
                }
                Err(e) => {
                    tracing::warn!(error = %e, "a share's files could not be listed");
                    Vec::new()
                }
            },
            None => self.kernels().shared_files(link.session_id).await,
        }
    }

    /// A file the link `token` offers, as it was when shared.
    pub async fn read_shared_file(
        &self,
        token: &ShareToken,
        path: &str,
    ) -> Result<(FileEntry, Vec<u8>), NotebookError> {
        let link = self
            .files_link(token)
            .await
            .ok_or(NotebookError::NoSharedFiles)?;
        if let Some(holder) = self.holder_elsewhere(link.session_id).await {
            let call = Call::ReadSharedFile { path: path.into() };
            return match self
                .ask_holder(&holder, link.session_id, call, None)
                .await?
            {
                (Answer::File(entry), bytes) => Ok((entry, bytes.unwrap_or_default())),
                (other, _) => Err(unexpected(other)),
            };
        }
        Ok(self
            .kernels()
            .read_shared_file(link.session_id, path)
            .await?)
    }
}

/// The most of a session's history a share link's page shows, in bytes of
/// its events as JSON: the page (markup, and the state a page reads) is a
/// few times that, so a stranger opening a link to a long session makes
/// the server hold megabytes, not the session's whole size.
pub const SHARE_PAGE_BYTES: usize = 2 * 1024 * 1024;

/// The first events of `events` that fit in `budget` bytes (as JSON), and
/// whether any were left out. A cut ends where no cell and no turn is
/// open, so that the page shows no cell as still running; the first event
/// is always kept.
pub fn page_part(
    events: Vec<runcell_protocol::SessionEvent>,
    budget: usize,
) -> (Vec<runcell_protocol::SessionEvent>, bool) {
    use runcell_protocol::EventBody;
    let mut used = 0usize;
    let mut kept = Vec::new();
    // Cells and turns open after the events kept so far, and how many
    // events were kept when none last was.
    let (mut open, mut quiet) = (0usize, 0usize);
    let total = events.len();
    for event in events {
        let size = serde_json::to_vec(&event).map_or(budget, |json| json.len());
        if !kept.is_empty() && used.saturating_add(size) > budget {
            break;
        }
        used = used.saturating_add(size);
        match event.event {
            EventBody::CellStarted { .. } | EventBody::TurnStarted { .. } => open += 1,
            EventBody::CellFinished { .. } | EventBody::TurnFinished { .. } => {
                open = open.saturating_sub(1);
            }
            _ => {}
        }
        kept.push(event);
        if open == 0 {
            quiet = kept.len();
        }
    }
    let cut = kept.len() < total;
    if cut && quiet > 0 {
        kept.truncate(quiet);
    }
    (kept, cut)
}

/// A fork's title: the original's (or its first question's), said to be a
/// copy, so that the two are told apart in the sessions list.
fn fork_title(title: &str, events: &[runcell_protocol::SessionEvent]) -> String {
    let original = if title.trim().is_empty() {
        runcell_protocol::notebook::Notebook::from_events(events)
            .first_question()
            .map(runcell_protocol::page::title_from)
            .unwrap_or_default()
    } else {
        title.to_string()
    };
    if original.trim().is_empty() {
        "Copy of a shared session".into()
    } else {
        format!("{original} (copy)")
    }
}

#[cfg(test)]
mod tests {
    use runcell_protocol::{CellId, EventBody, Output, SessionEvent};

    use super::*;

    fn output(bytes: usize) -> EventBody {
        EventBody::CellOutput {
            cell_id: CellId(1),
            output: Output::Stdout {
                text: "x".repeat(bytes),
            },
        }
    }

    #[test]
    fn a_share_links_page_holds_a_bounded_part_of_a_long_session() {
        // 16 MiB of output, as the review's long session.
        let events = SessionEvent::numbered((0..64).map(|_| output(256 * 1024)), 1);
        let (shown, cut) = page_part(events, SHARE_PAGE_BYTES);
        assert!(cut);
        let bytes: usize = shown
            .iter()
            .map(|e| serde_json::to_vec(e).unwrap().len())
            .sum();
        assert!(bytes <= SHARE_PAGE_BYTES, "{bytes}");
        assert_eq!(shown.len(), 7, "whole events, from the first");
        assert_eq!(shown.last().map(|e| e.seq), Some(7));

        // A short session is shown whole; a first event over the budget
        // still shows, alone.
        // A cut inside a cell ends before that cell began.
        let cell = |n: u64| {
            [
                EventBody::CellStarted {
                    cell_id: CellId(n),
                    cell_kind: runcell_protocol::CellKind::Result,
                    language: None,
                    attempt: None,
                    source: None,
                },
                output(400 * 1024),
                output(400 * 1024),
                EventBody::CellFinished {
                    cell_id: CellId(n),
                    status: runcell_protocol::CellStatus::Ok,
                    elapsed_ms: 0,
                    error: None,
                },
            ]
        };
        let cells = SessionEvent::numbered((1..=4).flat_map(cell), 1);
        let (shown, cut) = page_part(cells, SHARE_PAGE_BYTES);
        assert!(cut);
        assert_eq!(shown.len(), 8, "two whole cells, not a third begun");
        assert!(matches!(
            shown.last().map(|e| &e.event),
            Some(EventBody::CellFinished { .. })
        ));

        let short = SessionEvent::numbered((0..3).map(|_| output(10)), 1);
        assert_eq!(page_part(short.clone(), SHARE_PAGE_BYTES), (short, false));
        let (alone, cut) = page_part(SessionEvent::numbered([output(100), output(1)], 1), 10);
        assert_eq!((alone.len(), cut), (1, true));
    }
}
