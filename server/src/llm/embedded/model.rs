//! The weights: a GGUF file read once into memory, with the tensor types
//! candle only has slow scalar kernels for (Q4_1, Q5_0, Q5_1) requantised to
//! Q8_0, then handed to candle-transformers' quantized Qwen2 or Llama.
//!
//! The file is read, not memory-mapped: mapping needs `unsafe`.

use std::io::Cursor;
use std::path::Path;

use candle_core::quantized::gguf_file::Content;
use candle_core::quantized::{GgmlDType, QTensor};
use candle_core::{Device, Tensor};
use candle_transformers::models::{quantized_llama, quantized_qwen2};

/// One of the architectures candle-transformers can run from a GGUF.
pub enum Weights {
    Qwen2(quantized_qwen2::ModelWeights),
    Llama(quantized_llama::ModelWeights),
}

impl Weights {
    /// Logits of the last position of `tokens`, which start at `pos`.
    pub fn forward(&mut self, tokens: &[u32], pos: usize) -> candle_core::Result<Vec<f32>> {
        let input = Tensor::new(tokens, &Device::Cpu)?.unsqueeze(0)?;
        let logits = match self {
            Self::Qwen2(m) => m.forward(&input, pos)?,
            Self::Llama(m) => m.forward(&input, pos)?,
        };
        logits
            .squeeze(0)?
            .to_dtype(candle_core::DType::F32)?
            .to_vec1()
    }

    pub fn clear_kv_cache(&mut self) {
        match self {
            Self::Qwen2(m) => m.clear_kv_cache(),
            Self::Llama(m) => m.clear_kv_cache(),
        }
    }
}

/// Whether candle runs `dtype` through a scalar (slow) kernel.
pub fn needs_requant(dtype: GgmlDType) -> bool {
    matches!(dtype, GgmlDType::Q4_1 | GgmlDType::Q5_0 | GgmlDType::Q5_1)
}

/// Q8_0 copy of `t` (same shape).
pub fn requant_q8_0(t: &QTensor) -> candle_core::Result<QTensor> {
    let dense = t.dequantize(&Device::Cpu)?;
    QTensor::quantize(&dense, GgmlDType::Q8_0)
}

/// A parsed GGUF whose tensors can be read from `data`.
pub struct Gguf {
    pub content: Content,
    pub data: Vec<u8>,
    /// How many tensors were requantised to Q8_0.
    pub requantised: usize,
}

impl std::fmt::Debug for Gguf {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Gguf")
            .field("bytes", &self.data.len())
            .field("tensors", &self.content.tensor_infos.len())
            .field("requantised", &self.requantised)
            .finish()
    }
}

impl Gguf {
    /// Reads `path` and requantises the slow tensor types. Errors are plain
    /// text for [`crate::llm::LlmError::ModelFile`].
    pub fn read(path: &Path) -> Result<Self, String> {
        let data = std::fs::read(path).map_err(|e| e.to_string())?;
        Self::from_bytes(data)
    }

    pub fn from_bytes(mut data: Vec<u8>) -> Result<Self, String> {
        let mut content = Content::read(&mut Cursor::new(&data))
            .map_err(|e| format!("not a readable GGUF file: {e}"))?;
        // Append the Q8_0 copies after the original data and point the
        // tensor table at them; the originals' bytes are simply unused.
        let mut names: Vec<String> = content
            .tensor_infos
            .iter()
            .filter(|(_, info)| needs_requant(info.ggml_dtype))
            .map(|(name, _)| name.clone())
            .collect();
        names.sort();
        let mut requantised = 0;
        for name in names {
            let q8 = {
                let mut cursor = Cursor::new(&data);
                let t = content
                    .tensor(&mut cursor, &name, &Device::Cpu)
                    .map_err(|e| format!("tensor {name}: {e}"))?;
                // Row lengths that are not a multiple of 32 stay as they are.
                match requant_q8_0(&t) {
                    Ok(q) => q,
                    Err(_) => continue,
                }
            };
            let bytes = q8.data().map_err(|e| format!("tensor {name}: {e}"))?;
            let base = content.tensor_data_offset as usize;
            let start = data.len().div_ceil(32) * 32;
            data.resize(start, 0);
            data.extend_from_slice(&bytes);
            if let Some(info) = content.tensor_infos.get_mut(&name) {
                info.ggml_dtype = GgmlDType::Q8_0;
                info.offset = (start - base) as u64;
            }
            requantised += 1;
        }
        Ok(Self {
            content,
            data,
            requantised,
        })
    }

    pub fn architecture(&self) -> String {
        self.meta_string("general.architecture").unwrap_or_default()
    }

    pub fn meta_string(&self, key: &str) -> Option<String> {
        self.content
            .metadata
            .get(key)
            .and_then(|v| v.to_string().ok())
            .cloned()
    }

    pub fn context_length(&self) -> Option<usize> {
        let key = format!("{}.context_length", self.architecture());
        self.content
            .metadata
            .get(&key)
            .and_then(|v| v.to_u32().ok())
            .map(|n| n as usize)
    }

    /// The model, by `general.architecture`. Consumes the file's bytes.
    pub fn into_weights(self) -> Result<Weights, String> {
        let arch = self.architecture();
        let mut reader = Cursor::new(self.data);
        let device = Device::Cpu;
        match arch.as_str() {
            "qwen2" => quantized_qwen2::ModelWeights::from_gguf(self.content, &mut reader, &device)
                .map(Weights::Qwen2),
            "llama" => quantized_llama::ModelWeights::from_gguf(self.content, &mut reader, &device)
                .map(Weights::Llama),
            other => {
                return Err(format!(
                    "architecture `{other}` is not supported (qwen2 and llama are)"
                ));
            }
        }
        .map_err(|e| format!("cannot build the model: {e}"))
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn requant_produces_q8_0_close_to_the_original() {
        let values: Vec<f32> = (0..64 * 4).map(|i| ((i as f32) * 0.37).sin()).collect();
        let dense = Tensor::from_vec(values, (4, 64), &Device::Cpu).unwrap();
        for dtype in [GgmlDType::Q4_1, GgmlDType::Q5_0, GgmlDType::Q5_1] {
            let q = QTensor::quantize(&dense, dtype).unwrap();
            assert!(needs_requant(q.dtype()));
            let q8 = requant_q8_0(&q).unwrap();
            assert_eq!(q8.dtype(), GgmlDType::Q8_0);
            assert_eq!(q8.shape().dims(), &[4, 64]);
            let a = q.dequantize(&Device::Cpu).unwrap();
            let b = q8.dequantize(&Device::Cpu).unwrap();
            let err: f32 = (a - b)
                .unwrap()
                .abs()
                .unwrap()
                .max_all()
                .unwrap()
                .to_scalar()
                .unwrap();
            assert!(err < 0.02, "{dtype:?}: {err}");
        }
        assert!(!needs_requant(GgmlDType::Q8_0));
        assert!(!needs_requant(GgmlDType::Q4K));
    }

    #[test]
    fn garbage_is_not_a_gguf() {
        let err = Gguf::from_bytes(b"definitely not a model".to_vec()).unwrap_err();
        assert!(err.contains("not a readable GGUF"), "{err}");
    }
}
