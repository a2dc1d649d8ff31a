//! Q6_K blocks: 256 6-bit quants in low and high bit planes, sixteen 8-bit sub-block scales, an f16 scale (`block_q6_K`, ggml-common.h).

use super::kquant::{check_q8k, dequantize_by_blocks, dot_f32_by_decoding};
use super::{BlockQuant, Q8Row, QK_K, f16_at};
use crate::gguf::GgmlType;

/// Bytes per Q6_K block.
const BYTES: usize = 210;

/// GGML `Q6_K`: 210 bytes per 256 elements: `ql: [u8; 128]` (low 4 bits), `qh: [u8; 64]`
/// (high 2 bits), `scales: [i8; 16]`, `d: f16` (last). In each half `h` of 128 elements
/// (`ql[64h..]`, `qh[32h..]`, `scales[8h..]`), for `l < 32`: element `l` is
/// `ql[l] & 15 | (qh[l] & 3) << 4`, `l + 32` is `ql[l + 32] & 15 | (qh[l] >> 2 & 3) << 4`,
/// `l + 64` is `ql[l] >> 4 | (qh[l] >> 4 & 3) << 4`, `l + 96` is
/// `ql[l + 32] >> 4 | (qh[l] >> 6) << 4`; value `= d · scales[s] · (q − 32)` with `s` the
/// element's sub-block of 16 in the block. Dot products pair it with a Q8_K activation.
#[derive(Debug, Clone, Copy)]
pub struct Q6K;

/// The sixteen sub-blocks' signed quants `q − 32` of one block, in element order.
#[inline(always)]
fn quants(blk: &[u8]) -> [i8; QK_K] {
    let mut q = [0i8; QK_K];
    for h in 0..2 {
        let ql = &blk[64 * h..64 * h + 64];
        let qh = &blk[128 + 32 * h..128 + 32 * h + 32];
        let o = &mut q[128 * h..128 * h + 128];
        for l in 0..32 {
            o[l] = ((ql[l] & 0xF) | ((qh[l] & 3) << 4)) as i8 - 32;
            o[l + 32] = ((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) as i8 - 32;
            o[l + 64] = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) as i8 - 32;
            o[l + 96] = ((ql[l + 32] >> 4) | ((qh[l] >> 6) << 4)) as i8 - 32;
        }
    }
    q
}

/// Decode one block (`dequantize_row_q6_K`: `d · scale` per sub-block, times `q − 32`).
fn decode(blk: &[u8], out: &mut [f32]) {
    let d = f16_at(&blk[208..]);
    let q = quants(blk);
    for (s, (o, qs)) in out.chunks_exact_mut(16).zip(q.chunks_exact(16)).enumerate() {
        let ds = d * blk[192 + s] as i8 as f32;
        for (v, &qi) in o.iter_mut().zip(qs) {
            *v = ds * qi as f32;
        }
    }
}

/// The integer part of one block's product with a Q8_K block:
/// `Σ_s scales_s · Σ_j (q_j − 32) · a_j` over the sixteen sub-blocks of 16.
#[inline(always)]
pub(crate) fn block_int(blk: &[u8], qa: &[i8]) -> i32 {
    let q = quants(blk);
    let mut sumi = 0i32;
    for (s, (qs, a)) in q.chunks_exact(16).zip(qa.chunks_exact(16)).enumerate() {
        let p: i32 = qs.iter().zip(a).map(|(&w, &x)| w as i32 * x as i32).sum();
        sumi += blk[192 + s] as i8 as i32 * p;
    }
    sumi
}

impl BlockQuant for Q6K {
    const TYPE: GgmlType = GgmlType::Q6K;
    const BLOCK_LEN: usize = QK_K;
    const BLOCK_BYTES: usize = BYTES;
    const ACT_TYPE: Option<GgmlType> = Some(GgmlType::Q8K);
    const QUANTIZES: bool = false;

    fn dequantize(src: &[u8], dst: &mut [f32]) {
        dequantize_by_blocks("Q6_K", BYTES, decode, src, dst);
    }

    fn dot_f32(row: &[u8], x: &[f32]) -> f32 {
        dot_f32_by_decoding("Q6_K", BYTES, decode, row, x)
    }

    /// `ggml_vec_dot_q6_K_q8_K`: `Σ_b (d_w · d_a) · Σ_s scales_s · Σ_j (q_j − 32) · a_j`
    /// (the integer sum exact).
    fn dot_q8(row: &[u8], act: Q8Row<'_>) -> f32 {
        let nb = row.len() / BYTES;
        check_q8k("Q6_K", nb, &act);
        let mut sum = 0.0f32;
        for (b, blk) in row.chunks_exact(BYTES).enumerate() {
            let sumi = block_int(blk, &act.qs[b * QK_K..(b + 1) * QK_K]);
            sum += (f16_at(&blk[208..]) * act.d[b]) * sumi as f32;
        }
        sum
    }
}
