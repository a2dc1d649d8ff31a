//! CPU decode kernels: portable code plus per-ISA paths chosen at run time.

pub mod matmul;

pub mod activation;
pub mod attention;
mod flash;
pub mod logprob;
pub mod norm;
pub mod pool;
pub mod rope;
pub mod sample;
pub mod simd_vec;

/// The SIMD path a kernel runs ([`crate::isa`]), re-exported where the kernels are chosen.
pub use crate::isa::Isa;
pub use simd_vec::VecOps;
