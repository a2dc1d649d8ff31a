//! AVX2 row-dot kernels for Q5_0 and Q5_1 (the types llama.cpp's K-quant mixes fall back to for rows that are not whole super-blocks), also taken on the AVX-512 paths.
//!
//! Each block's fifth bits are spread to bytes as ggml's AVX2 `bytes_from_bits_32` does
//! (broadcast, byte shuffle, compare against a one-bit-per-byte mask) and joined to the
//! nibbles; the block's integer dot is exact (`maddubs` + `madd`: Q5_0 with the sign trick,
//! |q − 16| ≤ 16; Q5_1 unsigned, q ≤ 31) and is scaled and added in the portable kernels'
//! order (`quant::q5_0`, `quant::q5_1`), so every result is the portable path's bit for
//! bit. The caller must have checked that the CPU supports AVX2, FMA and F16C; lengths
//! are checked here with `assert!`.

use super::avx2::{check_q8, h2f, nibbles};
use super::avx2_kquant::hsum_i32;
use crate::quant::{Q8Row, QK};
use core::arch::x86_64::*;

/// Bytes of a Q5_0 block: f16 `d`, u32 `qh`, 16 nibble bytes.
const Q5_0_BYTES: usize = 22;
/// Bytes of a Q5_1 block: f16 `d`, f16 `m`, u32 `qh`, 16 nibble bytes.
const Q5_1_BYTES: usize = 24;

/// The 32 bits of the little-endian u32 at `p` as 32 bytes: byte `j` is `0xFF` when bit
/// `j` is set, else 0.
#[target_feature(enable = "avx2,fma,f16c")]
#[inline]
unsafe fn bit_bytes(p: *const u8) -> __m256i {
    // SAFETY: the caller guarantees 4 readable bytes at `p`.
    let bits = unsafe { core::ptr::read_unaligned(p as *const u32) };
    // Byte j takes byte j / 8 of the word (the shuffle indexes within each 128-bit half,
    // and each half holds the whole word).
    let spread = _mm256_shuffle_epi8(
        _mm256_set1_epi32(u32::from_le(bits) as i32),
        _mm256_set_epi64x(
            0x0303_0303_0303_0303,
            0x0202_0202_0202_0202,
            0x0101_0101_0101_0101,
            0,
        ),
    );
    // Byte j of every 8 has every bit but bit j % 8 set: all ones exactly when that bit is.
    let others = _mm256_set1_epi64x(0x7fbf_dfef_f7fb_fdfe_u64 as i64);
    _mm256_cmpeq_epi8(_mm256_or_si256(spread, others), _mm256_set1_epi8(-1))
}

/// Q5_0 row times `N` Q8_0 rows (`ggml_vec_dot_q5_0_q8_0`).
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) fn q5_0<const N: usize>(w: &[u8], a: &[Q8Row<'_>; N]) -> [f32; N] {
    assert!(
        w.len().is_multiple_of(Q5_0_BYTES),
        "Q5_0 row is not whole blocks"
    );
    let nb = w.len() / Q5_0_BYTES;
    check_q8(nb, a, false);
    let ones = _mm256_set1_epi16(1);
    let mut sum = [0.0f32; N];
    for b in 0..nb {
        // SAFETY: block b < nb of the weight row and of every activation row (checked).
        unsafe {
            let p = w.as_ptr().add(b * Q5_0_BYTES);
            let dw = h2f(p);
            // q − 16: the nibble where the fifth bit is set, the nibble − 16 (its high
            // bits all ones) where it is not.
            let five = _mm256_andnot_si256(bit_bytes(p.add(2)), _mm256_set1_epi8(0xF0u8 as i8));
            let q = _mm256_or_si256(nibbles(p.add(6)), five);
            let aq = _mm256_sign_epi8(q, q);
            for i in 0..N {
                let av = _mm256_loadu_si256(a[i].qs.as_ptr().add(b * QK) as *const __m256i);
                let prod = _mm256_maddubs_epi16(aq, _mm256_sign_epi8(av, q));
                let sumi = hsum_i32(_mm256_madd_epi16(prod, ones));
                sum[i] += sumi as f32 * (dw * *a[i].d.get_unchecked(b));
            }
        }
    }
    sum
}

/// Q5_1 row times `N` Q8_1 rows (`ggml_vec_dot_q5_1_q8_1`).
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) fn q5_1<const N: usize>(w: &[u8], a: &[Q8Row<'_>; N]) -> [f32; N] {
    assert!(
        w.len().is_multiple_of(Q5_1_BYTES),
        "Q5_1 row is not whole blocks"
    );
    let nb = w.len() / Q5_1_BYTES;
    check_q8(nb, a, true);
    let ones = _mm256_set1_epi16(1);
    let mut sum = [0.0f32; N];
    for b in 0..nb {
        // SAFETY: as in `q5_0`.
        unsafe {
            let p = w.as_ptr().add(b * Q5_1_BYTES);
            let (dw, mw) = (h2f(p), h2f(p.add(2)));
            let five = _mm256_and_si256(bit_bytes(p.add(4)), _mm256_set1_epi8(0x10));
            let q = _mm256_or_si256(nibbles(p.add(8)), five);
            for i in 0..N {
                let av = _mm256_loadu_si256(a[i].qs.as_ptr().add(b * QK) as *const __m256i);
                let sumi = hsum_i32(_mm256_madd_epi16(_mm256_maddubs_epi16(q, av), ones));
                let (da, sa) = (*a[i].d.get_unchecked(b), *a[i].s.get_unchecked(b));
                sum[i] += (dw * da) * sumi as f32 + mw * sa;
            }
        }
    }
    sum
}
