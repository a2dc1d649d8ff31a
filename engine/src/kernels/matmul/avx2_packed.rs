//! AVX2 + FMA + F16C kernels for the 16-row packed layout of [`super::packed`] (x86-64, chosen at run time).
//!
//! The layout is the AVX-512 kernels' own: one weight row per i32 lane. A 256-bit register
//! holds eight lanes, so each 16-row group is taken as two halves of eight rows (the first
//! and second 32 bytes of every 64-byte run), each half over the whole of K. The caller
//! must have checked that the CPU supports AVX2, FMA and F16C
//! ([`crate::kernels::Isa::Avx2`]); lengths are checked here with `assert!`.
//!
//! Bit-for-bit rules, as on AVX-512: every lane's float operations per block are the same
//! whatever the number of activation rows `N` (the rows are run four, two or one at a
//! time, which changes only the register tiling), so a row's result does not depend on the
//! batch it runs in. The integer block dot is exact, and the float steps per block are the
//! AVX-512 kernels' (`scale = d_w · d_a`, `acc = fma(dot, scale, acc)`, then for Q4_1
//! `acc = fma(m_w, s_a, acc)`), so a packed product here equals the AVX-512 one bit for
//! bit.
//!
//! The Q4_0 kernel and the K-quant kernels (Q4_K, Q5_K, Q6_K with Q8_K activations; taken
//! on every SIMD path) keep a stronger rule: per lane they compute the exact integer sums of the portable
//! `block_ints` / `block_int` and scale and add them with the portable kernels' own float
//! operations in the same order (no fused multiply-add), so a packed K-quant product
//! equals the portable path, and the row kernels, bit for bit.

use super::avx2::check_q8;
use super::packed::{
    X16_BLOCK, X16_BLOCK_Q4_0, X16_BLOCK_Q4K, X16_BLOCK_Q5_0, X16_BLOCK_Q5K, X16_BLOCK_Q6K,
    X16_BLOCK_Q8_0, X16_ROWS,
};
use crate::quant::{Q8Row, QK, QK_K};
use core::arch::x86_64::*;

/// How far ahead (bytes) the first half of a group prefetches the group's stream; the
/// second half reads what the first brought into L1. Formed with `wrapping_add`; a
/// prefetch never faults.
const PREFETCH: usize = 2048;

/// Output rows of one half-group (one per i32 lane of a 256-bit register).
const HALF: usize = X16_ROWS / 2;

/// The little-endian 4 bytes at `p` as one i32 (to broadcast to every lane).
#[inline(always)]
unsafe fn rd32(p: *const u8) -> i32 {
    unsafe { core::ptr::read_unaligned(p as *const i32) }
}

/// Run `$half($args.., rows, h, out)` over both halves `h` and the activation rows of `$a`
/// four, then two, then one at a time (`rows`, `out`: arrays of that many rows).
macro_rules! by_halves_and_rows {
    ($a:expr, $out:expr, $half:ident($($arg:expr),*)) => {{
        let n = $a.len();
        for h in 0..2 {
            let mut i = 0;
            while i + 4 <= n {
                let rows: &[Q8Row<'_>; 4] = $a[i..i + 4].try_into().expect("four rows");
                let out: &mut [[f32; X16_ROWS]; 4] =
                    (&mut $out[i..i + 4]).try_into().expect("four rows");
                $half($($arg,)* rows, h, out);
                i += 4;
            }
            if i + 2 <= n {
                let rows: &[Q8Row<'_>; 2] = $a[i..i + 2].try_into().expect("two rows");
                let out: &mut [[f32; X16_ROWS]; 2] =
                    (&mut $out[i..i + 2]).try_into().expect("two rows");
                $half($($arg,)* rows, h, out);
                i += 2;
            }
            if i < n {
                let rows: &[Q8Row<'_>; 1] = $a[i..i + 1].try_into().expect("one row");
                let out: &mut [[f32; X16_ROWS]; 1] =
                    (&mut $out[i..i + 1]).try_into().expect("one row");
                $half($($arg,)* rows, h, out);
            }
        }
    }};
}

/// Q4_1 weights packed 16 rows to a block (one group of [`super::packed`]) · Q8_1
/// activations: `out[i][j]` = row `j` of the group · activation row `i`.
///
/// Per block and half, each lane's 16 nibble bytes meet the activation's matching 4-byte
/// runs (broadcast to every lane) in 8 `vpmaddubsw`, summed in i16: a pair sum is at most
/// 2 · 15 · 128 = 3840 in magnitude, so eight of them (30720) never saturate and the sum
/// is the exact integer dot. One `vpmaddwd` widens it to i32.
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) fn q4_1x16<const N: usize>(g: &[u8], a: &[Q8Row<'_>; N]) -> [[f32; X16_ROWS]; N] {
    let nb = g.len() / X16_BLOCK;
    check_q8(nb, a, true);
    let mut out = [[0.0f32; X16_ROWS]; N];
    by_halves_and_rows!(a, out, q4_1_half(g, nb));
    out
}

/// Rows `8h .. 8h + 8` of one packed Q4_1 group times `M` activation rows into
/// `out[i][8h .. 8h + 8]` (see [`q4_1x16`]); `nb` blocks, checked by the caller.
#[target_feature(enable = "avx2,fma,f16c")]
fn q4_1_half<const M: usize>(
    g: &[u8],
    nb: usize,
    a: &[Q8Row<'_>; M],
    h: usize,
    out: &mut [[f32; X16_ROWS]; M],
) {
    assert!(h < 2 && g.len() >= nb * X16_BLOCK);
    let low = _mm256_set1_epi8(0x0F);
    let ones = _mm256_set1_epi16(1);
    let mut acc = [_mm256_setzero_ps(); M];
    for b in 0..nb {
        // SAFETY: block b < nb of the group (asserted) and of every activation row
        // (checked by the caller); `h < 2`, so every read stays inside the block.
        unsafe {
            let p = g.as_ptr().add(b * X16_BLOCK);
            if h == 0 {
                for l in 0..X16_BLOCK / 64 {
                    _mm_prefetch::<_MM_HINT_T0>(p.wrapping_add(PREFETCH + 64 * l) as *const i8);
                }
            }
            let dw = _mm256_cvtph_ps(_mm_loadu_si128(p.add(2 * HALF * h) as *const _));
            let mw = _mm256_cvtph_ps(_mm_loadu_si128(p.add(32 + 2 * HALF * h) as *const _));
            let mut s16 = [_mm256_setzero_si256(); M];
            for k in 0..4 {
                let raw = _mm256_loadu_si256(p.add(64 + 64 * k + 32 * h) as *const _);
                let lo = _mm256_and_si256(raw, low);
                let hi = _mm256_and_si256(_mm256_srli_epi16::<4>(raw), low);
                for i in 0..M {
                    let qa = a[i].qs.as_ptr().add(b * QK) as *const u8;
                    let x = _mm256_set1_epi32(rd32(qa.add(4 * k)));
                    let y = _mm256_set1_epi32(rd32(qa.add(16 + 4 * k)));
                    s16[i] = _mm256_add_epi16(s16[i], _mm256_maddubs_epi16(lo, x));
                    s16[i] = _mm256_add_epi16(s16[i], _mm256_maddubs_epi16(hi, y));
                }
            }
            for i in 0..M {
                let s = _mm256_cvtepi32_ps(_mm256_madd_epi16(s16[i], ones));
                let scale = _mm256_mul_ps(dw, _mm256_set1_ps(*a[i].d.get_unchecked(b)));
                acc[i] = _mm256_fmadd_ps(s, scale, acc[i]);
                acc[i] = _mm256_fmadd_ps(mw, _mm256_set1_ps(*a[i].s.get_unchecked(b)), acc[i]);
            }
        }
    }
    for i in 0..M {
        // SAFETY: `out[i][HALF * h ..]` holds 8 f32 (`h < 2`).
        unsafe { _mm256_storeu_ps(out[i].as_mut_ptr().add(HALF * h), acc[i]) };
    }
}

/// Q4_0 weights packed 16 rows to a block (one group of [`super::packed`]) · Q8_0
/// activations whose `s[b]` holds `8 · Σ qs` of block `b`: `out[i][j]` = row `j` of the
/// group · activation row `i`, bit for bit the portable `ggml_vec_dot_q4_0_q8_0` of
/// [`crate::quant::Q4_0`].
///
/// The nibbles are taken unsigned (0..15) in `vpmaddubsw`, eight of them summed in i16 as
/// for Q4_1 (at most 30720, no saturation), and `8 · Σ a` comes off the exact integer
/// dot, which gives `Σ (q − 8) · a` exactly (integers below 2^24). The float steps are
/// the portable kernel's (`acc + sumi · (d_w · d_a)`, no fused multiply-add).
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) fn q4_0x16<const N: usize>(g: &[u8], a: &[Q8Row<'_>; N]) -> [[f32; X16_ROWS]; N] {
    let nb = g.len() / X16_BLOCK_Q4_0;
    check_q8(nb, a, true);
    let mut out = [[0.0f32; X16_ROWS]; N];
    by_halves_and_rows!(a, out, q4_0_half(g, nb));
    out
}

/// Rows `8h .. 8h + 8` of one packed Q4_0 group times `M` activation rows into
/// `out[i][8h .. 8h + 8]` (see [`q4_0x16`]); `nb` blocks, checked by the caller.
#[target_feature(enable = "avx2,fma,f16c")]
fn q4_0_half<const M: usize>(
    g: &[u8],
    nb: usize,
    a: &[Q8Row<'_>; M],
    h: usize,
    out: &mut [[f32; X16_ROWS]; M],
) {
    assert!(h < 2 && g.len() >= nb * X16_BLOCK_Q4_0);
    let low = _mm256_set1_epi8(0x0F);
    let ones = _mm256_set1_epi16(1);
    let mut acc = [_mm256_setzero_ps(); M];
    for b in 0..nb {
        // SAFETY: as in `q4_1_half`.
        unsafe {
            let p = g.as_ptr().add(b * X16_BLOCK_Q4_0);
            if h == 0 {
                for l in 0..X16_BLOCK_Q4_0.div_ceil(64) {
                    _mm_prefetch::<_MM_HINT_T0>(p.wrapping_add(PREFETCH + 64 * l) as *const i8);
                }
            }
            let dw = _mm256_cvtph_ps(_mm_loadu_si128(p.add(2 * HALF * h) as *const _));
            let mut s16 = [_mm256_setzero_si256(); M];
            for k in 0..4 {
                let raw = _mm256_loadu_si256(p.add(32 + 64 * k + 32 * h) as *const _);
                let lo = _mm256_and_si256(raw, low);
                let hi = _mm256_and_si256(_mm256_srli_epi16::<4>(raw), low);
                for i in 0..M {
                    let qa = a[i].qs.as_ptr().add(b * QK) as *const u8;
                    let x = _mm256_set1_epi32(rd32(qa.add(4 * k)));
                    let y = _mm256_set1_epi32(rd32(qa.add(16 + 4 * k)));
                    s16[i] = _mm256_add_epi16(s16[i], _mm256_maddubs_epi16(lo, x));
                    s16[i] = _mm256_add_epi16(s16[i], _mm256_maddubs_epi16(hi, y));
                }
            }
            for i in 0..M {
                let dot = _mm256_sub_ps(
                    _mm256_cvtepi32_ps(_mm256_madd_epi16(s16[i], ones)),
                    _mm256_set1_ps(*a[i].s.get_unchecked(b)),
                );
                let scale = _mm256_mul_ps(dw, _mm256_set1_ps(*a[i].d.get_unchecked(b)));
                acc[i] = _mm256_add_ps(acc[i], _mm256_mul_ps(dot, scale));
            }
        }
    }
    for i in 0..M {
        // SAFETY: as in `q4_1_half`.
        unsafe { _mm256_storeu_ps(out[i].as_mut_ptr().add(HALF * h), acc[i]) };
    }
}

/// Q8_0 weights packed 16 rows to a block, stored offset by 128 as unsigned bytes (one
/// group of [`super::packed`]) · Q8_0 activations: `out[i][j]` = row `j` of the group ·
/// activation row `i`. The activations' `s` is not read (the AVX-512 VNNI kernel's offset
/// correction): the weights are turned back into signed bytes (`^ 0x80`) and multiplied
/// with the sign trick (`|w|` · `a` with `w`'s sign), whose pair sums (at most
/// 2 · 128 · 127 = 32512) never saturate `vpmaddubsw`; each 4-byte run is widened to i32
/// at once. The block dot is exact, so this equals the VNNI kernel bit for bit.
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) fn q8_0x16<const N: usize>(g: &[u8], a: &[Q8Row<'_>; N]) -> [[f32; X16_ROWS]; N] {
    let nb = g.len() / X16_BLOCK_Q8_0;
    check_q8(nb, a, false);
    let mut out = [[0.0f32; X16_ROWS]; N];
    by_halves_and_rows!(a, out, q8_0_half(g, nb));
    out
}

/// Rows `8h .. 8h + 8` of one packed Q8_0 group times `M` activation rows into
/// `out[i][8h .. 8h + 8]` (see [`q8_0x16`]); `nb` blocks, checked by the caller.
#[target_feature(enable = "avx2,fma,f16c")]
fn q8_0_half<const M: usize>(
    g: &[u8],
    nb: usize,
    a: &[Q8Row<'_>; M],
    h: usize,
    out: &mut [[f32; X16_ROWS]; M],
) {
    assert!(h < 2 && g.len() >= nb * X16_BLOCK_Q8_0);
    let flip = _mm256_set1_epi8(-128);
    let ones = _mm256_set1_epi16(1);
    let mut acc = [_mm256_setzero_ps(); M];
    for b in 0..nb {
        // SAFETY: as in `q4_1_half`.
        unsafe {
            let p = g.as_ptr().add(b * X16_BLOCK_Q8_0);
            if h == 0 {
                for l in 0..X16_BLOCK_Q8_0.div_ceil(64) {
                    _mm_prefetch::<_MM_HINT_T0>(p.wrapping_add(PREFETCH + 64 * l) as *const i8);
                }
            }
            let dw = _mm256_cvtph_ps(_mm_loadu_si128(p.add(2 * HALF * h) as *const _));
            let mut s = [_mm256_setzero_si256(); M];
            for k in 0..8 {
                let w = _mm256_xor_si256(
                    _mm256_loadu_si256(p.add(32 + 64 * k + 32 * h) as *const _),
                    flip,
                );
                let aw = _mm256_sign_epi8(w, w);
                for i in 0..M {
                    let qa = a[i].qs.as_ptr().add(b * QK) as *const u8;
                    let x = _mm256_sign_epi8(_mm256_set1_epi32(rd32(qa.add(4 * k))), w);
                    let d = _mm256_madd_epi16(_mm256_maddubs_epi16(aw, x), ones);
                    s[i] = _mm256_add_epi32(s[i], d);
                }
            }
            for i in 0..M {
                let scale = _mm256_mul_ps(dw, _mm256_set1_ps(*a[i].d.get_unchecked(b)));
                acc[i] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s[i]), scale, acc[i]);
            }
        }
    }
    for i in 0..M {
        // SAFETY: as in `q4_1_half`.
        unsafe { _mm256_storeu_ps(out[i].as_mut_ptr().add(HALF * h), acc[i]) };
    }
}

/// Q5_0 weights packed 16 rows to a block (one group of [`super::packed`], fifth bits
/// re-laid) · Q8_0 activations whose `s[b]` holds `16 · Σ qs` of block `b`: `out[i][j]` =
/// row `j` of the group · activation row `i`. The quants are taken unsigned (`q`, 0..31:
/// nibble | fifth bit · 16, one shift and one mask of the re-laid bits per 4-byte run) in
/// `vpmaddubsw` (pair sums at most 2 · 31 · 128 = 7936, a low and a high run together
/// 15872: no saturation), and `16 · Σ a` comes off the exact integer dot, which gives
/// `Σ (q − 16) · a` exactly (integers below 2^24). Per lane as in [`q4_1x16`].
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) fn q5_0x16<const N: usize>(g: &[u8], a: &[Q8Row<'_>; N]) -> [[f32; X16_ROWS]; N] {
    let nb = g.len() / X16_BLOCK_Q5_0;
    check_q8(nb, a, true);
    let mut out = [[0.0f32; X16_ROWS]; N];
    by_halves_and_rows!(a, out, q5_0_half(g, nb));
    out
}

/// Rows `8h .. 8h + 8` of one packed Q5_0 group times `M` activation rows into
/// `out[i][8h .. 8h + 8]` (see [`q5_0x16`]); `nb` blocks, checked by the caller.
#[target_feature(enable = "avx2,fma,f16c")]
fn q5_0_half<const M: usize>(
    g: &[u8],
    nb: usize,
    a: &[Q8Row<'_>; M],
    h: usize,
    out: &mut [[f32; X16_ROWS]; M],
) {
    assert!(h < 2 && g.len() >= nb * X16_BLOCK_Q5_0);
    let low = _mm256_set1_epi8(0x0F);
    let bit4 = _mm256_set1_epi8(0x10);
    let ones = _mm256_set1_epi16(1);
    let mut acc = [_mm256_setzero_ps(); M];
    for b in 0..nb {
        // SAFETY: as in `q4_1_half`.
        unsafe {
            let p = g.as_ptr().add(b * X16_BLOCK_Q5_0);
            if h == 0 {
                for l in 0..X16_BLOCK_Q5_0.div_ceil(64) {
                    _mm_prefetch::<_MM_HINT_T0>(p.wrapping_add(PREFETCH + 64 * l) as *const i8);
                }
            }
            let dw = _mm256_cvtph_ps(_mm_loadu_si128(p.add(2 * HALF * h) as *const _));
            let qh = _mm256_loadu_si256(p.add(32 + 32 * h) as *const _);
            // Bit 8t + k (low runs) and 8t + 4 + k (high runs) moved to bit 4 of byte t.
            let lo_bits = [
                _mm256_slli_epi32::<4>(qh),
                _mm256_slli_epi32::<3>(qh),
                _mm256_slli_epi32::<2>(qh),
                _mm256_slli_epi32::<1>(qh),
            ];
            let hi_bits = [
                qh,
                _mm256_srli_epi32::<1>(qh),
                _mm256_srli_epi32::<2>(qh),
                _mm256_srli_epi32::<3>(qh),
            ];
            let mut s = [_mm256_setzero_si256(); M];
            for k in 0..4 {
                let raw = _mm256_loadu_si256(p.add(96 + 64 * k + 32 * h) as *const _);
                let lo = _mm256_or_si256(
                    _mm256_and_si256(raw, low),
                    _mm256_and_si256(lo_bits[k], bit4),
                );
                let hi = _mm256_or_si256(
                    _mm256_and_si256(_mm256_srli_epi16::<4>(raw), low),
                    _mm256_and_si256(hi_bits[k], bit4),
                );
                for i in 0..M {
                    let qa = a[i].qs.as_ptr().add(b * QK) as *const u8;
                    let x = _mm256_set1_epi32(rd32(qa.add(4 * k)));
                    let y = _mm256_set1_epi32(rd32(qa.add(16 + 4 * k)));
                    let pair =
                        _mm256_add_epi16(_mm256_maddubs_epi16(lo, x), _mm256_maddubs_epi16(hi, y));
                    s[i] = _mm256_add_epi32(s[i], _mm256_madd_epi16(pair, ones));
                }
            }
            for i in 0..M {
                let dot = _mm256_sub_ps(
                    _mm256_cvtepi32_ps(s[i]),
                    _mm256_set1_ps(*a[i].s.get_unchecked(b)),
                );
                let scale = _mm256_mul_ps(dw, _mm256_set1_ps(*a[i].d.get_unchecked(b)));
                acc[i] = _mm256_fmadd_ps(dot, scale, acc[i]);
            }
        }
    }
    for i in 0..M {
        // SAFETY: as in `q4_1_half`.
        unsafe { _mm256_storeu_ps(out[i].as_mut_ptr().add(HALF * h), acc[i]) };
    }
}

/// Panics unless every activation row is Q8_K (with block sums) of `nb` super-blocks.
fn check_q8k<const N: usize>(nb: usize, a: &[Q8Row<'_>; N]) {
    for r in a {
        assert!(
            r.qs.len() >= nb * QK_K && r.d.len() >= nb && r.bsums.len() >= nb * 16,
            "packed K-quant kernel: activation is not Q8_K of {nb} blocks"
        );
    }
}

/// Eight bytes at `p` (one per lane) as `[v, v]` i16 pairs per i32 lane, zero-extended
/// (`SIGNED` false) or sign-extended: a `vpmaddwd` operand scaling both i16 halves of
/// a lane by its own byte.
#[target_feature(enable = "avx2,fma,f16c")]
#[inline]
unsafe fn lane_pairs<const SIGNED: bool>(p: *const u8) -> __m256i {
    // SAFETY: the caller guarantees 8 readable bytes at `p`.
    let b = unsafe { _mm_loadl_epi64(p as *const __m128i) };
    let v = if SIGNED {
        _mm256_cvtepi8_epi32(b)
    } else {
        _mm256_cvtepu8_epi32(b)
    };
    _mm256_or_si256(
        _mm256_and_si256(v, _mm256_set1_epi32(0xFFFF)),
        _mm256_slli_epi32::<16>(v),
    )
}

/// Two Q8_K block sums as one i32 (`lo` in the low half): a broadcast `vpmaddwd` operand.
#[inline(always)]
fn sum_pair(lo: i16, hi: i16) -> i32 {
    (lo as u16 as u32 | ((hi as u16 as u32) << 16)) as i32
}

/// Q4_K weights packed 16 rows to a super-block (one group of [`super::packed`]) · Q8_K
/// activations: `out[i][j]` = row `j` of the group · activation row `i`, bit for bit the
/// portable `ggml_vec_dot_q4_K_q8_K` of [`crate::quant::Q4K`].
///
/// Per super-block, half and sub-block, each lane's 16 nibble bytes meet the activation's
/// matching 4-byte runs in 8 `vpmaddubsw` summed in i16 (as for Q4_1: at most 30720, no
/// saturation), then one `vpmaddwd` with the lane's scale pair adds `sc · Σ q · a` to the
/// i32 sum; the minimums' sum `Σ_s m_s · (bsums_2s + bsums_2s+1)` takes one `vpmaddwd` per
/// sub-block. Then `acc + (d · d_a) · sumi − (dmin · d_a) · summ` as `kquant_acc` does it.
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) fn q4_kx16<const N: usize>(g: &[u8], a: &[Q8Row<'_>; N]) -> [[f32; X16_ROWS]; N] {
    let nb = g.len() / X16_BLOCK_Q4K;
    check_q8k(nb, a);
    let mut out = [[0.0f32; X16_ROWS]; N];
    by_halves_and_rows!(a, out, q4_k_half(g, nb));
    out
}

/// Rows `8h .. 8h + 8` of one packed Q4_K group times `M` activation rows into
/// `out[i][8h .. 8h + 8]` (see [`q4_kx16`]); `nb` super-blocks, checked by the caller.
#[target_feature(enable = "avx2,fma,f16c")]
fn q4_k_half<const M: usize>(
    g: &[u8],
    nb: usize,
    a: &[Q8Row<'_>; M],
    h: usize,
    out: &mut [[f32; X16_ROWS]; M],
) {
    assert!(h < 2 && g.len() >= nb * X16_BLOCK_Q4K);
    let low = _mm256_set1_epi8(0x0F);
    let mut acc = [_mm256_setzero_ps(); M];
    for b in 0..nb {
        // SAFETY: super-block b < nb of the group (asserted) and of every activation row
        // (checked by the caller); `h < 2`, so every read stays inside the block.
        unsafe {
            let p = g.as_ptr().add(b * X16_BLOCK_Q4K);
            if h == 0 {
                for l in 0..X16_BLOCK_Q4K.div_ceil(64) {
                    _mm_prefetch::<_MM_HINT_T0>(p.wrapping_add(PREFETCH + 64 * l) as *const i8);
                }
            }
            let dw = _mm256_cvtph_ps(_mm_loadu_si128(p.add(2 * HALF * h) as *const _));
            let mw = _mm256_cvtph_ps(_mm_loadu_si128(p.add(32 + 2 * HALF * h) as *const _));
            let mut sumi = [_mm256_setzero_si256(); M];
            let mut summ = [_mm256_setzero_si256(); M];
            for s in 0..8 {
                let sc = lane_pairs::<false>(p.add(64 + 16 * s + HALF * h));
                let mn = lane_pairs::<false>(p.add(192 + 16 * s + HALF * h));
                let mut s16 = [_mm256_setzero_si256(); M];
                for k in 0..4 {
                    let raw =
                        _mm256_loadu_si256(p.add(320 + 256 * s + 64 * k + 32 * h) as *const _);
                    let lo = _mm256_and_si256(raw, low);
                    let hi = _mm256_and_si256(_mm256_srli_epi16::<4>(raw), low);
                    for i in 0..M {
                        let qa = a[i].qs.as_ptr().add(b * QK_K + 32 * s) as *const u8;
                        let x = _mm256_set1_epi32(rd32(qa.add(4 * k)));
                        let y = _mm256_set1_epi32(rd32(qa.add(16 + 4 * k)));
                        s16[i] = _mm256_add_epi16(s16[i], _mm256_maddubs_epi16(lo, x));
                        s16[i] = _mm256_add_epi16(s16[i], _mm256_maddubs_epi16(hi, y));
                    }
                }
                for i in 0..M {
                    sumi[i] = _mm256_add_epi32(sumi[i], _mm256_madd_epi16(s16[i], sc));
                    let bs = a[i].bsums.get_unchecked(b * 16 + 2 * s..b * 16 + 2 * s + 2);
                    let pair = _mm256_set1_epi32(sum_pair(bs[0], bs[1]));
                    summ[i] = _mm256_add_epi32(summ[i], _mm256_madd_epi16(mn, pair));
                }
            }
            for i in 0..M {
                let da = _mm256_set1_ps(*a[i].d.get_unchecked(b));
                let t = _mm256_mul_ps(_mm256_mul_ps(dw, da), _mm256_cvtepi32_ps(sumi[i]));
                let m = _mm256_mul_ps(_mm256_mul_ps(mw, da), _mm256_cvtepi32_ps(summ[i]));
                acc[i] = _mm256_sub_ps(_mm256_add_ps(acc[i], t), m);
            }
        }
    }
    for i in 0..M {
        // SAFETY: as in `q4_1_half`.
        unsafe { _mm256_storeu_ps(out[i].as_mut_ptr().add(HALF * h), acc[i]) };
    }
}

/// Five bit-4 masks of a packed Q5_0 / Q5_K fifth-bit run `qh` (one u32 per lane): for
/// `k < 4`, `.0[k]` puts bit `8t + k` at bit 4 of byte `t` (the low nibbles of 4-byte run
/// `k`), `.1[k]` bit `8t + 4 + k` (the high nibbles); other bits are not masked off.
#[target_feature(enable = "avx2,fma,f16c")]
#[inline]
fn fifth_bits(qh: __m256i) -> ([__m256i; 4], [__m256i; 4]) {
    (
        [
            _mm256_slli_epi32::<4>(qh),
            _mm256_slli_epi32::<3>(qh),
            _mm256_slli_epi32::<2>(qh),
            _mm256_slli_epi32::<1>(qh),
        ],
        [
            qh,
            _mm256_srli_epi32::<1>(qh),
            _mm256_srli_epi32::<2>(qh),
            _mm256_srli_epi32::<3>(qh),
        ],
    )
}

/// Q5_K weights packed 16 rows to a super-block (one group of [`super::packed`]) · Q8_K
/// activations: `out[i][j]` = row `j` of the group · activation row `i`, bit for bit the
/// portable `ggml_vec_dot_q5_K_q8_K` of [`crate::quant::Q5K`].
///
/// As [`q4_kx16`] with the 5-bit quants (nibble | fifth bit · 16, 0..31, one shift and
/// one mask of the re-laid fifth bits per 4-byte run): a `vpmaddubsw` pair sum is then at
/// most 2 · 31 · 128 = 7936, so the i16 sums are scaled into i32 (`vpmaddwd` with the
/// lane's scale pair) every two runs (four products, at most 31744: no saturation).
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) fn q5_kx16<const N: usize>(g: &[u8], a: &[Q8Row<'_>; N]) -> [[f32; X16_ROWS]; N] {
    let nb = g.len() / X16_BLOCK_Q5K;
    check_q8k(nb, a);
    let mut out = [[0.0f32; X16_ROWS]; N];
    by_halves_and_rows!(a, out, q5_k_half(g, nb));
    out
}

/// Rows `8h .. 8h + 8` of one packed Q5_K group times `M` activation rows into
/// `out[i][8h .. 8h + 8]` (see [`q5_kx16`]); `nb` super-blocks, checked by the caller.
#[target_feature(enable = "avx2,fma,f16c")]
fn q5_k_half<const M: usize>(
    g: &[u8],
    nb: usize,
    a: &[Q8Row<'_>; M],
    h: usize,
    out: &mut [[f32; X16_ROWS]; M],
) {
    assert!(h < 2 && g.len() >= nb * X16_BLOCK_Q5K);
    let low = _mm256_set1_epi8(0x0F);
    let bit4 = _mm256_set1_epi8(0x10);
    let mut acc = [_mm256_setzero_ps(); M];
    for b in 0..nb {
        // SAFETY: as in `q4_k_half`.
        unsafe {
            let p = g.as_ptr().add(b * X16_BLOCK_Q5K);
            if h == 0 {
                for l in 0..X16_BLOCK_Q5K.div_ceil(64) {
                    _mm_prefetch::<_MM_HINT_T0>(p.wrapping_add(PREFETCH + 64 * l) as *const i8);
                }
            }
            let dw = _mm256_cvtph_ps(_mm_loadu_si128(p.add(2 * HALF * h) as *const _));
            let mw = _mm256_cvtph_ps(_mm_loadu_si128(p.add(32 + 2 * HALF * h) as *const _));
            let mut sumi = [_mm256_setzero_si256(); M];
            let mut summ = [_mm256_setzero_si256(); M];
            for s in 0..8 {
                let sc = lane_pairs::<false>(p.add(64 + 16 * s + HALF * h));
                let mn = lane_pairs::<false>(p.add(192 + 16 * s + HALF * h));
                let (lo_bits, hi_bits) =
                    fifth_bits(_mm256_loadu_si256(p.add(2368 + 64 * s + 32 * h) as *const _));
                let mut s16 = [_mm256_setzero_si256(); M];
                for k in 0..4 {
                    let raw =
                        _mm256_loadu_si256(p.add(320 + 256 * s + 64 * k + 32 * h) as *const _);
                    let lo = _mm256_or_si256(
                        _mm256_and_si256(raw, low),
                        _mm256_and_si256(lo_bits[k], bit4),
                    );
                    let hi = _mm256_or_si256(
                        _mm256_and_si256(_mm256_srli_epi16::<4>(raw), low),
                        _mm256_and_si256(hi_bits[k], bit4),
                    );
                    for i in 0..M {
                        let qa = a[i].qs.as_ptr().add(b * QK_K + 32 * s) as *const u8;
                        let x = _mm256_set1_epi32(rd32(qa.add(4 * k)));
                        let y = _mm256_set1_epi32(rd32(qa.add(16 + 4 * k)));
                        s16[i] = _mm256_add_epi16(s16[i], _mm256_maddubs_epi16(lo, x));
                        s16[i] = _mm256_add_epi16(s16[i], _mm256_maddubs_epi16(hi, y));
                    }
                    if k % 2 == 1 {
                        for i in 0..M {
                            sumi[i] = _mm256_add_epi32(sumi[i], _mm256_madd_epi16(s16[i], sc));
                            s16[i] = _mm256_setzero_si256();
                        }
                    }
                }
                for i in 0..M {
                    let bs = a[i].bsums.get_unchecked(b * 16 + 2 * s..b * 16 + 2 * s + 2);
                    let pair = _mm256_set1_epi32(sum_pair(bs[0], bs[1]));
                    summ[i] = _mm256_add_epi32(summ[i], _mm256_madd_epi16(mn, pair));
                }
            }
            for i in 0..M {
                let da = _mm256_set1_ps(*a[i].d.get_unchecked(b));
                let t = _mm256_mul_ps(_mm256_mul_ps(dw, da), _mm256_cvtepi32_ps(sumi[i]));
                let m = _mm256_mul_ps(_mm256_mul_ps(mw, da), _mm256_cvtepi32_ps(summ[i]));
                acc[i] = _mm256_sub_ps(_mm256_add_ps(acc[i], t), m);
            }
        }
    }
    for i in 0..M {
        // SAFETY: as in `q4_1_half`.
        unsafe { _mm256_storeu_ps(out[i].as_mut_ptr().add(HALF * h), acc[i]) };
    }
}

/// Q6_K weights packed 16 rows to a super-block (one group of [`super::packed`]) · Q8_K
/// activations: `out[i][j]` = row `j` of the group · activation row `i`, bit for bit the
/// portable `ggml_vec_dot_q6_K_q8_K` of [`crate::quant::Q6K`].
///
/// The quants are taken unsigned (`q + 32`, 0..63: a nibble and two top bits put at bit
/// 4 by one shift and one mask); two `vpmaddubsw` of a sub-block are summed in i16 (at
/// most 2 · 2 · 63 · 128 = 32256, no saturation) and scaled by the lane's signed scale in
/// one `vpmaddwd`; `32 · Σ_s sc_s · bsums_s` then comes off the exact i32 sum (one
/// `vpmaddwd` per two sub-blocks). Then `acc + (d · d_a) · sumi` as the portable kernel.
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) fn q6_kx16<const N: usize>(g: &[u8], a: &[Q8Row<'_>; N]) -> [[f32; X16_ROWS]; N] {
    let nb = g.len() / X16_BLOCK_Q6K;
    check_q8k(nb, a);
    let mut out = [[0.0f32; X16_ROWS]; N];
    by_halves_and_rows!(a, out, q6_k_half(g, nb));
    out
}

/// Rows `8h .. 8h + 8` of one packed Q6_K group times `M` activation rows into
/// `out[i][8h .. 8h + 8]` (see [`q6_kx16`]); `nb` super-blocks, checked by the caller.
#[target_feature(enable = "avx2,fma,f16c")]
fn q6_k_half<const M: usize>(
    g: &[u8],
    nb: usize,
    a: &[Q8Row<'_>; M],
    h: usize,
    out: &mut [[f32; X16_ROWS]; M],
) {
    assert!(h < 2 && g.len() >= nb * X16_BLOCK_Q6K);
    let low = _mm256_set1_epi8(0x0F);
    let top = _mm256_set1_epi8(0x30);
    let mut acc = [_mm256_setzero_ps(); M];
    for b in 0..nb {
        // SAFETY: as in `q4_k_half`.
        unsafe {
            let p = g.as_ptr().add(b * X16_BLOCK_Q6K);
            if h == 0 {
                for l in 0..X16_BLOCK_Q6K.div_ceil(64) {
                    _mm_prefetch::<_MM_HINT_T0>(p.wrapping_add(PREFETCH + 64 * l) as *const i8);
                }
            }
            let dw = _mm256_cvtph_ps(_mm_loadu_si128(p.add(2 * HALF * h) as *const _));
            let mut sumi = [_mm256_setzero_si256(); M];
            let mut offs = [_mm256_setzero_si256(); M];
            for u in 0..8 {
                let q = p.add(288 + 384 * u);
                let sc_lo = lane_pairs::<true>(p.add(32 + 16 * (2 * u) + HALF * h));
                let sc_hi = lane_pairs::<true>(p.add(32 + 16 * (2 * u + 1) + HALF * h));
                // The two sub-blocks' scales in one lane (2u low, 2u + 1 high), for the
                // offset's sums.
                let sc_both = _mm256_blend_epi16::<0b1010_1010>(sc_lo, sc_hi);
                let mut s_lo = [_mm256_setzero_si256(); M];
                let mut s_hi = [_mm256_setzero_si256(); M];
                for k in 0..4 {
                    let raw = _mm256_loadu_si256(q.add(64 * k + 32 * h) as *const _);
                    let hb = _mm256_loadu_si256(q.add(256 + 64 * (k / 2) + 32 * h) as *const _);
                    let (hb_lo, hb_hi) = if k % 2 == 0 {
                        (hb, _mm256_srli_epi16::<2>(hb))
                    } else {
                        (_mm256_slli_epi16::<4>(hb), _mm256_slli_epi16::<2>(hb))
                    };
                    let lo =
                        _mm256_or_si256(_mm256_and_si256(raw, low), _mm256_and_si256(hb_lo, top));
                    let hi = _mm256_or_si256(
                        _mm256_and_si256(_mm256_srli_epi16::<4>(raw), low),
                        _mm256_and_si256(hb_hi, top),
                    );
                    for i in 0..M {
                        let qa = a[i].qs.as_ptr().add(b * QK_K + 32 * u) as *const u8;
                        let x = _mm256_set1_epi32(rd32(qa.add(4 * k)));
                        let y = _mm256_set1_epi32(rd32(qa.add(16 + 4 * k)));
                        s_lo[i] = _mm256_add_epi16(s_lo[i], _mm256_maddubs_epi16(lo, x));
                        s_hi[i] = _mm256_add_epi16(s_hi[i], _mm256_maddubs_epi16(hi, y));
                    }
                    if k % 2 == 1 {
                        for i in 0..M {
                            let both = _mm256_add_epi32(
                                _mm256_madd_epi16(s_lo[i], sc_lo),
                                _mm256_madd_epi16(s_hi[i], sc_hi),
                            );
                            sumi[i] = _mm256_add_epi32(sumi[i], both);
                            s_lo[i] = _mm256_setzero_si256();
                            s_hi[i] = _mm256_setzero_si256();
                        }
                    }
                }
                for i in 0..M {
                    let bs = a[i].bsums.get_unchecked(b * 16 + 2 * u..b * 16 + 2 * u + 2);
                    let pair = _mm256_set1_epi32(sum_pair(bs[0], bs[1]));
                    offs[i] = _mm256_add_epi32(offs[i], _mm256_madd_epi16(sc_both, pair));
                }
            }
            for i in 0..M {
                let da = _mm256_set1_ps(*a[i].d.get_unchecked(b));
                let dot = _mm256_sub_epi32(sumi[i], _mm256_slli_epi32::<5>(offs[i]));
                let t = _mm256_mul_ps(_mm256_mul_ps(dw, da), _mm256_cvtepi32_ps(dot));
                acc[i] = _mm256_add_ps(acc[i], t);
            }
        }
    }
    for i in 0..M {
        // SAFETY: as in `q4_1_half`.
        unsafe { _mm256_storeu_ps(out[i].as_mut_ptr().add(HALF * h), acc[i]) };
    }
}
