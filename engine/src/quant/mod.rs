//! GGML block quantization types behind one trait (dequantize, quantize, dot products).
//!
//! Each supported tensor type lives in its own file and implements [`BlockQuant`]. The
//! block layouts follow ggml's `ggml-common.h`; quantizers follow ggml's reference
//! (`quantize_row_*_ref` in `ggml-quants.c`). The trait methods are the portable
//! implementations; the SIMD paths in [`crate::kernels`] must agree with them.
//!
//! Quantized weights are multiplied with an activation row that has been quantized once
//! into 8-bit blocks ([`Q8Activation`]), pairing the types as ggml's `vec_dot_type` does:
//! Q4_0·Q8_0, Q4_1·Q8_1, Q5_0·Q8_0, Q5_1·Q8_1, Q8_0·Q8_0 (and Q8_1·Q8_0, ggml has no
//! Q8_1 weight kernel), and the K-quants Q4_K, Q5_K and Q6_K with Q8_K (blocks of 256).

#[cfg(target_arch = "x86_64")]
mod act_avx512;
#[path = "bf16.rs"]
mod bfloat16;
#[path = "f16.rs"]
mod float16;
#[path = "f32.rs"]
mod float32;
mod kquant;
mod q4_0;
mod q4_1;
mod q4_k;
mod q5_0;
mod q5_1;
mod q5_k;
mod q6_k;
mod q8_0;
mod q8_1;
mod q8_k;

pub use bfloat16::BF16;
pub use float16::F16;
pub use float32::F32;
pub use q4_0::Q4_0;
pub use q4_1::Q4_1;
pub use q4_k::Q4K;
pub use q5_0::Q5_0;
pub use q5_1::Q5_1;
pub use q5_k::Q5K;
pub use q6_k::Q6K;
pub use q8_0::Q8_0;
pub use q8_1::Q8_1;

pub(crate) use kquant::{kquant_acc, scales_mins_k4};

use crate::gguf::GgmlType;
use crate::isa::Isa;
use half::f16;

/// Elements per block of every 8-bit, 5-bit and 4-bit non-K block type handled here
/// (`QK4_0`, `QK5_0`, `QK8_0`, ...).
pub const QK: usize = 32;

/// Elements per block of the K-quants (`QK_K` in ggml-common.h): Q4_K, Q5_K, Q6_K, Q8_K.
pub const QK_K: usize = 256;

/// Errors for tensor data handed to the quantization layer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum QuantError {
    /// The tensor type has no implementation here.
    #[error(
        "tensor type {ty} is not supported by the quantized kernels (supported: F32, F16, BF16, Q8_0, Q8_1, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K)"
    )]
    Unsupported {
        /// The offending type.
        ty: GgmlType,
    },
    /// An element count (a row length or a buffer length) is not a whole number of blocks.
    #[error("{ty}: {what} of {len} elements is not a multiple of the {block}-element block")]
    NotBlockMultiple {
        /// Tensor type.
        ty: GgmlType,
        /// Which length (e.g. `"columns"`, `"destination"`).
        what: &'static str,
        /// The length in elements.
        len: usize,
        /// The type's block length.
        block: usize,
    },
    /// The byte buffer does not hold exactly the elements it should.
    #[error("{ty}: {elements} elements need {expected} bytes, got {actual} bytes")]
    ByteLength {
        /// Tensor type.
        ty: GgmlType,
        /// Element count the buffer should hold.
        elements: usize,
        /// Bytes required.
        expected: usize,
        /// Bytes given.
        actual: usize,
    },
    /// The type is read and multiplied here but has no quantizer (the K-quants and Q5_0 /
    /// Q5_1 come only from files quantized elsewhere, e.g. by llama.cpp).
    #[error("tensor type {ty} can be read but not quantized here")]
    NoQuantizer {
        /// The offending type.
        ty: GgmlType,
    },
    /// `rows × cols` (or its byte size) overflows `usize`.
    #[error("{ty}: shape {rows}x{cols} overflows the address space")]
    Overflow {
        /// Tensor type.
        ty: GgmlType,
        /// Row count.
        rows: usize,
        /// Column count.
        cols: usize,
    },
}

/// One GGML tensor type: its block geometry, conversion to and from f32, and dot products.
///
/// All methods work on whole blocks: byte slices hold `n / BLOCK_LEN` blocks of
/// `BLOCK_BYTES` bytes and f32 slices hold `n` elements. Lengths are the caller's
/// responsibility (the checked entry points are [`dequantize`], [`quantize`] and
/// [`crate::kernels::matmul::WeightMatrix::new`]); a mismatch panics.
pub trait BlockQuant {
    /// The GGUF type id this implements.
    const TYPE: GgmlType;
    /// Elements per block.
    const BLOCK_LEN: usize;
    /// Bytes per block.
    const BLOCK_BYTES: usize;
    /// ggml's `vec_dot_type`: the block type an activation row is quantized to for
    /// [`BlockQuant::dot_q8`], or `None` for float types, whose kernels use the f32 row.
    const ACT_TYPE: Option<GgmlType>;

    /// Whether [`BlockQuant::quantize`] is implemented (false for the types that are only
    /// read: Q5_0, Q5_1 and the K-quants).
    const QUANTIZES: bool = true;

    /// Decode `src` (whole blocks) into `dst` (`dst.len()` elements).
    fn dequantize(src: &[u8], dst: &mut [f32]);
    /// Encode `src` (whole blocks) into `dst` as ggml's reference quantizer does. Only
    /// called when [`BlockQuant::QUANTIZES`] (the checked entry point [`quantize`] refuses
    /// the others with [`QuantError::NoQuantizer`]); the default panics.
    fn quantize(_src: &[f32], _dst: &mut [u8]) {
        unreachable!(
            "{} has no quantizer (checked by quant::quantize)",
            Self::TYPE
        )
    }
    /// `Σ row[i] · x[i]` with the row decoded to f32; `x.len()` elements.
    fn dot_f32(row: &[u8], x: &[f32]) -> f32;
    /// `Σ row[i] · act[i]` with the activation quantized into 8-bit blocks (of type
    /// [`BlockQuant::ACT_TYPE`] for quantized types). Integer products per block, scaled
    /// by the block scales, as ggml's `ggml_vec_dot_*` reference loops do. Float types
    /// take the activation's decoded values `d · q`.
    fn dot_q8(row: &[u8], act: Q8Row<'_>) -> f32;
}

/// A view of one activation row quantized into 8-bit blocks: of 32 (Q8_0 or Q8_1) or of
/// 256 (Q8_K, the activation of the K-quants).
///
/// Held as separate arrays rather than ggml's interleaved `block_q8_*` bytes so SIMD
/// kernels read them directly; the values are the same: `d[b]` is the block scale
/// already rounded through f16 as ggml stores it (Q8_K keeps it in f32, as
/// `block_q8_K` does), `qs[32b..32b+32]` (Q8_K: `qs[256b..256b+256]`) the quants, for
/// Q8_1 `s[b]` is ggml's `s = d · Σ qs` rounded through f16 (empty otherwise), and for
/// Q8_K `bsums[16b + j]` is the sum of the quants `16j..16j+16` of block `b` (ggml's
/// `bsums`, empty otherwise).
#[derive(Debug, Clone, Copy)]
pub struct Q8Row<'a> {
    /// Quants, 32 (Q8_K: 256) per block.
    pub qs: &'a [i8],
    /// Block scales (f16-rounded; f32 for Q8_K), one per block.
    pub d: &'a [f32],
    /// Q8_1 block sums `d · Σ qs` (f16-rounded), one per block; empty for Q8_0 and Q8_K.
    pub s: &'a [f32],
    /// Q8_K sums of each 16 quants, 16 per block; empty for Q8_0 and Q8_1.
    pub bsums: &'a [i16],
}

/// A batch of activation rows quantized once into Q8_0 or Q8_1 blocks, reusable across
/// calls without reallocating.
#[derive(Debug, Clone)]
pub struct Q8Activation {
    ty: GgmlType,
    rows: usize,
    blocks: usize,
    qs: Vec<i8>,
    d: Vec<f32>,
    s: Vec<f32>,
    bsums: Vec<i16>,
    /// Per-block quant sums of the SIMD path (scratch).
    sums: Vec<i32>,
}

impl Default for Q8Activation {
    fn default() -> Self {
        Q8Activation::new()
    }
}

impl Q8Activation {
    /// An empty activation (no rows).
    pub fn new() -> Self {
        Q8Activation {
            ty: GgmlType::Q8_0,
            rows: 0,
            blocks: 0,
            qs: Vec::new(),
            d: Vec::new(),
            s: Vec::new(),
            bsums: Vec::new(),
            sums: Vec::new(),
        }
    }

    /// Quantize `rows` rows of `cols` elements (`x`: `[rows, cols]` row-major) into `ty`
    /// blocks (`Q8_0`, `Q8_1` or `Q8_K`), reusing this buffer. The scheme is ggml's
    /// `quantize_row_q8_0_ref` / `quantize_row_q8_1_ref`: `d = max|x| / 127`,
    /// `q = round(x / d)` (half away from zero); for Q8_K `quantize_row_q8_K_ref` (see
    /// [`crate::quant`]'s `q8_k`: signed scale, round half to even, f32 `d`).
    ///
    /// Panics if `ty` is not Q8_0/Q8_1/Q8_K, `cols` is not a multiple of 32 (Q8_K: 256)
    /// or `x.len() != rows * cols` (caller shape bugs).
    pub fn quantize(&mut self, ty: GgmlType, x: &[f32], rows: usize, cols: usize) {
        self.quantize_on(Isa::Portable, ty, x, rows, cols);
    }

    /// [`Q8Activation::quantize`] on the SIMD path `isa` (AVX-512 and up quantize sixteen
    /// lanes at a time; the other paths run the portable loop). Every path gives the same
    /// bits for every finite input. Panics as [`Q8Activation::quantize`].
    pub fn quantize_on(&mut self, isa: Isa, ty: GgmlType, x: &[f32], rows: usize, cols: usize) {
        assert!(
            matches!(ty, GgmlType::Q8_0 | GgmlType::Q8_1 | GgmlType::Q8K),
            "activation type must be Q8_0, Q8_1 or Q8_K, got {ty}"
        );
        if ty == GgmlType::Q8K {
            // One path for every ISA: the K-quant products' activation is quantized by
            // the portable loop (a small share of a product's time).
            assert!(
                cols.is_multiple_of(QK_K),
                "activation length {cols} is not a multiple of {QK_K}"
            );
            assert_eq!(x.len(), rows * cols, "activation buffer is not rows x cols");
            let nb = x.len() / QK_K;
            self.ty = ty;
            self.rows = rows;
            self.blocks = cols / QK_K;
            self.qs.resize(x.len(), 0);
            self.d.resize(nb, 0.0);
            self.s.clear();
            self.bsums.resize(nb * QK_K / 16, 0);
            for (b, (xb, qb)) in x
                .chunks_exact(QK_K)
                .zip(self.qs.chunks_exact_mut(QK_K))
                .enumerate()
            {
                self.d[b] = q8_k::quantize_block(xb, qb, &mut self.bsums[b * 16..(b + 1) * 16]);
            }
            return;
        }
        self.bsums.clear();
        assert!(
            cols.is_multiple_of(QK),
            "activation length {cols} is not a multiple of {QK}"
        );
        assert_eq!(x.len(), rows * cols, "activation buffer is not rows x cols");
        let nb = x.len() / QK;
        self.ty = ty;
        self.rows = rows;
        self.blocks = cols / QK;
        self.qs.resize(x.len(), 0);
        self.d.resize(nb, 0.0);
        let with_sum = ty == GgmlType::Q8_1;
        self.s.resize(if with_sum { nb } else { 0 }, 0.0);
        #[cfg(target_arch = "x86_64")]
        if isa >= Isa::Avx512 && isa.supported() {
            self.sums.resize(nb, 0);
            // SAFETY: the CPU supports AVX-512 F/BW (checked); `qs` holds `x.len()` quants,
            // `d` and `sums` one entry per block.
            unsafe { act_avx512::quantize_blocks(x, &mut self.qs, &mut self.d, &mut self.sums) };
            for b in 0..nb {
                let d = self.d[b];
                self.d[b] = f16::from_f32(d).to_f32();
                if with_sum {
                    self.s[b] = f16::from_f32(self.sums[b] as f32 * d).to_f32();
                }
            }
            return;
        }
        let _ = isa;
        for (b, (xb, qb)) in x
            .chunks_exact(QK)
            .zip(self.qs.chunks_exact_mut(QK))
            .enumerate()
        {
            let (d, sum) = quantize_q8_block(xb, qb);
            self.d[b] = f16::from_f32(d).to_f32();
            if with_sum {
                self.s[b] = f16::from_f32(sum as f32 * d).to_f32();
            }
        }
    }

    /// The block type the rows were quantized to.
    pub fn ty(&self) -> GgmlType {
        self.ty
    }

    /// Number of rows.
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// Row `i` (panics when out of range).
    pub fn row(&self, i: usize) -> Q8Row<'_> {
        assert!(
            i < self.rows,
            "activation row {i} out of range ({} rows)",
            self.rows
        );
        let nb = self.blocks;
        let bl = if self.ty == GgmlType::Q8K { QK_K } else { QK };
        Q8Row {
            qs: &self.qs[i * nb * bl..(i + 1) * nb * bl],
            d: &self.d[i * nb..(i + 1) * nb],
            s: if self.s.is_empty() {
                &[]
            } else {
                &self.s[i * nb..(i + 1) * nb]
            },
            bsums: if self.bsums.is_empty() {
                &[]
            } else {
                &self.bsums[i * nb * 16..(i + 1) * nb * 16]
            },
        }
    }
}

/// Quantize one block of 32 values to 8 bits as `quantize_row_q8_*_ref` does; returns the
/// unrounded scale `d` and the sum of the quants.
pub(crate) fn quantize_q8_block(x: &[f32], q: &mut [i8]) -> (f32, i32) {
    let amax = x.iter().fold(0.0f32, |m, v| m.max(v.abs()));
    let d = amax / 127.0;
    let id = if d != 0.0 { 1.0 / d } else { 0.0 };
    let mut sum = 0i32;
    for (qi, &xi) in q.iter_mut().zip(x) {
        *qi = round_half_away(xi * id) as i8;
        sum += *qi as i32;
    }
    (d, sum)
}

/// `v` rounded to the nearest integer, halfway cases away from zero: the same value as
/// `f32::round` (C's `roundf`, which ggml's reference quantizers call) for every input,
/// NaN and infinities included, but in plain arithmetic that the compiler vectorises
/// instead of one library call per element.
///
/// Adding and subtracting 2^23 rounds `|v| < 2^23` to the nearest integer with ties to
/// even (the float grid has unit spacing there); a tie that went down to an even number is
/// then moved up. Every `|v| >= 2^23` (and NaN) is already integral and is returned as is.
#[inline(always)]
pub fn round_half_away(v: f32) -> f32 {
    const TWO_23: f32 = 8_388_608.0;
    let a = v.abs();
    let nearest_even = (a + TWO_23) - TWO_23;
    let r = if a - nearest_even == 0.5 {
        nearest_even + 1.0
    } else {
        nearest_even
    };
    // `!(a < TWO_23)` keeps NaN as well as the large values.
    if a < TWO_23 { r.copysign(v) } else { v }
}

/// Read the little-endian f16 at `b[0..2]` as f32.
#[inline(always)]
pub(crate) fn f16_at(b: &[u8]) -> f32 {
    f16::from_bits(u16::from_le_bytes([b[0], b[1]])).to_f32()
}

/// Call `$body` with `$T` bound to the [`BlockQuant`] implementation for `$ty`, or
/// evaluate `$unsupported` for a type without one.
macro_rules! with_block_type {
    ($ty:expr, $T:ident => $body:expr, _ => $unsupported:expr) => {
        match $ty {
            $crate::gguf::GgmlType::F32 => {
                type $T = $crate::quant::F32;
                $body
            }
            $crate::gguf::GgmlType::F16 => {
                type $T = $crate::quant::F16;
                $body
            }
            $crate::gguf::GgmlType::BF16 => {
                type $T = $crate::quant::BF16;
                $body
            }
            $crate::gguf::GgmlType::Q8_0 => {
                type $T = $crate::quant::Q8_0;
                $body
            }
            $crate::gguf::GgmlType::Q8_1 => {
                type $T = $crate::quant::Q8_1;
                $body
            }
            $crate::gguf::GgmlType::Q4_0 => {
                type $T = $crate::quant::Q4_0;
                $body
            }
            $crate::gguf::GgmlType::Q4_1 => {
                type $T = $crate::quant::Q4_1;
                $body
            }
            $crate::gguf::GgmlType::Q5_0 => {
                type $T = $crate::quant::Q5_0;
                $body
            }
            $crate::gguf::GgmlType::Q5_1 => {
                type $T = $crate::quant::Q5_1;
                $body
            }
            $crate::gguf::GgmlType::Q4K => {
                type $T = $crate::quant::Q4K;
                $body
            }
            $crate::gguf::GgmlType::Q5K => {
                type $T = $crate::quant::Q5K;
                $body
            }
            $crate::gguf::GgmlType::Q6K => {
                type $T = $crate::quant::Q6K;
                $body
            }
            #[allow(unreachable_patterns)]
            _ => $unsupported,
        }
    };
}
pub(crate) use with_block_type;

/// Whether `ty` has an implementation here (F32, F16, BF16, Q8_0, Q8_1, Q4_0, Q4_1,
/// Q5_0, Q5_1, Q4_K, Q5_K, Q6_K).
pub fn supported(ty: GgmlType) -> bool {
    with_block_type!(ty, T => { let _ = T::TYPE; true }, _ => false)
}

/// The GGML `vec_dot_type` an activation is quantized to for weights of type `ty`
/// (`Some(Q8_0)` / `Some(Q8_1)` / `Some(Q8_K)`), `None` for float types or unsupported types.
pub fn activation_type(ty: GgmlType) -> Option<GgmlType> {
    with_block_type!(ty, T => T::ACT_TYPE, _ => None)
}

/// Check that `bytes` holds exactly `elements` elements of `ty` in whole blocks.
pub(crate) fn check_len(
    ty: GgmlType,
    what: &'static str,
    elements: usize,
    bytes: usize,
) -> Result<(), QuantError> {
    if !supported(ty) {
        return Err(QuantError::Unsupported { ty });
    }
    let block = ty.block_len();
    if !elements.is_multiple_of(block) {
        return Err(QuantError::NotBlockMultiple {
            ty,
            what,
            len: elements,
            block,
        });
    }
    let expected = ty.bytes_for(elements).ok_or(QuantError::Overflow {
        ty,
        rows: 1,
        cols: elements,
    })?;
    if expected != bytes {
        return Err(QuantError::ByteLength {
            ty,
            elements,
            expected,
            actual: bytes,
        });
    }
    Ok(())
}

/// Decode `src` (GGML blocks of type `ty`) into `dst.len()` f32 elements.
///
/// Errors: [`QuantError::Unsupported`] for a type without implementation,
/// [`QuantError::NotBlockMultiple`] when `dst.len()` is not whole blocks,
/// [`QuantError::ByteLength`] when `src` is not exactly those blocks.
pub fn dequantize(ty: GgmlType, src: &[u8], dst: &mut [f32]) -> Result<(), QuantError> {
    check_len(ty, "destination", dst.len(), src.len())?;
    with_block_type!(ty, T => T::dequantize(src, dst), _ => unreachable!("checked above"));
    Ok(())
}

/// Encode `src` into GGML blocks of type `ty`, as ggml's reference quantizer does.
///
/// Errors: [`QuantError::Unsupported`], [`QuantError::NoQuantizer`] for a type that is
/// only read (Q5_0, Q5_1, the K-quants), or [`QuantError::NotBlockMultiple`] when
/// `src.len()` is not a whole number of blocks.
pub fn quantize(ty: GgmlType, src: &[f32]) -> Result<Vec<u8>, QuantError> {
    if !supported(ty) {
        return Err(QuantError::Unsupported { ty });
    }
    if !with_block_type!(ty, T => T::QUANTIZES, _ => false) {
        return Err(QuantError::NoQuantizer { ty });
    }
    if !src.len().is_multiple_of(ty.block_len()) {
        return Err(QuantError::NotBlockMultiple {
            ty,
            what: "source",
            len: src.len(),
            block: ty.block_len(),
        });
    }
    let bytes = ty.bytes_for(src.len()).ok_or(QuantError::Overflow {
        ty,
        rows: 1,
        cols: src.len(),
    })?;
    let mut out = vec![0u8; bytes];
    with_block_type!(ty, T => T::quantize(src, &mut out), _ => unreachable!("checked above"));
    Ok(out)
}

/// `Σ row[i]·x[i]` for one row of `ty` blocks and an f32 activation, portable code.
///
/// Errors as [`dequantize`], for `x.len()` elements and `row.len()` bytes.
pub fn dot_f32(ty: GgmlType, row: &[u8], x: &[f32]) -> Result<f32, QuantError> {
    check_len(ty, "activation", x.len(), row.len())?;
    Ok(with_block_type!(ty, T => T::dot_f32(row, x), _ => unreachable!("checked above")))
}

/// `Σ row[i]·act[i]` for one row of `ty` blocks and a quantized activation row, portable
/// code (see [`BlockQuant::dot_q8`]).
///
/// Errors as [`dequantize`], for `act.qs.len()` elements and `row.len()` bytes. Panics
/// if `act`'s arrays are inconsistent (it is built by [`Q8Activation`]).
pub fn dot_q8(ty: GgmlType, row: &[u8], act: Q8Row<'_>) -> Result<f32, QuantError> {
    check_len(ty, "activation", act.qs.len(), row.len())?;
    Ok(with_block_type!(ty, T => T::dot_q8(row, act), _ => unreachable!("checked above")))
}

/// Dot product of a row of plain float elements (F32, F16, BF16; `width` bytes each,
/// read by `at`) with an f32 activation: eight partial sums so the loop vectorises,
/// then the tail. `name` is the type's name for the length-mismatch panic.
#[inline(always)]
pub(crate) fn float_row_dot_f32(
    name: &str,
    width: usize,
    at: impl Fn(&[u8], usize) -> f32,
    row: &[u8],
    x: &[f32],
) -> f32 {
    assert_eq!(
        row.len(),
        x.len() * width,
        "{name}: row/activation length mismatch"
    );
    let mut acc = [0.0f32; 8];
    let n8 = x.len() / 8 * 8;
    for i in (0..n8).step_by(8) {
        for (k, a) in acc.iter_mut().enumerate() {
            *a += at(row, i + k) * x[i + k];
        }
    }
    let mut tail = 0.0;
    for (i, xi) in x.iter().enumerate().skip(n8) {
        tail += at(row, i) * xi;
    }
    acc.iter().sum::<f32>() + tail
}

/// Dot product of a row of plain float elements with an activation quantized to Q8 blocks
/// (`QK` int8 values and one scale per block).
#[inline(always)]
pub(crate) fn float_row_dot_q8(
    name: &str,
    width: usize,
    at: impl Fn(&[u8], usize) -> f32,
    row: &[u8],
    act: Q8Row<'_>,
) -> f32 {
    assert_eq!(
        row.len(),
        act.qs.len() * width,
        "{name}: row/activation length mismatch"
    );
    let mut sum = 0.0f32;
    for (b, q) in act.qs.chunks_exact(QK).enumerate() {
        let mut s = 0.0f32;
        for (j, &qj) in q.iter().enumerate() {
            s += at(row, b * QK + j) * qj as f32;
        }
        sum += s * act.d[b];
    }
    sum
}
