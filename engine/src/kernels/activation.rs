//! Element-wise activations: SwiGLU (SiLU-gated linear unit) and a numerically stable softmax.

/// SwiGLU feed-forward gate: `out[i] = silu(gate[i]) * up[i]` with `silu(g) = g / (1 + e^-g)`.
///
/// Shapes: `gate`, `up`, `out` all `[n_ff]` (the outputs of the `ffn_gate` and `ffn_up`
/// projections). Shazeer 2020, "GLU Variants Improve Transformer". For very negative `g`,
/// `e^-g` overflows to infinity and `silu(g)` is `-0.0`, never NaN.
///
/// # Panics
/// If the three lengths differ.
pub fn swiglu(gate: &[f32], up: &[f32], out: &mut [f32]) {
    assert_eq!(gate.len(), up.len(), "swiglu: gate and up lengths differ");
    assert_eq!(gate.len(), out.len(), "swiglu: gate and out lengths differ");
    for ((o, &g), &u) in out.iter_mut().zip(gate).zip(up) {
        *o = g / (1.0 + (-g).exp()) * u;
    }
}

/// Softmax in place: `x[i] = e^(x[i] - max) / Σ_j e^(x[j] - max)`.
///
/// Shape: `x` is `[n]`. Subtracting the maximum keeps every exponent `≤ 0`, so large inputs
/// never overflow. Edge cases, all without panicking: an empty slice is left as is; when no
/// element is greater than `-inf` (all `-inf`) the result is uniform `1/n`; a `+inf` element
/// or a NaN makes the result NaN (as the mathematics would).
pub fn softmax_in_place(x: &mut [f32]) {
    if x.is_empty() {
        return;
    }
    let max = x.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    if max == f32::NEG_INFINITY && x.iter().all(|v| *v == f32::NEG_INFINITY) {
        let u = 1.0 / x.len() as f32;
        x.iter_mut().for_each(|v| *v = u);
        return;
    }
    let mut sum = 0.0f32;
    for v in x.iter_mut() {
        *v = (*v - max).exp();
        sum += *v;
    }
    let inv = 1.0 / sum;
    for v in x.iter_mut() {
        *v *= inv;
    }
}
