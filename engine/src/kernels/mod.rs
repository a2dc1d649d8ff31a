//! CPU decode kernels: portable code plus per-ISA paths chosen at run time.

pub mod isa;
pub mod matmul;

pub use isa::Isa;
