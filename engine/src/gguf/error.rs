//! Typed errors of the GGUF reader, writer and metadata accessors.

use std::fmt;
use std::io;
use std::path::{Path, PathBuf};

use super::types::GgmlType;

/// Everything that can go wrong reading, querying or writing a GGUF file.
///
/// Malformed input is always [`GgufError::Format`]: it names the file (when the bytes came
/// from [`GgufFile::open`](super::GgufFile::open)), the byte offset of the field at fault,
/// a human-readable field path such as `tensor_infos[3] ("blk.0.attn_q.weight").offset`,
/// and a [`FormatError`] saying what is wrong with it.
#[derive(Debug, thiserror::Error)]
pub enum GgufError {
    /// The file could not be opened, mapped, read or written.
    #[error("{}: {source}", .path.display())]
    Io {
        /// The file at fault.
        path: PathBuf,
        /// The operating-system error.
        #[source]
        source: io::Error,
    },
    /// The bytes are not a well-formed GGUF v2/v3 file.
    #[error("{}byte offset {offset}: {field}: {kind}", PathPrefix(.path.as_deref()))]
    Format {
        /// The file the bytes came from, `None` for [`GgufFile::from_bytes`](super::GgufFile::from_bytes).
        path: Option<PathBuf>,
        /// Byte offset (from the start of the file) of the field at fault.
        offset: u64,
        /// Which field: `magic`, `metadata[2] ("general.name").value`, `tensor_infos[0] ("output.weight").dims[1]`, ...
        field: String,
        /// What is wrong with it.
        kind: FormatError,
    },
    /// A metadata key the caller needs is absent.
    #[error("metadata key {key:?} is missing")]
    MissingKey {
        /// The key asked for.
        key: String,
    },
    /// A metadata key holds a value of another type than the caller needs.
    #[error("metadata key {key:?} holds {found}, expected {expected}")]
    WrongType {
        /// The key asked for.
        key: String,
        /// The type the accessor accepts (`"u32"`, `"array of string"`, ...).
        expected: &'static str,
        /// The type actually stored.
        found: String,
    },
    /// A metadata integer does not fit the requested type (for example a negative `i32`
    /// read with `get_u32`).
    #[error("metadata key {key:?} holds {value}, which does not fit {expected}")]
    OutOfRange {
        /// The key asked for.
        key: String,
        /// The stored value, printed.
        value: String,
        /// The requested type.
        expected: &'static str,
    },
    /// A tensor the caller needs is absent.
    #[error("{}tensor {name:?} is missing", PathPrefix(.path.as_deref()))]
    MissingTensor {
        /// The tensor name asked for.
        name: String,
        /// The file searched, when it was opened from a path.
        path: Option<PathBuf>,
    },
    /// [`GgufWriter::tensor`](super::GgufWriter::tensor) was given an inconsistent tensor.
    #[error("tensor {name:?} (dims {dims:?}, {ty}): {reason}")]
    InvalidTensor {
        /// The tensor name.
        name: String,
        /// Its dims, GGUF order.
        dims: Vec<u64>,
        /// Its element type.
        ty: GgmlType,
        /// What is inconsistent.
        reason: String,
    },
}

/// What is wrong with a field of a malformed GGUF file (the `kind` of [`GgufError::Format`]).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum FormatError {
    /// The field runs past the end of the file.
    #[error("truncated: needs {needed} bytes, {available} remain")]
    Truncated {
        /// Bytes the field needs.
        needed: u64,
        /// Bytes left in the file from the field's offset.
        available: u64,
    },
    /// The file does not start with `GGUF`.
    #[error("bad magic {found:02x?}, expected \"GGUF\" (47 47 55 46)")]
    BadMagic {
        /// The first four bytes (fewer if the file is shorter).
        found: Vec<u8>,
    },
    /// A version other than 2 or 3.
    #[error("unsupported GGUF version {version}{}", version_hint(*.version))]
    UnsupportedVersion {
        /// The version read (little-endian).
        version: u32,
    },
    /// A metadata value type id outside 0..=12.
    #[error("unknown metadata value type {id}")]
    UnknownValueType {
        /// The raw type id.
        id: u32,
    },
    /// A tensor type id this reader does not know.
    #[error("unknown tensor type {id}")]
    UnknownTensorType {
        /// The raw `ggml_type` id.
        id: u32,
    },
    /// A count that cannot fit in the bytes that remain, even at the smallest encoding of
    /// each entry.
    #[error(
        "count {count} cannot fit: each entry takes at least {min_entry_bytes} bytes and {remaining} bytes remain"
    )]
    CountTooLarge {
        /// The count read.
        count: u64,
        /// Smallest encoded size of one entry.
        min_entry_bytes: u64,
        /// Bytes left in the file after the count.
        remaining: u64,
    },
    /// Arrays nested deeper than the reader accepts.
    #[error("arrays nested deeper than {max} levels")]
    NestingTooDeep {
        /// The deepest nesting accepted.
        max: usize,
    },
    /// A string that is not valid UTF-8.
    #[error("invalid UTF-8 after {valid_up_to} valid bytes")]
    InvalidUtf8 {
        /// Length of the valid prefix; the error's offset points at the first bad byte.
        valid_up_to: u64,
    },
    /// A bool byte other than 0 or 1.
    #[error("invalid bool byte {byte:#04x}, expected 0 or 1")]
    InvalidBool {
        /// The byte read.
        byte: u8,
    },
    /// A metadata key that occurs twice.
    #[error("duplicate metadata key {key:?} (first at metadata[{first_index}])")]
    DuplicateKey {
        /// The key.
        key: String,
        /// Index of its first occurrence.
        first_index: usize,
    },
    /// A tensor name that occurs twice.
    #[error("duplicate tensor name {name:?} (first at tensor_infos[{first_index}])")]
    DuplicateTensor {
        /// The name.
        name: String,
        /// Index of its first occurrence.
        first_index: usize,
    },
    /// `general.alignment` is not a nonzero power of two, or not an unsigned integer.
    #[error("general.alignment must be a nonzero power-of-two integer, found {found}")]
    BadAlignment {
        /// The value (or type) found.
        found: String,
    },
    /// More dimensions than GGML supports.
    #[error("{n_dims} dimensions, at most {max} supported")]
    TooManyDims {
        /// The count read.
        n_dims: u32,
        /// GGML_MAX_DIMS.
        max: u32,
    },
    /// The product of the dims (or the byte size) overflows 64 bits.
    #[error("dims {dims:?} overflow: the element count or byte size exceeds 2^64")]
    SizeOverflow {
        /// The dims read.
        dims: Vec<u64>,
    },
    /// The innermost dim is not a whole number of the type's blocks.
    #[error("innermost dim {dim0} is not a multiple of the {ty} block length {block_len}")]
    PartialBlock {
        /// dims[0].
        dim0: u64,
        /// The tensor type.
        ty: GgmlType,
        /// Elements per block of that type.
        block_len: u64,
    },
    /// A tensor data offset that is not a multiple of the alignment.
    #[error("tensor data offset {offset} is not a multiple of the alignment {alignment}")]
    Misaligned {
        /// Offset within the data section.
        offset: u64,
        /// The file's alignment.
        alignment: u64,
    },
    /// A tensor's data does not lie inside the data section.
    #[error(
        "tensor data [{offset}, {offset}+{n_bytes}) lies outside the data section of {data_len} bytes"
    )]
    OutOfBounds {
        /// Offset within the data section.
        offset: u64,
        /// The tensor's byte size.
        n_bytes: u64,
        /// Bytes in the data section (from its start to the end of the file).
        data_len: u64,
    },
    /// Two tensors' data ranges overlap.
    #[error(
        "tensor data [{offset}, {end}) overlaps tensor {other:?} at [{other_offset}, {other_end})"
    )]
    Overlap {
        /// This tensor's data offset within the data section.
        offset: u64,
        /// End of this tensor's data.
        end: u64,
        /// The other tensor's name.
        other: String,
        /// The other tensor's data offset.
        other_offset: u64,
        /// End of the other tensor's data.
        other_end: u64,
    },
    /// A size or offset that this machine's address space cannot hold.
    #[error("value {value} does not fit this platform's usize")]
    TooLargeForPlatform {
        /// The value read.
        value: u64,
    },
}

fn version_hint(version: u32) -> &'static str {
    match version {
        1 => " (GGUF v1 is obsolete; only v2 and v3 are read)",
        v if matches!(v.swap_bytes(), 2 | 3) => {
            " (a big-endian GGUF file; only little-endian is read)"
        }
        _ => " (only v2 and v3 are read)",
    }
}

struct PathPrefix<'a>(Option<&'a Path>);

impl fmt::Display for PathPrefix<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            Some(p) => write!(f, "{}: ", p.display()),
            None => Ok(()),
        }
    }
}

impl GgufError {
    /// The [`FormatError`] of a [`GgufError::Format`], for matching in callers and tests.
    pub fn format_kind(&self) -> Option<&FormatError> {
        match self {
            GgufError::Format { kind, .. } => Some(kind),
            _ => None,
        }
    }

    /// The byte offset of a [`GgufError::Format`].
    pub fn offset(&self) -> Option<u64> {
        match self {
            GgufError::Format { offset, .. } => Some(*offset),
            _ => None,
        }
    }

    /// Attaches the file path to an error raised while parsing bytes read from that file.
    pub(crate) fn with_path(mut self, file: &Path) -> Self {
        match &mut self {
            GgufError::Format { path, .. } | GgufError::MissingTensor { path, .. } => {
                *path = Some(file.to_path_buf())
            }
            _ => {}
        }
        self
    }
}
