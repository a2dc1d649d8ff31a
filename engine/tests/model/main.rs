//! The decode core on real weights (SmolLM2-135M-Instruct, llama.cpp's requantized and per-
//! architecture files, tiny random models) against reference logits and tokens, and the `genai`
//! commands that run it.
//!
//! One test binary of several modules (one per topic, each a former `tests/*.rs` binary of its own):
//! the suite links a few binaries instead of one per file. A test is named `module::test`.

#[path = "../common/mod.rs"]
mod common;

mod cli_chat;
mod cli_info;
mod cli_serve;
mod gguf_smollm2;
mod model_arch;
mod model_kquants;
mod model_reference;
mod model_tiny;
mod tokenizer_smollm2;
mod workflow_model;
