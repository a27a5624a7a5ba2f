//! E2B's wire formats, as both sides of runcell speak them: the control
//! plane's JSON, the code interpreter's NDJSON lines, envd's entries and the
//! Connect protocol's envelopes. Pinned in `shared/notes/e2b-protocol.md`
//! (e2b 2.63.0, e2b-code-interpreter 2.11.5).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// The code interpreter's port inside a sandbox.
pub const CODE_PORT: u16 = 49999;
/// envd's port (files, processes) inside a sandbox.
pub const ENVD_PORT: u16 = 49983;
/// The envd version runcell's stand-in claims: the SDKs gate features on it.
pub const ENVD_VERSION: &str = "0.6.13";
/// The code interpreter SDKs' default template.
pub const DEFAULT_TEMPLATE: &str = "code-interpreter-v1";
/// The home of a sandbox's default user.
pub const HOME: &str = "/home/user";
/// How often the code interpreter says it is still there.
pub const KEEPALIVE_SECS: u64 = 5;

/// Routing headers of every data-plane request.
pub const SANDBOX_ID_HEADER: &str = "e2b-sandbox-id";
pub const SANDBOX_PORT_HEADER: &str = "e2b-sandbox-port";
pub const ACCESS_TOKEN_HEADER: &str = "x-access-token";
pub const TRAFFIC_TOKEN_HEADER: &str = "e2b-traffic-access-token";
pub const API_KEY_HEADER: &str = "x-api-key";

// ---------------------------------------------------------------------------
// Control plane

/// `POST /sandboxes` and `POST /v2/sandboxes`.
#[derive(Clone, Debug, Default, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NewSandbox {
    #[serde(rename = "templateID")]
    pub template_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout: Option<u64>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub metadata: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub env_vars: BTreeMap<String, String>,
}

/// A created (or connected) sandbox.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SandboxJson {
    #[serde(rename = "templateID")]
    pub template_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub alias: Option<String>,
    #[serde(rename = "sandboxID")]
    pub sandbox_id: String,
    #[serde(rename = "clientID", default)]
    pub client_id: String,
    #[serde(default)]
    pub envd_version: String,
    #[serde(default)]
    pub envd_access_token: Option<String>,
    #[serde(default)]
    pub traffic_access_token: Option<String>,
    #[serde(default)]
    pub domain: Option<String>,
}

/// One of `GET /v2/sandboxes`.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ListedSandbox {
    #[serde(rename = "templateID")]
    pub template_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub alias: Option<String>,
    #[serde(rename = "sandboxID")]
    pub sandbox_id: String,
    #[serde(rename = "clientID")]
    pub client_id: String,
    pub started_at: String,
    pub end_at: String,
    pub cpu_count: u32,
    #[serde(rename = "memoryMB")]
    pub memory_mb: u64,
    #[serde(rename = "diskSizeMB")]
    pub disk_size_mb: u64,
    pub state: String,
    pub envd_version: String,
    pub metadata: BTreeMap<String, String>,
}

/// `POST /sandboxes/{id}/timeout` and `…/connect`.
#[derive(Clone, Debug, Deserialize, Serialize)]
pub struct TimeoutBody {
    pub timeout: u64,
}

/// The control plane's (and envd's HTTP) error body.
#[derive(Clone, Debug, Deserialize, Serialize)]
pub struct ErrorJson {
    pub code: u16,
    pub message: String,
}

// ---------------------------------------------------------------------------
// Code interpreter

/// `POST /execute`.
#[derive(Clone, Debug, Default, Deserialize, Serialize)]
pub struct ExecutionRequest {
    pub code: String,
    #[serde(default)]
    pub context_id: Option<String>,
    #[serde(default)]
    pub language: Option<String>,
    #[serde(default)]
    pub env_vars: Option<BTreeMap<String, String>>,
}

/// `POST /contexts` and each of `GET /contexts`.
#[derive(Clone, Debug, Default, Deserialize, Serialize)]
pub struct ContextJson {
    #[serde(default)]
    pub id: String,
    #[serde(default)]
    pub language: String,
    #[serde(default)]
    pub cwd: String,
}

/// `POST /contexts`'s body (both fields optional).
#[derive(Clone, Debug, Default, Deserialize, Serialize)]
pub struct NewContext {
    #[serde(default)]
    pub language: Option<String>,
    #[serde(default)]
    pub cwd: Option<String>,
}

/// The code interpreter's name for a language: lower case, `js` and `ts`
/// spelled out, empty meaning Python.
pub fn normalize_language(language: Option<&str>) -> String {
    let language = language.unwrap_or("").trim().to_ascii_lowercase();
    match language.as_str() {
        "" => "python".into(),
        "js" => "javascript".into(),
        "ts" => "typescript".into(),
        _ => language,
    }
}

/// One line of an execution's NDJSON stream.
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Line {
    NumberOfExecutions {
        execution_count: u64,
    },
    Stdout {
        text: String,
        #[serde(default)]
        timestamp: String,
    },
    Stderr {
        text: String,
        #[serde(default)]
        timestamp: String,
    },
    Result(ResultLine),
    Error {
        name: String,
        value: String,
        #[serde(default)]
        traceback: String,
    },
    Keepalive,
    EndOfExecution,
    /// Any type this side does not know: both SDKs ignore them.
    #[serde(other)]
    Unknown,
}

/// A rich result: a Jupyter MIME bundle, its well-known types under their
/// own names, the rest in `extra`.
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
pub struct ResultLine {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    #[serde(flatten)]
    pub formats: BTreeMap<String, serde_json::Value>,
    #[serde(default)]
    pub extra: serde_json::Map<String, serde_json::Value>,
    #[serde(default)]
    pub is_main_result: bool,
}

/// MIME types and the names a result gives them.
const FORMATS: [(&str, &str); 12] = [
    ("text/html", "html"),
    ("text/markdown", "markdown"),
    ("image/svg+xml", "svg"),
    ("image/png", "png"),
    ("image/jpeg", "jpeg"),
    ("application/pdf", "pdf"),
    ("text/latex", "latex"),
    ("application/json", "json"),
    ("application/javascript", "javascript"),
    ("e2b/data", "data"),
    ("e2b/chart", "chart"),
    ("text/plain", "text"),
];

impl ResultLine {
    /// A Jupyter MIME bundle as the code interpreter reports it: `text/plain`
    /// loses one pair of surrounding quotes, known types get their names.
    pub fn from_bundle(bundle: &serde_json::Map<String, serde_json::Value>, main: bool) -> Self {
        let mut line = Self {
            is_main_result: main,
            ..Self::default()
        };
        for (mime, value) in bundle {
            match FORMATS.iter().find(|(m, _)| m == mime) {
                Some((_, "text")) => line.text = value.as_str().map(strip_quotes),
                Some((_, name)) => {
                    line.formats.insert((*name).to_string(), value.clone());
                }
                None => {
                    line.extra.insert(mime.clone(), value.clone());
                }
            }
        }
        line
    }

    /// The MIME bundle back, as runcell's events carry it.
    pub fn to_bundle(&self) -> serde_json::Map<String, serde_json::Value> {
        let mut bundle = self.extra.clone();
        if let Some(text) = &self.text {
            bundle.insert("text/plain".into(), text.clone().into());
        }
        for (name, value) in &self.formats {
            if let Some((mime, _)) = FORMATS.iter().find(|(_, n)| n == name) {
                bundle.insert((*mime).to_string(), value.clone());
            }
        }
        bundle
    }
}

/// `'abc'` → `abc`, as the code interpreter shows a string result.
fn strip_quotes(text: &str) -> String {
    for quote in ['\'', '"'] {
        if text.len() >= 2 && text.starts_with(quote) && text.ends_with(quote) {
            return text[1..text.len() - 1].to_string();
        }
    }
    text.to_string()
}

/// A line as Python's `json.dumps(obj) + "\n"` writes it: `", "` and `": "`
/// between items, non-ASCII escaped. The code interpreter's exact bytes.
pub fn ndjson_line<T: Serialize>(value: &T) -> Vec<u8> {
    let mut out = Vec::with_capacity(128);
    let mut serializer = serde_json::Serializer::with_formatter(&mut out, PythonFormatter);
    // Serialising plain data into a Vec cannot fail.
    if value.serialize(&mut serializer).is_err() {
        out.clear();
        out.extend_from_slice(b"{}");
    }
    out.push(b'\n');
    out
}

/// Python's default `json.dumps` layout.
struct PythonFormatter;

impl serde_json::ser::Formatter for PythonFormatter {
    fn begin_array_value<W: ?Sized + std::io::Write>(
        &mut self,
        writer: &mut W,
        first: bool,
    ) -> std::io::Result<()> {
        if first {
            Ok(())
        } else {
            writer.write_all(b", ")
        }
    }

    fn begin_object_key<W: ?Sized + std::io::Write>(
        &mut self,
        writer: &mut W,
        first: bool,
    ) -> std::io::Result<()> {
        if first {
            Ok(())
        } else {
            writer.write_all(b", ")
        }
    }

    fn begin_object_value<W: ?Sized + std::io::Write>(
        &mut self,
        writer: &mut W,
    ) -> std::io::Result<()> {
        writer.write_all(b": ")
    }

    /// `ensure_ascii`: everything beyond ASCII as `\uXXXX` (pairs beyond the
    /// basic plane).
    fn write_string_fragment<W: ?Sized + std::io::Write>(
        &mut self,
        writer: &mut W,
        fragment: &str,
    ) -> std::io::Result<()> {
        for c in fragment.chars() {
            if c.is_ascii() {
                writer.write_all(&[c as u8])?;
            } else {
                let mut units = [0u16; 2];
                for unit in c.encode_utf16(&mut units) {
                    write!(writer, "\\u{unit:04x}")?;
                }
            }
        }
        Ok(())
    }
}

/// The ISO-8601 time a stream line carries, from milliseconds since the
/// epoch, as Python's `isoformat()` writes it (microseconds, `+00:00`).
pub fn timestamp(ms: u64) -> String {
    const PYTHON: &[time::format_description::BorrowedFormatItem<'_>] = time::macros::format_description!(
        "[year]-[month]-[day]T[hour]:[minute]:[second].[subsecond digits:6]+00:00"
    );
    utc(ms).format(PYTHON).unwrap_or_default()
}

/// RFC 3339 (seconds), for the control plane's times.
pub fn rfc3339(ms: u64) -> String {
    utc(ms - ms % 1000)
        .format(&time::format_description::well_known::Rfc3339)
        .unwrap_or_default()
}

/// A Unix time in milliseconds as a UTC date, at most the last second of
/// year 9999 (the formats have four-digit years).
fn utc(ms: u64) -> time::OffsetDateTime {
    const LAST_MS: u64 = 253_402_300_799_000;
    let nanos = i128::from(ms.min(LAST_MS)) * 1_000_000;
    time::OffsetDateTime::from_unix_timestamp_nanos(nanos)
        .unwrap_or(time::OffsetDateTime::UNIX_EPOCH)
}

// ---------------------------------------------------------------------------
// envd

/// An upload's answer: one per file written.
#[derive(Clone, Debug, Deserialize, Serialize)]
pub struct WrittenEntry {
    pub path: String,
    pub name: String,
    #[serde(rename = "type")]
    pub kind: String,
}

/// Connect's `filesystem.EntryInfo` in proto3 JSON (int64 as a string, zero
/// values omitted).
#[derive(Clone, Debug, Default, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct EntryInfo {
    pub name: String,
    #[serde(rename = "type", default)]
    pub kind: String,
    pub path: String,
    #[serde(default, with = "int64_string")]
    pub size: u64,
    #[serde(default)]
    pub mode: u32,
    #[serde(default)]
    pub permissions: String,
    #[serde(default)]
    pub owner: String,
    #[serde(default)]
    pub group: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub modified_time: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub symlink_target: Option<String>,
}

pub const FILE_TYPE_FILE: &str = "FILE_TYPE_FILE";
pub const FILE_TYPE_DIRECTORY: &str = "FILE_TYPE_DIRECTORY";
pub const FILE_TYPE_SYMLINK: &str = "FILE_TYPE_SYMLINK";
/// Anything else (a pipe, a socket, a device).
pub const FILE_TYPE_UNSPECIFIED: &str = "FILE_TYPE_UNSPECIFIED";

/// proto3 JSON writes int64 as a string and accepts either.
mod int64_string {
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(value: &u64, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&value.to_string())
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<u64, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Either {
            Text(String),
            Number(u64),
        }
        match Either::deserialize(deserializer)? {
            Either::Number(n) => Ok(n),
            Either::Text(text) => text.parse().map_err(serde::de::Error::custom),
        }
    }
}

/// `process.Process/Start`'s request.
#[derive(Clone, Debug, Default, Deserialize, Serialize)]
pub struct StartRequest {
    pub process: ProcessConfig,
    #[serde(default)]
    pub stdin: bool,
}

#[derive(Clone, Debug, Default, Deserialize, Serialize)]
pub struct ProcessConfig {
    pub cmd: String,
    #[serde(default)]
    pub args: Vec<String>,
    #[serde(default)]
    pub envs: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
}

/// One of `Start`'s answers: `{"event": {...}}`.
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize)]
pub struct ProcessEventJson {
    pub event: ProcessEvent,
}

#[derive(Clone, Debug, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum ProcessEvent {
    Start {
        pid: u32,
    },
    /// Base64 bytes under `stdout`, `stderr` or `pty`.
    Data(BTreeMap<String, String>),
    Keepalive {},
    End(ProcessEnd),
}

#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ProcessEnd {
    /// Omitted when 0, as Go's protojson writes it.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub exit_code: i32,
    #[serde(default)]
    pub exited: bool,
    #[serde(default)]
    pub status: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

fn is_zero(n: &i32) -> bool {
    *n == 0
}

// ---------------------------------------------------------------------------
// Connect

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

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn line(value: &impl Serialize) -> String {
        String::from_utf8(ndjson_line(value)).unwrap()
    }

    #[test]
    fn lines_are_spaced_as_python_writes_them() {
        assert_eq!(
            line(&Line::NumberOfExecutions { execution_count: 1 }),
            "{\"type\": \"number_of_executions\", \"execution_count\": 1}\n"
        );
        assert_eq!(
            line(&Line::Stdout {
                text: "hello\n".into(),
                timestamp: "2026-11-21T23:10:00.123456+00:00".into()
            }),
            "{\"type\": \"stdout\", \"text\": \"hello\\n\", \"timestamp\": \"2026-11-21T23:10:00.123456+00:00\"}\n"
        );
        let mut bundle = serde_json::Map::new();
        bundle.insert("text/plain".into(), "42".into());
        assert_eq!(
            line(&Line::Result(ResultLine::from_bundle(&bundle, true))),
            "{\"type\": \"result\", \"text\": \"42\", \"extra\": {}, \"is_main_result\": true}\n"
        );
        assert_eq!(
            line(&Line::Error {
                name: "ZeroDivisionError".into(),
                value: "division by zero".into(),
                traceback: "\u{1b}[0;31m---\u{1b}[0m\nZeroDivisionError: division by zero".into(),
            }),
            "{\"type\": \"error\", \"name\": \"ZeroDivisionError\", \"value\": \"division by zero\", \"traceback\": \"\\u001b[0;31m---\\u001b[0m\\nZeroDivisionError: division by zero\"}\n"
        );
        assert_eq!(line(&Line::Keepalive), "{\"type\": \"keepalive\"}\n");
        assert_eq!(
            line(&Line::EndOfExecution),
            "{\"type\": \"end_of_execution\"}\n"
        );
        assert_eq!(
            line(&serde_json::json!({"a": [1, 2], "é": "☃ 😀"})),
            "{\"a\": [1, 2], \"\\u00e9\": \"\\u2603 \\ud83d\\ude00\"}\n"
        );
    }

    #[test]
    fn results_name_their_formats_and_keep_the_rest_in_extra() {
        let bundle = serde_json::json!({
            "text/plain": "'abc'",
            "image/png": "iVBOR",
            "text/html": "<b>x</b>",
            "application/x-custom": "zzz",
        });
        let result = ResultLine::from_bundle(bundle.as_object().unwrap(), false);
        assert_eq!(result.text.as_deref(), Some("abc"));
        assert_eq!(result.formats["png"], "iVBOR");
        assert_eq!(result.formats["html"], "<b>x</b>");
        assert_eq!(result.extra["application/x-custom"], "zzz");
        let back = result.to_bundle();
        assert_eq!(back["image/png"], "iVBOR");
        assert_eq!(back["text/plain"], "abc");
        assert_eq!(back["application/x-custom"], "zzz");
        // The SDK's own lines parse, unknown types included.
        let parsed: Line = serde_json::from_str(
            "{\"type\": \"result\", \"text\": \"<Figure>\", \"png\": \"iVBO\", \"chart\": {\"type\": \"line\"}, \"extra\": {}, \"is_main_result\": false}",
        )
        .unwrap();
        let Line::Result(result) = parsed else {
            panic!("not a result: {parsed:?}")
        };
        assert_eq!(result.formats["png"], "iVBO");
        assert!(!result.is_main_result);
        assert_eq!(
            serde_json::from_str::<Line>("{\"type\": \"something_new\", \"x\": 1}").unwrap(),
            Line::Unknown
        );
    }

    #[test]
    fn languages_are_normalized_as_the_code_interpreter_does() {
        assert_eq!(normalize_language(None), "python");
        assert_eq!(normalize_language(Some("")), "python");
        assert_eq!(normalize_language(Some("JS")), "javascript");
        assert_eq!(normalize_language(Some("ts")), "typescript");
        assert_eq!(normalize_language(Some("Bash")), "bash");
    }

    #[test]
    fn times_are_written_as_python_and_go_write_them() {
        assert_eq!(timestamp(0), "1970-01-01T00:00:00.000000+00:00");
        assert_eq!(
            timestamp(1_795_302_600_123),
            "2026-11-21T23:10:00.123000+00:00"
        );
        assert_eq!(rfc3339(951_782_400_000), "2000-02-29T00:00:00Z");
        assert_eq!(rfc3339(951_782_400_999), "2000-02-29T00:00:00Z");
        assert_eq!(rfc3339(1_795_302_600_123), "2026-11-21T23:10:00Z");
        assert_eq!(timestamp(999), "1970-01-01T00:00:00.999000+00:00");
        assert_eq!(rfc3339(u64::MAX), "9999-12-31T23:59:59Z");
    }

    #[test]
    fn process_events_match_envd() {
        let start = ProcessEventJson {
            event: ProcessEvent::Start { pid: 77 },
        };
        assert_eq!(
            serde_json::to_string(&start).unwrap(),
            "{\"event\":{\"start\":{\"pid\":77}}}"
        );
        let data = ProcessEventJson {
            event: ProcessEvent::Data([("stdout".to_string(), "b3V0".to_string())].into()),
        };
        assert_eq!(
            serde_json::to_string(&data).unwrap(),
            "{\"event\":{\"data\":{\"stdout\":\"b3V0\"}}}"
        );
        let end = |code| ProcessEventJson {
            event: ProcessEvent::End(ProcessEnd {
                exit_code: code,
                exited: true,
                status: format!("exit status {code}"),
                error: None,
            }),
        };
        assert_eq!(
            serde_json::to_string(&end(1)).unwrap(),
            "{\"event\":{\"end\":{\"exitCode\":1,\"exited\":true,\"status\":\"exit status 1\"}}}"
        );
        assert_eq!(
            serde_json::to_string(&end(0)).unwrap(),
            "{\"event\":{\"end\":{\"exited\":true,\"status\":\"exit status 0\"}}}"
        );
        let keepalive = ProcessEventJson {
            event: ProcessEvent::Keepalive {},
        };
        assert_eq!(
            serde_json::to_string(&keepalive).unwrap(),
            "{\"event\":{\"keepalive\":{}}}"
        );
        let parsed: ProcessEventJson = serde_json::from_str(
            "{\"event\":{\"end\":{\"exited\":true,\"status\":\"exit status 0\"}}}",
        )
        .unwrap();
        assert_eq!(parsed, end(0));
    }

    #[test]
    fn entries_write_int64_as_text_and_read_either() {
        let entry = EntryInfo {
            name: "a.txt".into(),
            kind: FILE_TYPE_FILE.into(),
            path: "/home/user/a.txt".into(),
            size: 12,
            mode: 0o644,
            ..EntryInfo::default()
        };
        let json = serde_json::to_value(&entry).unwrap();
        assert_eq!(json["size"], "12");
        assert_eq!(json["type"], "FILE_TYPE_FILE");
        let back: EntryInfo =
            serde_json::from_str("{\"name\":\"a\",\"path\":\"/a\",\"size\":7}").unwrap();
        assert_eq!(back.size, 7);
    }

    #[test]
    fn envelopes_carry_flag_and_length_and_end_the_stream() {
        let message = b"{\"process\":{}}";
        let bytes = envelope(FLAG_MESSAGE, message);
        assert_eq!(&bytes[..5], &[0, 0, 0, 0, 14]);
        assert_eq!(single_envelope(&bytes).unwrap(), message);
        assert_eq!(end_stream(None), [2, 0, 0, 0, 2, b'{', b'}']);
        let failed = end_stream(Some(("not_found", "gone")));
        assert_eq!(failed[0], FLAG_END_STREAM);
        let json: serde_json::Value = serde_json::from_slice(&failed[5..]).unwrap();
        assert_eq!(json["error"]["code"], "not_found");
        assert_eq!(single_envelope(&bytes[..7]), Err(EnvelopeError::Truncated));
        let huge = [0, 0xff, 0xff, 0xff, 0xff];
        assert!(matches!(
            single_envelope(&huge),
            Err(EnvelopeError::TooLarge(_))
        ));
    }

    proptest! {
        /// Envelopes split anywhere come back whole and in order.
        #[test]
        fn envelopes_survive_any_split(
            messages in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..64), 1..6),
            cuts in proptest::collection::vec(1usize..16, 1..40),
        ) {
            let mut stream = Vec::new();
            for m in &messages {
                stream.extend(envelope(FLAG_MESSAGE, m));
            }
            stream.extend(end_stream(None));
            let mut reader = Envelopes::default();
            let mut got = Vec::new();
            let mut rest = &stream[..];
            let mut cuts = cuts.into_iter().cycle();
            while !rest.is_empty() {
                let n = cuts.next().unwrap_or(1).min(rest.len());
                reader.push(&rest[..n]);
                rest = &rest[n..];
                while let Some(envelope) = reader.next_envelope().unwrap() {
                    got.push(envelope);
                }
            }
            prop_assert!(reader.is_empty());
            prop_assert_eq!(got.len(), messages.len() + 1);
            for (i, m) in messages.iter().enumerate() {
                prop_assert_eq!(&got[i], &(FLAG_MESSAGE, m.clone()));
            }
            prop_assert_eq!(got[messages.len()].0, FLAG_END_STREAM);
        }

        /// Whatever the text, a line is one line of valid JSON, pure ASCII,
        /// that reads back as it was.
        #[test]
        fn lines_are_ascii_json_on_one_line(text in any::<String>()) {
            let bytes = ndjson_line(&Line::Stdout { text: text.clone(), timestamp: String::new() });
            prop_assert!(bytes.is_ascii());
            prop_assert_eq!(bytes.iter().filter(|b| **b == b'\n').count(), 1);
            let back: Line = serde_json::from_slice(&bytes).unwrap();
            prop_assert_eq!(back, Line::Stdout { text, timestamp: String::new() });
        }
    }
}
