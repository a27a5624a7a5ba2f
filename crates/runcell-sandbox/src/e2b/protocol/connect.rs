//! The Connect protocol's envelopes: a flag byte, a length, a message.

/// An envelope's flag: a message.
pub const FLAG_MESSAGE: u8 = 0x00;
/// An envelope's flag: the end of a stream (`{}` or `{"error": …}`).
pub const FLAG_END_STREAM: u8 = 0x02;
/// Envelopes larger than this are refused.
pub const MAX_ENVELOPE: usize = 16 * 1024 * 1024;

/// A Connect envelope: flag, big-endian length, message.
pub fn envelope(flag: u8, message: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(5 + message.len());
    out.push(flag);
    let len = u32::try_from(message.len()).unwrap_or(u32::MAX);
    out.extend_from_slice(&len.to_be_bytes());
    out.extend_from_slice(message);
    out
}

/// Connect's error codes, by HTTP status.
pub fn connect_code(status: u16) -> &'static str {
    match status {
        400 => "invalid_argument",
        401 => "unauthenticated",
        403 => "permission_denied",
        404 => "not_found",
        409 => "already_exists",
        429 => "resource_exhausted",
        499 => "canceled",
        501 => "unimplemented",
        503 => "unavailable",
        504 => "deadline_exceeded",
        _ => "internal",
    }
}

/// The end of a stream: `{}`, or the error that ended it.
pub fn end_stream(error: Option<(&str, &str)>) -> Vec<u8> {
    let body = match error {
        None => serde_json::json!({}),
        Some((code, message)) => serde_json::json!({"error": {"code": code, "message": message}}),
    };
    envelope(FLAG_END_STREAM, body.to_string().as_bytes())
}

#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum EnvelopeError {
    #[error("the envelope is cut short")]
    Truncated,
    #[error("an envelope of {0} bytes is too large")]
    TooLarge(usize),
}

/// Reads envelopes off the front of `buffer`, leaving a partial one there.
#[derive(Debug, Default)]
pub struct Envelopes {
    buffer: Vec<u8>,
}

impl Envelopes {
    pub fn push(&mut self, bytes: &[u8]) {
        self.buffer.extend_from_slice(bytes);
    }

    /// The next whole envelope, if one has arrived.
    pub fn next_envelope(&mut self) -> Result<Option<(u8, Vec<u8>)>, EnvelopeError> {
        if self.buffer.len() < 5 {
            return Ok(None);
        }
        let len_bytes = [
            self.buffer[1],
            self.buffer[2],
            self.buffer[3],
            self.buffer[4],
        ];
        let len = u32::from_be_bytes(len_bytes) as usize;
        if len > MAX_ENVELOPE {
            return Err(EnvelopeError::TooLarge(len));
        }
        if self.buffer.len() < 5 + len {
            return Ok(None);
        }
        let flag = self.buffer[0];
        let message = self.buffer[5..5 + len].to_vec();
        self.buffer.drain(..5 + len);
        Ok(Some((flag, message)))
    }

    /// Whether bytes of an unfinished envelope remain.
    pub fn is_empty(&self) -> bool {
        self.buffer.is_empty()
    }
}

/// The one envelope of a server-streaming request's body.
pub fn single_envelope(body: &[u8]) -> Result<Vec<u8>, EnvelopeError> {
    let mut envelopes = Envelopes::default();
    envelopes.push(body);
    match envelopes.next_envelope()? {
        Some((_, message)) => Ok(message),
        None => Err(EnvelopeError::Truncated),
    }
}
