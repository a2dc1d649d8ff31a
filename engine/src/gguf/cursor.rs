//! A bounds-checked little-endian reader over a byte slice, reporting faults by byte offset.

use super::error::{FormatError, GgufError};

/// A fault at a byte offset, before the field path is known.
#[derive(Debug)]
pub(crate) struct Fault {
    pub offset: u64,
    pub kind: FormatError,
}

/// Turns a [`Fault`] into a [`GgufError::Format`] by naming the field; the name is built
/// only when there is an error.
pub(crate) trait FieldContext<T> {
    fn field(self, name: impl FnOnce() -> String) -> Result<T, GgufError>;
}

impl<T> FieldContext<T> for Result<T, Fault> {
    fn field(self, name: impl FnOnce() -> String) -> Result<T, GgufError> {
        self.map_err(|f| GgufError::Format {
            path: None,
            offset: f.offset,
            field: name(),
            kind: f.kind,
        })
    }
}

pub(crate) struct Cursor<'a> {
    buf: &'a [u8],
    pos: usize,
}

macro_rules! read_le {
    ($name:ident, $t:ty) => {
        pub fn $name(&mut self) -> Result<$t, Fault> {
            let b = self.take(size_of::<$t>())?;
            let mut a = [0u8; size_of::<$t>()];
            a.copy_from_slice(b);
            Ok(<$t>::from_le_bytes(a))
        }
    };
}

impl<'a> Cursor<'a> {
    pub fn new(buf: &'a [u8]) -> Self {
        Cursor { buf, pos: 0 }
    }

    /// Current byte offset.
    pub fn pos(&self) -> usize {
        self.pos
    }

    /// Bytes left after the current offset.
    pub fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }

    /// A fault at the current offset.
    pub fn fault(&self, kind: FormatError) -> Fault {
        Fault {
            offset: self.pos as u64,
            kind,
        }
    }

    /// The next `n` bytes, or `Truncated` at the current offset.
    pub fn take(&mut self, n: usize) -> Result<&'a [u8], Fault> {
        if n > self.remaining() {
            return Err(self.fault(FormatError::Truncated {
                needed: n as u64,
                available: self.remaining() as u64,
            }));
        }
        let s = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }

    read_le!(u8, u8);
    read_le!(i8, i8);
    read_le!(u16, u16);
    read_le!(i16, i16);
    read_le!(u32, u32);
    read_le!(i32, i32);
    read_le!(u64, u64);
    read_le!(i64, i64);
    read_le!(f32, f32);
    read_le!(f64, f64);

    /// A GGUF bool: one byte, 0 or 1.
    pub fn bool(&mut self) -> Result<bool, Fault> {
        let at = self.pos;
        match self.u8()? {
            0 => Ok(false),
            1 => Ok(true),
            byte => Err(Fault {
                offset: at as u64,
                kind: FormatError::InvalidBool { byte },
            }),
        }
    }

    /// A GGUF string: u64 byte length, then that many UTF-8 bytes (no terminator).
    /// The length is checked against the bytes remaining before anything is allocated.
    pub fn string(&mut self) -> Result<String, Fault> {
        let start = self.pos;
        let len = self.u64()?;
        if len > self.remaining() as u64 {
            return Err(Fault {
                offset: start as u64,
                kind: FormatError::Truncated {
                    needed: len.saturating_add(8),
                    available: (self.remaining() + 8) as u64,
                },
            });
        }
        let body = self.pos;
        let bytes = self.take(len as usize)?;
        match std::str::from_utf8(bytes) {
            Ok(s) => Ok(s.to_owned()),
            Err(e) => Err(Fault {
                offset: (body + e.valid_up_to()) as u64,
                kind: FormatError::InvalidUtf8 {
                    valid_up_to: e.valid_up_to() as u64,
                },
            }),
        }
    }

    /// Reads a u64 count of entries that each take at least `min_entry_bytes`, and checks
    /// that they can fit in the bytes remaining. The returned count is therefore safe to
    /// size a bounded pre-allocation.
    pub fn count(&mut self, min_entry_bytes: u64) -> Result<usize, Fault> {
        let at = self.pos;
        let count = self.u64()?;
        let remaining = self.remaining() as u64;
        if count > remaining / min_entry_bytes.max(1) {
            return Err(Fault {
                offset: at as u64,
                kind: FormatError::CountTooLarge {
                    count,
                    min_entry_bytes,
                    remaining,
                },
            });
        }
        // count <= remaining <= usize::MAX here.
        Ok(count as usize)
    }
}
