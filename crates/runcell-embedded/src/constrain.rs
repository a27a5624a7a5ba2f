//! Constrained decoding with llguidance: the vocabulary as a token trie, a
//! grammar per request (a JSON schema, or "one of these tool calls"), and a
//! per-step mask of the tokens that keep the reply valid.

use std::sync::Arc;

use llguidance::api::TopLevelGrammar;
use llguidance::toktrie::{self, TokEnv, TokRxInfo, TokTrie, TokenId, TokenizerEnv};
use llguidance::{Matcher, ParserFactory};
use serde_json::{Value, json};

use super::tokenizer::GgufTokenizer;
use runcell_llm::ToolSpec;

/// How JSON is laid out under constraint: Python's `json.dumps` style, which
/// is what the model saw in training; no free whitespace to loop in.
fn with_layout(schema: &Value) -> Value {
    let mut schema = match schema {
        Value::Object(_) => schema.clone(),
        // `true` / `{}`: any JSON value.
        _ => json!({}),
    };
    if let Value::Object(map) = &mut schema {
        map.insert(
            "x-guidance".to_string(),
            json!({
                "whitespace_flexible": false,
                "item_separator": ", ",
                "key_separator": ": ",
                "lenient": true,
            }),
        );
    }
    schema
}

/// The vocabulary, as llguidance sees it.
struct GgufTokEnv {
    trie: TokTrie,
    tokenizer: Arc<GgufTokenizer>,
}

impl TokenizerEnv for GgufTokEnv {
    fn tok_trie(&self) -> &TokTrie {
        &self.trie
    }

    fn tokenize_bytes(&self, s: &[u8]) -> Vec<TokenId> {
        self.tokenizer
            .encode(&String::from_utf8_lossy(s))
            .unwrap_or_default()
    }
}

/// Builds matchers for one model's vocabulary (built once, at load).
pub(crate) struct Constrainer {
    factory: ParserFactory,
}

impl std::fmt::Debug for Constrainer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Constrainer").finish_non_exhaustive()
    }
}

/// What to constrain a reply to.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Constraint {
    /// JSON text valid against this schema.
    Json(Value),
    /// `{"name": <one of the tools>, "arguments": <its parameters>}`, then
    /// `tail` (the closing `\n</tool_call>` of Qwen-style templates: without
    /// it the model, which writes `"}}` and a newline as one token, is pushed
    /// into leaving the string open).
    ToolCall { tools: Vec<ToolSpec>, tail: String },
    /// A fenced code block, ```` ```<language>\n<code>``` ````: how small
    /// coder models write programs best; turned into an `execute_code`-shaped
    /// call (`{"language", "code"}`) by the caller.
    FencedCode { languages: Vec<String> },
}

/// The languages of a tool shaped like `execute_code` (an object of exactly
/// a `language` string enum and a `code` string), if it is one.
pub(crate) fn code_tool_languages(tool: &ToolSpec) -> Option<Vec<String>> {
    let props = tool.parameters.get("properties")?.as_object()?;
    if props.len() != 2 || props.get("code")?.get("type")? != "string" {
        return None;
    }
    let languages: Vec<String> = props
        .get("language")?
        .get("enum")?
        .as_array()?
        .iter()
        .map(|v| v.as_str().map(str::to_string))
        .collect::<Option<_>>()?;
    let safe = |l: &String| {
        !l.is_empty()
            && l.chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '+' || c == '-' || c == '_')
    };
    (languages.iter().all(safe) && !languages.is_empty()).then_some(languages)
}

/// The grammar of a fenced code block in one of `languages`.
fn fenced_code_lark(languages: &[String]) -> String {
    let langs: Vec<String> = languages
        .iter()
        .map(|l| Value::from(l.as_str()).to_string())
        .collect();
    format!(
        // The optional newline after the closing fence: the model writes
        // "```\n" as one token, and forbidding it derails the block's end.
        "start: \"```\" lang \"\\n\" code \"\\n\"?\nlang: {}\ncode[suffix=\"```\"]: /(.|\\n)*/\n",
        langs.join(" | ")
    )
}

/// The grammar of a tool call: one of `tools`, then `tail`.
fn tool_call_lark(tools: &[ToolSpec], tail: &str) -> String {
    let alternatives: Vec<String> = (0..tools.len()).map(|i| format!("call{i}")).collect();
    let mut lark = format!("start: ({})", alternatives.join(" | "));
    if !tail.is_empty() {
        lark.push_str(&format!(" {}", Value::from(tail)));
    }
    lark.push('\n');
    for (i, tool) in tools.iter().enumerate() {
        let prefix = format!(
            "{{\"name\": {}, \"arguments\": ",
            Value::from(tool.name.as_str())
        );
        lark.push_str(&format!(
            "call{i}: {} args{i} \"}}\"\n",
            Value::from(prefix)
        ));
        lark.push_str(&format!(
            "args{i}: %json {}\n",
            with_layout(&tool.parameters)
        ));
    }
    lark
}

impl Constrainer {
    pub(crate) fn new(tokenizer: Arc<GgufTokenizer>) -> Result<Self, String> {
        let vocab_size = tokenizer.vocab_size();
        let words: Vec<Vec<u8>> = (0..vocab_size as u32)
            .map(|id| {
                if tokenizer.is_control(id) {
                    let mut w = vec![TokTrie::SPECIAL_TOKEN_MARKER];
                    w.extend_from_slice(tokenizer.name(id).as_bytes());
                    w
                } else {
                    tokenizer.token_bytes(id).to_vec()
                }
            })
            .collect();
        let mut info = TokRxInfo::new(vocab_size as u32, tokenizer.eos);
        info.tok_bos = tokenizer.bos;
        info.tok_end_of_turn = Some(tokenizer.eos);
        let trie = TokTrie::from(&info, &words);
        let env: TokEnv = Arc::new(GgufTokEnv { trie, tokenizer });
        let mut factory = ParserFactory::new_simple(&env).map_err(|e| e.to_string())?;
        factory.quiet();
        Ok(Self { factory })
    }

    /// A fresh matcher for `constraint`.
    pub(crate) fn matcher(&self, constraint: &Constraint) -> Result<Matcher, String> {
        let grammar = match constraint {
            Constraint::Json(schema) => TopLevelGrammar::from_json_schema(with_layout(schema)),
            Constraint::ToolCall { tools, tail } => {
                TopLevelGrammar::from_lark(tool_call_lark(tools, tail))
            }
            Constraint::FencedCode { languages } => {
                TopLevelGrammar::from_lark(fenced_code_lark(languages))
            }
        };
        let parser = self
            .factory
            .create_parser(grammar)
            .map_err(|e| format!("constraint: {e}"))?;
        Ok(Matcher::new(Ok(parser)))
    }
}

/// Sets every logit the matcher forbids to −∞. Returns false when the
/// matcher has stopped or failed (nothing more may be generated).
pub(crate) fn mask_logits(matcher: &mut Matcher, logits: &mut [f32]) -> Result<bool, String> {
    if matcher.is_stopped() {
        return Ok(false);
    }
    let mask: toktrie::SimpleVob = matcher.compute_mask().map_err(|e| e.to_string())?;
    // A model may have more output rows than vocabulary entries: those ids
    // are never allowed (and must not index past the mask).
    let known = mask.len();
    for (id, logit) in logits.iter_mut().enumerate() {
        if id >= known || !mask.is_allowed(id as TokenId) {
            *logit = f32::NEG_INFINITY;
        }
    }
    Ok(true)
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn tool_call_grammar_names_each_tool() {
        let tools = vec![runcell_llm::tools::execute_code_spec()];
        let lark = tool_call_lark(&tools, "\n</tool_call>");
        assert!(
            lark.starts_with("start: (call0) \"\\n</tool_call>\"\n"),
            "{lark}"
        );
        assert!(
            lark.contains(r#"call0: "{\"name\": \"execute_code\", \"arguments\": " args0 "}""#),
            "{lark}"
        );
        assert!(lark.contains("args0: %json {"), "{lark}");
        assert!(lark.contains("\"whitespace_flexible\":false"), "{lark}");
    }

    #[test]
    fn code_tools_are_recognised() {
        let langs = code_tool_languages(&runcell_llm::tools::execute_code_spec()).unwrap();
        assert_eq!(
            langs,
            [
                "python",
                "javascript",
                "typescript",
                "r",
                "java",
                "bash",
                "c"
            ]
        );
        let mut other = runcell_llm::tools::execute_code_spec();
        other.parameters["properties"]["timeout"] = json!({"type": "integer"});
        assert_eq!(code_tool_languages(&other), None);
        let lark = fenced_code_lark(&langs);
        assert!(
            lark.starts_with("start: \"```\" lang \"\\n\" code \"\\n\"?\n"),
            "{lark}"
        );
        assert!(
            lark.contains(
                "lang: \"python\" | \"javascript\" | \"typescript\" | \"r\" | \"java\" | \"bash\" | \"c\"\n"
            ),
            "{lark}"
        );
    }
}
