//! Q4_1 blocks: f16 scale, f16 minimum and 32 unsigned 4-bit quants (`block_q4_1`, ggml-common.h).

use super::{BlockQuant, Q8Row, QK, f16_at};
use crate::gguf::GgmlType;
use half::f16;

/// GGML `Q4_1`: 20 bytes per 32 elements: `d: f16`, `m: f16`, `qs: [u8; 16]`. Element
/// `j < 16` is the low nibble of `qs[j]`, element `j + 16` its high nibble; value
/// `= nibble · d + m`. Dot products pair it with a Q8_1 activation (ggml's `vec_dot_type`).
#[derive(Debug, Clone, Copy)]
pub struct Q4_1;

impl BlockQuant for Q4_1 {
    const TYPE: GgmlType = GgmlType::Q4_1;
    const BLOCK_LEN: usize = QK;
    const BLOCK_BYTES: usize = 20;
    const ACT_TYPE: Option<GgmlType> = Some(GgmlType::Q8_1);

    fn dequantize(src: &[u8], dst: &mut [f32]) {
        assert_eq!(src.len() / 20 * QK, dst.len(), "Q4_1: block count mismatch");
        for (blk, out) in src.chunks_exact(20).zip(dst.chunks_exact_mut(QK)) {
            let d = f16_at(blk);
            let m = f16_at(&blk[2..]);
            for (j, &q) in blk[4..].iter().enumerate() {
                out[j] = (q & 0x0F) as f32 * d + m;
                out[j + 16] = (q >> 4) as f32 * d + m;
            }
        }
    }

    /// `quantize_row_q4_1_ref`: `d = (max − min) / 15`, `m = min`,
    /// nibble `= min(15, trunc((x − min) / d + 0.5))`.
    fn quantize(src: &[f32], dst: &mut [u8]) {
        assert_eq!(dst.len() / 20 * QK, src.len(), "Q4_1: block count mismatch");
        for (x, blk) in src.chunks_exact(QK).zip(dst.chunks_exact_mut(20)) {
            let (mut min, mut max) = (f32::MAX, -f32::MAX);
            for &v in x {
                if v < min {
                    min = v;
                }
                if v > max {
                    max = v;
                }
            }
            let d = (max - min) / 15.0;
            let id = if d != 0.0 { 1.0 / d } else { 0.0 };
            blk[..2].copy_from_slice(&f16::from_f32(d).to_bits().to_le_bytes());
            blk[2..4].copy_from_slice(&f16::from_f32(min).to_bits().to_le_bytes());
            for j in 0..16 {
                let lo = (((x[j] - min) * id + 0.5) as i8).min(15) as u8;
                let hi = (((x[j + 16] - min) * id + 0.5) as i8).min(15) as u8;
                blk[4 + j] = lo | (hi << 4);
            }
        }
    }

    fn dot_f32(row: &[u8], x: &[f32]) -> f32 {
        assert_eq!(
            row.len() / 20 * QK,
            x.len(),
            "Q4_1: row/activation length mismatch"
        );
        let mut sum = 0.0f32;
        for (blk, xb) in row.chunks_exact(20).zip(x.chunks_exact(QK)) {
            let (mut s, mut xs) = (0.0f32, 0.0f32);
            for (j, &q) in blk[4..].iter().enumerate() {
                s += (q & 0x0F) as f32 * xb[j] + (q >> 4) as f32 * xb[j + 16];
                xs += xb[j] + xb[j + 16];
            }
            sum += s * f16_at(blk) + xs * f16_at(&blk[2..]);
        }
        sum
    }

    /// `ggml_vec_dot_q4_1_q8_1`: `Σ_b (d_w · d_a · Σ_j nibble_j · qa_j + m_w · s_a)`.
    fn dot_q8(row: &[u8], act: Q8Row<'_>) -> f32 {
        assert_eq!(
            row.len() / 20 * QK,
            act.qs.len(),
            "Q4_1: row/activation length mismatch"
        );
        assert_eq!(
            act.s.len(),
            act.d.len(),
            "Q4_1: activation must be Q8_1 (with sums)"
        );
        let mut sum = 0.0f32;
        for (b, (blk, qa)) in row
            .chunks_exact(20)
            .zip(act.qs.chunks_exact(QK))
            .enumerate()
        {
            let mut sumi = 0i32;
            for (j, &q) in blk[4..].iter().enumerate() {
                sumi += (q & 0x0F) as i32 * qa[j] as i32;
                sumi += (q >> 4) as i32 * qa[j + 16] as i32;
            }
            sum += (f16_at(blk) * act.d[b]) * sumi as f32 + f16_at(&blk[2..]) * act.s[b];
        }
        sum
    }
}
