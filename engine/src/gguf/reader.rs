//! Parsing and validating a GGUF v2/v3 file into a [`GgufFile`] with zero-copy tensor views.

use std::collections::HashMap;
use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};

use memmap2::Mmap;

use super::cursor::{Cursor, FieldContext};
use super::error::{FormatError, GgufError};
use super::metadata::{MetaArray, MetaType, MetaValue, Metadata};
use super::tensor::{MAX_DIMS, TensorInfo, TensorView};
use super::types::GgmlType;

/// The four magic bytes every GGUF file starts with.
pub const GGUF_MAGIC: [u8; 4] = *b"GGUF";

/// The data-section alignment when `general.alignment` is absent (GGUF specification).
pub const DEFAULT_ALIGNMENT: u64 = 32;

/// The metadata key holding the data-section alignment.
pub const ALIGNMENT_KEY: &str = "general.alignment";

/// Deepest nesting of arrays inside arrays the reader accepts. GGUF sets no limit; this one
/// bounds the reader's recursion so a crafted file cannot overflow the stack.
pub const MAX_ARRAY_NESTING: usize = 16;

/// Smallest encoded tensor info: name length (8), n_dims (4), type (4), offset (8).
const MIN_TENSOR_INFO_BYTES: u64 = 24;
/// Smallest encoded metadata entry: key length (8), value type (4), a one-byte value.
const MIN_KV_BYTES: u64 = 13;

enum Storage {
    Mmap(Mmap),
    Owned(Vec<u8>),
}

impl Storage {
    fn bytes(&self) -> &[u8] {
        match self {
            Storage::Mmap(m) => m,
            Storage::Owned(v) => v,
        }
    }
}

/// A parsed, validated GGUF file (v2 or v3, little-endian).
///
/// Holds the file's bytes (a read-only memory map for [`GgufFile::open`], a `Vec<u8>` for
/// [`GgufFile::from_bytes`]); metadata and tensor infos are decoded once at open, tensor data
/// is never copied. Every tensor's data is checked at open to be aligned, inside the data
/// section and disjoint from every other tensor's data.
///
/// Layout read (GGUF specification, ggml/docs/gguf.md): magic `GGUF`, u32 version, u64
/// tensor count, u64 metadata count, the metadata entries, the tensor infos, padding to
/// `general.alignment` (default 32), then the data section.
pub struct GgufFile {
    storage: Storage,
    path: Option<PathBuf>,
    version: u32,
    metadata: Metadata,
    tensors: Vec<TensorInfo>,
    by_name: HashMap<String, usize>,
    alignment: u64,
    data_start: usize,
}

impl std::fmt::Debug for GgufFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GgufFile")
            .field("path", &self.path)
            .field("version", &self.version)
            .field("metadata_keys", &self.metadata.len())
            .field("tensors", &self.tensors.len())
            .field("alignment", &self.alignment)
            .field("data_start", &self.data_start)
            .finish()
    }
}

impl GgufFile {
    /// Opens and validates the GGUF file at `path`, memory-mapping it read-only.
    ///
    /// The map assumes the file is not modified while the `GgufFile` lives (as any reader
    /// of a memory-mapped model does).
    ///
    /// Errors: [`GgufError::Io`] when the file cannot be opened or mapped;
    /// [`GgufError::Format`] (naming `path`) when the bytes are not a valid GGUF v2/v3 file.
    pub fn open(path: impl AsRef<Path>) -> Result<GgufFile, GgufError> {
        let path = path.as_ref();
        let io = |source| GgufError::Io {
            path: path.to_path_buf(),
            source,
        };
        let mut file = File::open(path).map_err(io)?;
        let len = file.metadata().map_err(io)?.len();
        let storage = if len < 64 {
            // Too small to be worth a map (and zero-length maps are not portable): read it.
            let mut v = Vec::new();
            file.read_to_end(&mut v).map_err(io)?;
            Storage::Owned(v)
        } else {
            // SAFETY: the map is read-only and private to this value; the documented contract
            // is that the file is not modified while the map lives.
            Storage::Mmap(unsafe { Mmap::map(&file) }.map_err(io)?)
        };
        Self::parse(storage, Some(path.to_path_buf()))
    }

    /// Parses and validates a GGUF file held in memory.
    ///
    /// Errors: [`GgufError::Format`] (with `path: None`) when the bytes are not a valid
    /// GGUF v2/v3 file.
    pub fn from_bytes(bytes: Vec<u8>) -> Result<GgufFile, GgufError> {
        Self::parse(Storage::Owned(bytes), None)
    }

    fn parse(storage: Storage, path: Option<PathBuf>) -> Result<GgufFile, GgufError> {
        let parsed = match parse_layout(storage.bytes()) {
            Ok(p) => p,
            Err(e) => {
                return Err(match &path {
                    Some(p) => e.with_path(p),
                    None => e,
                });
            }
        };
        Ok(GgufFile {
            storage,
            path,
            version: parsed.version,
            metadata: parsed.metadata,
            tensors: parsed.tensors,
            by_name: parsed.by_name,
            alignment: parsed.alignment,
            data_start: parsed.data_start,
        })
    }

    /// The GGUF version (2 or 3).
    pub fn version(&self) -> u32 {
        self.version
    }

    /// The metadata, in file order.
    pub fn metadata(&self) -> &Metadata {
        &self.metadata
    }

    /// The tensor infos, in file order.
    pub fn tensors(&self) -> &[TensorInfo] {
        &self.tensors
    }

    /// The tensor called `name` with its bytes, or `None` when there is none.
    pub fn tensor(&self, name: &str) -> Option<TensorView<'_>> {
        self.tensor_at(self.tensor_index(name)?)
    }

    /// The position of the tensor called `name` in [`GgufFile::tensors`], or `None`.
    pub fn tensor_index(&self, name: &str) -> Option<usize> {
        self.by_name.get(name).copied()
    }

    /// The tensor at position `index` of [`GgufFile::tensors`] with its bytes, or `None`
    /// past the end: a lookup without hashing the name, for a caller that resolved the
    /// name once ([`GgufFile::tensor_index`]).
    pub fn tensor_at(&self, index: usize) -> Option<TensorView<'_>> {
        let info = self.tensors.get(index)?;
        // Offsets and sizes were checked against the data section at open.
        let start = self.data_start + info.offset as usize;
        let data = &self.storage.bytes()[start..start + info.n_bytes() as usize];
        Some(TensorView { info, data })
    }

    /// Hand the resident pages of tensor `index`'s data back to the system, for a caller
    /// that keeps its own copy of the tensor (the packed weight matrices): whole pages
    /// inside the tensor's bytes only (pages it shares with a neighbour stay), with
    /// `madvise(MADV_DONTNEED)` on the read-only map. The bytes stay readable and unchanged:
    /// a later read faults them in again from the file. Returns the bytes released; 0 for
    /// a file held in memory ([`GgufFile::from_bytes`]), an index past the end, a tensor
    /// smaller than a page, or a system that refuses the advice (it changes no result).
    pub fn release_tensor_pages(&self, index: usize) -> usize {
        let (Storage::Mmap(map), Some(info)) = (&self.storage, self.tensors.get(index)) else {
            return 0;
        };
        const PAGE: usize = 4096;
        let start = self.data_start + info.offset as usize;
        let end = start + info.n_bytes() as usize;
        // The map starts on a page boundary, so offsets into it round like addresses.
        let (lo, hi) = (start.next_multiple_of(PAGE), end / PAGE * PAGE);
        if hi <= lo {
            return 0;
        }
        #[cfg(unix)]
        {
            use memmap2::UncheckedAdvice::DontNeed;
            // SAFETY: the map is read-only and shared with the file: dropping its pages
            // loses nothing (they are read again from the file on the next access), and
            // no byte a live reference points to changes.
            match unsafe { map.unchecked_advise_range(DontNeed, lo, hi - lo) } {
                Ok(()) => hi - lo,
                Err(_) => 0,
            }
        }
        #[cfg(not(unix))]
        {
            let _ = map;
            0
        }
    }

    /// The tensor called `name`.
    ///
    /// Errors: [`GgufError::MissingTensor`] naming the tensor (and the file, when opened
    /// from a path).
    pub fn require_tensor(&self, name: &str) -> Result<TensorView<'_>, GgufError> {
        self.tensor(name).ok_or_else(|| GgufError::MissingTensor {
            name: name.to_string(),
            path: self.path.clone(),
        })
    }

    /// The data-section alignment in bytes (`general.alignment`, default 32).
    pub fn alignment(&self) -> u64 {
        self.alignment
    }

    /// Byte offset of the data section from the start of the file.
    pub fn data_offset(&self) -> u64 {
        self.data_start as u64
    }

    /// The path the file was opened from; `None` for [`GgufFile::from_bytes`].
    pub fn path(&self) -> Option<&Path> {
        self.path.as_deref()
    }
}

struct Layout {
    version: u32,
    metadata: Metadata,
    tensors: Vec<TensorInfo>,
    by_name: HashMap<String, usize>,
    alignment: u64,
    data_start: usize,
}

/// Where a tensor info's offset field sits, for errors raised after all infos are read.
struct InfoSite {
    offset_field_at: u64,
}

fn format_err(offset: u64, field: String, kind: FormatError) -> GgufError {
    GgufError::Format {
        path: None,
        offset,
        field,
        kind,
    }
}

fn parse_layout(buf: &[u8]) -> Result<Layout, GgufError> {
    let mut c = Cursor::new(buf);

    let magic = &buf[..buf.len().min(4)];
    if !GGUF_MAGIC.starts_with(magic) {
        return Err(format_err(
            0,
            "magic".into(),
            FormatError::BadMagic {
                found: magic.to_vec(),
            },
        ));
    }
    c.take(4).field(|| "magic".into())?;

    let version_at = c.pos() as u64;
    let version = c.u32().field(|| "version".into())?;
    if !matches!(version, 2 | 3) {
        return Err(format_err(
            version_at,
            "version".into(),
            FormatError::UnsupportedVersion { version },
        ));
    }
    let tensor_count = c
        .count(MIN_TENSOR_INFO_BYTES)
        .field(|| "tensor_count".into())?;
    let kv_count = c.count(MIN_KV_BYTES).field(|| "metadata_kv_count".into())?;

    let mut metadata = Metadata::new();
    let mut alignment = DEFAULT_ALIGNMENT;
    for i in 0..kv_count {
        let key_at = c.pos() as u64;
        let key = c.string().field(|| format!("metadata[{i}].key"))?;
        let ty_at = c.pos() as u64;
        let ty_id = c
            .u32()
            .field(|| format!("metadata[{i}] ({key:?}).value_type"))?;
        let ty = MetaType::from_id(ty_id).ok_or_else(|| {
            format_err(
                ty_at,
                format!("metadata[{i}] ({key:?}).value_type"),
                FormatError::UnknownValueType { id: ty_id },
            )
        })?;
        let value_at = c.pos() as u64;
        let value = read_value(&mut c, ty, 0, &|| format!("metadata[{i}] ({key:?}).value"))?;
        if key == ALIGNMENT_KEY {
            alignment = check_alignment(&value).ok_or_else(|| {
                let found = match value.as_integer() {
                    Some(a) => a.to_string(),
                    None => value.type_description(),
                };
                format_err(
                    value_at,
                    format!("metadata[{i}] ({key:?}).value"),
                    FormatError::BadAlignment { found },
                )
            })?;
        }
        if let Err(first_index) = metadata.try_push(key.clone(), value) {
            return Err(format_err(
                key_at,
                format!("metadata[{i}].key"),
                FormatError::DuplicateKey { key, first_index },
            ));
        }
    }

    let mut tensors = Vec::with_capacity(tensor_count.min(4096));
    let mut sites = Vec::with_capacity(tensor_count.min(4096));
    let mut by_name: HashMap<String, usize> = HashMap::new();
    for i in 0..tensor_count {
        let (info, site) = read_tensor_info(&mut c, i, &by_name, alignment)?;
        by_name.insert(info.name.clone(), i);
        tensors.push(info);
        sites.push(site);
    }

    let infos_end = c.pos() as u64;
    let data_start = infos_end
        .div_ceil(alignment)
        .checked_mul(alignment)
        .and_then(|v| usize::try_from(v).ok())
        .ok_or_else(|| {
            format_err(
                infos_end,
                "data_section".into(),
                FormatError::TooLargeForPlatform { value: infos_end },
            )
        })?;
    let data_len = buf.len().saturating_sub(data_start) as u64;

    for (i, (t, site)) in tensors.iter().zip(&sites).enumerate() {
        let n_bytes = t.n_bytes();
        if t.offset
            .checked_add(n_bytes)
            .is_none_or(|end| end > data_len)
        {
            return Err(format_err(
                site.offset_field_at,
                format!("tensor_infos[{i}] ({:?}).offset", t.name),
                FormatError::OutOfBounds {
                    offset: t.offset,
                    n_bytes,
                    data_len,
                },
            ));
        }
    }

    // Disjointness: sort the non-empty ranges by start; each must end before the next begins.
    let mut order: Vec<usize> = (0..tensors.len())
        .filter(|&i| tensors[i].n_bytes() > 0)
        .collect();
    order.sort_by_key(|&i| (tensors[i].offset, i));
    for w in order.windows(2) {
        let (a, b) = (&tensors[w[0]], &tensors[w[1]]);
        let a_end = a.offset + a.n_bytes();
        if a_end > b.offset {
            // Report the later tensor in file order.
            let (me, other, idx) = if w[0] < w[1] {
                (b, a, w[1])
            } else {
                (a, b, w[0])
            };
            return Err(format_err(
                sites[idx].offset_field_at,
                format!("tensor_infos[{idx}] ({:?}).offset", me.name),
                FormatError::Overlap {
                    offset: me.offset,
                    end: me.offset + me.n_bytes(),
                    other: other.name.clone(),
                    other_offset: other.offset,
                    other_end: other.offset + other.n_bytes(),
                },
            ));
        }
    }

    Ok(Layout {
        version,
        metadata,
        tensors,
        by_name,
        alignment,
        data_start,
    })
}

/// The alignment a `general.alignment` value gives: an integer that is a nonzero power of two
/// fitting u32 (the type the specification gives the key).
fn check_alignment(v: &MetaValue) -> Option<u64> {
    let a = v.as_integer()?;
    let a = u32::try_from(a).ok()?;
    a.is_power_of_two().then_some(a as u64)
}

fn read_tensor_info(
    c: &mut Cursor<'_>,
    i: usize,
    by_name: &HashMap<String, usize>,
    alignment: u64,
) -> Result<(TensorInfo, InfoSite), GgufError> {
    let name_at = c.pos() as u64;
    let name = c.string().field(|| format!("tensor_infos[{i}].name"))?;
    if let Some(&first_index) = by_name.get(&name) {
        return Err(format_err(
            name_at,
            format!("tensor_infos[{i}].name"),
            FormatError::DuplicateTensor { name, first_index },
        ));
    }
    let field = |f: &str| format!("tensor_infos[{i}] ({name:?}).{f}");

    let n_dims_at = c.pos() as u64;
    let n_dims = c.u32().field(|| field("n_dims"))?;
    if n_dims > MAX_DIMS {
        return Err(format_err(
            n_dims_at,
            field("n_dims"),
            FormatError::TooManyDims {
                n_dims,
                max: MAX_DIMS,
            },
        ));
    }
    let mut dims = Vec::with_capacity(n_dims as usize);
    for d in 0..n_dims as usize {
        dims.push(c.u64().field(|| field(&format!("dims[{d}]")))?);
    }

    let ty_at = c.pos() as u64;
    let ty_id = c.u32().field(|| field("type"))?;
    let ty = GgmlType::from_id(ty_id).ok_or_else(|| {
        format_err(
            ty_at,
            field("type"),
            FormatError::UnknownTensorType { id: ty_id },
        )
    })?;

    let n_elements = dims.iter().try_fold(1u64, |acc, &d| acc.checked_mul(d));
    let block_len = ty.block_len() as u64;
    let n_bytes = n_elements.and_then(|n| (n / block_len).checked_mul(ty.block_bytes() as u64));
    if n_bytes.is_none() {
        return Err(format_err(
            n_dims_at,
            field("dims"),
            FormatError::SizeOverflow { dims },
        ));
    }
    let dim0 = dims.first().copied().unwrap_or(1);
    if dim0 % block_len != 0 {
        return Err(format_err(
            n_dims_at + 4,
            field("dims[0]"),
            FormatError::PartialBlock {
                dim0,
                ty,
                block_len,
            },
        ));
    }

    let offset_at = c.pos() as u64;
    let offset = c.u64().field(|| field("offset"))?;
    if offset % alignment != 0 {
        return Err(format_err(
            offset_at,
            field("offset"),
            FormatError::Misaligned { offset, alignment },
        ));
    }
    Ok((
        TensorInfo {
            name,
            dims,
            ty,
            offset,
        },
        InfoSite {
            offset_field_at: offset_at,
        },
    ))
}

fn read_value(
    c: &mut Cursor<'_>,
    ty: MetaType,
    depth: usize,
    field: &dyn Fn() -> String,
) -> Result<MetaValue, GgufError> {
    let v = match ty {
        MetaType::U8 => MetaValue::U8(c.u8().field(field)?),
        MetaType::I8 => MetaValue::I8(c.i8().field(field)?),
        MetaType::U16 => MetaValue::U16(c.u16().field(field)?),
        MetaType::I16 => MetaValue::I16(c.i16().field(field)?),
        MetaType::U32 => MetaValue::U32(c.u32().field(field)?),
        MetaType::I32 => MetaValue::I32(c.i32().field(field)?),
        MetaType::F32 => MetaValue::F32(c.f32().field(field)?),
        MetaType::Bool => MetaValue::Bool(c.bool().field(field)?),
        MetaType::String => MetaValue::String(c.string().field(field)?),
        MetaType::U64 => MetaValue::U64(c.u64().field(field)?),
        MetaType::I64 => MetaValue::I64(c.i64().field(field)?),
        MetaType::F64 => MetaValue::F64(c.f64().field(field)?),
        MetaType::Array => MetaValue::Array(read_array(c, depth, field)?),
    };
    Ok(v)
}

/// Pre-allocation ceiling for arrays: counts are already checked against the bytes
/// remaining; this keeps a large-but-possible count from reserving memory up front.
const PREALLOC_CAP: usize = 1 << 16;

fn read_array(
    c: &mut Cursor<'_>,
    depth: usize,
    field: &dyn Fn() -> String,
) -> Result<MetaArray, GgufError> {
    if depth >= MAX_ARRAY_NESTING {
        return Err(GgufError::Format {
            path: None,
            offset: c.pos() as u64,
            field: field(),
            kind: FormatError::NestingTooDeep {
                max: MAX_ARRAY_NESTING,
            },
        });
    }
    let ty_at = c.pos() as u64;
    let ty_id = c.u32().field(|| format!("{}.elem_type", field()))?;
    let ty = MetaType::from_id(ty_id).ok_or_else(|| {
        format_err(
            ty_at,
            format!("{}.elem_type", field()),
            FormatError::UnknownValueType { id: ty_id },
        )
    })?;
    let n = c
        .count(ty.min_encoded_bytes())
        .field(|| format!("{}.count", field()))?;

    macro_rules! elems {
        ($variant:ident, $read:ident) => {{
            let mut v = Vec::with_capacity(n.min(PREALLOC_CAP));
            for k in 0..n {
                v.push(c.$read().field(|| format!("{}[{k}]", field()))?);
            }
            MetaArray::$variant(v)
        }};
    }
    let a = match ty {
        MetaType::U8 => elems!(U8, u8),
        MetaType::I8 => elems!(I8, i8),
        MetaType::U16 => elems!(U16, u16),
        MetaType::I16 => elems!(I16, i16),
        MetaType::U32 => elems!(U32, u32),
        MetaType::I32 => elems!(I32, i32),
        MetaType::F32 => elems!(F32, f32),
        MetaType::Bool => elems!(Bool, bool),
        MetaType::String => elems!(String, string),
        MetaType::U64 => elems!(U64, u64),
        MetaType::I64 => elems!(I64, i64),
        MetaType::F64 => elems!(F64, f64),
        MetaType::Array => {
            let mut v = Vec::with_capacity(n.min(PREALLOC_CAP));
            for k in 0..n {
                let inner = || format!("{}[{k}]", field());
                v.push(read_array(c, depth + 1, &inner)?);
            }
            MetaArray::Array(v)
        }
    };
    Ok(a)
}
