//! Q8_K activation blocks: an f32 scale, 256 signed 8-bit quants and their sums per 16 (`block_q8_K`, ggml-common.h).

use super::QK_K;

/// ggml's `nearest_int`: round to nearest, halfway cases to even, for the magnitudes the
/// quantizer feeds it (`|v| < 2^22`; the quantizer's are at most 127). Adding `1.5 · 2^23`
/// leaves the rounded integer in the low mantissa bits, offset by `2^22`, as the
/// current rounding mode (to nearest, ties to even) rounds it: the same value as
/// `v.round_ties_even()` there, in plain arithmetic that the compiler vectorises instead
/// of one C library `rintf` call per element.
#[inline(always)]
pub(crate) fn nearest_int(v: f32) -> i32 {
    ((v + 12_582_912.0).to_bits() & 0x007f_ffff) as i32 - 0x0040_0000
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
