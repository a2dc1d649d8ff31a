//! Q4_K blocks: f16 scale and minimum, eight 6-bit sub-block scales and minimums, 256 4-bit quants (`block_q4_K`, ggml-common.h).

use super::kquant::{dequantize_by_blocks, dot_f32_by_decoding, dot_q8k_with_mins, scales_mins_k4};
use super::{BlockQuant, Q8Row, QK_K, f16_at};
use crate::gguf::GgmlType;

/// Bytes per Q4_K block.
const BYTES: usize = 144;

/// GGML `Q4_K`: 144 bytes per 256 elements: `d: f16`, `dmin: f16`, `scales: [u8; 12]`
/// (eight 6-bit scales `sc` and minimums `m`, see `get_scale_min_k4`), `qs: [u8; 128]`.
/// Eight sub-blocks of 32: the 64 elements `64c .. 64c + 64` come from `qs[32c .. 32c + 32]`,
/// low nibbles first (sub-block `2c`), then high nibbles (sub-block `2c + 1`); value
/// `= d · sc · nibble − dmin · m`. Dot products pair it with a Q8_K activation
/// (ggml's `vec_dot_type`).
#[derive(Debug, Clone, Copy)]
pub struct Q4K;

/// Decode one block (`dequantize_row_q4_K`).
fn decode(blk: &[u8], out: &mut [f32]) {
    let d = f16_at(blk);
    let dmin = f16_at(&blk[2..]);
    let (sc, m) = scales_mins_k4(&blk[4..16]);
    let qs = &blk[16..BYTES];
    for c in 0..4 {
        let (d1, m1) = (d * sc[2 * c] as f32, dmin * m[2 * c] as f32);
        let (d2, m2) = (d * sc[2 * c + 1] as f32, dmin * m[2 * c + 1] as f32);
        let q = &qs[32 * c..32 * c + 32];
        let o = &mut out[64 * c..64 * c + 64];
        for l in 0..32 {
            o[l] = d1 * (q[l] & 0xF) as f32 - m1;
            o[l + 32] = d2 * (q[l] >> 4) as f32 - m2;
        }
    }
}

/// The integer parts of one block's product with a Q8_K block: `Σ_s sc_s · Σ_j q_j · a_j`
/// over the eight sub-blocks and `Σ_j bsums_j · m_{j/2}` over the sixteen 16-quant sums.
#[inline(always)]
pub(crate) fn block_ints(blk: &[u8], qa: &[i8], bsums: &[i16]) -> (i32, i32) {
    let (sc, m) = scales_mins_k4(&blk[4..16]);
    let qs = &blk[16..BYTES];
    let mut sumi = 0i32;
    for c in 0..4 {
        let q = &qs[32 * c..32 * c + 32];
        let a = &qa[64 * c..64 * c + 64];
        let (mut lo, mut hi) = (0i32, 0i32);
        for l in 0..32 {
            lo += (q[l] & 0xF) as i32 * a[l] as i32;
            hi += (q[l] >> 4) as i32 * a[l + 32] as i32;
        }
        sumi += sc[2 * c] as i32 * lo + sc[2 * c + 1] as i32 * hi;
    }
    let summ = bsums
        .iter()
        .enumerate()
        .map(|(j, &s)| s as i32 * m[j / 2] as i32)
        .sum();
    (sumi, summ)
}

impl BlockQuant for Q4K {
    const TYPE: GgmlType = GgmlType::Q4K;
    const BLOCK_LEN: usize = QK_K;
    const BLOCK_BYTES: usize = BYTES;
    const ACT_TYPE: Option<GgmlType> = Some(GgmlType::Q8K);
    const QUANTIZES: bool = false;

    fn dequantize(src: &[u8], dst: &mut [f32]) {
        dequantize_by_blocks("Q4_K", BYTES, decode, src, dst);
    }

    fn dot_f32(row: &[u8], x: &[f32]) -> f32 {
        dot_f32_by_decoding("Q4_K", BYTES, decode, row, x)
    }

    /// `ggml_vec_dot_q4_K_q8_K`: `Σ_b (d_w · d_a) · Σ_s sc_s · Σ_j q_j · a_j −
    /// (dmin_w · d_a) · Σ_j bsums_j · m_{j/2}` (the integer sums exact).
    fn dot_q8(row: &[u8], act: Q8Row<'_>) -> f32 {
        dot_q8k_with_mins("Q4_K", BYTES, block_ints, row, &act)
    }
}
