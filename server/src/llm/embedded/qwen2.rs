//! Qwen2 from a GGUF: candle-transformers 0.11.1's
//! `models/quantized_qwen2.rs` (Copyright the candle authors, MIT OR
//! Apache-2.0, <https://github.com/huggingface/candle>), changed in two ways:
//!
//! - the KV cache can be cut back to its first `n` positions
//!   ([`ModelWeights::truncate_kv_cache`]), so a request that shares a prefix
//!   with the previous one only computes its new tokens;
//! - the token embedding stays quantized (candle expands the whole
//!   vocab × width table to f32: ~0.9 GB for the 1.5B); the rows a step
//!   looks up are dequantized as they are needed;
//! - every weight is a [`LeanMatMul`], which holds the file's blocks alone
//!   (candle's `QMatMul` adds a repacked copy of most of them).
//!
//! The tied output matrix and the embedding share one copy of the tensor.

use std::collections::HashMap;
use std::sync::Arc;

use candle_core::quantized::gguf_file;
use candle_core::{DType, Device, IndexOp, Module, Result, Tensor};
use candle_transformers::quantized_nn::RmsNorm;
use candle_transformers::utils::repeat_kv;

use super::lean_matmul::LeanMatMul;

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
    attention_bq: Tensor,
    attention_bk: Tensor,
    attention_bv: Tensor,
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
    /// Keys and values, `(batch, kv heads, positions, head dim)`.
    kv_cache: Option<(Tensor, Tensor)>,
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
        candle_nn::rotary_emb::rope(&x.contiguous()?, &cos, &sin)
    }

    fn cached_len(&self) -> usize {
        self.kv_cache
            .as_ref()
            .and_then(|(k, _)| k.dim(2).ok())
            .unwrap_or(0)
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

        let q = q.broadcast_add(&self.attention_bq)?;
        let k = k.broadcast_add(&self.attention_bk)?;
        let v = v.broadcast_add(&self.attention_bv)?;

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
        let (k, v) = match &self.kv_cache {
            None => (k, v),
            Some((k_cache, v_cache)) => {
                let k = Tensor::cat(&[k_cache, &k], 2)?;
                let v = Tensor::cat(&[v_cache, &v], 2)?;
                (k, v)
            }
        };
        self.kv_cache = Some((k.clone(), v.clone()));

        let k = repeat_kv(k, self.n_head / self.n_kv_head)?;
        let v = repeat_kv(v, self.n_head / self.n_kv_head)?;

        let att = (q.matmul(&k.t()?)? / (self.head_dim as f64).sqrt())?;
        let att = match mask {
            None => att,
            Some(mask) => {
                let mask = mask.broadcast_as(att.shape())?;
                masked_fill(&att, &mask, &self.neg_inf)?
            }
        };
        let att = candle_nn::ops::softmax_last_dim(&att)?;
        // Convert to contiguous as matmul doesn't support strided vs for now.
        let y = att.matmul(&v.contiguous()?)?;
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

pub struct ModelWeights {
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
    pub fn from_gguf<R: std::io::Seek + std::io::Read>(
        ct: &gguf_file::Content,
        reader: &mut R,
        device: &Device,
    ) -> Result<Self> {
        let md_get = |s: &str| match ct.metadata.get(s) {
            None => candle_core::bail!("cannot find {s} in metadata"),
            Some(v) => Ok(v),
        };

        let head_count = md_get("qwen2.attention.head_count")?.to_u32()? as usize;
        let head_count_kv = md_get("qwen2.attention.head_count_kv")?.to_u32()? as usize;
        let embedding_length = md_get("qwen2.embedding_length")?.to_u32()? as usize;
        let context_length = md_get("qwen2.context_length")?.to_u32()? as usize;
        let block_count = md_get("qwen2.block_count")?.to_u32()? as usize;
        let rms_norm_eps = md_get("qwen2.attention.layer_norm_rms_epsilon")?.to_f32()? as f64;
        let rope_freq_base = md_get("qwen2.rope.freq_base")
            .and_then(|m| m.to_f32())
            .unwrap_or(10000f32);
        if head_count == 0 || head_count_kv == 0 || !head_count.is_multiple_of(head_count_kv) {
            candle_core::bail!("{head_count} heads cannot share {head_count_kv} KV heads");
        }

        let head_dim = embedding_length / head_count;

        let neg_inf = Tensor::new(f32::NEG_INFINITY, device)?;

        let tok_embeddings = Arc::new(LeanMatMul::new(ct.tensor(
            reader,
            "token_embd.weight",
            device,
        )?)?);
        let norm = RmsNorm::from_qtensor(
            ct.tensor(reader, "output_norm.weight", device)?,
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

        let (cos, sin) = precomput_freqs_cis(head_dim, rope_freq_base, context_length, device)?;

        let mut layers = Vec::with_capacity(block_count);

        for layer_idx in 0..block_count {
            let prefix = format!("blk.{layer_idx}");
            let attention_wq = ct.tensor(reader, &format!("{prefix}.attn_q.weight"), device)?;
            let attention_wk = ct.tensor(reader, &format!("{prefix}.attn_k.weight"), device)?;
            let attention_wv = ct.tensor(reader, &format!("{prefix}.attn_v.weight"), device)?;

            let attention_bq = ct.tensor(reader, &format!("{prefix}.attn_q.bias"), device)?;
            let attention_bk = ct.tensor(reader, &format!("{prefix}.attn_k.bias"), device)?;
            let attention_bv = ct.tensor(reader, &format!("{prefix}.attn_v.bias"), device)?;

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
                attention_bq: attention_bq.dequantize(device)?,
                attention_bk: attention_bk.dequantize(device)?,
                attention_bv: attention_bv.dequantize(device)?,
                attention_wo: LeanMatMul::new(attention_wo)?,
                attention_norm: RmsNorm::from_qtensor(attention_norm, rms_norm_eps)?,
                cos: cos.clone(),
                sin: sin.clone(),
                mlp,
                ffn_norm: RmsNorm::from_qtensor(ffn_norm, rms_norm_eps)?,
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
            let mask = candle_transformers::utils::build_causal_mask(seq_len, index_pos, device)?;
            self.masks.insert((seq_len, kv_len), mask.clone());
            Ok(mask)
        }
    }

    /// Forgets every cached position.
    pub fn clear_kv_cache(&mut self) {
        for layer in &mut self.layers {
            layer.kv_cache = None;
        }
    }

    /// How many positions the cache holds.
    pub fn kv_cache_len(&self) -> usize {
        self.layers.first().map_or(0, LayerWeights::cached_len)
    }

    /// Keeps the first `n` cached positions and forgets the rest; the next
    /// [`Self::forward`] then starts at position `n`. An error (`n` beyond
    /// what every layer holds) clears the whole cache.
    pub fn truncate_kv_cache(&mut self, n: usize) -> Result<()> {
        if n == 0 {
            self.clear_kv_cache();
            return Ok(());
        }
        let result = self.layers.iter_mut().try_for_each(|layer| {
            let Some((k, v)) = layer.kv_cache.take() else {
                candle_core::bail!("a layer has no cache");
            };
            let held = k.dim(2)?;
            if held < n {
                candle_core::bail!("cannot keep {n} positions of {held}");
            }
            layer.kv_cache = Some((k.narrow(2, 0, n)?, v.narrow(2, 0, n)?));
            Ok(())
        });
        if result.is_err() {
            self.clear_kv_cache();
        }
        result
    }

    pub fn forward(&mut self, x: &Tensor, index_pos: usize) -> Result<Tensor> {
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
