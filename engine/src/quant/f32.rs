//! F32 tensors: plain little-endian IEEE-754 single precision, one element per "block".

use super::{BlockQuant, Q8Row, QK};
use crate::gguf::GgmlType;

/// GGML `F32`: 4 bytes per element, little-endian.
#[derive(Debug, Clone, Copy)]
pub struct F32;

#[inline(always)]
fn at(b: &[u8], i: usize) -> f32 {
    f32::from_le_bytes([b[4 * i], b[4 * i + 1], b[4 * i + 2], b[4 * i + 3]])
}

impl BlockQuant for F32 {
    const TYPE: GgmlType = GgmlType::F32;
    const BLOCK_LEN: usize = 1;
    const BLOCK_BYTES: usize = 4;
    const ACT_TYPE: Option<GgmlType> = None;

    fn dequantize(src: &[u8], dst: &mut [f32]) {
        assert_eq!(src.len(), dst.len() * 4, "F32: byte length mismatch");
        for (d, s) in dst.iter_mut().zip(src.chunks_exact(4)) {
            *d = f32::from_le_bytes([s[0], s[1], s[2], s[3]]);
        }
    }

    fn quantize(src: &[f32], dst: &mut [u8]) {
        assert_eq!(dst.len(), src.len() * 4, "F32: byte length mismatch");
        for (d, s) in dst.chunks_exact_mut(4).zip(src) {
            d.copy_from_slice(&s.to_le_bytes());
        }
    }

    fn dot_f32(row: &[u8], x: &[f32]) -> f32 {
        assert_eq!(
            row.len(),
            x.len() * 4,
            "F32: row/activation length mismatch"
        );
        // Eight partial sums so the loop vectorises; summed pairwise at the end.
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
            act.qs.len() * 4,
            "F32: row/activation length mismatch"
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
