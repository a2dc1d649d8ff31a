//! Q4_1 weight matrices re-laid 16 output rows to a block, for the AVX-512 kernels that put one weight row in each vector lane.
//!
//! Layout (this project's own): the rows are cut into groups of [`X16_ROWS`]; group `g`
//! (rows `16g .. 16g + 16`) is its `cols / 32` blocks one after another, each
//! [`X16_BLOCK`] bytes:
//!
//! | bytes | what |
//! |---|---|
//! | `0 .. 32` | the 16 rows' f16 scales `d`, row `j` at `2j` |
//! | `32 .. 64` | the 16 rows' f16 minimums `m` |
//! | `64 + 64k .. 128 + 64k`, `k < 4` | bytes `4k .. 4k + 4` of each row's 16 nibble bytes, row `j` at `4j` |
//!
//! so one 512-bit load holds four nibble bytes of every row of the group, lane `j` being
//! row `j`. The packed matrix is the same size as the GGML one (20 bytes per 32 weights).

use super::WeightMatrix;
use crate::gguf::GgmlType;

/// Output rows in one packed group (one per 32-bit lane of a 512-bit register).
pub const X16_ROWS: usize = 16;
/// Bytes of one packed block: 16 rows × 20 bytes of Q4_1.
pub const X16_BLOCK: usize = X16_ROWS * 20;

/// A Q4_1 `[rows, cols]` matrix in the 16-row layout of this module, owned.
#[derive(Clone)]
pub struct PackedWeights {
    rows: usize,
    cols: usize,
    data: Vec<u8>,
}

impl std::fmt::Debug for PackedWeights {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PackedWeights")
            .field("rows", &self.rows)
            .field("cols", &self.cols)
            .finish_non_exhaustive()
    }
}

impl PackedWeights {
    /// Re-lay `w` when it is Q4_1 with a row count that is a multiple of [`X16_ROWS`];
    /// `None` for any other matrix (it keeps the row-by-row kernels).
    pub fn pack(w: &WeightMatrix<'_>) -> Option<PackedWeights> {
        if w.ty() != GgmlType::Q4_1 || w.rows() == 0 || !w.rows().is_multiple_of(X16_ROWS) {
            return None;
        }
        let nb = w.cols() / 32;
        let mut data = vec![0u8; w.rows() * nb * 20];
        for (g, group) in data.chunks_exact_mut(nb * X16_BLOCK).enumerate() {
            for j in 0..X16_ROWS {
                let row = w.row_data(g * X16_ROWS + j);
                for (b, dst) in group.chunks_exact_mut(X16_BLOCK).enumerate() {
                    let src = &row[b * 20..(b + 1) * 20];
                    dst[2 * j..2 * j + 2].copy_from_slice(&src[0..2]);
                    dst[32 + 2 * j..34 + 2 * j].copy_from_slice(&src[2..4]);
                    for k in 0..4 {
                        let at = 64 + 64 * k + 4 * j;
                        dst[at..at + 4].copy_from_slice(&src[4 + 4 * k..8 + 4 * k]);
                    }
                }
            }
        }
        Some(PackedWeights {
            rows: w.rows(),
            cols: w.cols(),
            data,
        })
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
        let len = self.cols / 32 * X16_BLOCK;
        &self.data[g * len..(g + 1) * len]
    }
}
