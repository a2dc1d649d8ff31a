//! F32 tensors: plain little-endian IEEE-754 single precision, one element per "block".

use super::{BlockQuant, Q8Row};
use crate::gguf::GgmlType;

/// GGML `F32`: 4 bytes per element, little-endian.
#[derive(Debug, Clone, Copy)]
pub struct F32;

#[inline(always)]
fn at(b: &[u8], i: usize) -> f32 {
    f32::from_le_bytes([b[4 * i], b[4 * i + 1], b[4 * i + 2], b[4 * i + 3]])
}

impl BlockQuant for F32 {
    const TYPE: GgmlType = GgmlType::F32;
    const BLOCK_LEN: usize = 1;
    const BLOCK_BYTES: usize = 4;
    const ACT_TYPE: Option<GgmlType> = None;

    fn dequantize(src: &[u8], dst: &mut [f32]) {
        assert_eq!(src.len(), dst.len() * 4, "F32: byte length mismatch");
        for (d, s) in dst.iter_mut().zip(src.chunks_exact(4)) {
            *d = f32::from_le_bytes([s[0], s[1], s[2], s[3]]);
        }
    }

    fn quantize(src: &[f32], dst: &mut [u8]) {
        assert_eq!(dst.len(), src.len() * 4, "F32: byte length mismatch");
        for (d, s) in dst.chunks_exact_mut(4).zip(src) {
            d.copy_from_slice(&s.to_le_bytes());
        }
    }

    fn dot_f32(row: &[u8], x: &[f32]) -> f32 {
        super::float_row_dot_f32("F32", 4, at, row, x)
    }

    fn dot_q8(row: &[u8], act: Q8Row<'_>) -> f32 {
        super::float_row_dot_q8("F32", 4, at, row, act)
    }
}
