//! F16 tensors: little-endian IEEE-754 half precision (`half::f16`), one element per "block".

use super::{BlockQuant, Q8Row};
use crate::gguf::GgmlType;
use half::f16;

/// GGML `F16`: 2 bytes per element, little-endian IEEE-754 binary16.
#[derive(Debug, Clone, Copy)]
pub struct F16;

#[inline(always)]
fn at(b: &[u8], i: usize) -> f32 {
    f16::from_bits(u16::from_le_bytes([b[2 * i], b[2 * i + 1]])).to_f32()
}

impl BlockQuant for F16 {
    const TYPE: GgmlType = GgmlType::F16;
    const BLOCK_LEN: usize = 1;
    const BLOCK_BYTES: usize = 2;
    const ACT_TYPE: Option<GgmlType> = None;

    fn dequantize(src: &[u8], dst: &mut [f32]) {
        assert_eq!(src.len(), dst.len() * 2, "F16: byte length mismatch");
        for (i, d) in dst.iter_mut().enumerate() {
            *d = at(src, i);
        }
    }

    /// Round to nearest even, as `GGML_FP32_TO_FP16` does.
    fn quantize(src: &[f32], dst: &mut [u8]) {
        assert_eq!(dst.len(), src.len() * 2, "F16: byte length mismatch");
        for (d, s) in dst.chunks_exact_mut(2).zip(src) {
            d.copy_from_slice(&f16::from_f32(*s).to_bits().to_le_bytes());
        }
    }

    /// Weights widened to f32 and multiplied with the f32 activation (more precise than
    /// ggml, which rounds the activation to f16 first).
    fn dot_f32(row: &[u8], x: &[f32]) -> f32 {
        super::float_row_dot_f32("F16", 2, at, row, x)
    }

    fn dot_q8(row: &[u8], act: Q8Row<'_>) -> f32 {
        super::float_row_dot_q8("F16", 2, at, row, act)
    }
}
