//! One streamed reply read into events: SSE framing, a plain JSON body,
//! the idle timeout and the reply's size bound.

use std::collections::VecDeque;
use std::pin::Pin;
use std::time::Duration;

use bytes::Bytes;
use futures::{Stream, StreamExt};

use super::delta::{Assembler, Fed};
use super::error;
use super::sse::{self, SseParser};
use crate::{LlmError, LlmEvent};

pub(super) type ByteStream = Pin<Box<dyn Stream<Item = reqwest::Result<Bytes>> + Send>>;

/// Reads one streamed reply into events.
pub(super) struct Reader {
    pub(super) body: ByteStream,
    pub(super) idle: Duration,
    pub(super) parser: SseParser,
    /// The whole body, when the server answered with plain JSON.
    pub(super) json_body: Option<Vec<u8>>,
    /// `None` once `Done` is queued.
    pub(super) assembler: Option<Assembler>,
    pub(super) queue: VecDeque<LlmEvent>,
    /// Yielded after the queued events.
    pub(super) pending_error: Option<LlmError>,
    pub(super) ended: bool,
    /// The connection failed (rather than the server saying something).
    pub(super) broken: bool,
    /// Body bytes read so far, against [`MAX_REPLY_BYTES`].
    pub(super) received: usize,
}

/// The most a reply's body may hold. It bounds every buffer the reader keeps
/// (a line without an end, a JSON body, the assembled answer) against a
/// server that streams without stopping.
const MAX_REPLY_BYTES: usize = 16 * 1024 * 1024;

impl Reader {
    /// The next event, an error (then nothing), or `None` after `Done`.
    pub(super) async fn next(&mut self) -> Option<Result<LlmEvent, LlmError>> {
        loop {
            if let Some(event) = self.queue.pop_front() {
                return Some(Ok(event));
            }
            if let Some(err) = self.pending_error.take() {
                return Some(Err(err));
            }
            if self.ended {
                return None;
            }
            match tokio::time::timeout(self.idle, self.body.next()).await {
                Err(_) => self.fail(LlmError::Timeout(self.idle)),
                Ok(Some(Ok(bytes))) if self.received + bytes.len() > MAX_REPLY_BYTES => {
                    self.fail(LlmError::MalformedStream(format!(
                        "the reply is larger than {} MiB",
                        MAX_REPLY_BYTES / (1024 * 1024)
                    )));
                }
                Ok(Some(Ok(bytes))) => {
                    self.received += bytes.len();
                    match &mut self.json_body {
                        Some(whole) => whole.extend_from_slice(&bytes),
                        None => {
                            let mut events = Vec::new();
                            self.parser.feed(&bytes, &mut events);
                            self.payloads(events);
                        }
                    }
                }
                Ok(Some(Err(e))) => {
                    self.broken = true;
                    self.fail(LlmError::MalformedStream(format!(
                        "the connection closed mid-reply ({})",
                        error::transport_detail(&e)
                    )));
                }
                Ok(None) => self.end_of_body(),
            }
        }
    }

    fn fail(&mut self, err: LlmError) {
        self.ended = true;
        self.assembler = None;
        self.pending_error = Some(err);
    }

    fn payloads(&mut self, events: Vec<sse::SseEvent>) {
        for event in events {
            let Some(assembler) = self.assembler.as_mut() else {
                return;
            };
            let mut out = Vec::new();
            let fed = assembler.feed(event.event.as_deref(), &event.data, &mut out);
            self.queue.extend(out);
            match fed {
                Ok(Fed::More) => {}
                Ok(Fed::Done) => return self.done(),
                Err(err) => return self.fail(err),
            }
        }
    }

    fn end_of_body(&mut self) {
        if let Some(whole) = self.json_body.take() {
            let text = String::from_utf8_lossy(&whole);
            self.payloads(vec![sse::SseEvent {
                event: None,
                data: text.into_owned(),
            }]);
        } else {
            let mut events = Vec::new();
            self.parser.finish(&mut events);
            self.payloads(events);
        }
        match &self.assembler {
            Some(assembler) if assembler.finished() => self.done(),
            Some(_) => self.fail(LlmError::MalformedStream(
                "the stream ended before the reply was complete".to_owned(),
            )),
            None => self.ended = true,
        }
    }

    fn done(&mut self) {
        self.ended = true;
        if let Some(assembler) = self.assembler.take() {
            self.queue.push_back(LlmEvent::Done(assembler.completion()));
        }
    }
}
