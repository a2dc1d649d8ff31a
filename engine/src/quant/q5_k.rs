//! Q5_K blocks: as Q4_K plus a fifth bit per quant in 32 `qh` bytes (`block_q5_K`, ggml-common.h).

use super::kquant::{dequantize_by_blocks, dot_f32_by_decoding, dot_q8k_with_mins, scales_mins_k4};
use super::{BlockQuant, Q8Row, QK_K, f16_at};
use crate::gguf::GgmlType;

/// Bytes per Q5_K block.
const BYTES: usize = 176;

/// GGML `Q5_K`: 176 bytes per 256 elements: `d: f16`, `dmin: f16`, `scales: [u8; 12]`
/// (as Q4_K), `qh: [u8; 32]`, `qs: [u8; 128]`. Element `64c + l` (`l < 32`) is the low
/// nibble of `qs[32c + l]` plus 16 when bit `2c` of `qh[l]` is set; element
/// `64c + 32 + l` the high nibble plus 16 when bit `2c + 1` is set; value
/// `= d · sc · q − dmin · m` (sub-blocks of 32 as Q4_K). Dot products pair it with a Q8_K
/// activation (ggml's `vec_dot_type`).
#[derive(Debug, Clone, Copy)]
pub struct Q5K;

/// The 5-bit quant `l` (`< 32`) of the low (`hi = false`) or high half of 64-chunk `c`.
#[inline(always)]
fn q5(blk: &[u8], c: usize, l: usize, hi: bool) -> u8 {
    let qh = blk[16 + l];
    let ql = blk[48 + 32 * c + l];
    let (nib, bit) = if hi {
        (ql >> 4, (qh >> (2 * c + 1)) & 1)
    } else {
        (ql & 0xF, (qh >> (2 * c)) & 1)
    };
    nib | (bit << 4)
}

/// Decode one block (`dequantize_row_q5_K`).
fn decode(blk: &[u8], out: &mut [f32]) {
    let d = f16_at(blk);
    let dmin = f16_at(&blk[2..]);
    let (sc, m) = scales_mins_k4(&blk[4..16]);
    for c in 0..4 {
        let (d1, m1) = (d * sc[2 * c] as f32, dmin * m[2 * c] as f32);
        let (d2, m2) = (d * sc[2 * c + 1] as f32, dmin * m[2 * c + 1] as f32);
        for l in 0..32 {
            out[64 * c + l] = d1 * q5(blk, c, l, false) as f32 - m1;
            out[64 * c + 32 + l] = d2 * q5(blk, c, l, true) as f32 - m2;
        }
    }
}

/// The integer parts of one block's product with a Q8_K block (as Q4_K's).
#[inline(always)]
pub(crate) fn block_ints(blk: &[u8], qa: &[i8], bsums: &[i16]) -> (i32, i32) {
    let (sc, m) = scales_mins_k4(&blk[4..16]);
    let mut sumi = 0i32;
    for c in 0..4 {
        let a = &qa[64 * c..64 * c + 64];
        let (mut lo, mut hi) = (0i32, 0i32);
        for l in 0..32 {
            lo += q5(blk, c, l, false) as i32 * a[l] as i32;
            hi += q5(blk, c, l, true) as i32 * a[l + 32] as i32;
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

impl BlockQuant for Q5K {
    const TYPE: GgmlType = GgmlType::Q5K;
    const BLOCK_LEN: usize = QK_K;
    const BLOCK_BYTES: usize = BYTES;
    const ACT_TYPE: Option<GgmlType> = Some(GgmlType::Q8K);
    const QUANTIZES: bool = false;

    fn dequantize(src: &[u8], dst: &mut [f32]) {
        dequantize_by_blocks("Q5_K", BYTES, decode, src, dst);
    }

    fn dot_f32(row: &[u8], x: &[f32]) -> f32 {
        dot_f32_by_decoding("Q5_K", BYTES, decode, row, x)
    }

    /// `ggml_vec_dot_q5_K_q8_K`: as Q4_K's with the 5-bit quants.
    fn dot_q8(row: &[u8], act: Q8Row<'_>) -> f32 {
        dot_q8k_with_mins("Q5_K", BYTES, block_ints, row, &act)
    }
}
