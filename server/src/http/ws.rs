//! `/ws/sessions/{id}`: a session's live feed, and the way a page asks.

use std::sync::Arc;

use app::protocol::{
    ClientMessage, ErrorCode, PROTOCOL_VERSION, SUBPROTOCOL, ServerMessage, SessionEvent,
};
use axum::extract::ws::{CloseFrame, Message, Utf8Bytes, WebSocket, WebSocketUpgrade, close_code};
use axum::extract::{Path, Query, State, rejection::QueryRejection};
use axum::http::{HeaderMap, header};
use axum::response::Response;
use futures::{Sink, SinkExt, Stream, StreamExt};
use serde::Deserialize;
use tokio::sync::broadcast::error::RecvError;

use super::ApiError;
use super::owner::Owner;
use crate::agent::{TurnRefusal, TurnRequest, parse_language};
use crate::sandbox::browser::{BrowserError, Reply, TabLink};
use crate::session::SessionChannel;
use crate::state::AppState;

/// A frame bigger than this closes the connection (messages are far smaller).
const MAX_FRAME_BYTES: usize = 256 * 1024;

#[derive(Debug, Deserialize)]
pub struct Resume {
    /// The last `seq` the page has; only later events are sent.
    #[serde(default)]
    after: u64,
}

pub async fn session_socket(
    ws: WebSocketUpgrade,
    owner: Owner,
    Path(id): Path<String>,
    query: Result<Query<Resume>, QueryRejection>,
    headers: HeaderMap,
    State(state): State<AppState>,
) -> Result<Response, ApiError> {
    if !same_origin(&headers) {
        return Err(ApiError::Forbidden(
            "a session's socket opens only from runcell's own pages".into(),
        ));
    }
    let Query(resume) = query.map_err(|e| ApiError::BadRequest(e.body_text()))?;
    let channel = super::notebook::owned(&state, owner, &id).await?;
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

/// Whether a socket request comes from a page of this server. Browsers
/// send the cookie with cross-site WebSocket handshakes too, and only they
/// send `Origin`: one that names another host and port than `Host` (or
/// `X-Forwarded-Host`) is refused, and so is `null`, which the page's own
/// Python frame sends (its origin is opaque); programs without an `Origin`
/// are let through (they hold their own cookie).
fn same_origin(headers: &HeaderMap) -> bool {
    let Some(origin) = headers.get(header::ORIGIN) else {
        return true;
    };
    let Some(authority) = origin
        .to_str()
        .ok()
        .and_then(|o| o.split_once("://"))
        .map(|(_, rest)| rest.trim_end_matches('/'))
    else {
        return false;
    };
    // Behind a reverse proxy the page's host is the forwarded one.
    [header::HOST.as_str(), "x-forwarded-host"]
        .into_iter()
        .filter_map(|name| headers.get(name).and_then(|h| h.to_str().ok()))
        .any(|host| authority.eq_ignore_ascii_case(host))
}

/// Runs one connection until either side closes or the server shuts down.
/// Generic over the socket halves so that it can be driven without a network.
#[tracing::instrument(name = "ws", skip_all, fields(session.id = %channel.id()))]
pub async fn serve_socket<W, R>(
    mut sink: W,
    mut stream: R,
    channel: Arc<SessionChannel>,
    after: u64,
    state: AppState,
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
    state: &AppState,
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
    let request = match message {
        ClientMessage::Ask {
            text,
            model,
            backend,
        } => {
            if let Err(refusal) = state.runner.choose_backend(channel, backend.as_deref()) {
                return Some(refused(&refusal));
            }
            TurnRequest::Ask { text, model }
        }
        ClientMessage::Run {
            code,
            language,
            source,
            backend,
        } => match parse_language(&language).and_then(|language| {
            state
                .runner
                .choose_backend(channel, backend.as_deref())
                .map(|()| language)
        }) {
            Ok(language) => TurnRequest::Run {
                code,
                language,
                source,
            },
            Err(refusal) => return Some(refused(&refusal)),
        },
        ClientMessage::Stop => {
            state.runner.stop(channel);
            return None;
        }
        ClientMessage::RerunAll => TurnRequest::RerunAll,
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
    match state.runner.start(channel, request) {
        Ok(_) => None,
        Err(refusal) => Some(refused(&refusal)),
    }
}

async fn browser_reply(
    state: &AppState,
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

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(header::HeaderName, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.insert(name.clone(), value.parse().unwrap());
        }
        map
    }

    #[test]
    fn only_pages_of_this_server_may_open_a_socket() {
        let host = (header::HOST, "127.0.0.1:3000");
        assert!(
            same_origin(&headers(std::slice::from_ref(&host))),
            "programs send no Origin"
        );
        assert!(same_origin(&headers(&[
            host.clone(),
            (header::ORIGIN, "http://127.0.0.1:3000")
        ])));
        assert!(same_origin(&headers(&[
            host.clone(),
            (
                header::HeaderName::from_static("x-forwarded-host"),
                "runcell.example"
            ),
            (header::ORIGIN, "https://runcell.example")
        ])));
        for other in [
            "http://evil.example",
            "http://127.0.0.1:3001",
            "null",
            "http://127.0.0.1:3000.evil",
        ] {
            assert!(
                !same_origin(&headers(&[host.clone(), (header::ORIGIN, other)])),
                "{other}"
            );
        }
    }
}
