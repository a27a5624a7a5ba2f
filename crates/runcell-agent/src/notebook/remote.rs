//! What one node asks of the node that holds a session (`cluster`): the
//! calls, their answers, and the serving side. A page served by node B on a
//! session node A holds asks, stops, shares and reaches files through
//! these; A does each with the same method a page of its own would call.

use std::sync::Arc;
use std::time::Duration;

use runcell_protocol::TurnId;
use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;

use async_trait::async_trait;

use super::{AskedTurn, Holder, NotebookError, Notebooks};
use crate::agent::{FilesError, TurnRefusal};
use crate::cluster::calls::Reply;
use crate::cluster::{CallError, Cluster, IncomingCall};
use runcell_protocol::SessionId;
use runcell_sandbox::SandboxError;
use runcell_sandbox::files::{Contents, FileEntry};
use runcell_sandbox::sessions::SandboxSessionError;
use runcell_store::ShareRecord;
use runcell_store::nodes::Node;

/// How long a call that does not move bytes waits for its answer.
const QUICK: Duration = Duration::from_secs(10);
/// How long a call that moves a file waits.
const WITH_BYTES: Duration = Duration::from_secs(60);

/// What a node asks of the holder.
#[derive(Debug, Serialize, Deserialize)]
pub enum Call {
    Start(AskedTurn),
    Stop,
    SelectBranch(TurnId),
    Share {
        files: bool,
    },
    Unshare,
    Delete,
    ListFiles,
    ReadFile {
        path: String,
    },
    /// The file's bytes travel as the call's payload.
    Upload {
        path: String,
        overwrite: bool,
    },
    DeleteFile {
        path: String,
    },
    /// The files the session's share link offers (its copy is kept where
    /// the session is held).
    SharedFiles,
    ReadSharedFile {
        path: String,
    },
}

/// The holder's answer.
#[derive(Debug, Serialize, Deserialize)]
pub enum Answer {
    Started(TurnId),
    Refused(TurnRefusal),
    Done,
    Files(Vec<FileEntry>),
    /// A file; its bytes travel as the reply's payload when it was read.
    File(FileEntry),
    Failed(Failure),
}

/// An error on the holder, as the caller reports it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
#[error("{message}")]
pub struct Failure {
    pub kind: FailureKind,
    pub message: String,
}

/// What went wrong on the holder, as one node tells another: part of the
/// cluster's wire, serialized by its name (`"kind":"NotFound"`); the nodes
/// of one cluster run one version. It is no HTTP status: the server's
/// HTTP layer decides which status each kind is answered with, as it does
/// for the errors of this node.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum FailureKind {
    /// The session, link, file or turn is not there.
    NotFound,
    /// The request cannot be done as asked (a bad name, path or notebook).
    BadRequest,
    /// The thing is there already.
    Conflict,
    /// Bigger than the room for it.
    TooLarge,
    /// Too much under way already: worth asking again later.
    Busy,
    /// The holder cannot do it now (shutting down, out of reach).
    Unavailable,
    Internal,
}

impl Failure {
    /// What kind of failure `err` is, with its message: the one reading
    /// of a notebook error outside HTTP (another node's, the terminal's).
    pub fn of(err: &NotebookError) -> Self {
        let kind = match err {
            NotebookError::NotFound(_)
            | NotebookError::LinkGone
            | NotebookError::NoSharedFiles
            | NotebookError::HandoverGone => FailureKind::NotFound,
            NotebookError::EmptyTitle | NotebookError::BadNotebook(_) => FailureKind::BadRequest,
            NotebookError::ShuttingDown | NotebookError::Unreachable(_) => FailureKind::Unavailable,
            NotebookError::Refused(_) | NotebookError::Create(_) | NotebookError::OverQuota(_) => {
                FailureKind::Busy
            }
            NotebookError::Store(_) => FailureKind::Internal,
            NotebookError::Remote(failure) => failure.kind,
            NotebookError::Files(FilesError::Exists(_)) => FailureKind::Conflict,
            NotebookError::Files(
                FilesError::Sandbox(e) | FilesError::Session(SandboxSessionError::Sandbox(e)),
            ) => match e {
                SandboxError::InvalidInput(_) | SandboxError::NotSupported(_) => {
                    FailureKind::BadRequest
                }
                SandboxError::NotFound(_) => FailureKind::NotFound,
                SandboxError::NoSpace(_) => FailureKind::TooLarge,
                SandboxError::Unavailable(_) => FailureKind::Unavailable,
                _ => FailureKind::Internal,
            },
            NotebookError::Files(FilesError::Session(SandboxSessionError::NotFound(_))) => {
                FailureKind::NotFound
            }
            NotebookError::Files(FilesError::Session(_)) => FailureKind::Busy,
        };
        Self {
            kind,
            message: err.to_string(),
        }
    }
}

impl From<CallError> for NotebookError {
    fn from(err: CallError) -> Self {
        Self::Unreachable(err.to_string())
    }
}

impl Notebooks {
    pub(super) fn cluster(&self) -> Option<&Arc<Cluster>> {
        self.hub.cluster()
    }

    /// The other live node that holds `session`, if another does; asks
    /// the database without taking the session (for a share link's
    /// visitors, who must not take over or settle a session).
    pub(super) async fn holder_elsewhere(&self, session: SessionId) -> Option<Node> {
        let cluster = self.cluster()?;
        match cluster.db().holder(session).await {
            Ok(Some(node)) if node.id != cluster.node().id => Some(node),
            Ok(_) => None,
            Err(e) => {
                tracing::warn!(%session, error = %e, "a session's holder could not be read");
                None
            }
        }
    }

    /// Sends `call` to `holder` and reads its answer (and bytes).
    pub(super) async fn ask_holder(
        &self,
        holder: &Node,
        session: SessionId,
        call: Call,
        payload: Option<Vec<u8>>,
    ) -> Result<(Answer, Option<Vec<u8>>), NotebookError> {
        ask(self.cluster(), holder, session, call, payload).await
    }

    /// Does what another node asked of a session this node holds.
    async fn answer_call(&self, call: &IncomingCall) -> Reply {
        let (answer, payload) = match serde_json::from_str::<Call>(&call.request) {
            Err(e) => (
                Answer::Failed(Failure {
                    kind: FailureKind::BadRequest,
                    message: format!("an unreadable call: {e}"),
                }),
                None,
            ),
            Ok(request) => self.do_call(call, request).await,
        };
        let text = serde_json::to_string(&answer).unwrap_or_else(|_| {
            r#"{"Failed":{"kind":"Internal","message":"the answer could not be written"}}"#.into()
        });
        Reply { text, payload }
    }

    async fn do_call(&self, call: &IncomingCall, request: Call) -> (Answer, Option<Vec<u8>>) {
        // A share link's files are read without opening the session (a
        // visitor must not settle it).
        match request {
            Call::SharedFiles => {
                return (
                    Answer::Files(self.kernels().shared_files(call.session).await),
                    None,
                );
            }
            Call::ReadSharedFile { path } => {
                return match self.kernels().read_shared_file(call.session, &path).await {
                    Ok((entry, bytes)) => (Answer::File(entry), Some(bytes)),
                    Err(e) => failed(&e.into()),
                };
            }
            _ => {}
        }
        // The caller checked the owner; the database is the nodes' trust.
        let channel = match self.hub.open(call.session).await {
            Ok(Some(channel)) => channel,
            Ok(None) => return failed(&NotebookError::not_found(&call.session.to_string())),
            Err(e) => return failed(&e.into()),
        };
        if channel.remote_holder().is_some() {
            // The lease moved since the caller looked: it asks again.
            return failed(&NotebookError::Unreachable(
                "this node no longer holds the session; try again".into(),
            ));
        }
        let done = |r: Result<(), NotebookError>| match r {
            Ok(()) => (Answer::Done, None),
            Err(e) => failed(&e),
        };
        match request {
            Call::Start(turn) => match self.start(&channel, turn).await {
                Ok(id) => (Answer::Started(id), None),
                Err(refusal) => (Answer::Refused(refusal), None),
            },
            Call::Stop => {
                self.runner.stop(&channel);
                (Answer::Done, None)
            }
            Call::SelectBranch(turn) => match self.select_branch(&channel, turn).await {
                Ok(()) => (Answer::Done, None),
                Err(refusal) => (Answer::Refused(refusal), None),
            },
            Call::Share { files } => done(self.share(&channel, files).await.map(|_| ())),
            Call::Unshare => done(self.unshare(&channel).await),
            Call::Delete => done(self.delete(&channel).await),
            Call::ListFiles => match self.list_files(&channel).await {
                Ok(files) => (Answer::Files(files), None),
                Err(e) => failed(&e),
            },
            Call::ReadFile { path } => match self.read_file(&channel, &path).await {
                Ok((entry, bytes)) => (Answer::File(entry), Some(bytes)),
                Err(e) => failed(&e),
            },
            Call::Upload { path, overwrite } => {
                let bytes = call.payload.clone().unwrap_or_default();
                match self.upload(&channel, &path, bytes.into(), overwrite).await {
                    Ok(entry) => (Answer::File(entry), None),
                    Err(e) => failed(&e),
                }
            }
            Call::DeleteFile { path } => done(self.delete_file(&channel, &path).await),
            Call::SharedFiles | Call::ReadSharedFile { .. } => unreachable_call(),
        }
    }
}

/// Sends `call` to `holder` through `cluster` and reads its answer (and
/// bytes).
async fn ask(
    cluster: Option<&Arc<Cluster>>,
    holder: &Node,
    session: SessionId,
    call: Call,
    payload: Option<Vec<u8>>,
) -> Result<(Answer, Option<Vec<u8>>), NotebookError> {
    let Some(cluster) = cluster else {
        return Err(NotebookError::Unreachable(
            "this session is held by another node, and this one is not in a cluster".into(),
        ));
    };
    let timeout = match call {
        Call::ReadFile { .. }
        | Call::Upload { .. }
        | Call::Share { .. }
        | Call::ReadSharedFile { .. } => WITH_BYTES,
        _ => QUICK,
    };
    let request = serde_json::to_string(&call)
        .map_err(|e| NotebookError::Unreachable(format!("a call could not be written: {e}")))?;
    let reply = cluster
        .call(holder, session, request, payload, timeout)
        .await?;
    let answer = serde_json::from_str(&reply.text).map_err(|e| {
        NotebookError::Unreachable(format!("the holding node's answer is unreadable: {e}"))
    })?;
    Ok((answer, reply.payload))
}

/// A call that answers [`Answer::Done`] or fails.
async fn does(
    cluster: Option<&Arc<Cluster>>,
    holder: &Node,
    session: SessionId,
    call: Call,
) -> Result<(), NotebookError> {
    match ask(cluster, holder, session, call, None).await?.0 {
        Answer::Done => Ok(()),
        other => Err(unexpected(other)),
    }
}

/// A session another node holds: what a page here asks of it is a call to
/// that node.
pub(super) struct There<'a> {
    notebooks: &'a Notebooks,
    node: Node,
    session: SessionId,
}

impl<'a> There<'a> {
    pub(super) fn new(notebooks: &'a Notebooks, node: Node, session: SessionId) -> Self {
        Self {
            notebooks,
            node,
            session,
        }
    }

    async fn ask(
        &self,
        call: Call,
        payload: Option<Vec<u8>>,
    ) -> Result<(Answer, Option<Vec<u8>>), NotebookError> {
        ask(
            self.notebooks.cluster(),
            &self.node,
            self.session,
            call,
            payload,
        )
        .await
    }

    async fn does(&self, call: Call) -> Result<(), NotebookError> {
        does(self.notebooks.cluster(), &self.node, self.session, call).await
    }

    /// A call answered with a refusal or a turn's consent.
    async fn turn_call(&self, call: Call) -> Result<Answer, TurnRefusal> {
        match self.ask(call, None).await {
            Ok((Answer::Refused(refusal), _)) => Err(refusal),
            Ok((answer, _)) => Ok(answer),
            Err(e) => Err(TurnRefusal::Unreachable(e.to_string())),
        }
    }
}

#[async_trait]
impl Holder for There<'_> {
    async fn start(&self, turn: AskedTurn) -> Result<TurnId, TurnRefusal> {
        match self.turn_call(Call::Start(turn)).await? {
            Answer::Started(turn) => Ok(turn),
            other => Err(TurnRefusal::Unreachable(unexpected(other).to_string())),
        }
    }

    fn stop(&self) {
        let cluster = self.notebooks.cluster().cloned();
        let (node, session) = (self.node.clone(), self.session);
        tokio::spawn(async move {
            if let Err(e) = does(cluster.as_ref(), &node, session, Call::Stop).await {
                tracing::warn!(%session, error = %e, "a Stop did not reach the holding node");
            }
        });
    }

    async fn select_branch(&self, turn: TurnId) -> Result<(), TurnRefusal> {
        match self.turn_call(Call::SelectBranch(turn)).await? {
            Answer::Done => Ok(()),
            other => Err(TurnRefusal::Unreachable(unexpected(other).to_string())),
        }
    }

    async fn share(&self, files: bool) -> Result<ShareRecord, NotebookError> {
        self.does(Call::Share { files }).await?;
        self.notebooks
            .store()
            .share_of(self.session)
            .await?
            .ok_or_else(|| NotebookError::not_found(&self.session.to_string()))
    }

    async fn unshare(&self) -> Result<(), NotebookError> {
        self.does(Call::Unshare).await
    }

    async fn delete(&self) -> Result<(), NotebookError> {
        self.does(Call::Delete).await?;
        // Forgotten here too (the store has nothing left of it).
        self.notebooks.hub.delete(self.session).await?;
        Ok(())
    }

    async fn list_files(&self) -> Result<Vec<FileEntry>, NotebookError> {
        match self.ask(Call::ListFiles, None).await?.0 {
            Answer::Files(files) => Ok(files),
            other => Err(unexpected(other)),
        }
    }

    async fn read_file(&self, path: &str) -> Result<(FileEntry, Vec<u8>), NotebookError> {
        let call = Call::ReadFile { path: path.into() };
        match self.ask(call, None).await? {
            (Answer::File(entry), bytes) => Ok((entry, bytes.unwrap_or_default())),
            (other, _) => Err(unexpected(other)),
        }
    }

    async fn upload(
        &self,
        path: &str,
        bytes: Contents,
        overwrite: bool,
    ) -> Result<FileEntry, NotebookError> {
        let call = Call::Upload {
            path: path.into(),
            overwrite,
        };
        // Another node's call carries its payload whole.
        let bytes = bytes.to_bytes().await.map_err(|e| {
            NotebookError::Unreachable(format!("the upload could not be read back: {e}"))
        })?;
        match self.ask(call, Some(bytes.into())).await?.0 {
            Answer::File(entry) => Ok(entry),
            other => Err(unexpected(other)),
        }
    }

    async fn delete_file(&self, path: &str) -> Result<(), NotebookError> {
        self.does(Call::DeleteFile { path: path.into() }).await
    }
}

/// A call answered before the session was opened.
fn unreachable_call() -> (Answer, Option<Vec<u8>>) {
    failed(&NotebookError::Unreachable("a call answered twice".into()))
}

fn failed(err: &NotebookError) -> (Answer, Option<Vec<u8>>) {
    (Answer::Failed(Failure::of(err)), None)
}

/// An answer that does not fit the call (a hostile or newer node).
pub(super) fn unexpected(answer: Answer) -> NotebookError {
    match answer {
        Answer::Failed(failure) => NotebookError::Remote(failure),
        Answer::Refused(refusal) => NotebookError::Refused(refusal),
        other => NotebookError::Unreachable(format!(
            "the holding node answered something else: {:.60}",
            format!("{other:?}")
        )),
    }
}

/// Answers the calls other nodes make to this one until `shutdown`, each
/// as a task of its own.
pub async fn serve_calls(
    cluster: Arc<Cluster>,
    notebooks: Arc<Notebooks>,
    shutdown: CancellationToken,
) {
    loop {
        let calls = tokio::select! {
            () = shutdown.cancelled() => return,
            calls = cluster.next_calls() => calls,
        };
        let calls = match calls {
            Ok(calls) => calls,
            Err(e) => {
                tracing::warn!(error = %e, "calls from other nodes could not be read");
                tokio::time::sleep(Duration::from_secs(1)).await;
                continue;
            }
        };
        for call in calls {
            let (cluster, notebooks) = (Arc::clone(&cluster), Arc::clone(&notebooks));
            tokio::spawn(async move {
                let reply = notebooks.answer_call(&call).await;
                if let Err(e) = cluster.answer(&call, reply).await {
                    tracing::warn!(error = %e, call = call.id, "a call could not be answered");
                }
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failure_travels_by_the_name_of_its_kind() {
        let failure = Failure {
            kind: FailureKind::TooLarge,
            message: "no room".into(),
        };
        let text = serde_json::to_string(&Answer::Failed(failure.clone())).unwrap();
        assert_eq!(
            text,
            r#"{"Failed":{"kind":"TooLarge","message":"no room"}}"#
        );
        match serde_json::from_str::<Answer>(&text).unwrap() {
            Answer::Failed(back) => assert_eq!(back, failure),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn an_unwritable_answer_is_read_as_an_internal_failure() {
        // The text `answer_call` sends when the answer cannot be written.
        let text = r#"{"Failed":{"kind":"Internal","message":"the answer could not be written"}}"#;
        match serde_json::from_str::<Answer>(text).unwrap() {
            Answer::Failed(failure) => assert_eq!(
                failure,
                Failure {
                    kind: FailureKind::Internal,
                    message: "the answer could not be written".into(),
                }
            ),
            other => panic!("{other:?}"),
        }
    }
}
