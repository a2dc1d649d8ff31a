//! Q8_K activation blocks: an f32 scale, 256 signed 8-bit quants and their sums per 16 (`block_q8_K`, ggml-common.h).

use super::QK_K;

/// ggml's `nearest_int`: round to nearest, halfway cases to even (its `+ 1.5 · 2^23`
/// trick), for the small magnitudes the quantizer feeds it.
#[inline(always)]
pub(crate) fn nearest_int(v: f32) -> i32 {
    v.round_ties_even() as i32
}

/// Quantize one block of 256 values as `quantize_row_q8_K_ref` does: with `max` the
/// value of largest magnitude (the first one met), `iscale = −127 / max`,
/// `q = min(127, nearest_int(iscale · x))`, `bsums[j] = Σ q[16j..16j+16]`; returns
/// `d = 1 / iscale` (negative when `max` is positive; kept in f32). An all-zero block
/// gives `d = 0`, zero quants and zero sums.
pub(crate) fn quantize_block(x: &[f32], q: &mut [i8], bsums: &mut [i16]) -> f32 {
    debug_assert!(x.len() == QK_K && q.len() == QK_K && bsums.len() == QK_K / 16);
    let (mut max, mut amax) = (0.0f32, 0.0f32);
    for &v in x {
        let a = v.abs();
        if a > amax {
            amax = a;
            max = v;
        }
    }
    if amax == 0.0 {
        q.fill(0);
        bsums.fill(0);
        return 0.0;
    }
    let iscale = -127.0 / max;
    for (qi, &xi) in q.iter_mut().zip(x) {
        *qi = nearest_int(iscale * xi).min(127) as i8;
    }
    for (s, c) in bsums.iter_mut().zip(q.chunks_exact(16)) {
        *s = c.iter().map(|&v| v as i16).sum();
    }
    1.0 / iscale
}
