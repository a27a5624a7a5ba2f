//! A quantized weight matrix that holds only the GGUF's own blocks.
//!
//! candle 0.11's `QMatMul` keeps, beside the file's blocks, a repacked copy
//! of every Q4_K weight (and, after the first prefill, of every Q6_K one)
//! laid out for its AVX-VNNI kernels with the scales expanded to f32: the
//! 1.5B held 2.3 GB where its blocks take 1.2. This keeps the blocks alone:
//!
//! - a product of a few rows (decoding one token) runs candle's per-block
//!   kernels on them (`QuantizedType::matmul_t`, AVX2 dot products, the
//!   same thread pool), which on this machine kind also decodes faster
//!   (31.5 against 24.0 tokens/s for the 1.5B in `runcell bench llm`);
//! - a product of many rows (a prefill) repacks this one weight for
//!   candle's fast kernels, multiplies, and drops the copy: one weight's
//!   copy at a time instead of all of them for good, for a few ms of
//!   packing per weight, which the prefill's rows repay.

use std::borrow::Cow;

use candle_core::quantized::{GgmlDType, QMatMul, QStorage, QTensor, QuantizedType};
use candle_core::{Device, Module, Result, Tensor};

/// From this many rows on, a product is worth repacking the weight for:
/// repacking the 1.5B's weights once costs ~0.45 s on this machine kind and
/// saves ~13 ms a row (measured with `runcell bench llm`: 27 new tokens took
/// 536 ms without it and 662 ms with it; 211 took 4.1 s and 1.9 s).
const PACKED_FROM_ROWS: usize = 40;

pub(crate) struct LeanMatMul {
    blocks: Box<dyn QuantizedType>,
    /// Output width (rows of the weight).
    n: usize,
    /// Input width (columns of the weight).
    k: usize,
}

impl std::fmt::Debug for LeanMatMul {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "LeanMatMul[{}x{}; {:?}]",
            self.n,
            self.k,
            self.blocks.dtype()
        )
    }
}

impl LeanMatMul {
    /// Takes `t`'s blocks; `t` is dropped.
    pub(crate) fn new(t: QTensor) -> Result<Self> {
        let (n, k) = t.shape().dims2()?;
        let dtype = t.dtype();
        if !k.is_multiple_of(dtype.block_size()) {
            candle_core::bail!("a {n}x{k} weight does not hold whole {dtype:?} blocks");
        }
        let bytes = t.data()?.into_owned();
        drop(t);
        let QStorage::Cpu(blocks) = QStorage::from_data(Cow::Owned(bytes), &Device::Cpu, dtype)?
        else {
            candle_core::bail!("a CPU weight came back from another device");
        };
        Ok(Self { blocks, n, k })
    }

    pub(crate) fn dtype(&self) -> GgmlDType {
        self.blocks.dtype()
    }

    /// The blocks as the bytes the GGUF held. The one `unsafe` in the
    /// crate: candle offers no safe view of a block vector it boxed, and
    /// the alternative, a second copy of every weight, is what this type
    /// exists to avoid.
    #[allow(unsafe_code)]
    fn bytes(&self) -> &[u8] {
        let len = self.blocks.storage_size_in_bytes();
        // SAFETY: `blocks` is candle's `Vec<T>` of plain `repr(C)` blocks;
        // `as_ptr` and `storage_size_in_bytes` are its data pointer and
        // length in bytes, and the slice borrows `self`, which owns it
        // (candle's own `QStorage::data` reads its blocks the same way).
        unsafe { std::slice::from_raw_parts(self.blocks.as_ptr(), len) }
    }

    /// Whether candle has repacked kernels for this block type.
    fn packs(&self) -> bool {
        matches!(
            self.dtype(),
            GgmlDType::Q4K | GgmlDType::Q6K | GgmlDType::Q8_0
        )
    }

    /// `x · Wᵀ` through a repacked copy of the weight made for this call.
    fn packed_forward(&self, x: &Tensor) -> Result<Tensor> {
        let storage = QStorage::from_data(Cow::Borrowed(self.bytes()), &Device::Cpu, self.dtype())?;
        QMatMul::from_qtensor(QTensor::new(storage, (self.n, self.k))?)?.forward(x)
    }

    /// Rows `ids` of the matrix as f32 `(ids, k)`: the token embedding's
    /// lookup, which dequantizes only the rows it needs.
    pub(crate) fn rows(&self, ids: &[u32]) -> Result<Tensor> {
        let rows = self.blocks.embedding(ids, self.n, self.k)?;
        let candle_core::CpuStorage::F32(rows) = rows else {
            candle_core::bail!("the embedding rows are not f32");
        };
        Tensor::from_vec(rows, (ids.len(), self.k), &Device::Cpu)
    }
}

impl Module for LeanMatMul {
    /// `x · Wᵀ` for `x` of shape `(…, k)`.
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let mut dims = x.dims().to_vec();
        match dims.last_mut() {
            Some(last) if *last == self.k => *last = self.n,
            _ => candle_core::bail!(
                "{:?} cannot be multiplied by a {}x{} weight",
                x.dims(),
                self.n,
                self.k
            ),
        }
        let m = x.elem_count() / self.k;
        if m >= PACKED_FROM_ROWS && self.packs() {
            return self.packed_forward(x);
        }
        let lhs = x.flatten_all()?.to_vec1::<f32>()?;
        let mut dst = vec![0f32; m * self.n];
        self.blocks.matmul_t((m, self.k, self.n), &lhs, &mut dst)?;
        Tensor::from_vec(dst, dims, &Device::Cpu)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The same products as candle's `QMatMul` (its repacked kernels), to
    /// the rounding of the quantized activations, for one row and several.
    #[test]
    fn multiplies_like_candles_qmatmul() -> Result<()> {
        let (n, k) = (64, 512);
        let w: Vec<f32> = (0..n * k)
            .map(|i| ((i * 37 % 101) as f32 - 50.0) / 50.0)
            .collect();
        let w = Tensor::from_vec(w, (n, k), &Device::Cpu)?;
        for dtype in [GgmlDType::Q4K, GgmlDType::Q6K, GgmlDType::Q8_0] {
            let lean = LeanMatMul::new(QTensor::quantize(&w, dtype)?)?;
            let reference = QMatMul::from_qtensor(QTensor::quantize(&w, dtype)?)?;
            for m in [1, 5, PACKED_FROM_ROWS + 3] {
                let x: Vec<f32> = (0..m * k)
                    .map(|i| ((i * 13 % 29) as f32 - 14.0) / 14.0)
                    .collect();
                let x = Tensor::from_vec(x, (1, m, k), &Device::Cpu)?;
                let got = lean.forward(&x)?;
                let want = reference.forward(&x)?;
                assert_eq!(got.dims(), &[1, m, n]);
                let err = (got - &want)?.abs()?.max_all()?.to_scalar::<f32>()?;
                let scale = want.abs()?.max_all()?.to_scalar::<f32>()?;
                assert!(
                    err <= 0.02 * scale.max(1.0),
                    "{dtype:?} m={m}: {err} of {scale}"
                );
            }
        }
        Ok(())
    }

    #[test]
    fn rows_are_the_dequantized_rows_and_bad_ids_are_refused() -> Result<()> {
        let w: Vec<f32> = (0..8 * 256).map(|i| (i % 17) as f32 / 17.0).collect();
        let w = Tensor::from_vec(w, (8, 256), &Device::Cpu)?;
        let q = QTensor::quantize(&w, GgmlDType::Q8_0)?;
        let dense = q.dequantize(&Device::Cpu)?;
        let lean = LeanMatMul::new(q)?;
        let rows = lean.rows(&[3, 0])?;
        let want = Tensor::cat(
            &[dense.get(3)?.unsqueeze(0)?, dense.get(0)?.unsqueeze(0)?],
            0,
        )?;
        assert_eq!(rows.to_vec2::<f32>()?, want.to_vec2::<f32>()?);
        assert!(lean.rows(&[8]).is_err());
        let x = Tensor::zeros((1, 255), candle_core::DType::F32, &Device::Cpu)?;
        assert!(lean.forward(&x).is_err());
        Ok(())
    }
}
