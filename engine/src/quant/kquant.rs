//! Shared pieces of the K-quant block types: the packed 6-bit scales and the f32 dot via decoding.

use super::QK_K;

/// The eight 6-bit scales and eight 6-bit minimums packed into the 12 `scales` bytes of a
/// Q4_K / Q5_K block (ggml's `get_scale_min_k4`): sub-block `j < 4` has scale
/// `q[j] & 63`, minimum `q[j + 4] & 63`; `j ≥ 4` has scale `(q[j + 4] & 15) | (q[j − 4] >> 6) << 4`
/// and minimum `(q[j + 4] >> 4) | (q[j] >> 6) << 4`.
#[inline(always)]
pub(crate) fn scales_mins_k4(q: &[u8]) -> ([u8; 8], [u8; 8]) {
    let mut sc = [0u8; 8];
    let mut m = [0u8; 8];
    for j in 0..8 {
        if j < 4 {
            sc[j] = q[j] & 63;
            m[j] = q[j + 4] & 63;
        } else {
            sc[j] = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
            m[j] = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
        }
    }
    (sc, m)
}

/// `Σ row[i] · x[i]` for a K-quant row: each block decoded by `decode` into 256 f32 and
/// dotted in f32 (eight partial sums per block).
#[inline(always)]
pub(crate) fn dot_f32_by_decoding(
    name: &str,
    block_bytes: usize,
    decode: impl Fn(&[u8], &mut [f32]),
    row: &[u8],
    x: &[f32],
) -> f32 {
    assert_eq!(
        row.len() / block_bytes * QK_K,
        x.len(),
        "{name}: row/activation length mismatch"
    );
    let mut buf = [0.0f32; QK_K];
    let mut sum = 0.0f32;
    for (blk, xb) in row.chunks_exact(block_bytes).zip(x.chunks_exact(QK_K)) {
        decode(blk, &mut buf);
        let mut acc = [0.0f32; 8];
        for (w8, x8) in buf.chunks_exact(8).zip(xb.chunks_exact(8)) {
            for k in 0..8 {
                acc[k] += w8[k] * x8[k];
            }
        }
        sum += acc.iter().sum::<f32>();
    }
    sum
}

/// Panics unless `act` is a Q8_K row matching a row of `nb` blocks.
#[inline(always)]
pub(crate) fn check_q8k(name: &str, nb: usize, act: &super::Q8Row<'_>) {
    assert_eq!(
        nb * QK_K,
        act.qs.len(),
        "{name}: row/activation length mismatch"
    );
    assert!(
        act.d.len() == nb && act.bsums.len() == nb * 16,
        "{name}: activation must be Q8_K (with block sums)"
    );
}
