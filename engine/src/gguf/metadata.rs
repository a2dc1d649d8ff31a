//! GGUF metadata: the typed key/value store of a file header, in file order.

use std::collections::HashMap;

use super::error::GgufError;

/// A GGUF metadata value type id (`gguf_type` in the GGUF specification, ggml/docs/gguf.md).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u32)]
pub enum MetaType {
    U8 = 0,
    I8 = 1,
    U16 = 2,
    I16 = 3,
    U32 = 4,
    I32 = 5,
    F32 = 6,
    Bool = 7,
    String = 8,
    Array = 9,
    U64 = 10,
    I64 = 11,
    F64 = 12,
}

impl MetaType {
    /// The type for a raw id, `None` for an id outside 0..=12.
    pub fn from_id(id: u32) -> Option<MetaType> {
        use MetaType::*;
        Some(match id {
            0 => U8,
            1 => I8,
            2 => U16,
            3 => I16,
            4 => U32,
            5 => I32,
            6 => F32,
            7 => Bool,
            8 => String,
            9 => Array,
            10 => U64,
            11 => I64,
            12 => F64,
            _ => return None,
        })
    }

    /// The raw id.
    pub fn id(self) -> u32 {
        self as u32
    }

    /// Smallest encoded size in bytes of one value of this type (a string is at least its
    /// 8-byte length, an array at least its 4-byte type and 8-byte count).
    pub fn min_encoded_bytes(self) -> u64 {
        use MetaType::*;
        match self {
            U8 | I8 | Bool => 1,
            U16 | I16 => 2,
            U32 | I32 | F32 => 4,
            U64 | I64 | F64 | String => 8,
            Array => 12,
        }
    }

    /// Lower-case name (`"u32"`, `"string"`, `"array"`).
    pub fn name(self) -> &'static str {
        use MetaType::*;
        match self {
            U8 => "u8",
            I8 => "i8",
            U16 => "u16",
            I16 => "i16",
            U32 => "u32",
            I32 => "i32",
            F32 => "f32",
            Bool => "bool",
            String => "string",
            Array => "array",
            U64 => "u64",
            I64 => "i64",
            F64 => "f64",
        }
    }
}

/// One metadata value. Variants mirror the GGUF value types one to one.
#[derive(Debug, Clone, PartialEq)]
pub enum MetaValue {
    U8(u8),
    I8(i8),
    U16(u16),
    I16(i16),
    U32(u32),
    I32(i32),
    F32(f32),
    Bool(bool),
    String(String),
    Array(MetaArray),
    U64(u64),
    I64(i64),
    F64(f64),
}

/// A typed metadata array: all elements share one type. Nested arrays are
/// [`MetaArray::Array`], whose inner arrays may each have their own element type.
#[derive(Debug, Clone, PartialEq)]
pub enum MetaArray {
    U8(Vec<u8>),
    I8(Vec<i8>),
    U16(Vec<u16>),
    I16(Vec<i16>),
    U32(Vec<u32>),
    I32(Vec<i32>),
    F32(Vec<f32>),
    Bool(Vec<bool>),
    String(Vec<String>),
    Array(Vec<MetaArray>),
    U64(Vec<u64>),
    I64(Vec<i64>),
    F64(Vec<f64>),
}

impl MetaValue {
    /// The GGUF type of this value.
    pub fn meta_type(&self) -> MetaType {
        match self {
            MetaValue::U8(_) => MetaType::U8,
            MetaValue::I8(_) => MetaType::I8,
            MetaValue::U16(_) => MetaType::U16,
            MetaValue::I16(_) => MetaType::I16,
            MetaValue::U32(_) => MetaType::U32,
            MetaValue::I32(_) => MetaType::I32,
            MetaValue::F32(_) => MetaType::F32,
            MetaValue::Bool(_) => MetaType::Bool,
            MetaValue::String(_) => MetaType::String,
            MetaValue::Array(_) => MetaType::Array,
            MetaValue::U64(_) => MetaType::U64,
            MetaValue::I64(_) => MetaType::I64,
            MetaValue::F64(_) => MetaType::F64,
        }
    }

    /// A description of the type for error messages: `"u32"`, `"array of string"`, ...
    pub fn type_description(&self) -> String {
        match self {
            MetaValue::Array(a) => a.type_description(),
            other => other.meta_type().name().to_string(),
        }
    }

    /// The value as an `i128` when it is an integer of any width (bools are not integers).
    pub fn as_integer(&self) -> Option<i128> {
        Some(match *self {
            MetaValue::U8(v) => v.into(),
            MetaValue::I8(v) => v.into(),
            MetaValue::U16(v) => v.into(),
            MetaValue::I16(v) => v.into(),
            MetaValue::U32(v) => v.into(),
            MetaValue::I32(v) => v.into(),
            MetaValue::U64(v) => v.into(),
            MetaValue::I64(v) => v.into(),
            _ => return None,
        })
    }
}

impl MetaArray {
    /// The element type.
    pub fn elem_type(&self) -> MetaType {
        match self {
            MetaArray::U8(_) => MetaType::U8,
            MetaArray::I8(_) => MetaType::I8,
            MetaArray::U16(_) => MetaType::U16,
            MetaArray::I16(_) => MetaType::I16,
            MetaArray::U32(_) => MetaType::U32,
            MetaArray::I32(_) => MetaType::I32,
            MetaArray::F32(_) => MetaType::F32,
            MetaArray::Bool(_) => MetaType::Bool,
            MetaArray::String(_) => MetaType::String,
            MetaArray::Array(_) => MetaType::Array,
            MetaArray::U64(_) => MetaType::U64,
            MetaArray::I64(_) => MetaType::I64,
            MetaArray::F64(_) => MetaType::F64,
        }
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        match self {
            MetaArray::U8(v) => v.len(),
            MetaArray::I8(v) => v.len(),
            MetaArray::U16(v) => v.len(),
            MetaArray::I16(v) => v.len(),
            MetaArray::U32(v) => v.len(),
            MetaArray::I32(v) => v.len(),
            MetaArray::F32(v) => v.len(),
            MetaArray::Bool(v) => v.len(),
            MetaArray::String(v) => v.len(),
            MetaArray::Array(v) => v.len(),
            MetaArray::U64(v) => v.len(),
            MetaArray::I64(v) => v.len(),
            MetaArray::F64(v) => v.len(),
        }
    }

    /// True when the array has no elements.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// `"array of <elem>"`.
    pub fn type_description(&self) -> String {
        format!("array of {}", self.elem_type().name())
    }
}

/// The metadata of a GGUF file: keys in file order, each mapped to its [`MetaValue`].
/// Keys are unique (the reader rejects duplicates).
#[derive(Debug, Clone, Default)]
pub struct Metadata {
    entries: Vec<(String, MetaValue)>,
    index: HashMap<String, usize>,
}

impl PartialEq for Metadata {
    /// Equal when the same keys hold equal values in the same order.
    fn eq(&self, other: &Self) -> bool {
        self.entries == other.entries
    }
}

impl Metadata {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    /// Appends `key`, or, when the key exists, returns the index of its first occurrence
    /// and leaves the store unchanged.
    pub(crate) fn try_push(&mut self, key: String, value: MetaValue) -> Result<(), usize> {
        if let Some(&first) = self.index.get(&key) {
            return Err(first);
        }
        self.index.insert(key.clone(), self.entries.len());
        self.entries.push((key, value));
        Ok(())
    }

    /// Sets `key` to `value`: replaces the value in place when the key exists, else
    /// appends it.
    pub fn insert(&mut self, key: &str, value: MetaValue) {
        match self.index.get(key) {
            Some(&i) => self.entries[i].1 = value,
            None => {
                self.index.insert(key.to_string(), self.entries.len());
                self.entries.push((key.to_string(), value));
            }
        }
    }

    /// The value of `key`, if present.
    pub fn get(&self, key: &str) -> Option<&MetaValue> {
        self.index.get(key).map(|&i| &self.entries[i].1)
    }

    /// All entries in file order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &MetaValue)> {
        self.entries.iter().map(|(k, v)| (k.as_str(), v))
    }

    /// Number of keys.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// True when there are no keys.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    fn require(&self, key: &str) -> Result<&MetaValue, GgufError> {
        self.get(key).ok_or_else(|| GgufError::MissingKey {
            key: key.to_string(),
        })
    }

    fn wrong(key: &str, expected: &'static str, found: &MetaValue) -> GgufError {
        GgufError::WrongType {
            key: key.to_string(),
            expected,
            found: found.type_description(),
        }
    }

    fn integer(&self, key: &str, expected: &'static str) -> Result<i128, GgufError> {
        let v = self.require(key)?;
        v.as_integer().ok_or_else(|| Self::wrong(key, expected, v))
    }

    /// A string value.
    ///
    /// Errors: [`GgufError::MissingKey`], or [`GgufError::WrongType`] when the value is not a string.
    pub fn get_str(&self, key: &str) -> Result<&str, GgufError> {
        match self.require(key)? {
            MetaValue::String(s) => Ok(s),
            v => Err(Self::wrong(key, "string", v)),
        }
    }

    /// An integer value of any GGUF integer type whose value fits `u32`.
    ///
    /// Errors: [`GgufError::MissingKey`]; [`GgufError::WrongType`] for a non-integer;
    /// [`GgufError::OutOfRange`] for a negative or too large value.
    pub fn get_u32(&self, key: &str) -> Result<u32, GgufError> {
        let v = self.integer(key, "an integer fitting u32")?;
        u32::try_from(v).map_err(|_| GgufError::OutOfRange {
            key: key.to_string(),
            value: v.to_string(),
            expected: "u32",
        })
    }

    /// An integer value of any GGUF integer type whose value fits `u64`.
    ///
    /// Errors: as [`Metadata::get_u32`].
    pub fn get_u64(&self, key: &str) -> Result<u64, GgufError> {
        let v = self.integer(key, "an integer fitting u64")?;
        u64::try_from(v).map_err(|_| GgufError::OutOfRange {
            key: key.to_string(),
            value: v.to_string(),
            expected: "u64",
        })
    }

    /// A float value stored as `f32`, or as `f64` (rounded to the nearest `f32`).
    ///
    /// Errors: [`GgufError::MissingKey`], or [`GgufError::WrongType`] for any other type.
    pub fn get_f32(&self, key: &str) -> Result<f32, GgufError> {
        match *self.require(key)? {
            MetaValue::F32(x) => Ok(x),
            MetaValue::F64(x) => Ok(x as f32),
            ref v => Err(Self::wrong(key, "f32 or f64", v)),
        }
    }

    /// A bool value.
    ///
    /// Errors: [`GgufError::MissingKey`], or [`GgufError::WrongType`] for any other type.
    pub fn get_bool(&self, key: &str) -> Result<bool, GgufError> {
        match *self.require(key)? {
            MetaValue::Bool(b) => Ok(b),
            ref v => Err(Self::wrong(key, "bool", v)),
        }
    }

    /// An array of strings (for example `tokenizer.ggml.tokens`).
    ///
    /// Errors: [`GgufError::MissingKey`], or [`GgufError::WrongType`] for any other type.
    pub fn get_str_array(&self, key: &str) -> Result<&[String], GgufError> {
        match self.require(key)? {
            MetaValue::Array(MetaArray::String(v)) => Ok(v),
            v => Err(Self::wrong(key, "array of string", v)),
        }
    }

    /// An array of `i32` (for example `tokenizer.ggml.token_type`).
    ///
    /// Errors: [`GgufError::MissingKey`], or [`GgufError::WrongType`] for any other type.
    pub fn get_i32_array(&self, key: &str) -> Result<&[i32], GgufError> {
        match self.require(key)? {
            MetaValue::Array(MetaArray::I32(v)) => Ok(v),
            v => Err(Self::wrong(key, "array of i32", v)),
        }
    }

    /// An array of `f32` (for example `tokenizer.ggml.scores`).
    ///
    /// Errors: [`GgufError::MissingKey`], or [`GgufError::WrongType`] for any other type.
    pub fn get_f32_array(&self, key: &str) -> Result<&[f32], GgufError> {
        match self.require(key)? {
            MetaValue::Array(MetaArray::F32(v)) => Ok(v),
            v => Err(Self::wrong(key, "array of f32", v)),
        }
    }
}
