//! The sampling loop. It runs on one dedicated thread that owns the weights:
//! jobs queue on a channel and run one at a time; tokens go back to the
//! async side through a bounded tokio channel, and a closed channel (the
//! `ChatStream` was dropped) stops the job before its next token.
//!
//! The KV cache outlives a job: the worker remembers which tokens it holds
//! (the last prompt and what was generated after it), and the next job
//! computes only what follows the longest prefix it shares with them.

mod output;
mod sample;

use super::queue::{FairQueue, Waiting};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use tokio::sync::mpsc::Sender;

use self::output::Output;
pub use self::output::json_end;
use self::sample::{Sampler, argmax};
use super::constrain::{Constrainer, Constraint, mask_logits};
use super::model::Weights;
use super::tokenizer::GgufTokenizer;
use runcell_llm::{FinishReason, LlmError, LlmEvent, Usage};

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
        tools: Vec<runcell_llm::ToolSpec>,
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

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

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
}
