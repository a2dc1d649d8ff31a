//! Q5_0 blocks: an f16 scale, 32 fifth bits and 32 4-bit quants, offset by 16 (`block_q5_0`, ggml-common.h).

use super::{BlockQuant, Q8Row, QK, f16_at};
use crate::gguf::GgmlType;

/// Bytes per Q5_0 block.
const BYTES: usize = 22;

/// GGML `Q5_0`: 22 bytes per 32 elements: `d: f16`, `qh: [u8; 4]` (a little-endian u32
/// of fifth bits), `qs: [u8; 16]`. Element `j < 16` is the low nibble of `qs[j]` with bit
/// `j` of `qh` as its fifth bit, element `j + 16` the high nibble with bit `j + 16`;
/// value `= (q − 16) · d`. Dot products pair it with a Q8_0 activation (ggml's `vec_dot_type`).
#[derive(Debug, Clone, Copy)]
pub struct Q5_0;

/// The 32 unsigned 5-bit quants of a Q5_0 / Q5_1 block whose `qh` word starts at `off`
/// (its 16 `qs` bytes follow it).
#[inline(always)]
pub(crate) fn quants5(blk: &[u8], off: usize) -> [u8; QK] {
    let qh = u32::from_le_bytes([blk[off], blk[off + 1], blk[off + 2], blk[off + 3]]);
    let mut q = [0u8; QK];
    for (j, &b) in blk[off + 4..off + 20].iter().enumerate() {
        q[j] = (b & 0xF) | ((((qh >> j) & 1) as u8) << 4);
        q[j + 16] = (b >> 4) | ((((qh >> (j + 16)) & 1) as u8) << 4);
    }
    q
}

impl BlockQuant for Q5_0 {
    const TYPE: GgmlType = GgmlType::Q5_0;
    const BLOCK_LEN: usize = QK;
    const BLOCK_BYTES: usize = BYTES;
    const ACT_TYPE: Option<GgmlType> = Some(GgmlType::Q8_0);
    const QUANTIZES: bool = false;

    fn dequantize(src: &[u8], dst: &mut [f32]) {
        assert_eq!(
            src.len() / BYTES * QK,
            dst.len(),
            "Q5_0: block count mismatch"
        );
        for (blk, out) in src.chunks_exact(BYTES).zip(dst.chunks_exact_mut(QK)) {
            let d = f16_at(blk);
            for (o, q) in out.iter_mut().zip(quants5(blk, 2)) {
                *o = (q as i32 - 16) as f32 * d;
            }
        }
    }

    fn dot_f32(row: &[u8], x: &[f32]) -> f32 {
        assert_eq!(
            row.len() / BYTES * QK,
            x.len(),
            "Q5_0: row/activation length mismatch"
        );
        let mut sum = 0.0f32;
        for (blk, xb) in row.chunks_exact(BYTES).zip(x.chunks_exact(QK)) {
            let mut s = 0.0f32;
            for (q, &xi) in quants5(blk, 2).into_iter().zip(xb) {
                s += (q as i32 - 16) as f32 * xi;
            }
            sum += s * f16_at(blk);
        }
        sum
    }

    /// `ggml_vec_dot_q5_0_q8_0`: `Σ_b d_w · d_a · Σ_j (q_j − 16) · qa_j`.
    fn dot_q8(row: &[u8], act: Q8Row<'_>) -> f32 {
        assert_eq!(
            row.len() / BYTES * QK,
            act.qs.len(),
            "Q5_0: row/activation length mismatch"
        );
        let mut sum = 0.0f32;
        for (b, (blk, qa)) in row
            .chunks_exact(BYTES)
            .zip(act.qs.chunks_exact(QK))
            .enumerate()
        {
            let sumi: i32 = quants5(blk, 2)
                .into_iter()
                .zip(qa)
                .map(|(q, &a)| (q as i32 - 16) * a as i32)
                .sum();
            sum += sumi as f32 * (f16_at(blk) * act.d[b]);
        }
        sum
    }
}
