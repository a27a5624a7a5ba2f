//! The weights: a GGUF file read once into memory, with the tensor types
//! candle only has slow scalar kernels for (Q4_1, Q5_0, Q5_1) requantised to
//! Q8_0, then handed to our decoder ([`super::decoder`], Qwen2 or Llama,
//! whose KV cache can be cut back to a shared prefix).
//!
//! The file is read, not memory-mapped (mapping needs `unsafe`), and read
//! where it lies: each tensor is copied out once, so loading holds the
//! weights once, not twice.

use std::io::{Read, Seek, SeekFrom};
use std::path::Path;

use super::decoder::{self, Family};
use candle_core::quantized::gguf_file::Content;
use candle_core::quantized::{GgmlDType, QTensor};
use candle_core::{Device, Tensor};

/// A model ready to run: the decoder of one of the [`Family`]s.
pub(crate) struct Weights(decoder::ModelWeights);

impl Weights {
    /// Logits of the last position of `tokens`, which start at `pos`.
    pub(crate) fn forward(&mut self, tokens: &[u32], pos: usize) -> candle_core::Result<Vec<f32>> {
        let input = Tensor::new(tokens, &Device::Cpu)?.unsqueeze(0)?;
        self.0
            .forward(&input, pos)?
            .squeeze(0)?
            .to_dtype(candle_core::DType::F32)?
            .to_vec1()
    }

    pub(crate) fn clear_kv_cache(&mut self) {
        self.0.clear_kv_cache();
    }

    /// Keeps at most the first `n` cached positions and says how many were
    /// kept. On an error the cache is empty.
    pub(crate) fn keep_kv_cache(&mut self, n: usize) -> candle_core::Result<usize> {
        self.0.truncate_kv_cache(n).map(|()| n)
    }

    /// A copy of the first `n` cached positions.
    pub(crate) fn snapshot(&self, n: usize) -> candle_core::Result<decoder::KvSnapshot> {
        self.0.snapshot(n)
    }

    /// The cache made to hold the first `n` positions of `snapshot`.
    pub(crate) fn restore(
        &mut self,
        snapshot: &decoder::KvSnapshot,
        n: usize,
    ) -> candle_core::Result<()> {
        self.0.restore(snapshot, n)
    }
}

/// Whether candle runs `dtype` through a scalar (slow) kernel.
fn needs_requant(dtype: GgmlDType) -> bool {
    matches!(dtype, GgmlDType::Q4_1 | GgmlDType::Q5_0 | GgmlDType::Q5_1)
}

/// Q8_0 copy of `t` (same shape).
fn requant_q8_0(t: &QTensor) -> candle_core::Result<QTensor> {
    let dense = t.dequantize(&Device::Cpu)?;
    QTensor::quantize(&dense, GgmlDType::Q8_0)
}

/// Anything candle's tensor reader can read from.
trait ReadSeek: Read + Seek + Send {}
impl<T: Read + Seek + Send> ReadSeek for T {}

/// The GGUF file, read where it lies (not held in memory: the weights are
/// copied out of it once), followed by the requantised tensors' bytes, as
/// one seekable stream.
struct Source {
    file: Box<dyn ReadSeek>,
    file_len: u64,
    extra: Vec<u8>,
    pos: u64,
}

impl Read for Source {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if self.pos < self.file_len {
            let n = buf.len().min((self.file_len - self.pos) as usize);
            self.file.seek(SeekFrom::Start(self.pos))?;
            let got = self.file.read(&mut buf[..n])?;
            self.pos += got as u64;
            return Ok(got);
        }
        let at = (self.pos - self.file_len) as usize;
        let rest = self.extra.get(at..).unwrap_or_default();
        let n = buf.len().min(rest.len());
        buf[..n].copy_from_slice(&rest[..n]);
        self.pos += n as u64;
        Ok(n)
    }
}

impl Seek for Source {
    fn seek(&mut self, to: SeekFrom) -> std::io::Result<u64> {
        let len = self.file_len + self.extra.len() as u64;
        let target = match to {
            SeekFrom::Start(n) => Some(n),
            SeekFrom::End(d) => len.checked_add_signed(d),
            SeekFrom::Current(d) => self.pos.checked_add_signed(d),
        };
        self.pos = target.ok_or_else(|| {
            std::io::Error::new(std::io::ErrorKind::InvalidInput, "seek before the start")
        })?;
        Ok(self.pos)
    }
}

/// A parsed GGUF whose tensors can be read.
pub(crate) struct Gguf {
    pub(crate) content: Content,
    source: Source,
    /// How many tensors were requantised to Q8_0.
    pub(crate) requantised: usize,
}

impl std::fmt::Debug for Gguf {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Gguf")
            .field("bytes", &self.source.file_len)
            .field("tensors", &self.content.tensor_infos.len())
            .field("requantised", &self.requantised)
            .finish()
    }
}

impl Gguf {
    /// Opens `path` and requantises the slow tensor types. Errors are plain
    /// text for [`runcell_llm::LlmError::ModelFile`].
    pub(crate) fn read(path: &Path) -> Result<Self, String> {
        let file = std::fs::File::open(path).map_err(|e| e.to_string())?;
        let file_len = file.metadata().map_err(|e| e.to_string())?.len();
        Self::from_source(Source {
            file: Box::new(std::io::BufReader::new(file)),
            file_len,
            extra: Vec::new(),
            pos: 0,
        })
    }

    /// A GGUF held in memory (tests build theirs).
    #[cfg(test)]
    fn from_bytes(data: Vec<u8>) -> Result<Self, String> {
        let file_len = data.len() as u64;
        Self::from_source(Source {
            file: Box::new(std::io::Cursor::new(data)),
            file_len,
            extra: Vec::new(),
            pos: 0,
        })
    }

    fn from_source(mut source: Source) -> Result<Self, String> {
        let mut content =
            Content::read(&mut source).map_err(|e| format!("not a readable GGUF file: {e}"))?;
        // Append the Q8_0 copies after the file's data and point the tensor
        // table at them; the originals' bytes are simply not read.
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
                let t = content
                    .tensor(&mut source, &name, &Device::Cpu)
                    .map_err(|e| format!("tensor {name}: {e}"))?;
                // Row lengths that are not a multiple of 32 stay as they are.
                match requant_q8_0(&t) {
                    Ok(q) => q,
                    Err(_) => continue,
                }
            };
            let bytes = q8.data().map_err(|e| format!("tensor {name}: {e}"))?;
            let base = content.tensor_data_offset;
            let end = source.file_len + source.extra.len() as u64;
            let start = end.div_ceil(32) * 32;
            source.extra.resize((start - source.file_len) as usize, 0);
            source.extra.extend_from_slice(&bytes);
            if let Some(info) = content.tensor_infos.get_mut(&name) {
                info.ggml_dtype = GgmlDType::Q8_0;
                info.offset = start - base;
            }
            requantised += 1;
        }
        Ok(Self {
            content,
            source,
            requantised,
        })
    }

    pub(crate) fn architecture(&self) -> String {
        self.meta_string("general.architecture").unwrap_or_default()
    }

    pub(crate) fn meta_string(&self, key: &str) -> Option<String> {
        self.content
            .metadata
            .get(key)
            .and_then(|v| v.to_string().ok())
            .cloned()
    }

    pub(crate) fn context_length(&self) -> Option<usize> {
        let key = format!("{}.context_length", self.architecture());
        self.content
            .metadata
            .get(&key)
            .and_then(|v| v.to_u32().ok())
            .map(|n| n as usize)
    }

    /// The model, by `general.architecture`. Consumes the file's bytes.
    pub(crate) fn into_weights(self) -> Result<Weights, String> {
        let arch = self.architecture();
        let mut reader = self.source;
        let device = Device::Cpu;
        let Some(family) = Family::of(&arch) else {
            return Err(format!(
                "architecture `{arch}` is not supported (qwen2 and llama are)"
            ));
        };
        decoder::ModelWeights::from_gguf(family, &self.content, &mut reader, &device)
            .map(Weights)
            .map_err(|e| format!("cannot build the model: {e}"))
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use std::io::Cursor;

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
    fn the_source_reads_the_file_then_the_extra_bytes() {
        let mut source = Source {
            file: Box::new(Cursor::new(b"abcdef".to_vec())),
            file_len: 6,
            extra: b"XYZ".to_vec(),
            pos: 0,
        };
        let mut all = Vec::new();
        source.read_to_end(&mut all).unwrap();
        assert_eq!(all, b"abcdefXYZ");
        source.seek(SeekFrom::Start(4)).unwrap();
        let mut buf = [0u8; 4];
        source.read_exact(&mut buf).unwrap();
        assert_eq!(&buf, b"efXY");
        assert_eq!(source.seek(SeekFrom::End(-1)).unwrap(), 8);
        assert!(source.seek(SeekFrom::Current(-20)).is_err());
    }

    #[test]
    fn slow_tensors_are_read_back_as_q8_0() {
        let values: Vec<f32> = (0..64 * 4).map(|i| ((i as f32) * 0.37).sin()).collect();
        let dense = Tensor::from_vec(values, (4, 64), &Device::Cpu).unwrap();
        let slow = QTensor::quantize(&dense, GgmlDType::Q5_0).unwrap();
        let fast = QTensor::quantize(&dense, GgmlDType::Q8_0).unwrap();
        let mut file = Vec::new();
        let arch = candle_core::quantized::gguf_file::Value::String("qwen2".to_string());
        candle_core::quantized::gguf_file::write(
            &mut Cursor::new(&mut file),
            &[("general.architecture", &arch)],
            &[("slow", &slow), ("fast", &fast)],
        )
        .unwrap();
        let mut gguf = Gguf::from_bytes(file).unwrap();
        assert_eq!(gguf.requantised, 1);
        assert_eq!(gguf.architecture(), "qwen2");
        for name in ["slow", "fast"] {
            let t = gguf
                .content
                .tensor(&mut gguf.source, name, &Device::Cpu)
                .unwrap();
            assert_eq!(t.dtype(), GgmlDType::Q8_0, "{name}");
            // Against what the file held: the requantisation adds little.
            let held = if name == "slow" { &slow } else { &fast };
            let held = held.dequantize(&Device::Cpu).unwrap();
            let err: f32 = (t.dequantize(&Device::Cpu).unwrap() - &held)
                .unwrap()
                .abs()
                .unwrap()
                .max_all()
                .unwrap()
                .to_scalar()
                .unwrap();
            assert!(err < 0.02, "{name}: {err}");
        }
    }

    #[test]
    fn garbage_is_not_a_gguf() {
        let err = Gguf::from_bytes(b"definitely not a model".to_vec()).unwrap_err();
        assert!(err.contains("not a readable GGUF"), "{err}");
    }
}
