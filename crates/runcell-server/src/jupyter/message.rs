//! Jupyter messages in their JSON form, as the kernel WebSocket carries
//! them (`/api/kernels/{id}/channels`): what a client sends, read
//! defensively into the few typed fields the gateway uses, and what the
//! gateway answers, built here.
//!
//! A message is `{"header", "parent_header", "metadata", "content",
//! "buffers", "channel"}`; a reply's `parent_header` names the request
//! (clients match replies by its `msg_id`). Nothing a client sends is kept
//! whole: a request is read into [`Incoming`] (the header's six standard
//! fields, each at most [`MAX_FIELD`] bytes, and the content fields the
//! gateway acts on), and everything else in the frame is skipped as it is
//! parsed, never held.

use serde::de::{self, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::{Deserialize, Serialize};
use serde_json::{Number, Value, json};

use runcell_sandbox::Language;

/// The version of the messaging protocol spoken.
pub const PROTOCOL_VERSION: &str = "5.3";
/// The longest header field kept (a longer `msg_id` or `msg_type` is
/// refused; a longer `session`, `username`, `date` or `version` is cut).
pub const MAX_FIELD: usize = 256;

/// The channels of a kernel connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum JupyterChannel {
    Shell,
    Iopub,
    Stdin,
    Control,
}

impl JupyterChannel {
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

/// A message from a client: only what the gateway uses of it.
#[derive(Debug, Clone, PartialEq)]
pub struct Incoming {
    pub channel: JupyterChannel,
    pub msg_type: String,
    pub msg_id: String,
    /// The client's session id (from its header), kept for the logs.
    pub session: String,
    /// What a reply's `parent_header` says of this request.
    pub parent: Parent,
    pub content: Content,
}

/// A request's header as its replies echo it: the six standard fields,
/// each short, whatever else the client put in its header.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Parent {
    msg_id: String,
    msg_type: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    session: Option<Echo>,
    #[serde(skip_serializing_if = "Option::is_none")]
    username: Option<Echo>,
    /// A string in Jupyter's clients, a number in some.
    #[serde(skip_serializing_if = "Option::is_none")]
    date: Option<Echo>,
    #[serde(skip_serializing_if = "Option::is_none")]
    version: Option<Echo>,
}

/// A header field echoed back: text cut to [`MAX_FIELD`] bytes, or a number.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
enum Echo {
    Text(String),
    Number(Number),
}

/// The content fields the gateway acts on; the rest is not kept.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Content {
    /// `execute_request`'s program (empty if missing or not text).
    pub code: String,
    pub silent: Option<bool>,
    pub store_history: Option<bool>,
    pub stop_on_error: Option<bool>,
    /// `shutdown_request`'s.
    pub restart: Option<bool>,
    /// `complete_request`'s and `inspect_request`'s.
    pub cursor_pos: Option<u64>,
    /// `inspect_request`'s.
    pub detail_level: Option<u64>,
    /// `history_request`'s (`hist_access_type` and its fields).
    pub history: History,
}

/// A `history_request`'s fields, as far as they were numbers, flags and
/// short text.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct History {
    pub access: Option<String>,
    pub output: Option<bool>,
    pub raw: Option<bool>,
    pub session: Option<i64>,
    pub start: Option<i64>,
    pub stop: Option<i64>,
    pub n: Option<i64>,
    pub pattern: Option<String>,
    pub unique: Option<bool>,
}

/// A JSON value as far as the gateway reads it: a scalar, with text cut to
/// a length as it is read; arrays and objects are skipped, not built.
#[derive(Debug, Clone, PartialEq)]
enum Scalar {
    Text(String),
    /// Text that was longer than the length it was read with (cut to it).
    Cut(String),
    Bool(bool),
    Number(Number),
    Other,
}

/// Reads a [`Scalar`], keeping at most `max` bytes of text.
struct ScalarVisitor {
    max: usize,
}

fn cut(text: &str, max: usize) -> Scalar {
    if text.len() <= max {
        return Scalar::Text(text.to_string());
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    Scalar::Cut(text[..end].to_string())
}

impl<'de> Visitor<'de> for ScalarVisitor {
    type Value = Scalar;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_bool<E: de::Error>(self, v: bool) -> Result<Scalar, E> {
        Ok(Scalar::Bool(v))
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Scalar, E> {
        Ok(Scalar::Number(v.into()))
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Scalar, E> {
        Ok(Scalar::Number(v.into()))
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Scalar, E> {
        Ok(Number::from_f64(v).map_or(Scalar::Other, Scalar::Number))
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Scalar, E> {
        Ok(cut(v, self.max))
    }
    fn visit_string<E: de::Error>(self, v: String) -> Result<Scalar, E> {
        if v.len() <= self.max {
            Ok(Scalar::Text(v))
        } else {
            Ok(cut(&v, self.max))
        }
    }
    fn visit_unit<E: de::Error>(self) -> Result<Scalar, E> {
        Ok(Scalar::Other)
    }
    fn visit_none<E: de::Error>(self) -> Result<Scalar, E> {
        Ok(Scalar::Other)
    }
    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Scalar, D::Error> {
        d.deserialize_any(self)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Scalar, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(Scalar::Other)
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Scalar, A::Error> {
        while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
        Ok(Scalar::Other)
    }
}

/// A header field: text of at most [`MAX_FIELD`] bytes.
#[derive(Debug, Clone, PartialEq)]
struct Short(Scalar);

impl<'de> Deserialize<'de> for Short {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(ScalarVisitor { max: MAX_FIELD })
            .map(Self)
    }
}

/// A content field: text whole (the frame's size bounds it).
#[derive(Debug, Clone, PartialEq)]
struct Whole(Scalar);

impl<'de> Deserialize<'de> for Whole {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(ScalarVisitor { max: usize::MAX })
            .map(Self)
    }
}

#[derive(Deserialize)]
struct Raw {
    header: RawHeader,
    #[serde(default)]
    content: Option<RawContent>,
    /// Missing in what jupyter_client's gateway client sends: shell, as
    /// Jupyter Server takes it.
    #[serde(default)]
    channel: Option<JupyterChannel>,
}

#[derive(Deserialize)]
struct RawHeader {
    msg_id: Option<Short>,
    msg_type: Option<Short>,
    session: Option<Short>,
    username: Option<Short>,
    date: Option<Short>,
    version: Option<Short>,
}

#[derive(Deserialize)]
struct RawContent {
    code: Option<Whole>,
    silent: Option<Short>,
    store_history: Option<Short>,
    stop_on_error: Option<Short>,
    restart: Option<Short>,
    cursor_pos: Option<Short>,
    detail_level: Option<Short>,
    hist_access_type: Option<Short>,
    output: Option<Short>,
    raw: Option<Short>,
    session: Option<Short>,
    start: Option<Short>,
    stop: Option<Short>,
    n: Option<Short>,
    pattern: Option<Short>,
    unique: Option<Short>,
}

/// A header's identifying field: whole text, not empty, not cut.
fn id_field(field: Option<Short>, name: &'static str) -> Result<String, MessageError> {
    match field {
        Some(Short(Scalar::Text(text))) if !text.is_empty() => Ok(text),
        _ => Err(MessageError::BadField(name)),
    }
}

fn echo(field: Option<Short>) -> Option<Echo> {
    match field?.0 {
        Scalar::Text(text) | Scalar::Cut(text) => Some(Echo::Text(text)),
        Scalar::Number(number) => Some(Echo::Number(number)),
        Scalar::Bool(_) | Scalar::Other => None,
    }
}

fn flag(field: Option<Short>) -> Option<bool> {
    match field?.0 {
        Scalar::Bool(value) => Some(value),
        _ => None,
    }
}

fn number(field: Option<Short>) -> Option<u64> {
    match field?.0 {
        Scalar::Number(n) => n.as_u64(),
        _ => None,
    }
}

fn integer(field: Option<Short>) -> Option<i64> {
    match field?.0 {
        Scalar::Number(n) => n.as_i64(),
        _ => None,
    }
}

/// Short text, whole (a cut one is as good as missing).
fn short_text(field: Option<Short>) -> Option<String> {
    match field?.0 {
        Scalar::Text(text) => Some(text),
        _ => None,
    }
}

impl Content {
    fn read(raw: RawContent) -> Self {
        Self {
            code: match raw.code {
                Some(Whole(Scalar::Text(code))) => code,
                _ => String::new(),
            },
            silent: flag(raw.silent),
            store_history: flag(raw.store_history),
            stop_on_error: flag(raw.stop_on_error),
            restart: flag(raw.restart),
            cursor_pos: number(raw.cursor_pos),
            detail_level: number(raw.detail_level),
            history: History {
                access: short_text(raw.hist_access_type),
                output: flag(raw.output),
                raw: flag(raw.raw),
                session: integer(raw.session),
                start: integer(raw.start),
                stop: integer(raw.stop),
                n: integer(raw.n),
                pattern: short_text(raw.pattern),
                unique: flag(raw.unique),
            },
        }
    }
}

impl Incoming {
    /// Reads a text frame. The frame's size is bounded by the socket
    /// (`jupyter.max_message_mib`).
    pub fn parse(frame: &str) -> Result<Self, MessageError> {
        let raw: Raw =
            serde_json::from_str(frame).map_err(|e| MessageError::Malformed(e.to_string()))?;
        let channel = raw.channel.unwrap_or(JupyterChannel::Shell);
        let header = raw.header;
        let msg_type = id_field(header.msg_type, "msg_type")?;
        let msg_id = id_field(header.msg_id, "msg_id")?;
        let session = echo(header.session);
        Ok(Self {
            channel,
            session: match &session {
                Some(Echo::Text(text)) => text.clone(),
                _ => String::new(),
            },
            parent: Parent {
                msg_id: msg_id.clone(),
                msg_type: msg_type.clone(),
                session,
                username: echo(header.username),
                date: echo(header.date),
                version: echo(header.version),
            },
            msg_type,
            msg_id,
            content: raw.content.map(Content::read).unwrap_or_default(),
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
        channel: JupyterChannel,
        msg_type: &str,
        parent: Option<&Parent>,
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
            "parent_header": parent.map_or_else(|| json!({}), |p| json!(p)),
            "metadata": {},
            "content": {},
            "buffers": [],
            "channel": channel.name(),
        });
        frame["content"] = content;
        frame.to_string()
    }

    /// `status` on iopub: `busy`, `idle`, `starting`, `restarting`.
    pub fn status(&self, parent: Option<&Parent>, state: &str) -> String {
        self.frame(
            JupyterChannel::Iopub,
            "status",
            parent,
            json!({ "execution_state": state }),
        )
    }
}

/// What the kernel says about itself (`kernel_info_reply`'s content).
pub fn kernel_info(language: Language, python_version: &str) -> Value {
    let (language_info, banner) = match language {
        Language::Javascript | Language::Typescript => {
            let (name, mime, ext) = if language == Language::Typescript {
                ("typescript", "text/typescript", ".ts")
            } else {
                ("javascript", "text/javascript", ".js")
            };
            (
                json!({
                    "name": name,
                    "version": "",
                    "mimetype": mime,
                    "file_extension": ext,
                    "pygments_lexer": name,
                    "codemirror_mode": name,
                    "nbconvert_exporter": "script",
                }),
                format!(
                    "{} on Node in runcell's sandbox (no network; limits apply)",
                    language_name(language)
                ),
            )
        }
        Language::R => (
            json!({
                "name": "R",
                "version": "",
                "mimetype": "text/x-r-source",
                "file_extension": ".r",
                "pygments_lexer": "r",
                "codemirror_mode": "r",
                "nbconvert_exporter": "script",
            }),
            "R in runcell's sandbox (no network; limits apply)".to_string(),
        ),
        Language::Java => (
            json!({
                "name": "java",
                "version": "17",
                "mimetype": "text/x-java-source",
                "file_extension": ".jshell",
                "pygments_lexer": "java",
                "codemirror_mode": "text/x-java",
                "nbconvert_exporter": "script",
            }),
            "Java (JShell) in runcell's sandbox (no network; limits apply)".to_string(),
        ),
        _ => (
            json!({
                "name": "python",
                "version": python_version,
                "mimetype": "text/x-python",
                "file_extension": ".py",
                "pygments_lexer": "ipython3",
                "codemirror_mode": { "name": "ipython", "version": 3 },
                "nbconvert_exporter": "python",
            }),
            format!("Python {python_version} in runcell's sandbox (no network; limits apply)"),
        ),
    };
    json!({
        "status": "ok",
        "protocol_version": PROTOCOL_VERSION,
        "implementation": "runcell",
        "implementation_version": env!("CARGO_PKG_VERSION"),
        "language_info": language_info,
        "banner": banner,
        "help_links": [],
        "debugger": false,
    })
}

fn language_name(language: Language) -> &'static str {
    match language {
        Language::Typescript => "TypeScript",
        Language::Javascript => "JavaScript",
        Language::R => "R",
        Language::Java => "Java",
        _ => "Python",
    }
}

/// A kernel spec the gateway offers (`/api/kernelspecs`).
pub fn kernelspec(name: &str, display_name: &str, language: Language) -> Value {
    let language = match language {
        Language::R => "R",
        other => other.name(),
    };
    json!({
        "name": name,
        "spec": {
            "argv": [],
            "env": {},
            "display_name": display_name,
            "language": language,
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
    fn a_client_message_is_read_into_the_fields_the_gateway_uses() {
        let frame = r#"{"header":{"msg_id":"m1","msg_type":"execute_request","session":"s1","username":"u","date":"2020-01-01T00:00:00Z","version":"5.3","extra":7},
            "parent_header":{},"metadata":{},"content":{"code":"1+1","silent":false,"user_expressions":{"a":[1,2]},"stop_on_error":"yes"},"buffers":[],"channel":"shell"}"#;
        let message = Incoming::parse(frame).expect("a message");
        assert_eq!(message.channel, JupyterChannel::Shell);
        assert_eq!(message.msg_type, "execute_request");
        assert_eq!(message.msg_id, "m1");
        assert_eq!(message.session, "s1");
        assert_eq!(message.content.code, "1+1");
        assert_eq!(message.content.silent, Some(false));
        assert_eq!(message.content.store_history, None);
        // A flag that is not a boolean is as good as missing.
        assert_eq!(message.content.stop_on_error, None);
        assert_eq!(
            json!(message.parent),
            json!({"msg_id": "m1", "msg_type": "execute_request", "session": "s1",
                "username": "u", "date": "2020-01-01T00:00:00Z", "version": "5.3"})
        );
    }

    #[test]
    fn the_echoed_header_keeps_six_short_fields_whatever_the_request_carried() {
        let long = "é".repeat(MAX_FIELD);
        let frame = json!({
            "header": {"msg_id": "m", "msg_type": "kernel_info_request", "session": long,
                "username": long, "date": 1.5, "version": {"nested": [long]},
                "extra": long, "more": [long, long]},
            "content": {"code": 7, "restart": true, "cursor_pos": 3},
        })
        .to_string();
        let message = Incoming::parse(&frame).expect("a message");
        let parent = json!(message.parent);
        let fields = parent.as_object().expect("an object");
        let mut names: Vec<&String> = fields.keys().collect();
        names.sort();
        assert_eq!(names, ["date", "msg_id", "msg_type", "session", "username"]);
        assert_eq!(parent["date"], 1.5);
        for field in ["session", "username"] {
            let text = parent[field].as_str().expect("text");
            assert!(
                text.len() <= MAX_FIELD && text.len() >= MAX_FIELD - 1,
                "{field}"
            );
        }
        assert_eq!(message.content.code, "");
        assert_eq!(message.content.restart, Some(true));
        assert_eq!(message.content.cursor_pos, Some(3));
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
            "a".repeat(MAX_FIELD + 1)
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
            JupyterChannel::Shell,
            "kernel_info_reply",
            Some(&request.parent),
            kernel_info(Language::Python, "3.11"),
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
        assert_eq!(message.channel, JupyterChannel::Shell);
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
