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
use tokio::sync::broadcast::error::RecvError;

use tokio_util::sync::CancellationToken;

use super::ApiError;
use super::host::AllowedHosts;
use super::owner::Owner;
use crate::agent::TurnRefusal;
use crate::notebook::{Notebooks, Turn, parse_session_id};
use crate::sandbox::browser::{BrowserError, BrowserTabs, Reply, TabLink};
use crate::session::SessionChannel;
use crate::state::AppState;

/// A frame bigger than this closes the connection (messages are far smaller).
pub(crate) const MAX_FRAME_BYTES: usize = 256 * 1024;

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
    shutdown: CancellationToken,
}

impl FromRef<AppState> for SocketState {
    fn from_ref(state: &AppState) -> Self {
        Self {
            hosts: state.hosts.clone(),
            notebooks: Arc::clone(&state.notebooks),
            browser: Arc::clone(&state.browser),
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
    Ok(ws
        .protocols([SUBPROTOCOL])
        .max_message_size(MAX_FRAME_BYTES)
        .on_upgrade(move |socket: WebSocket| {
            let (sink, stream) = socket.split();
            async move {
                let _open = crate::metrics::SocketOpen::new();
                serve_socket(sink, stream, channel, resume.after, state).await;
            }
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
) where
    W: Sink<Message> + Unpin,
    R: Stream<Item = Result<Message, axum::Error>> + Unpin,
{
    let (backlog, last_seq, mut live) = channel.subscribe(after);
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
    let mut sent = after.min(last_seq);
    for event in backlog {
        if send_event(&mut sink, &mut sent, event).await.is_err() {
            return;
        }
    }
    tracing::debug!(after, "page connected");

    loop {
        tokio::select! {
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
            received = live.recv() => {
                let events = match received {
                    Ok(event) => vec![event],
                    // Fell behind the live buffer: catch up from the history.
                    Err(RecvError::Lagged(_)) => channel.events_after(sent),
                    Err(RecvError::Closed) => break,
                };
                let mut failed = false;
                for event in events {
                    failed = send_event(&mut sink, &mut sent, event).await.is_err();
                    if failed {
                        break;
                    }
                }
                if failed {
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
        } => Turn::Ask {
            text,
            model,
            backend,
        },
        ClientMessage::Run {
            code,
            language,
            source,
            backend,
        } => Turn::Run {
            code,
            language,
            source,
            backend,
        },
        ClientMessage::Stop => {
            state.notebooks.stop(channel);
            return None;
        }
        ClientMessage::RerunAll => Turn::RerunAll,
        ClientMessage::BrowserAttach { kernel } => {
            return state
                .browser
                .attach(channel.id(), link, &kernel)
                .err()
                .map(|e| refusal_message(ErrorCode::BadFrame, &e.to_string()));
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

async fn send_event<W: Sink<Message> + Unpin>(
    sink: &mut W,
    sent: &mut u64,
    event: SessionEvent,
) -> Result<(), ()> {
    if event.seq <= *sent {
        return Ok(());
    }
    *sent = event.seq;
    send(sink, &ServerMessage::Event(event)).await
}

async fn send<W: Sink<Message> + Unpin>(sink: &mut W, message: &ServerMessage) -> Result<(), ()> {
    let text = serde_json::to_string(message).map_err(|err| {
        tracing::error!(%err, "cannot encode a frame");
    })?;
    sink.send(Message::Text(text.into())).await.map_err(|_| ())
}
