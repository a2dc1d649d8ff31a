//! F16 tensors: little-endian IEEE-754 half precision (`half::f16`), one element per "block".

use super::{BlockQuant, Q8Row, QK};
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
        assert_eq!(
            row.len(),
            x.len() * 2,
            "F16: row/activation length mismatch"
        );
        let mut acc = [0.0f32; 8];
        let n8 = x.len() / 8 * 8;
        for i in (0..n8).step_by(8) {
            for (k, a) in acc.iter_mut().enumerate() {
                *a += at(row, i + k) * x[i + k];
            }
        }
        let mut tail = 0.0;
        for (i, xi) in x.iter().enumerate().skip(n8) {
            tail += at(row, i) * xi;
        }
        acc.iter().sum::<f32>() + tail
    }

    fn dot_q8(row: &[u8], act: Q8Row<'_>) -> f32 {
        assert_eq!(
            row.len(),
            act.qs.len() * 2,
            "F16: row/activation length mismatch"
        );
        let mut sum = 0.0f32;
        for (b, q) in act.qs.chunks_exact(QK).enumerate() {
            let mut s = 0.0f32;
            for (j, &qj) in q.iter().enumerate() {
                s += at(row, b * QK + j) * qj as f32;
            }
            sum += s * act.d[b];
        }
        sum
    }
}
