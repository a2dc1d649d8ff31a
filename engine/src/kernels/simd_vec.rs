//! f32 vector primitives (dot product, axpy) with per-ISA implementations chosen at run time.
//!
//! Every kernel that reduces over a row (RMSNorm's sum of squares, attention's `q · k` and
//! `out += w * v`) goes through [`VecOps`], so one choice of path fixes the summation order.
//! That is what makes attention over paged KV bit-identical to attention over contiguous KV:
//! both call the same [`VecOps::dot`] on the same head rows.

use std::sync::OnceLock;

use half::f16;

use super::Isa;

/// A SIMD path for f32 vector primitives, checked at construction to be supported by this CPU.
///
/// The summation order is fixed per path (documented on [`VecOps::dot`]), so two calls with the
/// same `VecOps` and the same inputs give bit-identical results. Different paths may differ in
/// the last bits (different association and fused multiply-add).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct VecOps {
    isa: Isa,
}

impl VecOps {
    /// The primitives for `isa`, or `None` when this CPU cannot run that path.
    pub fn new(isa: Isa) -> Option<VecOps> {
        isa.supported().then_some(VecOps { isa })
    }

    /// The portable path (plain Rust), always available.
    pub fn portable() -> VecOps {
        VecOps { isa: Isa::Portable }
    }

    /// The path [`Isa::best`] picks (honouring `GENAI_ISA`), detected once per process.
    pub fn best() -> VecOps {
        static BEST: OnceLock<Isa> = OnceLock::new();
        VecOps {
            isa: *BEST.get_or_init(Isa::best),
        }
    }

    /// Every path this CPU supports, portable first.
    pub fn available() -> Vec<VecOps> {
        Isa::available()
            .into_iter()
            .map(|isa| VecOps { isa })
            .collect()
    }

    /// The instruction-set path these primitives run.
    pub fn isa(self) -> Isa {
        self.isa
    }

    /// Dot product `Σ a[i] * b[i]` of two equal-length rows.
    ///
    /// Summation order: portable keeps 8 partial sums (lane `i % 8` over the largest multiple
    /// of 8), adds them pairwise, then adds the tail in order; AVX2 keeps two 8-lane FMA
    /// accumulators over blocks of 16, one more 8-lane step, a horizontal sum, then a scalar
    /// FMA tail; AVX-512 keeps one 16-lane FMA accumulator with a masked final block.
    ///
    /// # Panics
    /// If `a.len() != b.len()`.
    #[inline]
    pub fn dot(self, a: &[f32], b: &[f32]) -> f32 {
        assert_eq!(a.len(), b.len(), "dot: row lengths differ");
        match self.isa {
            // SAFETY: `VecOps` is only constructed for paths `Isa::supported` confirmed.
            #[cfg(target_arch = "x86_64")]
            Isa::Avx2 => unsafe { x86::dot_avx2(a, b) },
            #[cfg(target_arch = "x86_64")]
            Isa::Avx512 | Isa::Avx512Vnni => unsafe { x86::dot_avx512(a, b) },
            _ => dot_portable(a, b),
        }
    }

    /// `out[i] += w * x[i]` for equal-length rows (fused multiply-add on the SIMD paths,
    /// separate multiply and add on the portable path). Each element is independent of the
    /// others, so the result does not depend on how the row is split.
    ///
    /// # Panics
    /// If `x.len() != out.len()`.
    #[inline]
    pub fn axpy(self, w: f32, x: &[f32], out: &mut [f32]) {
        assert_eq!(x.len(), out.len(), "axpy: row lengths differ");
        match self.isa {
            // SAFETY: `VecOps` is only constructed for paths `Isa::supported` confirmed.
            #[cfg(target_arch = "x86_64")]
            Isa::Avx2 => unsafe { x86::axpy_avx2(w, x, out) },
            #[cfg(target_arch = "x86_64")]
            Isa::Avx512 | Isa::Avx512Vnni => unsafe { x86::axpy_avx512(w, x, out) },
            _ => axpy_portable(w, x, out),
        }
    }
}

impl VecOps {
    /// Dot products of `q` with `n` rows spaced `stride` elements apart:
    /// `out[i] = dot(q, rows[i * stride .. i * stride + q.len()])`.
    ///
    /// Each product is computed exactly as [`VecOps::dot`] computes it (same summation
    /// order), so the results are bit-identical to `n` calls of `dot`; the loop over rows
    /// runs inside one SIMD function instead of paying a call and a dispatch per row (the
    /// key rows of one attention head in a KV page).
    ///
    /// # Panics
    /// If `rows` is shorter than `(out.len() - 1) * stride + q.len()`.
    pub fn dot_rows(self, q: &[f32], rows: &[f32], stride: usize, out: &mut [f32]) {
        let (n, d) = (out.len(), q.len());
        if !has_rows("dot_rows", n, d, stride, rows.len()) {
            return;
        }
        match self.isa {
            // SAFETY: `VecOps` is only constructed for paths `Isa::supported` confirmed; the
            // lengths were checked above.
            #[cfg(target_arch = "x86_64")]
            Isa::Avx2 => unsafe { x86::dot_rows_avx2(q, rows, stride, out) },
            #[cfg(target_arch = "x86_64")]
            Isa::Avx512 | Isa::Avx512Vnni => unsafe { x86::dot_rows_avx512(q, rows, stride, out) },
            _ => {
                for (i, o) in out.iter_mut().enumerate() {
                    *o = dot_portable(q, &rows[i * stride..i * stride + d]);
                }
            }
        }
    }

    /// `out += Σ_i w[i] * rows[i * stride .. i * stride + out.len()]`, accumulated in row
    /// order with the same per-element operation as [`VecOps::axpy`], so the result is
    /// bit-identical to `w.len()` calls of `axpy`; the accumulators stay in registers
    /// across rows (the value rows of one attention head in a KV page).
    ///
    /// # Panics
    /// If `rows` is shorter than `(w.len() - 1) * stride + out.len()`.
    pub fn axpy_rows(self, w: &[f32], rows: &[f32], stride: usize, out: &mut [f32]) {
        let (n, d) = (w.len(), out.len());
        if !has_rows("axpy_rows", n, d, stride, rows.len()) {
            return;
        }
        match self.isa {
            // SAFETY: as in `dot_rows`.
            #[cfg(target_arch = "x86_64")]
            Isa::Avx2 => unsafe { x86::axpy_rows_avx2(w, rows, stride, out) },
            #[cfg(target_arch = "x86_64")]
            Isa::Avx512 | Isa::Avx512Vnni => unsafe { x86::axpy_rows_avx512(w, rows, stride, out) },
            _ => {
                for (i, &wi) in w.iter().enumerate() {
                    axpy_portable(wi, &rows[i * stride..i * stride + d], out);
                }
            }
        }
    }
}

/// Most heads [`VecOps::axpy_rows_heads`] serves in one pass over the rows (its AVX-512
/// path keeps `4 × heads` accumulators of 16 lanes in registers).
pub const MAX_HEADS: usize = 4;

impl VecOps {
    /// [`VecOps::axpy_rows`] for several heads reading the same rows (the query heads of
    /// one GQA group over one KV head's value rows): `outs[h] += Σ_i ws[h][i] * rows[i ·
    /// stride ..]` for every `h`, each head's result bit for bit its own `axpy_rows`.
    ///
    /// On the AVX-512 paths, for rows whose length is a multiple of 64 and up to
    /// [`MAX_HEADS`] heads, each row is loaded once for all the heads and every head's
    /// accumulators stay in registers: `4 × heads` independent multiply-add chains per row
    /// instead of four, and one load of the row instead of one per head. Elsewhere it is
    /// one `axpy_rows` per head.
    ///
    /// # Panics
    /// If `ws` and `outs` differ in length, the heads' weights differ in length, the
    /// outputs differ in length, or `rows` is too short (as [`VecOps::axpy_rows`]).
    pub fn axpy_rows_heads(
        self,
        ws: &[&[f32]],
        rows: &[f32],
        stride: usize,
        outs: &mut [&mut [f32]],
    ) {
        let shape = heads_shape("axpy_rows_heads", ws, rows.len(), stride, outs);
        self.group_form(
            shape,
            64,
            outs,
            |n, outs| {
                // SAFETY: `VecOps` is only constructed for supported paths; the shapes were
                // checked by `heads_shape`.
                #[cfg(target_arch = "x86_64")]
                unsafe {
                    x86::axpy_rows_heads_avx512_f32(ws, rows, stride, outs, n)
                }
            },
            |outs| {
                for (w, out) in ws.iter().zip(outs.iter_mut()) {
                    self.axpy_rows(w, rows, stride, out);
                }
            },
        )
    }

    /// [`VecOps::axpy_rows_heads`] over f16 rows: each head's result bit for bit its own
    /// [`VecOps::axpy_rows_f16`].
    ///
    /// # Panics
    /// As [`VecOps::axpy_rows_heads`].
    pub fn axpy_rows_heads_f16(
        self,
        ws: &[&[f32]],
        rows: &[f16],
        stride: usize,
        outs: &mut [&mut [f32]],
    ) {
        let shape = heads_shape("axpy_rows_heads_f16", ws, rows.len(), stride, outs);
        self.group_form(
            shape,
            64,
            outs,
            |n, outs| {
                // SAFETY: as in `axpy_rows_heads`.
                #[cfg(target_arch = "x86_64")]
                unsafe {
                    x86::axpy_rows_heads_avx512_f16(ws, rows, stride, outs, n)
                }
            },
            |outs| {
                for (w, out) in ws.iter().zip(outs.iter_mut()) {
                    self.axpy_rows_f16(w, rows, stride, out);
                }
            },
        )
    }

    /// Scores of several query heads against the same rows (a GQA group's heads against one
    /// KV head's keys): `outs[h][i] = dot(qs[h], rows[i * stride ..])`, each head bit for
    /// bit its own [`VecOps::dot_rows`]. On the AVX-512 paths, for up to [`MAX_HEADS`]
    /// heads (more go in groups) and a row length that is a whole number of 16-lane
    /// vectors, each row is loaded once for all the heads instead of once per head.
    ///
    /// Shapes: every `qs[h]` has the row length `d`, every `outs[h]` the row count.
    ///
    /// # Panics
    /// If `qs` and `outs` differ in length, the queries or the outputs differ in length, or
    /// `rows` is shorter than `(n - 1) * stride + d`.
    pub fn dot_rows_heads(
        self,
        qs: &[&[f32]],
        rows: &[f32],
        stride: usize,
        outs: &mut [&mut [f32]],
    ) {
        let shape = query_heads_shape("dot_rows_heads", qs, rows.len(), stride, outs);
        self.group_form(
            shape,
            16,
            outs,
            |n, outs| {
                // SAFETY: `VecOps` is only constructed for supported paths; the shapes were
                // checked by `query_heads_shape`.
                #[cfg(target_arch = "x86_64")]
                unsafe {
                    x86::dot_rows_heads_avx512_f32(qs, rows, stride, outs, n)
                }
            },
            |outs| {
                for (q, out) in qs.iter().zip(outs.iter_mut()) {
                    self.dot_rows(q, rows, stride, out);
                }
            },
        )
    }

    /// [`VecOps::dot_rows_heads`] over f16 rows: each head's scores bit for bit its own
    /// [`VecOps::dot_rows_f16`].
    ///
    /// # Panics
    /// As [`VecOps::dot_rows_heads`].
    pub fn dot_rows_heads_f16(
        self,
        qs: &[&[f32]],
        rows: &[f16],
        stride: usize,
        outs: &mut [&mut [f32]],
    ) {
        let shape = query_heads_shape("dot_rows_heads_f16", qs, rows.len(), stride, outs);
        self.group_form(
            shape,
            16,
            outs,
            |n, outs| {
                // SAFETY: as in `dot_rows_heads`.
                #[cfg(target_arch = "x86_64")]
                unsafe {
                    x86::dot_rows_heads_avx512_f16(qs, rows, stride, outs, n)
                }
            },
            |outs| {
                for (q, out) in qs.iter().zip(outs.iter_mut()) {
                    self.dot_rows_f16(q, rows, stride, out);
                }
            },
        )
    }

    /// The dispatch shared by the group forms: nothing when `shape` (checked `(rows, row
    /// length)`) is `None`; the AVX-512 kernel `one_pass(rows, outs)` on the AVX-512 paths
    /// when the row length is a multiple of `lanes`; otherwise `per_head(outs)`, the
    /// single-head primitive once per head.
    fn group_form(
        self,
        shape: Option<(usize, usize)>,
        lanes: usize,
        outs: &mut [&mut [f32]],
        one_pass: impl FnOnce(usize, &mut [&mut [f32]]),
        per_head: impl FnOnce(&mut [&mut [f32]]),
    ) {
        let Some((n, d)) = shape else {
            return;
        };
        if cfg!(target_arch = "x86_64")
            && matches!(self.isa, Isa::Avx512 | Isa::Avx512Vnni)
            && d.is_multiple_of(lanes)
        {
            return one_pass(n, outs);
        }
        per_head(outs)
    }
}

/// Checks the shapes of a `dot_rows_heads` call; `None` when there is nothing to do,
/// otherwise `(rows, row length)`. Panics with `name` on a shape bug.
fn query_heads_shape(
    name: &str,
    qs: &[&[f32]],
    len: usize,
    stride: usize,
    outs: &[&mut [f32]],
) -> Option<(usize, usize)> {
    group_shape(
        name,
        (outs.len(), outs.iter().map(|o| o.len())),
        (qs.len(), qs.iter().map(|q| q.len())),
        len,
        stride,
    )
}

/// Checks the shapes of an `axpy_rows_heads` call; `None` when there is nothing to do,
/// otherwise `(rows, row length)`. Panics with `name` on a shape bug.
fn heads_shape(
    name: &str,
    ws: &[&[f32]],
    len: usize,
    stride: usize,
    outs: &[&mut [f32]],
) -> Option<(usize, usize)> {
    group_shape(
        name,
        (ws.len(), ws.iter().map(|w| w.len())),
        (outs.len(), outs.iter().map(|o| o.len())),
        len,
        stride,
    )
}

/// The shared check of the heads forms: `per_row` (one slice per head, each as long as
/// the row count: weights or scores) and `per_column` (one per head, each a row's length:
/// outputs or queries) give a head count and their lengths. `None` when there is no head
/// or no row, otherwise `(rows, row length)`; panics with `name` when the head counts or
/// lengths disagree or `len` elements cannot hold the rows.
fn group_shape(
    name: &str,
    (heads, mut per_row): (usize, impl Iterator<Item = usize>),
    (heads_c, mut per_column): (usize, impl Iterator<Item = usize>),
    len: usize,
    stride: usize,
) -> Option<(usize, usize)> {
    assert_eq!(
        heads, heads_c,
        "{name}: {heads} per-row slices but {heads_c} per-column slices (one each per head)"
    );
    let (n, d) = (per_row.next()?, per_column.next()?);
    assert!(
        per_row.all(|x| x == n) && per_column.all(|x| x == d),
        "{name}: the heads' slices differ in length"
    );
    has_rows(name, n, d, stride, len).then_some((n, d))
}

/// Whether a run of `n` rows of `d` elements at `stride` has any row; panics with `name`
/// when `len` elements cannot hold it (a caller shape bug).
fn has_rows(name: &str, n: usize, d: usize, stride: usize, len: usize) -> bool {
    if n == 0 {
        return false;
    }
    assert!(
        len >= (n - 1) * stride + d,
        "{name}: {n} rows of {d} at stride {stride} need {} elements, got {len}",
        (n - 1) * stride + d
    );
    true
}

/// The same primitives over f16 rows (the KV cache's half-precision storage), each widened
/// to f32 as it is loaded (`vcvtph2ps`: F16C on the AVX2 path, AVX-512F on the AVX-512
/// paths, `half`'s conversion on the portable path). Widening is exact and every path keeps
/// its f32 summation order, so each result is bit-identical to the f32 primitive of the same
/// path applied to the widened row.
impl VecOps {
    /// [`VecOps::dot`] of `a` with the f16 row `b`.
    ///
    /// # Panics
    /// If `a.len() != b.len()`.
    #[inline]
    pub fn dot_f16(self, a: &[f32], b: &[f16]) -> f32 {
        assert_eq!(a.len(), b.len(), "dot_f16: row lengths differ");
        match self.isa {
            // SAFETY: `VecOps` is only constructed for paths `Isa::supported` confirmed
            // (AVX2 includes F16C; AVX-512 includes BW and VL).
            #[cfg(target_arch = "x86_64")]
            Isa::Avx2 => unsafe { x86::dot_avx2_f16(a, b) },
            #[cfg(target_arch = "x86_64")]
            Isa::Avx512 | Isa::Avx512Vnni => unsafe { x86::dot_avx512_f16(a, b) },
            _ => dot_portable_f16(a, b),
        }
    }

    /// [`VecOps::axpy`] of the f16 row `x`: `out[i] += w * x[i]`.
    ///
    /// # Panics
    /// If `x.len() != out.len()`.
    #[inline]
    pub fn axpy_f16(self, w: f32, x: &[f16], out: &mut [f32]) {
        assert_eq!(x.len(), out.len(), "axpy_f16: row lengths differ");
        match self.isa {
            // SAFETY: as in `dot_f16`.
            #[cfg(target_arch = "x86_64")]
            Isa::Avx2 => unsafe { x86::axpy_avx2_f16(w, x, out) },
            #[cfg(target_arch = "x86_64")]
            Isa::Avx512 | Isa::Avx512Vnni => unsafe { x86::axpy_avx512_f16(w, x, out) },
            _ => axpy_portable_f16(w, x, out),
        }
    }

    /// [`VecOps::dot_rows`] over f16 rows: `out[i] = dot_f16(q, rows[i * stride ..])`.
    ///
    /// # Panics
    /// If `rows` is shorter than `(out.len() - 1) * stride + q.len()`.
    pub fn dot_rows_f16(self, q: &[f32], rows: &[f16], stride: usize, out: &mut [f32]) {
        let (n, d) = (out.len(), q.len());
        if !has_rows("dot_rows_f16", n, d, stride, rows.len()) {
            return;
        }
        match self.isa {
            // SAFETY: as in `dot_f16`; the lengths were checked above.
            #[cfg(target_arch = "x86_64")]
            Isa::Avx2 => unsafe { x86::dot_rows_avx2_f16(q, rows, stride, out) },
            #[cfg(target_arch = "x86_64")]
            Isa::Avx512 | Isa::Avx512Vnni => unsafe {
                x86::dot_rows_avx512_f16(q, rows, stride, out)
            },
            _ => {
                for (i, o) in out.iter_mut().enumerate() {
                    *o = dot_portable_f16(q, &rows[i * stride..i * stride + d]);
                }
            }
        }
    }

    /// [`VecOps::axpy_rows`] over f16 rows: `out += Σ_i w[i] * rows[i * stride ..]`, in row
    /// order.
    ///
    /// # Panics
    /// If `rows` is shorter than `(w.len() - 1) * stride + out.len()`.
    pub fn axpy_rows_f16(self, w: &[f32], rows: &[f16], stride: usize, out: &mut [f32]) {
        let (n, d) = (w.len(), out.len());
        if !has_rows("axpy_rows_f16", n, d, stride, rows.len()) {
            return;
        }
        match self.isa {
            // SAFETY: as in `dot_rows_f16`.
            #[cfg(target_arch = "x86_64")]
            Isa::Avx2 => unsafe { x86::axpy_rows_avx2_f16(w, rows, stride, out) },
            #[cfg(target_arch = "x86_64")]
            Isa::Avx512 | Isa::Avx512Vnni => unsafe {
                x86::axpy_rows_avx512_f16(w, rows, stride, out)
            },
            _ => {
                for (i, &wi) in w.iter().enumerate() {
                    axpy_portable_f16(wi, &rows[i * stride..i * stride + d], out);
                }
            }
        }
    }
}

impl Default for VecOps {
    /// Same as [`VecOps::best`].
    fn default() -> Self {
        VecOps::best()
    }
}

fn dot_portable(a: &[f32], b: &[f32]) -> f32 {
    let mut acc = [0.0f32; 8];
    let ca = a.chunks_exact(8);
    let cb = b.chunks_exact(8);
    let (ta, tb) = (ca.remainder(), cb.remainder());
    for (xa, xb) in ca.zip(cb) {
        for l in 0..8 {
            acc[l] += xa[l] * xb[l];
        }
    }
    let mut sum = ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
    for (x, y) in ta.iter().zip(tb) {
        sum += x * y;
    }
    sum
}

fn axpy_portable(w: f32, x: &[f32], out: &mut [f32]) {
    for (o, v) in out.iter_mut().zip(x) {
        *o += w * v;
    }
}

fn dot_portable_f16(a: &[f32], b: &[f16]) -> f32 {
    let mut acc = [0.0f32; 8];
    let ca = a.chunks_exact(8);
    let cb = b.chunks_exact(8);
    let (ta, tb) = (ca.remainder(), cb.remainder());
    for (xa, xb) in ca.zip(cb) {
        for l in 0..8 {
            acc[l] += xa[l] * xb[l].to_f32();
        }
    }
    let mut sum = ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
    for (x, y) in ta.iter().zip(tb) {
        sum += x * y.to_f32();
    }
    sum
}

fn axpy_portable_f16(w: f32, x: &[f16], out: &mut [f32]) {
    for (o, v) in out.iter_mut().zip(x) {
        *o += w * v.to_f32();
    }
}

// The AVX-512 intrinsics are stable since Rust 1.89, above the workspace's declared
// `rust-version` (1.85); the toolchain in use is newer. Raising `rust-version` is the lead's call.
#[cfg(target_arch = "x86_64")]
#[allow(clippy::incompatible_msrv)]
mod x86 {
    use std::arch::x86_64::*;

    use half::f16;

    /// # Safety
    /// The CPU must support AVX2, FMA and F16C; `rows` must hold `out.len()` rows of
    /// `q.len()` at `stride`.
    #[target_feature(enable = "avx2,fma,f16c")]
    pub(super) unsafe fn dot_rows_avx2(q: &[f32], rows: &[f32], stride: usize, out: &mut [f32]) {
        // SAFETY: as this function's contract.
        unsafe { dot_rows256(q, rows, stride, out, F32_LOADS_256) }
    }

    /// # Safety
    /// The CPU must support AVX2, FMA and F16C; `rows` must hold `w.len()` rows of
    /// `out.len()` at `stride`.
    #[target_feature(enable = "avx2,fma,f16c")]
    pub(super) unsafe fn axpy_rows_avx2(w: &[f32], rows: &[f32], stride: usize, out: &mut [f32]) {
        // SAFETY: as this function's contract.
        unsafe { axpy_rows256(w, rows, stride, out, F32_LOADS_256) }
    }

    /// # Safety
    /// The CPU must support AVX2, FMA and F16C; `a` and `b` must have equal lengths.
    #[target_feature(enable = "avx2,fma,f16c")]
    #[inline]
    pub(super) unsafe fn dot_avx2(a: &[f32], b: &[f32]) -> f32 {
        // SAFETY: as this function's contract.
        unsafe { dot256(a, b, F32_LOADS_256) }
    }

    /// # Safety
    /// The CPU must support AVX2, FMA and F16C; `x` and `out` must have equal lengths.
    #[target_feature(enable = "avx2,fma,f16c")]
    #[inline]
    pub(super) unsafe fn axpy_avx2(w: f32, x: &[f32], out: &mut [f32]) {
        // SAFETY: as this function's contract.
        unsafe { axpy256(w, x, out, F32_LOADS_256) }
    }

    /// How an AVX2 kernel reads row elements as f32: 8 at a time, and one (the scalar
    /// tail). f32 rows are read as they are, f16 rows widened.
    type Loads256<T> = (unsafe fn(*const T) -> __m256, fn(T) -> f32);

    /// f32 rows, read as they are.
    const F32_LOADS_256: Loads256<f32> = (load8_f32, |x| x);

    /// 8 f32 at `p`.
    ///
    /// # Safety
    /// The CPU must support AVX2; `p..p + 8` must be readable.
    #[target_feature(enable = "avx2,fma,f16c")]
    #[inline]
    unsafe fn load8_f32(p: *const f32) -> __m256 {
        // SAFETY: the caller guarantees 8 readable floats at `p`.
        unsafe { _mm256_loadu_ps(p) }
    }

    /// `out[i] = dot256(q, row i)` for rows at `stride`.
    ///
    /// # Safety
    /// As `dot_rows_avx2`, with `rows` of `T`.
    #[target_feature(enable = "avx2,fma,f16c")]
    #[inline]
    unsafe fn dot_rows256<T: Copy>(
        q: &[f32],
        rows: &[T],
        stride: usize,
        out: &mut [f32],
        loads: Loads256<T>,
    ) {
        let d = q.len();
        for (i, o) in out.iter_mut().enumerate() {
            // SAFETY: the caller checked the extent of `rows`.
            *o = unsafe { dot256(q, rows.get_unchecked(i * stride..i * stride + d), loads) };
        }
    }

    /// `out += Σ_i w[i] · row_i`, rows read through `loads`: 32 columns at a time with the
    /// accumulators in registers across the rows, then the remaining columns row after row
    /// by [`axpy256`]; per element the multiply-adds of one [`axpy256`] per row, in order.
    ///
    /// # Safety
    /// As `axpy_rows_avx2`, with `rows` of `T`.
    #[target_feature(enable = "avx2,fma,f16c")]
    #[inline]
    unsafe fn axpy_rows256<T: Copy>(
        w: &[f32],
        rows: &[T],
        stride: usize,
        out: &mut [f32],
        loads: Loads256<T>,
    ) {
        let d = out.len();
        let load = loads.0;
        let mut c = 0;
        // SAFETY: every access covers columns `c..c + 8 <= d` of rows inside the extent the
        // caller checked.
        unsafe {
            let pr = rows.as_ptr();
            while c + 32 <= d {
                let po = out.as_mut_ptr().add(c);
                let mut acc = [
                    _mm256_loadu_ps(po),
                    _mm256_loadu_ps(po.add(8)),
                    _mm256_loadu_ps(po.add(16)),
                    _mm256_loadu_ps(po.add(24)),
                ];
                for (i, &wi) in w.iter().enumerate() {
                    let vw = _mm256_set1_ps(wi);
                    let r = pr.add(i * stride + c);
                    for (j, a) in acc.iter_mut().enumerate() {
                        *a = _mm256_fmadd_ps(vw, load(r.add(8 * j)), *a);
                    }
                }
                for (j, a) in acc.iter().enumerate() {
                    _mm256_storeu_ps(po.add(8 * j), *a);
                }
                c += 32;
            }
        }
        if c < d {
            for (i, &wi) in w.iter().enumerate() {
                // SAFETY: as above.
                unsafe {
                    axpy256(
                        wi,
                        rows.get_unchecked(i * stride + c..i * stride + d),
                        &mut out[c..],
                        loads,
                    )
                };
            }
        }
    }

    /// `Σ a[i] · b[i]`, `b` read through `loads`: two 8-lane accumulators over blocks of
    /// 16, one more block of 8, a fixed horizontal sum, then the scalar tail with fused
    /// multiply-adds. The same operations whatever the element type.
    ///
    /// # Safety
    /// The CPU must support AVX2, FMA and F16C; `a` and `b` must have equal lengths.
    #[target_feature(enable = "avx2,fma,f16c")]
    #[inline]
    unsafe fn dot256<T: Copy>(a: &[f32], b: &[T], (load, one): Loads256<T>) -> f32 {
        let n = a.len();
        let (pa, pb) = (a.as_ptr(), b.as_ptr());
        let mut i = 0;
        // SAFETY: every load reads 8 lanes at `i..i + 8` with `i + 8 <= n`.
        unsafe {
            let mut acc0 = _mm256_setzero_ps();
            let mut acc1 = _mm256_setzero_ps();
            while i + 16 <= n {
                acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(pa.add(i)), load(pb.add(i)), acc0);
                acc1 = _mm256_fmadd_ps(_mm256_loadu_ps(pa.add(i + 8)), load(pb.add(i + 8)), acc1);
                i += 16;
            }
            if i + 8 <= n {
                acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(pa.add(i)), load(pb.add(i)), acc0);
                i += 8;
            }
            let acc = _mm256_add_ps(acc0, acc1);
            let lo = _mm256_castps256_ps128(acc);
            let hi = _mm256_extractf128_ps::<1>(acc);
            let s4 = _mm_add_ps(lo, hi);
            let s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
            let s1 = _mm_add_ss(s2, _mm_shuffle_ps::<0b01>(s2, s2));
            let mut sum = _mm_cvtss_f32(s1);
            while i < n {
                sum = a[i].mul_add(one(b[i]), sum);
                i += 1;
            }
            sum
        }
    }

    /// `out[i] += w · x[i]`, `x` read through `loads`, 8 lanes at a time, then the scalar
    /// tail with fused multiply-adds.
    ///
    /// # Safety
    /// The CPU must support AVX2, FMA and F16C; `x` and `out` must have equal lengths.
    #[target_feature(enable = "avx2,fma,f16c")]
    #[inline]
    unsafe fn axpy256<T: Copy>(w: f32, x: &[T], out: &mut [f32], (load, one): Loads256<T>) {
        let n = x.len();
        let (px, po) = (x.as_ptr(), out.as_mut_ptr());
        let mut i = 0;
        // SAFETY: every access covers `i..i + 8` with `i + 8 <= n`.
        unsafe {
            let vw = _mm256_set1_ps(w);
            while i + 8 <= n {
                let r = _mm256_fmadd_ps(vw, load(px.add(i)), _mm256_loadu_ps(po.add(i)));
                _mm256_storeu_ps(po.add(i), r);
                i += 8;
            }
        }
        while i < n {
            out[i] = w.mul_add(one(x[i]), out[i]);
            i += 1;
        }
    }

    /// # Safety
    /// The CPU must support AVX-512F; `rows` must hold `out.len()` rows of `q.len()` at
    /// `stride`.
    ///
    /// Rows whose length is a whole number of 16-lane vectors go sixteen at a time
    /// ([`dot_rows_blocked`]).
    #[target_feature(enable = "avx512f,avx512bw,avx512vl")]
    pub(super) unsafe fn dot_rows_avx512(q: &[f32], rows: &[f32], stride: usize, out: &mut [f32]) {
        let d = q.len();
        // SAFETY: as this function's contract; 16 floats at a row's column `c + 16 <= d`.
        let done = unsafe { dot_rows_blocked(q, rows, stride, out, |p| _mm512_loadu_ps(p)) };
        for (k, o) in out.iter_mut().enumerate().skip(done) {
            // SAFETY: the caller checked the extent of `rows`.
            *o = unsafe { dot_avx512(q, rows.get_unchecked(k * stride..k * stride + d)) };
        }
    }

    /// The blocked part of `dot_rows` on AVX-512: when the row length is a whole number of
    /// 16-lane vectors, the first `out.len()` rounded down to 16 rows, sixteen at a time;
    /// returns how many rows it scored (0 for another length). `load` reads 16 elements of a
    /// row as f32 (`rows` of f32, or f16 widened).
    ///
    /// Each row's lane sums are accumulated as [`dot_avx512`] does, then the sixteen vectors
    /// are reduced together by [`reduce16`], which adds the same pairs of lanes in the same
    /// order as [`hsum512`] (lane `i` with `i + 8`, then `i + 4`, `i + 2`, `i + 1`), so every
    /// score equals the per-row dot bit for bit while the horizontal sums cost one shuffle
    /// and one add per row instead of a dependent chain of four each.
    ///
    /// # Safety
    /// The CPU must support AVX-512F; `rows` must hold `out.len()` rows of `q.len()` at
    /// `stride`, and `load(p)` must read 16 elements at `p`.
    #[target_feature(enable = "avx512f")]
    #[inline]
    unsafe fn dot_rows_blocked<T>(
        q: &[f32],
        rows: &[T],
        stride: usize,
        out: &mut [f32],
        load: impl Fn(*const T) -> __m512,
    ) -> usize {
        let d = q.len();
        if d == 0 || !d.is_multiple_of(16) {
            return 0;
        }
        let pq = q.as_ptr();
        let mut i = 0;
        while i + 16 <= out.len() {
            // SAFETY: rows `i .. i + 16` lie inside the extent the caller checked; every
            // load covers columns `c .. c + 16 <= d` of one of them.
            unsafe {
                let base = rows.as_ptr().add(i * stride);
                let mut acc = [_mm512_setzero_ps(); 16];
                for (s, a) in acc.iter_mut().enumerate() {
                    let pr = base.add(SLOT_ROW[s] * stride);
                    let mut c = 0;
                    while c < d {
                        *a = _mm512_fmadd_ps(_mm512_loadu_ps(pq.add(c)), load(pr.add(c)), *a);
                        c += 16;
                    }
                }
                _mm512_storeu_ps(out.as_mut_ptr().add(i), reduce16(&acc));
            }
            i += 16;
        }
        i
    }

    /// The row a blocked sixteen-row kernel loads into slot `s` of its block, so that the
    /// transposing reduction's output lane `s` is row `s` (see [`reduce16`]; the
    /// permutation is its own inverse).
    const SLOT_ROW: [usize; 16] = [0, 2, 1, 3, 8, 10, 9, 11, 4, 6, 5, 7, 12, 14, 13, 15];

    /// The horizontal sums of sixteen vectors at once: output lane `L` is the sum of the
    /// vector in slot `f(L)` with `f = [0, 2, 1, 3, 8, 10, 9, 11, 4, 6, 5, 7, 12, 14, 13, 15]`
    /// (its own inverse), each summed by the tree of [`hsum512`].
    #[target_feature(enable = "avx512f")]
    #[inline]
    fn reduce16(v: &[__m512; 16]) -> __m512 {
        // Lane i + lane i + 8: [v_k's 8 sums | v_{k+8}'s 8 sums].
        let l1: [__m512; 8] = core::array::from_fn(|k| {
            let (a, b) = (v[k], v[k + 8]);
            _mm512_add_ps(
                _mm512_shuffle_f32x4::<0b01_00_01_00>(a, b),
                _mm512_shuffle_f32x4::<0b11_10_11_10>(a, b),
            )
        });
        // Lane i + lane i + 4 within each half: four sums per 128-bit lane.
        let l2: [__m512; 4] = core::array::from_fn(|m| {
            let (a, b) = (l1[m], l1[m + 4]);
            _mm512_add_ps(
                _mm512_shuffle_f32x4::<0b10_00_10_00>(a, b),
                _mm512_shuffle_f32x4::<0b11_01_11_01>(a, b),
            )
        });
        // Lane i + lane i + 2 within each 128-bit lane.
        let l3: [__m512; 2] = core::array::from_fn(|n| {
            let (a, b) = (_mm512_castps_pd(l2[n]), _mm512_castps_pd(l2[n + 2]));
            _mm512_add_ps(
                _mm512_castpd_ps(_mm512_unpacklo_pd(a, b)),
                _mm512_castpd_ps(_mm512_unpackhi_pd(a, b)),
            )
        });
        // Lane i + lane i + 1.
        _mm512_add_ps(
            _mm512_shuffle_ps::<0b10_00_10_00>(l3[0], l3[1]),
            _mm512_shuffle_ps::<0b11_01_11_01>(l3[0], l3[1]),
        )
    }

    /// The sum of a vector's sixteen lanes: lane `i` plus lane `i + 8`, then `i + 4`,
    /// `i + 2`, `i + 1` (the order [`reduce16`] reproduces).
    #[target_feature(enable = "avx512f")]
    #[inline]
    fn hsum512(v: __m512) -> f32 {
        let hi = _mm256_castpd_ps(_mm512_extractf64x4_pd::<1>(_mm512_castps_pd(v)));
        let h = _mm256_add_ps(_mm512_castps512_ps256(v), hi);
        let q = _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps::<1>(h));
        let p = _mm_add_ps(q, _mm_movehl_ps(q, q));
        _mm_cvtss_f32(_mm_add_ss(p, _mm_movehdup_ps(p)))
    }

    /// # Safety
    /// The CPU must support AVX-512F; `rows` must hold `w.len()` rows of `out.len()` at
    /// `stride`.
    #[target_feature(enable = "avx512f,avx512bw,avx512vl")]
    pub(super) unsafe fn axpy_rows_avx512(w: &[f32], rows: &[f32], stride: usize, out: &mut [f32]) {
        // SAFETY: as this function's contract; f32 rows are read as they are.
        unsafe { axpy_rows512(w, rows, stride, out, F32_LOADS) }
    }

    /// # Safety
    /// The CPU must support AVX-512F, BW and VL; `a` and `b` must have equal lengths.
    #[target_feature(enable = "avx512f,avx512bw,avx512vl")]
    #[inline]
    pub(super) unsafe fn dot_avx512(a: &[f32], b: &[f32]) -> f32 {
        // SAFETY: as this function's contract.
        unsafe { dot512(a, b, F32_LOADS) }
    }

    /// # Safety
    /// The CPU must support AVX-512F, BW and VL; `x` and `out` must have equal lengths.
    #[target_feature(enable = "avx512f,avx512bw,avx512vl")]
    #[inline]
    pub(super) unsafe fn axpy_avx512(w: f32, x: &[f32], out: &mut [f32]) {
        // SAFETY: as this function's contract.
        unsafe { axpy512(w, x, out, F32_LOADS) }
    }

    /// How an AVX-512 kernel reads 16 row elements as f32: all of them, or the lanes of a
    /// mask (zeros elsewhere). f32 rows are read as they are, f16 rows widened.
    type Loads512<T> = (
        unsafe fn(*const T) -> __m512,
        unsafe fn(__mmask16, *const T) -> __m512,
    );

    /// f32 rows, read as they are.
    const F32_LOADS: Loads512<f32> = (load16_f32, maskz_load16_f32);

    /// 16 f32 at `p`.
    ///
    /// # Safety
    /// The CPU must support AVX-512F; `p..p + 16` must be readable.
    #[target_feature(enable = "avx512f,avx512bw,avx512vl")]
    #[inline]
    unsafe fn load16_f32(p: *const f32) -> __m512 {
        // SAFETY: the caller guarantees 16 readable floats at `p`.
        unsafe { _mm512_loadu_ps(p) }
    }

    /// The `m` lanes of 16 f32 at `p`, zeros in the others.
    ///
    /// # Safety
    /// The CPU must support AVX-512F; the `m` lanes must be readable.
    #[target_feature(enable = "avx512f,avx512bw,avx512vl")]
    #[inline]
    unsafe fn maskz_load16_f32(m: __mmask16, p: *const f32) -> __m512 {
        // SAFETY: the masked load touches only the lanes of `m`.
        unsafe { _mm512_maskz_loadu_ps(m, p) }
    }

    /// `Σ a[i] · b[i]`, `b` read through `loads`: 16 lanes of fused multiply-adds in
    /// order, a masked tail, then [`hsum512`]. The same operations whatever the element
    /// type, so an f16 row gives the bits of its widened f32 row.
    ///
    /// # Safety
    /// The CPU must support AVX-512F, BW and VL; `a` and `b` must have equal lengths.
    #[target_feature(enable = "avx512f,avx512bw,avx512vl")]
    #[inline]
    unsafe fn dot512<T>(a: &[f32], b: &[T], (load, maskz): Loads512<T>) -> f32 {
        let n = a.len();
        let (pa, pb) = (a.as_ptr(), b.as_ptr());
        let mut i = 0;
        // SAFETY: full loads cover `i..i + 16` with `i + 16 <= n`; the final masked loads
        // touch only the `n - i` valid lanes.
        unsafe {
            let mut acc = _mm512_setzero_ps();
            while i + 16 <= n {
                acc = _mm512_fmadd_ps(_mm512_loadu_ps(pa.add(i)), load(pb.add(i)), acc);
                i += 16;
            }
            if i < n {
                let m: __mmask16 = ((1u32 << (n - i)) - 1) as __mmask16;
                acc = _mm512_fmadd_ps(
                    _mm512_maskz_loadu_ps(m, pa.add(i)),
                    maskz(m, pb.add(i)),
                    acc,
                );
            }
            hsum512(acc)
        }
    }

    /// `out[i] += w · x[i]`, `x` read through `loads`, 16 lanes at a time and a masked tail.
    ///
    /// # Safety
    /// The CPU must support AVX-512F, BW and VL; `x` and `out` must have equal lengths.
    #[target_feature(enable = "avx512f,avx512bw,avx512vl")]
    #[inline]
    unsafe fn axpy512<T>(w: f32, x: &[T], out: &mut [f32], (load, maskz): Loads512<T>) {
        let n = x.len();
        let (px, po) = (x.as_ptr(), out.as_mut_ptr());
        let mut i = 0;
        // SAFETY: as in `dot512`; the masked store writes only the valid lanes.
        unsafe {
            let vw = _mm512_set1_ps(w);
            while i + 16 <= n {
                let r = _mm512_fmadd_ps(vw, load(px.add(i)), _mm512_loadu_ps(po.add(i)));
                _mm512_storeu_ps(po.add(i), r);
                i += 16;
            }
            if i < n {
                let m: __mmask16 = ((1u32 << (n - i)) - 1) as __mmask16;
                let r =
                    _mm512_fmadd_ps(vw, maskz(m, px.add(i)), _mm512_maskz_loadu_ps(m, po.add(i)));
                _mm512_mask_storeu_ps(po.add(i), m, r);
            }
        }
    }

    /// `out += Σ_i w[i] · row_i` for rows of `out.len()` at `stride`, read through
    /// `loads`: 64 columns at a time with the accumulators in registers across the rows,
    /// then the remaining columns row after row by [`axpy512`]. Per lane the multiply-adds
    /// are those of one [`axpy512`] per row in row order.
    ///
    /// # Safety
    /// The CPU must support AVX-512F, BW and VL; `rows` must hold `w.len()` rows of
    /// `out.len()` at `stride`.
    #[target_feature(enable = "avx512f,avx512bw,avx512vl")]
    #[inline]
    unsafe fn axpy_rows512<T>(
        w: &[f32],
        rows: &[T],
        stride: usize,
        out: &mut [f32],
        loads: Loads512<T>,
    ) {
        let d = out.len();
        let load = loads.0;
        let mut c = 0;
        // SAFETY: every access covers columns `c..c + 16 <= d` of rows inside the extent the
        // caller checked.
        unsafe {
            let pr = rows.as_ptr();
            while c + 64 <= d {
                let po = out.as_mut_ptr().add(c);
                let mut acc = [
                    _mm512_loadu_ps(po),
                    _mm512_loadu_ps(po.add(16)),
                    _mm512_loadu_ps(po.add(32)),
                    _mm512_loadu_ps(po.add(48)),
                ];
                for (i, &wi) in w.iter().enumerate() {
                    let vw = _mm512_set1_ps(wi);
                    let r = pr.add(i * stride + c);
                    for (j, a) in acc.iter_mut().enumerate() {
                        *a = _mm512_fmadd_ps(vw, load(r.add(16 * j)), *a);
                    }
                }
                for (j, a) in acc.iter().enumerate() {
                    _mm512_storeu_ps(po.add(16 * j), *a);
                }
                c += 64;
            }
        }
        if c < d {
            for (i, &wi) in w.iter().enumerate() {
                // SAFETY: as above.
                unsafe {
                    axpy512(
                        wi,
                        rows.get_unchecked(i * stride + c..i * stride + d),
                        &mut out[c..],
                        loads,
                    )
                };
            }
        }
    }

    /// 8 f16 at `p` widened to f32.
    ///
    /// # Safety
    /// The CPU must support F16C; `p..p + 8` must be readable.
    #[target_feature(enable = "avx2,fma,f16c")]
    #[inline]
    unsafe fn load8_f16(p: *const f16) -> __m256 {
        // SAFETY: the caller guarantees 8 readable halves at `p`.
        unsafe { _mm256_cvtph_ps(_mm_loadu_si128(p.cast::<__m128i>())) }
    }

    /// f16 rows, widened as they are loaded.
    const F16_LOADS_256: Loads256<f16> = (load8_f16, f16::to_f32);

    /// # Safety
    /// The CPU must support AVX2, FMA and F16C; `a` and `b` must have equal lengths.
    #[target_feature(enable = "avx2,fma,f16c")]
    #[inline]
    pub(super) unsafe fn dot_avx2_f16(a: &[f32], b: &[f16]) -> f32 {
        // SAFETY: as this function's contract.
        unsafe { dot256(a, b, F16_LOADS_256) }
    }

    /// # Safety
    /// The CPU must support AVX2, FMA and F16C; `x` and `out` must have equal lengths.
    #[target_feature(enable = "avx2,fma,f16c")]
    #[inline]
    pub(super) unsafe fn axpy_avx2_f16(w: f32, x: &[f16], out: &mut [f32]) {
        // SAFETY: as this function's contract.
        unsafe { axpy256(w, x, out, F16_LOADS_256) }
    }

    /// # Safety
    /// The CPU must support AVX2, FMA and F16C; `rows` must hold `out.len()` rows of
    /// `q.len()` at `stride`.
    #[target_feature(enable = "avx2,fma,f16c")]
    pub(super) unsafe fn dot_rows_avx2_f16(
        q: &[f32],
        rows: &[f16],
        stride: usize,
        out: &mut [f32],
    ) {
        // SAFETY: as this function's contract.
        unsafe { dot_rows256(q, rows, stride, out, F16_LOADS_256) }
    }

    /// # Safety
    /// The CPU must support AVX2, FMA and F16C; `rows` must hold `w.len()` rows of
    /// `out.len()` at `stride`.
    #[target_feature(enable = "avx2,fma,f16c")]
    pub(super) unsafe fn axpy_rows_avx2_f16(
        w: &[f32],
        rows: &[f16],
        stride: usize,
        out: &mut [f32],
    ) {
        // SAFETY: as this function's contract.
        unsafe { axpy_rows256(w, rows, stride, out, F16_LOADS_256) }
    }

    /// 16 f16 at `p` widened to f32.
    ///
    /// # Safety
    /// The CPU must support AVX-512F; `p..p + 16` must be readable.
    #[target_feature(enable = "avx512f")]
    #[inline]
    unsafe fn load16_f16(p: *const f16) -> __m512 {
        // SAFETY: the caller guarantees 16 readable halves at `p`.
        unsafe { _mm512_cvtph_ps(_mm256_loadu_si256(p.cast::<__m256i>())) }
    }

    /// The first `n - i < 16` f16 at `p` widened to f32, zeros in the other lanes.
    ///
    /// # Safety
    /// The CPU must support AVX-512F, BW and VL; the `m` lanes must be readable.
    #[target_feature(enable = "avx512f,avx512bw,avx512vl")]
    #[inline]
    unsafe fn maskz_load16_f16(m: __mmask16, p: *const f16) -> __m512 {
        // SAFETY: the masked load touches only the lanes of `m`.
        unsafe { _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, p.cast::<i16>())) }
    }

    /// f16 rows, widened as they are loaded.
    const F16_LOADS: Loads512<f16> = (load16_f16, maskz_load16_f16);

    /// # Safety
    /// The CPU must support AVX-512F, BW and VL; `a` and `b` must have equal lengths.
    #[target_feature(enable = "avx512f,avx512bw,avx512vl")]
    #[inline]
    pub(super) unsafe fn dot_avx512_f16(a: &[f32], b: &[f16]) -> f32 {
        // SAFETY: as this function's contract.
        unsafe { dot512(a, b, F16_LOADS) }
    }

    /// # Safety
    /// The CPU must support AVX-512F, BW and VL; `x` and `out` must have equal lengths.
    #[target_feature(enable = "avx512f,avx512bw,avx512vl")]
    #[inline]
    pub(super) unsafe fn axpy_avx512_f16(w: f32, x: &[f16], out: &mut [f32]) {
        // SAFETY: as this function's contract.
        unsafe { axpy512(w, x, out, F16_LOADS) }
    }

    /// # Safety
    /// The CPU must support AVX-512F, BW and VL; `rows` must hold `out.len()` rows of
    /// `q.len()` at `stride`.
    #[target_feature(enable = "avx512f,avx512bw,avx512vl")]
    pub(super) unsafe fn dot_rows_avx512_f16(
        q: &[f32],
        rows: &[f16],
        stride: usize,
        out: &mut [f32],
    ) {
        let d = q.len();
        // SAFETY: as this function's contract; 16 halves at a row's column `c + 16 <= d`.
        let done = unsafe { dot_rows_blocked(q, rows, stride, out, |p| load16_f16(p)) };
        for (k, o) in out.iter_mut().enumerate().skip(done) {
            // SAFETY: the caller checked the extent of `rows`.
            *o = unsafe { dot_avx512_f16(q, rows.get_unchecked(k * stride..k * stride + d)) };
        }
    }

    /// # Safety
    /// The CPU must support AVX-512F, BW and VL; `rows` must hold `w.len()` rows of
    /// `out.len()` at `stride`.
    #[target_feature(enable = "avx512f,avx512bw,avx512vl")]
    pub(super) unsafe fn axpy_rows_avx512_f16(
        w: &[f32],
        rows: &[f16],
        stride: usize,
        out: &mut [f32],
    ) {
        // SAFETY: as this function's contract.
        unsafe { axpy_rows512(w, rows, stride, out, F16_LOADS) }
    }

    /// `outs[h] += Σ_i ws[h][i] · row_i` for up to [`super::MAX_HEADS`] heads (more go in
    /// groups), each row of `d` (a multiple of 64) loaded once per 64 columns for all the
    /// heads through `load` (16 elements as f32). Per head and lane the multiply-adds are
    /// those of `axpy_rows_avx512` in the same row order, so each head's result is bit for
    /// bit its own `axpy_rows`.
    ///
    /// # Safety
    /// The CPU must support AVX-512F; `n` rows of `outs[h].len()` (a multiple of 64) at
    /// `stride` must lie inside `rows`; every `ws[h]` holds `n` weights.
    #[target_feature(enable = "avx512f,avx512bw,avx512vl")]
    #[inline]
    unsafe fn axpy_rows_heads_avx512<T>(
        ws: &[&[f32]],
        rows: &[T],
        stride: usize,
        outs: &mut [&mut [f32]],
        n: usize,
        load: impl Fn(*const T) -> __m512 + Copy,
    ) {
        for (wg, og) in ws
            .chunks(super::MAX_HEADS)
            .zip(outs.chunks_mut(super::MAX_HEADS))
        {
            // SAFETY: as this function's contract, for the heads of `wg`.
            unsafe {
                match wg.len() {
                    1 => heads_pass::<T, 1>(wg, rows, stride, og, n, load),
                    2 => heads_pass::<T, 2>(wg, rows, stride, og, n, load),
                    3 => heads_pass::<T, 3>(wg, rows, stride, og, n, load),
                    _ => heads_pass::<T, 4>(wg, rows, stride, og, n, load),
                }
            }
        }
    }

    /// One register pass of `axpy_rows_heads_avx512` for exactly `H` heads (a constant, so
    /// the `4 × H` accumulators stay in registers).
    ///
    /// # Safety
    /// As `axpy_rows_heads_avx512`, with `ws.len() == outs.len() == H`.
    #[target_feature(enable = "avx512f,avx512bw,avx512vl")]
    #[inline]
    unsafe fn heads_pass<T, const H: usize>(
        wg: &[&[f32]],
        rows: &[T],
        stride: usize,
        og: &mut [&mut [f32]],
        n: usize,
        load: impl Fn(*const T) -> __m512,
    ) {
        debug_assert!(wg.len() == H && og.len() == H);
        let d = og[0].len();
        let w: [*const f32; H] = core::array::from_fn(|h| wg[h].as_ptr());
        let mut c = 0;
        while c + 64 <= d {
            // SAFETY: columns `c .. c + 64 <= d` of rows `0 .. n`, inside the extent the
            // caller guarantees; every output holds `d` floats and every weight row `n`.
            unsafe {
                let mut acc = [[_mm512_setzero_ps(); 4]; H];
                for (h, a) in acc.iter_mut().enumerate() {
                    for (j, aj) in a.iter_mut().enumerate() {
                        *aj = _mm512_loadu_ps(og[h].as_ptr().add(c + 16 * j));
                    }
                }
                let pr = rows.as_ptr();
                for i in 0..n {
                    let r = pr.add(i * stride + c);
                    let v = [load(r), load(r.add(16)), load(r.add(32)), load(r.add(48))];
                    for (h, a) in acc.iter_mut().enumerate() {
                        let vw = _mm512_set1_ps(*w[h].add(i));
                        for (aj, vj) in a.iter_mut().zip(v) {
                            *aj = _mm512_fmadd_ps(vw, vj, *aj);
                        }
                    }
                }
                for (h, a) in acc.iter().enumerate() {
                    for (j, aj) in a.iter().enumerate() {
                        _mm512_storeu_ps(og[h].as_mut_ptr().add(c + 16 * j), *aj);
                    }
                }
            }
            c += 64;
        }
    }

    /// `axpy_rows_heads_avx512` over f32 rows.
    ///
    /// # Safety
    /// As `axpy_rows_heads_avx512`.
    #[target_feature(enable = "avx512f,avx512bw,avx512vl")]
    pub(super) unsafe fn axpy_rows_heads_avx512_f32(
        ws: &[&[f32]],
        rows: &[f32],
        stride: usize,
        outs: &mut [&mut [f32]],
        n: usize,
    ) {
        // SAFETY: as this function's contract; each load reads 16 floats of a row.
        unsafe { axpy_rows_heads_avx512(ws, rows, stride, outs, n, |p| _mm512_loadu_ps(p)) }
    }

    /// `axpy_rows_heads_avx512` over f16 rows, widened as they are loaded.
    ///
    /// # Safety
    /// As `axpy_rows_heads_avx512`.
    #[target_feature(enable = "avx512f,avx512bw,avx512vl")]
    pub(super) unsafe fn axpy_rows_heads_avx512_f16(
        ws: &[&[f32]],
        rows: &[f16],
        stride: usize,
        outs: &mut [&mut [f32]],
        n: usize,
    ) {
        // SAFETY: as this function's contract; each load reads 16 halves of a row.
        unsafe { axpy_rows_heads_avx512(ws, rows, stride, outs, n, |p| load16_f16(p)) }
    }

    /// `outs[h][i] = q_h · row_i` for up to [`super::MAX_HEADS`] query heads at a time (more
    /// go in groups), rows of `d = qs[h].len()` (a multiple of 16) read through `loads`. The
    /// first `n` rounded down to 16 rows go sixteen at a time, each row loaded once per 16
    /// columns for all the heads; per head and row the lane sums are accumulated and then
    /// reduced ([`reduce16`]) exactly as [`dot_rows_blocked`] does, and the remaining rows
    /// take [`dot512`], so each head's scores are bit for bit its own `dot_rows`.
    ///
    /// # Safety
    /// The CPU must support AVX-512F, BW and VL; `n` rows of `d` at `stride` must lie inside
    /// `rows`; every `outs[h]` holds `n` scores.
    #[target_feature(enable = "avx512f,avx512bw,avx512vl")]
    #[inline]
    unsafe fn dot_rows_heads_avx512<T>(
        qs: &[&[f32]],
        rows: &[T],
        stride: usize,
        outs: &mut [&mut [f32]],
        n: usize,
        loads: Loads512<T>,
    ) {
        for (qg, og) in qs
            .chunks(super::MAX_HEADS)
            .zip(outs.chunks_mut(super::MAX_HEADS))
        {
            // SAFETY: as this function's contract, for the heads of `qg`.
            let done = unsafe {
                match qg.len() {
                    1 => query_heads_pass::<T, 1, 8>(qg, rows, stride, og, n, loads.0),
                    2 => query_heads_pass::<T, 2, 8>(qg, rows, stride, og, n, loads.0),
                    3 => query_heads_pass::<T, 3, 8>(qg, rows, stride, og, n, loads.0),
                    _ => query_heads_pass::<T, 4, 4>(qg, rows, stride, og, n, loads.0),
                }
            };
            let d = qg[0].len();
            for (q, out) in qg.iter().zip(og.iter_mut()) {
                for (k, o) in out.iter_mut().enumerate().take(n).skip(done) {
                    // SAFETY: row `k < n` lies inside the extent the caller guarantees.
                    *o =
                        unsafe { dot512(q, rows.get_unchecked(k * stride..k * stride + d), loads) };
                }
            }
        }
    }

    /// The blocked rows of `dot_rows_heads_avx512` for exactly `H` heads, `R` rows of a
    /// block of sixteen at a time (constants, so the `H × R` running sums stay in
    /// registers); returns the rows scored (`n` rounded down to 16). Column by column, the
    /// heads' query vectors are loaded once and each of the `R` rows' keys once for all
    /// of them, so the `H × R` fused multiply-add chains are independent; per head and row
    /// they still run over the columns in order from zero, as in `dot_rows_blocked`.
    ///
    /// # Safety
    /// As `dot_rows_heads_avx512`, with `qs.len() == outs.len() == H` and `R` dividing 16.
    #[target_feature(enable = "avx512f,avx512bw,avx512vl")]
    #[inline]
    unsafe fn query_heads_pass<T, const H: usize, const R: usize>(
        qs: &[&[f32]],
        rows: &[T],
        stride: usize,
        outs: &mut [&mut [f32]],
        n: usize,
        load: unsafe fn(*const T) -> __m512,
    ) -> usize {
        debug_assert!(qs.len() == H && outs.len() == H && 16 % R == 0);
        let d = qs[0].len();
        let q: [*const f32; H] = core::array::from_fn(|h| qs[h].as_ptr());
        let mut i = 0;
        while i + 16 <= n {
            // SAFETY: rows `i .. i + 16 <= n` lie inside the extent the caller guarantees;
            // every load covers columns `c .. c + 16 <= d` of one of them or of a query;
            // every output holds `n` scores.
            unsafe {
                let base = rows.as_ptr().add(i * stride);
                let mut acc = [[_mm512_setzero_ps(); 16]; H];
                for part in (0..16).step_by(R) {
                    let pr: [*const T; R] =
                        core::array::from_fn(|j| base.add(SLOT_ROW[part + j] * stride));
                    let mut sums = [[_mm512_setzero_ps(); R]; H];
                    let mut c = 0;
                    while c < d {
                        let qc: [__m512; H] =
                            core::array::from_fn(|h| _mm512_loadu_ps(q[h].add(c)));
                        for (j, p) in pr.iter().enumerate() {
                            let k = load(p.add(c));
                            for (sum, qh) in sums.iter_mut().zip(qc) {
                                sum[j] = _mm512_fmadd_ps(qh, k, sum[j]);
                            }
                        }
                        c += 16;
                    }
                    for (a, sum) in acc.iter_mut().zip(sums) {
                        a[part..part + R].copy_from_slice(&sum);
                    }
                }
                for (a, out) in acc.iter().zip(outs.iter_mut()) {
                    _mm512_storeu_ps(out.as_mut_ptr().add(i), reduce16(a));
                }
            }
            i += 16;
        }
        i
    }

    /// `dot_rows_heads_avx512` over f32 rows.
    ///
    /// # Safety
    /// As `dot_rows_heads_avx512`.
    #[target_feature(enable = "avx512f,avx512bw,avx512vl")]
    pub(super) unsafe fn dot_rows_heads_avx512_f32(
        qs: &[&[f32]],
        rows: &[f32],
        stride: usize,
        outs: &mut [&mut [f32]],
        n: usize,
    ) {
        // SAFETY: as this function's contract.
        unsafe { dot_rows_heads_avx512(qs, rows, stride, outs, n, F32_LOADS) }
    }

    /// `dot_rows_heads_avx512` over f16 rows, widened as they are loaded.
    ///
    /// # Safety
    /// As `dot_rows_heads_avx512`.
    #[target_feature(enable = "avx512f,avx512bw,avx512vl")]
    pub(super) unsafe fn dot_rows_heads_avx512_f16(
        qs: &[&[f32]],
        rows: &[f16],
        stride: usize,
        outs: &mut [&mut [f32]],
        n: usize,
    ) {
        // SAFETY: as this function's contract.
        unsafe { dot_rows_heads_avx512(qs, rows, stride, outs, n, F16_LOADS) }
    }
}
