//! A small ZMTP 3.0 client for a kernel's `ipc` sockets, bounded everywhere.
//!
//! Why our own and not the `zeromq` crate: the kernel is a hostile peer (it
//! runs the session's code, which can write raw bytes into the kernel's own
//! connections), and `zeromq` 0.7 reserves whatever frame length a peer
//! declares — a valid greeting then a frame header of 2^44 bytes made
//! `BytesMut::reserve` fail and aborted the whole server. It has no option to
//! bound a frame, a message or its number of frames, and it reads through
//! background tasks into unbounded queues. Patching or vendoring it would
//! keep all of that to audit; what runcell needs of ZMTP is small: one
//! connection per socket (DEALER for shell and control, SUB for iopub), the
//! NULL mechanism, and framing. So this module is that, and nothing else.
//!
//! Every length the peer declares is checked against a constant before
//! anything is read or allocated for it (a message too big to keep but
//! plausible is read past without being kept, and reported as dropped); nothing reads ahead in the
//! background: bytes are read from the socket only when the caller asks for
//! the next message, so a kernel that writes faster than runcell reads is
//! held back by the socket's own buffer. Any violation is a [`ZmtpError`] for
//! this connection only; the caller replaces the kernel.
//!
//! The greeting says version 3.0 (libzmq 4.3 speaks 3.1 but accepts 3.0
//! peers); so a SUB subscribes with a message frame `\x01<topic>`, which is
//! how 3.0 defines it and what libzmq's XPUB (ipykernel's iopub) hands to the
//! kernel as a subscription.

use std::path::Path;

use bytes::{Buf, Bytes, BytesMut};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::UnixStream;

/// The largest frame kept. A frame is one JSON part of a Jupyter message;
/// the biggest legitimate ones are rich results (a PNG figure is base64 in
/// one frame, a large HTML table) and a stream flush. 16 MiB is many times
/// the default output limit (`Limits::output_bytes`, 1 MiB) and holds a
/// ~12 MiB image. A larger message is read past, not kept (see
/// [`MAX_SKIPPED_BYTES`]).
pub const MAX_FRAME_BYTES: usize = 16 * 1024 * 1024;
/// The largest message that is read past rather than kept: a cell that
/// prints 50 MB in one flush, or displays a 50 MB value, is legitimate, and
/// only that run's output is over its limit, so its bytes are read and
/// thrown away as they come (nothing grows) and [`Item::Dropped`] says so.
/// A frame or message that declares more than this is a broken kernel.
pub const MAX_SKIPPED_BYTES: u64 = 1 << 30;
/// The most bytes one message may hold, all frames together: one maximal
/// frame plus room for the header, parent header, metadata and identities.
pub const MAX_MESSAGE_BYTES: usize = MAX_FRAME_BYTES + 1024 * 1024;
/// The most frames one message may have. A Jupyter message is identities,
/// the delimiter, the signature and four JSON parts, plus binary buffers
/// (only comms use them); ipykernel sends 7 on iopub.
pub const MAX_FRAMES: usize = 32;
/// The largest command accepted. READY carries a few short properties
/// (`Socket-Type`, an identity of at most 255 bytes); PING and ERROR are
/// smaller still.
pub const MAX_COMMAND_BYTES: usize = 4096;
/// How much is read from the socket at a time.
const READ_CHUNK: usize = 64 * 1024;
/// The most the decoder ever buffers: a frame's header and body not yet
/// complete, plus one read.
pub const BUFFER_CAP: usize = 9 + MAX_FRAME_BYTES + READ_CHUNK;

const GREETING_LEN: usize = 64;
const FLAG_MORE: u8 = 0x01;
const FLAG_LONG: u8 = 0x02;
const FLAG_COMMAND: u8 = 0x04;
const MECHANISM_NULL: &[u8] = b"NULL";

#[derive(Debug, thiserror::Error)]
pub enum ZmtpError {
    #[error("socket: {0}")]
    Io(#[from] std::io::Error),
    #[error("the kernel closed the connection")]
    Closed,
    #[error("the kernel closed the connection in the middle of a frame")]
    Truncated,
    #[error("bad greeting: {0}")]
    Greeting(&'static str),
    #[error("unsupported ZMTP version {0}.{1}")]
    Version(u8, u8),
    #[error("unsupported security mechanism {0:?}")]
    Mechanism(String),
    #[error("bad frame flags {0:#04x}")]
    Flags(u8),
    #[error("a frame of {len} bytes (at most {MAX_FRAME_BYTES} are accepted)")]
    FrameTooLarge { len: u64 },
    #[error("a message of more than {MAX_MESSAGE_BYTES} bytes")]
    MessageTooLarge,
    #[error("a message of more than {MAX_FRAMES} frames")]
    TooManyFrames,
    #[error("a command of {len} bytes (at most {MAX_COMMAND_BYTES} are accepted)")]
    CommandTooLarge { len: u64 },
    #[error("malformed command: {0}")]
    Command(&'static str),
    #[error("the kernel refused the connection: {0}")]
    Refused(String),
    #[error("unexpected peer: {0}")]
    Peer(String),
    /// Not a failure of the connection: a message too big to keep
    /// ([`Item::Dropped`]) was read past, and the connection goes on.
    #[error("a message of {bytes} bytes was too big to keep and was dropped")]
    Dropped { bytes: u64 },
}

/// What this end of a connection is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SocketType {
    Dealer,
    Sub,
}

impl SocketType {
    fn name(self) -> &'static [u8] {
        match self {
            Self::Dealer => b"DEALER",
            Self::Sub => b"SUB",
        }
    }

    /// Whether a peer of type `peer` may talk to this one.
    fn accepts(self, peer: &[u8]) -> bool {
        match self {
            Self::Dealer => matches!(peer, b"ROUTER" | b"DEALER" | b"REP"),
            Self::Sub => matches!(peer, b"PUB" | b"XPUB"),
        }
    }
}

/// A command frame: its name and body.
#[derive(Debug, PartialEq, Eq)]
pub struct Command {
    pub name: Bytes,
    pub body: Bytes,
}

/// What the decoder found next in the byte stream.
#[derive(Debug, PartialEq, Eq)]
pub enum Item {
    /// The peer's greeting (checked: ZMTP 3.x, NULL mechanism).
    Greeting,
    Command(Command),
    /// A whole multipart message.
    Message(Vec<Bytes>),
    /// A message over [`MAX_FRAME_BYTES`] or [`MAX_MESSAGE_BYTES`] (but
    /// within [`MAX_SKIPPED_BYTES`]), read past and not kept.
    Dropped {
        bytes: u64,
    },
}

/// The bytes-to-items half of a connection, without I/O: bytes go in with
/// [`Decoder::buffer`], items come out of [`Decoder::decode`]. Its buffer never
/// holds more than [`BUFFER_CAP`] bytes if it is fed at most
/// [`Decoder::room`] bytes at a time.
#[derive(Debug, Default)]
pub struct Decoder {
    buf: BytesMut,
    greeted: bool,
    /// The frames of the message so far and their total size.
    parts: Vec<Bytes>,
    message_bytes: usize,
    /// A message being read past: its frames so far, the bytes of the
    /// current frame still to throw away, and whether more frames follow.
    skip: Option<Skip>,
}

#[derive(Debug, Default)]
struct Skip {
    total: u64,
    frames: usize,
    left: u64,
    more: bool,
}

impl Decoder {
    /// How many more bytes may be buffered now.
    pub fn room(&self) -> usize {
        READ_CHUNK.min(BUFFER_CAP.saturating_sub(self.buf.len()))
    }

    /// How many bytes are buffered and not yet decoded.
    #[cfg(test)]
    pub fn buffered(&self) -> usize {
        self.buf.len()
    }

    /// The buffer to read into (at most [`Decoder::room`] bytes).
    pub fn buffer(&mut self) -> &mut BytesMut {
        &mut self.buf
    }

    /// Whether a frame is begun and not finished (EOF now is a truncation).
    fn mid_stream(&self) -> bool {
        !self.buf.is_empty() || !self.parts.is_empty() || self.skip.is_some()
    }

    /// The next complete item, `None` if more bytes are needed.
    pub fn decode(&mut self) -> Result<Option<Item>, ZmtpError> {
        if !self.greeted {
            return self.greeting();
        }
        loop {
            if let Some(skip) = self.skip.as_mut() {
                let n = usize::try_from(skip.left)
                    .unwrap_or(usize::MAX)
                    .min(self.buf.len());
                self.buf.advance(n);
                skip.left -= n as u64;
                if skip.left > 0 {
                    return Ok(None);
                }
                if !skip.more {
                    let bytes = skip.total;
                    self.skip = None;
                    return Ok(Some(Item::Dropped { bytes }));
                }
            }
            let Some(&flags) = self.buf.first() else {
                return Ok(None);
            };
            if flags & !(FLAG_MORE | FLAG_LONG | FLAG_COMMAND) != 0 {
                return Err(ZmtpError::Flags(flags));
            }
            let command = flags & FLAG_COMMAND != 0;
            if command && flags & FLAG_MORE != 0 {
                return Err(ZmtpError::Flags(flags));
            }
            if command && (!self.parts.is_empty() || self.skip.is_some()) {
                return Err(ZmtpError::Command("a command inside a multipart message"));
            }
            let (header, len) = if flags & FLAG_LONG != 0 {
                let Some(size) = self.buf.get(1..9) else {
                    return Ok(None);
                };
                let mut size_bytes = [0u8; 8];
                size_bytes.copy_from_slice(size);
                (9, u64::from_be_bytes(size_bytes))
            } else {
                let Some(&size) = self.buf.get(1) else {
                    return Ok(None);
                };
                (2, u64::from(size))
            };
            // The bounds, before a byte of the body is waited for.
            let len = if command {
                usize::try_from(len)
                    .ok()
                    .filter(|&l| l <= MAX_COMMAND_BYTES)
                    .ok_or(ZmtpError::CommandTooLarge { len })?
            } else {
                let more = flags & FLAG_MORE != 0;
                let frames = self.parts.len() + self.skip.as_ref().map_or(0, |s| s.frames);
                if frames >= MAX_FRAMES {
                    return Err(ZmtpError::TooManyFrames);
                }
                let so_far = self
                    .skip
                    .as_ref()
                    .map_or(self.message_bytes as u64, |s| s.total);
                let total = so_far.saturating_add(len);
                if len > MAX_SKIPPED_BYTES {
                    return Err(ZmtpError::FrameTooLarge { len });
                }
                if total > MAX_SKIPPED_BYTES {
                    return Err(ZmtpError::MessageTooLarge);
                }
                let keep = self.skip.is_none()
                    && len <= MAX_FRAME_BYTES as u64
                    && total <= MAX_MESSAGE_BYTES as u64;
                if !keep {
                    // Too big to keep, small enough to read past: what was
                    // kept of this message goes, the rest is thrown away
                    // as it arrives.
                    self.buf.advance(header);
                    self.parts.clear();
                    self.message_bytes = 0;
                    self.skip = Some(Skip {
                        total,
                        frames: frames + 1,
                        left: len,
                        more,
                    });
                    continue;
                }
                // `keep` bounds it by MAX_FRAME_BYTES.
                usize::try_from(len).map_err(|_| ZmtpError::FrameTooLarge { len })?
            };
            if self.buf.len() < header + len {
                return Ok(None);
            }
            self.buf.advance(header);
            let body = self.buf.split_to(len).freeze();
            if command {
                return parse_command(body).map(|c| Some(Item::Command(c)));
            }
            self.message_bytes += len;
            self.parts.push(body);
            if flags & FLAG_MORE == 0 {
                self.message_bytes = 0;
                return Ok(Some(Item::Message(std::mem::take(&mut self.parts))));
            }
        }
    }

    fn greeting(&mut self) -> Result<Option<Item>, ZmtpError> {
        // The signature is checked as soon as it is there, so that a peer
        // that is not ZMTP is refused without waiting for the rest.
        if let Some(&first) = self.buf.first()
            && first != 0xff
        {
            return Err(ZmtpError::Greeting("no signature"));
        }
        if let Some(&tenth) = self.buf.get(9)
            && tenth != 0x7f
        {
            return Err(ZmtpError::Greeting("no signature"));
        }
        if let Some(&major) = self.buf.get(10)
            && major < 3
        {
            return Err(ZmtpError::Version(
                major,
                self.buf.get(11).copied().unwrap_or(0),
            ));
        }
        if self.buf.len() < GREETING_LEN {
            return Ok(None);
        }
        let greeting = self.buf.split_to(GREETING_LEN);
        let mechanism = &greeting[12..32];
        let name_len = mechanism
            .iter()
            .position(|&b| b == 0)
            .unwrap_or(mechanism.len());
        if &mechanism[..name_len] != MECHANISM_NULL || mechanism[name_len..].iter().any(|&b| b != 0)
        {
            return Err(ZmtpError::Mechanism(
                String::from_utf8_lossy(&mechanism[..name_len]).into_owned(),
            ));
        }
        if greeting[32] > 1 {
            return Err(ZmtpError::Greeting("bad as-server field"));
        }
        self.greeted = true;
        Ok(Some(Item::Greeting))
    }
}

fn parse_command(mut body: Bytes) -> Result<Command, ZmtpError> {
    let Some(&name_len) = body.first() else {
        return Err(ZmtpError::Command("empty"));
    };
    let name_len = usize::from(name_len);
    if name_len == 0 || body.len() < 1 + name_len {
        return Err(ZmtpError::Command("bad name"));
    }
    body.advance(1);
    let name = body.split_to(name_len);
    Ok(Command { name, body })
}

/// A property of a READY command: its name and value.
type Property<'a> = (&'a [u8], &'a [u8]);

/// The properties of a READY command, each checked against the body's
/// length.
fn ready_properties(mut body: &[u8]) -> Result<Vec<Property<'_>>, ZmtpError> {
    let mut properties = Vec::new();
    while let Some((&name_len, rest)) = body.split_first() {
        let name_len = usize::from(name_len);
        let (name, rest) = rest
            .split_at_checked(name_len)
            .ok_or(ZmtpError::Command("truncated property name"))?;
        let (size, rest) = rest
            .split_first_chunk::<4>()
            .ok_or(ZmtpError::Command("truncated property size"))?;
        let size = usize::try_from(u32::from_be_bytes(*size))
            .map_err(|_| ZmtpError::Command("property too large"))?;
        let (value, rest) = rest
            .split_at_checked(size)
            .ok_or(ZmtpError::Command("truncated property value"))?;
        properties.push((name, value));
        body = rest;
    }
    Ok(properties)
}

/// Our greeting: signature, version 3.0, NULL, as a client.
fn greeting() -> [u8; GREETING_LEN] {
    let mut greeting = [0u8; GREETING_LEN];
    greeting[0] = 0xff;
    greeting[9] = 0x7f;
    greeting[10] = 3;
    greeting[11] = 0;
    greeting[12..12 + MECHANISM_NULL.len()].copy_from_slice(MECHANISM_NULL);
    greeting
}

/// Appends one frame to `out`.
fn put_frame(out: &mut Vec<u8>, flags: u8, body: &[&[u8]]) {
    let len: usize = body.iter().map(|b| b.len()).sum();
    match u8::try_from(len) {
        Ok(short) => out.extend_from_slice(&[flags, short]),
        Err(_) => {
            out.push(flags | FLAG_LONG);
            out.extend_from_slice(&(len as u64).to_be_bytes());
        }
    }
    for part in body {
        out.extend_from_slice(part);
    }
}

/// Our READY command.
fn ready(kind: SocketType, identity: Option<&[u8]>) -> Vec<u8> {
    let mut body: Vec<u8> = Vec::new();
    body.push(5);
    body.extend_from_slice(b"READY");
    let mut property = |name: &[u8], value: &[u8]| {
        body.push(name.len() as u8);
        body.extend_from_slice(name);
        body.extend_from_slice(&(value.len() as u32).to_be_bytes());
        body.extend_from_slice(value);
    };
    property(b"Socket-Type", kind.name());
    if let Some(identity) = identity {
        property(b"Identity", identity);
    }
    let mut out = Vec::new();
    put_frame(&mut out, FLAG_COMMAND, &[&body]);
    out
}

/// How often, and how far apart, a refused connection to a socket that
/// exists is tried again: 2 s in all, longer than a loaded machine takes
/// from a kernel's `bind()` to its `listen()`.
const CONNECT_REFUSED_TRIES: u32 = 200;
const CONNECT_REFUSED_PAUSE: std::time::Duration = std::time::Duration::from_millis(10);

/// One ZMTP connection over a unix socket.
#[derive(Debug)]
pub struct Connection {
    stream: UnixStream,
    decoder: Decoder,
}

impl Connection {
    /// Connects to the socket at `path`, which must be served by a process
    /// of `peer_uid` (checked with `SO_PEERCRED` before a byte is sent), and
    /// completes the handshake. An identity (at most 255 bytes, not starting
    /// with 0) names a DEALER to the kernel's ROUTER.
    ///
    /// A socket file appears at `bind()` and accepts only after `listen()`:
    /// a connection refused in between is tried again for a short while
    /// (the caller bounds the whole start with its own timeout).
    pub async fn connect(
        path: &Path,
        kind: SocketType,
        identity: Option<&[u8]>,
        peer_uid: u32,
    ) -> Result<Self, ZmtpError> {
        let mut refused = 0;
        let stream = loop {
            match UnixStream::connect(path).await {
                Ok(stream) => break stream,
                Err(e)
                    if e.kind() == std::io::ErrorKind::ConnectionRefused
                        && refused < CONNECT_REFUSED_TRIES =>
                {
                    refused += 1;
                    tokio::time::sleep(CONNECT_REFUSED_PAUSE).await;
                }
                Err(e) => return Err(e.into()),
            }
        };
        let uid = stream.peer_cred()?.uid();
        if uid != peer_uid {
            return Err(ZmtpError::Peer(format!(
                "the socket is served by uid {uid}, not {peer_uid}"
            )));
        }
        Self::handshake(stream, kind, identity).await
    }

    /// The handshake over an already connected stream.
    pub async fn handshake(
        stream: UnixStream,
        kind: SocketType,
        identity: Option<&[u8]>,
    ) -> Result<Self, ZmtpError> {
        if identity.is_some_and(|id| id.is_empty() || id.len() > 255 || id[0] == 0) {
            return Err(ZmtpError::Peer(
                "an identity must be 1 to 255 bytes, not starting with 0".into(),
            ));
        }
        let mut connection = Self {
            stream,
            decoder: Decoder::default(),
        };
        let mut hello = greeting().to_vec();
        hello.extend_from_slice(&ready(kind, identity));
        connection.stream.write_all(&hello).await?;
        match connection.next_item().await? {
            Item::Greeting => {}
            _ => return Err(ZmtpError::Greeting("missing")),
        }
        let command = match connection.next_item().await? {
            Item::Command(command) => command,
            Item::Message(_) | Item::Dropped { .. } | Item::Greeting => {
                return Err(ZmtpError::Command("a message before READY"));
            }
        };
        match &command.name[..] {
            b"READY" => {}
            b"ERROR" => return Err(ZmtpError::Refused(error_reason(&command.body))),
            _ => return Err(ZmtpError::Command("expected READY")),
        }
        let properties = ready_properties(&command.body)?;
        let peer_type = properties
            .iter()
            .find(|(name, _)| name.eq_ignore_ascii_case(b"Socket-Type"))
            .map(|(_, value)| *value)
            .ok_or(ZmtpError::Command("READY without Socket-Type"))?;
        if !kind.accepts(peer_type) {
            return Err(ZmtpError::Peer(format!(
                "a {} socket, which a {} cannot talk to",
                String::from_utf8_lossy(peer_type),
                String::from_utf8_lossy(kind.name())
            )));
        }
        Ok(connection)
    }

    /// Subscribes a SUB to messages whose first frame starts with `topic`.
    pub async fn subscribe(&mut self, topic: &[u8]) -> Result<(), ZmtpError> {
        let mut out = Vec::new();
        put_frame(&mut out, 0, &[&[1u8][..], topic]);
        self.stream.write_all(&out).await?;
        Ok(())
    }

    /// Sends one multipart message.
    pub async fn send(&mut self, frames: &[&[u8]]) -> Result<(), ZmtpError> {
        let total: usize = frames.iter().map(|f| f.len() + 9).sum();
        let mut out = Vec::with_capacity(total);
        for (i, frame) in frames.iter().enumerate() {
            let more = if i + 1 < frames.len() { FLAG_MORE } else { 0 };
            put_frame(&mut out, more, &[*frame]);
        }
        self.stream.write_all(&out).await?;
        Ok(())
    }

    /// The next message. Commands between messages (PING, a late
    /// SUBSCRIBE) are skipped; an ERROR ends the connection. Cancel-safe:
    /// what was read stays in the decoder.
    pub async fn recv(&mut self) -> Result<Vec<Bytes>, ZmtpError> {
        loop {
            match self.next_item().await? {
                Item::Message(frames) => return Ok(frames),
                Item::Dropped { bytes } => return Err(ZmtpError::Dropped { bytes }),
                Item::Command(command) if &command.name[..] == b"ERROR" => {
                    return Err(ZmtpError::Refused(error_reason(&command.body)));
                }
                Item::Command(_) => {}
                Item::Greeting => return Err(ZmtpError::Greeting("twice")),
            }
        }
    }

    async fn next_item(&mut self) -> Result<Item, ZmtpError> {
        loop {
            if let Some(item) = self.decoder.decode()? {
                return Ok(item);
            }
            let room = self.decoder.room();
            let buf = self.decoder.buffer();
            buf.reserve(room);
            let read = self
                .stream
                .read_buf(&mut bytes::BufMut::limit(buf, room))
                .await?;
            if read == 0 {
                return Err(if self.decoder.mid_stream() {
                    ZmtpError::Truncated
                } else {
                    ZmtpError::Closed
                });
            }
        }
    }
}

/// The reason an ERROR command gives (one length-prefixed string).
fn error_reason(body: &[u8]) -> String {
    let reason = body
        .split_first()
        .and_then(|(&len, rest)| rest.get(..usize::from(len)))
        .unwrap_or(&[]);
    String::from_utf8_lossy(reason).into_owned()
}

#[cfg(test)]
mod tests;
