//! AVX2 row-dot kernels for the K-quants (Q4_K, Q5_K, Q6_K with a Q8_K activation), also taken on the AVX-512 paths.
//!
//! Each block's integer sums are computed exactly with `maddubs` + `madd` (no saturation:
//! 4-, 5- and 6-bit unsigned quants times 8-bit activations stay within `i16` pairs) and
//! scaled and added in the portable kernels' order (`quant::kquant_acc`), so every result
//! is the portable path's bit for bit. The caller must have checked that the CPU supports
//! AVX2, FMA and F16C; lengths are checked here with `assert!`. The AVX-512 paths use
//! these kernels too: there are no AVX-512 K-quant kernels.

use crate::quant::{Q8Row, QK_K, f16_at, kquant_acc, scales_mins_k4};
use core::arch::x86_64::*;

/// Bytes of a Q4_K, Q5_K and Q6_K block.
const Q4K_BYTES: usize = 144;
const Q5K_BYTES: usize = 176;
const Q6K_BYTES: usize = 210;

/// Panics unless every activation row is Q8_K of `nb` blocks.
fn check_q8k<const N: usize>(nb: usize, a: &[Q8Row<'_>; N]) {
    for r in a {
        assert!(
            r.qs.len() == nb * QK_K && r.d.len() == nb && r.bsums.len() == nb * 16,
            "K-quant kernel: activation is not Q8_K of {nb} blocks"
        );
    }
}

/// Sum of the eight `i32` lanes.
#[target_feature(enable = "avx2,fma,f16c")]
#[inline]
pub(super) fn hsum_i32(v: __m256i) -> i32 {
    let s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256::<1>(v));
    let s = _mm_add_epi32(s, _mm_shuffle_epi32::<0b01_00_11_10>(s));
    let s = _mm_add_epi32(s, _mm_shuffle_epi32::<0b10_11_00_01>(s));
    _mm_cvtsi128_si32(s)
}

/// 32 bytes at `p`.
#[target_feature(enable = "avx2,fma,f16c")]
#[inline]
unsafe fn load(p: *const u8) -> __m256i {
    // SAFETY: the caller guarantees 32 readable bytes at `p`.
    unsafe { _mm256_loadu_si256(p as *const __m256i) }
}

/// `Σ_j bsums_j · m_{j/2}` of a Q4_K / Q5_K block.
#[inline(always)]
fn mins_sum(bsums: &[i16], m: &[u8; 8]) -> i32 {
    (0..16).map(|j| bsums[j] as i32 * m[j / 2] as i32).sum()
}

/// The integer sums of one Q4_K or Q5_K block (`qh` bits added when `FIVE`) with the
/// Q8_K block `qa` (256 quants), as `quant::q4_k::block_ints` defines them.
#[target_feature(enable = "avx2,fma,f16c")]
#[inline]
unsafe fn k45_block<const FIVE: bool>(blk: &[u8], qa: &[i8], bsums: &[i16]) -> (i32, i32) {
    let (sc, m) = scales_mins_k4(&blk[4..16]);
    let qs = if FIVE { 48 } else { 16 };
    let nib = _mm256_set1_epi8(0x0F);
    let one = _mm256_set1_epi8(1);
    // SAFETY (all loads): `blk` is a whole block (checked by the caller) and `qa` holds 256 quants.
    let hbits = if FIVE {
        unsafe { load(blk.as_ptr().add(16)) }
    } else {
        _mm256_setzero_si256()
    };
    let mut acc = _mm256_setzero_si256();
    for c in 0..4 {
        let q = unsafe { load(blk.as_ptr().add(qs + 32 * c)) };
        let mut lo = _mm256_and_si256(q, nib);
        let mut hi = _mm256_and_si256(_mm256_srli_epi16::<4>(q), nib);
        if FIVE {
            let b_lo = _mm256_and_si256(
                _mm256_srl_epi16(hbits, _mm_cvtsi32_si128(2 * c as i32)),
                one,
            );
            let b_hi = _mm256_and_si256(
                _mm256_srl_epi16(hbits, _mm_cvtsi32_si128(2 * c as i32 + 1)),
                one,
            );
            lo = _mm256_or_si256(lo, _mm256_slli_epi16::<4>(b_lo));
            hi = _mm256_or_si256(hi, _mm256_slli_epi16::<4>(b_hi));
        }
        let a_lo = unsafe { load(qa.as_ptr().add(64 * c) as *const u8) };
        let a_hi = unsafe { load(qa.as_ptr().add(64 * c + 32) as *const u8) };
        let p_lo = _mm256_madd_epi16(
            _mm256_maddubs_epi16(lo, a_lo),
            _mm256_set1_epi16(sc[2 * c] as i16),
        );
        let p_hi = _mm256_madd_epi16(
            _mm256_maddubs_epi16(hi, a_hi),
            _mm256_set1_epi16(sc[2 * c + 1] as i16),
        );
        acc = _mm256_add_epi32(acc, _mm256_add_epi32(p_lo, p_hi));
    }
    (hsum_i32(acc), mins_sum(bsums, &m))
}

/// A Q4_K / Q5_K row (blocks of `BYTES`) times `N` Q8_K activation rows.
#[target_feature(enable = "avx2,fma,f16c")]
#[inline]
fn k45<const N: usize, const FIVE: bool, const BYTES: usize>(
    w: &[u8],
    a: &[Q8Row<'_>; N],
) -> [f32; N] {
    assert!(
        w.len().is_multiple_of(BYTES),
        "K-quant row is not whole blocks"
    );
    let nb = w.len() / BYTES;
    check_q8k(nb, a);
    let mut out = [0.0f32; N];
    for (o, r) in out.iter_mut().zip(a) {
        let mut sum = 0.0f32;
        for (b, blk) in w.chunks_exact(BYTES).enumerate() {
            // SAFETY: AVX2 is available (the caller's contract); the slices are whole
            // blocks (checked above).
            let (sumi, summ) = unsafe {
                k45_block::<FIVE>(
                    blk,
                    &r.qs[b * QK_K..(b + 1) * QK_K],
                    &r.bsums[b * 16..(b + 1) * 16],
                )
            };
            sum = kquant_acc(sum, f16_at(blk), f16_at(&blk[2..]), r.d[b], sumi, summ);
        }
        *o = sum;
    }
    out
}

/// Q4_K row times `N` Q8_K rows (`ggml_vec_dot_q4_K_q8_K`).
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) fn q4_k<const N: usize>(w: &[u8], a: &[Q8Row<'_>; N]) -> [f32; N] {
    k45::<N, false, Q4K_BYTES>(w, a)
}

/// Q5_K row times `N` Q8_K rows (`ggml_vec_dot_q5_K_q8_K`).
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) fn q5_k<const N: usize>(w: &[u8], a: &[Q8Row<'_>; N]) -> [f32; N] {
    k45::<N, true, Q5K_BYTES>(w, a)
}

/// `Σ_s scales_s · Σ_j (q_j − 32) · a_j` of one Q6_K block: the unsigned 6-bit quants'
/// products, less `32 · Σ_s scales_s · bsums_s`.
#[target_feature(enable = "avx2,fma,f16c")]
#[inline]
unsafe fn q6k_block(blk: &[u8], qa: &[i8], bsums: &[i16]) -> i32 {
    let nib = _mm256_set1_epi8(0x0F);
    let three = _mm256_set1_epi8(3);
    let sc = |s: usize| blk[192 + s] as i8 as i16;
    let scales = |s: usize| _mm256_set_m128i(_mm_set1_epi16(sc(s + 1)), _mm_set1_epi16(sc(s)));
    let mut acc = _mm256_setzero_si256();
    for h in 0..2 {
        // SAFETY (all loads): `blk` is a whole 210-byte block, `qa` 256 quants.
        let ql0 = unsafe { load(blk.as_ptr().add(64 * h)) };
        let ql1 = unsafe { load(blk.as_ptr().add(64 * h + 32)) };
        let qh = unsafe { load(blk.as_ptr().add(128 + 32 * h)) };
        let hb = |shift: i32| {
            _mm256_slli_epi16::<4>(_mm256_and_si256(
                _mm256_srl_epi16(qh, _mm_cvtsi32_si128(shift)),
                three,
            ))
        };
        let q = [
            _mm256_or_si256(_mm256_and_si256(ql0, nib), hb(0)),
            _mm256_or_si256(_mm256_and_si256(ql1, nib), hb(2)),
            _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16::<4>(ql0), nib), hb(4)),
            _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16::<4>(ql1), nib), hb(6)),
        ];
        for (k, qk) in q.into_iter().enumerate() {
            let av = unsafe { load(qa.as_ptr().add(128 * h + 32 * k) as *const u8) };
            let p = _mm256_madd_epi16(_mm256_maddubs_epi16(qk, av), scales(8 * h + 2 * k));
            acc = _mm256_add_epi32(acc, p);
        }
    }
    let offset: i32 = (0..16).map(|s| sc(s) as i32 * bsums[s] as i32).sum();
    hsum_i32(acc) - 32 * offset
}

/// Q6_K row times `N` Q8_K rows (`ggml_vec_dot_q6_K_q8_K`).
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) fn q6_k<const N: usize>(w: &[u8], a: &[Q8Row<'_>; N]) -> [f32; N] {
    assert!(
        w.len().is_multiple_of(Q6K_BYTES),
        "Q6_K row is not whole blocks"
    );
    let nb = w.len() / Q6K_BYTES;
    check_q8k(nb, a);
    let mut out = [0.0f32; N];
    for (o, r) in out.iter_mut().zip(a) {
        let mut sum = 0.0f32;
        for (b, blk) in w.chunks_exact(Q6K_BYTES).enumerate() {
            // SAFETY: AVX2 is available (the caller's contract); whole blocks (checked).
            let sumi = unsafe {
                q6k_block(
                    blk,
                    &r.qs[b * QK_K..(b + 1) * QK_K],
                    &r.bsums[b * 16..(b + 1) * 16],
                )
            };
            sum += (f16_at(&blk[208..]) * r.d[b]) * sumi as f32;
        }
        *o = sum;
    }
    out
}
