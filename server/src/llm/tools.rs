//! The one tool runcell offers a model, `execute_code`, and reading its
//! arguments back.

use serde::{Deserialize, Serialize};

use super::ToolSpec;

/// The tool's name, as models see it.
pub const EXECUTE_CODE: &str = "execute_code";

/// Languages the tool's schema offers, in the sandbox's spelling.
pub const LANGUAGES: [&str; 4] = ["python", "javascript", "bash", "c"];

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
            .unwrap_or_else(|| "python".into());
        if loose.code.trim().is_empty() {
            return Err(ToolCallError::BadArguments("`code` is empty".into()));
        }
        Ok(Self {
            language,
            code: loose.code,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
        assert_eq!(spec.parameters["properties"]["language"]["enum"][3], "c");
    }
}
