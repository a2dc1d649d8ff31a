//! Shared pieces of the K-quant block types: the packed 6-bit scales, the f32 dot via decoding and the per-block accumulation.

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

/// Decodes every `block_bytes`-byte block of `src` with `decode` into 256 values of
/// `dst`. Panics (naming the type `name`) unless `dst` holds one value per element.
#[inline(always)]
pub(crate) fn dequantize_by_blocks(
    name: &str,
    block_bytes: usize,
    decode: impl Fn(&[u8], &mut [f32]),
    src: &[u8],
    dst: &mut [f32],
) {
    assert_eq!(
        src.len() / block_bytes * QK_K,
        dst.len(),
        "{name}: block count mismatch"
    );
    for (blk, out) in src
        .chunks_exact(block_bytes)
        .zip(dst.chunks_exact_mut(QK_K))
    {
        decode(blk, out);
    }
}

/// `ggml_vec_dot_q{4,5}_K_q8_K` over a row of `block_bytes`-byte blocks whose header is
/// `d`, `dmin` (f16): per block, `block_ints` gives the exact integer sums (scaled quants
/// against the activation, block sums against the mins) that `kquant_acc` adds up in the
/// order the AVX2 kernels keep. Panics unless `act` is a matching Q8_K row.
#[inline(always)]
pub(crate) fn dot_q8k_with_mins(
    name: &str,
    block_bytes: usize,
    block_ints: impl Fn(&[u8], &[i8], &[i16]) -> (i32, i32),
    row: &[u8],
    act: &super::Q8Row<'_>,
) -> f32 {
    let nb = row.len() / block_bytes;
    check_q8k(name, nb, act);
    let mut sum = 0.0f32;
    for (b, blk) in row.chunks_exact(block_bytes).enumerate() {
        let (sumi, summ) = block_ints(
            blk,
            &act.qs[b * QK_K..(b + 1) * QK_K],
            &act.bsums[b * 16..(b + 1) * 16],
        );
        let (d, dmin) = (super::f16_at(blk), super::f16_at(&blk[2..]));
        sum = kquant_acc(sum, d, dmin, act.d[b], sumi, summ);
    }
    sum
}

/// One block's contribution to a Q4_K / Q5_K dot product, in the order every path uses:
/// `sum + (d · da) · sumi − (dmin · da) · summ`.
#[inline(always)]
pub(crate) fn kquant_acc(sum: f32, d: f32, dmin: f32, da: f32, sumi: i32, summ: i32) -> f32 {
    sum + (d * da) * sumi as f32 - (dmin * da) * summ as f32
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
