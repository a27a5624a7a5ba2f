//! The tokenizer, rebuilt from the GGUF metadata (`tokenizer.ggml.*`): no
//! package ships a `tokenizer.json`. Only byte-level BPE vocabularies (GGUF
//! `tokenizer.ggml.model = "gpt2"`, as Qwen2 and SmolLM2 use) are supported.
//!
//! Encoding goes through the `tokenizers` crate (pure-Rust regex); decoding is
//! done here, token by token, as raw bytes, so that callers can hold back an
//! incomplete UTF-8 sequence split over two tokens.

use std::collections::HashMap;

use candle_core::quantized::gguf_file::{Content, Value};
use tokenizers::models::bpe::{BPE, Vocab};
use tokenizers::pre_tokenizers::byte_level::ByteLevel;
use tokenizers::pre_tokenizers::digits::Digits;
use tokenizers::pre_tokenizers::sequence::Sequence;
use tokenizers::pre_tokenizers::split::{Split, SplitPattern};
use tokenizers::{AddedToken, PreTokenizerWrapper, SplitDelimiterBehavior, Tokenizer};

/// Qwen2's pre-tokenizer split (from its `tokenizer.json`).
const QWEN2_PATTERN: &str = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";

/// GGUF `tokenizer.ggml.token_type` values.
const TYPE_CONTROL: i32 = 3;
const TYPE_USER_DEFINED: i32 = 4;

/// Token names that end a turn in the chat formats runcell knows.
const END_OF_TURN: &[&str] = &[
    "<|im_end|>",
    "<|endoftext|>",
    "<|eot_id|>",
    "<|end_of_text|>",
    "<end_of_turn>",
    "</s>",
];

/// The vocabulary and the encoder of one GGUF model.
pub(crate) struct GgufTokenizer {
    tokenizer: Tokenizer,
    /// Each token's bytes; control tokens have none (they are never text).
    bytes: Vec<Vec<u8>>,
    names: Vec<String>,
    control: Vec<bool>,
    pub(crate) eos: u32,
    pub(crate) bos: Option<u32>,
    /// EOS and every end-of-turn token of the vocabulary.
    pub(crate) stop: Vec<u32>,
}

impl std::fmt::Debug for GgufTokenizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GgufTokenizer")
            .field("vocab", &self.bytes.len())
            .field("eos", &self.eos)
            .finish_non_exhaustive()
    }
}

fn strings(ct: &Content, key: &str) -> Result<Vec<String>, String> {
    match ct.metadata.get(key) {
        Some(Value::Array(items)) => items
            .iter()
            .map(|v| v.to_string().cloned().map_err(|e| format!("{key}: {e}")))
            .collect(),
        _ => Err(format!("GGUF metadata has no string array `{key}`")),
    }
}

fn u32_of(ct: &Content, key: &str) -> Option<u32> {
    ct.metadata.get(key).and_then(|v| v.to_u32().ok())
}

/// GPT-2's byte ↔ printable-character table, reversed: char → byte.
fn unicode_to_byte() -> HashMap<char, u8> {
    let mut printable: Vec<u8> = (b'!'..=b'~')
        .chain(0xA1..=0xAC)
        .chain(0xAE..=0xFF)
        .collect();
    let mut chars: Vec<u32> = printable.iter().map(|&b| u32::from(b)).collect();
    let mut n = 0u32;
    for b in 0..=255u8 {
        if !printable.contains(&b) {
            printable.push(b);
            chars.push(256 + n);
            n += 1;
        }
    }
    printable
        .iter()
        .zip(chars)
        .filter_map(|(&b, c)| char::from_u32(c).map(|c| (c, b)))
        .collect()
}

impl GgufTokenizer {
    pub(crate) fn from_gguf(ct: &Content) -> Result<Self, String> {
        let model = ct
            .metadata
            .get("tokenizer.ggml.model")
            .and_then(|v| v.to_string().ok())
            .cloned()
            .unwrap_or_default();
        if model != "gpt2" {
            return Err(format!(
                "tokenizer `{model}` is not supported (only byte-level BPE, `gpt2`)"
            ));
        }
        let pre = ct
            .metadata
            .get("tokenizer.ggml.pre")
            .and_then(|v| v.to_string().ok())
            .cloned()
            .unwrap_or_default();
        let names = strings(ct, "tokenizer.ggml.tokens")?;
        let merges = strings(ct, "tokenizer.ggml.merges")?;
        let types: Vec<i32> = match ct.metadata.get("tokenizer.ggml.token_type") {
            Some(Value::Array(items)) => items.iter().map(|v| v.to_i32().unwrap_or(1)).collect(),
            _ => vec![1; names.len()],
        };

        let vocab: Vocab = names
            .iter()
            .enumerate()
            .map(|(i, t)| (t.clone(), i as u32))
            .collect();
        let merges: Vec<(String, String)> = merges
            .iter()
            .filter_map(|m| m.split_once(' '))
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect();
        let bpe = BPE::builder()
            .vocab_and_merges(vocab, merges)
            .build()
            .map_err(|e| format!("BPE: {e}"))?;
        let mut tokenizer = Tokenizer::new(bpe);
        let pre_tokenizer: PreTokenizerWrapper = if pre == "qwen2" {
            let split = Split::new(
                SplitPattern::Regex(QWEN2_PATTERN.to_string()),
                SplitDelimiterBehavior::Isolated,
                false,
            )
            .map_err(|e| format!("pre-tokenizer: {e}"))?;
            Sequence::new(vec![
                split.into(),
                ByteLevel::new(false, false, false).into(),
            ])
            .into()
        } else {
            // GPT-2 style (SmolLM2 and most byte-level BPE models).
            Sequence::new(vec![
                Digits::new(true).into(),
                ByteLevel::new(false, false, true).into(),
            ])
            .into()
        };
        tokenizer.with_pre_tokenizer(Some(pre_tokenizer));
        tokenizer.with_decoder(Some(ByteLevel::default()));

        let added: Vec<AddedToken> = names
            .iter()
            .zip(&types)
            .filter(|(_, t)| **t == TYPE_CONTROL || **t == TYPE_USER_DEFINED)
            .map(|(n, t)| AddedToken::from(n.clone(), *t == TYPE_CONTROL))
            .collect();
        tokenizer
            .add_special_tokens(added)
            .map_err(|e| format!("special tokens: {e}"))?;

        let table = unicode_to_byte();
        let control: Vec<bool> = types.iter().map(|t| *t == TYPE_CONTROL).collect();
        let bytes = names
            .iter()
            .zip(&types)
            .map(|(name, t)| match *t {
                TYPE_CONTROL => Vec::new(),
                TYPE_USER_DEFINED => name.as_bytes().to_vec(),
                _ => name
                    .chars()
                    .flat_map(|c| match table.get(&c) {
                        Some(b) => vec![*b],
                        None => c.to_string().into_bytes(),
                    })
                    .collect(),
            })
            .collect();

        let eos = u32_of(ct, "tokenizer.ggml.eos_token_id")
            .ok_or("GGUF metadata has no `tokenizer.ggml.eos_token_id`")?;
        let bos = u32_of(ct, "tokenizer.ggml.bos_token_id");
        let mut stop = vec![eos];
        for name in END_OF_TURN {
            if let Some(&id) = tokenizer.get_added_vocabulary().get_vocab().get(*name)
                && !stop.contains(&id)
            {
                stop.push(id);
            }
        }
        Ok(Self {
            tokenizer,
            bytes,
            names,
            control,
            eos,
            bos,
            stop,
        })
    }

    /// Token ids of `text`; special tokens written in the text (`<|im_start|>`)
    /// become their ids.
    pub(crate) fn encode(&self, text: &str) -> Result<Vec<u32>, String> {
        self.tokenizer
            .encode_fast(text, false)
            .map(|e| e.get_ids().to_vec())
            .map_err(|e| format!("tokenize: {e}"))
    }

    pub(crate) fn vocab_size(&self) -> usize {
        self.bytes.len()
    }

    /// The bytes token `id` stands for in text (empty for control tokens).
    pub(crate) fn token_bytes(&self, id: u32) -> &[u8] {
        self.bytes.get(id as usize).map_or(&[], Vec::as_slice)
    }

    pub(crate) fn is_control(&self, id: u32) -> bool {
        self.control.get(id as usize).copied().unwrap_or(false)
    }

    pub(crate) fn name(&self, id: u32) -> &str {
        self.names.get(id as usize).map_or("", String::as_str)
    }

    /// The text of `ids`, control tokens left out.
    #[cfg(test)]
    fn decode(&self, ids: &[u32]) -> String {
        let bytes: Vec<u8> = ids
            .iter()
            .flat_map(|&id| self.token_bytes(id).iter().copied())
            .collect();
        String::from_utf8_lossy(&bytes).into_owned()
    }
}

/// Turns a stream of token bytes into text without ever splitting a
/// multi-byte character: incomplete trailing bytes wait for the next token.
#[derive(Debug, Default)]
pub(crate) struct Utf8Stream {
    pending: Vec<u8>,
}

impl Utf8Stream {
    /// The complete text now available.
    pub(crate) fn push(&mut self, bytes: &[u8]) -> String {
        self.pending.extend_from_slice(bytes);
        let mut out = String::new();
        loop {
            match std::str::from_utf8(&self.pending) {
                Ok(s) => {
                    out.push_str(s);
                    self.pending.clear();
                    return out;
                }
                Err(e) => {
                    let good = e.valid_up_to();
                    out.push_str(&String::from_utf8_lossy(&self.pending[..good]));
                    match e.error_len() {
                        // Incomplete at the end: keep it for later.
                        None => {
                            self.pending.drain(..good);
                            return out;
                        }
                        // Invalid bytes: replace them and go on.
                        Some(bad) => {
                            out.push(char::REPLACEMENT_CHARACTER);
                            self.pending.drain(..good + bad);
                        }
                    }
                }
            }
        }
    }

    /// Whatever is left at the end of generation.
    pub(crate) fn finish(&mut self) -> String {
        let rest = String::from_utf8_lossy(&self.pending).into_owned();
        self.pending.clear();
        rest
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn utf8_stream_holds_back_split_characters() {
        let mut s = Utf8Stream::default();
        let snow = "é☃".as_bytes();
        assert_eq!(s.push(&snow[..1]), "");
        assert_eq!(s.push(&snow[1..3]), "é");
        assert_eq!(s.push(&snow[3..]), "☃");
        assert_eq!(s.push(b"ab\xffc"), "ab\u{fffd}c");
        assert_eq!(s.push(&snow[..1]), "");
        assert_eq!(s.finish(), "\u{fffd}");
    }

    #[test]
    fn byte_table_covers_every_byte() {
        let t = unicode_to_byte();
        assert_eq!(t.len(), 256);
        assert_eq!(t[&'Ġ'], b' ');
        assert_eq!(t[&'Ċ'], b'\n');
        assert_eq!(t[&'a'], b'a');
    }

    /// Round trips and the ids of a Qwen prompt, when the model file is here.
    #[test]
    fn qwen_tokenizer_round_trips() {
        let Some(path) = super::super::tests::test_model_path() else {
            return;
        };
        let mut file = std::fs::File::open(&path).unwrap();
        let ct = Content::read(&mut file).unwrap();
        let tok = GgufTokenizer::from_gguf(&ct).unwrap();
        for text in [
            "Hello, world!",
            "def f(x):\n    return x * 2  # double\n",
            "héllo ☃ 日本語 emoji 🦀",
            "  leading spaces and 12345 digits",
        ] {
            let ids = tok.encode(text).unwrap();
            assert_eq!(tok.decode(&ids), text, "{ids:?}");
        }
        // Ids checked against Qwen2.5's own tokenizer.
        let ids = tok
            .encode("<|im_start|>user\nHello, world!<|im_end|>\n")
            .unwrap();
        assert_eq!(
            ids,
            [151644, 872, 198, 9707, 11, 1879, 0, 151645, 198],
            "{ids:?}"
        );
        assert_eq!(tok.eos, 151645);
        assert!(tok.stop.contains(&151643));
        assert!(tok.is_control(151644));
        assert_eq!(tok.name(151644), "<|im_start|>");
    }
}
