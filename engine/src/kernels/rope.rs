//! Rotary position embedding (RoPE) in both pairings: adjacent pairs and rotate-half (NeoX).

/// Which coordinates of a head vector form the rotated pairs.
///
/// Both pairings rotate pair `i` (for `i` in `0..head_dim/2`) by the angle
/// `theta_i = pos * base^(-2i/head_dim)` (Su et al. 2021, "RoFormer").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RopeStyle {
    /// Pairs `(2i, 2i + 1)`. What GGUF LLaMA weights expect: llama.cpp's converter permutes
    /// the rows of `attn_q`/`attn_k` so that the Hugging Face rotate-half layout becomes this
    /// one (llama.cpp `LLAMA_ROPE_TYPE_NORM`).
    Adjacent,
    /// Pairs `(i, i + head_dim/2)`, the GPT-NeoX / Hugging Face `rotate_half` layout
    /// (llama.cpp `LLAMA_ROPE_TYPE_NEOX`).
    RotateHalf,
}

/// Precomputed inverse frequencies for one head size, base and pairing.
///
/// Angles are computed in f64 (`pos * inv_freq[i]`, then `sin_cos`) and rounded to f32 once,
/// so large positions keep their accuracy; the rotation itself is done in f32.
#[derive(Debug, Clone, PartialEq)]
pub struct Rope {
    head_dim: usize,
    style: RopeStyle,
    inv_freq: Vec<f64>,
}

impl Rope {
    /// RoPE for heads of `head_dim` coordinates with frequency base `base`
    /// (`llama.rope.freq_base`, 10000 for LLaMA 1/2, 100000 for SmolLM2).
    ///
    /// `inv_freq[i] = base^(-2i/head_dim)` for `i` in `0..head_dim/2`.
    ///
    /// # Panics
    /// If `head_dim` is zero or odd, or `base` is not finite and positive.
    pub fn new(head_dim: usize, base: f32, style: RopeStyle) -> Rope {
        assert!(
            head_dim > 0 && head_dim.is_multiple_of(2),
            "rope: head_dim must be even and positive, got {head_dim}"
        );
        assert!(
            base.is_finite() && base > 0.0,
            "rope: frequency base must be finite and positive, got {base}"
        );
        let d = head_dim as f64;
        let inv_freq = (0..head_dim / 2)
            .map(|i| (base as f64).powf(-2.0 * i as f64 / d))
            .collect();
        Rope {
            head_dim,
            style,
            inv_freq,
        }
    }

    /// RoPE with scaled frequencies: `inv_freq[i] = freq_scale · base^(-2i/head_dim) /
    /// factors[i]`, i.e. llama.cpp's `ggml_rope_ext` with `freq_scale` (linear scaling:
    /// `1 / rope.scaling.factor`) and `freq_factors` (Llama 3's `rope_freqs.weight`, whose
    /// angle `theta / factor` llama.cpp takes per pair), without YaRN (`ext_factor = 0`,
    /// `attn_factor = 1`). `Rope::scaled(d, b, s, 1.0, None)` is `Rope::new(d, b, s)`.
    ///
    /// # Panics
    /// As [`Rope::new`]; also if `factors` is not `[head_dim / 2]` or holds a factor that
    /// is not finite and positive, or `freq_scale` is not finite and positive.
    pub fn scaled(
        head_dim: usize,
        base: f32,
        style: RopeStyle,
        freq_scale: f32,
        factors: Option<&[f32]>,
    ) -> Rope {
        let mut rope = Rope::new(head_dim, base, style);
        assert!(
            freq_scale.is_finite() && freq_scale > 0.0,
            "rope: frequency scale must be finite and positive, got {freq_scale}"
        );
        if let Some(f) = factors {
            assert_eq!(
                f.len(),
                head_dim / 2,
                "rope: factors must be [head_dim / 2]"
            );
            assert!(
                f.iter().all(|x| x.is_finite() && *x > 0.0),
                "rope: frequency factors must be finite and positive"
            );
        }
        for (i, w) in rope.inv_freq.iter_mut().enumerate() {
            *w *= freq_scale as f64;
            if let Some(f) = factors {
                *w /= f[i] as f64;
            }
        }
        rope
    }

    /// Head size this table was built for.
    pub fn head_dim(&self) -> usize {
        self.head_dim
    }

    /// Pairing this table applies.
    pub fn style(&self) -> RopeStyle {
        self.style
    }

    /// Rotate every head of one token in place for absolute position `pos`.
    ///
    /// `x`: `[n_heads, head_dim]` row-major (the Q or K projection of one token). A sequence
    /// continuing at an offset simply passes its absolute position. No allocation.
    ///
    /// # Panics
    /// If `x.len() != n_heads * head_dim`.
    pub fn apply(&self, x: &mut [f32], n_heads: usize, pos: usize) {
        self.rotate(x, n_heads, &self.angles(pos));
    }

    /// The `(sin, cos)` of every pair's angle at absolute position `pos`
    /// (`[head_dim / 2]`, pair order), as [`Rope::apply`] computes them: for a token whose Q
    /// and K are rotated in every layer, computed once and passed to [`Rope::apply_angles`].
    pub fn angles(&self, pos: usize) -> Vec<(f32, f32)> {
        (0..self.inv_freq.len())
            .map(|i| self.angle(i, pos))
            .collect()
    }

    /// [`Rope::apply`] with the angles of its position given ([`Rope::angles`]): the same
    /// rotation, bit for bit, without the `sin_cos` calls.
    ///
    /// # Panics
    /// If `x.len() != n_heads * head_dim` or `angles.len() != head_dim / 2`.
    pub fn apply_angles(&self, x: &mut [f32], n_heads: usize, angles: &[(f32, f32)]) {
        assert_eq!(
            angles.len(),
            self.head_dim / 2,
            "rope: angles must be [head_dim / 2 = {}]",
            self.head_dim / 2
        );
        self.rotate(x, n_heads, angles);
    }

    /// `(sin, cos)` of pair `i`'s angle at `pos`: computed in f64, rounded to f32 once.
    fn angle(&self, i: usize, pos: usize) -> (f32, f32) {
        let (s, c) = (pos as f64 * self.inv_freq[i]).sin_cos();
        (s as f32, c as f32)
    }

    /// Rotate pair `i` of every head by the angle whose `(sin, cos)` is `angles[i]`, head
    /// by head (each head's pairs are contiguous, so the loop vectorises). Each output is
    /// `x0 · cos − x1 · sin` or `x0 · sin + x1 · cos`, two rounded products and one rounded
    /// sum, in any order of heads and pairs the same bits.
    fn rotate(&self, x: &mut [f32], n_heads: usize, angles: &[(f32, f32)]) {
        let d = self.head_dim;
        assert_eq!(
            x.len(),
            n_heads * d,
            "rope: x must be [n_heads = {n_heads}, head_dim = {d}]"
        );
        let half = d / 2;
        for head in x.chunks_exact_mut(d) {
            match self.style {
                RopeStyle::Adjacent => {
                    for (p, &(s, c)) in head.chunks_exact_mut(2).zip(angles) {
                        let (x0, x1) = (p[0], p[1]);
                        p[0] = x0 * c - x1 * s;
                        p[1] = x0 * s + x1 * c;
                    }
                }
                RopeStyle::RotateHalf => {
                    let (lo, hi) = head.split_at_mut(half);
                    for ((a, b), &(s, c)) in lo.iter_mut().zip(hi.iter_mut()).zip(angles) {
                        let (x0, x1) = (*a, *b);
                        *a = x0 * c - x1 * s;
                        *b = x0 * s + x1 * c;
                    }
                }
            }
        }
    }

    /// Rotate a batch of consecutive tokens (prefill): token `t` gets position `pos0 + t`.
    ///
    /// `x`: `[n_tokens, n_heads, head_dim]` row-major.
    ///
    /// # Panics
    /// If `x.len()` is not a multiple of `n_heads * head_dim`.
    pub fn apply_batch(&self, x: &mut [f32], n_heads: usize, pos0: usize) {
        let row = n_heads * self.head_dim;
        assert!(
            row > 0 && x.len().is_multiple_of(row),
            "rope: x must be [n_tokens, n_heads = {n_heads}, head_dim = {}]",
            self.head_dim
        );
        for (t, tok) in x.chunks_exact_mut(row).enumerate() {
            self.apply(tok, n_heads, pos0 + t);
        }
    }
}
