//! Q5_1 blocks: f16 scale and minimum, 32 fifth bits and 32 4-bit quants (`block_q5_1`, ggml-common.h).

use super::q5_0::quants5;
use super::{BlockQuant, Q8Row, QK, f16_at};
use crate::gguf::GgmlType;

/// Bytes per Q5_1 block.
const BYTES: usize = 24;

/// GGML `Q5_1`: 24 bytes per 32 elements: `d: f16`, `m: f16`, `qh: [u8; 4]`,
/// `qs: [u8; 16]`, the quants laid out as Q5_0's; value `= q · d + m`. Dot products pair
/// it with a Q8_1 activation (ggml's `vec_dot_type`).
#[derive(Debug, Clone, Copy)]
pub struct Q5_1;

impl BlockQuant for Q5_1 {
    const TYPE: GgmlType = GgmlType::Q5_1;
    const BLOCK_LEN: usize = QK;
    const BLOCK_BYTES: usize = BYTES;
    const ACT_TYPE: Option<GgmlType> = Some(GgmlType::Q8_1);
    const QUANTIZES: bool = false;

    fn dequantize(src: &[u8], dst: &mut [f32]) {
        assert_eq!(
            src.len() / BYTES * QK,
            dst.len(),
            "Q5_1: block count mismatch"
        );
        for (blk, out) in src.chunks_exact(BYTES).zip(dst.chunks_exact_mut(QK)) {
            let (d, m) = (f16_at(blk), f16_at(&blk[2..]));
            for (o, q) in out.iter_mut().zip(quants5(blk, 4)) {
                *o = q as f32 * d + m;
            }
        }
    }

    fn dot_f32(row: &[u8], x: &[f32]) -> f32 {
        assert_eq!(
            row.len() / BYTES * QK,
            x.len(),
            "Q5_1: row/activation length mismatch"
        );
        let mut sum = 0.0f32;
        for (blk, xb) in row.chunks_exact(BYTES).zip(x.chunks_exact(QK)) {
            let (mut s, mut xs) = (0.0f32, 0.0f32);
            for (q, &xi) in quants5(blk, 4).into_iter().zip(xb) {
                s += q as f32 * xi;
                xs += xi;
            }
            sum += s * f16_at(blk) + xs * f16_at(&blk[2..]);
        }
        sum
    }

    /// `ggml_vec_dot_q5_1_q8_1`: `Σ_b (d_w · d_a · Σ_j q_j · qa_j + m_w · s_a)`.
    fn dot_q8(row: &[u8], act: Q8Row<'_>) -> f32 {
        assert_eq!(
            row.len() / BYTES * QK,
            act.qs.len(),
            "Q5_1: row/activation length mismatch"
        );
        assert_eq!(
            act.s.len(),
            act.d.len(),
            "Q5_1: activation must be Q8_1 (with sums)"
        );
        let mut sum = 0.0f32;
        for (b, (blk, qa)) in row
            .chunks_exact(BYTES)
            .zip(act.qs.chunks_exact(QK))
            .enumerate()
        {
            let sumi: i32 = quants5(blk, 4)
                .into_iter()
                .zip(qa)
                .map(|(q, &a)| q as i32 * a as i32)
                .sum();
            sum += (f16_at(blk) * act.d[b]) * sumi as f32 + f16_at(&blk[2..]) * act.s[b];
        }
        sum
    }
}
