//! `/ws/sessions/{id}`: a session's live feed, and the way a page asks.

use std::sync::Arc;

use app::protocol::{
    ClientMessage, ErrorCode, PROTOCOL_VERSION, SUBPROTOCOL, ServerMessage, SessionEvent,
};
use axum::extract::ws::{CloseFrame, Message, Utf8Bytes, WebSocket, WebSocketUpgrade, close_code};
use axum::extract::{FromRef, Path, Query, State, rejection::QueryRejection};
use axum::http::{HeaderMap, Uri};
use axum::response::Response;
use futures::{Sink, SinkExt, Stream, StreamExt};
use serde::Deserialize;

use tokio_util::sync::CancellationToken;

use super::ApiError;
use super::host::AllowedHosts;
use super::owner::Owner;
use crate::http::state::AppState;
use runcell_agent::agent::TurnRefusal;
use runcell_agent::notebook::{AskedTurn, Notebooks, parse_session_id};
use runcell_agent::session::sockets::OpenSockets;
use runcell_agent::session::{Follower, PAGE_EVENTS, SessionChannel};
use runcell_protocol::render::for_pages::PageMarkup;
use runcell_sandbox::browser::{BrowserError, BrowserTabs, Reply, TabLink};

pub(crate) use app::protocol::MAX_FRAME_BYTES;

/// How long a page may take to read what was sent to it before it is
/// dropped; it may come back and resume from its last `seq`.
const SEND_PATIENCE: std::time::Duration = std::time::Duration::from_secs(30);

#[derive(Debug, Deserialize)]
pub struct Resume {
    /// The last `seq` the page has; only later events are sent.
    #[serde(default)]
    after: u64,
}

/// What a page's socket works with.
#[derive(Clone)]
pub struct SocketState {
    hosts: AllowedHosts,
    notebooks: Arc<Notebooks>,
    /// The pages that run their sessions' Python (the Browser sandbox).
    browser: Arc<BrowserTabs>,
    /// The sockets open, capped per session and per owner.
    sockets: Arc<OpenSockets>,
    shutdown: CancellationToken,
}

impl FromRef<AppState> for SocketState {
    fn from_ref(state: &AppState) -> Self {
        Self {
            hosts: state.hosts.clone(),
            notebooks: Arc::clone(&state.notebooks),
            browser: Arc::clone(&state.browser),
            sockets: Arc::clone(&state.sockets),
            shutdown: state.shutdown.clone(),
        }
    }
}

pub async fn session_socket(
    ws: WebSocketUpgrade,
    Owner(owner): Owner,
    Path(id): Path<String>,
    query: Result<Query<Resume>, QueryRejection>,
    uri: Uri,
    headers: HeaderMap,
    State(state): State<SocketState>,
) -> Result<Response, ApiError> {
    // Browsers send the cookie with other sites' WebSocket handshakes too,
    // and no CORS stands in the way: the origin is checked here.
    if !super::origin::from_this_site(&state.hosts, &uri, &headers) {
        return Err(ApiError::Forbidden(
            "a session's socket opens only from runcell's own pages".into(),
        ));
    }
    let Query(resume) = query.map_err(|e| ApiError::BadRequest(e.body_text()))?;
    let channel = state
        .notebooks
        .open_owned(owner, parse_session_id(&id)?)
        .await?;
    // Over a cap, the socket opens and is closed at once with the reason
    // (a refused handshake would tell the page nothing).
    let slot = state.sockets.admit(channel.id(), owner);
    Ok(ws
        .protocols([SUBPROTOCOL])
        .max_message_size(MAX_FRAME_BYTES)
        .on_upgrade(move |socket: WebSocket| {
            let (mut sink, stream) = socket.split();
            async move {
                let slot = match slot {
                    Ok(slot) => slot,
                    Err(refusal) => {
                        tracing::debug!(%refusal, "a session socket over its cap");
                        let _ = sink
                            .send(close(close_code::AGAIN, &refusal.to_string()))
                            .await;
                        return;
                    }
                };
                let _open = runcell_core::metrics::SocketOpen::new();
                serve_socket(sink, stream, channel, resume.after, state, slot.closed()).await;
            }
        }))
}

/// A close frame with `reason` (cut to the 123 bytes a close frame holds).
fn close(code: u16, reason: &str) -> Message {
    let mut end = reason.len().min(123);
    while !reason.is_char_boundary(end) {
        end -= 1;
    }
    Message::Close(Some(CloseFrame {
        code,
        reason: Utf8Bytes::from(&reason[..end]),
    }))
}

/// Runs one connection until either side closes or the server shuts down.
/// Generic over the socket halves so that it can be driven without a network.
#[tracing::instrument(name = "ws", skip_all, fields(session.id = %channel.id()))]
pub async fn serve_socket<W, R>(
    mut sink: W,
    mut stream: R,
    channel: Arc<SessionChannel>,
    after: u64,
    state: SocketState,
    owner_closed: impl Future<Output = ()>,
) where
    W: Sink<Message> + Unpin,
    R: Stream<Item = Result<Message, axum::Error>> + Unpin,
{
    let (last_seq, mut follower) = Follower::after(Arc::clone(&channel), after);
    // What the page is sent gains its markdown's markup; an explanation
    // under way when it connected is marked up whole.
    let mut markup = markup_after(&channel, follower.given());
    // Frames for this page alone: the Browser sandbox's runs, if it attaches.
    let (link, mut outbound) = state.browser.link();
    let welcome = ServerMessage::Welcome {
        protocol: PROTOCOL_VERSION,
        session_id: channel.id().to_string(),
        last_seq,
    };
    if send(&mut sink, &welcome).await.is_err() {
        return;
    }
    // A page that claims more than the history holds follows from now on;
    // `last_seq` in the welcome tells it that its copy is stale.
    if catch_up(&mut sink, &mut follower, &mut markup, SEND_PATIENCE)
        .await
        .is_err()
    {
        return;
    }
    tracing::debug!(after, "page connected");

    let mut owner_closed = std::pin::pin!(owner_closed);
    loop {
        tokio::select! {
            () = &mut owner_closed => {
                // The account was disabled: its pages are closed for good.
                let _ = sink
                    .send(close(close_code::POLICY, "this account has been disabled"))
                    .await;
                break;
            }
            () = state.shutdown.cancelled() => {
                let _ = sink
                    .send(Message::Close(Some(CloseFrame {
                        code: close_code::AWAY,
                        reason: Utf8Bytes::from_static("server shutting down"),
                    })))
                    .await;
                break;
            }
            () = channel.retired() => {
                // Another node holds the session now: the page reconnects
                // and follows it there.
                let _ = sink
                    .send(Message::Close(Some(CloseFrame {
                        code: close_code::AGAIN,
                        reason: Utf8Bytes::from_static("the session moved to another node"),
                    })))
                    .await;
                break;
            }
            // The next live event, or (behind the live feed) the next page
            // of the history.
            events = follower.next() => {
                let Some(events) = events else { break };
                if send_page(&mut sink, events, &mut markup, SEND_PATIENCE).await.is_err() {
                    break;
                }
            }
            Some(message) = outbound.recv() => {
                if send(&mut sink, &message).await.is_err() {
                    break;
                }
            }
            frame = stream.next() => {
                let reply = match frame {
                    Some(Ok(Message::Text(text))) => handle_text(text.as_str(), &channel, &state, &link).await,
                    Some(Ok(Message::Binary(_))) => Some(refusal_message(ErrorCode::BadFrame, "binary frames are not part of the protocol")),
                    Some(Ok(Message::Ping(_) | Message::Pong(_))) => None,
                    Some(Ok(Message::Close(_)) | Err(_)) | None => break,
                };
                if let Some(reply) = reply
                    && send(&mut sink, &reply).await.is_err()
                {
                    break;
                }
            }
        }
    }
    state.browser.detach(channel.id(), link.conn());
    tracing::debug!("page disconnected");
}

/// Acts on one text frame; returns the error frame to send back, if any.
async fn handle_text(
    text: &str,
    channel: &Arc<SessionChannel>,
    state: &SocketState,
    link: &TabLink,
) -> Option<ServerMessage> {
    let message = match serde_json::from_str::<ClientMessage>(text) {
        Ok(message) => message,
        Err(err) => {
            return Some(refusal_message(
                ErrorCode::BadFrame,
                &format!("unreadable frame: {err}"),
            ));
        }
    };
    let turn = match message {
        ClientMessage::Ask {
            text,
            model,
            backend,
            alternative_to,
        } => AskedTurn::Ask {
            text,
            model,
            backend,
            alternative_to,
        },
        ClientMessage::SelectBranch { turn } => {
            return state
                .notebooks
                .select_branch(channel, turn)
                .await
                .err()
                .map(|refusal| refused(&refusal));
        }
        ClientMessage::Run {
            code,
            language,
            source,
            backend,
        } => AskedTurn::Run {
            code,
            language,
            source,
            backend,
        },
        ClientMessage::Stop => {
            state.notebooks.stop(channel);
            return None;
        }
        ClientMessage::Composing { model } => {
            state.notebooks.composing(channel, model);
            return None;
        }
        ClientMessage::RerunAll => AskedTurn::RerunAll,
        ClientMessage::BrowserAttach { kernel } => {
            return state
                .browser
                .attach(channel.id(), link, &kernel)
                .err()
                .map(|e| refusal_message(ErrorCode::BadFrame, &e.to_string()));
        }
        ClientMessage::BrowserStarted { run } => {
            return browser_reply(state, channel, link, run, Reply::Started).await;
        }
        ClientMessage::BrowserOutput { run, output } => {
            return browser_reply(state, channel, link, run, Reply::Output(output)).await;
        }
        ClientMessage::BrowserDone { run, kernel } => {
            return browser_reply(state, channel, link, run, Reply::Done { kernel }).await;
        }
    };
    match state.notebooks.start(channel, turn).await {
        Ok(_) => None,
        Err(refusal) => Some(refused(&refusal)),
    }
}

async fn browser_reply(
    state: &SocketState,
    channel: &SessionChannel,
    link: &TabLink,
    run: u64,
    reply: Reply,
) -> Option<ServerMessage> {
    match state
        .browser
        .reply(channel.id(), link.conn(), run, reply)
        .await
    {
        Ok(()) => None,
        // Frames that arrive after the server ended the run (a stop or the
        // time limit) are expected: dropped quietly.
        Err(BrowserError::UnknownRun(run)) => {
            tracing::debug!(run, "a frame for a browser run that is over");
            None
        }
        Err(e) => Some(refusal_message(ErrorCode::BadFrame, &e.to_string())),
    }
}

fn refused(refusal: &TurnRefusal) -> ServerMessage {
    refusal_message(refusal.code(), &refusal.to_string())
}

fn refusal_message(code: ErrorCode, message: &str) -> ServerMessage {
    ServerMessage::Error {
        code,
        message: message.to_string(),
    }
}

/// The markup of what a page that has the events up to `after` is sent
/// next: the history it has, followed (an explanation under way then).
fn markup_after(channel: &SessionChannel, after: u64) -> PageMarkup {
    let mut markup = PageMarkup::default();
    let mut read = 0;
    while read < after {
        let page = channel.log().page_after(read, PAGE_EVENTS);
        let Some(last) = page.last() else { break };
        read = last.seq;
        for event in page.iter().take_while(|e| e.seq <= after) {
            markup.learn(event);
        }
    }
    markup
}

/// Sends what `follower` has of the history, a page at a time: a page of
/// events not taken within `patience` drops the connection.
async fn catch_up<W: Sink<Message> + Unpin>(
    sink: &mut W,
    follower: &mut Follower,
    markup: &mut PageMarkup,
    patience: std::time::Duration,
) -> Result<(), ()> {
    while follower.is_behind() {
        let Some(page) = follower.next().await else {
            break;
        };
        if send_page(sink, page, markup, patience).await.is_err() {
            tracing::debug!(
                given = follower.given(),
                "a page stopped reading its history: dropped"
            );
            return Err(());
        }
    }
    Ok(())
}

/// Sends `events`, marked up for the page, all within `patience`.
async fn send_page<W: Sink<Message> + Unpin>(
    sink: &mut W,
    events: Vec<SessionEvent>,
    markup: &mut PageMarkup,
    patience: std::time::Duration,
) -> Result<(), ()> {
    let sending = async {
        for event in events {
            send(sink, &ServerMessage::Event(markup.mark(event))).await?;
        }
        Ok::<(), ()>(())
    };
    tokio::time::timeout(patience, sending)
        .await
        .unwrap_or(Err(()))
}

/// Sends one frame; a page that does not take it within [`SEND_PATIENCE`]
/// has stopped reading, and is dropped.
async fn send<W: Sink<Message> + Unpin>(sink: &mut W, message: &ServerMessage) -> Result<(), ()> {
    let text = serde_json::to_string(message).map_err(|err| {
        tracing::error!(%err, "cannot encode a frame");
    })?;
    match tokio::time::timeout(SEND_PATIENCE, sink.send(Message::Text(text.into()))).await {
        Ok(sent) => sent.map_err(|_| ()),
        Err(_) => {
            tracing::debug!("a page stopped reading: dropped");
            Err(())
        }
    }
}

#[cfg(test)]
mod tests {
    use std::pin::Pin;
    use std::task::{Context, Poll};
    use std::time::Duration;

    use app::protocol::EventBody;

    use super::*;
    use runcell_agent::session::SessionHub;
    use runcell_protocol::OwnerId;

    /// A page that reads `reads` frames, then nothing more.
    struct Page {
        got: Vec<SessionEvent>,
        reads: usize,
    }

    impl Sink<Message> for Page {
        type Error = ();

        fn poll_ready(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<Result<(), ()>> {
            if self.got.len() < self.reads {
                Poll::Ready(Ok(()))
            } else {
                Poll::Pending
            }
        }

        fn start_send(mut self: Pin<&mut Self>, item: Message) -> Result<(), ()> {
            if let Message::Text(text) = item
                && let Ok(ServerMessage::Event(event)) = serde_json::from_str(text.as_str())
            {
                self.got.push(event);
            }
            Ok(())
        }

        fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<Result<(), ()>> {
            Poll::Ready(Ok(()))
        }

        fn poll_close(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<Result<(), ()>> {
            Poll::Ready(Ok(()))
        }
    }

    async fn session_of(events: u64) -> (Arc<SessionChannel>, SessionHub, tempfile::TempDir) {
        let dir = tempfile::tempdir().unwrap();
        let store = runcell_store::SqliteStore::open_in(dir.path())
            .await
            .unwrap();
        let hub = SessionHub::new(Arc::new(store));
        let channel = hub.create(OwnerId::random()).await.unwrap();
        for cell in 0..events {
            channel.log().publish(EventBody::CellStarted {
                cell_id: app::protocol::CellId(cell + 1),
                cell_kind: app::protocol::CellKind::Code,
                language: None,
                attempt: None,
                source: None,
            });
        }
        (channel, hub, dir)
    }

    #[tokio::test]
    async fn the_history_goes_out_in_order_a_page_at_a_time() {
        let (channel, _hub, _dir) = session_of(150).await;
        let mut page = Page {
            got: Vec::new(),
            reads: usize::MAX,
        };
        let (_, mut follower) = Follower::after(Arc::clone(&channel), 20);
        let done = catch_up(
            &mut page,
            &mut follower,
            &mut PageMarkup::default(),
            SEND_PATIENCE,
        )
        .await;
        assert_eq!(done, Ok(()));
        assert_eq!(follower.given(), 150);
        let seqs: Vec<u64> = page.got.iter().map(|e| e.seq).collect();
        assert_eq!(seqs, (21..=150).collect::<Vec<_>>());
    }

    #[tokio::test]
    async fn a_page_that_stops_reading_its_history_is_dropped() {
        let (channel, _hub, _dir) = session_of(150).await;
        let mut page = Page {
            got: Vec::new(),
            reads: 10,
        };
        let (_, mut follower) = Follower::after(Arc::clone(&channel), 0);
        let done = catch_up(
            &mut page,
            &mut follower,
            &mut PageMarkup::default(),
            Duration::from_millis(100),
        )
        .await;
        assert_eq!(done, Err(()));
        assert_eq!(page.got.len(), 10);
    }

    #[test]
    fn a_close_reason_fits_its_frame() {
        let Message::Close(Some(frame)) = close(close_code::AGAIN, &"é".repeat(100)) else {
            unreachable!()
        };
        assert!(frame.reason.len() <= 123);
        assert_eq!(frame.code, 1013);
    }
}
