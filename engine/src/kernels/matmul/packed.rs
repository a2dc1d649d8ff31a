//! Q4_1, Q5_0 and Q8_0 weight matrices re-laid 16 output rows to a block, for the AVX2 and AVX-512 kernels that put one weight row in each 32-bit lane.
//!
//! Layout (this project's own): the rows are cut into groups of [`X16_ROWS`]; group `g`
//! (rows `16g .. 16g + 16`) is its `cols / 32` blocks one after another. A Q4_1 block is
//! [`X16_BLOCK`] bytes:
//!
//! | bytes | what |
//! |---|---|
//! | `0 .. 32` | the 16 rows' f16 scales `d`, row `j` at `2j` |
//! | `32 .. 64` | the 16 rows' f16 minimums `m` |
//! | `64 + 64k .. 128 + 64k`, `k < 4` | bytes `4k .. 4k + 4` of each row's 16 nibble bytes, row `j` at `4j` |
//!
//! A Q5_0 block is [`X16_BLOCK_Q5_0`] bytes: the 16 rows' f16 scales; at `32 + 4j` row
//! `j`'s 32 fifth bits re-laid for the kernels (bit `8t + k` is element `4k + t`'s, bit
//! `8t + 4 + k` element `16 + 4k + t`'s, `t, k < 4`: one shift and one mask then put the
//! fifth bits of a 4-byte run of nibbles at bit 4 of each byte); then, as for Q4_1, for
//! `k < 4` at `96 + 64k` bytes `4k .. 4k + 4` of each row's 16 nibble bytes.
//!
//! A Q8_0 block is [`X16_BLOCK_Q8_0`] bytes: the 16 f16 scales, then for `k < 8` at
//! `32 + 64k` bytes `4k .. 4k + 4` of each row's 32 quants, each plus 128 (as unsigned
//! bytes, for the unsigned × signed byte dot of AVX-512 VNNI; the AVX2 kernel flips them
//! back). One 512-bit load thus holds four weights of every row of the group, lane `j`
//! being row `j`; a 256-bit load holds them for rows 0–7 or 8–15 (the AVX2 kernels take a
//! group as two halves). A packed matrix is the same size as the GGML one.

use super::WeightMatrix;
use crate::gguf::GgmlType;

/// Output rows in one packed group (one per 32-bit lane of a 512-bit register).
pub const X16_ROWS: usize = 16;
/// Bytes of one packed Q4_1 block: 16 rows × 20 bytes.
pub const X16_BLOCK: usize = X16_ROWS * 20;
/// Bytes of one packed Q8_0 block: 16 rows × 34 bytes.
pub const X16_BLOCK_Q8_0: usize = X16_ROWS * 34;
/// Bytes of one packed Q5_0 block: 16 rows × 22 bytes.
pub const X16_BLOCK_Q5_0: usize = X16_ROWS * 22;

/// A Q5_0 block's fifth bits (`qh`, bit `e` for element `e`) in the packed order: bit
/// `8t + k` is element `4k + t`'s and bit `8t + 4 + k` element `16 + 4k + t`'s.
fn q5_fifth_bits_packed(qh: u32) -> u32 {
    let mut out = 0u32;
    for t in 0..4 {
        for k in 0..4 {
            out |= ((qh >> (4 * k + t)) & 1) << (8 * t + k);
            out |= ((qh >> (16 + 4 * k + t)) & 1) << (8 * t + 4 + k);
        }
    }
    out
}

/// A Q4_1, Q5_0 or Q8_0 `[rows, cols]` matrix in the 16-row layout of this module, owned.
#[derive(Clone)]
pub struct PackedWeights {
    ty: GgmlType,
    rows: usize,
    cols: usize,
    data: Vec<u8>,
}

impl std::fmt::Debug for PackedWeights {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PackedWeights")
            .field("ty", &self.ty)
            .field("rows", &self.rows)
            .field("cols", &self.cols)
            .finish_non_exhaustive()
    }
}

impl PackedWeights {
    /// Re-lay `w` when it is Q4_1, Q5_0 or Q8_0 with a row count that is a multiple of
    /// [`X16_ROWS`]; `None` for any other matrix (it keeps the row-by-row kernels).
    pub fn pack(w: &WeightMatrix<'_>) -> Option<PackedWeights> {
        let (rb, block) = match w.ty() {
            GgmlType::Q4_1 => (20, X16_BLOCK),
            GgmlType::Q8_0 => (34, X16_BLOCK_Q8_0),
            GgmlType::Q5_0 => (22, X16_BLOCK_Q5_0),
            _ => return None,
        };
        if w.rows() == 0 || !w.rows().is_multiple_of(X16_ROWS) {
            return None;
        }
        let nb = w.cols() / 32;
        let mut data = vec![0u8; w.rows() * nb * rb];
        for (g, group) in data.chunks_exact_mut(nb * block).enumerate() {
            for j in 0..X16_ROWS {
                let row = w.row_data(g * X16_ROWS + j);
                for (b, dst) in group.chunks_exact_mut(block).enumerate() {
                    let src = &row[b * rb..(b + 1) * rb];
                    dst[2 * j..2 * j + 2].copy_from_slice(&src[0..2]);
                    if w.ty() == GgmlType::Q4_1 {
                        dst[32 + 2 * j..34 + 2 * j].copy_from_slice(&src[2..4]);
                        for k in 0..4 {
                            let at = 64 + 64 * k + 4 * j;
                            dst[at..at + 4].copy_from_slice(&src[4 + 4 * k..8 + 4 * k]);
                        }
                    } else if w.ty() == GgmlType::Q5_0 {
                        let qh = u32::from_le_bytes([src[2], src[3], src[4], src[5]]);
                        dst[32 + 4 * j..36 + 4 * j]
                            .copy_from_slice(&q5_fifth_bits_packed(qh).to_le_bytes());
                        for k in 0..4 {
                            let at = 96 + 64 * k + 4 * j;
                            dst[at..at + 4].copy_from_slice(&src[6 + 4 * k..10 + 4 * k]);
                        }
                    } else {
                        for k in 0..8 {
                            let at = 32 + 64 * k + 4 * j;
                            for (d, s) in dst[at..at + 4].iter_mut().zip(&src[2 + 4 * k..6 + 4 * k])
                            {
                                *d = s ^ 0x80;
                            }
                        }
                    }
                }
            }
        }
        Some(PackedWeights {
            ty: w.ty(),
            rows: w.rows(),
            cols: w.cols(),
            data,
        })
    }

    /// Element type of the matrix packed.
    pub fn ty(&self) -> GgmlType {
        self.ty
    }

    /// Output rows.
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// Input columns.
    pub fn cols(&self) -> usize {
        self.cols
    }

    /// Bytes held.
    pub fn bytes(&self) -> usize {
        self.data.len()
    }

    /// Group `g`'s blocks (rows `16g .. 16g + 16`).
    pub(super) fn group(&self, g: usize) -> &[u8] {
        let block = match self.ty {
            GgmlType::Q4_1 => X16_BLOCK,
            GgmlType::Q5_0 => X16_BLOCK_Q5_0,
            _ => X16_BLOCK_Q8_0,
        };
        let len = self.cols / 32 * block;
        &self.data[g * len..(g + 1) * len]
    }
}
