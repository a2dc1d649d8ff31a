//! `engine`: a CPU inference engine for decoder LLMs (GGUF models, quantized kernels, paged KV cache).
//!
//! Module map (one concept each):
//! - [`gguf`]: the GGUF container format (reader and writer), nothing about models.
//! - [`quant`]: GGML block types (F32, F16, BF16, Q8_0, Q8_1, Q4_0, Q4_1) behind one trait.
//! - [`kernels`]: CPU decode kernels (GEMV/GEMM, RMSNorm, RoPE, SwiGLU, softmax, attention, sampling).
//! - [`kv`]: the paged KV cache.
//! - [`workflow`]: declared-workflow packages (manifest, validation, op graphs, interpreter).

pub mod gguf;
pub mod kernels;
pub mod kv;
pub mod quant;
pub mod workflow;
