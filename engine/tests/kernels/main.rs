//! The CPU kernels and GGML block types against test-local references (the kernel battery's
//! targets, mutations/kernels.toml), the sampler, log probabilities, the paged KV cache and the
//! roofline arithmetic.
//!
//! One test binary of several modules (one per topic, each a former `tests/*.rs` binary of its own):
//! the suite links a few binaries instead of one per file. A test is named `module::test`.

// Test-local GGML references shared by several modules.
mod kquant_reference;
mod quant_reference;

mod kernels_attention;
mod kernels_logprob;
mod kernels_math;
mod kernels_sample;
mod kv_cache;
mod matmul_products;
mod quant_blocks;
mod quant_kblocks;
mod roofline;
