//! Writing GGUF v3 (or v2) files: metadata, tensor infos, alignment padding and tensor data.

use std::path::Path;

use super::error::GgufError;
use super::metadata::{MetaArray, MetaValue, Metadata};
use super::reader::{ALIGNMENT_KEY, DEFAULT_ALIGNMENT, GGUF_MAGIC};
use super::tensor::{MAX_DIMS, TensorInfo};
use super::types::GgmlType;

/// Builds a GGUF file in memory (little-endian, layout of ggml's `docs/gguf.md`).
///
/// Tensors are laid out in insertion order, each at the next multiple of the alignment
/// within the data section; padding bytes are zero. When the alignment is not the default
/// 32 and the caller did not set `general.alignment`, the writer adds it as a `u32`. A
/// `general.alignment` value set by the caller is written as given (tests use this to build
/// files the reader must reject); padding always follows [`GgufWriter::alignment`].
///
/// ```
/// use engine::gguf::{GgmlType, GgufFile, GgufWriter, MetaValue};
/// let mut w = GgufWriter::new();
/// w.metadata("general.architecture", MetaValue::String("llama".into()));
/// w.tensor("x", &[2], GgmlType::F32, vec![0; 8]).unwrap();
/// let f = GgufFile::from_bytes(w.to_bytes()).unwrap();
/// assert_eq!(f.metadata().get_str("general.architecture").unwrap(), "llama");
/// assert_eq!(f.require_tensor("x").unwrap().data, &[0u8; 8][..]);
/// ```
#[derive(Debug, Clone)]
pub struct GgufWriter {
    version: u32,
    alignment: u64,
    metadata: Metadata,
    tensors: Vec<(TensorInfo, Vec<u8>)>,
}

impl Default for GgufWriter {
    fn default() -> Self {
        Self::new()
    }
}

impl GgufWriter {
    /// An empty GGUF v3 file with alignment 32.
    pub fn new() -> Self {
        GgufWriter {
            version: 3,
            alignment: DEFAULT_ALIGNMENT,
            metadata: Metadata::new(),
            tensors: Vec::new(),
        }
    }

    /// Sets the data-section alignment in bytes.
    ///
    /// # Panics
    /// When `a` is not a power of two fitting `u32` (a programming error, not bad input).
    pub fn alignment(mut self, a: u64) -> Self {
        assert!(
            a.is_power_of_two() && a <= u32::MAX as u64,
            "GGUF alignment must be a power of two fitting u32, got {a}"
        );
        self.alignment = a;
        self
    }

    /// Sets the GGUF version written: 3 (default) or 2. For little-endian files the two
    /// layouts are identical; only the version field differs.
    ///
    /// # Panics
    /// When `v` is neither 2 nor 3.
    pub fn version(mut self, v: u32) -> Self {
        assert!(
            matches!(v, 2 | 3),
            "GGUF writer supports versions 2 and 3, got {v}"
        );
        self.version = v;
        self
    }

    /// Sets metadata `key` to `value`. Setting a key again replaces its value in place
    /// (keys stay unique and in first-insertion order).
    pub fn metadata(&mut self, key: &str, value: MetaValue) -> &mut Self {
        self.metadata.insert(key, value);
        self
    }

    /// Appends a tensor. `dims` are GGUF order (innermost first; a `[out, in]` matrix is
    /// `dims = [in, out]`); `data` is its raw bytes in the GGML layout of `ty`.
    ///
    /// Errors: [`GgufError::InvalidTensor`] when the name is already used, there are more
    /// than [`MAX_DIMS`] dims, `dims[0]` is not a whole number of `ty` blocks, the size
    /// overflows, or `data.len()` is not the size the dims and type give.
    pub fn tensor(
        &mut self,
        name: &str,
        dims: &[u64],
        ty: GgmlType,
        data: Vec<u8>,
    ) -> Result<&mut Self, GgufError> {
        let invalid = |reason: String| GgufError::InvalidTensor {
            name: name.to_string(),
            dims: dims.to_vec(),
            ty,
            reason,
        };
        if self.tensors.iter().any(|(t, _)| t.name == name) {
            return Err(invalid("a tensor with this name was already added".into()));
        }
        if dims.len() > MAX_DIMS as usize {
            return Err(invalid(format!("at most {MAX_DIMS} dims are allowed")));
        }
        let block_len = ty.block_len() as u64;
        let dim0 = dims.first().copied().unwrap_or(1);
        if dim0 % block_len != 0 {
            return Err(invalid(format!(
                "dims[0] = {dim0} is not a multiple of the block length {block_len}"
            )));
        }
        let n_bytes = dims
            .iter()
            .try_fold(1u64, |acc, &d| acc.checked_mul(d))
            .and_then(|n| (n / block_len).checked_mul(ty.block_bytes() as u64))
            .ok_or_else(|| invalid("the element count or byte size overflows u64".into()))?;
        if data.len() as u64 != n_bytes {
            return Err(invalid(format!(
                "data is {} bytes, the dims and type need {n_bytes}",
                data.len()
            )));
        }
        let info = TensorInfo {
            name: name.to_string(),
            dims: dims.to_vec(),
            ty,
            offset: 0,
        };
        self.tensors.push((info, data));
        Ok(self)
    }

    /// The complete file.
    pub fn to_bytes(&self) -> Vec<u8> {
        let align = self.alignment;
        let mut metadata = self.metadata.clone();
        if align != DEFAULT_ALIGNMENT && metadata.get(ALIGNMENT_KEY).is_none() {
            metadata.insert(ALIGNMENT_KEY, MetaValue::U32(align as u32));
        }

        let mut offsets = Vec::with_capacity(self.tensors.len());
        let mut end = 0u64;
        for (_, data) in &self.tensors {
            let at = end.next_multiple_of(align);
            offsets.push(at);
            end = at + data.len() as u64;
        }

        let mut out = Vec::new();
        out.extend_from_slice(&GGUF_MAGIC);
        out.extend_from_slice(&self.version.to_le_bytes());
        out.extend_from_slice(&(self.tensors.len() as u64).to_le_bytes());
        out.extend_from_slice(&(metadata.len() as u64).to_le_bytes());
        for (key, value) in metadata.iter() {
            put_string(&mut out, key);
            out.extend_from_slice(&value.meta_type().id().to_le_bytes());
            put_value(&mut out, value);
        }
        for ((info, _), offset) in self.tensors.iter().zip(&offsets) {
            put_string(&mut out, &info.name);
            out.extend_from_slice(&(info.dims.len() as u32).to_le_bytes());
            for d in &info.dims {
                out.extend_from_slice(&d.to_le_bytes());
            }
            out.extend_from_slice(&info.ty.id().to_le_bytes());
            out.extend_from_slice(&offset.to_le_bytes());
        }
        pad_to(&mut out, align);
        let data_start = out.len();
        for ((_, data), offset) in self.tensors.iter().zip(&offsets) {
            out.resize(data_start + *offset as usize, 0);
            out.extend_from_slice(data);
        }
        pad_to(&mut out, align);
        out
    }

    /// Writes the file to `path` (created or truncated).
    ///
    /// Errors: [`GgufError::Io`] naming `path`.
    pub fn write_to(&self, path: impl AsRef<Path>) -> Result<(), GgufError> {
        let path = path.as_ref();
        std::fs::write(path, self.to_bytes()).map_err(|source| GgufError::Io {
            path: path.to_path_buf(),
            source,
        })
    }
}

fn pad_to(out: &mut Vec<u8>, align: u64) {
    let len = (out.len() as u64).next_multiple_of(align) as usize;
    out.resize(len, 0);
}

fn put_string(out: &mut Vec<u8>, s: &str) {
    out.extend_from_slice(&(s.len() as u64).to_le_bytes());
    out.extend_from_slice(s.as_bytes());
}

fn put_value(out: &mut Vec<u8>, v: &MetaValue) {
    match v {
        MetaValue::U8(x) => out.push(*x),
        MetaValue::I8(x) => out.extend_from_slice(&x.to_le_bytes()),
        MetaValue::U16(x) => out.extend_from_slice(&x.to_le_bytes()),
        MetaValue::I16(x) => out.extend_from_slice(&x.to_le_bytes()),
        MetaValue::U32(x) => out.extend_from_slice(&x.to_le_bytes()),
        MetaValue::I32(x) => out.extend_from_slice(&x.to_le_bytes()),
        MetaValue::F32(x) => out.extend_from_slice(&x.to_le_bytes()),
        MetaValue::Bool(x) => out.push(u8::from(*x)),
        MetaValue::String(s) => put_string(out, s),
        MetaValue::Array(a) => put_array(out, a),
        MetaValue::U64(x) => out.extend_from_slice(&x.to_le_bytes()),
        MetaValue::I64(x) => out.extend_from_slice(&x.to_le_bytes()),
        MetaValue::F64(x) => out.extend_from_slice(&x.to_le_bytes()),
    }
}

/// An array: u32 element type, u64 count, the elements (nested arrays carry their own
/// type and count).
fn put_array(out: &mut Vec<u8>, a: &MetaArray) {
    out.extend_from_slice(&a.elem_type().id().to_le_bytes());
    out.extend_from_slice(&(a.len() as u64).to_le_bytes());
    macro_rules! le {
        ($v:expr) => {
            for x in $v {
                out.extend_from_slice(&x.to_le_bytes());
            }
        };
    }
    match a {
        MetaArray::U8(v) => out.extend_from_slice(v),
        MetaArray::I8(v) => le!(v),
        MetaArray::U16(v) => le!(v),
        MetaArray::I16(v) => le!(v),
        MetaArray::U32(v) => le!(v),
        MetaArray::I32(v) => le!(v),
        MetaArray::F32(v) => le!(v),
        MetaArray::Bool(v) => out.extend(v.iter().map(|&b| u8::from(b))),
        MetaArray::String(v) => v.iter().for_each(|s| put_string(out, s)),
        MetaArray::Array(v) => v.iter().for_each(|inner| put_array(out, inner)),
        MetaArray::U64(v) => le!(v),
        MetaArray::I64(v) => le!(v),
        MetaArray::F64(v) => le!(v),
    }
}
