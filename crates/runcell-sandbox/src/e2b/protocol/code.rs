//! The code interpreter: executions, contexts, and the NDJSON lines a run
//! streams back, written with Python's spacing.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

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
                // runcell's own table data is for its notebook only.
                None if mime == crate::TABLE_DATA_MIME => {}
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
