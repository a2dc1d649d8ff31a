//! The GGUF container format: typed metadata, tensor infos and a memory-mapped data section.
//!
//! [`GgufFile`] reads GGUF v2 and v3 (little-endian) as specified in ggml's
//! `docs/gguf.md`; [`GgufWriter`] writes v3 (or v2) files, mostly for tests and fixtures.
//! This module knows the container only, nothing about models.

mod cursor;
mod error;
mod metadata;
mod reader;
mod tensor;
mod types;
mod writer;

pub use error::{FormatError, GgufError};
pub use metadata::{MetaArray, MetaType, MetaValue, Metadata};
pub use reader::{ALIGNMENT_KEY, DEFAULT_ALIGNMENT, GGUF_MAGIC, GgufFile, MAX_ARRAY_NESTING};
pub use tensor::{MAX_DIMS, TensorInfo, TensorView};
pub use types::GgmlType;
pub use writer::GgufWriter;
