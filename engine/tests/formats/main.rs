//! File and text formats: GGUF reading and writing, tokenizers on hand-built vocabularies, chat
//! templates, tool calls, constrained JSON and `genai template render`.
//!
//! One test binary of several modules (one per topic, each a former `tests/*.rs` binary of its own):
//! the suite links a few binaries instead of one per file. A test is named `module::test`.

#[path = "../common/mod.rs"]
mod common;

mod chat_template;
mod chat_template_corpus;
mod cli_template;
mod constrain_json;
mod gguf_bad_input;
mod gguf_mutation;
mod gguf_roundtrip;
mod tokenizer_spm;
mod tokenizer_tiny_vocab;
mod tool_calls;
