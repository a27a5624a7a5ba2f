//! The sampling loop. It runs on one dedicated thread that owns the weights:
//! jobs queue on a channel and run one at a time; tokens go back to the
//! async side through a bounded tokio channel, and a closed channel (the
//! `ChatStream` was dropped) stops the job before its next token.
//!
//! The KV cache outlives a job: the worker remembers which tokens it holds
//! (the last prompt and what was generated after it), and the next job
//! computes only what follows the longest prefix it may reuse. A job of
//! another conversation first copies the cache out into a [`slots::Slots`]
//! slot, so that the conversation it held comes back to its reading; the
//! server's own prefix (the system prompt) is kept in a slot of its own,
//! for every new conversation.

mod output;
mod sample;
pub(crate) mod slots;

use super::queue::{FairQueue, Waiting};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use tokio::sync::mpsc::Sender;

use self::output::Output;
use self::sample::{Sampler, argmax};
use self::slots::{Kept, Scope, Slots, reusable};
use super::constrain::{Constrainer, Constraint, mask_logits};
use super::model::Weights;
use super::tokenizer::GgufTokenizer;
use runcell_llm::{FinishReason, LlmError, LlmEvent, Usage};

/// Tokens fed to the model at once while reading the prompt.
const PREFILL_CHUNK: usize = 256;

/// Tokens a stored slot must save over what the cache already holds to be
/// worth copying back in (a copy costs about what reading a few does).
const SWITCH_GAIN: usize = 8;

/// Constrained steps in a row where the model wanted to stop before it
/// gives up.
const GIVE_UP_AFTER: usize = 3;

/// What to do with the generated text.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Mode {
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
pub(crate) struct Job {
    pub(crate) prompt: Vec<u32>,
    pub(crate) max_new: usize,
    /// `None` or ≤ 0: greedy.
    pub(crate) temperature: Option<f64>,
    pub(crate) seed: u64,
    pub(crate) mode: Mode,
    /// Whether the prompt may start from what the KV cache holds (false:
    /// the cache is emptied first; benchmarks measure a cold start so).
    pub(crate) reuse_cache: bool,
    /// Whose conversation the prompt is: who may reuse its reading beyond
    /// its first `shared` tokens. `None`: nobody's (an anonymous request).
    pub(crate) scope: Option<Scope>,
    /// Leading prompt tokens that are the server's own (its system prompt).
    pub(crate) shared: usize,
    /// Read the prompt ahead, generate nothing, and stop as soon as another
    /// job waits (what was read by then stays in the cache).
    pub(crate) ahead: bool,
    pub(crate) tx: Sender<Result<LlmEvent, LlmError>>,
}

impl Waiting for Job {
    fn departed(&self) -> bool {
        self.tx.is_closed()
    }
}

/// Timings of the last finished job ([`crate::EmbeddedModel::last_stats`]),
/// for benchmarks and tests.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct GenStats {
    /// Tokens in the prompt.
    pub prompt_tokens: usize,
    /// Leading prompt tokens found in the KV cache (not computed again).
    pub cached_tokens: usize,
    /// Of those, copied back in from a stored slot.
    pub restored_tokens: usize,
    /// Time spent reading the prompt.
    pub prefill: Duration,
    /// Tokens generated after the prompt.
    pub generated_tokens: usize,
    /// Time spent generating them.
    pub generation: Duration,
    /// Whether the job stopped early (its stream dropped, or a prompt read
    /// ahead gave way to a waiting request).
    pub cancelled: bool,
}

impl GenStats {
    /// Prompt tokens computed (not found in the cache) per second.
    pub fn prefill_tokens_per_s(&self) -> f64 {
        self.prompt_tokens.saturating_sub(self.cached_tokens) as f64
            / self.prefill.as_secs_f64().max(1e-9)
    }

    /// Tokens generated per second.
    pub fn generated_tokens_per_s(&self) -> f64 {
        self.generated_tokens as f64 / self.generation.as_secs_f64().max(1e-9)
    }
}

/// Everything the worker thread owns.
pub(crate) struct Worker {
    weights: Weights,
    tokenizer: Arc<GgufTokenizer>,
    constrainer: Arc<Constrainer>,
    stats: Arc<Mutex<Option<GenStats>>>,
    /// The tokens whose keys and values the cache holds, in order.
    cached: Vec<u32>,
    /// Whose conversation the cache holds, and how many of its leading
    /// tokens are the server's own.
    cached_scope: Option<Scope>,
    cached_shared: usize,
    /// Conversations copied out of the cache.
    slots: Slots,
}

impl Worker {
    pub(crate) fn new(
        weights: Weights,
        tokenizer: Arc<GgufTokenizer>,
        constrainer: Arc<Constrainer>,
        stats: Arc<Mutex<Option<GenStats>>>,
        slot_budget_bytes: usize,
    ) -> Self {
        Self {
            weights,
            tokenizer,
            constrainer,
            stats,
            cached: Vec::new(),
            cached_scope: None,
            cached_shared: 0,
            slots: Slots::new(slot_budget_bytes),
        }
    }
}

impl Worker {
    /// Runs jobs until the queue is closed and empty; candle's maths runs
    /// on `pool`.
    pub(crate) fn run(mut self, pool: &rayon::ThreadPool, jobs: &FairQueue<Job>) {
        while let Some(job) = jobs.pop() {
            if job.tx.is_closed() {
                continue;
            }
            let tx = job.tx.clone();
            // A panic in the maths (a malformed model file, a bug) fails this
            // answer, not the worker: every later request still has a model.
            let others_wait = || !jobs.is_empty();
            let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                pool.install(|| self.generate(&job, &others_wait))
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

    /// Empties the KV cache (the slots stay).
    fn forget(&mut self) {
        self.weights.clear_kv_cache();
        self.cached.clear();
        self.cached_scope = None;
        self.cached_shared = 0;
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

    /// Makes the cache hold the most of `job`'s prompt it may reuse, from
    /// what it holds or from a stored slot, after copying out a conversation
    /// that would otherwise be lost; how many tokens that is, and how many
    /// of them were copied back in.
    fn reuse_prefix(&mut self, job: &Job) -> Result<(usize, usize), LlmError> {
        let scope = job.scope.as_ref();
        let here = reusable(
            self.cached_scope.as_ref(),
            &self.cached,
            self.cached_shared,
            scope,
            &job.prompt,
        );
        // Another conversation's reading, about to be cut or replaced: kept
        // (before a slot is picked: keeping it may replace or evict slots).
        let leaving = self.cached_scope.is_some()
            && self.cached_scope.as_ref() != scope
            && self.cached.len() > here.max(self.cached_shared);
        let kept = if leaving { self.cached_reading() } else { None };
        let stored = self
            .slots
            .switch(kept, scope, &job.prompt, here + SWITCH_GAIN);
        let result = match stored {
            Some((slot, n)) => match slot.tokens.get(..n) {
                Some(tokens) => {
                    let (tokens, shared) = (tokens.to_vec(), slot.shared.min(n));
                    self.weights.restore(&slot.snapshot, n).map(|()| {
                        self.cached = tokens;
                        self.cached_shared = shared;
                        (n, n)
                    })
                }
                // Cannot be (a slot's match is never longer than it), but
                // if it were, the cache would still hold another's reading:
                // emptied, never relabelled as this request's.
                None => Err(candle_core::Error::Msg(
                    "a stored reading is shorter than its match".into(),
                )),
            },
            None => self.weights.keep_kv_cache(here).map(|kept| {
                self.cached.truncate(kept);
                self.cached_shared = self.cached_shared.min(kept);
                (kept, 0)
            }),
        };
        match result {
            Ok(kept) => Ok(kept),
            Err(e) => {
                self.forget();
                Err(LlmError::Backend(e.to_string()))
            }
        }
    }

    /// A copy of what the cache holds, to keep in its conversation's slot.
    fn cached_reading(&self) -> Option<Kept> {
        let scope = self.cached_scope.clone()?;
        match self.weights.snapshot(self.cached.len()) {
            Ok(snapshot) => Some(Kept {
                scope,
                tokens: self.cached.clone(),
                shared: self.cached_shared,
                snapshot,
            }),
            Err(e) => {
                tracing::warn!(error = %e, "could not copy a conversation out of the cache");
                None
            }
        }
    }

    /// Keeps the server's own prefix of `prompt` (its first `shared`
    /// tokens, all in the cache) in a slot of its own, once.
    fn keep_server_prefix(&mut self, prompt: &[u32], shared: usize) {
        let Some(prefix) = prompt.get(..shared) else {
            return;
        };
        if shared == 0 || self.cached.len() < shared || self.slots.has_server_prefix(prefix) {
            return;
        }
        match self.weights.snapshot(shared) {
            Ok(snapshot) => self
                .slots
                .store(Scope::Server, prefix.to_vec(), shared, snapshot),
            Err(e) => tracing::warn!(error = %e, "could not keep the system prompt's reading"),
        }
    }

    fn generate(
        &mut self,
        job: &Job,
        others_wait: &dyn Fn() -> bool,
    ) -> Result<GenStats, LlmError> {
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
        let (cached, restored) = if job.reuse_cache {
            self.reuse_prefix(job)?
        } else {
            self.forget();
            (0, 0)
        };
        self.cached_scope = job.scope.clone();
        self.cached_shared = job.shared.min(job.prompt.len());
        stats.cached_tokens = cached;
        stats.restored_tokens = restored;
        tracing::debug!(
            cached_tokens = cached,
            restored_tokens = restored,
            prompt_tokens = job.prompt.len(),
            slots = self.slots.len(),
            "prefix cache"
        );
        let mut logits = Vec::new();
        let mut pos = cached;
        // Read in chunks, the server's own prefix ending one, so that its
        // reading can be kept for every conversation.
        let shared = self.cached_shared;
        let mut pieces = Vec::new();
        if pos < shared {
            pieces.push(&job.prompt[pos..shared]);
            pieces.push(&job.prompt[shared..]);
        } else {
            pieces.push(job.prompt.get(pos..).unwrap_or_default());
        }
        for piece in pieces {
            for chunk in piece.chunks(PREFILL_CHUNK) {
                if job.tx.is_closed() || (job.ahead && others_wait()) {
                    stats.cancelled = true;
                    stats.prefill = started.elapsed();
                    return Ok(stats);
                }
                logits = self.forward(chunk, pos)?;
                pos += chunk.len();
            }
            if job.reuse_cache && pos >= shared {
                self.keep_server_prefix(&job.prompt, shared);
            }
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
                cached_tokens: cached as u32,
            };
            out.finish(finish, usage);
        }
        Ok(stats)
    }
}
