//! RMSNorm: scale a row by the reciprocal of its root mean square, then by a learned weight.

use super::simd_vec::VecOps;

/// RMSNorm of one row: `out[i] = x[i] / sqrt(mean(x²) + eps) * weight[i]`.
///
/// Shapes: `x`, `weight`, `out` all `[n]`. The sum of squares is a SIMD dot product on the
/// path [`VecOps::best`] picks; use [`rms_norm_with`] to choose the path. The mean is over
/// `n` (as in LLaMA, Zhang & Sennrich 2019); `eps` is `llama.attention.layer_norm_rms_epsilon`.
/// An empty row is a no-op.
///
/// # Panics
/// If the three lengths differ.
pub fn rms_norm(x: &[f32], weight: &[f32], eps: f32, out: &mut [f32]) {
    rms_norm_with(VecOps::best(), x, weight, eps, out);
}

/// [`rms_norm`] on an explicit SIMD path.
///
/// # Panics
/// If the three lengths differ.
pub fn rms_norm_with(ops: VecOps, x: &[f32], weight: &[f32], eps: f32, out: &mut [f32]) {
    assert_eq!(
        x.len(),
        weight.len(),
        "rms_norm: x and weight lengths differ"
    );
    assert_eq!(x.len(), out.len(), "rms_norm: x and out lengths differ");
    if x.is_empty() {
        return;
    }
    let mean_sq = ops.dot(x, x) / x.len() as f32;
    let inv_rms = 1.0 / (mean_sq + eps).sqrt();
    for ((o, &xi), &wi) in out.iter_mut().zip(x).zip(weight) {
        *o = xi * inv_rms * wi;
    }
}
