//! Tensor infos (name, dims, type, data offset) and zero-copy views of tensor data.

use super::types::GgmlType;

/// GGML_MAX_DIMS: the most dimensions a GGUF tensor may have (ggml.h).
pub const MAX_DIMS: u32 = 4;

/// One tensor info from a GGUF header.
///
/// `dims` are in GGUF (ggml `ne`) order: `dims[0]` is the innermost, contiguous dimension.
/// A weight matrix `[out, in]` (rows = outputs) therefore has `dims = [in, out]`.
/// `offset` is in bytes from the start of the file's data section.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TensorInfo {
    /// Tensor name, e.g. `blk.0.attn_q.weight`.
    pub name: String,
    /// Dimensions, innermost first (at most [`MAX_DIMS`]).
    pub dims: Vec<u64>,
    /// Element type.
    pub ty: GgmlType,
    /// Byte offset of the data within the data section (a multiple of the file's alignment).
    pub offset: u64,
}

impl TensorInfo {
    /// Number of elements: the product of `dims` (1 for zero dims).
    ///
    /// Exact for every info the reader returns (it rejects overflowing dims); for a
    /// hand-built info whose product overflows, saturates at `u64::MAX`.
    pub fn n_elements(&self) -> u64 {
        self.dims
            .iter()
            .try_fold(1u64, |acc, &d| acc.checked_mul(d))
            .unwrap_or(u64::MAX)
    }

    /// Bytes of data: `n_elements / block_len * block_bytes` of the type (GGML block layout,
    /// ggml-common.h).
    ///
    /// Exact for every info the reader returns (it rejects partial blocks and overflow);
    /// for a hand-built inconsistent info, saturates at `u64::MAX`.
    pub fn n_bytes(&self) -> u64 {
        (self.n_elements() / self.ty.block_len() as u64)
            .saturating_mul(self.ty.block_bytes() as u64)
    }
}

/// A borrowed tensor: its info and its raw bytes in the file (no copy).
///
/// `data.len() == info.n_bytes()`. The bytes are in the GGML layout of `info.ty`,
/// little-endian. No alignment of `data.as_ptr()` is promised beyond one byte: decode with
/// byte-wise reads (`from_le_bytes`), not pointer casts.
#[derive(Debug, Clone, Copy)]
pub struct TensorView<'a> {
    /// The tensor's info.
    pub info: &'a TensorInfo,
    /// The tensor's bytes.
    pub data: &'a [u8],
}
