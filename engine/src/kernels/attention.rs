//! Scaled dot-product attention for one query row over a KV window, with grouped-query heads.

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

    /// `out += Σ_i w[i] * V[lo + i, kv_head]`, accumulated in position order;
    /// bit-identical to [`KvSource::add_value`] per position.
    fn add_values(&self, lo: usize, kv_head: usize, w: &[f32], out: &mut [f32]) {
        for (i, &wi) in w.iter().enumerate() {
            self.add_value(lo + i, kv_head, wi, out);
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
}

impl KvSource for ContiguousKv<'_> {
    fn n_kv_heads(&self) -> usize {
        self.n_kv_heads
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
        if out.is_empty() {
            return;
        }
        let first = self.row(lo, kv_head).start;
        let last = self.row(lo + out.len() - 1, kv_head).end;
        let stride = self.n_kv_heads * self.head_dim;
        self.ops.dot_rows(q, &self.k[first..last], stride, out)
    }
    fn add_values(&self, lo: usize, kv_head: usize, w: &[f32], out: &mut [f32]) {
        if w.is_empty() {
            return;
        }
        let first = self.row(lo, kv_head).start;
        let last = self.row(lo + w.len() - 1, kv_head).end;
        let stride = self.n_kv_heads * self.head_dim;
        self.ops.axpy_rows(w, &self.v[first..last], stride, out)
    }
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
/// then `e_p = exp(s_p - max_p s_p)`, `w_p = e_p * (1 / Σ e)`, and
/// `out_h = Σ_p w_p V[p]` accumulated in position order. A causal decode step passes
/// `lo = 0` (or a sliding-window start) and `hi = current position + 1`.
///
/// `scratch` holds the window's scores; it is resized to `hi - lo` when shorter and reused
/// across calls, so a decode loop allocates only when the window grows. An empty window
/// (`lo == hi`) writes zeros.
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
    let d = kv.head_dim();
    let n_kv = kv.n_kv_heads();
    assert!(
        n_kv > 0 && n_heads > 0 && n_heads.is_multiple_of(n_kv),
        "attention: n_heads {n_heads} must be a positive multiple of n_kv_heads {n_kv}"
    );
    assert_eq!(
        q.len(),
        n_heads * d,
        "attention: q must be [n_heads, head_dim]"
    );
    assert_eq!(
        out.len(),
        n_heads * d,
        "attention: out must be [n_heads, head_dim]"
    );
    assert!(
        lo <= hi && hi <= kv.len(),
        "attention: window [{lo}, {hi}) outside the {} available positions",
        kv.len()
    );
    let group = n_heads / n_kv;
    let n = hi - lo;
    if scratch.len() < n {
        scratch.resize(n, 0.0);
    }
    let scores = &mut scratch[..n];
    for (h, (qh, oh)) in q.chunks_exact(d).zip(out.chunks_exact_mut(d)).enumerate() {
        oh.fill(0.0);
        if n == 0 {
            continue;
        }
        let kvh = h / group;
        kv.dot_keys(lo, kvh, qh, scores);
        let mut max = f32::NEG_INFINITY;
        for s in scores.iter_mut() {
            let mut x = *s * scale;
            if let Some(c) = softcap {
                x = c * (x / c).tanh();
            }
            *s = x;
            max = max.max(x);
        }
        let mut sum = 0.0f32;
        for s in scores.iter_mut() {
            *s = (*s - max).exp();
            sum += *s;
        }
        let inv = 1.0 / sum;
        for s in scores.iter_mut() {
            *s *= inv;
        }
        kv.add_values(lo, kvh, scores, oh);
    }
}
