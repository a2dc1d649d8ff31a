//! The AVX-512 path of the activation quantizer: 32-value blocks to 8 bits, bit for bit as the portable [`super::quantize_q8_block`].

#[cfg(target_arch = "x86_64")]
use std::arch::x86_64::*;

/// `x` (whole blocks of 32) quantized as [`super::quantize_q8_block`] quantizes each block:
/// the quants into `qs` (`x.len()`), the unrounded scale `max|x| / 127` into `d[b]` and the
/// sum of the block's quants into `sums[b]` (`x.len() / 32` each).
///
/// The same operations in the same order on every element as the portable code: one
/// product `x · (1 / d)`, rounding half away from zero by adding and subtracting 2^23
/// (with the tie moved up), a saturating cast to `i8`. Only a NaN in `x` can give another
/// result (the maximum of a block with a NaN is the portable code's, the quants differ).
///
/// # Safety
/// The CPU must support AVX-512F and AVX-512BW; `qs.len() == x.len()`, `d.len()` and
/// `sums.len()` at least `x.len() / 32`, `x.len()` a multiple of 32.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw")]
pub(super) unsafe fn quantize_blocks(x: &[f32], qs: &mut [i8], d: &mut [f32], sums: &mut [i32]) {
    debug_assert!(x.len().is_multiple_of(32) && qs.len() == x.len());
    let nb = x.len() / 32;
    debug_assert!(d.len() >= nb && sums.len() >= nb);
    let two23 = _mm512_set1_ps(8_388_608.0);
    let half = _mm512_set1_ps(0.5);
    let one = _mm512_set1_ps(1.0);
    let sign = _mm512_set1_epi32(i32::MIN);
    // `v` rounded half away from zero, as `super::round_half_away` per lane.
    let round = |v: __m512| -> __m512 {
        let a = _mm512_abs_ps(v);
        let ne = _mm512_sub_ps(_mm512_add_ps(a, two23), two23);
        let tie = _mm512_cmp_ps_mask::<_CMP_EQ_OQ>(_mm512_sub_ps(a, ne), half);
        let r = _mm512_mask_add_ps(ne, tie, ne, one);
        let signed = _mm512_castsi512_ps(_mm512_or_si512(
            _mm512_castps_si512(r),
            _mm512_and_si512(_mm512_castps_si512(v), sign),
        ));
        let small = _mm512_cmp_ps_mask::<_CMP_LT_OQ>(a, two23);
        _mm512_mask_blend_ps(small, v, signed)
    };
    for b in 0..nb {
        // SAFETY: block `b < nb` lies inside `x` and `qs`; `d` and `sums` hold `nb`.
        unsafe {
            let p = x.as_ptr().add(32 * b);
            let v0 = _mm512_loadu_ps(p);
            let v1 = _mm512_loadu_ps(p.add(16));
            let amax = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(v0), _mm512_abs_ps(v1)));
            let db = amax / 127.0;
            let id = _mm512_set1_ps(if db != 0.0 { 1.0 / db } else { 0.0 });
            let q0 = _mm512_cvtps_epi32(round(_mm512_mul_ps(v0, id)));
            let q1 = _mm512_cvtps_epi32(round(_mm512_mul_ps(v1, id)));
            let out = qs.as_mut_ptr().add(32 * b);
            _mm_storeu_si128(out as *mut __m128i, _mm512_cvtsepi32_epi8(q0));
            _mm_storeu_si128(out.add(16) as *mut __m128i, _mm512_cvtsepi32_epi8(q1));
            *d.get_unchecked_mut(b) = db;
            *sums.get_unchecked_mut(b) = _mm512_reduce_add_epi32(_mm512_add_epi32(q0, q1));
        }
    }
}
