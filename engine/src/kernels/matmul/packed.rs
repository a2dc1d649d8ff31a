//! Q4_0, Q4_1, Q5_0, Q8_0, Q4_K, Q5_K and Q6_K weight matrices re-laid 16 output rows to a block, for the AVX2 and AVX-512 kernels that put one weight row in each 32-bit lane.
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
//! A Q4_0 block is [`X16_BLOCK_Q4_0`] bytes: the 16 rows' f16 scales, then, as for Q4_1,
//! for `k < 4` at `32 + 64k` bytes `4k .. 4k + 4` of each row's 16 nibble bytes.
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
//! group as two halves).
//!
//! The K-quants are re-laid per 256-element super-block (`b`), their sub-block scales
//! decoded at pack time so that a lane's scale is one byte:
//!
//! A Q4_K block is [`X16_BLOCK_Q4K`] bytes: at `0` the 16 rows' f16 `d`, at `32` their f16
//! `dmin`; at `64 + 16s + j` row `j`'s 6-bit scale of sub-block `s` (`s < 8`, as
//! `get_scale_min_k4` unpacks it), at `192 + 16s + j` its 6-bit minimum; then for each
//! sub-block `s` and `k < 4`, at `320 + 256s + 64k + 4j`, four bytes of row `j` whose low
//! nibbles are the quants of elements `32s + 4k + t` and high nibbles those of
//! `32s + 16 + 4k + t` (`t < 4`): a sub-block is laid as a Q4_1 block is, so one 4-byte
//! run holds quants of one scale only.
//!
//! A Q5_K block is [`X16_BLOCK_Q5K`] bytes: the Q4_K layout of its low four bits (scales,
//! minimums and nibbles at the same offsets), then for each sub-block `s` at
//! `2368 + 64s + 4j` row `j`'s 32 fifth bits re-laid as a Q5_0 block's (bit `8t + k` is
//! element `32s + 4k + t`'s, bit `8t + 4 + k` element `32s + 16 + 4k + t`'s).
//!
//! A Q6_K block is [`X16_BLOCK_Q6K`] bytes: at `0` the 16 rows' f16 `d`; at `32 + 16s + j`
//! row `j`'s signed scale of sub-block `s` (`s < 16`, 16 elements each); then for each
//! pair `u < 8` of sub-blocks (elements `32u .. 32u + 32`) at `288 + 384u`: for `k < 4` at
//! `+ 64k + 4j` four bytes of row `j` whose low nibbles are the low four bits of the
//! unsigned quants (`q + 32`, 0..63) of elements `32u + 4k + t` and high nibbles those of
//! `32u + 16 + 4k + t`; for `k2 < 2` at `+ 256 + 64k2 + 4j` four bytes whose byte `t`
//! holds the top two bits of those quants for `k = 2k2` (element `32u + 4k + t`'s at bits
//! 4–5, `32u + 16 + 4k + t`'s at bits 6–7) and for `k = 2k2 + 1` (at bits 0–1 and 2–3): one
//! shift and one mask put each at bit 4 of its byte.
//!
//! A packed matrix is the same size as the GGML one, but for Q4_K (148 bytes per row and
//! super-block instead of 144: the scales unpacked) and Q5_K (180 instead of 176).

use super::WeightMatrix;
use crate::gguf::GgmlType;

/// Output rows in one packed group (one per 32-bit lane of a 512-bit register).
pub const X16_ROWS: usize = 16;
/// Bytes of one packed Q4_1 block: 16 rows × 20 bytes.
pub const X16_BLOCK: usize = X16_ROWS * 20;
/// Bytes of one packed Q4_0 block: 16 rows × 18 bytes.
pub const X16_BLOCK_Q4_0: usize = X16_ROWS * 18;
/// Bytes of one packed Q8_0 block: 16 rows × 34 bytes.
pub const X16_BLOCK_Q8_0: usize = X16_ROWS * 34;
/// Bytes of one packed Q5_0 block: 16 rows × 22 bytes.
pub const X16_BLOCK_Q5_0: usize = X16_ROWS * 22;
/// Bytes of one packed Q4_K super-block (256 elements): 16 rows × 148 bytes.
pub const X16_BLOCK_Q4K: usize = X16_ROWS * 148;
/// Bytes of one packed Q5_K super-block (256 elements): 16 rows × 180 bytes.
pub const X16_BLOCK_Q5K: usize = X16_ROWS * 180;
/// Bytes of one packed Q6_K super-block (256 elements): 16 rows × 210 bytes.
pub const X16_BLOCK_Q6K: usize = X16_ROWS * 210;

/// The 4-bit quants of a Q4_K block (144 bytes), element order.
fn q4_k_quants(blk: &[u8]) -> [u8; 256] {
    let mut q = [0u8; 256];
    for c in 0..4 {
        for l in 0..32 {
            let b = blk[16 + 32 * c + l];
            q[64 * c + l] = b & 0xF;
            q[64 * c + 32 + l] = b >> 4;
        }
    }
    q
}

/// The 5-bit quants (0..31) of a Q5_K block (176 bytes), element order.
fn q5_k_quants(blk: &[u8]) -> [u8; 256] {
    let mut q = [0u8; 256];
    for c in 0..4 {
        for l in 0..32 {
            let (b, h) = (blk[48 + 32 * c + l], blk[16 + l]);
            q[64 * c + l] = (b & 0xF) | (((h >> (2 * c)) & 1) << 4);
            q[64 * c + 32 + l] = (b >> 4) | (((h >> (2 * c + 1)) & 1) << 4);
        }
    }
    q
}

/// The unsigned 6-bit quants (`q + 32`, 0..63) of a Q6_K block (210 bytes), element order.
fn q6_k_quants(blk: &[u8]) -> [u8; 256] {
    let mut q = [0u8; 256];
    for h in 0..2 {
        let (ql, qh) = (&blk[64 * h..64 * h + 64], &blk[128 + 32 * h..160 + 32 * h]);
        for l in 0..32 {
            let o = 128 * h + l;
            q[o] = (ql[l] & 0xF) | ((qh[l] & 3) << 4);
            q[o + 32] = (ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4);
            q[o + 64] = (ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4);
            q[o + 96] = (ql[l + 32] >> 4) | ((qh[l] >> 6) << 4);
        }
    }
    q
}

/// Row `j`'s part of one packed Q4_K super-block `dst` from its GGML block `src`.
fn pack_q4_k(src: &[u8], j: usize, dst: &mut [u8]) {
    pack_k4_low(src, &q4_k_quants(src), j, dst);
}

/// Row `j`'s part of one packed Q5_K super-block `dst` from its GGML block `src`.
fn pack_q5_k(src: &[u8], j: usize, dst: &mut [u8]) {
    let q = q5_k_quants(src);
    pack_k4_low(src, &q, j, dst);
    for s in 0..8 {
        let fifth = (0..32).fold(0u32, |acc, e| acc | (((q[32 * s + e] >> 4) as u32) << e));
        let at = 2368 + 64 * s + 4 * j;
        dst[at..at + 4].copy_from_slice(&q5_fifth_bits_packed(fifth).to_le_bytes());
    }
}

/// Row `j`'s scales, minimums and the low four bits of its quants `q` (element order) in
/// the Q4_K layout of one packed super-block `dst`, from its GGML Q4_K or Q5_K block `src`
/// (the two share `d`, `dmin` and the 12 scale bytes at the start).
fn pack_k4_low(src: &[u8], q: &[u8; 256], j: usize, dst: &mut [u8]) {
    dst[2 * j..2 * j + 2].copy_from_slice(&src[0..2]);
    dst[32 + 2 * j..34 + 2 * j].copy_from_slice(&src[2..4]);
    let (sc, m) = crate::quant::scales_mins_k4(&src[4..16]);
    for s in 0..8 {
        dst[64 + 16 * s + j] = sc[s];
        dst[192 + 16 * s + j] = m[s];
    }
    for s in 0..8 {
        for k in 0..4 {
            for t in 0..4 {
                let e = 32 * s + 4 * k + t;
                dst[320 + 256 * s + 64 * k + 4 * j + t] = (q[e] & 0xF) | ((q[e + 16] & 0xF) << 4);
            }
        }
    }
}

/// Row `j`'s part of one packed Q6_K super-block `dst` from its GGML block `src`.
fn pack_q6_k(src: &[u8], j: usize, dst: &mut [u8]) {
    dst[2 * j..2 * j + 2].copy_from_slice(&src[208..210]);
    for s in 0..16 {
        dst[32 + 16 * s + j] = src[192 + s];
    }
    let q = q6_k_quants(src);
    for u in 0..8 {
        let base = 288 + 384 * u;
        for k in 0..4 {
            for t in 0..4 {
                let (lo, hi) = (q[32 * u + 4 * k + t], q[32 * u + 16 + 4 * k + t]);
                dst[base + 64 * k + 4 * j + t] = (lo & 0xF) | ((hi & 0xF) << 4);
                let top = (lo >> 4) | ((hi >> 4) << 2);
                let at = base + 256 + 64 * (k / 2) + 4 * j + t;
                dst[at] |= if k % 2 == 0 { top << 4 } else { top };
            }
        }
    }
}

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

/// A Q4_0, Q4_1, Q5_0, Q8_0, Q4_K, Q5_K or Q6_K `[rows, cols]` matrix in the 16-row layout of this module, owned.
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
    /// Re-lay `w` when it is Q4_0, Q4_1, Q5_0, Q8_0, Q4_K, Q5_K or Q6_K with a row count that is a
    /// multiple of [`X16_ROWS`]; `None` for any other matrix (it keeps the row-by-row
    /// kernels).
    pub fn pack(w: &WeightMatrix<'_>) -> Option<PackedWeights> {
        let (rb, block) = match w.ty() {
            GgmlType::Q4_0 => (18, X16_BLOCK_Q4_0),
            GgmlType::Q4_1 => (20, X16_BLOCK),
            GgmlType::Q8_0 => (34, X16_BLOCK_Q8_0),
            GgmlType::Q5_0 => (22, X16_BLOCK_Q5_0),
            GgmlType::Q4K => (144, X16_BLOCK_Q4K),
            GgmlType::Q5K => (176, X16_BLOCK_Q5K),
            GgmlType::Q6K => (210, X16_BLOCK_Q6K),
            _ => return None,
        };
        if w.rows() == 0 || !w.rows().is_multiple_of(X16_ROWS) {
            return None;
        }
        let nb = w.cols() / w.ty().block_len();
        let mut data = vec![0u8; w.rows() / X16_ROWS * nb * block];
        for (g, group) in data.chunks_exact_mut(nb * block).enumerate() {
            for j in 0..X16_ROWS {
                let row = w.row_data(g * X16_ROWS + j);
                for (b, dst) in group.chunks_exact_mut(block).enumerate() {
                    let src = &row[b * rb..(b + 1) * rb];
                    if w.ty() == GgmlType::Q4K {
                        pack_q4_k(src, j, dst);
                        continue;
                    }
                    if w.ty() == GgmlType::Q5K {
                        pack_q5_k(src, j, dst);
                        continue;
                    }
                    if w.ty() == GgmlType::Q6K {
                        pack_q6_k(src, j, dst);
                        continue;
                    }
                    dst[2 * j..2 * j + 2].copy_from_slice(&src[0..2]);
                    if w.ty() == GgmlType::Q4_0 {
                        for k in 0..4 {
                            let at = 32 + 64 * k + 4 * j;
                            dst[at..at + 4].copy_from_slice(&src[2 + 4 * k..6 + 4 * k]);
                        }
                    } else if w.ty() == GgmlType::Q4_1 {
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
            GgmlType::Q4_0 => X16_BLOCK_Q4_0,
            GgmlType::Q4_1 => X16_BLOCK,
            GgmlType::Q5_0 => X16_BLOCK_Q5_0,
            GgmlType::Q4K => X16_BLOCK_Q4K,
            GgmlType::Q5K => X16_BLOCK_Q5K,
            GgmlType::Q6K => X16_BLOCK_Q6K,
            _ => X16_BLOCK_Q8_0,
        };
        let len = self.cols / self.ty.block_len() * block;
        &self.data[g * len..(g + 1) * len]
    }
}
