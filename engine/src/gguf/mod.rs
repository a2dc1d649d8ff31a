//! The GGUF container format: typed metadata, tensor infos and a memory-mapped data section.

mod types;

pub use types::GgmlType;
