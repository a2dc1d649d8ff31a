//! Q4_0 blocks: an f16 scale and 32 unsigned 4-bit quants offset by 8 (`block_q4_0`, ggml-common.h).

use super::{BlockQuant, Q8Row, QK, f16_at};
use crate::gguf::GgmlType;
use half::f16;

/// GGML `Q4_0`: 18 bytes per 32 elements: `d: f16`, `qs: [u8; 16]`. Element `j < 16` is
/// the low nibble of `qs[j]`, element `j + 16` its high nibble; value `= (nibble − 8) · d`.
/// Dot products pair it with a Q8_0 activation (ggml's `vec_dot_type`).
#[derive(Debug, Clone, Copy)]
pub struct Q4_0;

impl BlockQuant for Q4_0 {
    const TYPE: GgmlType = GgmlType::Q4_0;
    const BLOCK_LEN: usize = QK;
    const BLOCK_BYTES: usize = 18;
    const ACT_TYPE: Option<GgmlType> = Some(GgmlType::Q8_0);

    fn dequantize(src: &[u8], dst: &mut [f32]) {
        assert_eq!(src.len() / 18 * QK, dst.len(), "Q4_0: block count mismatch");
        for (blk, out) in src.chunks_exact(18).zip(dst.chunks_exact_mut(QK)) {
            let d = f16_at(blk);
            for (j, &q) in blk[2..].iter().enumerate() {
                out[j] = ((q & 0x0F) as i32 - 8) as f32 * d;
                out[j + 16] = ((q >> 4) as i32 - 8) as f32 * d;
            }
        }
    }

    /// `quantize_row_q4_0_ref`: `d = x_maxabs / −8` (signed value of largest magnitude),
    /// nibble `= min(15, trunc(x / d + 8.5))`.
    fn quantize(src: &[f32], dst: &mut [u8]) {
        assert_eq!(dst.len() / 18 * QK, src.len(), "Q4_0: block count mismatch");
        for (x, blk) in src.chunks_exact(QK).zip(dst.chunks_exact_mut(18)) {
            let (mut amax, mut max) = (0.0f32, 0.0f32);
            for &v in x {
                if amax < v.abs() {
                    amax = v.abs();
                    max = v;
                }
            }
            let d = max / -8.0;
            let id = if d != 0.0 { 1.0 / d } else { 0.0 };
            blk[..2].copy_from_slice(&f16::from_f32(d).to_bits().to_le_bytes());
            for j in 0..16 {
                let lo = ((x[j] * id + 8.5) as i8).min(15) as u8;
                let hi = ((x[j + 16] * id + 8.5) as i8).min(15) as u8;
                blk[2 + j] = lo | (hi << 4);
            }
        }
    }

    fn dot_f32(row: &[u8], x: &[f32]) -> f32 {
        assert_eq!(
            row.len() / 18 * QK,
            x.len(),
            "Q4_0: row/activation length mismatch"
        );
        let mut sum = 0.0f32;
        for (blk, xb) in row.chunks_exact(18).zip(x.chunks_exact(QK)) {
            let mut s = 0.0f32;
            for (j, &q) in blk[2..].iter().enumerate() {
                s += ((q & 0x0F) as i32 - 8) as f32 * xb[j];
                s += ((q >> 4) as i32 - 8) as f32 * xb[j + 16];
            }
            sum += s * f16_at(blk);
        }
        sum
    }

    /// `ggml_vec_dot_q4_0_q8_0`: `Σ_b d_w · d_a · Σ_j (nibble_j − 8) · qa_j`.
    fn dot_q8(row: &[u8], act: Q8Row<'_>) -> f32 {
        assert_eq!(
            row.len() / 18 * QK,
            act.qs.len(),
            "Q4_0: row/activation length mismatch"
        );
        let mut sum = 0.0f32;
        for (b, (blk, qa)) in row
            .chunks_exact(18)
            .zip(act.qs.chunks_exact(QK))
            .enumerate()
        {
            let mut sumi = 0i32;
            for (j, &q) in blk[2..].iter().enumerate() {
                sumi += ((q & 0x0F) as i32 - 8) * qa[j] as i32;
                sumi += ((q >> 4) as i32 - 8) * qa[j + 16] as i32;
            }
            sum += sumi as f32 * (f16_at(blk) * act.d[b]);
        }
        sum
    }
}
