//! The sampling loop. It runs on one dedicated thread that owns the weights:
//! jobs queue on a channel and run one at a time; tokens go back to the
//! async side through a bounded tokio channel, and a closed channel (the
//! `ChatStream` was dropped) stops the job before its next token.
//!
//! The KV cache outlives a job: the worker remembers which tokens it holds
//! (the last prompt and what was generated after it), and the next job
//! computes only what follows the longest prefix it shares with them.

use super::queue::{FairQueue, Waiting};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use rand::SeedableRng;
use rand::distr::Distribution;
use rand::distr::weighted::WeightedIndex;
use rand::rngs::StdRng;
use tokio::sync::mpsc::Sender;

use super::constrain::{Constrainer, Constraint, mask_logits};
use super::model::Weights;
use super::tokenizer::{GgufTokenizer, Utf8Stream};
use crate::fenced::{TOOL_OPEN, parse_tool_calls};
use crate::{Completion, FinishReason, LlmError, LlmEvent, ToolCall, Usage};

/// Tokens fed to the model at once while reading the prompt.
const PREFILL_CHUNK: usize = 256;

/// Constrained steps in a row where the model wanted to stop before it
/// gives up.
const GIVE_UP_AFTER: usize = 3;

/// What to do with the generated text.
#[derive(Clone, Debug, PartialEq)]
pub enum Mode {
    /// Free text.
    Text,
    /// Free text that may contain `<tool_call>{...}</tool_call>`.
    TextOrToolCall,
    /// Text constrained to a JSON schema.
    Json(serde_json::Value),
    /// A tool call constrained to `{"name": .., "arguments": ..}` + `tail`.
    ToolCall {
        tools: Vec<crate::ToolSpec>,
        tail: String,
    },
    /// A call of the `execute_code`-shaped tool `tool`, written as a fenced
    /// code block under constraint and streamed as its JSON arguments.
    FencedCode {
        tool: String,
        languages: Vec<String>,
    },
}

/// One generation request for the worker.
pub struct Job {
    pub prompt: Vec<u32>,
    pub max_new: usize,
    /// `None` or ≤ 0: greedy.
    pub temperature: Option<f64>,
    pub seed: u64,
    pub mode: Mode,
    /// Whether the prompt may start from what the KV cache holds (false:
    /// the cache is emptied first; benchmarks measure a cold start so).
    pub reuse_cache: bool,
    pub tx: Sender<Result<LlmEvent, LlmError>>,
}

impl Waiting for Job {
    fn departed(&self) -> bool {
        self.tx.is_closed()
    }
}

/// Timings of the last finished job, for benchmarks.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct GenStats {
    pub prompt_tokens: usize,
    /// Leading prompt tokens found in the KV cache (not computed again).
    pub cached_tokens: usize,
    pub prefill: Duration,
    pub generated_tokens: usize,
    pub generation: Duration,
    pub cancelled: bool,
}

impl GenStats {
    /// Prompt tokens computed (not found in the cache) per second.
    pub fn prefill_tokens_per_s(&self) -> f64 {
        self.prompt_tokens.saturating_sub(self.cached_tokens) as f64
            / self.prefill.as_secs_f64().max(1e-9)
    }
    pub fn generated_tokens_per_s(&self) -> f64 {
        self.generated_tokens as f64 / self.generation.as_secs_f64().max(1e-9)
    }
}

/// Everything the worker thread owns.
pub struct Worker {
    pub weights: Weights,
    pub tokenizer: Arc<GgufTokenizer>,
    pub constrainer: Arc<Constrainer>,
    pub stats: Arc<Mutex<Option<GenStats>>>,
    /// The tokens whose keys and values the cache holds, in order.
    pub cached: Vec<u32>,
}

/// How many leading tokens of `prompt` can be kept from a cache that holds
/// `cached`: their common prefix, short of the whole prompt (its last token
/// is computed again, for the logits of what comes next).
pub fn reusable_prefix(cached: &[u32], prompt: &[u32]) -> usize {
    let common = cached
        .iter()
        .zip(prompt)
        .take_while(|(a, b)| a == b)
        .count();
    common.min(prompt.len().saturating_sub(1))
}

impl Worker {
    /// Runs jobs until the queue is closed and empty; candle's maths runs
    /// on `pool`.
    pub fn run(mut self, pool: &rayon::ThreadPool, jobs: &FairQueue<Job>) {
        while let Some(job) = jobs.pop() {
            if job.tx.is_closed() {
                continue;
            }
            let tx = job.tx.clone();
            // A panic in the maths (a malformed model file, a bug) fails this
            // answer, not the worker: every later request still has a model.
            let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                pool.install(|| self.generate(&job))
            }));
            let result = result.unwrap_or_else(|_| {
                // The cache may be half-written: start the next job afresh.
                self.forget();
                Err(LlmError::Backend(
                    "the embedded model failed unexpectedly on this request".into(),
                ))
            });
            match result {
                Ok(stats) => {
                    tracing::debug!(
                        prompt_tokens = stats.prompt_tokens,
                        cached_tokens = stats.cached_tokens,
                        prefill_tok_s = stats.prefill_tokens_per_s(),
                        generated_tokens = stats.generated_tokens,
                        gen_tok_s = stats.generated_tokens_per_s(),
                        cancelled = stats.cancelled,
                        "embedded generation"
                    );
                    *self.stats.lock() = Some(stats);
                }
                Err(e) => {
                    tracing::warn!(error = %e, "embedded generation failed");
                    let _ = tx.blocking_send(Err(e));
                }
            }
        }
    }

    /// Empties the KV cache.
    fn forget(&mut self) {
        self.weights.clear_kv_cache();
        self.cached.clear();
    }

    /// Runs `tokens` at `pos` (which must be `self.cached.len()`) and records
    /// them as cached; a failure empties the cache, which may be half-written.
    fn forward(&mut self, tokens: &[u32], pos: usize) -> Result<Vec<f32>, LlmError> {
        match self.weights.forward(tokens, pos) {
            Ok(logits) => {
                self.cached.extend_from_slice(tokens);
                Ok(logits)
            }
            Err(e) => {
                self.forget();
                Err(LlmError::Backend(e.to_string()))
            }
        }
    }

    /// Cuts the cache back to what `prompt` can reuse; how many tokens that is.
    fn reuse_prefix(&mut self, prompt: &[u32]) -> Result<usize, LlmError> {
        let wanted = reusable_prefix(&self.cached, prompt);
        match self.weights.keep_kv_cache(wanted) {
            Ok(kept) => {
                self.cached.truncate(kept);
                Ok(kept)
            }
            Err(e) => {
                self.forget();
                Err(LlmError::Backend(e.to_string()))
            }
        }
    }

    fn generate(&mut self, job: &Job) -> Result<GenStats, LlmError> {
        let mut stats = GenStats {
            prompt_tokens: job.prompt.len(),
            ..GenStats::default()
        };
        let mut matcher = match &job.mode {
            Mode::Json(schema) => Some(Constraint::Json(schema.clone())),
            Mode::ToolCall { tools, tail } => Some(Constraint::ToolCall {
                tools: tools.clone(),
                tail: tail.clone(),
            }),
            Mode::FencedCode { languages, .. } => Some(Constraint::FencedCode {
                languages: languages.clone(),
            }),
            Mode::Text | Mode::TextOrToolCall => None,
        }
        .map(|c| self.constrainer.matcher(&c))
        .transpose()
        .map_err(LlmError::Backend)?;

        // Read the prompt.
        let started = Instant::now();
        let cached = if job.reuse_cache {
            self.reuse_prefix(&job.prompt)?
        } else {
            self.forget();
            0
        };
        stats.cached_tokens = cached;
        tracing::debug!(
            cached_tokens = cached,
            prompt_tokens = job.prompt.len(),
            "prefix cache"
        );
        let mut logits = Vec::new();
        let mut pos = cached;
        for chunk in job
            .prompt
            .get(cached..)
            .unwrap_or_default()
            .chunks(PREFILL_CHUNK)
        {
            if job.tx.is_closed() {
                stats.cancelled = true;
                return Ok(stats);
            }
            logits = self.forward(chunk, pos)?;
            pos += chunk.len();
        }
        stats.prefill = started.elapsed();

        let started = Instant::now();
        let temperature = job.temperature.filter(|t| *t > 0.0);
        let mut sampler = Sampler::new(job.seed);
        let mut out = Output::new(job.mode.clone(), &job.tx);
        let mut finish = FinishReason::Length;
        let mut generated = 0;
        let mut wants_to_stop = 0;
        while generated < job.max_new {
            // The model's own choice, before any mask.
            let wanted = argmax(&logits);
            if let Some(m) = matcher.as_mut()
                && !mask_logits(m, &mut logits).map_err(LlmError::Backend)?
            {
                finish = FinishReason::Stop;
                break;
            }
            let token = match temperature {
                None => argmax(&logits),
                Some(t) => sampler.sample(&logits, t).map_err(LlmError::Backend)?,
            };
            if matcher.is_some() && token != wanted && self.tokenizer.stop.contains(&wanted) {
                // The model wants to stop where the grammar does not allow
                // it (say, inside a string it forgot to close): a few times
                // in a row means it is lost; give up rather than ramble.
                wants_to_stop += 1;
                if wants_to_stop >= GIVE_UP_AFTER {
                    finish =
                        FinishReason::Other("the model ended inside the constrained reply".into());
                    break;
                }
            } else {
                wants_to_stop = 0;
            }
            if self.tokenizer.stop.contains(&token) {
                finish = FinishReason::Stop;
                break;
            }
            generated += 1;
            if let Some(m) = matcher.as_mut() {
                m.consume_token(token)
                    .map_err(|e| LlmError::Backend(format!("constraint: {e}")))?;
            }
            if !out.push(self.tokenizer.token_bytes(token)) {
                stats.cancelled = true;
                break;
            }
            if matcher.as_ref().is_some_and(|m| m.is_stopped()) {
                finish = FinishReason::Stop;
                break;
            }
            if generated < job.max_new {
                if job.tx.is_closed() {
                    stats.cancelled = true;
                    break;
                }
                logits = self.forward(&[token], pos)?;
                pos += 1;
            }
        }
        stats.generated_tokens = generated;
        stats.generation = started.elapsed();
        if !stats.cancelled {
            let usage = Usage {
                prompt_tokens: job.prompt.len() as u32,
                completion_tokens: generated as u32,
            };
            out.finish(finish, usage);
        }
        Ok(stats)
    }
}

/// Draws tokens from `softmax(logits / temperature)` with a seeded
/// generator: what candle-transformers' `LogitsProcessor` does for a
/// temperature without top-p, on the logits as they are (masked ones,
/// `-inf`, are never drawn).
struct Sampler {
    rng: StdRng,
}

impl Sampler {
    fn new(seed: u64) -> Self {
        Self {
            rng: StdRng::seed_from_u64(seed),
        }
    }

    fn sample(&mut self, logits: &[f32], temperature: f64) -> Result<u32, String> {
        let max = logits
            .iter()
            .copied()
            .filter(|l| l.is_finite())
            .fold(f32::NEG_INFINITY, f32::max);
        if !max.is_finite() {
            return Err("no token can follow".into());
        }
        let weights = logits.iter().map(|&l| {
            if l.is_finite() {
                f64::from(l - max) / temperature
            } else {
                f64::NEG_INFINITY
            }
            .exp()
        });
        let drawn = WeightedIndex::new(weights)
            .map_err(|e| format!("cannot sample: {e}"))?
            .sample(&mut self.rng);
        u32::try_from(drawn).map_err(|_| "a token id beyond u32".into())
    }
}

fn argmax(logits: &[f32]) -> u32 {
    let mut best = 0;
    let mut best_value = f32::NEG_INFINITY;
    for (i, &v) in logits.iter().enumerate() {
        if v > best_value {
            best = i;
            best_value = v;
        }
    }
    best as u32
}

const CALL_NAME: &str = "{\"name\": ";
const CALL_ARGS: &str = ", \"arguments\": ";

/// Turns token bytes into events, per mode.
struct Output<'a> {
    mode: Mode,
    tx: &'a Sender<Result<LlmEvent, LlmError>>,
    utf8: Utf8Stream,
    /// All the text so far.
    text: String,
    /// How much of `text` (plain modes) or of the arguments (tool-call mode)
    /// has been sent.
    sent: usize,
    /// Tool-call mode: the name, once the model wrote it.
    name: Option<String>,
    /// Fenced-code mode: the arguments JSON sent so far.
    args: String,
}

const FENCE: &str = "```";

/// `s` escaped as inside a JSON string (piece by piece, it concatenates).
fn json_escape(s: &str) -> String {
    let quoted = serde_json::Value::from(s).to_string();
    quoted[1..quoted.len() - 1].to_string()
}

impl<'a> Output<'a> {
    fn new(mode: Mode, tx: &'a Sender<Result<LlmEvent, LlmError>>) -> Self {
        Self {
            mode,
            tx,
            utf8: Utf8Stream::default(),
            text: String::new(),
            sent: 0,
            name: None,
            args: String::new(),
        }
    }

    fn send(&self, event: LlmEvent) -> bool {
        self.tx.blocking_send(Ok(event)).is_ok()
    }

    /// False when the receiver is gone.
    fn push(&mut self, bytes: &[u8]) -> bool {
        let piece = self.utf8.push(bytes);
        if piece.is_empty() {
            return !self.tx.is_closed();
        }
        self.text.push_str(&piece);
        self.flush(false)
    }

    /// Sends what can be sent now (everything when `last`).
    fn flush(&mut self, last: bool) -> bool {
        match &self.mode {
            Mode::FencedCode { tool, .. } => {
                let Some(nl) = self.text.find('\n') else {
                    return !self.tx.is_closed();
                };
                let body = &self.text[nl + 1..];
                let end = match body.find(FENCE) {
                    Some(i) => i,
                    None if last => body.len(),
                    None => body.len() - partial_suffix(body, FENCE),
                };
                let first = self.name.is_none();
                let mut fragment = String::new();
                if first {
                    let language = self.text.get(FENCE.len()..nl).unwrap_or_default();
                    fragment = format!(
                        "{{\"language\": {}, \"code\": \"",
                        serde_json::Value::from(language.trim())
                    );
                    self.name = Some(tool.clone());
                }
                if end > self.sent {
                    fragment.push_str(&json_escape(&body[self.sent..end]));
                    self.sent = end;
                }
                if fragment.is_empty() {
                    return !self.tx.is_closed();
                }
                self.args.push_str(&fragment);
                self.send(LlmEvent::ToolCallDelta {
                    index: 0,
                    id: first.then(|| "call_0".to_string()),
                    name: if first { self.name.clone() } else { None },
                    arguments: fragment,
                })
            }
            Mode::Text | Mode::Json(_) => {
                let new = self.text[self.sent..].to_string();
                self.sent = self.text.len();
                new.is_empty() || self.send(LlmEvent::Text(new))
            }
            Mode::TextOrToolCall => {
                // Text up to a tool call is sent as it comes; a possible
                // start of `<tool_call>` waits until it is clearly not one.
                let end = match self.text.find(TOOL_OPEN) {
                    Some(i) => i,
                    None if last => self.text.len(),
                    None => self.text.len() - partial_suffix(&self.text, TOOL_OPEN),
                };
                if end <= self.sent {
                    return !self.tx.is_closed();
                }
                let new = self.text[self.sent..end].to_string();
                self.sent = end;
                self.send(LlmEvent::Text(new))
            }
            Mode::ToolCall { .. } => {
                let Some(args_at) = self.text.find(CALL_ARGS) else {
                    return !self.tx.is_closed();
                };
                let args = &self.text[args_at + CALL_ARGS.len()..];
                // What follows the arguments (`}` and the tail) is not sent.
                let end = json_end(args).unwrap_or(args.len());
                let first = self.name.is_none();
                if first {
                    let name_json = self.text[..args_at]
                        .strip_prefix(CALL_NAME)
                        .unwrap_or_default();
                    self.name = Some(serde_json::from_str(name_json).unwrap_or_default());
                }
                if end <= self.sent && !first {
                    return !self.tx.is_closed();
                }
                let fragment = args[self.sent.min(end)..end].to_string();
                self.sent = end.max(self.sent);
                self.send(LlmEvent::ToolCallDelta {
                    index: 0,
                    id: first.then(|| "call_0".to_string()),
                    name: if first { self.name.clone() } else { None },
                    arguments: fragment,
                })
            }
        }
    }

    fn finish(mut self, finish: FinishReason, usage: Usage) {
        let rest = self.utf8.finish();
        self.text.push_str(&rest);
        if !self.flush(true) {
            return;
        }
        let mut completion = Completion {
            text: String::new(),
            tool_calls: Vec::new(),
            finish_reason: finish.clone(),
            usage: Some(usage),
        };
        match &self.mode {
            Mode::FencedCode { .. } => {
                let closed = self
                    .text
                    .find('\n')
                    .is_some_and(|nl| self.text[nl + 1..].contains(FENCE));
                match (finish, closed, self.name.take()) {
                    (FinishReason::Stop, true, Some(name)) => {
                        if !self.send(LlmEvent::ToolCallDelta {
                            index: 0,
                            id: None,
                            name: None,
                            arguments: "\"}".into(),
                        }) {
                            return;
                        }
                        self.args.push_str("\"}");
                        completion.finish_reason = FinishReason::ToolCalls;
                        completion.tool_calls.push(ToolCall {
                            id: "call_0".into(),
                            name,
                            arguments: std::mem::take(&mut self.args),
                        });
                    }
                    _ => completion.text = std::mem::take(&mut self.text),
                }
            }
            Mode::Text | Mode::Json(_) => completion.text = std::mem::take(&mut self.text),
            Mode::TextOrToolCall => {
                let (text, calls) = parse_tool_calls(&self.text);
                completion.text = text;
                for (index, call) in calls.iter().enumerate() {
                    let delta = LlmEvent::ToolCallDelta {
                        index,
                        id: Some(call.id.clone()),
                        name: Some(call.name.clone()),
                        arguments: call.arguments.clone(),
                    };
                    if !self.send(delta) {
                        return;
                    }
                }
                if !calls.is_empty() {
                    completion.finish_reason = FinishReason::ToolCalls;
                }
                completion.tool_calls = calls;
            }
            Mode::ToolCall { .. } => {
                let args = self
                    .text
                    .find(CALL_ARGS)
                    .map(|at| &self.text[at + CALL_ARGS.len()..])
                    .and_then(|args| json_end(args).map(|end| &args[..end]));
                match (finish, args, self.name.take()) {
                    (FinishReason::Stop, Some(args), Some(name)) => {
                        completion.finish_reason = FinishReason::ToolCalls;
                        completion.tool_calls.push(ToolCall {
                            id: "call_0".into(),
                            name,
                            arguments: args.to_string(),
                        });
                    }
                    // Cut off before the call was complete.
                    _ => completion.text = std::mem::take(&mut self.text),
                }
            }
        }
        let _ = self.send(LlmEvent::Done(completion));
    }
}

/// Where the JSON object or array at the start of `text` ends (the byte after
/// its closing bracket), if it is complete.
pub fn json_end(text: &str) -> Option<usize> {
    let mut depth = 0usize;
    let mut in_string = false;
    let mut escaped = false;
    for (i, c) in text.char_indices() {
        if in_string {
            match c {
                _ if escaped => escaped = false,
                '\\' => escaped = true,
                '"' => in_string = false,
                _ => {}
            }
            continue;
        }
        match c {
            '"' => in_string = true,
            '{' | '[' => depth += 1,
            '}' | ']' => {
                depth = depth.checked_sub(1)?;
                if depth == 0 {
                    return Some(i + 1);
                }
            }
            _ => {}
        }
    }
    None
}

/// The length of the longest suffix of `text` that is a proper prefix of
/// `tag`.
fn partial_suffix(text: &str, tag: &str) -> usize {
    (1..tag.len())
        .rev()
        .find(|&n| text.ends_with(&tag[..n]))
        .unwrap_or(0)
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn sampling_follows_the_temperature_and_never_draws_a_masked_token() {
        let logits = [1.0, f32::NEG_INFINITY, 3.0, 2.0, f32::NEG_INFINITY];
        let draw = |seed, t| {
            let mut sampler = Sampler::new(seed);
            (0..400)
                .map(|_| sampler.sample(&logits, t).unwrap())
                .collect::<Vec<_>>()
        };
        // The same seed draws the same tokens.
        assert_eq!(draw(7, 1.0), draw(7, 1.0));
        let hot = draw(7, 1.0);
        assert!(hot.iter().all(|t| [0, 2, 3].contains(t)), "{hot:?}");
        // At temperature 1 token 2 has e^3 / (e + e^3 + e^2) = 0.67.
        let share = hot.iter().filter(|&&t| t == 2).count() as f64 / hot.len() as f64;
        assert!((0.55..0.8).contains(&share), "{share}");
        // Near zero it is the argmax.
        assert!(draw(3, 0.01).iter().all(|&t| t == 2));
        let mut sampler = Sampler::new(1);
        assert!(sampler.sample(&[f32::NEG_INFINITY; 3], 1.0).is_err());
        assert!(sampler.sample(&[], 1.0).is_err());
    }

    #[test]
    fn the_reusable_prefix_is_the_common_one_short_of_the_whole_prompt() {
        // (cached, prompt, tokens kept)
        let cases: &[(&[u32], &[u32], usize)] = &[
            (&[], &[1, 2, 3], 0),
            (&[1, 2, 3], &[4, 5], 0),
            (&[1, 2, 3, 4], &[1, 2, 9, 9], 2),
            // A follow-up: everything cached is reused.
            (&[1, 2, 3], &[1, 2, 3, 4, 5], 3),
            // The same prompt again: its last token is computed again.
            (&[1, 2, 3], &[1, 2, 3], 2),
            // A shorter prompt inside the cache: the same.
            (&[1, 2, 3, 4, 5], &[1, 2, 3], 2),
            (&[1], &[1], 0),
            (&[1, 2], &[], 0),
        ];
        for &(cached, prompt, kept) in cases {
            assert_eq!(
                reusable_prefix(cached, prompt),
                kept,
                "{cached:?} then {prompt:?}"
            );
        }
    }

    #[test]
    fn json_ends() {
        assert_eq!(json_end(r#"{"a": "}\"}"} tail"#), Some(13));
        assert_eq!(json_end(r#"{"a": [1, {}]}}"#), Some(14));
        assert_eq!(json_end(r#"{"a": "#), None);
    }

    #[test]
    fn partial_tag_suffixes() {
        assert_eq!(partial_suffix("abc <tool", TOOL_OPEN), 5);
        assert_eq!(partial_suffix("abc <", TOOL_OPEN), 1);
        assert_eq!(partial_suffix("abc", TOOL_OPEN), 0);
    }

    fn drain(rx: &mut tokio::sync::mpsc::Receiver<Result<LlmEvent, LlmError>>) -> Vec<LlmEvent> {
        let mut events = Vec::new();
        while let Ok(e) = rx.try_recv() {
            events.push(e.unwrap());
        }
        events
    }

    #[test]
    fn tool_call_output_streams_arguments_without_the_wrapper() {
        let (tx, mut rx) = tokio::sync::mpsc::channel(64);
        let mode = Mode::ToolCall {
            tools: Vec::new(),
            tail: "\n</tool_call>".into(),
        };
        let mut out = Output::new(mode, &tx);
        for piece in [
            "{\"name\": ",
            "\"execute_code\"",
            ", \"arguments\": ",
            "{\"language\": \"python\", ",
            "\"code\": \"print('{é}\\\"')\"",
            "}}\n",
            "</tool_call>",
        ] {
            assert!(out.push(piece.as_bytes()));
        }
        out.finish(FinishReason::Stop, Usage::default());
        let events = drain(&mut rx);
        let mut args = String::new();
        let mut names = Vec::new();
        let mut done = None;
        for e in events {
            match e {
                LlmEvent::ToolCallDelta {
                    index: 0,
                    name,
                    arguments,
                    ..
                } => {
                    names.extend(name);
                    args.push_str(&arguments);
                }
                LlmEvent::Done(c) => done = Some(c),
                other => panic!("{other:?}"),
            }
        }
        let done = done.unwrap();
        assert_eq!(names, ["execute_code"]);
        assert_eq!(args, r#"{"language": "python", "code": "print('{é}\"')"}"#);
        assert_eq!(done.tool_calls[0].arguments, args);
        assert_eq!(done.finish_reason, FinishReason::ToolCalls);
    }

    #[test]
    fn fenced_code_streams_as_execute_code_arguments() {
        let (tx, mut rx) = tokio::sync::mpsc::channel(64);
        let mode = Mode::FencedCode {
            tool: "execute_code".into(),
            languages: vec!["python".into()],
        };
        let mut out = Output::new(mode, &tx);
        for piece in ["```", "python\nimport", " math\nprint(\"a`b\")\n`", "``"] {
            assert!(out.push(piece.as_bytes()));
        }
        out.finish(FinishReason::Stop, Usage::default());
        let mut args = String::new();
        let mut done = None;
        for e in drain(&mut rx) {
            match e {
                LlmEvent::ToolCallDelta { arguments, .. } => args.push_str(&arguments),
                LlmEvent::Done(c) => done = Some(c),
                other => panic!("{other:?}"),
            }
        }
        let done = done.unwrap();
        assert_eq!(done.tool_calls[0].arguments, args);
        assert_eq!(done.tool_calls[0].name, "execute_code");
        let v: serde_json::Value = serde_json::from_str(&args).unwrap();
        assert_eq!(v["language"], "python");
        assert_eq!(v["code"], "import math\nprint(\"a`b\")\n");
    }

    #[test]
    fn auto_mode_holds_back_a_tool_call() {
        let (tx, mut rx) = tokio::sync::mpsc::channel(64);
        let mut out = Output::new(Mode::TextOrToolCall, &tx);
        for piece in [
            "Let me run it.\n",
            "<tool",
            "_call>\n{\"name\": \"x\", \"arguments\": {}}\n",
            "</tool_call>",
        ] {
            assert!(out.push(piece.as_bytes()));
        }
        out.finish(FinishReason::Stop, Usage::default());
        let events = drain(&mut rx);
        let text: String = events
            .iter()
            .filter_map(|e| match e {
                LlmEvent::Text(t) => Some(t.as_str()),
                _ => None,
            })
            .collect();
        assert_eq!(text, "Let me run it.\n");
        let Some(LlmEvent::Done(done)) = events.last() else {
            panic!("{events:?}")
        };
        assert_eq!(done.tool_calls.len(), 1);
        assert_eq!(done.text, "Let me run it.\n");
        assert_eq!(done.finish_reason, FinishReason::ToolCalls);
    }
}
