//! The one tool runcell offers a model, `execute_code`, and reading its
//! arguments back.

use serde::{Deserialize, Serialize};

use super::ToolSpec;
use runcell_protocol::Language;

/// The tool's name, as models see it.
pub const EXECUTE_CODE: &str = "execute_code";

/// Languages the tool's schema offers, in the sandbox's spelling.
pub const LANGUAGES: [&str; 7] = [
    Language::Python.name(),
    Language::Javascript.name(),
    Language::Typescript.name(),
    Language::R.name(),
    Language::Java.name(),
    Language::Bash.name(),
    Language::C.name(),
];

/// `execute_code`'s arguments.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExecuteCode {
    pub language: String,
    pub code: String,
}

/// Why a tool call could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ToolCallError {
    #[error("the model called an unknown tool `{0}`")]
    UnknownTool(String),
    #[error("the model's arguments for `execute_code` are not valid: {0}")]
    BadArguments(String),
}

/// The `execute_code` tool, described for the model.
pub fn execute_code_spec() -> ToolSpec {
    ToolSpec {
        name: EXECUTE_CODE.into(),
        description: "Run a complete program in the session's sandbox and return its \
                      output. Python state (variables, imports) persists between calls."
            .into(),
        parameters: serde_json::json!({
            "type": "object",
            "properties": {
                "language": {"type": "string", "enum": LANGUAGES},
                "code": {"type": "string", "description": "The complete program, imports included."}
            },
            "required": ["language", "code"],
            "additionalProperties": false
        }),
    }
}

impl ExecuteCode {
    /// Reads a tool call's arguments. Models differ in small ways: a missing
    /// `language` means Python, and the language's case is ignored.
    pub fn parse(name: &str, arguments: &str) -> Result<Self, ToolCallError> {
        if name != EXECUTE_CODE {
            return Err(ToolCallError::UnknownTool(name.chars().take(80).collect()));
        }
        #[derive(Deserialize)]
        struct Loose {
            #[serde(default)]
            language: Option<String>,
            code: String,
        }
        let loose: Loose = serde_json::from_str(arguments.trim())
            .map_err(|e| ToolCallError::BadArguments(e.to_string()))?;
        let language = loose
            .language
            .map(|l| l.trim().to_ascii_lowercase())
            .filter(|l| !l.is_empty())
            .unwrap_or_else(|| Language::Python.name().into());
        if loose.code.trim().is_empty() {
            return Err(ToolCallError::BadArguments("`code` is empty".into()));
        }
        Ok(Self {
            language,
            code: loose.code,
        })
    }
}

/// How a program's result is shown to a model in prose (for models without
/// tools, and inside tool results): the report between these tags, then
/// what to do next.
pub const RESULT_OPEN: &str = "<result>";
pub const RESULT_CLOSE: &str = "</result>";

/// A message carrying a program's result and an instruction.
pub fn result_message(report: &str, instruction: &str) -> String {
    format!("{RESULT_OPEN}\n{report}\n{RESULT_CLOSE}\n{instruction}")
}

/// The report in a message written by [`result_message`].
pub fn result_of(message: &str) -> Option<&str> {
    let rest = message.strip_prefix(RESULT_OPEN)?;
    let end = rest.rfind(RESULT_CLOSE)?;
    Some(rest[..end].trim_matches('\n'))
}

/// What can be read of `execute_code`'s arguments while they are still
/// arriving: the language, once complete, and as much of the code as has been
/// decoded. The code only ever grows as more text arrives, so it can be shown
/// token by token.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PartialCode {
    pub language: Option<String>,
    pub code: String,
}

impl PartialCode {
    /// Reads the arguments JSON received so far (any prefix of an object).
    pub fn read(arguments: &str) -> Self {
        Self {
            language: string_field(arguments, "language")
                .filter(|(_, closed)| *closed)
                .map(|(value, _)| value.to_ascii_lowercase()),
            code: string_field(arguments, "code")
                .map(|(value, _)| value)
                .unwrap_or_default(),
        }
    }
}

/// The decoded value of the top-level string field `name` in a JSON object
/// prefix, and whether its closing quote has arrived. An escape cut off at
/// the end is held back.
fn string_field(json: &str, name: &str) -> Option<(String, bool)> {
    let key = format!("\"{name}\"");
    let mut search = 0;
    let start = loop {
        let at = search + json[search..].find(&key)?;
        let rest = json[at + key.len()..].trim_start();
        if let Some(value) = rest.strip_prefix(':') {
            let value = value.trim_start();
            if let Some(body) = value.strip_prefix('"') {
                break json.len() - body.len();
            }
        }
        search = at + key.len();
    };
    let mut out = String::new();
    let mut chars = json[start..].char_indices();
    while let Some((_, c)) = chars.next() {
        match c {
            '"' => return Some((out, true)),
            '\\' => {
                let Some((_, escape)) = chars.next() else {
                    break;
                };
                match escape {
                    'n' => out.push('\n'),
                    't' => out.push('\t'),
                    'r' => out.push('\r'),
                    'b' => out.push('\u{8}'),
                    'f' => out.push('\u{c}'),
                    'u' => {
                        let hex: String = chars.by_ref().take(4).map(|(_, c)| c).collect();
                        let Ok(unit) = u16::from_str_radix(&hex, 16) else {
                            break;
                        };
                        if hex.len() < 4 {
                            break;
                        }
                        if (0xD800..0xDC00).contains(&unit) {
                            // A surrogate pair: the low half must follow.
                            let next: String = chars.by_ref().take(6).map(|(_, c)| c).collect();
                            let low = next
                                .strip_prefix("\\u")
                                .filter(|h| h.len() == 4)
                                .and_then(|h| u16::from_str_radix(h, 16).ok());
                            let Some(low) = low else {
                                break;
                            };
                            out.extend(
                                char::decode_utf16([unit, low]).map(|r| r.unwrap_or('\u{fffd}')),
                            );
                        } else {
                            out.push(char::from_u32(u32::from(unit)).unwrap_or('\u{fffd}'));
                        }
                    }
                    other => out.push(other),
                }
            }
            c => out.push(c),
        }
    }
    Some((out, false))
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn partial_arguments_show_the_code_so_far() {
        assert_eq!(PartialCode::read(""), PartialCode::default());
        assert_eq!(PartialCode::read(r#"{"langu"#), PartialCode::default());
        let p = PartialCode::read(r#"{"language": "pyth"#);
        assert_eq!(p.language, None);
        let p = PartialCode::read(r#"{"language": "Python", "code": "print(1)\n\"#);
        assert_eq!(p.language.as_deref(), Some("python"));
        assert_eq!(p.code, "print(1)\n");
        let p = PartialCode::read(r#"{"code":"a\u00e9\ud83d\ude00b\u00"#);
        assert_eq!(p.code, "aé😀b");
        let p = PartialCode::read(r#"{"code" : "x = 1", "language": "python"}"#);
        assert_eq!(p.code, "x = 1");
    }

    proptest! {
        #[test]
        fn the_code_grows_to_the_whole_program(code in "\\PC{0,120}", ascii in any::<bool>()) {
            let arguments = if ascii {
                // Escape everything non-ASCII, as some servers do.
                let mut escaped = String::from("{\"language\": \"python\", \"code\": \"");
                for unit in code.encode_utf16() {
                    match unit {
                        0x22 => escaped.push_str("\\\""),
                        0x5c => escaped.push_str("\\\\"),
                        0x20..=0x7e => escaped.push(char::from(u8::try_from(unit).unwrap_or(b'?'))),
                        _ => escaped.push_str(&format!("\\u{unit:04x}")),
                    }
                }
                escaped.push_str("\"}");
                escaped
            } else {
                serde_json::json!({"language": "python", "code": code}).to_string()
            };
            let mut seen = String::new();
            for (end, _) in arguments.char_indices().skip(1) {
                let partial = PartialCode::read(&arguments[..end]);
                prop_assert!(partial.code.starts_with(&seen), "{:?} then {:?}", seen, partial.code);
                prop_assert!(code.starts_with(&partial.code));
                seen = partial.code;
            }
            prop_assert_eq!(PartialCode::read(&arguments).code, code);
        }
    }

    #[test]
    fn arguments_read_back() {
        let ok = ExecuteCode::parse(EXECUTE_CODE, r#"{"language":"Python","code":"print(1)"}"#);
        assert_eq!(
            ok,
            Ok(ExecuteCode {
                language: "python".into(),
                code: "print(1)".into()
            })
        );
        let defaulted = ExecuteCode::parse(EXECUTE_CODE, r#" {"code":"x=1"} "#);
        assert_eq!(defaulted.map(|c| c.language), Ok("python".into()));
        assert!(matches!(
            ExecuteCode::parse("shell", "{}"),
            Err(ToolCallError::UnknownTool(_))
        ));
        for bad in [r#"{"code":""}"#, r#"{"language":"python"}"#, "{", ""] {
            assert!(
                matches!(
                    ExecuteCode::parse(EXECUTE_CODE, bad),
                    Err(ToolCallError::BadArguments(_))
                ),
                "{bad}"
            );
        }
    }

    #[test]
    fn the_schema_names_every_language() {
        let spec = execute_code_spec();
        let names: Vec<&str> = Language::ALL.iter().map(|l| l.name()).collect();
        assert_eq!(
            spec.parameters["properties"]["language"]["enum"],
            serde_json::json!(names)
        );
    }
}
