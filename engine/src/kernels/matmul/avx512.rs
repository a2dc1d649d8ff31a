//! AVX-512 row-dot kernels (F/BW/VL, and the VNNI variant), chosen at run time.
//!
//! The same kernels are generated twice by `avx512_kernels!`: module [`bw`] multiplies
//! bytes with `vpmaddubsw` + `vpmaddwd` (AVX-512 BW), module [`vnni`] with `vpdpbusd`
//! (AVX-512 VNNI). Quantized kernels take two 32-element blocks per 512-bit register;
//! float kernels use masked loads for lengths not a multiple of 16. The caller must have
//! checked the CPU features ([`crate::kernels::Isa::Avx512`] / `Avx512Vnni`); lengths are
//! checked here with `assert!`. Numbers agree with the portable path up to float
//! summation order.

use super::avx2;
use super::packed::{
    X16_BLOCK, X16_BLOCK_Q4_0, X16_BLOCK_Q4K, X16_BLOCK_Q5_0, X16_BLOCK_Q5K, X16_BLOCK_Q6K,
    X16_BLOCK_Q8_0,
};
use crate::quant::{Q8Row, QK, QK_K};
use core::arch::x86_64::*;

/// How far ahead (bytes) the quantized kernels prefetch the weight stream; rows are
/// contiguous, so this runs on into the next row, and past the end of the matrix: the
/// address is formed with `wrapping_add` (no in-bounds promise) and a prefetch never
/// faults. 8 KiB: the fastest decode step where these kernels were tuned; 2 KiB ran too
/// few lines ahead to cover the memory latency (figures: docs/design.md §2.0.2).
const PREFETCH: usize = 8192;

fn check_q8<const N: usize>(nb: usize, a: &[Q8Row<'_>; N], sums: bool) {
    for r in a {
        assert!(
            r.qs.len() >= nb * QK && r.d.len() >= nb,
            "activation shorter than weight row"
        );
        assert!(!sums || r.s.len() >= nb, "activation lacks Q8_1 sums");
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

/// Each accumulator's sixteen f32 lanes, in lane order (the kernels' per-row outputs).
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma,f16c")]
#[inline]
fn lanes16<const N: usize>(acc: [__m512; N]) -> [[f32; 16]; N] {
    core::array::from_fn(|i| {
        let mut o = [0.0f32; 16];
        // SAFETY: `o` holds 16 f32.
        unsafe { _mm512_storeu_ps(o.as_mut_ptr(), acc[i]) };
        o
    })
}

/// Each i32 lane's low 16 bits in both of its i16 halves: a `vpmaddwd` operand scaling
/// both halves of a lane by the lane's own small value.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma,f16c")]
#[inline]
fn lane_pairs512(v: __m512i) -> __m512i {
    _mm512_or_si512(
        _mm512_and_si512(v, _mm512_set1_epi32(0xFFFF)),
        _mm512_slli_epi32::<16>(v),
    )
}

/// Two Q8_K block sums as one i32 (`lo` in the low half): a broadcast `vpmaddwd` operand.
#[inline(always)]
fn sum_pair(lo: i16, hi: i16) -> i32 {
    (lo as u16 as u32 | ((hi as u16 as u32) << 16)) as i32
}

#[inline(always)]
unsafe fn rd16(p: *const u8) -> i32 {
    u16::from_le(unsafe { core::ptr::read_unaligned(p as *const u16) }) as i32
}

#[inline(always)]
unsafe fn rd32(p: *const u8) -> i32 {
    i32::from_le(unsafe { core::ptr::read_unaligned(p as *const i32) })
}

#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma,f16c")]
#[inline]
fn dot512_bw(u: __m512i, s: __m512i) -> __m512i {
    _mm512_madd_epi16(_mm512_maddubs_epi16(u, s), _mm512_set1_epi16(1))
}

#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma,f16c")]
#[inline]
fn dot256_bw(u: __m256i, s: __m256i) -> __m256i {
    _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1))
}

#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma,f16c,avx512vnni")]
#[inline]
fn dot512_vnni(u: __m512i, s: __m512i) -> __m512i {
    _mm512_dpbusd_epi32(_mm512_setzero_si512(), u, s)
}

/// `acc` plus the 4-byte dot products of `u` (unsigned) and `s` (signed), per i32 lane.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma,f16c")]
#[inline]
fn dacc512_bw(acc: __m512i, u: __m512i, s: __m512i) -> __m512i {
    _mm512_add_epi32(acc, dot512_bw(u, s))
}

#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma,f16c,avx512vnni")]
#[inline]
fn dacc512_vnni(acc: __m512i, u: __m512i, s: __m512i) -> __m512i {
    _mm512_dpbusd_epi32(acc, u, s)
}

#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma,f16c,avx512vnni")]
#[inline]
fn dot256_vnni(u: __m256i, s: __m256i) -> __m256i {
    _mm256_dpbusd_epi32(_mm256_setzero_si256(), u, s)
}

/// Two Q4 blocks' 16-byte nibble arrays at `p0`, `p1` → 64 bytes: block 0's low
/// nibbles, its high nibbles, then block 1's.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma,f16c")]
#[inline]
unsafe fn nibbles2(p0: *const u8, p1: *const u8) -> __m512i {
    let q = unsafe { _mm256_loadu2_m128i(p1 as *const __m128i, p0 as *const __m128i) };
    let v = _mm512_inserti64x4::<1>(_mm512_castsi256_si512(q), _mm256_srli_epi16::<4>(q));
    // lanes [q0, q1, q0>>4, q1>>4] -> [q0, q0>>4, q1, q1>>4]
    _mm512_and_si512(_mm512_shuffle_i64x2::<0xD8>(v, v), _mm512_set1_epi8(0x0F))
}

/// 16 bytes of packed nibbles → 32 bytes (low nibbles, then high).
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma,f16c")]
#[inline]
unsafe fn nibbles1(p: *const u8) -> __m256i {
    let q = unsafe { _mm_loadu_si128(p as *const __m128i) };
    _mm256_and_si256(
        _mm256_set_m128i(_mm_srli_epi16::<4>(q), q),
        _mm256_set1_epi8(0x0F),
    )
}

/// The two f16 scales at `p0`, `p1` as `[d0, d1, 0, 0]`.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma,f16c")]
#[inline]
unsafe fn scales2(p0: *const u8, p1: *const u8) -> __m128 {
    let bits = unsafe { rd16(p0) | (rd16(p1) << 16) };
    _mm_cvtph_ps(_mm_cvtsi32_si128(bits))
}

/// `[v[0]; 8] ++ [v[1]; 8]`.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma,f16c")]
#[inline]
fn spread2(v: __m128, second: i32) -> __m512 {
    let idx = _mm512_set_epi32(
        second, second, second, second, second, second, second, second, 0, 0, 0, 0, 0, 0, 0, 0,
    );
    _mm512_permutexvar_ps(idx, _mm512_castps128_ps512(v))
}

/// Two consecutive f32 at `p` as `[p[0], p[1], 0, 0]`.
#[inline(always)]
unsafe fn load2(p: *const f32) -> __m128 {
    unsafe { _mm_castsi128_ps(_mm_loadl_epi64(p as *const __m128i)) }
}

macro_rules! avx512_kernels {
    ($feat:literal, $dot512:ident, $dot256:ident, $dacc512:ident) => {
        use super::*;

        /// Q4_1 weights packed 16 rows to a block (one group of [`super::super::packed`])
        /// · Q8_1 activations: `out[i][j]` = row `j` of the group · activation row `i`.
        ///
        /// Each i32 lane is one weight row: the four 4-byte runs of its low nibbles and of
        /// its high nibbles are multiplied with the activation's matching 4 bytes (broadcast
        /// to every lane), so a block costs 8 byte-dot instructions per activation row for
        /// 16 weight rows and no horizontal sum. Every lane's float operations are the same
        /// whatever `N` is, so a row's result does not depend on the batch it runs in.
        #[target_feature(enable = $feat)]
        pub(in super::super) fn q4_1x16<const N: usize>(
            g: &[u8],
            a: &[Q8Row<'_>; N],
        ) -> [[f32; 16]; N] {
            let nb = g.len() / X16_BLOCK;
            check_q8(nb, a, true);
            let mut acc = [_mm512_setzero_ps(); N];
            let low = _mm512_set1_epi8(0x0F);
            for b in 0..nb {
                // SAFETY: block b < nb of the group and of every activation row (checked).
                unsafe {
                    let p = g.as_ptr().add(b * X16_BLOCK);
                    for l in 0..X16_BLOCK / 64 {
                        _mm_prefetch::<_MM_HINT_T0>(p.wrapping_add(PREFETCH + 64 * l) as *const i8);
                    }
                    let dw = _mm512_cvtph_ps(_mm256_loadu_si256(p as *const _));
                    let mw = _mm512_cvtph_ps(_mm256_loadu_si256(p.add(32) as *const _));
                    let mut lo = [_mm512_setzero_si512(); 4];
                    let mut hi = [_mm512_setzero_si512(); 4];
                    for k in 0..4 {
                        let raw = _mm512_loadu_si512(p.add(64 + 64 * k) as *const _);
                        lo[k] = _mm512_and_si512(raw, low);
                        hi[k] = _mm512_and_si512(_mm512_srli_epi16::<4>(raw), low);
                    }
                    for i in 0..N {
                        let qa = a[i].qs.as_ptr().add(b * QK) as *const u8;
                        let mut s = _mm512_setzero_si512();
                        for k in 0..4 {
                            s = $dacc512(s, lo[k], _mm512_set1_epi32(rd32(qa.add(4 * k))));
                            s = $dacc512(s, hi[k], _mm512_set1_epi32(rd32(qa.add(16 + 4 * k))));
                        }
                        let scale = _mm512_mul_ps(dw, _mm512_set1_ps(*a[i].d.get_unchecked(b)));
                        acc[i] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), scale, acc[i]);
                        acc[i] =
                            _mm512_fmadd_ps(mw, _mm512_set1_ps(*a[i].s.get_unchecked(b)), acc[i]);
                    }
                }
            }
            lanes16(acc)
        }

        /// Q4_0 weights packed 16 rows to a block (one group of [`super::super::packed`])
        /// · Q8_0 activations whose `s[b]` holds `8 · Σ qs` of block `b`, bit for bit the
        /// portable `ggml_vec_dot_q4_0_q8_0` (as `avx2_packed::q4_0x16`, on all sixteen
        /// lanes at once): the unsigned nibbles' byte dots accumulate in i32 by this
        /// module's byte dot, `8 · Σ a` comes off the exact sum, and the float steps are
        /// the portable kernel's (`acc + sumi · (d_w · d_a)`, no fused multiply-add).
        #[target_feature(enable = $feat)]
        pub(in super::super) fn q4_0x16<const N: usize>(
            g: &[u8],
            a: &[Q8Row<'_>; N],
        ) -> [[f32; 16]; N] {
            let nb = g.len() / X16_BLOCK_Q4_0;
            check_q8(nb, a, true);
            let mut acc = [_mm512_setzero_ps(); N];
            let low = _mm512_set1_epi8(0x0F);
            for b in 0..nb {
                // SAFETY: block b < nb of the group and of every activation row (checked).
                unsafe {
                    let p = g.as_ptr().add(b * X16_BLOCK_Q4_0);
                    for l in 0..X16_BLOCK_Q4_0.div_ceil(64) {
                        _mm_prefetch::<_MM_HINT_T0>(p.wrapping_add(PREFETCH + 64 * l) as *const i8);
                    }
                    let dw = _mm512_cvtph_ps(_mm256_loadu_si256(p as *const _));
                    let mut lo = [_mm512_setzero_si512(); 4];
                    let mut hi = [_mm512_setzero_si512(); 4];
                    for k in 0..4 {
                        let raw = _mm512_loadu_si512(p.add(32 + 64 * k) as *const _);
                        lo[k] = _mm512_and_si512(raw, low);
                        hi[k] = _mm512_and_si512(_mm512_srli_epi16::<4>(raw), low);
                    }
                    for i in 0..N {
                        let qa = a[i].qs.as_ptr().add(b * QK) as *const u8;
                        let mut s = _mm512_setzero_si512();
                        for k in 0..4 {
                            s = $dacc512(s, lo[k], _mm512_set1_epi32(rd32(qa.add(4 * k))));
                            s = $dacc512(s, hi[k], _mm512_set1_epi32(rd32(qa.add(16 + 4 * k))));
                        }
                        let dot = _mm512_sub_ps(
                            _mm512_cvtepi32_ps(s),
                            _mm512_set1_ps(*a[i].s.get_unchecked(b)),
                        );
                        let scale = _mm512_mul_ps(dw, _mm512_set1_ps(*a[i].d.get_unchecked(b)));
                        acc[i] = _mm512_add_ps(acc[i], _mm512_mul_ps(dot, scale));
                    }
                }
            }
            lanes16(acc)
        }

        /// Q5_0 weights packed 16 rows to a block (one group of [`super::super::packed`],
        /// fifth bits re-laid) · Q8_0 activations whose `s[b]` holds `16 · Σ qs` of block
        /// `b`: the AVX2 kernel's steps (`avx2_packed::q5_0x16`) on all sixteen lanes at
        /// once, the unsigned quants' byte dots accumulated in i32 by this module's byte dot.
        /// The block dot is exact and each lane's float steps are the AVX2 kernel's, so
        /// the two are equal bit for bit.
        #[target_feature(enable = $feat)]
        pub(in super::super) fn q5_0x16<const N: usize>(
            g: &[u8],
            a: &[Q8Row<'_>; N],
        ) -> [[f32; 16]; N] {
            let nb = g.len() / X16_BLOCK_Q5_0;
            check_q8(nb, a, true);
            let mut acc = [_mm512_setzero_ps(); N];
            let low = _mm512_set1_epi8(0x0F);
            let bit4 = _mm512_set1_epi8(0x10);
            for b in 0..nb {
                // SAFETY: block b < nb of the group and of every activation row (checked).
                unsafe {
                    let p = g.as_ptr().add(b * X16_BLOCK_Q5_0);
                    for l in 0..X16_BLOCK_Q5_0.div_ceil(64) {
                        _mm_prefetch::<_MM_HINT_T0>(p.wrapping_add(PREFETCH + 64 * l) as *const i8);
                    }
                    let dw = _mm512_cvtph_ps(_mm256_loadu_si256(p as *const _));
                    let qh = _mm512_loadu_si512(p.add(32) as *const _);
                    // Bit 8t + k (low runs) and 8t + 4 + k (high runs) moved to bit 4 of byte t.
                    let lo_bits = [
                        _mm512_slli_epi32::<4>(qh),
                        _mm512_slli_epi32::<3>(qh),
                        _mm512_slli_epi32::<2>(qh),
                        _mm512_slli_epi32::<1>(qh),
                    ];
                    let hi_bits = [
                        qh,
                        _mm512_srli_epi32::<1>(qh),
                        _mm512_srli_epi32::<2>(qh),
                        _mm512_srli_epi32::<3>(qh),
                    ];
                    let mut lo = [_mm512_setzero_si512(); 4];
                    let mut hi = [_mm512_setzero_si512(); 4];
                    for k in 0..4 {
                        let raw = _mm512_loadu_si512(p.add(96 + 64 * k) as *const _);
                        lo[k] = _mm512_or_si512(
                            _mm512_and_si512(raw, low),
                            _mm512_and_si512(lo_bits[k], bit4),
                        );
                        hi[k] = _mm512_or_si512(
                            _mm512_and_si512(_mm512_srli_epi16::<4>(raw), low),
                            _mm512_and_si512(hi_bits[k], bit4),
                        );
                    }
                    for i in 0..N {
                        let qa = a[i].qs.as_ptr().add(b * QK) as *const u8;
                        let mut s = _mm512_setzero_si512();
                        for k in 0..4 {
                            s = $dacc512(s, lo[k], _mm512_set1_epi32(rd32(qa.add(4 * k))));
                            s = $dacc512(s, hi[k], _mm512_set1_epi32(rd32(qa.add(16 + 4 * k))));
                        }
                        let dot = _mm512_sub_ps(
                            _mm512_cvtepi32_ps(s),
                            _mm512_set1_ps(*a[i].s.get_unchecked(b)),
                        );
                        let scale = _mm512_mul_ps(dw, _mm512_set1_ps(*a[i].d.get_unchecked(b)));
                        acc[i] = _mm512_fmadd_ps(dot, scale, acc[i]);
                    }
                }
            }
            lanes16(acc)
        }

        /// Q4_K weights packed 16 rows to a super-block (one group of
        /// [`super::super::packed`]) · Q8_K activations, bit for bit the portable
        /// `ggml_vec_dot_q4_K_q8_K` (as `avx2_packed::q4_kx16`, on all sixteen lanes at once):
        /// per sub-block, the 8 byte dots of this module accumulate `Σ q · a` in i32 and one
        /// `vpmulld` scales it by the lane's scale; the minimums take one `vpmaddwd` per
        /// sub-block. The sums are exact and the float steps are `kquant_acc`'s.
        #[target_feature(enable = $feat)]
        pub(in super::super) fn q4_kx16<const N: usize>(
            g: &[u8],
            a: &[Q8Row<'_>; N],
        ) -> [[f32; 16]; N] {
            let nb = g.len() / X16_BLOCK_Q4K;
            check_q8k(nb, a);
            let mut acc = [_mm512_setzero_ps(); N];
            let low = _mm512_set1_epi8(0x0F);
            for b in 0..nb {
                // SAFETY: super-block b < nb of the group and of every activation row
                // (checked); every read stays inside the block.
                unsafe {
                    let p = g.as_ptr().add(b * X16_BLOCK_Q4K);
                    for l in 0..X16_BLOCK_Q4K.div_ceil(64) {
                        _mm_prefetch::<_MM_HINT_T0>(p.wrapping_add(PREFETCH + 64 * l) as *const i8);
                    }
                    let dw = _mm512_cvtph_ps(_mm256_loadu_si256(p as *const _));
                    let mw = _mm512_cvtph_ps(_mm256_loadu_si256(p.add(32) as *const _));
                    let mut sumi = [_mm512_setzero_si512(); N];
                    let mut summ = [_mm512_setzero_si512(); N];
                    for s in 0..8 {
                        let sc =
                            _mm512_cvtepu8_epi32(_mm_loadu_si128(p.add(64 + 16 * s) as *const _));
                        let mn = lane_pairs512(_mm512_cvtepu8_epi32(_mm_loadu_si128(
                            p.add(192 + 16 * s) as *const _,
                        )));
                        let mut lo = [_mm512_setzero_si512(); 4];
                        let mut hi = [_mm512_setzero_si512(); 4];
                        for k in 0..4 {
                            let raw = _mm512_loadu_si512(p.add(320 + 256 * s + 64 * k) as *const _);
                            lo[k] = _mm512_and_si512(raw, low);
                            hi[k] = _mm512_and_si512(_mm512_srli_epi16::<4>(raw), low);
                        }
                        for i in 0..N {
                            let qa = a[i].qs.as_ptr().add(b * QK_K + 32 * s) as *const u8;
                            let mut d = _mm512_setzero_si512();
                            for k in 0..4 {
                                d = $dacc512(d, lo[k], _mm512_set1_epi32(rd32(qa.add(4 * k))));
                                d = $dacc512(d, hi[k], _mm512_set1_epi32(rd32(qa.add(16 + 4 * k))));
                            }
                            sumi[i] = _mm512_add_epi32(sumi[i], _mm512_mullo_epi32(d, sc));
                            let bs = a[i].bsums.get_unchecked(b * 16 + 2 * s..b * 16 + 2 * s + 2);
                            let pair = _mm512_set1_epi32(sum_pair(bs[0], bs[1]));
                            summ[i] = _mm512_add_epi32(summ[i], _mm512_madd_epi16(mn, pair));
                        }
                    }
                    for i in 0..N {
                        let da = _mm512_set1_ps(*a[i].d.get_unchecked(b));
                        let t = _mm512_mul_ps(_mm512_mul_ps(dw, da), _mm512_cvtepi32_ps(sumi[i]));
                        let m = _mm512_mul_ps(_mm512_mul_ps(mw, da), _mm512_cvtepi32_ps(summ[i]));
                        acc[i] = _mm512_sub_ps(_mm512_add_ps(acc[i], t), m);
                    }
                }
            }
            lanes16(acc)
        }

        /// Q5_K weights packed 16 rows to a super-block (one group of
        /// [`super::super::packed`]) · Q8_K activations, bit for bit the portable
        /// `ggml_vec_dot_q5_K_q8_K` (as `avx2_packed::q5_kx16`, on all sixteen lanes at
        /// once): `q4_kx16` with each nibble's fifth bit put at bit 4 (one
        /// shift and one mask of the re-laid bits per 4-byte run); this module's byte dot
        /// accumulates in i32, so the larger quants cannot saturate.
        #[target_feature(enable = $feat)]
        pub(in super::super) fn q5_kx16<const N: usize>(
            g: &[u8],
            a: &[Q8Row<'_>; N],
        ) -> [[f32; 16]; N] {
            let nb = g.len() / X16_BLOCK_Q5K;
            check_q8k(nb, a);
            let mut acc = [_mm512_setzero_ps(); N];
            let low = _mm512_set1_epi8(0x0F);
            let bit4 = _mm512_set1_epi8(0x10);
            for b in 0..nb {
                // SAFETY: super-block b < nb of the group and of every activation row
                // (checked); every read stays inside the block.
                unsafe {
                    let p = g.as_ptr().add(b * X16_BLOCK_Q5K);
                    for l in 0..X16_BLOCK_Q5K.div_ceil(64) {
                        _mm_prefetch::<_MM_HINT_T0>(p.wrapping_add(PREFETCH + 64 * l) as *const i8);
                    }
                    let dw = _mm512_cvtph_ps(_mm256_loadu_si256(p as *const _));
                    let mw = _mm512_cvtph_ps(_mm256_loadu_si256(p.add(32) as *const _));
                    let mut sumi = [_mm512_setzero_si512(); N];
                    let mut summ = [_mm512_setzero_si512(); N];
                    for s in 0..8 {
                        let sc =
                            _mm512_cvtepu8_epi32(_mm_loadu_si128(p.add(64 + 16 * s) as *const _));
                        let mn = lane_pairs512(_mm512_cvtepu8_epi32(_mm_loadu_si128(
                            p.add(192 + 16 * s) as *const _,
                        )));
                        let qh = _mm512_loadu_si512(p.add(2368 + 64 * s) as *const _);
                        // Bit 8t + k (low runs) and 8t + 4 + k (high runs) moved to bit 4
                        // of byte t.
                        let lo_bits = [
                            _mm512_slli_epi32::<4>(qh),
                            _mm512_slli_epi32::<3>(qh),
                            _mm512_slli_epi32::<2>(qh),
                            _mm512_slli_epi32::<1>(qh),
                        ];
                        let hi_bits = [
                            qh,
                            _mm512_srli_epi32::<1>(qh),
                            _mm512_srli_epi32::<2>(qh),
                            _mm512_srli_epi32::<3>(qh),
                        ];
                        let mut lo = [_mm512_setzero_si512(); 4];
                        let mut hi = [_mm512_setzero_si512(); 4];
                        for k in 0..4 {
                            let raw = _mm512_loadu_si512(p.add(320 + 256 * s + 64 * k) as *const _);
                            lo[k] = _mm512_or_si512(
                                _mm512_and_si512(raw, low),
                                _mm512_and_si512(lo_bits[k], bit4),
                            );
                            hi[k] = _mm512_or_si512(
                                _mm512_and_si512(_mm512_srli_epi16::<4>(raw), low),
                                _mm512_and_si512(hi_bits[k], bit4),
                            );
                        }
                        for i in 0..N {
                            let qa = a[i].qs.as_ptr().add(b * QK_K + 32 * s) as *const u8;
                            let mut d = _mm512_setzero_si512();
                            for k in 0..4 {
                                d = $dacc512(d, lo[k], _mm512_set1_epi32(rd32(qa.add(4 * k))));
                                d = $dacc512(d, hi[k], _mm512_set1_epi32(rd32(qa.add(16 + 4 * k))));
                            }
                            sumi[i] = _mm512_add_epi32(sumi[i], _mm512_mullo_epi32(d, sc));
                            let bs = a[i].bsums.get_unchecked(b * 16 + 2 * s..b * 16 + 2 * s + 2);
                            let pair = _mm512_set1_epi32(sum_pair(bs[0], bs[1]));
                            summ[i] = _mm512_add_epi32(summ[i], _mm512_madd_epi16(mn, pair));
                        }
                    }
                    for i in 0..N {
                        let da = _mm512_set1_ps(*a[i].d.get_unchecked(b));
                        let t = _mm512_mul_ps(_mm512_mul_ps(dw, da), _mm512_cvtepi32_ps(sumi[i]));
                        let m = _mm512_mul_ps(_mm512_mul_ps(mw, da), _mm512_cvtepi32_ps(summ[i]));
                        acc[i] = _mm512_sub_ps(_mm512_add_ps(acc[i], t), m);
                    }
                }
            }
            lanes16(acc)
        }

        /// Q6_K weights packed 16 rows to a super-block (one group of
        /// [`super::super::packed`]) · Q8_K activations, bit for bit the portable
        /// `ggml_vec_dot_q6_K_q8_K` (as `avx2_packed::q6_kx16`, on all sixteen lanes at once):
        /// the unsigned quants' (`q + 32`) byte dots of a 16-element sub-block accumulate in
        /// i32 and one `vpmulld` scales them by the lane's signed scale; `32 · Σ_s sc_s ·
        /// bsums_s` comes off the exact sum (one `vpmaddwd` per two sub-blocks). Then
        /// `acc + (d · d_a) · sumi` as the portable kernel.
        #[target_feature(enable = $feat)]
        pub(in super::super) fn q6_kx16<const N: usize>(
            g: &[u8],
            a: &[Q8Row<'_>; N],
        ) -> [[f32; 16]; N] {
            let nb = g.len() / X16_BLOCK_Q6K;
            check_q8k(nb, a);
            let mut acc = [_mm512_setzero_ps(); N];
            let low = _mm512_set1_epi8(0x0F);
            let top = _mm512_set1_epi8(0x30);
            for b in 0..nb {
                // SAFETY: as in `q4_kx16`.
                unsafe {
                    let p = g.as_ptr().add(b * X16_BLOCK_Q6K);
                    for l in 0..X16_BLOCK_Q6K.div_ceil(64) {
                        _mm_prefetch::<_MM_HINT_T0>(p.wrapping_add(PREFETCH + 64 * l) as *const i8);
                    }
                    let dw = _mm512_cvtph_ps(_mm256_loadu_si256(p as *const _));
                    let mut sumi = [_mm512_setzero_si512(); N];
                    let mut offs = [_mm512_setzero_si512(); N];
                    for u in 0..8 {
                        let q = p.add(288 + 384 * u);
                        let sc_lo =
                            _mm512_cvtepi8_epi32(_mm_loadu_si128(p.add(32 + 32 * u) as *const _));
                        let sc_hi =
                            _mm512_cvtepi8_epi32(_mm_loadu_si128(p.add(48 + 32 * u) as *const _));
                        // The two sub-blocks' scales in one lane (2u low, 2u + 1 high), for
                        // the offset's sums.
                        let sc_both = _mm512_or_si512(
                            _mm512_and_si512(sc_lo, _mm512_set1_epi32(0xFFFF)),
                            _mm512_slli_epi32::<16>(sc_hi),
                        );
                        let mut lo = [_mm512_setzero_si512(); 4];
                        let mut hi = [_mm512_setzero_si512(); 4];
                        for k in 0..4 {
                            let raw = _mm512_loadu_si512(q.add(64 * k) as *const _);
                            let hb = _mm512_loadu_si512(q.add(256 + 64 * (k / 2)) as *const _);
                            let (hb_lo, hb_hi) = if k % 2 == 0 {
                                (hb, _mm512_srli_epi16::<2>(hb))
                            } else {
                                (_mm512_slli_epi16::<4>(hb), _mm512_slli_epi16::<2>(hb))
                            };
                            lo[k] = _mm512_or_si512(
                                _mm512_and_si512(raw, low),
                                _mm512_and_si512(hb_lo, top),
                            );
                            hi[k] = _mm512_or_si512(
                                _mm512_and_si512(_mm512_srli_epi16::<4>(raw), low),
                                _mm512_and_si512(hb_hi, top),
                            );
                        }
                        for i in 0..N {
                            let qa = a[i].qs.as_ptr().add(b * QK_K + 32 * u) as *const u8;
                            let (mut dl, mut dh) = (_mm512_setzero_si512(), _mm512_setzero_si512());
                            for k in 0..4 {
                                dl = $dacc512(dl, lo[k], _mm512_set1_epi32(rd32(qa.add(4 * k))));
                                dh = $dacc512(
                                    dh,
                                    hi[k],
                                    _mm512_set1_epi32(rd32(qa.add(16 + 4 * k))),
                                );
                            }
                            let both = _mm512_add_epi32(
                                _mm512_mullo_epi32(dl, sc_lo),
                                _mm512_mullo_epi32(dh, sc_hi),
                            );
                            sumi[i] = _mm512_add_epi32(sumi[i], both);
                            let bs = a[i].bsums.get_unchecked(b * 16 + 2 * u..b * 16 + 2 * u + 2);
                            let pair = _mm512_set1_epi32(sum_pair(bs[0], bs[1]));
                            offs[i] = _mm512_add_epi32(offs[i], _mm512_madd_epi16(sc_both, pair));
                        }
                    }
                    for i in 0..N {
                        let da = _mm512_set1_ps(*a[i].d.get_unchecked(b));
                        let dot = _mm512_sub_epi32(sumi[i], _mm512_slli_epi32::<5>(offs[i]));
                        let t = _mm512_mul_ps(_mm512_mul_ps(dw, da), _mm512_cvtepi32_ps(dot));
                        acc[i] = _mm512_add_ps(acc[i], t);
                    }
                }
            }
            lanes16(acc)
        }

        /// |w| and the activation with w's sign, for a signed × signed byte dot.
        #[target_feature(enable = $feat)]
        #[inline]
        fn signed512(w: __m512i, a: __m512i) -> __m512i {
            let neg = _mm512_movepi8_mask(w);
            $dot512(
                _mm512_abs_epi8(w),
                _mm512_mask_sub_epi8(a, neg, _mm512_setzero_si512(), a),
            )
        }

        #[target_feature(enable = $feat)]
        #[inline]
        fn signed256(w: __m256i, a: __m256i) -> __m256i {
            $dot256(_mm256_sign_epi8(w, w), _mm256_sign_epi8(a, w))
        }

        /// Q4_1 weights (20-byte blocks) · Q8_1 activations.
        #[target_feature(enable = $feat)]
        pub(in super::super) fn q4_1<const N: usize>(w: &[u8], a: &[Q8Row<'_>; N]) -> [f32; N] {
            let nb = w.len() / 20;
            check_q8(nb, a, true);
            let mut acc = [_mm512_setzero_ps(); N];
            let mut accm = [_mm_setzero_ps(); N];
            let mut tail = [0.0f32; N];
            for b in (0..nb / 2 * 2).step_by(2) {
                // SAFETY: blocks b, b+1 < nb exist in the weight row and every activation row.
                unsafe {
                    let p = w.as_ptr().add(b * 20);
                    _mm_prefetch::<_MM_HINT_T0>(p.wrapping_add(PREFETCH) as *const i8);
                    let q = nibbles2(p.add(4), p.add(24));
                    // [d0, m0, d1, m1]
                    let dm = _mm_cvtph_ps(_mm_insert_epi32::<1>(
                        _mm_cvtsi32_si128(rd32(p)),
                        rd32(p.add(20)),
                    ));
                    for i in 0..N {
                        let av = _mm512_loadu_si512(a[i].qs.as_ptr().add(b * QK) as *const _);
                        // [da0, s0, da1, s1]
                        let ds = _mm_unpacklo_ps(
                            load2(a[i].d.as_ptr().add(b)),
                            load2(a[i].s.as_ptr().add(b)),
                        );
                        let prod = _mm_mul_ps(dm, ds);
                        let scale = spread2(prod, 2);
                        acc[i] = _mm512_fmadd_ps(_mm512_cvtepi32_ps($dot512(q, av)), scale, acc[i]);
                        accm[i] = _mm_add_ps(accm[i], prod);
                    }
                }
            }
            if nb % 2 == 1 {
                let b = nb - 1;
                // SAFETY: block b < nb (checked lengths).
                unsafe {
                    let p = w.as_ptr().add(b * 20);
                    let (dw, mw) = (avx2::h2f(p), avx2::h2f(p.add(2)));
                    let q = nibbles1(p.add(4));
                    for i in 0..N {
                        let av = _mm256_loadu_si256(a[i].qs.as_ptr().add(b * QK) as *const _);
                        let s = avx2::hsum(_mm256_cvtepi32_ps($dot256(q, av)));
                        tail[i] = s * (dw * a[i].d[b]) + mw * a[i].s[b];
                    }
                }
            }
            core::array::from_fn(|i| {
                let m = _mm_movehdup_ps(accm[i]);
                _mm512_reduce_add_ps(acc[i])
                    + (_mm_cvtss_f32(m) + _mm_cvtss_f32(_mm_movehl_ps(m, m)))
                    + tail[i]
            })
        }

        /// Q4_0 weights (18-byte blocks) · Q8_0 activations.
        #[target_feature(enable = $feat)]
        pub(in super::super) fn q4_0<const N: usize>(w: &[u8], a: &[Q8Row<'_>; N]) -> [f32; N] {
            let nb = w.len() / 18;
            check_q8(nb, a, false);
            let mut acc = [_mm512_setzero_ps(); N];
            let mut tail = [0.0f32; N];
            for b in (0..nb / 2 * 2).step_by(2) {
                // SAFETY: as in `q4_1`.
                unsafe {
                    let p = w.as_ptr().add(b * 18);
                    _mm_prefetch::<_MM_HINT_T0>(p.wrapping_add(PREFETCH) as *const i8);
                    let q = _mm512_sub_epi8(nibbles2(p.add(2), p.add(20)), _mm512_set1_epi8(8));
                    let dw = scales2(p, p.add(18));
                    for i in 0..N {
                        let av = _mm512_loadu_si512(a[i].qs.as_ptr().add(b * QK) as *const _);
                        let scale = spread2(_mm_mul_ps(dw, load2(a[i].d.as_ptr().add(b))), 1);
                        acc[i] =
                            _mm512_fmadd_ps(_mm512_cvtepi32_ps(signed512(q, av)), scale, acc[i]);
                    }
                }
            }
            if nb % 2 == 1 {
                let b = nb - 1;
                // SAFETY: as in `q4_1`.
                unsafe {
                    let p = w.as_ptr().add(b * 18);
                    let dw = avx2::h2f(p);
                    let q = _mm256_sub_epi8(nibbles1(p.add(2)), _mm256_set1_epi8(8));
                    for i in 0..N {
                        let av = _mm256_loadu_si256(a[i].qs.as_ptr().add(b * QK) as *const _);
                        tail[i] =
                            avx2::hsum(_mm256_cvtepi32_ps(signed256(q, av))) * (dw * a[i].d[b]);
                    }
                }
            }
            core::array::from_fn(|i| _mm512_reduce_add_ps(acc[i]) + tail[i])
        }

        /// Q8_0 (`STRIDE` 34) or Q8_1 (`STRIDE` 36) weights · Q8_0 activations.
        #[target_feature(enable = $feat)]
        pub(in super::super) fn q8<const N: usize, const STRIDE: usize>(
            w: &[u8],
            a: &[Q8Row<'_>; N],
        ) -> [f32; N] {
            let nb = w.len() / STRIDE;
            check_q8(nb, a, false);
            let mut acc = [_mm512_setzero_ps(); N];
            let mut tail = [0.0f32; N];
            let off = STRIDE - QK;
            for b in (0..nb / 2 * 2).step_by(2) {
                // SAFETY: as in `q4_1`.
                unsafe {
                    let p = w.as_ptr().add(b * STRIDE);
                    _mm_prefetch::<_MM_HINT_T0>(p.wrapping_add(PREFETCH) as *const i8);
                    _mm_prefetch::<_MM_HINT_T0>(p.wrapping_add(PREFETCH + 64) as *const i8);
                    let q = _mm512_inserti64x4::<1>(
                        _mm512_castsi256_si512(_mm256_loadu_si256(p.add(off) as *const _)),
                        _mm256_loadu_si256(p.add(STRIDE + off) as *const _),
                    );
                    let dw = scales2(p, p.add(STRIDE));
                    for i in 0..N {
                        let av = _mm512_loadu_si512(a[i].qs.as_ptr().add(b * QK) as *const _);
                        let scale = spread2(_mm_mul_ps(dw, load2(a[i].d.as_ptr().add(b))), 1);
                        acc[i] =
                            _mm512_fmadd_ps(_mm512_cvtepi32_ps(signed512(q, av)), scale, acc[i]);
                    }
                }
            }
            if nb % 2 == 1 {
                let b = nb - 1;
                // SAFETY: as in `q4_1`.
                unsafe {
                    let p = w.as_ptr().add(b * STRIDE);
                    let dw = avx2::h2f(p);
                    let q = _mm256_loadu_si256(p.add(off) as *const _);
                    for i in 0..N {
                        let av = _mm256_loadu_si256(a[i].qs.as_ptr().add(b * QK) as *const _);
                        tail[i] =
                            avx2::hsum(_mm256_cvtepi32_ps(signed256(q, av))) * (dw * a[i].d[b]);
                    }
                }
            }
            core::array::from_fn(|i| _mm512_reduce_add_ps(acc[i]) + tail[i])
        }

        /// F32 weights · f32 activations.
        #[target_feature(enable = $feat)]
        pub(in super::super) fn f32<const N: usize>(w: &[u8], x: &[&[f32]; N]) -> [f32; N] {
            float_body!(w, x, 4, load16_f32)
        }

        /// F16 weights · f32 activations.
        #[target_feature(enable = $feat)]
        pub(in super::super) fn f16<const N: usize>(w: &[u8], x: &[&[f32]; N]) -> [f32; N] {
            float_body!(w, x, 2, load16_f16)
        }

        /// BF16 weights · f32 activations.
        #[target_feature(enable = $feat)]
        pub(in super::super) fn bf16<const N: usize>(w: &[u8], x: &[&[f32]; N]) -> [f32; N] {
            float_body!(w, x, 2, load16_bf16)
        }
    };
}

/// Up to 16 F32 weights at `p` (lanes outside `m` are zero and not read).
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma,f16c")]
#[inline]
unsafe fn load16_f32(p: *const u8, m: __mmask16) -> __m512 {
    unsafe { _mm512_maskz_loadu_ps(m, p as *const f32) }
}

/// Up to 16 F16 weights at `p`, widened.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma,f16c")]
#[inline]
unsafe fn load16_f16(p: *const u8, m: __mmask16) -> __m512 {
    _mm512_cvtph_ps(unsafe { _mm256_maskz_loadu_epi16(m, p as *const i16) })
}

/// Up to 16 BF16 weights at `p`, widened (bf16 is the top half of an f32).
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma,f16c")]
#[inline]
unsafe fn load16_bf16(p: *const u8, m: __mmask16) -> __m512 {
    let h = unsafe { _mm256_maskz_loadu_epi16(m, p as *const i16) };
    _mm512_castsi512_ps(_mm512_slli_epi32::<16>(_mm512_cvtepu16_epi32(h)))
}

/// Body of a float kernel: `$load(ptr, mask)` widens up to 16 elements of `$width` bytes.
macro_rules! float_body {
    ($w:ident, $x:ident, $width:expr, $load:expr) => {{
        let n = $w.len() / $width;
        for r in $x {
            assert!(r.len() >= n, "activation shorter than weight row");
        }
        let mut acc = [[_mm512_setzero_ps(); 2]; N];
        let n32 = n / 32 * 32;
        let all: __mmask16 = 0xFFFF;
        for j in (0..n32).step_by(32) {
            // SAFETY: j + 32 <= n elements in the weight row and every activation row.
            unsafe {
                let w0 = $load($w.as_ptr().add(j * $width), all);
                let w1 = $load($w.as_ptr().add((j + 16) * $width), all);
                for i in 0..N {
                    let xp = $x[i].as_ptr().add(j);
                    acc[i][0] = _mm512_fmadd_ps(w0, _mm512_loadu_ps(xp), acc[i][0]);
                    acc[i][1] = _mm512_fmadd_ps(w1, _mm512_loadu_ps(xp.add(16)), acc[i][1]);
                }
            }
        }
        for j in (n32..n).step_by(16) {
            let m: __mmask16 = ((1u32 << (n - j).min(16)) - 1) as u16;
            // SAFETY: masked loads touch only elements j..min(j+16, n), all in bounds.
            unsafe {
                let wv = $load($w.as_ptr().add(j * $width), m);
                for i in 0..N {
                    let xv = _mm512_maskz_loadu_ps(m, $x[i].as_ptr().add(j));
                    acc[i][0] = _mm512_fmadd_ps(wv, xv, acc[i][0]);
                }
            }
        }
        core::array::from_fn(|i| _mm512_reduce_add_ps(_mm512_add_ps(acc[i][0], acc[i][1])))
    }};
}

/// Kernels multiplying bytes with AVX-512 BW (`vpmaddubsw` + `vpmaddwd`).
pub(super) mod bw {
    avx512_kernels!(
        "avx512f,avx512bw,avx512vl,avx2,fma,f16c",
        dot512_bw,
        dot256_bw,
        dacc512_bw
    );
}

/// Kernels multiplying bytes with AVX-512 VNNI (`vpdpbusd`).
pub(super) mod vnni {
    avx512_kernels!(
        "avx512f,avx512bw,avx512vl,avx2,fma,f16c,avx512vnni",
        dot512_vnni,
        dot256_vnni,
        dacc512_vnni
    );

    /// Q8_0 weights packed 16 rows to a block, stored offset by 128 as unsigned bytes
    /// (one group of [`super::super::packed`]) · Q8_0 activations whose `s[b]` holds
    /// `128 · Σ qs` of block `b`: `out[i][j]` = row `j` of the group · activation row
    /// `i`. The byte dot of `w + 128` with `a` minus `128 · Σ a` is the signed dot,
    /// exactly (integers below 2^24); per lane as in [`q4_1x16`](super::vnni::q4_1x16). VNNI only:
    /// `vpmaddubsw` would saturate its 16-bit pair sums.
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma,f16c,avx512vnni")]
    pub(in super::super) fn q8_0x16<const N: usize>(
        g: &[u8],
        a: &[Q8Row<'_>; N],
    ) -> [[f32; 16]; N] {
        let nb = g.len() / X16_BLOCK_Q8_0;
        check_q8(nb, a, true);
        let mut acc = [_mm512_setzero_ps(); N];
        for b in 0..nb {
            // SAFETY: block b < nb of the group and of every activation row (checked).
            unsafe {
                let p = g.as_ptr().add(b * X16_BLOCK_Q8_0);
                for l in 0..X16_BLOCK_Q8_0 / 64 {
                    _mm_prefetch::<_MM_HINT_T0>(p.wrapping_add(PREFETCH + 64 * l) as *const i8);
                }
                let dw = _mm512_cvtph_ps(_mm256_loadu_si256(p as *const _));
                let mut q = [_mm512_setzero_si512(); 8];
                for (k, v) in q.iter_mut().enumerate() {
                    *v = _mm512_loadu_si512(p.add(32 + 64 * k) as *const _);
                }
                for i in 0..N {
                    let qa = a[i].qs.as_ptr().add(b * QK) as *const u8;
                    let mut s = _mm512_setzero_si512();
                    for (k, v) in q.iter().enumerate() {
                        s = dacc512_vnni(s, *v, _mm512_set1_epi32(rd32(qa.add(4 * k))));
                    }
                    let dot = _mm512_sub_ps(
                        _mm512_cvtepi32_ps(s),
                        _mm512_set1_ps(*a[i].s.get_unchecked(b)),
                    );
                    let scale = _mm512_mul_ps(dw, _mm512_set1_ps(*a[i].d.get_unchecked(b)));
                    acc[i] = _mm512_fmadd_ps(dot, scale, acc[i]);
                }
            }
        }
        lanes16(acc)
    }
}
