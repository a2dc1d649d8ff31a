//! Q8_0 blocks: an f16 scale and 32 signed 8-bit quants (`block_q8_0`, ggml-common.h).

use super::{BlockQuant, Q8Row, QK, f16_at, quantize_q8_block};
use crate::gguf::GgmlType;
use half::f16;

/// GGML `Q8_0`: 34 bytes per 32 elements: `d: f16`, `qs: [i8; 32]`; value `= qs[j] · d`.
/// Dot products pair it with a Q8_0 activation (ggml's `vec_dot_type`).
#[derive(Debug, Clone, Copy)]
pub struct Q8_0;

impl BlockQuant for Q8_0 {
    const TYPE: GgmlType = GgmlType::Q8_0;
    const BLOCK_LEN: usize = QK;
    const BLOCK_BYTES: usize = 34;
    const ACT_TYPE: Option<GgmlType> = Some(GgmlType::Q8_0);

    fn dequantize(src: &[u8], dst: &mut [f32]) {
        assert_eq!(src.len() / 34 * QK, dst.len(), "Q8_0: block count mismatch");
        for (blk, out) in src.chunks_exact(34).zip(dst.chunks_exact_mut(QK)) {
            let d = f16_at(blk);
            for (o, &q) in out.iter_mut().zip(&blk[2..]) {
                *o = q as i8 as f32 * d;
            }
        }
    }

    /// `quantize_row_q8_0_ref`: `d = max|x| / 127`, `q = round(x / d)`.
    fn quantize(src: &[f32], dst: &mut [u8]) {
        assert_eq!(dst.len() / 34 * QK, src.len(), "Q8_0: block count mismatch");
        let mut q = [0i8; QK];
        for (x, blk) in src.chunks_exact(QK).zip(dst.chunks_exact_mut(34)) {
            let (d, _) = quantize_q8_block(x, &mut q);
            blk[..2].copy_from_slice(&f16::from_f32(d).to_bits().to_le_bytes());
            for (b, qi) in blk[2..].iter_mut().zip(q) {
                *b = qi as u8;
            }
        }
    }

    fn dot_f32(row: &[u8], x: &[f32]) -> f32 {
        assert_eq!(
            row.len() / 34 * QK,
            x.len(),
            "Q8_0: row/activation length mismatch"
        );
        let mut sum = 0.0f32;
        for (blk, xb) in row.chunks_exact(34).zip(x.chunks_exact(QK)) {
            let mut s = 0.0f32;
            for (&q, &xi) in blk[2..].iter().zip(xb) {
                s += q as i8 as f32 * xi;
            }
            sum += s * f16_at(blk);
        }
        sum
    }

    /// `ggml_vec_dot_q8_0_q8_0`: `Σ_b d_w · d_a · Σ_j qw_j · qa_j`.
    fn dot_q8(row: &[u8], act: Q8Row<'_>) -> f32 {
        dot_q8_blocks(row, 34, act)
    }
}

/// Shared by Q8_0 and Q8_1 weights: the quants start 2 or 4 bytes into a block of
/// `stride` bytes, the f16 scale `d` is the block's first two bytes.
pub(crate) fn dot_q8_blocks(row: &[u8], stride: usize, act: Q8Row<'_>) -> f32 {
    assert_eq!(
        row.len() / stride * QK,
        act.qs.len(),
        "row/activation length mismatch"
    );
    let off = stride - QK;
    let mut sum = 0.0f32;
    for (b, (blk, qa)) in row
        .chunks_exact(stride)
        .zip(act.qs.chunks_exact(QK))
        .enumerate()
    {
        let mut sumi = 0i32;
        for (&w, &a) in blk[off..].iter().zip(qa) {
            sumi += (w as i8 as i32) * (a as i32);
        }
        sum += sumi as f32 * (f16_at(blk) * act.d[b]);
    }
    sum
}
