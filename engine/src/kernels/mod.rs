//! CPU decode kernels: portable code plus per-ISA paths chosen at run time.

pub mod isa;
pub mod matmul;

pub mod activation;
pub mod attention;
pub mod logprob;
pub mod norm;
pub mod pool;
pub mod rope;
pub mod sample;
pub mod simd_vec;

pub use isa::Isa;
pub use simd_vec::VecOps;
