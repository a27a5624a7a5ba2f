//! The cells a served sandbox runs silently in its kernels: E2B's
//! formatters and the sandbox's environment variables as each language
//! sets them (Java's as system properties, as E2B's Java kernel has them).

use std::collections::BTreeMap;

use runcell_sandbox::Language;

/// What E2B's template registers in its Python kernel: the `e2b/data` and
/// `e2b/chart` formatters and PIL's show and save hooks.
pub(super) const E2B_FORMATTERS: &str = include_str!("e2b_formatters.py");

/// What a new kernel of `language` in an E2B sandbox runs first, silently:
/// E2B's formatters (Python) and the sandbox's variables (any kernel).
pub(super) fn setup_code(language: Language, vars: &BTreeMap<String, String>) -> String {
    let mut code = String::new();
    if language == Language::Python {
        code.push_str(E2B_FORMATTERS);
        code.push('\n');
    }
    if has_kernel(language) && !vars.is_empty() {
        code.push_str(&set_env_code(language, vars));
    }
    code
}

/// Whether a language runs in a kernel that keeps its environment.
pub(super) fn has_kernel(language: Language) -> bool {
    matches!(
        language,
        Language::Python
            | Language::Javascript
            | Language::Typescript
            | Language::R
            | Language::Java
    )
}

/// A JSON string: a string literal in Python, JavaScript, R and Java alike
/// (serde_json writes a newline as `\n`, never as a `\u000a` that Java
/// would read as a line break before the literal).
fn quoted(text: &str) -> String {
    serde_json::to_string(text).unwrap_or_else(|_| "\"\"".into())
}

/// A cell that sets environment variables in a kernel of `language`.
pub(super) fn set_env_code(language: Language, vars: &BTreeMap<String, String>) -> String {
    let json = serde_json::to_string(vars).unwrap_or_else(|_| "{}".into());
    match language {
        Language::Javascript | Language::Typescript => {
            format!("Object.assign(process.env, {json});")
        }
        Language::R => {
            let pairs: Vec<String> = vars
                .iter()
                .map(|(k, v)| format!("{} = {}", quoted(k), quoted(v)))
                .collect();
            format!("invisible(do.call(Sys.setenv, list({})))", pairs.join(", "))
        }
        // A JVM cannot change its own environment; E2B's Java kernel gives
        // a run's variables as system properties, where programs read them.
        Language::Java => vars
            .iter()
            .map(|(k, v)| format!("System.setProperty({}, {});\n", quoted(k), quoted(v)))
            .collect(),
        _ => format!("import os as _os\n_os.environ.update({json})\ndel _os"),
    }
}

/// A cell that removes `keys` from a kernel's environment and sets `vars`
/// again (undoing a run's own variables).
pub(super) fn restore_env_code(
    language: Language,
    keys: &[&String],
    vars: &BTreeMap<String, String>,
) -> String {
    let names = serde_json::to_string(keys).unwrap_or_else(|_| "[]".into());
    let unset = match language {
        Language::Javascript | Language::Typescript => {
            format!("for (const k of {names}) delete process.env[k];\n")
        }
        Language::R => {
            let list: Vec<String> = keys.iter().map(|k| quoted(k)).collect();
            format!("invisible(Sys.unsetenv(c({})))\n", list.join(", "))
        }
        Language::Java => keys
            .iter()
            .map(|k| format!("System.clearProperty({});\n", quoted(k)))
            .collect(),
        _ => format!(
            "import os as _os\nfor _k in {names}:\n    _os.environ.pop(_k, None)\ndel _os, _k\n"
        ),
    };
    if vars.is_empty() {
        unset
    } else {
        format!("{unset}{}", set_env_code(language, vars))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn environment_variables_are_set_safely_in_each_kernel() {
        let vars: BTreeMap<String, String> = [
            ("A".to_string(), "it's \"q\"".to_string()),
            ("bad key".to_string(), "x".to_string()),
        ]
        .into();
        assert_eq!(
            set_env_code(Language::Python, &vars),
            "import os as _os\n_os.environ.update({\"A\":\"it's \\\"q\\\"\",\"bad key\":\"x\"})\ndel _os"
        );
        assert!(
            set_env_code(Language::Typescript, &vars)
                .starts_with("Object.assign(process.env, {\"A\":")
        );
        assert_eq!(
            set_env_code(Language::R, &vars),
            "invisible(do.call(Sys.setenv, list(\"A\" = \"it's \\\"q\\\"\", \"bad key\" = \"x\")))"
        );
        let a = "A".to_string();
        assert_eq!(
            restore_env_code(Language::R, &[&a], &BTreeMap::new()),
            "invisible(Sys.unsetenv(c(\"A\")))\n"
        );
        assert_eq!(
            restore_env_code(Language::Javascript, &[&a], &BTreeMap::new()),
            "for (const k of [\"A\"]) delete process.env[k];\n"
        );
        assert_eq!(
            set_env_code(Language::Java, &vars),
            "System.setProperty(\"A\", \"it's \\\"q\\\"\");\nSystem.setProperty(\"bad key\", \"x\");\n"
        );
        assert_eq!(
            restore_env_code(
                Language::Java,
                &[&a],
                &[("B".to_string(), "b".to_string())].into()
            ),
            "System.clearProperty(\"A\");\nSystem.setProperty(\"B\", \"b\");\n"
        );
    }
}
