//! Jupyter messages in their JSON form, as the kernel WebSocket carries
//! them (`/api/kernels/{id}/channels`): what a client sends, read
//! defensively, and what the gateway answers, built here.
//!
//! A message is `{"header", "parent_header", "metadata", "content",
//! "buffers", "channel"}`; a reply's `parent_header` is the request's
//! header, verbatim, which is how clients match replies to requests.

use serde::Deserialize;
use serde_json::{Map, Value, json};

/// The version of the messaging protocol spoken.
pub const PROTOCOL_VERSION: &str = "5.3";
/// The longest message id, session id or message type accepted.
const MAX_ID: usize = 256;

/// The channels of a kernel connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Channel {
    Shell,
    Iopub,
    Stdin,
    Control,
}

impl Channel {
    pub fn name(self) -> &'static str {
        match self {
            Self::Shell => "shell",
            Self::Iopub => "iopub",
            Self::Stdin => "stdin",
            Self::Control => "control",
        }
    }
}

/// Why a client's frame is not a message.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum MessageError {
    #[error("not a Jupyter message: {0}")]
    Malformed(String),
    #[error("the message's {0} is missing or too long")]
    BadField(&'static str),
}

/// A message from a client.
#[derive(Debug, Clone, PartialEq)]
pub struct Incoming {
    pub channel: Channel,
    pub msg_type: String,
    pub msg_id: String,
    /// The client's session id (from its header), echoed in nothing of
    /// ours but kept for the logs.
    pub session: String,
    /// The header as sent: a reply's `parent_header`.
    pub header: Map<String, Value>,
    pub content: Map<String, Value>,
}

#[derive(Deserialize)]
struct Raw {
    header: Map<String, Value>,
    #[serde(default)]
    content: Option<Map<String, Value>>,
    /// Missing in what jupyter_client's gateway client sends: shell, as
    /// Jupyter Server takes it.
    #[serde(default)]
    channel: Option<Channel>,
}

fn short_str<'a>(
    header: &'a Map<String, Value>,
    field: &'static str,
) -> Result<&'a str, MessageError> {
    match header.get(field) {
        Some(Value::String(s)) if !s.is_empty() && s.len() <= MAX_ID => Ok(s),
        _ => Err(MessageError::BadField(field)),
    }
}

impl Incoming {
    /// Reads a text frame. The frame's size is bounded by the socket.
    pub fn parse(frame: &str) -> Result<Self, MessageError> {
        let raw: Raw =
            serde_json::from_str(frame).map_err(|e| MessageError::Malformed(e.to_string()))?;
        let channel = raw.channel.unwrap_or(Channel::Shell);
        let msg_type = short_str(&raw.header, "msg_type")?.to_string();
        let msg_id = short_str(&raw.header, "msg_id")?.to_string();
        let session = short_str(&raw.header, "session")
            .map(str::to_string)
            .unwrap_or_default();
        Ok(Self {
            channel,
            msg_type,
            msg_id,
            session,
            header: raw.header,
            content: raw.content.unwrap_or_default(),
        })
    }

    /// Reads a binary frame in Jupyter's legacy framing: a big-endian count
    /// of parts, their offsets, the message's JSON, then its buffers (which
    /// the gateway has no use for: no widget comms).
    pub fn parse_binary(frame: &[u8]) -> Result<Self, MessageError> {
        let word = |at: usize| -> Option<usize> {
            let bytes: [u8; 4] = frame.get(at..at + 4)?.try_into().ok()?;
            usize::try_from(u32::from_be_bytes(bytes)).ok()
        };
        let bad = || MessageError::Malformed("a binary frame with bad offsets".into());
        let parts = word(0).filter(|n| (1..=64).contains(n)).ok_or_else(bad)?;
        let start = word(4).ok_or_else(bad)?;
        let end = if parts > 1 {
            word(8).ok_or_else(bad)?
        } else {
            frame.len()
        };
        let json = frame
            .get(start..end)
            .filter(|_| start >= 4 * (parts + 1))
            .ok_or_else(bad)?;
        let text = std::str::from_utf8(json)
            .map_err(|_| MessageError::Malformed("a binary frame's JSON is not UTF-8".into()))?;
        Self::parse(text)
    }

    /// A string field of the content, if it is one.
    pub fn text(&self, field: &str) -> Option<&str> {
        self.content.get(field).and_then(Value::as_str)
    }

    /// A boolean field of the content, or `default`.
    pub fn flag(&self, field: &str, default: bool) -> bool {
        self.content
            .get(field)
            .and_then(Value::as_bool)
            .unwrap_or(default)
    }
}

/// The time now, as Jupyter gives it (ISO 8601, UTC, microseconds): Jupyter
/// Server parses a kernel's `last_activity` with exactly this format.
pub fn now_iso() -> String {
    const FORMAT: &[time::format_description::BorrowedFormatItem<'_>] = time::macros::format_description!(
        "[year]-[month]-[day]T[hour]:[minute]:[second].[subsecond digits:6]Z"
    );
    time::OffsetDateTime::now_utc()
        .format(FORMAT)
        .unwrap_or_else(|_| "1970-01-01T00:00:00.000000Z".into())
}

/// Builds the gateway's messages for one kernel.
#[derive(Debug, Clone)]
pub struct Outgoing {
    /// The kernel's own session id, in every header it sends.
    session: String,
}

impl Outgoing {
    pub fn new(session: String) -> Self {
        Self { session }
    }

    /// One message, as the JSON text of a frame; `msg_id` and `msg_type`
    /// also at the top, where jupyter_client's gateway client reads them.
    pub fn frame(
        &self,
        channel: Channel,
        msg_type: &str,
        parent: Option<&Map<String, Value>>,
        content: Value,
    ) -> String {
        let msg_id = uuid::Uuid::new_v4().to_string();
        let mut frame = json!({
            "msg_id": msg_id,
            "msg_type": msg_type,
            "header": {
                "msg_id": msg_id,
                "msg_type": msg_type,
                "username": "runcell",
                "session": self.session,
                "date": now_iso(),
                "version": PROTOCOL_VERSION,
            },
            "parent_header": parent.cloned().unwrap_or_default(),
            "metadata": {},
            "content": {},
            "buffers": [],
            "channel": channel.name(),
        });
        frame["content"] = content;
        frame.to_string()
    }

    /// `status` on iopub: `busy`, `idle`, `starting`, `restarting`.
    pub fn status(&self, parent: Option<&Map<String, Value>>, state: &str) -> String {
        self.frame(
            Channel::Iopub,
            "status",
            parent,
            json!({ "execution_state": state }),
        )
    }
}

/// What the kernel says about itself (`kernel_info_reply`'s content).
pub fn kernel_info(python_version: &str) -> Value {
    json!({
        "status": "ok",
        "protocol_version": PROTOCOL_VERSION,
        "implementation": "runcell",
        "implementation_version": env!("CARGO_PKG_VERSION"),
        "language_info": {
            "name": "python",
            "version": python_version,
            "mimetype": "text/x-python",
            "file_extension": ".py",
            "pygments_lexer": "ipython3",
            "codemirror_mode": { "name": "ipython", "version": 3 },
            "nbconvert_exporter": "python",
        },
        "banner": format!("Python {python_version} in runcell's sandbox (no network; limits apply)"),
        "help_links": [],
        "debugger": false,
    })
}

/// The kernel spec the gateway offers (`/api/kernelspecs`).
pub fn kernelspec(name: &str, display_name: &str) -> Value {
    json!({
        "name": name,
        "spec": {
            "argv": [],
            "env": {},
            "display_name": display_name,
            "language": "python",
            "interrupt_mode": "message",
            "metadata": { "runcell": { "sandboxed": true } },
        },
        "resources": {},
    })
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn a_client_message_is_read_with_its_header_kept_verbatim() {
        let frame = r#"{"header":{"msg_id":"m1","msg_type":"execute_request","session":"s1","username":"u","date":"2020-01-01T00:00:00Z","version":"5.3","extra":7},
            "parent_header":{},"metadata":{},"content":{"code":"1+1","silent":false},"buffers":[],"channel":"shell"}"#;
        let message = Incoming::parse(frame).expect("a message");
        assert_eq!(message.channel, Channel::Shell);
        assert_eq!(message.msg_type, "execute_request");
        assert_eq!(message.msg_id, "m1");
        assert_eq!(message.text("code"), Some("1+1"));
        assert!(!message.flag("silent", true));
        assert!(message.flag("store_history", true));
        assert_eq!(message.header.get("extra"), Some(&json!(7)));
    }

    #[test]
    fn frames_that_are_not_messages_are_refused_with_a_reason() {
        for (frame, why) in [
            ("", "not a Jupyter message"),
            ("[1,2]", "not a Jupyter message"),
            (r#"{"header":{}}"#, "msg_type"),
            (r#"{"header":{"msg_id":"a"},"channel":"shell"}"#, "msg_type"),
            (r#"{"header":{"msg_type":"x"},"channel":"shell"}"#, "msg_id"),
            (
                r#"{"header":{"msg_type":"x","msg_id":"a"},"channel":"nope"}"#,
                "not a Jupyter message",
            ),
            (
                r#"{"header":{"msg_type":7,"msg_id":"a"},"channel":"shell"}"#,
                "msg_type",
            ),
        ] {
            let error = Incoming::parse(frame).expect_err(frame).to_string();
            assert!(error.contains(why), "{frame}: {error}");
        }
        let long = format!(
            r#"{{"header":{{"msg_type":"x","msg_id":"{}"}},"channel":"shell"}}"#,
            "a".repeat(MAX_ID + 1)
        );
        assert_eq!(
            Incoming::parse(&long),
            Err(MessageError::BadField("msg_id"))
        );
    }

    #[test]
    fn a_reply_names_its_request_as_parent() {
        let request = Incoming::parse(
            r#"{"header":{"msg_id":"m1","msg_type":"kernel_info_request","session":"s"},"channel":"shell"}"#,
        )
        .expect("a message");
        let out = Outgoing::new("kernel-session".into());
        let frame = out.frame(
            Channel::Shell,
            "kernel_info_reply",
            Some(&request.header),
            kernel_info("3.11"),
        );
        let value: Value = serde_json::from_str(&frame).expect("JSON");
        assert_eq!(value["parent_header"]["msg_id"], "m1");
        assert_eq!(value["header"]["msg_type"], "kernel_info_reply");
        assert_eq!(value["header"]["session"], "kernel-session");
        assert_eq!(value["channel"], "shell");
        assert_eq!(value["content"]["language_info"]["name"], "python");
    }

    #[test]
    fn a_message_without_a_channel_is_for_shell_and_a_binary_frame_is_read() {
        let json = r#"{"header":{"msg_id":"m","msg_type":"execute_request","session":"s","date":1795686810.8},"msg_id":"m","msg_type":"execute_request","parent_header":{},"content":{"code":"1"},"metadata":{}}"#;
        let message = Incoming::parse(json).expect("a message");
        assert_eq!(message.channel, Channel::Shell);
        // Two buffers after the JSON, as Jupyter Server frames them.
        let mut frame = Vec::new();
        let start = 16u32;
        let json_end = start + u32::try_from(json.len()).expect("short");
        for word in [3u32, start, json_end, json_end + 2] {
            frame.extend_from_slice(&word.to_be_bytes());
        }
        frame.extend_from_slice(json.as_bytes());
        frame.extend_from_slice(b"b1b2");
        assert_eq!(Incoming::parse_binary(&frame), Ok(message));
        for bad in [
            &b""[..],
            &[0, 0, 0, 1][..],
            &[0, 0, 0, 1, 0, 0, 0, 2][..],
            &[255; 12][..],
        ] {
            assert!(Incoming::parse_binary(bad).is_err());
        }
    }

    #[test]
    fn times_have_microseconds_and_a_z() {
        let now = now_iso();
        assert_eq!(now.len(), "2026-11-26T10:00:00.123456Z".len(), "{now}");
        assert!(now.ends_with('Z') && now.contains('.'), "{now}");
    }

    proptest! {
        #[test]
        fn any_frame_is_read_or_refused_without_panicking(frame in ".{0,300}") {
            let _ = Incoming::parse(&frame);
        }

        #[test]
        fn any_binary_frame_is_read_or_refused_without_panicking(frame in proptest::collection::vec(any::<u8>(), 0..200)) {
            let _ = Incoming::parse_binary(&frame);
        }
    }
}
