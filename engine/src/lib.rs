//! `engine`: a CPU inference engine for decoder LLMs (GGUF models, quantized kernels, paged KV cache).
//!
//! Module map (one concept each):
//! - [`gguf`]: the GGUF container format (reader and writer), nothing about models.
//! - [`isa`]: instruction-set selection: which SIMD path the kernels and quantizers take.
//! - [`quant`]: GGML block types (F32, F16, BF16, Q8_0, Q8_1, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K) behind one trait.
//! - [`kernels`]: CPU decode kernels (GEMV/GEMM, RMSNorm, RoPE, SwiGLU, softmax, attention, sampling).
//! - [`kv`]: the paged KV cache.
//! - [`prefix`]: the shared prefix cache: full KV pages of computed prefixes, reused across requests.
//! - [`tokenizer`]: text ↔ token ids (GGUF vocabulary or `tokenizer.json`), streaming decode.
//! - [`chat`]: the model's Jinja chat template, rendered as transformers renders it.
//! - [`constrain`]: constrained decoding: JSON output that stays inside a JSON Schema (matcher and token mask).
//! - [`flow`]: what a token callback answers (continue or stop), shared by the decode loop and the interpreter.
//! - [`model`]: the Llama decode core (prefill and decode over the paged KV cache).
//! - [`batch`]: the decode loop: continuous batching (chunked prefill, one batched decode step, sampling, stops, streaming).
//! - [`scheduler`]: admission against the shared KV byte budget (reserve, clamp, refuse, queue).
//! - [`roofline`]: `genai bench`'s roofline: achieved weight GB/s and GFLOP/s against measured memory read and SIMD peak.
//! - [`tiny`]: deterministic tiny Llama GGUF models for tests and fixtures.
//! - [`workflow`]: declared-workflow packages (manifest, validation, op graphs, interpreter).
//! - [`request`]: what a request is and what becomes of it (prompt, request, route, result, typed errors).
//! - [`funnel`]: the funnel's first stages (validate, encode, count) and the interpreter's run, on what the engine serves.
//! - [`runtime`]: the `Engine`: loading a model or package, and the front door (`submit`) to its service.
//! - [`service`]: the engine's one front door: one queue, one admission, one continuous batch for every request; tickets.
//! - [`server`]: `genai serve`, the OpenAI-compatible HTTP server, a client of the service.

pub mod batch;
pub mod chat;
pub mod constrain;
pub mod flow;
pub mod funnel;
pub mod gguf;
pub mod isa;
pub mod kernels;
pub mod kv;
pub mod model;
pub mod prefix;
pub mod quant;
pub mod request;
pub mod roofline;
pub mod runtime;
pub mod scheduler;
pub mod server;
pub mod service;
pub mod tiny;
pub mod tokenizer;
pub mod workflow;
