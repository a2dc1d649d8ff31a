//! Element-wise activations: SwiGLU, GeGLU, soft-capping and a numerically stable softmax.

/// SwiGLU feed-forward gate: `out[i] = silu(gate[i]) * up[i]` with `silu(g) = g / (1 + e^-g)`.
///
/// Shapes: `gate`, `up`, `out` all `[n_ff]` (the outputs of the `ffn_gate` and `ffn_up`
/// projections). Shazeer 2020, "GLU Variants Improve Transformer".
///
/// The sigmoid is taken from `t = e^-|g|` (never above 1, so nothing overflows):
/// `1 / (1 + t)` for `g ≥ 0`, `t / (1 + t)` below, with `e^x` the polynomial of
/// [`exp_nonpositive`]; `t` is 0 once `|g| > 87.3` (where `e^-|g|` leaves the normal
/// floats), so a very negative `g` gives `-0.0` and a very large one `g · u`, never NaN.
/// One plain-Rust body for every SIMD path (the compiler vectorises it sixteen or eight
/// lanes wide), so every path gives the same bits.
///
/// # Panics
/// If the three lengths differ.
pub fn swiglu(gate: &[f32], up: &[f32], out: &mut [f32]) {
    assert_eq!(gate.len(), up.len(), "swiglu: gate and up lengths differ");
    assert_eq!(gate.len(), out.len(), "swiglu: gate and out lengths differ");
    #[cfg(target_arch = "x86_64")]
    {
        if *x86::AVX512 {
            // SAFETY: AVX-512F was detected.
            return unsafe { x86::swiglu_avx512(gate, up, out) };
        }
        if *x86::AVX2 {
            // SAFETY: AVX2 and FMA were detected.
            return unsafe { x86::swiglu_avx2(gate, up, out) };
        }
    }
    swiglu_body(gate, up, out)
}

#[inline(always)]
fn swiglu_body(gate: &[f32], up: &[f32], out: &mut [f32]) {
    for ((o, &g), &u) in out.iter_mut().zip(gate).zip(up) {
        let a = g.abs();
        let t = if a > 87.3 { 0.0 } else { exp_nonpositive(-a) };
        // `1 / (1 + t)` or `t / (1 + t)`: one division of the chosen numerator, the same
        // correctly rounded quotient as either, at half the divisions of computing both.
        let sigmoid = if g >= 0.0 { 1.0 } else { t } / (1.0 + t);
        *o = g * sigmoid * u;
    }
}

/// The constants of [`exp_nonpositive`], shared with its intrinsic forms
/// (`kernels::flash`): `log2 e`, the two Cody-Waite parts of `ln 2`, the polynomial of
/// Cephes' `expf` (highest degree first) and `1.5 · 2^23`, whose addition leaves a whole
/// number in the low mantissa bits.
pub(crate) mod exp_consts {
    pub(crate) const LOG2E: f32 = std::f32::consts::LOG2_E;
    pub(crate) const C1: f32 = 0.693_359_4;
    pub(crate) const C2: f32 = -2.121_944_4e-4;
    pub(crate) const P: [f32; 6] = [
        1.987_569_1e-4,
        1.398_2e-3,
        8.333_452e-3,
        4.166_579_6e-2,
        0.166_666_65,
        0.5,
    ];
    pub(crate) const ROUND: f32 = 12_582_912.0;
}

/// `e^v` for `v` clamped to `[-87.3, 0]` (relative error about 2e-7): Cody-Waite
/// reduction `v = n·ln 2 + r` with `|r| ≤ ln 2 / 2` (two constants), `e^r = 1 + r + r²·P(r)`
/// with the degree-7 polynomial of Cephes' `expf`, times `2^n` built in the exponent bits.
/// Plain arithmetic without fused multiply-adds, so every SIMD path the compiler
/// vectorises it for gives the same bits.
#[inline(always)]
pub(crate) fn exp_nonpositive(v: f32) -> f32 {
    use exp_consts::{C1, C2, LOG2E, P, ROUND};
    let v = v.clamp(-87.3, 0.0);
    let n = (v * LOG2E + 0.5).floor();
    let r = (v - n * C1) - n * C2;
    let mut p = P[0];
    for c in &P[1..] {
        p = p * r + c;
    }
    let e = (p * r * r + r) + 1.0;
    // `2^n` in the exponent bits. `n` is a whole number in [-126, 0]: added to 1.5 · 2^23
    // it lands exactly in the low bits of the mantissa, read back as an integer without a
    // float-to-int cast (Rust's saturating `as i32`, which the compiler does not vectorise
    // and turns into sixteen scalar conversions per vector).
    let ni = ((n + ROUND).to_bits() as i32).wrapping_sub(ROUND.to_bits() as i32);
    e * f32::from_bits((ni.wrapping_add(127) << 23) as u32)
}

#[cfg(target_arch = "x86_64")]
pub(crate) mod x86 {
    use std::sync::LazyLock;

    /// Whether this CPU has AVX-512F (the element-wise kernels' widest path).
    pub(crate) static AVX512: LazyLock<bool> =
        LazyLock::new(|| is_x86_feature_detected!("avx512f"));
    /// Whether this CPU has AVX2 and FMA.
    pub(crate) static AVX2: LazyLock<bool> =
        LazyLock::new(|| is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma"));

    /// # Safety
    /// The CPU must support AVX-512F.
    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn swiglu_avx512(gate: &[f32], up: &[f32], out: &mut [f32]) {
        super::swiglu_body(gate, up, out)
    }

    /// # Safety
    /// The CPU must support AVX2 and FMA.
    #[target_feature(enable = "avx2,fma")]
    pub(super) unsafe fn swiglu_avx2(gate: &[f32], up: &[f32], out: &mut [f32]) {
        super::swiglu_body(gate, up, out)
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

/// GeGLU feed-forward gate (Gemma): `out[i] = gelu(gate[i]) * up[i]` with the tanh form
/// `gelu(g) = g/2 · (1 + tanh(√(2/π) · (g + 0.044715 g³)))` (Hendrycks & Gimpel 2016; what
/// Gemma's `gelu_pytorch_tanh` and llama.cpp's `ggml_gelu` compute). The tanh is evaluated
/// with `f32::tanh`, which saturates to ±1 without overflow or NaN.
///
/// Shapes: `gate`, `up`, `out` all `[n]`.
///
/// # Panics
/// If the three lengths differ.
pub fn geglu(gate: &[f32], up: &[f32], out: &mut [f32]) {
    assert_eq!(gate.len(), up.len(), "geglu: gate and up lengths differ");
    assert_eq!(gate.len(), out.len(), "geglu: gate and out lengths differ");
    const SQRT_2_OVER_PI: f32 = 0.797_884_6;
    for ((o, &g), &u) in out.iter_mut().zip(gate).zip(up) {
        let z = SQRT_2_OVER_PI * (g + 0.044_715 * g * g * g);
        *o = 0.5 * g * (1.0 + z.tanh()) * u;
    }
}

/// Soft-capping in place: `x[i] = cap · tanh(x[i] / cap)` (Gemma 2's final logits), which
/// keeps every value inside `(-cap, cap)` and the order of the values.
///
/// # Panics
/// If `cap` is not finite and positive.
pub fn softcap_in_place(x: &mut [f32], cap: f32) {
    assert!(
        cap.is_finite() && cap > 0.0,
        "softcap: cap must be positive, got {cap}"
    );
    for v in x.iter_mut() {
        *v = cap * (*v / cap).tanh();
    }
}
