//! Register-tiled blocks of causal prefill attention: one KV tile folded into a block of queries held in SIMD lanes.
//!
//! The driver (`attention::causal_attention`) lays a block of queries out transposed,
//! `[head_dim, lanes]` with query `m` in lane `m`, widens each tile of keys and values to
//! f32 once, and calls [`fold`] for the tile. [`fold`] then runs three steps, each written
//! once over a lane type ([`Lanes`]: sixteen f32 lanes on AVX-512, eight on AVX2, one on
//! the portable path):
//!
//! 1. scores `S[j, m] = q_m · k_j` of every key slot `j` of the tile and every query `m`,
//!    as a matrix product with `W` vectors of queries times `R` keys per step of the
//!    `head_dim` loop (one broadcast key coordinate times one vector of query coordinates
//!    per fused multiply-add);
//! 2. the online-softmax update of every query, vertical in the lanes: the new running
//!    maximum over the tile, the correction `e^(old max - new max)`, `P = e^(S - max)`
//!    and the new running sum;
//! 3. `O ← O · corr + P · V`, again `W` vectors of queries times `R` coordinates of
//!    `head_dim` per step of the key loop.
//!
//! Every lane goes through the same operations in the same order whatever the other lanes
//! hold and however many vectors a step takes, so a query's result depends only on its own
//! query, its position and the tiles it reads, never on the block it is computed in. The
//! paths differ only in width: each takes the same fused multiply-adds, the same `exp` and
//! the same order per lane, so all three give the same bits.

use super::Isa;
use super::activation::exp_nonpositive;

/// One KV tile and the block of queries it is folded into.
///
/// Shapes: `qt` is `[d, mp]` (the queries transposed, already multiplied by the attention
/// scale; lanes past the block's queries are zeros), `k` is `[keys, d]`, `v` is
/// `[keys, dp]` (`dp` is `d` rounded up to a multiple of [`ROWS`], the extra coordinates
/// zero), `pos` is `[mp]`: the position of each lane's query (`f32`, exact below 2^24;
/// padding lanes hold a value no key reaches).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Tile<'a> {
    /// The queries, `[d, mp]`.
    pub qt: &'a [f32],
    /// The tile's keys, `[keys, d]`; slots past the cache's positions are zeros.
    pub k: &'a [f32],
    /// The tile's values, `[keys, dp]`; slots past the cache's positions are zeros.
    pub v: &'a [f32],
    /// Each lane's query position, `[mp]`.
    pub pos: &'a [f32],
    /// Coordinates per head.
    pub d: usize,
    /// Lanes per row of `qt`, of the scores and of the output (at least the block's
    /// queries plus one vector of padding).
    pub mp: usize,
    /// Key slots of the tile (a multiple of [`ROWS`]).
    pub keys: usize,
    /// Absolute position of the tile's first key slot.
    pub key0: usize,
    /// The lanes folded: `[first, end)`; lanes before `first` are queries that do not
    /// reach the tile, and `end` is the block's query count.
    pub first: usize,
    /// One past the block's last query lane.
    pub end: usize,
    /// Whether some lane's query precedes a key slot of the tile (the causal mask applies).
    pub masked: bool,
    /// Soft-capping of the scores, `c · tanh(s / c)` (Gemma 2).
    pub softcap: Option<f32>,
}

/// The running state of a block of queries, every buffer in lanes.
///
/// Shapes: `s` is `[keys, mp]` (scratch: the tile's scores, then its probabilities), `o`
/// is `[dp, mp]` (the unnormalised output, transposed), `max`, `sum` and `corr` are `[mp]`
/// (running maximum, running sum, and the last tile's correction factor).
#[derive(Debug)]
pub(crate) struct State<'a> {
    /// Scores, then probabilities, of the tile: `[keys, mp]`.
    pub s: &'a mut [f32],
    /// Unnormalised output `Σ e^(s - max) V`, transposed: `[dp, mp]`.
    pub o: &'a mut [f32],
    /// Running maximum per lane (`-inf` before the first tile).
    pub max: &'a mut [f32],
    /// Running sum of `e^(s - max)` per lane.
    pub sum: &'a mut [f32],
    /// Scratch: the correction factor of the tile being folded, per lane.
    pub corr: &'a mut [f32],
}

/// Head coordinates (and key slots) one register tile of [`fold`] takes per step: `dp`
/// and a tile's key count are multiples of this.
pub(crate) const ROWS: usize = 4;

/// Fold `t` into `st` on the SIMD path `isa` (see the module documentation).
///
/// # Panics
/// If a buffer is shorter than its shape says, or `t.keys` or the padded head dimension
/// is not a multiple of [`ROWS`].
pub(crate) fn fold(isa: Isa, t: &Tile, st: &mut State) {
    let dp = t.d.next_multiple_of(ROWS);
    assert!(
        t.keys.is_multiple_of(ROWS) && t.first < t.end && t.end + lanes_of(isa) <= t.mp + 1,
        "flash: tile of {} keys, lanes {}..{} of {}",
        t.keys,
        t.first,
        t.end,
        t.mp
    );
    assert!(t.qt.len() >= t.d * t.mp && t.pos.len() >= t.mp);
    assert!(t.k.len() >= t.keys * t.d && t.v.len() >= t.keys * dp);
    assert!(st.s.len() >= t.keys * t.mp && st.o.len() >= dp * t.mp);
    assert!(st.max.len() >= t.mp && st.sum.len() >= t.mp && st.corr.len() >= t.mp);
    match isa {
        // SAFETY: an `Isa` other than portable is only handed out for a CPU that has its
        // features (`VecOps::new` checks `Isa::supported`); the buffers' lengths were
        // checked above and every lane read or written lies below `mp` of its row.
        #[cfg(target_arch = "x86_64")]
        Isa::Avx512 | Isa::Avx512Vnni => unsafe { x86::fold_avx512(t, st) },
        #[cfg(target_arch = "x86_64")]
        Isa::Avx2 => unsafe { x86::fold_avx2(t, st) },
        // SAFETY: as above; the portable lanes are plain f32.
        _ => unsafe { fold_body::<f32, 4, ROWS>(t, st) },
    }
}

/// Lanes per vector on the path `isa`: the padding a block needs past its last query.
pub(crate) fn lanes_of(isa: Isa) -> usize {
    match isa {
        Isa::Avx512 | Isa::Avx512Vnni => 16,
        Isa::Avx2 => 8,
        Isa::Portable => 1,
    }
}

/// A vector of f32 lanes. The methods are unsafe because the SIMD forms need their CPU
/// features (the caller's `target_feature`) and read or write `N` floats at a pointer.
trait Lanes: Copy {
    /// Lanes per vector.
    const N: usize;
    /// Load `N` floats at `p`.
    unsafe fn load(p: *const f32) -> Self;
    /// Store the lanes at `p`.
    unsafe fn store(self, p: *mut f32);
    /// Every lane `x`.
    unsafe fn splat(x: f32) -> Self;
    /// `a · b + c`, fused (one rounding) on every path.
    unsafe fn fma(a: Self, b: Self, c: Self) -> Self;
    /// `a · b`.
    unsafe fn mul(a: Self, b: Self) -> Self;
    /// `a + b`.
    unsafe fn add(a: Self, b: Self) -> Self;
    /// `a - b`.
    unsafe fn sub(a: Self, b: Self) -> Self;
    /// The larger of each pair of lanes.
    unsafe fn max(a: Self, b: Self) -> Self;
    /// `fill` in the lanes where `key > pos`, `x` elsewhere (the causal mask).
    unsafe fn fill_gt(x: Self, key: Self, pos: Self, fill: f32) -> Self;
    /// `e^x` of each lane for `x ≤ 0`, the operations of [`exp_nonpositive`] in its
    /// order (the same bits as the scalar function on every path).
    unsafe fn exp(x: Self) -> Self;
}

impl Lanes for f32 {
    const N: usize = 1;
    #[inline(always)]
    unsafe fn load(p: *const f32) -> Self {
        // SAFETY: the caller names a readable float.
        unsafe { *p }
    }
    #[inline(always)]
    unsafe fn store(self, p: *mut f32) {
        // SAFETY: the caller names a writable float.
        unsafe { *p = self }
    }
    #[inline(always)]
    unsafe fn splat(x: f32) -> Self {
        x
    }
    #[inline(always)]
    unsafe fn fma(a: Self, b: Self, c: Self) -> Self {
        // Fused, as the SIMD paths: every path gives the same bits (a C library `fmaf`
        // call where the target has no fused multiply-add instruction).
        a.mul_add(b, c)
    }
    #[inline(always)]
    unsafe fn mul(a: Self, b: Self) -> Self {
        a * b
    }
    #[inline(always)]
    unsafe fn add(a: Self, b: Self) -> Self {
        a + b
    }
    #[inline(always)]
    unsafe fn sub(a: Self, b: Self) -> Self {
        a - b
    }
    #[inline(always)]
    unsafe fn max(a: Self, b: Self) -> Self {
        if b > a { b } else { a }
    }
    #[inline(always)]
    unsafe fn fill_gt(x: Self, key: Self, pos: Self, fill: f32) -> Self {
        if key > pos { fill } else { x }
    }
    #[inline(always)]
    unsafe fn exp(x: Self) -> Self {
        exp_nonpositive(x)
    }
}

/// The body of [`fold`] over lanes `L`, `W` vectors of queries per register tile (the
/// rest one vector at a time) and `R` keys or coordinates.
///
/// # Safety
/// `L`'s CPU features are present; the buffers hold their documented shapes.
#[inline(always)]
unsafe fn fold_body<L: Lanes, const W: usize, const R: usize>(t: &Tile, st: &mut State) {
    let n = L::N;
    let count = (t.end - t.first).div_ceil(n);
    let starts = |v: usize| t.first + v * n;
    // 1. Scores, W vectors at a time, then one.
    let mut v = 0;
    while v + W <= count {
        // SAFETY: forwarded; lanes `starts(v) .. starts(v) + W·n` lie below `mp`.
        unsafe { scores::<L, W, R>(t, st.s, starts(v)) };
        v += W;
    }
    while v < count {
        // SAFETY: as above.
        unsafe { scores::<L, 1, R>(t, st.s, starts(v)) };
        v += 1;
    }
    // 2. The online softmax, one vector at a time.
    for v in 0..count {
        // SAFETY: as above.
        unsafe { softmax::<L>(t, st, starts(v)) };
    }
    // 3. O ← O · corr + P · V.
    let mut v = 0;
    while v + W <= count {
        // SAFETY: as above.
        unsafe { values::<L, W, R>(t, st, starts(v)) };
        v += W;
    }
    while v < count {
        // SAFETY: as above.
        unsafe { values::<L, 1, R>(t, st, starts(v)) };
        v += 1;
    }
}

/// Scores of `W` vectors of queries from lane `m` against every key slot, into `s`
/// (`[keys, mp]`). Key groups that no lane of the vectors reaches are not computed: they
/// are masked to `-inf` in [`softmax`] whatever they hold.
///
/// # Safety
/// As [`fold_body`]; lanes `m .. m + W·N` lie below `mp`.
#[inline(always)]
unsafe fn scores<L: Lanes, const W: usize, const R: usize>(t: &Tile, s: &mut [f32], m: usize) {
    let (n, d, mp) = (L::N, t.d, t.mp);
    // The last real query of these vectors has the largest position.
    let last = (m + W * n).min(t.end) - 1;
    let reach = t.pos[last];
    let (qt, k, s) = (t.qt.as_ptr(), t.k.as_ptr(), s.as_mut_ptr());
    for j0 in (0..t.keys).step_by(R) {
        if t.masked && (t.key0 + j0) as f32 > reach {
            break;
        }
        // SAFETY: `k + (j0 + r)·d + i` is inside `[keys, d]`, `qt + i·mp + m + w·n` inside
        // `[d, mp]` (lanes below `mp`), `s + (j0 + r)·mp + ...` inside `[keys, mp]`.
        unsafe {
            let mut acc = [[L::splat(0.0); W]; R];
            for i in 0..d {
                let mut q = [L::splat(0.0); W];
                for (w, qw) in q.iter_mut().enumerate() {
                    *qw = L::load(qt.add(i * mp + m + w * n));
                }
                for (r, row) in acc.iter_mut().enumerate() {
                    let kb = L::splat(*k.add((j0 + r) * d + i));
                    for (a, &qw) in row.iter_mut().zip(&q) {
                        *a = L::fma(kb, qw, *a);
                    }
                }
            }
            for (r, row) in acc.iter().enumerate() {
                for (w, a) in row.iter().enumerate() {
                    a.store(s.add((j0 + r) * mp + m + w * n));
                }
            }
        }
    }
}

/// The online-softmax update of one vector of queries from lane `m`: soft-cap and mask the
/// tile's scores, take the new running maximum, write the correction factor to `corr`, the
/// probabilities `e^(s - max)` over the scores (exactly 0 where masked) and fold their sum
/// into the running sum.
///
/// # Safety
/// As [`fold_body`]; lanes `m .. m + N` lie below `mp`.
#[inline(always)]
unsafe fn softmax<L: Lanes>(t: &Tile, st: &mut State, m: usize) {
    let (n, mp) = (L::N, t.mp);
    if let Some(c) = t.softcap {
        for j in 0..t.keys {
            for x in &mut st.s[j * mp + m..j * mp + m + n] {
                *x = c * (*x / c).tanh();
            }
        }
    }
    let s = st.s.as_mut_ptr();
    // SAFETY: every pointer below is lane `m .. m + n` of a row of `[keys, mp]` or `[mp]`.
    unsafe {
        let pos = L::load(t.pos.as_ptr().add(m));
        let key = |j: usize| L::splat((t.key0 + j) as f32);
        let old = L::load(st.max.as_ptr().add(m));
        let mut max = old;
        for j in 0..t.keys {
            let p = s.add(j * mp + m);
            let mut x = L::load(p);
            if t.masked {
                x = L::fill_gt(x, key(j), pos, f32::NEG_INFINITY);
                x.store(p);
            }
            max = L::max(max, x);
        }
        let corr = L::exp(L::sub(old, max));
        max.store(st.max.as_mut_ptr().add(m));
        corr.store(st.corr.as_mut_ptr().add(m));
        let mut sum = L::splat(0.0);
        for j in 0..t.keys {
            let p = s.add(j * mp + m);
            let mut e = L::exp(L::sub(L::load(p), max));
            if t.masked {
                e = L::fill_gt(e, key(j), pos, 0.0);
            }
            e.store(p);
            sum = L::add(sum, e);
        }
        let total = L::add(L::mul(L::load(st.sum.as_ptr().add(m)), corr), sum);
        total.store(st.sum.as_mut_ptr().add(m));
    }
}

/// `O ← O · corr + P · V` for `W` vectors of queries from lane `m`, `R` coordinates per
/// step, the key slots in order.
///
/// # Safety
/// As [`fold_body`]; lanes `m .. m + W·N` lie below `mp`.
#[inline(always)]
unsafe fn values<L: Lanes, const W: usize, const R: usize>(t: &Tile, st: &mut State, m: usize) {
    let (n, mp) = (L::N, t.mp);
    let dp = t.d.next_multiple_of(R);
    let (p, v, o, corr) = (
        st.s.as_ptr(),
        t.v.as_ptr(),
        st.o.as_mut_ptr(),
        st.corr.as_ptr(),
    );
    // SAFETY: `o + (c0 + r)·mp + m + w·n` is inside `[dp, mp]`, `p + j·mp + ...` inside
    // `[keys, mp]`, `v + j·dp + c0 + r` inside `[keys, dp]`.
    unsafe {
        let mut cw = [L::splat(0.0); W];
        for (w, c) in cw.iter_mut().enumerate() {
            *c = L::load(corr.add(m + w * n));
        }
        for c0 in (0..dp).step_by(R) {
            let mut acc = [[L::splat(0.0); W]; R];
            for (r, row) in acc.iter_mut().enumerate() {
                for (w, a) in row.iter_mut().enumerate() {
                    *a = L::mul(L::load(o.add((c0 + r) * mp + m + w * n)), cw[w]);
                }
            }
            for j in 0..t.keys {
                let mut pw = [L::splat(0.0); W];
                for (w, x) in pw.iter_mut().enumerate() {
                    *x = L::load(p.add(j * mp + m + w * n));
                }
                for (r, row) in acc.iter_mut().enumerate() {
                    let vb = L::splat(*v.add(j * dp + c0 + r));
                    for (a, &x) in row.iter_mut().zip(&pw) {
                        *a = L::fma(vb, x, *a);
                    }
                }
            }
            for (r, row) in acc.iter().enumerate() {
                for (w, a) in row.iter().enumerate() {
                    a.store(o.add((c0 + r) * mp + m + w * n));
                }
            }
        }
    }
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use super::{Lanes, ROWS, State, Tile, fold_body};
    use crate::kernels::activation::exp_consts::{C1, C2, LOG2E, P, ROUND};
    use std::arch::x86_64::*;

    impl Lanes for __m512 {
        const N: usize = 16;
        #[inline(always)]
        unsafe fn load(p: *const f32) -> Self {
            // SAFETY: the caller names 16 readable floats and has AVX-512F.
            unsafe { _mm512_loadu_ps(p) }
        }
        #[inline(always)]
        unsafe fn store(self, p: *mut f32) {
            // SAFETY: the caller names 16 writable floats and has AVX-512F.
            unsafe { _mm512_storeu_ps(p, self) }
        }
        #[inline(always)]
        unsafe fn splat(x: f32) -> Self {
            // SAFETY: the caller has AVX-512F.
            unsafe { _mm512_set1_ps(x) }
        }
        #[inline(always)]
        unsafe fn fma(a: Self, b: Self, c: Self) -> Self {
            // SAFETY: the caller has AVX-512F.
            unsafe { _mm512_fmadd_ps(a, b, c) }
        }
        #[inline(always)]
        unsafe fn mul(a: Self, b: Self) -> Self {
            // SAFETY: the caller has AVX-512F.
            unsafe { _mm512_mul_ps(a, b) }
        }
        #[inline(always)]
        unsafe fn add(a: Self, b: Self) -> Self {
            // SAFETY: the caller has AVX-512F.
            unsafe { _mm512_add_ps(a, b) }
        }
        #[inline(always)]
        unsafe fn sub(a: Self, b: Self) -> Self {
            // SAFETY: the caller has AVX-512F.
            unsafe { _mm512_sub_ps(a, b) }
        }
        #[inline(always)]
        unsafe fn max(a: Self, b: Self) -> Self {
            // SAFETY: the caller has AVX-512F.
            unsafe { _mm512_max_ps(b, a) }
        }
        #[inline(always)]
        unsafe fn fill_gt(x: Self, key: Self, pos: Self, fill: f32) -> Self {
            // SAFETY: the caller has AVX-512F.
            unsafe {
                let m = _mm512_cmp_ps_mask::<_CMP_GT_OQ>(key, pos);
                _mm512_mask_mov_ps(x, m, _mm512_set1_ps(fill))
            }
        }
        #[inline(always)]
        unsafe fn exp(x: Self) -> Self {
            // SAFETY: the caller has AVX-512F.
            unsafe {
                let s = _mm512_set1_ps;
                let v = _mm512_min_ps(_mm512_max_ps(x, s(-87.3)), s(0.0));
                let n = _mm512_roundscale_ps::<{ _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC }>(
                    _mm512_add_ps(_mm512_mul_ps(v, s(LOG2E)), s(0.5)),
                );
                let r = _mm512_sub_ps(
                    _mm512_sub_ps(v, _mm512_mul_ps(n, s(C1))),
                    _mm512_mul_ps(n, s(C2)),
                );
                let mut p = s(P[0]);
                for &c in &P[1..] {
                    p = _mm512_add_ps(_mm512_mul_ps(p, r), s(c));
                }
                let e = _mm512_add_ps(
                    _mm512_add_ps(_mm512_mul_ps(_mm512_mul_ps(p, r), r), r),
                    s(1.0),
                );
                let ni = _mm512_sub_epi32(
                    _mm512_castps_si512(_mm512_add_ps(n, s(ROUND))),
                    _mm512_set1_epi32(ROUND.to_bits() as i32),
                );
                let two = _mm512_slli_epi32::<23>(_mm512_add_epi32(ni, _mm512_set1_epi32(127)));
                _mm512_mul_ps(e, _mm512_castsi512_ps(two))
            }
        }
    }

    impl Lanes for __m256 {
        const N: usize = 8;
        #[inline(always)]
        unsafe fn load(p: *const f32) -> Self {
            // SAFETY: the caller names 8 readable floats and has AVX.
            unsafe { _mm256_loadu_ps(p) }
        }
        #[inline(always)]
        unsafe fn store(self, p: *mut f32) {
            // SAFETY: the caller names 8 writable floats and has AVX.
            unsafe { _mm256_storeu_ps(p, self) }
        }
        #[inline(always)]
        unsafe fn splat(x: f32) -> Self {
            // SAFETY: the caller has AVX.
            unsafe { _mm256_set1_ps(x) }
        }
        #[inline(always)]
        unsafe fn fma(a: Self, b: Self, c: Self) -> Self {
            // SAFETY: the caller has FMA.
            unsafe { _mm256_fmadd_ps(a, b, c) }
        }
        #[inline(always)]
        unsafe fn mul(a: Self, b: Self) -> Self {
            // SAFETY: the caller has AVX.
            unsafe { _mm256_mul_ps(a, b) }
        }
        #[inline(always)]
        unsafe fn add(a: Self, b: Self) -> Self {
            // SAFETY: the caller has AVX.
            unsafe { _mm256_add_ps(a, b) }
        }
        #[inline(always)]
        unsafe fn sub(a: Self, b: Self) -> Self {
            // SAFETY: the caller has AVX.
            unsafe { _mm256_sub_ps(a, b) }
        }
        #[inline(always)]
        unsafe fn max(a: Self, b: Self) -> Self {
            // SAFETY: the caller has AVX.
            unsafe { _mm256_max_ps(b, a) }
        }
        #[inline(always)]
        unsafe fn fill_gt(x: Self, key: Self, pos: Self, fill: f32) -> Self {
            // SAFETY: the caller has AVX.
            unsafe {
                let m = _mm256_cmp_ps::<_CMP_GT_OQ>(key, pos);
                _mm256_blendv_ps(x, _mm256_set1_ps(fill), m)
            }
        }
        #[inline(always)]
        unsafe fn exp(x: Self) -> Self {
            // SAFETY: the caller has AVX2.
            unsafe {
                let s = _mm256_set1_ps;
                let v = _mm256_min_ps(_mm256_max_ps(x, s(-87.3)), s(0.0));
                let n = _mm256_floor_ps(_mm256_add_ps(_mm256_mul_ps(v, s(LOG2E)), s(0.5)));
                let r = _mm256_sub_ps(
                    _mm256_sub_ps(v, _mm256_mul_ps(n, s(C1))),
                    _mm256_mul_ps(n, s(C2)),
                );
                let mut p = s(P[0]);
                for &c in &P[1..] {
                    p = _mm256_add_ps(_mm256_mul_ps(p, r), s(c));
                }
                let e = _mm256_add_ps(
                    _mm256_add_ps(_mm256_mul_ps(_mm256_mul_ps(p, r), r), r),
                    s(1.0),
                );
                let ni = _mm256_sub_epi32(
                    _mm256_castps_si256(_mm256_add_ps(n, s(ROUND))),
                    _mm256_set1_epi32(ROUND.to_bits() as i32),
                );
                let two = _mm256_slli_epi32::<23>(_mm256_add_epi32(ni, _mm256_set1_epi32(127)));
                _mm256_mul_ps(e, _mm256_castsi256_ps(two))
            }
        }
    }

    /// [`super::fold`] sixteen lanes wide, three vectors (48 queries) by four keys or
    /// coordinates per register tile.
    ///
    /// # Safety
    /// The CPU must support AVX-512F; the buffers hold their documented shapes.
    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn fold_avx512(t: &Tile, st: &mut State) {
        // SAFETY: forwarded.
        unsafe { fold_body::<__m512, 3, ROWS>(t, st) }
    }

    /// [`super::fold`] eight lanes wide, two vectors (16 queries) by four keys or
    /// coordinates per register tile (eight accumulators of the sixteen registers).
    ///
    /// # Safety
    /// The CPU must support AVX2 and FMA; the buffers hold their documented shapes.
    #[target_feature(enable = "avx2,fma")]
    pub(super) unsafe fn fold_avx2(t: &Tile, st: &mut State) {
        // SAFETY: forwarded.
        unsafe { fold_body::<__m256, 2, ROWS>(t, st) }
    }
}
