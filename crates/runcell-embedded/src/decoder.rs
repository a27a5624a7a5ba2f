//! The decoder of the Llama family from a GGUF, for the two architectures
//! runcell runs: `qwen2` and `llama`. It began as candle-transformers
//! 0.11.1's `models/quantized_qwen2.rs` (Copyright the candle authors, MIT OR
//! Apache-2.0, <https://github.com/huggingface/candle>), with what its
//! `quantized_llama.rs` does differently for `llama` ([`Family`]: no biases on
//! the attention's projections, interleaved rotary embeddings), and these
//! changes:
//!
//! - the KV cache can be cut back to its first `n` positions
//!   ([`ModelWeights::truncate_kv_cache`]), so a request that shares a prefix
//!   with the previous one only computes its new tokens;
//! - the token embedding stays quantized (candle expands the whole
//!   vocab × width table to f32: ~0.9 GB for the 1.5B); the rows a step
//!   looks up are dequantized as they are needed;
//! - every weight is a [`LeanMatMul`], which holds the file's blocks alone
//!   (candle's `QMatMul` adds a repacked copy of most of them);
//! - mixture-of-experts Llamas (Mixtral) are refused.
//!
//! The tied output matrix and the embedding share one copy of the tensor.
//! Owning these few hundred lines instead of depending on candle-transformers
//! (which compiles some hundred models to use two) takes about two minutes
//! of CPU off every cold build.

use std::collections::HashMap;
use std::sync::Arc;

use candle_core::quantized::{QTensor, gguf_file};
use candle_core::{DType, Device, IndexOp, Module, Result, Tensor};

use super::lean_matmul::LeanMatMul;

/// What differs between the architectures this decoder runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Family {
    /// `general.architecture`, which also prefixes its metadata keys.
    pub(crate) arch: &'static str,
    /// Whether the query, key and value projections have biases.
    attention_bias: bool,
    /// Rotary embeddings on interleaved pairs `(2i, 2i+1)` (GGML's "normal"
    /// mode, Llama's) rather than on halves `(i, i + d/2)` (NeoX's, Qwen's).
    interleaved_rope: bool,
}

impl Family {
    const QWEN2: Self = Self {
        arch: "qwen2",
        attention_bias: true,
        interleaved_rope: false,
    };
    const LLAMA: Self = Self {
        arch: "llama",
        attention_bias: false,
        interleaved_rope: true,
    };

    /// The family of a GGUF's `general.architecture`.
    pub(crate) fn of(arch: &str) -> Option<Self> {
        [Self::QWEN2, Self::LLAMA]
            .into_iter()
            .find(|family| family.arch == arch)
    }
}

/// Root-mean-square normalisation with a learned scale (candle-transformers'
/// `quantized_nn::RmsNorm`).
#[derive(Debug)]
struct RmsNorm {
    weight: Tensor,
    eps: f32,
}

impl RmsNorm {
    fn from_qtensor(weight: &QTensor, eps: f64) -> Result<Self> {
        Ok(Self {
            weight: weight.dequantize(&weight.device())?,
            eps: eps as f32,
        })
    }
}

impl Module for RmsNorm {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        candle_nn::ops::rms_norm(x, &self.weight, self.eps)
    }
}

/// Positions allocated at once when a layer's cache grows.
const KV_GROW_BY: usize = 256;

/// One layer's keys and values, `(batch, kv heads, capacity, head dim)`,
/// of which the first `len` positions are filled: a new position is
/// written in place (candle-transformers concatenated the whole cache
/// again at every step) and the buffer grows by doubling.
#[derive(Debug)]
struct KvBuffer {
    k: Tensor,
    v: Tensor,
    len: usize,
}

impl KvBuffer {
    fn capacity(&self) -> usize {
        self.k.dim(2).unwrap_or(0)
    }

    /// Room for `needed` positions, the filled ones kept.
    fn reserve(buffer: Option<Self>, like: &Tensor, needed: usize) -> Result<Self> {
        let old = match buffer {
            Some(buffer) if buffer.capacity() >= needed => return Ok(buffer),
            old => old,
        };
        let (b_sz, n_kv_head, _, head_dim) = like.dims4()?;
        let old_capacity = old.as_ref().map_or(0, Self::capacity);
        let capacity = needed.max(old_capacity * 2).next_multiple_of(KV_GROW_BY);
        let shape = (b_sz, n_kv_head, capacity, head_dim);
        let grown = Self {
            k: Tensor::zeros(shape, like.dtype(), like.device())?,
            v: Tensor::zeros(shape, like.dtype(), like.device())?,
            len: old.as_ref().map_or(0, |b| b.len),
        };
        if let Some(old) = old {
            grown.k.slice_set(&old.k, 2, 0)?;
            grown.v.slice_set(&old.v, 2, 0)?;
        }
        Ok(grown)
    }

    /// Appends `k` and `v` (contiguous) after the filled positions.
    fn append(&mut self, k: &Tensor, v: &Tensor) -> Result<()> {
        self.k.slice_set(k, 2, self.len)?;
        self.v.slice_set(v, 2, self.len)?;
        self.len += k.dim(2)?;
        Ok(())
    }

    /// The filled positions, as views (no copy).
    fn filled(&self) -> Result<(Tensor, Tensor)> {
        Ok((
            self.k.narrow(2, 0, self.len)?,
            self.v.narrow(2, 0, self.len)?,
        ))
    }
}

/// What a conversation's reading left in the cache, copied out so that the
/// cache can serve another one and come back to it ([`ModelWeights::snapshot`]).
#[derive(Debug)]
pub(crate) struct KvSnapshot {
    /// Per layer, keys and values of exactly `len` positions.
    layers: Vec<(Tensor, Tensor)>,
    len: usize,
}

impl KvSnapshot {
    /// The positions it holds.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// A snapshot of `len` positions of one layer `width` floats wide, all
    /// zero (tests of what holds snapshots).
    #[cfg(test)]
    pub(crate) fn zeros(len: usize, width: usize) -> Self {
        let zeros = || Tensor::zeros((1, 1, len, width), DType::F32, &Device::Cpu);
        match (zeros(), zeros()) {
            (Ok(k), Ok(v)) => Self {
                layers: vec![(k, v)],
                len,
            },
            _ => Self {
                layers: Vec::new(),
                len: 0,
            },
        }
    }

    /// The memory it holds.
    pub(crate) fn bytes(&self) -> usize {
        self.layers
            .iter()
            .map(|(k, v)| (k.elem_count() + v.elem_count()) * k.dtype().size_in_bytes())
            .sum()
    }
}

/// 1 where query `i` (at position `index_pos + i`) must not see key `j`:
/// `(seq_len, index_pos + seq_len)`, the cached prefix all visible.
fn causal_mask(seq_len: usize, index_pos: usize, device: &Device) -> Result<Tensor> {
    let kv_len = index_pos + seq_len;
    let mask: Vec<u8> = (0..seq_len)
        .flat_map(|i| (0..kv_len).map(move |j| u8::from(j > index_pos + i)))
        .collect();
    Tensor::from_slice(&mask, (seq_len, kv_len), device)
}

#[derive(Debug)]
struct Mlp {
    feed_forward_w1: LeanMatMul,
    feed_forward_w2: LeanMatMul,
    feed_forward_w3: LeanMatMul,
}

impl Module for Mlp {
    fn forward(&self, xs: &Tensor) -> Result<Tensor> {
        let w1 = self.feed_forward_w1.forward(xs)?;
        let w3 = self.feed_forward_w3.forward(xs)?;
        self.feed_forward_w2
            .forward(&(candle_nn::ops::silu(&w1)? * w3)?)
    }
}

#[derive(Debug)]
struct LayerWeights {
    attention_wq: LeanMatMul,
    attention_wk: LeanMatMul,
    attention_wv: LeanMatMul,
    /// The projections' biases (Qwen2's), in q, k, v order.
    attention_bias: Option<[Tensor; 3]>,
    interleaved_rope: bool,
    attention_wo: LeanMatMul,
    attention_norm: RmsNorm,
    mlp: Mlp,
    ffn_norm: RmsNorm,
    n_head: usize,
    n_kv_head: usize,
    head_dim: usize,
    cos: Tensor,
    sin: Tensor,
    neg_inf: Tensor,
    /// Keys and values of the positions read so far.
    kv_cache: Option<KvBuffer>,
}

fn masked_fill(on_false: &Tensor, mask: &Tensor, on_true: &Tensor) -> Result<Tensor> {
    let shape = mask.shape();
    mask.where_cond(&on_true.broadcast_as(shape.dims())?, on_false)
}

impl LayerWeights {
    fn apply_rotary_emb(&self, x: &Tensor, index_pos: usize) -> Result<Tensor> {
        let (_b_sz, _n_head, seq_len, _n_embd) = x.dims4()?;
        let cos = self.cos.narrow(0, index_pos, seq_len)?;
        let sin = self.sin.narrow(0, index_pos, seq_len)?;
        let x = x.contiguous()?;
        if self.interleaved_rope {
            candle_nn::rotary_emb::rope_i(&x, &cos, &sin)
        } else {
            candle_nn::rotary_emb::rope(&x, &cos, &sin)
        }
    }

    fn cached_len(&self) -> usize {
        self.kv_cache.as_ref().map_or(0, |b| b.len)
    }

    fn forward_attn(
        &mut self,
        x: &Tensor,
        mask: Option<&Tensor>,
        index_pos: usize,
    ) -> Result<Tensor> {
        let (b_sz, seq_len, n_embd) = x.dims3()?;

        let q = self.attention_wq.forward(x)?;
        let k = self.attention_wk.forward(x)?;
        let v = self.attention_wv.forward(x)?;

        let (q, k, v) = match &self.attention_bias {
            Some([bq, bk, bv]) => (
                q.broadcast_add(bq)?,
                k.broadcast_add(bk)?,
                v.broadcast_add(bv)?,
            ),
            None => (q, k, v),
        };

        let q = q
            .reshape((b_sz, seq_len, self.n_head, self.head_dim))?
            .transpose(1, 2)?
            .contiguous()?;
        let k = k
            .reshape((b_sz, seq_len, self.n_kv_head, self.head_dim))?
            .transpose(1, 2)?
            .contiguous()?;
        let v = v
            .reshape((b_sz, seq_len, self.n_kv_head, self.head_dim))?
            .transpose(1, 2)?
            .contiguous()?;

        let q = self.apply_rotary_emb(&q, index_pos)?;
        let k = self.apply_rotary_emb(&k, index_pos)?;

        // The new positions must follow the cached ones exactly: anything
        // else would attend to the wrong keys without a word.
        let cached = self.cached_len();
        if index_pos != cached {
            candle_core::bail!("position {index_pos} does not follow the {cached} cached ones");
        }
        let mut buffer = KvBuffer::reserve(self.kv_cache.take(), &k, cached + seq_len)?;
        buffer.append(&k, &v)?;
        let (k, v) = buffer.filled()?;
        self.kv_cache = Some(buffer);

        // Grouped-query attention without repeating the keys and values for
        // every query head: the `n_rep` query heads that share a KV head
        // (consecutive ones) are read as one head of `n_rep × seq_len` rows,
        // and the cache is used where it lies (candle's matmul takes the
        // strided views).
        let n_rep = self.n_head / self.n_kv_head;
        let q = q.reshape((b_sz, self.n_kv_head, n_rep * seq_len, self.head_dim))?;
        let att = (q.matmul(&k.t()?)? / (self.head_dim as f64).sqrt())?;
        let kv_len = k.dim(2)?;
        let att = att.reshape((b_sz, self.n_head, seq_len, kv_len))?;
        let att = match mask {
            None => att,
            Some(mask) => {
                let mask = mask.broadcast_as(att.shape())?;
                masked_fill(&att, &mask, &self.neg_inf)?
            }
        };
        let att = candle_nn::ops::softmax_last_dim(&att)?;
        let att = att.reshape((b_sz, self.n_kv_head, n_rep * seq_len, kv_len))?;
        let y = att.matmul(&v)?;
        let y = y.reshape((b_sz, self.n_head, seq_len, self.head_dim))?;
        let y = y.transpose(1, 2)?.reshape(&[b_sz, seq_len, n_embd])?;
        self.attention_wo.forward(&y)
    }
}

/// The token embedding, kept quantized: rows are dequantized on lookup.
#[derive(Debug)]
struct QEmbedding {
    table: Arc<LeanMatMul>,
}

impl QEmbedding {
    /// `(batch, seq)` token ids to `(batch, seq, width)` f32.
    fn forward(&self, ids: &Tensor) -> Result<Tensor> {
        let (b_sz, seq_len) = ids.dims2()?;
        let ids = ids.flatten_all()?.to_vec1::<u32>()?;
        let rows = self.table.rows(&ids)?;
        let width = rows.dim(1)?;
        rows.reshape((b_sz, seq_len, width))
    }
}

/// The longest context the rotary tables are made for, whatever a file says
/// (a 128k-token Llama would otherwise ask for tens of MB of tables).
const MAX_CONTEXT: usize = 32_768;

pub(crate) struct ModelWeights {
    tok_embeddings: QEmbedding,
    layers: Vec<LayerWeights>,
    norm: RmsNorm,
    output: Arc<LeanMatMul>,
    masks: HashMap<(usize, usize), Tensor>,
}

fn precomput_freqs_cis(
    head_dim: usize,
    freq_base: f32,
    context_length: usize,
    device: &Device,
) -> Result<(Tensor, Tensor)> {
    let theta: Vec<_> = (0..head_dim)
        .step_by(2)
        .map(|i| 1f32 / freq_base.powf(i as f32 / head_dim as f32))
        .collect();
    let theta = Tensor::new(theta.as_slice(), device)?;
    let idx_theta = Tensor::arange(0, context_length as u32, device)?
        .to_dtype(DType::F32)?
        .reshape((context_length, 1))?
        .matmul(&theta.reshape((1, theta.elem_count()))?)?;
    let cos = idx_theta.cos()?;
    let sin = idx_theta.sin()?;
    Ok((cos, sin))
}

impl ModelWeights {
    pub(crate) fn from_gguf<R: std::io::Seek + std::io::Read>(
        family: Family,
        ct: &gguf_file::Content,
        reader: &mut R,
        device: &Device,
    ) -> Result<Self> {
        let key = |name: &str| format!("{}.{name}", family.arch);
        let md_get = |name: &str| {
            let key = key(name);
            match ct.metadata.get(&key) {
                None => candle_core::bail!("cannot find {key} in metadata"),
                Some(v) => Ok(v),
            }
        };
        let md_usize = |name: &str| -> Result<usize> { Ok(md_get(name)?.to_u32()? as usize) };

        let experts = md_get("expert_count").and_then(|v| v.to_u32()).unwrap_or(0);
        if experts > 1 {
            candle_core::bail!("mixture-of-experts models ({experts} experts) are not supported");
        }
        let head_count = md_usize("attention.head_count")?;
        let head_count_kv = md_usize("attention.head_count_kv")?;
        let embedding_length = md_usize("embedding_length")?;
        let context_length = md_usize("context_length")?;
        let block_count = md_usize("block_count")?;
        let rms_norm_eps = md_get("attention.layer_norm_rms_epsilon")?.to_f32()? as f64;
        let rope_freq_base = md_get("rope.freq_base")
            .and_then(|m| m.to_f32())
            .unwrap_or(10000f32);
        if head_count == 0 || head_count_kv == 0 || !head_count.is_multiple_of(head_count_kv) {
            candle_core::bail!("{head_count} heads cannot share {head_count_kv} KV heads");
        }
        if embedding_length == 0 || !embedding_length.is_multiple_of(head_count) {
            candle_core::bail!(
                "a width of {embedding_length} cannot be cut into {head_count} heads"
            );
        }
        // A context too long to hold its rotary tables is cut (they cost
        // head_dim × 4 bytes a position).
        let context_length = context_length.clamp(1, MAX_CONTEXT);

        let head_dim = embedding_length / head_count;
        let rope_dim = md_usize("rope.dimension_count").unwrap_or(head_dim);

        let neg_inf = Tensor::new(f32::NEG_INFINITY, device)?;

        let tok_embeddings = Arc::new(LeanMatMul::new(ct.tensor(
            reader,
            "token_embd.weight",
            device,
        )?)?);
        let norm = RmsNorm::from_qtensor(
            &ct.tensor(reader, "output_norm.weight", device)?,
            rms_norm_eps,
        )?;
        let output = match ct.tensor(reader, "output.weight", device) {
            Ok(v) => Arc::new(LeanMatMul::new(v)?),
            // Tied embeddings: one copy serves both.
            _ => tok_embeddings.clone(),
        };
        let tok_embeddings = QEmbedding {
            table: tok_embeddings,
        };

        let (cos, sin) = precomput_freqs_cis(rope_dim, rope_freq_base, context_length, device)?;

        let mut layers = Vec::with_capacity(block_count);

        for layer_idx in 0..block_count {
            let prefix = format!("blk.{layer_idx}");
            let attention_wq = ct.tensor(reader, &format!("{prefix}.attn_q.weight"), device)?;
            let attention_wk = ct.tensor(reader, &format!("{prefix}.attn_k.weight"), device)?;
            let attention_wv = ct.tensor(reader, &format!("{prefix}.attn_v.weight"), device)?;

            let attention_bias = if family.attention_bias {
                let mut bias = |name: &str| {
                    ct.tensor(reader, &format!("{prefix}.attn_{name}.bias"), device)?
                        .dequantize(device)
                };
                Some([bias("q")?, bias("k")?, bias("v")?])
            } else {
                None
            };

            let attention_wo =
                ct.tensor(reader, &format!("{prefix}.attn_output.weight"), device)?;

            let mlp = {
                let feed_forward_w1 =
                    ct.tensor(reader, &format!("{prefix}.ffn_gate.weight"), device)?;
                let feed_forward_w2 =
                    ct.tensor(reader, &format!("{prefix}.ffn_down.weight"), device)?;
                let feed_forward_w3 =
                    ct.tensor(reader, &format!("{prefix}.ffn_up.weight"), device)?;
                Mlp {
                    feed_forward_w1: LeanMatMul::new(feed_forward_w1)?,
                    feed_forward_w2: LeanMatMul::new(feed_forward_w2)?,
                    feed_forward_w3: LeanMatMul::new(feed_forward_w3)?,
                }
            };

            let attention_norm =
                ct.tensor(reader, &format!("{prefix}.attn_norm.weight"), device)?;
            let ffn_norm = ct.tensor(reader, &format!("{prefix}.ffn_norm.weight"), device)?;

            layers.push(LayerWeights {
                attention_wq: LeanMatMul::new(attention_wq)?,
                attention_wk: LeanMatMul::new(attention_wk)?,
                attention_wv: LeanMatMul::new(attention_wv)?,
                attention_bias,
                interleaved_rope: family.interleaved_rope,
                attention_wo: LeanMatMul::new(attention_wo)?,
                attention_norm: RmsNorm::from_qtensor(&attention_norm, rms_norm_eps)?,
                cos: cos.clone(),
                sin: sin.clone(),
                mlp,
                ffn_norm: RmsNorm::from_qtensor(&ffn_norm, rms_norm_eps)?,
                n_head: head_count,
                n_kv_head: head_count_kv,
                head_dim,
                neg_inf: neg_inf.clone(),
                kv_cache: None,
            });
        }

        Ok(Self {
            tok_embeddings,
            layers,
            norm,
            output,
            masks: HashMap::new(),
        })
    }

    fn mask(&mut self, seq_len: usize, index_pos: usize, device: &Device) -> Result<Tensor> {
        let kv_len = index_pos + seq_len;
        if let Some(mask) = self.masks.get(&(seq_len, kv_len)) {
            Ok(mask.clone())
        } else {
            let mask = causal_mask(seq_len, index_pos, device)?;
            self.masks.insert((seq_len, kv_len), mask.clone());
            Ok(mask)
        }
    }

    /// Forgets every cached position.
    pub(crate) fn clear_kv_cache(&mut self) {
        for layer in &mut self.layers {
            layer.kv_cache = None;
        }
    }

    /// How many positions the cache holds.
    #[cfg(test)]
    fn kv_cache_len(&self) -> usize {
        self.layers.first().map_or(0, LayerWeights::cached_len)
    }

    /// Keeps the first `n` cached positions and forgets the rest; the next
    /// [`Self::forward`] then starts at position `n`. An error (`n` beyond
    /// what every layer holds) clears the whole cache.
    pub(crate) fn truncate_kv_cache(&mut self, n: usize) -> Result<()> {
        if n == 0 {
            self.clear_kv_cache();
            return Ok(());
        }
        let result = self.layers.iter_mut().try_for_each(|layer| {
            let Some(buffer) = layer.kv_cache.as_mut() else {
                candle_core::bail!("a layer has no cache");
            };
            if buffer.len < n {
                candle_core::bail!("cannot keep {n} positions of {}", buffer.len);
            }
            // The buffer stays; positions past `n` are written over.
            buffer.len = n;
            Ok(())
        });
        if result.is_err() {
            self.clear_kv_cache();
        }
        result
    }

    /// A copy of the first `n` cached positions, which later writes to the
    /// cache leave alone.
    pub(crate) fn snapshot(&self, n: usize) -> Result<KvSnapshot> {
        let layers = self
            .layers
            .iter()
            .map(|layer| {
                let Some(buffer) = layer.kv_cache.as_ref() else {
                    candle_core::bail!("a layer has no cache");
                };
                if buffer.len < n {
                    candle_core::bail!("cannot copy {n} positions of {}", buffer.len);
                }
                Ok((
                    buffer.k.narrow(2, 0, n)?.copy()?,
                    buffer.v.narrow(2, 0, n)?.copy()?,
                ))
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(KvSnapshot { layers, len: n })
    }

    /// Makes the cache hold the first `n` positions of `snapshot` (and
    /// nothing after them). An error clears the cache.
    pub(crate) fn restore(&mut self, snapshot: &KvSnapshot, n: usize) -> Result<()> {
        if n == 0 {
            self.clear_kv_cache();
            return Ok(());
        }
        if snapshot.layers.len() != self.layers.len() || snapshot.len < n {
            self.clear_kv_cache();
            candle_core::bail!("cannot restore {n} positions from this snapshot");
        }
        let result =
            self.layers
                .iter_mut()
                .zip(&snapshot.layers)
                .try_for_each(|(layer, (k, v))| {
                    let (k, v) = (
                        k.narrow(2, 0, n)?.contiguous()?,
                        v.narrow(2, 0, n)?.contiguous()?,
                    );
                    let mut buffer = KvBuffer::reserve(layer.kv_cache.take(), &k, n)?;
                    buffer.len = 0;
                    buffer.append(&k, &v)?;
                    layer.kv_cache = Some(buffer);
                    Ok(())
                });
        if result.is_err() {
            self.clear_kv_cache();
        }
        result
    }

    pub(crate) fn forward(&mut self, x: &Tensor, index_pos: usize) -> Result<Tensor> {
        let (_b_sz, seq_len) = x.dims2()?;
        let mask = if seq_len == 1 {
            None
        } else {
            Some(self.mask(seq_len, index_pos, x.device())?)
        };
        let mut layer_in = self.tok_embeddings.forward(x)?;
        for layer in &mut self.layers {
            let x = layer_in;
            let residual = &x;
            let x = layer.attention_norm.forward(&x)?;
            let attn = layer.forward_attn(&x, mask.as_ref(), index_pos)?;
            let x = (attn + residual)?;

            let residual = &x;
            let x = layer.ffn_norm.forward(&x)?;
            let x = layer.mlp.forward(&x)?;
            let x = (x + residual)?;
            layer_in = x;
        }
        let x = self.norm.forward(&layer_in)?;
        let x = x.i((.., seq_len - 1, ..))?;
        self.output.forward(&x)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use std::io::Cursor;

    use candle_core::quantized::GgmlDType;
    use candle_core::quantized::gguf_file::Value;

    use super::*;

    const WIDTH: usize = 64;
    const HEADS: u32 = 4;
    const KV_HEADS: u32 = 2;
    const FFN: usize = 128;
    const VOCAB: usize = 48;
    const LAYERS: usize = 2;

    /// A small tensor of fixed, varied values.
    fn values(shape: (usize, usize), salt: f32) -> Tensor {
        let n = shape.0 * shape.1;
        let v: Vec<f32> = (0..n)
            .map(|i| ((i as f32 * 0.731 + salt) * 1.37).sin() * 0.4)
            .collect();
        Tensor::from_vec(v, shape, &Device::Cpu).unwrap()
    }

    fn q8(shape: (usize, usize), salt: f32) -> QTensor {
        QTensor::quantize(&values(shape, salt), GgmlDType::Q8_0).unwrap()
    }

    fn f32_vector(len: usize, salt: f32) -> QTensor {
        let t = values((1, len), salt).reshape(len).unwrap();
        QTensor::quantize(&(t + 1.0).unwrap(), GgmlDType::F32).unwrap()
    }

    /// A two-layer model of `family` as a GGUF file: grouped-query
    /// attention (4 heads, 2 KV heads), Qwen2's tied output, Llama's own.
    fn tiny_gguf(family: Family, extra: &[(&str, Value)]) -> Vec<u8> {
        let arch = family.arch;
        let mut tensors: Vec<(String, QTensor)> = vec![
            ("token_embd.weight".into(), q8((VOCAB, WIDTH), 0.1)),
            ("output_norm.weight".into(), f32_vector(WIDTH, 0.2)),
        ];
        if family == Family::LLAMA {
            tensors.push(("output.weight".into(), q8((VOCAB, WIDTH), 0.3)));
        }
        let kv = WIDTH / 2;
        for layer in 0..LAYERS {
            let s = layer as f32;
            let p = format!("blk.{layer}");
            tensors.extend([
                (format!("{p}.attn_q.weight"), q8((WIDTH, WIDTH), 1.0 + s)),
                (format!("{p}.attn_k.weight"), q8((kv, WIDTH), 2.0 + s)),
                (format!("{p}.attn_v.weight"), q8((kv, WIDTH), 3.0 + s)),
                (
                    format!("{p}.attn_output.weight"),
                    q8((WIDTH, WIDTH), 4.0 + s),
                ),
                (format!("{p}.ffn_gate.weight"), q8((FFN, WIDTH), 5.0 + s)),
                (format!("{p}.ffn_up.weight"), q8((FFN, WIDTH), 6.0 + s)),
                (format!("{p}.ffn_down.weight"), q8((WIDTH, FFN), 7.0 + s)),
                (format!("{p}.attn_norm.weight"), f32_vector(WIDTH, 8.0 + s)),
                (format!("{p}.ffn_norm.weight"), f32_vector(WIDTH, 9.0 + s)),
            ]);
            if family.attention_bias {
                tensors.extend([
                    (format!("{p}.attn_q.bias"), f32_vector(WIDTH, 10.0 + s)),
                    (format!("{p}.attn_k.bias"), f32_vector(kv, 11.0 + s)),
                    (format!("{p}.attn_v.bias"), f32_vector(kv, 12.0 + s)),
                ]);
            }
        }
        let metadata: Vec<(String, Value)> = vec![
            ("general.architecture".into(), Value::String(arch.into())),
            (format!("{arch}.attention.head_count"), Value::U32(HEADS)),
            (
                format!("{arch}.attention.head_count_kv"),
                Value::U32(KV_HEADS),
            ),
            (format!("{arch}.embedding_length"), Value::U32(WIDTH as u32)),
            (format!("{arch}.context_length"), Value::U32(640)),
            (format!("{arch}.block_count"), Value::U32(LAYERS as u32)),
            (
                format!("{arch}.attention.layer_norm_rms_epsilon"),
                Value::F32(1e-6),
            ),
            (format!("{arch}.rope.freq_base"), Value::F32(10000.0)),
            (
                format!("{arch}.rope.dimension_count"),
                Value::U32(WIDTH as u32 / HEADS),
            ),
        ];
        let mut metadata = metadata;
        for (key, value) in extra {
            metadata.retain(|(k, _)| k != key);
            metadata.push(((*key).to_string(), value.clone()));
        }
        let metadata: Vec<(&str, &Value)> = metadata.iter().map(|(k, v)| (k.as_str(), v)).collect();
        let tensors: Vec<(&str, &QTensor)> = tensors.iter().map(|(k, v)| (k.as_str(), v)).collect();
        let mut file = Cursor::new(Vec::new());
        gguf_file::write(&mut file, &metadata, &tensors).unwrap();
        file.into_inner()
    }

    fn try_load(family: Family, extra: &[(&str, Value)]) -> Result<ModelWeights> {
        let mut file = Cursor::new(tiny_gguf(family, extra));
        let content = gguf_file::Content::read(&mut file).unwrap();
        ModelWeights::from_gguf(family, &content, &mut file, &Device::Cpu)
    }

    fn load(family: Family) -> ModelWeights {
        try_load(family, &[]).unwrap()
    }

    fn logits(model: &mut ModelWeights, tokens: &[u32], pos: usize) -> Vec<f32> {
        let input = Tensor::new(tokens, &Device::Cpu)
            .unwrap()
            .unsqueeze(0)
            .unwrap();
        let out = model.forward(&input, pos).unwrap();
        out.squeeze(0).unwrap().to_vec1().unwrap()
    }

    /// The first logits and the sum of their magnitudes.
    /// The largest difference between two runs' logits.
    fn max_difference(want: &[f32], got: &[f32]) -> f32 {
        want.iter()
            .zip(got)
            .map(|(a, b)| (a - b).abs())
            .fold(0f32, f32::max)
    }

    fn fingerprint(logits: &[f32]) -> (Vec<f32>, f32) {
        (logits[..6].to_vec(), logits.iter().map(|l| l.abs()).sum())
    }

    fn assert_close(what: &str, got: &(Vec<f32>, f32), want: ([f32; 6], f32)) {
        let close = |a: f32, b: f32| (a - b).abs() <= 1e-4 * (1.0 + b.abs());
        assert!(
            got.0.iter().zip(want.0).all(|(&a, b)| close(a, b)) && close(got.1, want.1),
            "{what}: {got:?}, not {want:?}"
        );
    }

    /// What candle-transformers 0.11.1's `quantized_qwen2` and
    /// `quantized_llama` computed for these files (compared in the same
    /// build when this decoder replaced them: identical to the last bit),
    /// for a prompt and then one more token through the KV cache.
    #[test]
    fn each_family_computes_what_candle_transformers_did() {
        let want = [
            (
                Family::QWEN2,
                (
                    [
                        1.005693,
                        1.0665123,
                        -0.3480804,
                        -1.2750641,
                        -0.43186688,
                        1.0214427,
                    ],
                    39.70556,
                ),
                (
                    [
                        0.602209, -1.1462883, -1.3039813, 0.3586604, 1.5228032, 0.5658783,
                    ],
                    47.085888,
                ),
            ),
            (
                Family::LLAMA,
                (
                    [
                        0.73903143, 1.4855385, 0.15887845, -1.3928128, -1.0007843, 0.7721664,
                    ],
                    45.31664,
                ),
                (
                    [
                        0.07897705, -1.4178169, -0.930342, 0.8564676, 1.4469115, 0.0319494,
                    ],
                    45.20372,
                ),
            ),
        ];
        for (family, prompt, next) in want {
            let mut model = load(family);
            let got = fingerprint(&logits(&mut model, &[1, 5, 9, 3], 0));
            assert_close(&format!("{} prompt", family.arch), &got, prompt);
            let got = fingerprint(&logits(&mut model, &[7], 4));
            assert_close(&format!("{} next", family.arch), &got, next);
        }
    }

    #[test]
    fn a_cache_cut_back_to_a_prefix_computes_what_a_fresh_one_does() {
        for family in [Family::QWEN2, Family::LLAMA] {
            let mut fresh = load(family);
            logits(&mut fresh, &[1, 5, 9, 3], 0);
            let want = logits(&mut fresh, &[7], 4);

            let mut reused = load(family);
            logits(&mut reused, &[1, 5, 2, 2, 8], 0);
            reused.truncate_kv_cache(2).unwrap();
            assert_eq!(reused.kv_cache_len(), 2);
            logits(&mut reused, &[9, 3], 2);
            let got = logits(&mut reused, &[7], 4);
            let diff = max_difference(&want, &got);
            assert!(diff < 1e-4, "{}: {diff}", family.arch);

            // Positions that do not follow the cache are refused, and a cut
            // beyond what it holds empties it.
            assert!(
                reused
                    .forward(&Tensor::new(&[[1u32]], &Device::Cpu).unwrap(), 9)
                    .is_err()
            );
            assert!(reused.truncate_kv_cache(50).is_err());
            assert_eq!(reused.kv_cache_len(), 0);
        }
    }

    #[test]
    fn a_snapshot_restored_computes_what_the_cache_it_was_taken_from_did() {
        for family in [Family::QWEN2, Family::LLAMA] {
            let mut fresh = load(family);
            // Longer than one growth step, so that the buffer grows while
            // the conversation is read token by token.
            let long: Vec<u32> = (0..300).map(|i| (i * 7 % 30) as u32).collect();
            logits(&mut fresh, &long, 0);
            let want = logits(&mut fresh, &[7], long.len());

            let mut cache = load(family);
            for (pos, token) in long.iter().enumerate() {
                logits(&mut cache, &[*token], pos);
            }
            let snapshot = cache.snapshot(long.len()).unwrap();
            assert_eq!(snapshot.len(), long.len());
            // 2 KV heads of width 16, keys and values, f32, 300 positions,
            // each of the 2 layers.
            assert_eq!(snapshot.bytes(), 2 * 2 * 16 * 2 * 4 * 300);
            // Another conversation overwrites the buffer in place...
            cache.truncate_kv_cache(3).unwrap();
            logits(&mut cache, &[4, 4, 4, 4], 3);
            // ...and the snapshot, restored, is unharmed by it.
            cache.restore(&snapshot, long.len()).unwrap();
            assert_eq!(cache.kv_cache_len(), long.len());
            let got = logits(&mut cache, &[7], long.len());
            let diff = max_difference(&want, &got);
            assert!(diff < 1e-4, "{}: {diff}", family.arch);

            // A part of it, too.
            cache.restore(&snapshot, 10).unwrap();
            assert_eq!(cache.kv_cache_len(), 10);
            assert!(cache.restore(&snapshot, 301).is_err());
            assert_eq!(cache.kv_cache_len(), 0);
        }
    }

    #[test]
    fn files_it_cannot_run_are_refused_with_a_reason() {
        assert_eq!(Family::of("qwen2"), Some(Family::QWEN2));
        assert_eq!(Family::of("llama"), Some(Family::LLAMA));
        assert_eq!(Family::of("gpt2"), None);
        let refused = |family: Family, extra: &[(&str, Value)]| {
            try_load(family, extra)
                .err()
                .map(|e| e.to_string())
                .unwrap_or_default()
        };
        let mixtral = refused(Family::LLAMA, &[("llama.expert_count", Value::U32(8))]);
        assert!(mixtral.contains("mixture-of-experts"), "{mixtral}");
        let no_heads = refused(
            Family::QWEN2,
            &[("qwen2.attention.head_count", Value::U32(0))],
        );
        assert!(no_heads.contains("heads"), "{no_heads}");
        let odd = refused(
            Family::QWEN2,
            &[("qwen2.attention.head_count_kv", Value::U32(3))],
        );
        assert!(odd.contains("KV heads"), "{odd}");
        let uneven = refused(
            Family::LLAMA,
            &[
                ("llama.attention.head_count", Value::U32(3)),
                ("llama.attention.head_count_kv", Value::U32(3)),
            ],
        );
        assert!(uneven.contains("cannot be cut"), "{uneven}");
        // Qwen2 without its attention biases is not a Qwen2.
        let mut file = Cursor::new(tiny_gguf(Family::LLAMA, &[]));
        let content = gguf_file::Content::read(&mut file).unwrap();
        let Err(e) = ModelWeights::from_gguf(Family::QWEN2, &content, &mut file, &Device::Cpu)
        else {
            panic!("a Llama file loaded as Qwen2");
        };
        assert!(e.to_string().contains("qwen2."), "{e}");
    }
}
