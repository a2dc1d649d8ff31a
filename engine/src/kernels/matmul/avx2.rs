//! AVX2 + FMA + F16C row-dot kernels for the matrix products (x86-64, chosen at run time).
//!
//! Every function takes one weight row and `N` activation rows and returns the `N` dot
//! products. The caller must have checked that the CPU supports AVX2, FMA and F16C
//! ([`crate::kernels::Isa::Avx2`]); lengths are checked here with `assert!`. The integer
//! kernels follow ggml's AVX2 `ggml_vec_dot_*` scheme (`maddubs` + `madd`, sign trick for
//! signed × signed).

use crate::quant::{Q8Row, QK};
use core::arch::x86_64::*;

/// How far ahead (bytes) the quantized kernels prefetch the weight stream; rows are
/// contiguous, so this runs on into the next row, and past the end of the matrix: the
/// address is formed with `wrapping_add` (no in-bounds promise) and a prefetch never
/// faults.
const PREFETCH: usize = 2048;

/// Horizontal sum of 8 lanes.
#[target_feature(enable = "avx2,fma,f16c")]
#[inline]
pub(super) fn hsum(v: __m256) -> f32 {
    let s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps::<1>(v));
    let s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    let s = _mm_add_ss(s, _mm_movehdup_ps(s));
    _mm_cvtss_f32(s)
}

/// The little-endian f16 at `p` as f32.
#[target_feature(enable = "avx2,fma,f16c")]
#[inline]
pub(super) unsafe fn h2f(p: *const u8) -> f32 {
    let bits = unsafe { core::ptr::read_unaligned(p as *const u16) };
    _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(u16::from_le(bits) as i32)))
}

/// 16 bytes of packed nibbles at `p` → 32 bytes: the low nibbles, then the high nibbles
/// (element order of a Q4 block).
#[target_feature(enable = "avx2,fma,f16c")]
#[inline]
pub(super) unsafe fn nibbles(p: *const u8) -> __m256i {
    let q = unsafe { _mm_loadu_si128(p as *const __m128i) };
    let hi = _mm_srli_epi16::<4>(q);
    _mm256_and_si256(_mm256_set_m128i(hi, q), _mm256_set1_epi8(0x0F))
}

/// Unsigned × signed bytes, summed in groups of four into 8 × i32.
#[target_feature(enable = "avx2,fma,f16c")]
#[inline]
fn dot_u8i8(u: __m256i, s: __m256i) -> __m256i {
    _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1))
}

/// Signed × signed bytes (neither side −128 on the activation), into 8 × i32.
#[target_feature(enable = "avx2,fma,f16c")]
#[inline]
fn dot_i8i8(w: __m256i, a: __m256i) -> __m256i {
    dot_u8i8(_mm256_sign_epi8(w, w), _mm256_sign_epi8(a, w))
}

#[inline(always)]
unsafe fn load32(p: *const i8) -> __m256i {
    unsafe { _mm256_loadu_si256(p as *const __m256i) }
}

/// Panics unless every activation row has `nb` Q8 blocks (and their sums when `sums`).
pub(super) fn check_q8<const N: usize>(nb: usize, a: &[Q8Row<'_>; N], sums: bool) {
    for r in a {
        assert!(
            r.qs.len() >= nb * QK && r.d.len() >= nb,
            "activation shorter than weight row"
        );
        assert!(!sums || r.s.len() >= nb, "activation lacks Q8_1 sums");
    }
}

/// Q4_1 weights (20-byte blocks) · Q8_1 activations.
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) fn q4_1<const N: usize>(w: &[u8], a: &[Q8Row<'_>; N]) -> [f32; N] {
    let nb = w.len() / 20;
    check_q8(nb, a, true);
    let mut acc = [[_mm256_setzero_ps(); 2]; N];
    let mut accm = [[0.0f32; 2]; N];
    for b in 0..nb {
        let k = b & 1;
        // SAFETY: b < nb blocks of the weight row and of every activation row (checked).
        unsafe {
            let p = w.as_ptr().add(b * 20);
            _mm_prefetch::<_MM_HINT_T0>(p.wrapping_add(PREFETCH) as *const i8);
            let (dw, mw) = (h2f(p), h2f(p.add(2)));
            let q = nibbles(p.add(4));
            for i in 0..N {
                let av = load32(a[i].qs.as_ptr().add(b * QK));
                let s = _mm256_cvtepi32_ps(dot_u8i8(q, av));
                let dd = _mm256_set1_ps(dw * *a[i].d.get_unchecked(b));
                acc[i][k] = _mm256_fmadd_ps(s, dd, acc[i][k]);
                accm[i][k] += mw * *a[i].s.get_unchecked(b);
            }
        }
    }
    core::array::from_fn(|i| hsum(_mm256_add_ps(acc[i][0], acc[i][1])) + (accm[i][0] + accm[i][1]))
}

/// Q4_0 weights (18-byte blocks) · Q8_0 activations.
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) fn q4_0<const N: usize>(w: &[u8], a: &[Q8Row<'_>; N]) -> [f32; N] {
    let nb = w.len() / 18;
    check_q8(nb, a, false);
    let mut acc = [[_mm256_setzero_ps(); 2]; N];
    for b in 0..nb {
        let k = b & 1;
        // SAFETY: as in `q4_1`.
        unsafe {
            let p = w.as_ptr().add(b * 18);
            _mm_prefetch::<_MM_HINT_T0>(p.wrapping_add(PREFETCH) as *const i8);
            let dw = h2f(p);
            let q = _mm256_sub_epi8(nibbles(p.add(2)), _mm256_set1_epi8(8));
            for i in 0..N {
                let av = load32(a[i].qs.as_ptr().add(b * QK));
                let s = _mm256_cvtepi32_ps(dot_i8i8(q, av));
                let dd = _mm256_set1_ps(dw * *a[i].d.get_unchecked(b));
                acc[i][k] = _mm256_fmadd_ps(s, dd, acc[i][k]);
            }
        }
    }
    core::array::from_fn(|i| hsum(_mm256_add_ps(acc[i][0], acc[i][1])))
}

/// Q8_0 (`STRIDE` 34) or Q8_1 (`STRIDE` 36) weights · Q8_0 activations; the quants are
/// the last 32 bytes of a block, the f16 scale the first two.
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) fn q8<const N: usize, const STRIDE: usize>(w: &[u8], a: &[Q8Row<'_>; N]) -> [f32; N] {
    let nb = w.len() / STRIDE;
    check_q8(nb, a, false);
    let mut acc = [[_mm256_setzero_ps(); 2]; N];
    for b in 0..nb {
        let k = b & 1;
        // SAFETY: as in `q4_1`.
        unsafe {
            let p = w.as_ptr().add(b * STRIDE);
            _mm_prefetch::<_MM_HINT_T0>(p.wrapping_add(PREFETCH) as *const i8);
            let dw = h2f(p);
            let q = load32(p.add(STRIDE - QK) as *const i8);
            for i in 0..N {
                let av = load32(a[i].qs.as_ptr().add(b * QK));
                let s = _mm256_cvtepi32_ps(dot_i8i8(q, av));
                let dd = _mm256_set1_ps(dw * *a[i].d.get_unchecked(b));
                acc[i][k] = _mm256_fmadd_ps(s, dd, acc[i][k]);
            }
        }
    }
    core::array::from_fn(|i| hsum(_mm256_add_ps(acc[i][0], acc[i][1])))
}

/// Float weights · f32 activations. `WIDTH` is the element size in bytes (4 for F32,
/// 2 for F16/BF16) and `load8` widens 8 elements at a pointer to f32; the tail (length
/// not a multiple of 16) is finished by `scalar`.
macro_rules! float_kernel {
    ($name:ident, $width:expr, $load8:ident, $scalar:expr) => {
        /// Float weight row · `N` f32 activation rows (see the module docs).
        #[target_feature(enable = "avx2,fma,f16c")]
        pub(super) fn $name<const N: usize>(w: &[u8], x: &[&[f32]; N]) -> [f32; N] {
            let n = w.len() / $width;
            for r in x {
                assert!(r.len() >= n, "activation shorter than weight row");
            }
            let mut acc = [[_mm256_setzero_ps(); 2]; N];
            let n16 = n / 16 * 16;
            for j in (0..n16).step_by(16) {
                // SAFETY: j + 16 <= n elements of the weight row and of every activation row.
                unsafe {
                    let w0 = $load8(w.as_ptr().add(j * $width));
                    let w1 = $load8(w.as_ptr().add((j + 8) * $width));
                    for i in 0..N {
                        let xp = x[i].as_ptr().add(j);
                        acc[i][0] = _mm256_fmadd_ps(w0, _mm256_loadu_ps(xp), acc[i][0]);
                        acc[i][1] = _mm256_fmadd_ps(w1, _mm256_loadu_ps(xp.add(8)), acc[i][1]);
                    }
                }
            }
            core::array::from_fn(|i| {
                let mut s = hsum(_mm256_add_ps(acc[i][0], acc[i][1]));
                for j in n16..n {
                    s += $scalar(w, j) * x[i][j];
                }
                s
            })
        }
    };
}

#[target_feature(enable = "avx2,fma,f16c")]
#[inline]
unsafe fn load8_f32(p: *const u8) -> __m256 {
    unsafe { _mm256_loadu_ps(p as *const f32) }
}

#[target_feature(enable = "avx2,fma,f16c")]
#[inline]
unsafe fn load8_f16(p: *const u8) -> __m256 {
    unsafe { _mm256_cvtph_ps(_mm_loadu_si128(p as *const __m128i)) }
}

#[target_feature(enable = "avx2,fma,f16c")]
#[inline]
unsafe fn load8_bf16(p: *const u8) -> __m256 {
    let h = unsafe { _mm_loadu_si128(p as *const __m128i) };
    _mm256_castsi256_ps(_mm256_slli_epi32::<16>(_mm256_cvtepu16_epi32(h)))
}

pub(super) fn scalar_f32(w: &[u8], j: usize) -> f32 {
    f32::from_le_bytes([w[4 * j], w[4 * j + 1], w[4 * j + 2], w[4 * j + 3]])
}

pub(super) fn scalar_f16(w: &[u8], j: usize) -> f32 {
    half::f16::from_bits(u16::from_le_bytes([w[2 * j], w[2 * j + 1]])).to_f32()
}

pub(super) fn scalar_bf16(w: &[u8], j: usize) -> f32 {
    half::bf16::from_bits(u16::from_le_bytes([w[2 * j], w[2 * j + 1]])).to_f32()
}

float_kernel!(f32, 4, load8_f32, scalar_f32);
float_kernel!(f16, 2, load8_f16, scalar_f16);
float_kernel!(bf16, 2, load8_bf16, scalar_bf16);
