//! Scaled dot-product attention for one query row over a KV window, with grouped-query heads.

use super::activation::exp_nonpositive;
use super::flash;
use super::simd_vec::VecOps;

/// One layer's keys and values, addressed by position and KV head.
///
/// Implementations must compute [`KvSource::dot_key`] and [`KvSource::add_value`] with the
/// same [`VecOps`] primitives on the same head rows for equal storage, which is what makes
/// attention over two layouts of the same f32 data bit-identical (see [`ContiguousKv`] and
/// `engine::kv::PagedKv`).
pub trait KvSource {
    /// Number of KV heads per position.
    fn n_kv_heads(&self) -> usize;
    /// Coordinates per head.
    fn head_dim(&self) -> usize;
    /// Positions available (`0..len`).
    fn len(&self) -> usize;
    /// Whether no position is available.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// `q · K[pos, kv_head]`, with `q` of length `head_dim`.
    fn dot_key(&self, pos: usize, kv_head: usize, q: &[f32]) -> f32;
    /// `out += w * V[pos, kv_head]`, with `out` of length `head_dim`.
    fn add_value(&self, pos: usize, kv_head: usize, w: f32, out: &mut [f32]);

    /// Scores of a run of positions: `out[i] = q · K[lo + i, kv_head]` for
    /// `i < out.len()`. Bit-identical to [`KvSource::dot_key`] per position; sources
    /// override it to read whole runs of rows in one SIMD call.
    fn dot_keys(&self, lo: usize, kv_head: usize, q: &[f32], out: &mut [f32]) {
        for (i, o) in out.iter_mut().enumerate() {
            *o = self.dot_key(lo + i, kv_head, q);
        }
    }

    /// [`KvSource::dot_keys`] for several query heads of one KV head (a GQA group):
    /// `outs[h][i] = qs[h] · K[lo + i, kv_head]`, each head bit for bit its own
    /// `dot_keys`. Sources override it to read each key row once for all the heads
    /// ([`VecOps::dot_rows_heads`]).
    fn dot_keys_heads(&self, lo: usize, kv_head: usize, qs: &[&[f32]], outs: &mut [&mut [f32]]) {
        for (q, out) in qs.iter().zip(outs.iter_mut()) {
            self.dot_keys(lo, kv_head, q, out);
        }
    }

    /// A hint that the keys (`values == false`) or the values of positions `lo..lo + n` of
    /// `kv_head` will be read soon: sources whose rows may sit in memory issue prefetches
    /// for them. It changes no result; the default does nothing.
    fn prefetch(&self, lo: usize, n: usize, kv_head: usize, values: bool) {
        let _ = (lo, n, kv_head, values);
    }

    /// The SIMD path the source's reads run on, which the prefill kernel
    /// ([`causal_attention`]) takes too; [`VecOps::best`] unless the source says otherwise.
    fn ops(&self) -> VecOps {
        VecOps::best()
    }

    /// Widen the keys (`values == false`) or the values of positions `lo..lo + n` of
    /// `kv_head` to f32: row `i` into `out[i * stride..i * stride + head_dim]` (the rest of
    /// `out` untouched). Exact: f16 widens to f32 without rounding.
    ///
    /// # Panics
    /// If `lo + n > len()`, `kv_head >= n_kv_heads()`, `stride < head_dim()` or `out` is
    /// shorter than `(n - 1) * stride + head_dim`.
    fn read_rows(
        &self,
        lo: usize,
        n: usize,
        kv_head: usize,
        values: bool,
        out: &mut [f32],
        stride: usize,
    );

    /// `out += Σ_i w[i] * V[lo + i, kv_head]`, accumulated in position order;
    /// bit-identical to [`KvSource::add_value`] per position.
    fn add_values(&self, lo: usize, kv_head: usize, w: &[f32], out: &mut [f32]) {
        for (i, &wi) in w.iter().enumerate() {
            self.add_value(lo + i, kv_head, wi, out);
        }
    }

    /// [`KvSource::add_values`] for several query heads of one KV head (a GQA group):
    /// `outs[h] += Σ_i ws[h][i] * V[lo + i, kv_head]`, each head bit for bit its own
    /// `add_values`. Sources override it to read each value row once for all the heads
    /// ([`VecOps::axpy_rows_heads`]).
    fn add_values_heads(&self, lo: usize, kv_head: usize, ws: &[&[f32]], outs: &mut [&mut [f32]]) {
        for (w, out) in ws.iter().zip(outs.iter_mut()) {
            self.add_values(lo, kv_head, w, out);
        }
    }
}

/// Keys and values held in two contiguous f32 slices, each `[len, n_kv_heads, head_dim]`.
#[derive(Debug, Clone, Copy)]
pub struct ContiguousKv<'a> {
    k: &'a [f32],
    v: &'a [f32],
    n_kv_heads: usize,
    head_dim: usize,
    ops: VecOps,
}

impl<'a> ContiguousKv<'a> {
    /// Wrap `k` and `v`, both `[len, n_kv_heads, head_dim]` row-major, using the SIMD path
    /// [`VecOps::best`] picks.
    ///
    /// # Panics
    /// If `n_kv_heads` or `head_dim` is zero, the slices differ in length, or their length is
    /// not a multiple of `n_kv_heads * head_dim`.
    pub fn new(k: &'a [f32], v: &'a [f32], n_kv_heads: usize, head_dim: usize) -> Self {
        let row = n_kv_heads * head_dim;
        assert!(
            row > 0,
            "ContiguousKv: n_kv_heads and head_dim must be positive"
        );
        assert_eq!(k.len(), v.len(), "ContiguousKv: k and v lengths differ");
        assert_eq!(
            k.len() % row,
            0,
            "ContiguousKv: length {} is not a multiple of n_kv_heads * head_dim = {row}",
            k.len()
        );
        ContiguousKv {
            k,
            v,
            n_kv_heads,
            head_dim,
            ops: VecOps::best(),
        }
    }

    /// The same view on an explicit SIMD path.
    pub fn with_ops(self, ops: VecOps) -> Self {
        ContiguousKv { ops, ..self }
    }

    fn row(&self, pos: usize, kv_head: usize) -> std::ops::Range<usize> {
        assert!(
            kv_head < self.n_kv_heads,
            "ContiguousKv: kv_head {kv_head} out of range"
        );
        let start = (pos * self.n_kv_heads + kv_head) * self.head_dim;
        start..start + self.head_dim
    }

    /// The `n` rows of `kv_head` from position `lo` in `data` (`self.k` or `self.v`),
    /// from the first row's start to the last row's end, with their stride; `None` for
    /// no rows.
    fn run<'d>(
        &self,
        data: &'d [f32],
        lo: usize,
        n: usize,
        kv_head: usize,
    ) -> Option<(&'d [f32], usize)> {
        let last = lo + n.checked_sub(1)?;
        let span = self.row(lo, kv_head).start..self.row(last, kv_head).end;
        Some((&data[span], self.n_kv_heads * self.head_dim))
    }
}

impl KvSource for ContiguousKv<'_> {
    fn n_kv_heads(&self) -> usize {
        self.n_kv_heads
    }
    fn ops(&self) -> VecOps {
        self.ops
    }
    fn read_rows(
        &self,
        lo: usize,
        n: usize,
        kv_head: usize,
        values: bool,
        out: &mut [f32],
        stride: usize,
    ) {
        let data = if values { self.v } else { self.k };
        assert!(
            stride >= self.head_dim,
            "read_rows: stride {stride} < head_dim"
        );
        for i in 0..n {
            let row = &data[self.row(lo + i, kv_head)];
            out[i * stride..i * stride + self.head_dim].copy_from_slice(row);
        }
    }
    fn head_dim(&self) -> usize {
        self.head_dim
    }
    fn len(&self) -> usize {
        self.k.len() / (self.n_kv_heads * self.head_dim)
    }
    fn dot_key(&self, pos: usize, kv_head: usize, q: &[f32]) -> f32 {
        self.ops.dot(q, &self.k[self.row(pos, kv_head)])
    }
    fn add_value(&self, pos: usize, kv_head: usize, w: f32, out: &mut [f32]) {
        self.ops.axpy(w, &self.v[self.row(pos, kv_head)], out)
    }
    fn dot_keys(&self, lo: usize, kv_head: usize, q: &[f32], out: &mut [f32]) {
        if let Some((rows, stride)) = self.run(self.k, lo, out.len(), kv_head) {
            self.ops.dot_rows(q, rows, stride, out)
        }
    }
    fn dot_keys_heads(&self, lo: usize, kv_head: usize, qs: &[&[f32]], outs: &mut [&mut [f32]]) {
        let n = outs.first().map_or(0, |o| o.len());
        if let Some((rows, stride)) = self.run(self.k, lo, n, kv_head) {
            self.ops.dot_rows_heads(qs, rows, stride, outs)
        }
    }
    fn add_values(&self, lo: usize, kv_head: usize, w: &[f32], out: &mut [f32]) {
        if let Some((rows, stride)) = self.run(self.v, lo, w.len(), kv_head) {
            self.ops.axpy_rows(w, rows, stride, out)
        }
    }
    fn add_values_heads(&self, lo: usize, kv_head: usize, ws: &[&[f32]], outs: &mut [&mut [f32]]) {
        let n = ws.first().map_or(0, |w| w.len());
        if let Some((rows, stride)) = self.run(self.v, lo, n, kv_head) {
            self.ops.axpy_rows_heads(ws, rows, stride, outs)
        }
    }
}

/// Most query heads one call of a group form ([`KvSource::dot_keys_heads`],
/// [`KvSource::add_values_heads`]) takes from decode attention, and that the paged cache
/// serves in one pass: their per-head slices live on the stack. A larger group goes in
/// passes of this many heads (each head's result is its own either way).
pub const GROUP_PASS: usize = 8;

/// The passes `[c0, c1)` of at most [`GROUP_PASS`] heads that cover a group of `group`.
pub fn group_passes(group: usize) -> impl Iterator<Item = (usize, usize)> {
    (0..group)
        .step_by(GROUP_PASS)
        .map(move |c0| (c0, (c0 + GROUP_PASS).min(group)))
}

/// Key positions per attention tile. Tiles are aligned to multiples of this in absolute
/// position, so a query's tiles do not depend on the window's start, the rows it is
/// computed with, or the KV page size: prefill ([`causal_attention`]) and decode
/// ([`gqa_attention`]) read the same tiles for the same window.
pub const KV_TILE: usize = 32;

/// `x[i] = e^(x[i] - shift)` for every element, returning their sum (added in index order).
///
/// One polynomial for every SIMD path, in plain Rust without fused multiply-adds, so the
/// result is bit-identical whichever path the compiler vectorises it for: `x - shift` is
/// clamped to `[-87.3, 0]` (inputs are at most `shift`), split as `n·ln 2 + r` with
/// `|r| ≤ ln 2 / 2` (Cody-Waite, two constants), `e^r` by the degree-7 polynomial of
/// Cephes' `expf` (`1 + r + r²·P(r)`, relative error about 2e-7), times `2^n` built in
/// the exponent bits.
pub fn exp_shifted_sum(x: &mut [f32], shift: f32) -> f32 {
    #[cfg(target_arch = "x86_64")]
    {
        if *x86_exp::AVX512 {
            // SAFETY: AVX-512F was detected.
            return unsafe { x86_exp::avx512(x, shift) };
        }
        if *x86_exp::AVX2 {
            // SAFETY: AVX2 and FMA were detected.
            return unsafe { x86_exp::avx2(x, shift) };
        }
    }
    exp_shifted_body(x, shift)
}

#[inline(always)]
fn exp_shifted_body(x: &mut [f32], shift: f32) -> f32 {
    let mut sums = [0.0f32; 16];
    let mut chunks = x.chunks_exact_mut(16);
    let one = |v: f32| -> f32 { exp_nonpositive(v - shift) };
    for c in &mut chunks {
        for (v, s) in c.iter_mut().zip(sums.iter_mut()) {
            *v = one(*v);
            *s += *v;
        }
    }
    let mut sum = 0.0f32;
    for s in sums {
        sum += s;
    }
    for v in chunks.into_remainder() {
        *v = one(*v);
        sum += *v;
    }
    sum
}

#[cfg(target_arch = "x86_64")]
mod x86_exp {
    pub(super) use crate::kernels::activation::x86::{AVX2, AVX512};

    /// # Safety
    /// The CPU must support AVX-512F.
    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn avx512(x: &mut [f32], shift: f32) -> f32 {
        super::exp_shifted_body(x, shift)
    }

    /// # Safety
    /// The CPU must support AVX2 and FMA.
    #[target_feature(enable = "avx2,fma")]
    pub(super) unsafe fn avx2(x: &mut [f32], shift: f32) -> f32 {
        super::exp_shifted_body(x, shift)
    }
}

/// The tiles of `[lo, hi)`: `[lo, next multiple of KV_TILE)`, then whole tiles, then the
/// rest.
fn tiles(lo: usize, hi: usize) -> impl Iterator<Item = (usize, usize)> {
    let mut a = lo;
    std::iter::from_fn(move || {
        (a < hi).then(|| {
            let b = ((a / KV_TILE + 1) * KV_TILE).min(hi);
            let t = (a, b);
            a = b;
            t
        })
    })
}

fn check_shapes(kv: &impl KvSource, n_heads: usize, q: usize, out: usize, rows: usize) -> usize {
    let d = kv.head_dim();
    let n_kv = kv.n_kv_heads();
    assert!(
        n_kv > 0 && n_heads > 0 && n_heads.is_multiple_of(n_kv),
        "attention: n_heads {n_heads} must be a positive multiple of n_kv_heads {n_kv}"
    );
    assert_eq!(
        q,
        rows * n_heads * d,
        "attention: q must be [rows, n_heads, head_dim]"
    );
    assert_eq!(
        out,
        rows * n_heads * d,
        "attention: out must be [rows, n_heads, head_dim]"
    );
    n_heads / n_kv
}

/// Grouped-query attention of one query row over the KV positions `[lo, hi)`.
///
/// Shapes: `q` and `out` are `[n_heads, head_dim]`; `kv` holds `n_kv_heads` heads of
/// `head_dim`, and `n_heads` must be a multiple of `n_kv_heads`. Query head `h` reads KV
/// head `h / (n_heads / n_kv_heads)` (GQA, Ainslie et al. 2023; MHA when the counts are
/// equal, MQA when there is one KV head).
///
/// For each head: `s_p = (q_h · K[p]) * scale` for `p` in `[lo, hi)` (usually
/// `scale = 1/sqrt(head_dim)`); with `softcap = Some(c)`, `s_p = c * tanh(s_p / c)` (Gemma 2);
/// then `out_h = Σ_p e^(s_p - max) V[p] / Σ_p e^(s_p - max)`. A causal decode step passes
/// `lo = 0` (or a sliding-window start) and `hi = current position + 1`.
///
/// This is the decode path: one KV head group at a time, the window is read in tiles of
/// [`KV_TILE`] positions, and each tile of keys (then of values) serves every query head
/// of the group while it sits in the L1 cache, so the cache's pages come from memory once
/// per group, not once per query head. The group's scores (`group × (hi - lo)` floats, one
/// query row's worth) are exponentiated by [`exp_shifted_sum`], normalised, and the values
/// accumulated in position order.
///
/// `scratch` holds the group's scores; it is grown when shorter and reused across calls,
/// so a decode loop allocates only when the window grows. An empty window (`lo == hi`)
/// writes zeros.
///
/// # Panics
/// If a shape disagrees, `n_heads` is not a positive multiple of `n_kv_heads`, or
/// `lo > hi` or `hi > kv.len()`.
#[allow(clippy::too_many_arguments)]
pub fn gqa_attention(
    q: &[f32],
    kv: &impl KvSource,
    lo: usize,
    hi: usize,
    n_heads: usize,
    scale: f32,
    softcap: Option<f32>,
    out: &mut [f32],
    scratch: &mut Vec<f32>,
) {
    grouped(q, kv, lo, hi, n_heads, scale, softcap, out, None, scratch)
}

/// Key positions per segment of split decode attention ([`gqa_attention_part`],
/// [`split_segments`]): a multiple of [`KV_TILE`] and of the KV cache's page size (16).
pub const SEGMENT: usize = 8 * KV_TILE;

/// The segments a decode window `[lo, hi)` is split into: the window itself when it holds
/// at most [`SEGMENT`] positions (then [`gqa_attention`] serves it whole), otherwise
/// `[lo, next multiple of SEGMENT)`, whole segments, then the rest. The cut depends only on
/// the window (boundaries at absolute positions), never on the rows or threads it runs with.
pub fn split_segments(lo: usize, hi: usize) -> Vec<(usize, usize)> {
    if hi.saturating_sub(lo) <= SEGMENT {
        return vec![(lo, hi)];
    }
    let mut segs = Vec::with_capacity((hi - lo).div_ceil(SEGMENT) + 1);
    let mut a = lo;
    while a < hi {
        let b = ((a / SEGMENT + 1) * SEGMENT).min(hi);
        segs.push((a, b));
        a = b;
    }
    segs
}

/// Floats of one segment's partial result for `n_heads` heads of `head_dim`
/// ([`gqa_attention_part`]): `n_heads · (head_dim + 2)`.
pub fn part_len(n_heads: usize, head_dim: usize) -> usize {
    n_heads * (head_dim + 2)
}

/// The partial attention of one query row over one segment `[lo, hi)` of its window
/// (split-K decode attention, "flash-decoding"), to be combined by [`merge_parts`].
///
/// Shapes and scores as in [`gqa_attention`]. `part` (`[part_len(n_heads, head_dim)]`)
/// receives, head after head, the unnormalised accumulators `Σ_p e^(s_p - m_h) V[p]`
/// (`[n_heads, head_dim]`), then the segment maxima `m_h` (`[n_heads]`), then the sums
/// `Σ_p e^(s_p - m_h)` (`[n_heads]`). The scores are computed, exponentiated and the values
/// accumulated exactly as [`gqa_attention`] does over its window, without the final
/// normalisation. An empty segment gives zeros, maxima of `-inf` and sums of zero.
///
/// # Panics
/// As [`gqa_attention`], and if `part` has the wrong length.
#[allow(clippy::too_many_arguments)]
pub fn gqa_attention_part(
    q: &[f32],
    kv: &impl KvSource,
    lo: usize,
    hi: usize,
    n_heads: usize,
    scale: f32,
    softcap: Option<f32>,
    part: &mut [f32],
    scratch: &mut Vec<f32>,
) {
    let d = kv.head_dim();
    assert_eq!(
        part.len(),
        part_len(n_heads, d),
        "attention: part must be [n_heads * (head_dim + 2)]"
    );
    let (acc, stats) = part.split_at_mut(n_heads * d);
    grouped(
        q,
        kv,
        lo,
        hi,
        n_heads,
        scale,
        softcap,
        acc,
        Some(stats),
        scratch,
    )
}

/// Combine the partial results of consecutive segments of one window into the attention
/// output: `parts` holds the segments' [`gqa_attention_part`] results one after the other
/// (`[segments, part_len(n_heads, head_dim)]`), `out` is `[n_heads, head_dim]`.
///
/// Per head, with `M` the largest segment maximum: `out = Σ_s e^(m_s - M) acc_s /
/// Σ_s e^(m_s - M) sum_s`, the segments taken in order, so the result depends only on the
/// parts, not on the order or the threads that computed them. Heads whose sums are all
/// zero (an empty window) get zeros.
///
/// # Panics
/// If `out` is not `[n_heads, head_dim]` or `parts` is not a whole number of parts.
pub fn merge_parts(parts: &[f32], n_heads: usize, head_dim: usize, out: &mut [f32]) {
    let d = head_dim;
    let len = part_len(n_heads, d);
    assert_eq!(
        out.len(),
        n_heads * d,
        "merge_parts: out must be [n_heads, head_dim]"
    );
    assert!(
        len > 0 && parts.len().is_multiple_of(len),
        "merge_parts: {} floats are not whole parts of {len}",
        parts.len()
    );
    let (max_at, sum_at) = (n_heads * d, n_heads * d + n_heads);
    for (h, oh) in out.chunks_exact_mut(d).enumerate() {
        let m = parts
            .chunks_exact(len)
            .map(|p| p[max_at + h])
            .fold(f32::NEG_INFINITY, f32::max);
        oh.fill(0.0);
        let mut sum = 0.0f32;
        for p in parts.chunks_exact(len) {
            let s = p[sum_at + h];
            if s == 0.0 {
                continue;
            }
            let c = (p[max_at + h] - m).exp();
            sum += c * s;
            for (o, a) in oh.iter_mut().zip(&p[h * d..(h + 1) * d]) {
                *o += c * a;
            }
        }
        if sum > 0.0 {
            let inv = 1.0 / sum;
            for o in oh.iter_mut() {
                *o *= inv;
            }
        } else {
            oh.fill(0.0);
        }
    }
}

/// Decode attention as the decode core runs it, on one thread: [`gqa_attention`] when
/// [`split_segments`] leaves the window whole, otherwise one [`gqa_attention_part`] per
/// segment and [`merge_parts`]. The decode core runs the segments as parallel tasks and
/// merges them the same way, so its results equal this function's bit for bit. Agrees
/// with [`gqa_attention`] over the same window up to rounding.
///
/// # Panics
/// As [`gqa_attention`].
#[allow(clippy::too_many_arguments)]
pub fn decode_attention(
    q: &[f32],
    kv: &impl KvSource,
    lo: usize,
    hi: usize,
    n_heads: usize,
    scale: f32,
    softcap: Option<f32>,
    out: &mut [f32],
    scratch: &mut Vec<f32>,
) {
    let segs = split_segments(lo, hi);
    if segs.len() == 1 {
        return gqa_attention(q, kv, lo, hi, n_heads, scale, softcap, out, scratch);
    }
    let len = part_len(n_heads, kv.head_dim());
    let mut parts = vec![0.0f32; segs.len() * len];
    for (&(a, b), part) in segs.iter().zip(parts.chunks_exact_mut(len)) {
        gqa_attention_part(q, kv, a, b, n_heads, scale, softcap, part, scratch);
    }
    merge_parts(&parts, n_heads, kv.head_dim(), out);
}

/// Scale (and soft-cap) a row of scores in place, `s = s * scale` then `c * tanh(s / c)`,
/// and return their largest value (`-inf` for none). The maximum is kept in 16 lanes, so
/// the loop vectorises instead of waiting on one running maximum per score.
#[inline]
fn scale_scores(scores: &mut [f32], scale: f32, softcap: Option<f32>) -> f32 {
    let one = |s: &mut f32| -> f32 {
        let mut x = *s * scale;
        if let Some(c) = softcap {
            x = c * (x / c).tanh();
        }
        *s = x;
        x
    };
    let mut lanes = [f32::NEG_INFINITY; 16];
    let mut chunks = scores.chunks_exact_mut(16);
    for c in &mut chunks {
        for (s, m) in c.iter_mut().zip(lanes.iter_mut()) {
            let x = one(s);
            *m = if x > *m { x } else { *m };
        }
    }
    let mut max = lanes.into_iter().fold(f32::NEG_INFINITY, f32::max);
    for s in chunks.into_remainder() {
        max = max.max(one(s));
    }
    max
}

/// The body of [`gqa_attention`] (`stats: None`: normalised output) and of
/// [`gqa_attention_part`] (`stats: Some([max; n_heads] ++ [sum; n_heads])`: unnormalised
/// accumulators and the softmax statistics).
#[allow(clippy::too_many_arguments)]
fn grouped(
    q: &[f32],
    kv: &impl KvSource,
    lo: usize,
    hi: usize,
    n_heads: usize,
    scale: f32,
    softcap: Option<f32>,
    out: &mut [f32],
    mut stats: Option<&mut [f32]>,
    scratch: &mut Vec<f32>,
) {
    let group = check_shapes(kv, n_heads, q.len(), out.len(), 1);
    assert!(
        lo <= hi && hi <= kv.len(),
        "attention: window [{lo}, {hi}) outside the {} available positions",
        kv.len()
    );
    let d = kv.head_dim();
    let n = hi - lo;
    if scratch.len() < group * n {
        scratch.resize(group * n, 0.0);
    }
    out.fill(0.0);
    if let Some(st) = stats.as_deref_mut() {
        let (max, sum) = st.split_at_mut(n_heads);
        max.fill(f32::NEG_INFINITY);
        sum.fill(0.0);
    }
    if n == 0 {
        return;
    }
    for (kvh, (qg, og)) in q
        .chunks_exact(group * d)
        .zip(out.chunks_exact_mut(group * d))
        .enumerate()
    {
        // Scores of every head of the group, tile by tile: a tile of keys is read from
        // memory once and reused from the L1 cache by the group's other heads.
        // The next tile's rows are prefetched while this one is computed. The heads go
        // in passes of at most `GROUP_PASS`, their slices on the stack (no allocation
        // per tile); a group of up to `GROUP_PASS` heads is one pass.
        // The window's first segment of keys and values (all of a decode task's window,
        // which `split_segments` cuts at SEGMENT positions) is requested at once, so its
        // pages arrive together instead of a tile at a time behind the computation. The
        // next-tile prefetches below stay although they repeat part of this request: the
        // step measured faster with both (docs/design.md §2.0.1).
        kv.prefetch(lo, n.min(SEGMENT), kvh, false);
        kv.prefetch(lo, n.min(SEGMENT), kvh, true);
        for (c0, c1) in group_passes(group) {
            let mut qs: [&[f32]; GROUP_PASS] = [&[]; GROUP_PASS];
            for (slot, qh) in qs.iter_mut().zip(qg[c0 * d..c1 * d].chunks_exact(d)) {
                *slot = qh;
            }
            for (a, b) in tiles(lo, hi) {
                kv.prefetch(b, KV_TILE.min(hi - b), kvh, false);
                let mut outs: [&mut [f32]; GROUP_PASS] = Default::default();
                for (slot, row) in outs
                    .iter_mut()
                    .zip(scratch[c0 * n..c1 * n].chunks_exact_mut(n))
                {
                    *slot = &mut row[a - lo..b - lo];
                }
                kv.dot_keys_heads(a, kvh, &qs[..c1 - c0], &mut outs[..c1 - c0]);
            }
        }
        kv.prefetch(lo, (KV_TILE - lo % KV_TILE).min(n), kvh, true);
        for (g, scores) in scratch[..group * n].chunks_exact_mut(n).enumerate() {
            let max = scale_scores(scores, scale, softcap);
            let sum = exp_shifted_sum(scores, max);
            match stats.as_deref_mut() {
                None => {
                    let inv = 1.0 / sum;
                    for s in scores.iter_mut() {
                        *s *= inv;
                    }
                }
                Some(st) => {
                    let h = kvh * group + g;
                    st[h] = max;
                    st[n_heads + h] = sum;
                }
            }
        }
        // Values likewise: one tile of V rows serves every head of the group, each row
        // read once for all of them.
        for (c0, c1) in group_passes(group) {
            let mut outs: [&mut [f32]; GROUP_PASS] = Default::default();
            for (slot, o) in outs.iter_mut().zip(og[c0 * d..c1 * d].chunks_exact_mut(d)) {
                *slot = o;
            }
            let mut ws: [&[f32]; GROUP_PASS] = [&[]; GROUP_PASS];
            for (a, b) in tiles(lo, hi) {
                kv.prefetch(b, KV_TILE.min(hi - b), kvh, true);
                for (w, g) in ws.iter_mut().zip(c0..c1) {
                    *w = &scratch[g * n + (a - lo)..g * n + (b - lo)];
                }
                kv.add_values_heads(a, kvh, &ws[..c1 - c0], &mut outs[..c1 - c0]);
            }
        }
    }
}

/// Causal grouped-query attention of `rows` consecutive query rows (a prefill chunk): row
/// `i` is position `first_pos + i` and attends to `[0, first_pos + i + 1)`.
///
/// Shapes: `q` and `out` are `[rows, n_heads, head_dim]` (`rows = q.len() / (n_heads ·
/// head_dim)`); GQA as in [`gqa_attention`].
///
/// Flash attention as a matrix product, per KV head: the `rows × group` queries of the
/// head's GQA group are laid out transposed, one query per SIMD lane (multiplied by
/// `scale` as they are), and the window is read in tiles of [`KV_TILE`] positions aligned
/// to absolute positions. Each tile's keys and values are widened to f32 once
/// ([`KvSource::read_rows`]) into a small scratch, then `kernels::flash` computes the
/// score block `Q · Kᵀ` with register tiles of several query vectors by several keys,
/// updates every query's online softmax (running max and sum, the accumulator rescaled)
/// vertically in the lanes, and adds `P · V` with register tiles over `head_dim`. The
/// queries whose position precedes the tile are left out of it, and the last tiles of the
/// block mask each query's later positions to a weight of exactly 0. Every query goes
/// through the same operations whatever the other lanes hold, so a row's result depends
/// only on its query and position (a tile always folds all its [`KV_TILE`] slots, the
/// ones past the row masked), never on the rows it is computed with; it agrees with
/// [`gqa_attention`] over `[0, first_pos + i + 1)` up to rounding. The SIMD path is the
/// source's ([`KvSource::ops`]).
///
/// `scratch` holds the transposed queries, one tile of keys and values, the scores and
/// the accumulators; it is grown when shorter and reused across calls.
///
/// # Panics
/// If a shape disagrees, `first_pos + rows > kv.len()`, or a position reaches 2^24 (the
/// kernel compares positions as f32).
#[allow(clippy::too_many_arguments)]
pub fn causal_attention(
    q: &[f32],
    kv: &impl KvSource,
    first_pos: usize,
    n_heads: usize,
    scale: f32,
    softcap: Option<f32>,
    out: &mut [f32],
    scratch: &mut Vec<f32>,
) {
    let d = kv.head_dim();
    let width = n_heads * d;
    let rows = q.len().checked_div(width).unwrap_or(0);
    let group = check_shapes(kv, n_heads, q.len(), out.len(), rows);
    let end = first_pos + rows;
    assert!(
        end <= kv.len(),
        "attention: rows at positions {first_pos}..{end} past the {} available positions",
        kv.len()
    );
    assert!(
        end < 1 << 24,
        "attention: position {end} past the 2^24 the prefill kernel compares exactly"
    );
    if rows == 0 {
        return;
    }
    let isa = kv.ops().isa();
    let dp = d.next_multiple_of(flash::ROWS);
    let queries = rows * group;
    // One vector of padding lanes past the last query.
    let mp = queries + flash::lanes_of(isa);
    let sizes = [
        d * mp,       // queries, transposed
        KV_TILE * d,  // the tile's keys
        KV_TILE * dp, // the tile's values
        mp,           // each lane's position
        KV_TILE * mp, // scores, then probabilities
        dp * mp,      // output accumulators, transposed
        mp,           // running max
        mp,           // running sum
        mp,           // correction factors
    ];
    let total: usize = sizes.iter().sum();
    if scratch.len() < total {
        scratch.resize(total, 0.0);
    }
    let (qt, rest) = scratch[..total].split_at_mut(sizes[0]);
    let (kt, rest) = rest.split_at_mut(sizes[1]);
    let (vt, rest) = rest.split_at_mut(sizes[2]);
    let (pos, rest) = rest.split_at_mut(sizes[3]);
    let (s, rest) = rest.split_at_mut(sizes[4]);
    let (o, rest) = rest.split_at_mut(sizes[5]);
    let (max, rest) = rest.split_at_mut(sizes[6]);
    let (sum, corr) = rest.split_at_mut(sizes[7]);
    for (m, p) in pos.iter_mut().enumerate() {
        // Padding lanes: a position no key passes, so they are never masked (their
        // results are dropped).
        *p = if m < queries {
            (first_pos + m / group) as f32
        } else {
            f32::MAX
        };
    }
    for kvh in 0..kv.n_kv_heads() {
        qt.fill(0.0);
        for m in 0..queries {
            let at = ((m / group) * n_heads + kvh * group + m % group) * d;
            for (c, &x) in q[at..at + d].iter().enumerate() {
                qt[c * mp + m] = x * scale;
            }
        }
        o.fill(0.0);
        max.fill(f32::NEG_INFINITY);
        sum.fill(0.0);
        for (a, b) in tiles(0, end) {
            let n = b - a;
            kv.read_rows(a, n, kvh, false, kt, d);
            if n < KV_TILE || dp != d {
                vt.fill(0.0);
            }
            kv.read_rows(a, n, kvh, true, vt, dp);
            kt[n * d..].fill(0.0);
            if b < end {
                kv.prefetch(b, KV_TILE.min(end - b), kvh, false);
                kv.prefetch(b, KV_TILE.min(end - b), kvh, true);
            }
            // Rows before `first_row` do not reach this tile.
            let first_row = a.saturating_sub(first_pos);
            let tile = flash::Tile {
                qt,
                k: kt,
                v: vt,
                pos,
                d,
                mp,
                keys: KV_TILE,
                key0: a,
                first: first_row * group,
                end: queries,
                masked: first_pos + first_row < a + KV_TILE - 1,
                softcap,
            };
            let mut state = flash::State {
                s: &mut *s,
                o: &mut *o,
                max: &mut *max,
                sum: &mut *sum,
                corr: &mut *corr,
            };
            flash::fold(isa, &tile, &mut state);
        }
        for m in 0..queries {
            let at = ((m / group) * n_heads + kvh * group + m % group) * d;
            let inv = if sum[m] > 0.0 { 1.0 / sum[m] } else { 0.0 };
            for (c, x) in out[at..at + d].iter_mut().enumerate() {
                *x = o[c * mp + m] * inv;
            }
        }
    }
}
