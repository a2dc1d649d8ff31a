//! Matrix-vector (decode) and matrix-matrix (prefill) products of `[out, in]` GGML weight matrices.
//!
//! A weight matrix is `rows` output rows of `cols` inputs, each row a run of GGML blocks
//! (row-major, as GGUF stores `[in, out]`-shaped tensors, ne0 = `cols`). Quantized weights
//! are multiplied with the activation quantized once per call into Q8_0/Q8_1 blocks (the
//! pairing of ggml's `vec_dot_type`); float weights with the f32 activation. Output rows
//! are split across the threads of a [`Cpu`]'s rayon pool; the row-dot kernels are the
//! portable trait methods of [`crate::quant`] or the AVX2 / AVX-512 / AVX-512 VNNI
//! kernels of this module's per-ISA files, chosen from the [`Cpu`]'s [`Isa`].

#[cfg(target_arch = "x86_64")]
mod avx2;
#[cfg(target_arch = "x86_64")]
mod avx2_kquant;
#[cfg(target_arch = "x86_64")]
mod avx2_packed;
#[cfg(target_arch = "x86_64")]
mod avx2_q5;
#[cfg(target_arch = "x86_64")]
mod avx512;
pub mod packed;

use crate::gguf::GgmlType;
use crate::kernels::Isa;
use crate::kernels::pool::SpinPool;
use crate::quant::{self, BlockQuant, Q8Activation, Q8Row, QuantError};
use packed::{PackedWeights, X16_ROWS};
use std::cell::RefCell;

/// Smallest number of output rows handed to one rayon task.
const MIN_TASK_ROWS: usize = 32;
/// Tasks per thread for large matrices (load balance against rayon overhead).
const TASKS_PER_THREAD: usize = 2;
/// Largest transposed-output scratch (f32 elements), and largest quantized activation
/// (elements), kept between [`matmul`] calls.
const RETAIN_OUT_T: usize = 1 << 18;
/// Activation rows sharing one pass over a weight row in [`matmul`].
const GROUP: usize = 4;
/// Activation rows (tokens) of one register tile of the packed prefill product: each
/// packed weight block loaded into registers serves this many tokens × 16 output rows.
const TILE: usize = 8;
/// Tokens of one cache block of the packed prefill product: a task runs its weight groups
/// over this many tokens' quantized activations (at most 64 × 1536 bytes of quants, in
/// the L2 cache) before moving to the next block of tokens.
const TOKEN_BLOCK: usize = 64;

/// Execution context for the matrix products: a rayon pool of a fixed thread count and
/// the SIMD path its kernels take.
pub struct Cpu {
    pool: rayon::ThreadPool,
    spin: SpinPool,
    threads: usize,
    isa: Isa,
}

impl std::fmt::Debug for Cpu {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cpu")
            .field("threads", &self.threads)
            .field("isa", &self.isa)
            .finish()
    }
}

impl Cpu {
    /// A context with `threads` worker threads (0 means one per available core) running
    /// the `isa` path. An `isa` this CPU lacks falls back to the most capable supported
    /// path below it (ultimately [`Isa::Portable`]); [`Cpu::isa`] reports the path taken.
    ///
    /// Panics only if the operating system refuses to start the threads.
    pub fn new(threads: usize, isa: Isa) -> Cpu {
        let threads = if threads == 0 {
            std::thread::available_parallelism().map_or(1, |n| n.get())
        } else {
            threads
        };
        let isa = Isa::available()
            .into_iter()
            .rev()
            .find(|i| *i <= isa)
            .unwrap_or(Isa::Portable);
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .thread_name(|i| format!("genai-matmul-{i}"))
            .build()
            .expect("cannot start the matmul thread pool");
        let spin = SpinPool::new(threads, "genai-kernel");
        Cpu {
            pool,
            spin,
            threads,
            isa,
        }
    }

    /// Worker thread count.
    pub fn threads(&self) -> usize {
        self.threads
    }

    /// The SIMD path the kernels take.
    pub fn isa(&self) -> Isa {
        self.isa
    }

    /// The rayon pool (longer parallel loops, e.g. prefill attention, run on it).
    pub fn pool(&self) -> &rayon::ThreadPool {
        &self.pool
    }

    /// Run `body(i)` for every `i < n` on the spinning kernel pool (see
    /// [`crate::kernels::pool`]): the short loops of a decode step. Returns when all have
    /// run; a task's panic is resumed here.
    pub fn run_tasks(&self, n: usize, body: &(dyn Fn(usize) + Sync)) {
        self.spin.run(n, body)
    }

    /// Run `f(first_element / chunk, chunk_slice)` over `out` cut into chunks of `chunk`
    /// elements (the last may be shorter), on the spinning kernel pool.
    pub fn for_chunks(
        &self,
        out: &mut [f32],
        chunk: usize,
        f: &(dyn Fn(usize, &mut [f32]) + Sync),
    ) {
        assert!(chunk > 0, "for_chunks: chunk must be positive");
        let len = out.len();
        let base = SendPtr(out.as_mut_ptr());
        self.run_tasks(len.div_ceil(chunk), &|c| {
            let start = c * chunk;
            let end = (start + chunk).min(len);
            // SAFETY: the chunks `[c * chunk, min((c + 1) * chunk, len))` are disjoint and
            // inside `out`, which stays mutably borrowed until `run_tasks` returns.
            let part =
                unsafe { std::slice::from_raw_parts_mut(base.get().add(start), end - start) };
            f(c, part);
        });
    }

    /// Run `f(first_row, out_chunk)` over `out` split into chunks of whole rows of
    /// `row_len` elements, in parallel when worth it.
    fn for_row_chunks(
        &self,
        out: &mut [f32],
        row_len: usize,
        f: impl Fn(usize, &mut [f32]) + Sync + Send,
    ) {
        let rows = out.len().checked_div(row_len).unwrap_or(0);
        let per_task = task_rows(rows, self.threads);
        if self.threads == 1 || rows <= per_task {
            f(0, out);
            return;
        }
        self.for_chunks(out, per_task * row_len, &|c, chunk| f(c * per_task, chunk));
    }
}

/// Output rows per parallel task for `rows` rows on `threads` threads: whole packed
/// groups ([`X16_ROWS`]), at least [`MIN_TASK_ROWS`].
fn task_rows(rows: usize, threads: usize) -> usize {
    rows.div_ceil(threads * TASKS_PER_THREAD)
        .max(MIN_TASK_ROWS)
        .next_multiple_of(X16_ROWS)
}

/// A raw output pointer shared by the tasks of [`Cpu::for_chunks`], each writing its own
/// disjoint range.
#[derive(Clone, Copy)]
struct SendPtr(*mut f32);
// SAFETY: only used to hand disjoint ranges of one live slice to the pool's tasks.
unsafe impl Send for SendPtr {}
// SAFETY: as above.
unsafe impl Sync for SendPtr {}
impl SendPtr {
    fn get(self) -> *mut f32 {
        self.0
    }
}

impl Default for Cpu {
    /// One thread per available core, [`Isa::best`].
    fn default() -> Self {
        Cpu::new(0, Isa::best())
    }
}

/// A borrowed `[rows, cols]` weight matrix of one GGML type (rows = outputs).
#[derive(Debug, Clone, Copy)]
pub struct WeightMatrix<'a> {
    ty: GgmlType,
    rows: usize,
    cols: usize,
    row_bytes: usize,
    data: &'a [u8],
    packed: Option<&'a PackedWeights>,
}

impl<'a> WeightMatrix<'a> {
    /// View `data` as `rows` rows of `cols` elements of type `ty`.
    ///
    /// Errors: [`QuantError::Unsupported`] for a type without kernels,
    /// [`QuantError::NotBlockMultiple`] when `cols` is not whole blocks,
    /// [`QuantError::Overflow`] when the size overflows, [`QuantError::ByteLength`] when
    /// `data` is not exactly `rows × cols` elements.
    pub fn new(ty: GgmlType, rows: usize, cols: usize, data: &'a [u8]) -> Result<Self, QuantError> {
        if !quant::supported(ty) {
            return Err(QuantError::Unsupported { ty });
        }
        if !cols.is_multiple_of(ty.block_len()) {
            return Err(QuantError::NotBlockMultiple {
                ty,
                what: "columns",
                len: cols,
                block: ty.block_len(),
            });
        }
        let overflow = QuantError::Overflow { ty, rows, cols };
        let row_bytes = ty.bytes_for(cols).ok_or(overflow.clone())?;
        let elements = rows.checked_mul(cols).ok_or(overflow.clone())?;
        let expected = rows.checked_mul(row_bytes).ok_or(overflow)?;
        if data.len() != expected {
            return Err(QuantError::ByteLength {
                ty,
                elements,
                expected,
                actual: data.len(),
            });
        }
        Ok(WeightMatrix {
            ty,
            rows,
            cols,
            row_bytes,
            data,
            packed: None,
        })
    }

    /// The same matrix with its 16-row packing ([`PackedWeights::pack`] of this matrix),
    /// which the products use on the paths that have packed kernels ([`uses_packed`]:
    /// every SIMD path); the results are the same as without it up to float summation order, and a
    /// row's result does not depend on how many activation rows share the product.
    /// Panics when `p` has another shape (a caller bug).
    pub fn with_packed(mut self, p: &'a PackedWeights) -> WeightMatrix<'a> {
        assert!(
            self.ty == p.ty() && p.rows() == self.rows && p.cols() == self.cols,
            "with_packed: a {} {}x{} packing for a {} {}x{} matrix",
            p.ty(),
            p.rows(),
            p.cols(),
            self.ty,
            self.rows,
            self.cols
        );
        self.packed = Some(p);
        self
    }

    /// The packing attached by [`WeightMatrix::with_packed`].
    pub fn packed(&self) -> Option<&'a PackedWeights> {
        self.packed
    }

    /// Output rows.
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// Input columns (elements per row).
    pub fn cols(&self) -> usize {
        self.cols
    }

    /// Element type.
    pub fn ty(&self) -> GgmlType {
        self.ty
    }

    /// The GGML blocks of row `row` (panics when out of range).
    pub fn row_data(&self, row: usize) -> &'a [u8] {
        assert!(
            row < self.rows,
            "row {row} out of range ({} rows)",
            self.rows
        );
        &self.data[row * self.row_bytes..(row + 1) * self.row_bytes]
    }

    /// Decode row `row` into `out` (`cols` elements), e.g. for an embedding lookup.
    /// Panics when `row >= rows` or `out.len() != cols`.
    pub fn dequantize_row(&self, row: usize, out: &mut [f32]) {
        assert_eq!(out.len(), self.cols, "output length must equal cols");
        let src = self.row_data(row);
        quant::with_block_type!(self.ty, T => T::dequantize(src, out), _ => unreachable!("checked in new"));
    }
}

/// Kernel over one weight row and `N` quantized activation rows.
type QuantFn<const N: usize> = unsafe fn(&[u8], &[Q8Row<'_>; N]) -> [f32; N];
/// Kernel over one weight row and `N` f32 activation rows.
type FloatFn<const N: usize> = unsafe fn(&[u8], &[&[f32]; N]) -> [f32; N];

/// The row kernels for one weight type on one path.
#[derive(Clone, Copy)]
enum RowKernels {
    Quant {
        act: GgmlType,
        one: QuantFn<1>,
        group: QuantFn<GROUP>,
    },
    Float {
        one: FloatFn<1>,
        group: FloatFn<GROUP>,
    },
}

fn portable_quant<T: BlockQuant, const N: usize>(w: &[u8], a: &[Q8Row<'_>; N]) -> [f32; N] {
    core::array::from_fn(|i| T::dot_q8(w, a[i]))
}

fn portable_float<T: BlockQuant, const N: usize>(w: &[u8], x: &[&[f32]; N]) -> [f32; N] {
    core::array::from_fn(|i| T::dot_f32(w, x[i]))
}

fn portable_kernels<T: BlockQuant>() -> RowKernels {
    match T::ACT_TYPE {
        Some(act) => RowKernels::Quant {
            act,
            one: portable_quant::<T, 1>,
            group: portable_quant::<T, GROUP>,
        },
        None => RowKernels::Float {
            one: portable_float::<T, 1>,
            group: portable_float::<T, GROUP>,
        },
    }
}

/// The SIMD kernels of module `$m` for weight type `$ty`.
#[cfg(target_arch = "x86_64")]
macro_rules! simd_kernels {
    ($ty:expr, $($m:ident)::+) => {
        match $ty {
            GgmlType::Q4_0 => RowKernels::Quant {
                act: GgmlType::Q8_0,
                one: $($m)::+::q4_0::<1>,
                group: $($m)::+::q4_0::<GROUP>,
            },
            GgmlType::Q4_1 => RowKernels::Quant {
                act: GgmlType::Q8_1,
                one: $($m)::+::q4_1::<1>,
                group: $($m)::+::q4_1::<GROUP>,
            },
            GgmlType::Q8_0 => RowKernels::Quant {
                act: GgmlType::Q8_0,
                one: $($m)::+::q8::<1, 34>,
                group: $($m)::+::q8::<GROUP, 34>,
            },
            GgmlType::Q8_1 => RowKernels::Quant {
                act: GgmlType::Q8_0,
                one: $($m)::+::q8::<1, 36>,
                group: $($m)::+::q8::<GROUP, 36>,
            },
            GgmlType::F32 => RowKernels::Float {
                one: $($m)::+::f32::<1>,
                group: $($m)::+::f32::<GROUP>,
            },
            GgmlType::F16 => RowKernels::Float {
                one: $($m)::+::f16::<1>,
                group: $($m)::+::f16::<GROUP>,
            },
            GgmlType::BF16 => RowKernels::Float {
                one: $($m)::+::bf16::<1>,
                group: $($m)::+::bf16::<GROUP>,
            },
            // Q5_0, Q5_1 and the K-quants take the AVX2 kernels on every SIMD path (no
            // AVX-512 ones).
            GgmlType::Q5_0 => RowKernels::Quant {
                act: GgmlType::Q8_0,
                one: avx2_q5::q5_0::<1>,
                group: avx2_q5::q5_0::<GROUP>,
            },
            GgmlType::Q5_1 => RowKernels::Quant {
                act: GgmlType::Q8_1,
                one: avx2_q5::q5_1::<1>,
                group: avx2_q5::q5_1::<GROUP>,
            },
            GgmlType::Q4K => RowKernels::Quant {
                act: GgmlType::Q8K,
                one: avx2_kquant::q4_k::<1>,
                group: avx2_kquant::q4_k::<GROUP>,
            },
            GgmlType::Q5K => RowKernels::Quant {
                act: GgmlType::Q8K,
                one: avx2_kquant::q5_k::<1>,
                group: avx2_kquant::q5_k::<GROUP>,
            },
            GgmlType::Q6K => RowKernels::Quant {
                act: GgmlType::Q8K,
                one: avx2_kquant::q6_k::<1>,
                group: avx2_kquant::q6_k::<GROUP>,
            },
            other => quant::with_block_type!(other, T => portable_kernels::<T>(), _ => unreachable!("{other} has no kernels (WeightMatrix::new checks)")),
        }
    };
}

/// Kernels for `ty` on `isa`; `isa` must be supported by this CPU (a [`Cpu`] guarantees
/// it) and `ty` supported by [`quant::supported`] (a [`WeightMatrix`] guarantees it).
fn kernels(ty: GgmlType, isa: Isa) -> RowKernels {
    #[cfg(target_arch = "x86_64")]
    match isa {
        Isa::Avx2 => return simd_kernels!(ty, avx2),
        Isa::Avx512 => return simd_kernels!(ty, avx512::bw),
        Isa::Avx512Vnni => return simd_kernels!(ty, avx512::vnni),
        Isa::Portable => {}
    }
    let _ = isa;
    quant::with_block_type!(ty, T => portable_kernels::<T>(), _ => unreachable!("{ty} has no kernels"))
}

/// Kernel over one packed 16-row group and `N` quantized activation rows.
type PackedFn<const N: usize> = unsafe fn(&[u8], &[Q8Row<'_>; N]) -> [[f32; X16_ROWS]; N];

/// The packed-group kernels for one and [`GROUP`] activation rows.
type PackedKernels = (PackedFn<1>, PackedFn<2>, PackedFn<GROUP>);

/// The packed-group kernel for a register tile of [`TILE`] activation rows, beside
/// [`PackedKernels`]: every lane does the same operations whatever the row count, so a
/// row's result is the same from any of the three.
fn packed_tile_kernel(isa: Isa, ty: GgmlType) -> Option<PackedFn<TILE>> {
    #[cfg(target_arch = "x86_64")]
    match (isa, ty) {
        (Isa::Avx2, GgmlType::Q4_0) => return Some(avx2_packed::q4_0x16::<TILE>),
        (Isa::Avx512, GgmlType::Q4_0) => return Some(avx512::bw::q4_0x16::<TILE>),
        (Isa::Avx512Vnni, GgmlType::Q4_0) => return Some(avx512::vnni::q4_0x16::<TILE>),
        (Isa::Avx2, GgmlType::Q4_1) => return Some(avx2_packed::q4_1x16::<TILE>),
        // AVX-512 without VNNI takes the AVX2 Q8_0 kernel, and every AVX-512 path the
        // AVX2 Q5_0 one (their features are a subset).
        (Isa::Avx2 | Isa::Avx512, GgmlType::Q8_0) => return Some(avx2_packed::q8_0x16::<TILE>),
        (Isa::Avx2, GgmlType::Q5_0) => return Some(avx2_packed::q5_0x16::<TILE>),
        (Isa::Avx2, GgmlType::Q4K) => return Some(avx2_packed::q4_kx16::<TILE>),
        (Isa::Avx2, GgmlType::Q5K) => return Some(avx2_packed::q5_kx16::<TILE>),
        (Isa::Avx512, GgmlType::Q5K) => return Some(avx512::bw::q5_kx16::<TILE>),
        (Isa::Avx512Vnni, GgmlType::Q5K) => return Some(avx512::vnni::q5_kx16::<TILE>),
        (Isa::Avx2, GgmlType::Q6K) => return Some(avx2_packed::q6_kx16::<TILE>),
        (Isa::Avx512, GgmlType::Q5_0) => return Some(avx512::bw::q5_0x16::<TILE>),
        (Isa::Avx512, GgmlType::Q4K) => return Some(avx512::bw::q4_kx16::<TILE>),
        (Isa::Avx512, GgmlType::Q6K) => return Some(avx512::bw::q6_kx16::<TILE>),
        (Isa::Avx512Vnni, GgmlType::Q5_0) => return Some(avx512::vnni::q5_0x16::<TILE>),
        (Isa::Avx512Vnni, GgmlType::Q4K) => return Some(avx512::vnni::q4_kx16::<TILE>),
        (Isa::Avx512Vnni, GgmlType::Q6K) => return Some(avx512::vnni::q6_kx16::<TILE>),
        (Isa::Avx512, GgmlType::Q4_1) => return Some(avx512::bw::q4_1x16::<TILE>),
        (Isa::Avx512Vnni, GgmlType::Q4_1) => return Some(avx512::vnni::q4_1x16::<TILE>),
        (Isa::Avx512Vnni, GgmlType::Q8_0) => return Some(avx512::vnni::q8_0x16::<TILE>),
        _ => {}
    }
    let _ = (isa, ty);
    None
}

/// The packed kernels of `isa` for packed matrices of `ty`, if it has them.
fn packed_kernels(isa: Isa, ty: GgmlType) -> Option<PackedKernels> {
    #[cfg(target_arch = "x86_64")]
    match (isa, ty) {
        (Isa::Avx2, GgmlType::Q4_0) => {
            return Some((
                avx2_packed::q4_0x16::<1>,
                avx2_packed::q4_0x16::<2>,
                avx2_packed::q4_0x16::<GROUP>,
            ));
        }
        (Isa::Avx512, GgmlType::Q4_0) => {
            return Some((
                avx512::bw::q4_0x16::<1>,
                avx512::bw::q4_0x16::<2>,
                avx512::bw::q4_0x16::<GROUP>,
            ));
        }
        (Isa::Avx512Vnni, GgmlType::Q4_0) => {
            return Some((
                avx512::vnni::q4_0x16::<1>,
                avx512::vnni::q4_0x16::<2>,
                avx512::vnni::q4_0x16::<GROUP>,
            ));
        }
        (Isa::Avx2, GgmlType::Q4_1) => {
            return Some((
                avx2_packed::q4_1x16::<1>,
                avx2_packed::q4_1x16::<2>,
                avx2_packed::q4_1x16::<GROUP>,
            ));
        }
        (Isa::Avx2, GgmlType::Q5_0) => {
            return Some((
                avx2_packed::q5_0x16::<1>,
                avx2_packed::q5_0x16::<2>,
                avx2_packed::q5_0x16::<GROUP>,
            ));
        }
        (Isa::Avx2, GgmlType::Q4K) => {
            return Some((
                avx2_packed::q4_kx16::<1>,
                avx2_packed::q4_kx16::<2>,
                avx2_packed::q4_kx16::<GROUP>,
            ));
        }
        (Isa::Avx2, GgmlType::Q5K) => {
            return Some((
                avx2_packed::q5_kx16::<1>,
                avx2_packed::q5_kx16::<2>,
                avx2_packed::q5_kx16::<GROUP>,
            ));
        }
        (Isa::Avx512, GgmlType::Q5K) => {
            return Some((
                avx512::bw::q5_kx16::<1>,
                avx512::bw::q5_kx16::<2>,
                avx512::bw::q5_kx16::<GROUP>,
            ));
        }
        (Isa::Avx512Vnni, GgmlType::Q5K) => {
            return Some((
                avx512::vnni::q5_kx16::<1>,
                avx512::vnni::q5_kx16::<2>,
                avx512::vnni::q5_kx16::<GROUP>,
            ));
        }
        (Isa::Avx2, GgmlType::Q6K) => {
            return Some((
                avx2_packed::q6_kx16::<1>,
                avx2_packed::q6_kx16::<2>,
                avx2_packed::q6_kx16::<GROUP>,
            ));
        }
        (Isa::Avx512, GgmlType::Q5_0) => {
            return Some((
                avx512::bw::q5_0x16::<1>,
                avx512::bw::q5_0x16::<2>,
                avx512::bw::q5_0x16::<GROUP>,
            ));
        }
        (Isa::Avx512, GgmlType::Q4K) => {
            return Some((
                avx512::bw::q4_kx16::<1>,
                avx512::bw::q4_kx16::<2>,
                avx512::bw::q4_kx16::<GROUP>,
            ));
        }
        (Isa::Avx512, GgmlType::Q6K) => {
            return Some((
                avx512::bw::q6_kx16::<1>,
                avx512::bw::q6_kx16::<2>,
                avx512::bw::q6_kx16::<GROUP>,
            ));
        }
        (Isa::Avx512Vnni, GgmlType::Q5_0) => {
            return Some((
                avx512::vnni::q5_0x16::<1>,
                avx512::vnni::q5_0x16::<2>,
                avx512::vnni::q5_0x16::<GROUP>,
            ));
        }
        (Isa::Avx512Vnni, GgmlType::Q4K) => {
            return Some((
                avx512::vnni::q4_kx16::<1>,
                avx512::vnni::q4_kx16::<2>,
                avx512::vnni::q4_kx16::<GROUP>,
            ));
        }
        (Isa::Avx512Vnni, GgmlType::Q6K) => {
            return Some((
                avx512::vnni::q6_kx16::<1>,
                avx512::vnni::q6_kx16::<2>,
                avx512::vnni::q6_kx16::<GROUP>,
            ));
        }
        (Isa::Avx2 | Isa::Avx512, GgmlType::Q8_0) => {
            return Some((
                avx2_packed::q8_0x16::<1>,
                avx2_packed::q8_0x16::<2>,
                avx2_packed::q8_0x16::<GROUP>,
            ));
        }
        (Isa::Avx512, GgmlType::Q4_1) => {
            return Some((
                avx512::bw::q4_1x16::<1>,
                avx512::bw::q4_1x16::<2>,
                avx512::bw::q4_1x16::<GROUP>,
            ));
        }
        (Isa::Avx512Vnni, GgmlType::Q4_1) => {
            return Some((
                avx512::vnni::q4_1x16::<1>,
                avx512::vnni::q4_1x16::<2>,
                avx512::vnni::q4_1x16::<GROUP>,
            ));
        }
        (Isa::Avx512Vnni, GgmlType::Q8_0) => {
            return Some((
                avx512::vnni::q8_0x16::<1>,
                avx512::vnni::q8_0x16::<2>,
                avx512::vnni::q8_0x16::<GROUP>,
            ));
        }
        _ => {}
    }
    let _ = (isa, ty);
    None
}

/// Whether the products take [`PackedWeights`] of type `ty` on `isa` (a model packs its
/// matrices only then): Q4_0, Q4_1, Q5_0, Q8_0, Q4_K, Q5_K and Q6_K on every SIMD path.
/// Q8_0 on AVX-512 without VNNI takes the AVX2 kernel (sign trick): a `vpmaddubsw` dot of
/// weights offset by 128 would saturate. The Q4_0, Q5_0 and K-quant kernels of the AVX-512
/// paths equal the AVX2 ones bit for bit (the Q4_0 and K-quant ones are the portable
/// path's bits).
pub fn uses_packed(isa: Isa, ty: GgmlType) -> bool {
    packed_kernels(isa, ty).is_some()
}

/// `w`'s packing and the kernels for it, when `w` has one and `isa` has the kernels.
fn packed_path<'a>(w: &WeightMatrix<'a>, isa: Isa) -> Option<(&'a PackedWeights, PackedKernels)> {
    let p = w.packed?;
    Some((p, packed_kernels(isa, p.ty())?))
}

/// Rows `r0 .. r0 + len` (whole groups) of a packed matrix times the activation rows `a`
/// (four at a time, then a pair, then one by one; each group's blocks are read once for all of them):
/// `put(row, i, value)` for weight row `row` and activation row `i`.
fn packed_rows(
    p: &PackedWeights,
    (one, two, four): PackedKernels,
    a: &[Q8Row<'_>],
    r0: usize,
    len: usize,
    mut put: impl FnMut(usize, usize, f32),
) {
    debug_assert!(r0.is_multiple_of(X16_ROWS) && len.is_multiple_of(X16_ROWS));
    let sums = offset_sums(p, a);
    let with_sums: Vec<Q8Row<'_>>;
    let a = if sums.is_empty() {
        a
    } else {
        with_sums = with_offset_sums(a, &sums);
        &with_sums[..]
    };
    for g in r0 / X16_ROWS..(r0 + len) / X16_ROWS {
        let data = p.group(g);
        let mut i = 0;
        while i + GROUP <= a.len() {
            let rows: [Q8Row<'_>; GROUP] = core::array::from_fn(|k| a[i + k]);
            // SAFETY: `packed_kernels` returned a path this CPU supports (Cpu::new checks).
            let out = unsafe { four(data, &rows) };
            for (k, o) in out.iter().enumerate() {
                for (j, v) in o.iter().enumerate() {
                    put(g * X16_ROWS + j, i + k, *v);
                }
            }
            i += GROUP;
        }
        if i + 2 <= a.len() {
            // SAFETY: as above.
            let out = unsafe { two(data, &[a[i], a[i + 1]]) };
            for (k, o) in out.iter().enumerate() {
                for (j, v) in o.iter().enumerate() {
                    put(g * X16_ROWS + j, i + k, *v);
                }
            }
        }
        let i = if i + 2 <= a.len() { i + 2 } else { i };
        for (k, row) in a.iter().enumerate().skip(i) {
            // SAFETY: as above.
            let out = unsafe { one(data, &[*row]) };
            for (j, v) in out[0].iter().enumerate() {
                put(g * X16_ROWS + j, k, *v);
            }
        }
    }
}

/// The packed kernels of the offset types take `o · Σ qs` of each activation block in
/// `s` (Q8_0 activations carry no sums of their own): AVX-512 VNNI's Q8_0 kernel (weights
/// stored plus 128: `o` = 128), the Q5_0 kernel (quants taken unsigned, `q` = value +
/// 16: `o` = 16) and the Q4_0 kernel (`q` = value + 8: `o` = 8). Those sums per row of `a` for such a packing, nothing for another. The
/// AVX2 Q8_0 kernel does not read them.
fn offset_sums(p: &PackedWeights, a: &[Q8Row<'_>]) -> Vec<Vec<f32>> {
    let o = match p.ty() {
        GgmlType::Q8_0 => 128,
        GgmlType::Q5_0 => 16,
        GgmlType::Q4_0 => 8,
        _ => return Vec::new(),
    };
    a.iter()
        .map(|r| {
            r.qs.chunks_exact(quant::QK)
                .map(|c| (o * c.iter().map(|&q| q as i32).sum::<i32>()) as f32)
                .collect()
        })
        .collect()
}

/// The rows of `a` with the sums of [`offset_sums`] in place of theirs.
fn with_offset_sums<'a>(a: &[Q8Row<'a>], sums: &'a [Vec<f32>]) -> Vec<Q8Row<'a>> {
    a.iter().zip(sums).map(|(r, s)| Q8Row { s, ..*r }).collect()
}

/// The tiled prefill product of a packed matrix: `y[i · rows + r]` for every activation
/// row `i` of `a` and weight row `r` (`y` is `[a.len(), rows]`), written straight into
/// `y` sixteen outputs at a time. One matrix of [`packed_matmul_many`].
fn packed_matmul(
    cpu: &Cpu,
    p: &PackedWeights,
    kernels: PackedKernels,
    tile: PackedFn<TILE>,
    a: &[Q8Row<'_>],
    y: &mut [f32],
) {
    packed_matmul_many(cpu, &[p], kernels, tile, a, &mut [y]);
}

/// The tiled product of several packed matrices of one type with the same activation
/// rows, in one parallel pass: `ys[m][i · rows_m + r]` for activation row `i` of `a` and
/// row `r` of `ps[m]` (`ys[m]` is `[a.len(), ps[m].rows()]`).
///
/// Blocking: tasks take whole 16-row groups of one matrix's output (both threads busy,
/// work claimed dynamically; the matrices' groups are cut into tasks together, so a
/// small matrix does not get a dispatch of its own); inside a task the tokens go in
/// cache blocks of [`TOKEN_BLOCK`] (their quants stay in L2 while every group of the task
/// passes over them), and for one group (its blocks over the whole of K, at most 15 KiB
/// for K = 1536, in L1) the tokens go in register tiles of [`TILE`], then of [`GROUP`], then a pair,
/// then one by one: each weight block loaded into registers serves a tile's tokens × 16
/// rows. A row's result is bit for bit what [`packed_rows`] gives it alone (the kernels'
/// lanes do not depend on the tile size or on the other matrices). The K dimension is not
/// split: a group's accumulators stay in registers for the whole row and the group fits
/// the L1 cache at this model's widths.
fn packed_matmul_many(
    cpu: &Cpu,
    ps: &[&PackedWeights],
    (one, two, four): PackedKernels,
    tile: PackedFn<TILE>,
    a: &[Q8Row<'_>],
    ys: &mut [&mut [f32]],
) {
    let n = a.len();
    debug_assert!(
        ps.iter()
            .zip(ys.iter())
            .all(|(p, y)| y.len() == n * p.rows())
    );
    debug_assert!(ps.windows(2).all(|w| w[0].ty() == w[1].ty()));
    let Some(first) = ps.first() else { return };
    let sums = offset_sums(first, a);
    let with_sums: Vec<Q8Row<'_>>;
    let a = if sums.is_empty() {
        a
    } else {
        with_sums = with_offset_sums(a, &sums);
        &with_sums[..]
    };
    let total: usize = ps.iter().map(|p| p.rows()).sum();
    let per_task = task_rows(total, cpu.threads) / X16_ROWS;
    // (matrix, its groups) per task.
    let mut tasks: Vec<(usize, std::ops::Range<usize>)> = Vec::new();
    for (m, p) in ps.iter().enumerate() {
        let groups = p.rows() / X16_ROWS;
        for g0 in (0..groups).step_by(per_task.max(1)) {
            tasks.push((m, g0..(g0 + per_task).min(groups)));
        }
    }
    let bases: Vec<SendPtr> = ys.iter_mut().map(|y| SendPtr(y.as_mut_ptr())).collect();
    let body = |t: usize| {
        let (m, ref gs) = tasks[t];
        let (p, base, rows) = (ps[m], bases[m], ps[m].rows());
        let put = |i: usize, g: usize, out: &[f32; X16_ROWS]| {
            // SAFETY: `i < n` and `g < rows / 16`, so `i · rows + 16g .. + 16` lies inside
            // `ys[m]`; the tasks own disjoint sets of groups, so no two write the same
            // element, and `ys` stays mutably borrowed until `run_tasks` returns.
            unsafe {
                std::ptr::copy_nonoverlapping(
                    out.as_ptr(),
                    base.get().add(i * rows + g * X16_ROWS),
                    X16_ROWS,
                )
            };
        };
        for t0 in (0..n).step_by(TOKEN_BLOCK) {
            let t1 = (t0 + TOKEN_BLOCK).min(n);
            // The block's register tiles of activation rows, built once for every group
            // of the task (not copied again for each group).
            let mut tiles: Vec<(usize, [Q8Row<'_>; TILE])> = Vec::new();
            let mut fours: Vec<(usize, [Q8Row<'_>; GROUP])> = Vec::new();
            let mut i = t0;
            while i + TILE <= t1 {
                tiles.push((i, core::array::from_fn(|k| a[i + k])));
                i += TILE;
            }
            while i + GROUP <= t1 {
                fours.push((i, core::array::from_fn(|k| a[i + k])));
                i += GROUP;
            }
            let pair: Option<(usize, [Q8Row<'_>; 2])> =
                (i + 2 <= t1).then(|| (i, [a[i], a[i + 1]]));
            if pair.is_some() {
                i += 2;
            }
            let singles = i..t1;
            for g in gs.clone() {
                let data = p.group(g);
                for (i, r) in &tiles {
                    // SAFETY: `packed_tile_kernel` returned a path this CPU supports.
                    let out = unsafe { tile(data, r) };
                    for (k, o) in out.iter().enumerate() {
                        put(i + k, g, o);
                    }
                }
                for (i, r) in &fours {
                    // SAFETY: as above (`packed_kernels`).
                    let out = unsafe { four(data, r) };
                    for (k, o) in out.iter().enumerate() {
                        put(i + k, g, o);
                    }
                }
                if let Some((i, r)) = &pair {
                    // SAFETY: as above.
                    let out = unsafe { two(data, r) };
                    for (k, o) in out.iter().enumerate() {
                        put(i + k, g, o);
                    }
                }
                for k in singles.clone() {
                    // SAFETY: as above.
                    put(k, g, &unsafe { one(data, &[a[k]]) }[0]);
                }
            }
        }
    };
    if cpu.threads == 1 || tasks.len() <= 1 {
        (0..tasks.len()).for_each(body);
    } else {
        cpu.run_tasks(tasks.len(), &body);
    }
}

/// Per-thread reusable buffers (the quantized activation and a transposed output).
#[derive(Default)]
struct Scratch {
    act: Q8Activation,
    out_t: Vec<f32>,
}

thread_local! {
    static SCRATCH: RefCell<Scratch> = RefCell::new(Scratch::default());
}

/// Run `f` with this thread's scratch, or a fresh one if it is already in use (a
/// product started from inside another on the same thread).
fn with_scratch<R>(f: impl FnOnce(&mut Scratch) -> R) -> R {
    SCRATCH.with(|cell| match cell.try_borrow_mut() {
        Ok(mut s) => f(&mut s),
        Err(_) => f(&mut Scratch::default()),
    })
}

/// Matrix-vector product (decode): `y[r] = Σ_c W[r, c] · x[c]`.
///
/// Shapes: `x` is `[cols]`, `y` is `[rows]` (f32). Quantized weights use the activation
/// quantized once into Q8_0/Q8_1 blocks (see the module docs). Runs on `cpu`'s threads
/// with `cpu`'s SIMD path. Panics when `x.len() != w.cols()` or `y.len() != w.rows()`
/// (caller shape bugs).
pub fn matvec(cpu: &Cpu, w: &WeightMatrix, x: &[f32], y: &mut [f32]) {
    assert_eq!(
        x.len(),
        w.cols,
        "matvec: x has {} elements, W has {} cols",
        x.len(),
        w.cols
    );
    assert_eq!(
        y.len(),
        w.rows,
        "matvec: y has {} elements, W has {} rows",
        y.len(),
        w.rows
    );
    match kernels(w.ty, cpu.isa) {
        RowKernels::Quant { act, one, .. } => with_scratch(|s| {
            s.act.quantize_on(cpu.isa, act, x, 1, w.cols);
            let a = [s.act.row(0)];
            if let Some((p, pk)) = packed_path(w, cpu.isa) {
                cpu.for_row_chunks(y, 1, |r0, ys| {
                    packed_rows(p, pk, &a, r0, ys.len(), |r, _, v| ys[r - r0] = v);
                });
                return;
            }
            cpu.for_row_chunks(y, 1, |r0, ys| {
                for (k, v) in ys.iter_mut().enumerate() {
                    // SAFETY: `kernels` returned a path this CPU supports (Cpu::new checks).
                    *v = unsafe { one(w.row_data(r0 + k), &a) }[0];
                }
            });
        }),
        RowKernels::Float { one, .. } => {
            let a = [x];
            cpu.for_row_chunks(y, 1, |r0, ys| {
                for (k, v) in ys.iter_mut().enumerate() {
                    // SAFETY: as above.
                    *v = unsafe { one(w.row_data(r0 + k), &a) }[0];
                }
            });
        }
    }
}

/// Several matrix-vector products sharing one input (decode), in one parallel pass:
/// `ys[m][r] = Σ_c ws[m][r, c] · x[c]`, e.g. the Q, K and V projections of a block, or
/// its FFN gate and up projections.
///
/// Shapes: every `ws[m]` has `x.len()` columns and `ys[m]` has `ws[m].rows()` elements.
/// The activation is quantized once for all the matrices (when they pair with the same
/// Q8 type) and the rows of every matrix are split among one set of tasks, so the pool is
/// dispatched once instead of once per matrix. Each output equals [`matvec`]'s bit for bit
/// (same row kernels on the same quantized activation). Panics on a shape disagreement or
/// when `ws` and `ys` differ in length (caller shape bugs).
pub fn matvec_multi(cpu: &Cpu, ws: &[&WeightMatrix], x: &[f32], ys: &mut [&mut [f32]]) {
    assert_eq!(
        ws.len(),
        ys.len(),
        "matvec_multi: {} matrices but {} outputs",
        ws.len(),
        ys.len()
    );
    for (m, (w, y)) in ws.iter().zip(ys.iter()).enumerate() {
        assert_eq!(
            x.len(),
            w.cols,
            "matvec_multi: x has {} elements, W[{m}] has {} cols",
            x.len(),
            w.cols
        );
        assert_eq!(
            y.len(),
            w.rows,
            "matvec_multi: y[{m}] has {} elements, W[{m}] has {} rows",
            y.len(),
            w.rows
        );
    }
    let kerns: Vec<RowKernels> = ws.iter().map(|w| kernels(w.ty, cpu.isa)).collect();
    let act_ty = match kerns.first() {
        Some(RowKernels::Quant { act, .. }) => Some(*act),
        _ => None,
    };
    let fusable = kerns.iter().all(|k| match k {
        RowKernels::Quant { act, .. } => Some(*act) == act_ty,
        RowKernels::Float { .. } => act_ty.is_none(),
    });
    if !fusable {
        for (w, y) in ws.iter().zip(ys.iter_mut()) {
            matvec(cpu, w, x, y);
        }
        return;
    }
    let total: usize = ws.iter().map(|w| w.rows).sum();
    let per_task = task_rows(total, cpu.threads);
    let packs: Vec<_> = ws.iter().map(|w| packed_path(w, cpu.isa)).collect();
    // (matrix, first row, output rows) per task.
    let mut tasks: Vec<(usize, usize, &mut [f32])> = Vec::new();
    for (m, y) in ys.iter_mut().enumerate() {
        for (c, chunk) in y.chunks_mut(per_task).enumerate() {
            tasks.push((m, c * per_task, chunk));
        }
    }
    let run = |a: &[Q8Row<'_>; 1], m: usize, r0: usize, out: &mut [f32]| {
        let w = ws[m];
        if let Some((p, pk)) = packs[m] {
            packed_rows(p, pk, a, r0, out.len(), |r, _, v| out[r - r0] = v);
            return;
        }
        match kerns[m] {
            RowKernels::Quant { one, .. } => {
                for (k, v) in out.iter_mut().enumerate() {
                    // SAFETY: `kernels` returned a path this CPU supports (Cpu::new checks).
                    *v = unsafe { one(w.row_data(r0 + k), a) }[0];
                }
            }
            RowKernels::Float { one, .. } => {
                let xa = [x];
                for (k, v) in out.iter_mut().enumerate() {
                    // SAFETY: as above.
                    *v = unsafe { one(w.row_data(r0 + k), &xa) }[0];
                }
            }
        }
    };
    with_scratch(|s| {
        let q8;
        let a: [Q8Row<'_>; 1] = match act_ty {
            Some(ty) => {
                s.act.quantize_on(cpu.isa, ty, x, 1, x.len());
                q8 = &s.act;
                [q8.row(0)]
            }
            None => [Q8Row {
                qs: &[],
                d: &[],
                s: &[],
                bsums: &[],
            }],
        };
        if cpu.threads == 1 || tasks.len() <= 1 {
            for (m, r0, out) in tasks {
                run(&a, m, r0, out);
            }
        } else {
            let tasks: Vec<std::sync::Mutex<(usize, usize, &mut [f32])>> =
                tasks.into_iter().map(std::sync::Mutex::new).collect();
            cpu.run_tasks(tasks.len(), &|t| {
                let mut task = tasks[t].lock().unwrap_or_else(|e| e.into_inner());
                let (m, r0, ref mut out) = *task;
                run(&a, m, r0, out);
            });
        }
    });
}

/// Several matrix-matrix products sharing one input (a batch's Q, K and V projections,
/// or its FFN gate and up): `ys[m] = X · ws[m]ᵀ`, i.e. `ys[m][i, r] = Σ_c X[i, c] · W_m[r, c]`.
///
/// Shapes: `x` is `[n, cols]` row-major, every `ws[m]` has `cols` columns and `ys[m]` is
/// `[n, ws[m].rows()]`. When every matrix is packed with one type the activation is
/// quantized once and all the matrices' output groups are cut into one set of tasks (one
/// dispatch of the pool instead of one per matrix); otherwise each product is
/// [`matmul`]. Either way each output equals [`matmul`]'s bit for bit (one row is
/// [`matvec_multi`]). Panics on a shape disagreement or when `ws` and `ys` differ in
/// length (caller shape bugs).
pub fn matmul_many(cpu: &Cpu, ws: &[&WeightMatrix], x: &[f32], n: usize, ys: &mut [&mut [f32]]) {
    assert_eq!(
        ws.len(),
        ys.len(),
        "matmul_many: {} matrices but {} outputs",
        ws.len(),
        ys.len()
    );
    if n == 1 {
        return matvec_multi(cpu, ws, x, ys);
    }
    for (m, (w, y)) in ws.iter().zip(ys.iter()).enumerate() {
        assert_eq!(
            x.len(),
            n * w.cols,
            "matmul_many: x has {} elements, expected n={n} x cols={} of W[{m}]",
            x.len(),
            w.cols
        );
        assert_eq!(
            y.len(),
            n * w.rows,
            "matmul_many: y[{m}] has {} elements, expected n={n} x rows={}",
            y.len(),
            w.rows
        );
    }
    let packed: Option<Vec<&PackedWeights>> = ws
        .iter()
        .map(|w| packed_path(w, cpu.isa).map(|(p, _)| p))
        .collect();
    let fused = packed
        .filter(|ps| n > 0 && !ps.is_empty() && ps.windows(2).all(|w| w[0].ty() == w[1].ty()));
    let path = fused.as_ref().and_then(|ps| {
        let ty = ps[0].ty();
        let act = match kernels(ty, cpu.isa) {
            RowKernels::Quant { act, .. } => act,
            RowKernels::Float { .. } => return None,
        };
        Some((
            act,
            packed_kernels(cpu.isa, ty)?,
            packed_tile_kernel(cpu.isa, ty)?,
        ))
    });
    let (Some(ps), Some((act_ty, pk, tile))) = (fused, path) else {
        for (w, y) in ws.iter().zip(ys.iter_mut()) {
            matmul(cpu, w, x, n, y);
        }
        return;
    };
    let cols = ws[0].cols;
    with_scratch(|s| {
        s.act.quantize_on(cpu.isa, act_ty, x, n, cols);
        let rows: Vec<Q8Row<'_>> = (0..n).map(|i| s.act.row(i)).collect();
        packed_matmul_many(cpu, &ps, pk, tile, &rows, ys);
        if n * cols > RETAIN_OUT_T {
            s.act = Q8Activation::new();
        }
    });
}

/// Matrix-matrix product (prefill): `Y = X · Wᵀ`, i.e. `Y[i, r] = Σ_c X[i, c] · W[r, c]`.
///
/// Shapes: `x` is `[n, cols]` row-major, `y` is `[n, rows]` row-major (f32). Every
/// activation row is quantized once; each weight row is read once per group of four
/// activation rows. Panics when `x.len() != n · cols` or `y.len() != n · rows`.
pub fn matmul(cpu: &Cpu, w: &WeightMatrix, x: &[f32], n: usize, y: &mut [f32]) {
    assert_eq!(
        x.len(),
        n * w.cols,
        "matmul: x has {} elements, expected n={n} x cols={}",
        x.len(),
        w.cols
    );
    assert_eq!(
        y.len(),
        n * w.rows,
        "matmul: y has {} elements, expected n={n} x rows={}",
        y.len(),
        w.rows
    );
    if n == 1 {
        return matvec(cpu, w, x, y);
    }
    if n == 0 || w.rows == 0 {
        return;
    }
    let cols = w.cols;
    let kern = kernels(w.ty, cpu.isa);
    with_scratch(|s| {
        let Scratch { act, out_t } = s;
        if let (RowKernels::Quant { act: ty, .. }, Some((p, pk))) = (kern, packed_path(w, cpu.isa))
            && let Some(tile) = packed_tile_kernel(cpu.isa, p.ty())
        {
            act.quantize_on(cpu.isa, ty, x, n, cols);
            let rows: Vec<Q8Row<'_>> = (0..n).map(|i| act.row(i)).collect();
            packed_matmul(cpu, p, pk, tile, &rows, y);
            if n * cols > RETAIN_OUT_T {
                *act = Q8Activation::new();
            }
            return;
        }
        out_t.clear();
        out_t.resize(n * w.rows, 0.0);
        match kern {
            RowKernels::Quant {
                act: ty,
                one,
                group,
            } => {
                act.quantize_on(cpu.isa, ty, x, n, cols);
                let act = &*act;
                if let Some((p, pk)) = packed_path(w, cpu.isa) {
                    let rows: Vec<Q8Row<'_>> = (0..n).map(|i| act.row(i)).collect();
                    cpu.for_row_chunks(out_t, n, |r0, chunk| {
                        packed_rows(p, pk, &rows, r0, chunk.len() / n, |r, i, v| {
                            chunk[(r - r0) * n + i] = v
                        });
                    });
                } else {
                    cpu.for_row_chunks(out_t, n, |r0, chunk| {
                        for (k, out) in chunk.chunks_exact_mut(n).enumerate() {
                            let wr = w.row_data(r0 + k);
                            let mut i = 0;
                            while i + GROUP <= n {
                                let a: [Q8Row<'_>; GROUP] =
                                    core::array::from_fn(|g| act.row(i + g));
                                // SAFETY: `kernels` returned a path this CPU supports.
                                out[i..i + GROUP].copy_from_slice(&unsafe { group(wr, &a) });
                                i += GROUP;
                            }
                            for (j, o) in out.iter_mut().enumerate().skip(i) {
                                // SAFETY: as above.
                                *o = unsafe { one(wr, &[act.row(j)]) }[0];
                            }
                        }
                    });
                }
            }
            RowKernels::Float { one, group } => {
                cpu.for_row_chunks(out_t, n, |r0, chunk| {
                    for (k, out) in chunk.chunks_exact_mut(n).enumerate() {
                        let wr = w.row_data(r0 + k);
                        let mut i = 0;
                        while i + GROUP <= n {
                            let a: [&[f32]; GROUP] =
                                core::array::from_fn(|g| &x[(i + g) * cols..(i + g + 1) * cols]);
                            // SAFETY: as above.
                            out[i..i + GROUP].copy_from_slice(&unsafe { group(wr, &a) });
                            i += GROUP;
                        }
                        for (j, o) in out.iter_mut().enumerate().skip(i) {
                            // SAFETY: as above.
                            *o = unsafe { one(wr, &[&x[j * cols..(j + 1) * cols]]) }[0];
                        }
                    }
                });
            }
        }
        // out_t is [rows, n]; y is [n, rows].
        for (r, col) in out_t.chunks_exact(n).enumerate() {
            for (i, v) in col.iter().enumerate() {
                y[i * w.rows + r] = *v;
            }
        }
        // A prefill-sized buffer is not kept between calls: it would stay resident for the
        // life of the thread (memory bound: weights + KV cache + little else).
        if out_t.capacity() > RETAIN_OUT_T {
            *out_t = Vec::new();
        }
        if n * cols > RETAIN_OUT_T {
            *act = Q8Activation::new();
        }
    });
}
