//! Q8_1 blocks: f16 scale, f16 `s = d · Σ qs`, and 32 signed 8-bit quants (`block_q8_1`, ggml-common.h).

use super::q8_0::dot_q8_blocks;
use super::{BlockQuant, Q8Row, QK, f16_at, quantize_q8_block};
use crate::gguf::GgmlType;
use half::f16;

/// GGML `Q8_1`: 36 bytes per 32 elements: `d: f16`, `s: f16`, `qs: [i8; 32]`; value
/// `= qs[j] · d`; `s` caches `d · Σ qs` for the Q4_1 dot product.
///
/// Mostly an activation format. As a weight type (ggml has no kernel for it) it is
/// paired with a Q8_0 activation: the integer dot ignores `s`.
#[derive(Debug, Clone, Copy)]
pub struct Q8_1;

impl BlockQuant for Q8_1 {
    const TYPE: GgmlType = GgmlType::Q8_1;
    const BLOCK_LEN: usize = QK;
    const BLOCK_BYTES: usize = 36;
    const ACT_TYPE: Option<GgmlType> = Some(GgmlType::Q8_0);

    fn dequantize(src: &[u8], dst: &mut [f32]) {
        assert_eq!(src.len() / 36 * QK, dst.len(), "Q8_1: block count mismatch");
        for (blk, out) in src.chunks_exact(36).zip(dst.chunks_exact_mut(QK)) {
            let d = f16_at(blk);
            for (o, &q) in out.iter_mut().zip(&blk[4..]) {
                *o = q as i8 as f32 * d;
            }
        }
    }

    /// `quantize_row_q8_1_ref`: as Q8_0, plus `s = f16(Σq · d)` with the unrounded `d`.
    fn quantize(src: &[f32], dst: &mut [u8]) {
        assert_eq!(dst.len() / 36 * QK, src.len(), "Q8_1: block count mismatch");
        let mut q = [0i8; QK];
        for (x, blk) in src.chunks_exact(QK).zip(dst.chunks_exact_mut(36)) {
            let (d, sum) = quantize_q8_block(x, &mut q);
            blk[..2].copy_from_slice(&f16::from_f32(d).to_bits().to_le_bytes());
            blk[2..4].copy_from_slice(&f16::from_f32(sum as f32 * d).to_bits().to_le_bytes());
            for (b, qi) in blk[4..].iter_mut().zip(q) {
                *b = qi as u8;
            }
        }
    }

    fn dot_f32(row: &[u8], x: &[f32]) -> f32 {
        assert_eq!(
            row.len() / 36 * QK,
            x.len(),
            "Q8_1: row/activation length mismatch"
        );
        let mut sum = 0.0f32;
        for (blk, xb) in row.chunks_exact(36).zip(x.chunks_exact(QK)) {
            let mut s = 0.0f32;
            for (&q, &xi) in blk[4..].iter().zip(xb) {
                s += q as i8 as f32 * xi;
            }
            sum += s * f16_at(blk);
        }
        sum
    }

    /// `Σ_b d_w · d_a · Σ_j qw_j · qa_j` with a Q8_0 activation.
    fn dot_q8(row: &[u8], act: Q8Row<'_>) -> f32 {
        dot_q8_blocks(row, 36, act)
    }
}
