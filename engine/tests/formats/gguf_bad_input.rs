//! Malformed GGUF bytes give typed errors naming the field and byte offset, never a panic.
//!
//! Every file here is assembled byte by byte by the test-local [`Bytes`] encoder from the
//! GGUF specification (ggml docs/gguf.md), so expected offsets are computed independently of
//! the reader and the writer.

use engine::gguf::{FormatError, GgmlType, GgufError, GgufFile, MetaValue, Metadata};

/// A little-endian byte buffer with offset bookkeeping.
#[derive(Default)]
struct Bytes(Vec<u8>);

impl Bytes {
    fn at(&self) -> u64 {
        self.0.len() as u64
    }
    fn raw(&mut self, b: &[u8]) -> &mut Self {
        self.0.extend_from_slice(b);
        self
    }
    fn u8(&mut self, v: u8) -> &mut Self {
        self.raw(&[v])
    }
    fn u32(&mut self, v: u32) -> &mut Self {
        self.raw(&v.to_le_bytes())
    }
    fn u64(&mut self, v: u64) -> &mut Self {
        self.raw(&v.to_le_bytes())
    }
    fn str(&mut self, s: &str) -> &mut Self {
        self.u64(s.len() as u64).raw(s.as_bytes())
    }
    /// Magic, version 3 and the two counts: 24 bytes.
    fn header(&mut self, n_tensors: u64, n_kv: u64) -> &mut Self {
        self.raw(b"GGUF").u32(3).u64(n_tensors).u64(n_kv)
    }
    /// A tensor info; returns the offset of its `offset` field.
    fn tensor_info(&mut self, name: &str, dims: &[u64], ty: u32, offset: u64) -> u64 {
        self.str(name).u32(dims.len() as u32);
        for d in dims {
            self.u64(*d);
        }
        self.u32(ty);
        let at = self.at();
        self.u64(offset);
        at
    }
    /// Zero padding up to a multiple of `a`.
    fn pad(&mut self, a: usize) -> &mut Self {
        while !self.0.len().is_multiple_of(a) {
            self.0.push(0);
        }
        self
    }
    fn parse(&self) -> Result<GgufFile, GgufError> {
        GgufFile::from_bytes(self.0.clone())
    }
}

/// Parses `b`, expects a format error, and returns (offset, field, kind).
fn fail(b: &Bytes) -> (u64, String, FormatError) {
    match b.parse() {
        Err(GgufError::Format {
            path: None,
            offset,
            field,
            kind,
        }) => (offset, field, kind),
        Err(other) => panic!("expected a format error, got {other:?}"),
        Ok(f) => panic!("expected a format error, parsed {f:?}"),
    }
}

const F32: u32 = 0;
const Q4_1: u32 = 3;
const T_U8: u32 = 0;
const T_U32: u32 = 4;
const T_BOOL: u32 = 7;
const T_STRING: u32 = 8;
const T_ARRAY: u32 = 9;
const T_U64: u32 = 10;

#[test]
fn empty_file_is_truncated_at_magic() {
    let (off, field, kind) = fail(&Bytes::default());
    assert_eq!((off, field.as_str()), (0, "magic"));
    assert_eq!(
        kind,
        FormatError::Truncated {
            needed: 4,
            available: 0
        }
    );
}

#[test]
fn wrong_magic_is_named() {
    let mut b = Bytes::default();
    b.raw(b"GGML").u32(3).u64(0).u64(0);
    let (off, field, kind) = fail(&b);
    assert_eq!((off, field.as_str()), (0, "magic"));
    assert_eq!(
        kind,
        FormatError::BadMagic {
            found: b"GGML".to_vec()
        }
    );
}

#[test]
fn versions_other_than_2_and_3_are_rejected_at_offset_4() {
    for v in [0u32, 1, 4, 0x0300_0000] {
        let mut b = Bytes::default();
        b.raw(b"GGUF").u32(v).u64(0).u64(0);
        let (off, field, kind) = fail(&b);
        assert_eq!((off, field.as_str()), (4, "version"));
        assert_eq!(kind, FormatError::UnsupportedVersion { version: v });
    }
    let mut b = Bytes::default();
    b.raw(b"GGUF").u32(0x0300_0000).u64(0).u64(0);
    let msg = b.parse().unwrap_err().to_string();
    assert!(msg.contains("big-endian"), "{msg}");
}

#[test]
fn version_2_and_3_empty_files_parse() {
    for v in [2u32, 3] {
        let mut b = Bytes::default();
        b.raw(b"GGUF").u32(v).u64(0).u64(0);
        let f = b.parse().unwrap();
        assert_eq!(f.version(), v);
        assert!(f.tensors().is_empty());
        assert!(f.metadata().is_empty());
        assert_eq!(f.alignment(), 32);
    }
}

#[test]
fn truncated_header_names_the_count() {
    let mut b = Bytes::default();
    b.raw(b"GGUF").u32(3).raw(&[0, 0, 0]);
    let (off, field, kind) = fail(&b);
    assert_eq!((off, field.as_str()), (8, "tensor_count"));
    assert_eq!(
        kind,
        FormatError::Truncated {
            needed: 8,
            available: 3
        }
    );
}

#[test]
fn counts_larger_than_the_file_are_rejected_before_allocating() {
    let mut b = Bytes::default();
    b.header(u64::MAX, 0);
    let (off, field, kind) = fail(&b);
    assert_eq!((off, field.as_str()), (8, "tensor_count"));
    assert!(
        matches!(
            kind,
            FormatError::CountTooLarge {
                count: u64::MAX,
                remaining: 8,
                ..
            }
        ),
        "{kind:?}"
    );

    let mut b = Bytes::default();
    b.header(0, 1 << 40);
    let (off, field, kind) = fail(&b);
    assert_eq!((off, field.as_str()), (16, "metadata_kv_count"));
    assert!(
        matches!(kind, FormatError::CountTooLarge { remaining: 0, .. }),
        "{kind:?}"
    );

    // An array of u64 claiming 2^61 elements: 2^64 bytes, far past the file.
    let mut b = Bytes::default();
    b.header(0, 1).str("a.big").u32(T_ARRAY).u32(T_U64);
    let count_at = b.at();
    b.u64(1 << 61).u64(7);
    let (off, field, kind) = fail(&b);
    assert_eq!(off, count_at);
    assert_eq!(field, "metadata[0] (\"a.big\").value.count");
    assert_eq!(
        kind,
        FormatError::CountTooLarge {
            count: 1 << 61,
            min_entry_bytes: 8,
            remaining: 8
        }
    );
}

#[test]
fn unknown_value_types_are_named() {
    let mut b = Bytes::default();
    b.header(0, 1).str("k");
    let ty_at = b.at();
    b.u32(13).u32(0);
    let (off, field, kind) = fail(&b);
    assert_eq!(
        (off, field.as_str()),
        (ty_at, "metadata[0] (\"k\").value_type")
    );
    assert_eq!(kind, FormatError::UnknownValueType { id: 13 });

    let mut b = Bytes::default();
    b.header(0, 1).str("k").u32(T_ARRAY);
    let elem_at = b.at();
    b.u32(99).u64(0);
    let (off, field, kind) = fail(&b);
    assert_eq!(
        (off, field.as_str()),
        (elem_at, "metadata[0] (\"k\").value.elem_type")
    );
    assert_eq!(kind, FormatError::UnknownValueType { id: 99 });
}

#[test]
fn a_string_longer_than_the_file_is_truncated_at_its_length() {
    let mut b = Bytes::default();
    b.header(0, 1).str("k").u32(T_STRING);
    let s_at = b.at();
    b.u64(1000).raw(b"abc");
    let (off, field, kind) = fail(&b);
    assert_eq!((off, field.as_str()), (s_at, "metadata[0] (\"k\").value"));
    assert_eq!(
        kind,
        FormatError::Truncated {
            needed: 1008,
            available: 11
        }
    );
}

#[test]
fn invalid_utf8_points_at_the_bad_byte() {
    // In a key.
    let mut b = Bytes::default();
    b.header(0, 1).u64(4).raw(b"ab\xffc").u32(T_U8).u8(1);
    let (off, field, kind) = fail(&b);
    assert_eq!((off, field.as_str()), (24 + 8 + 2, "metadata[0].key"));
    assert_eq!(kind, FormatError::InvalidUtf8 { valid_up_to: 2 });

    // In the second string of an array value.
    let mut b = Bytes::default();
    b.header(0, 1)
        .str("toks")
        .u32(T_ARRAY)
        .u32(T_STRING)
        .u64(2)
        .str("ok")
        .u64(2);
    let bad_at = b.at();
    b.raw(b"\xc3\x28");
    let (off, field, kind) = fail(&b);
    assert_eq!(
        (off, field.as_str()),
        (bad_at, "metadata[0] (\"toks\").value[1]")
    );
    assert_eq!(kind, FormatError::InvalidUtf8 { valid_up_to: 0 });

    // In a tensor name.
    let mut b = Bytes::default();
    b.header(1, 0);
    b.tensor_info("w\u{e9}", &[1], F32, 0);
    b.0[24 + 8 + 1] = 0x80; // the second byte of "w" + U+00E9 becomes a lone continuation byte
    b.pad(32).raw(&[0; 4]);
    let (off, field, kind) = fail(&b);
    assert_eq!((off, field.as_str()), (24 + 8 + 1, "tensor_infos[0].name"));
    assert_eq!(kind, FormatError::InvalidUtf8 { valid_up_to: 1 });
}

#[test]
fn bool_bytes_other_than_0_and_1_are_rejected() {
    let mut b = Bytes::default();
    b.header(0, 1).str("flag").u32(T_BOOL);
    let at = b.at();
    b.u8(2);
    let (off, field, kind) = fail(&b);
    assert_eq!((off, field.as_str()), (at, "metadata[0] (\"flag\").value"));
    assert_eq!(kind, FormatError::InvalidBool { byte: 2 });
}

#[test]
fn nesting_is_bounded() {
    // 16 nested levels (an array of arrays ... of an empty u8 array) parse; 17 do not.
    let nested = |levels: usize| {
        let mut b = Bytes::default();
        b.header(0, 1).str("deep").u32(T_ARRAY);
        for _ in 0..levels - 1 {
            b.u32(T_ARRAY).u64(1);
        }
        b.u32(T_U8).u64(0);
        b
    };
    let f = nested(16).parse().unwrap();
    assert_eq!(f.metadata().len(), 1);
    let b = nested(17);
    let (off, _, kind) = fail(&b);
    // The 17th array header starts after the 16 outer headers (12 bytes each).
    assert_eq!(off, 24 + 8 + 4 + 4 + 16 * 12);
    assert_eq!(kind, FormatError::NestingTooDeep { max: 16 });
}

#[test]
fn duplicate_metadata_keys_are_rejected_at_the_second() {
    let mut b = Bytes::default();
    b.header(0, 3)
        .str("a")
        .u32(T_U32)
        .u32(1)
        .str("b")
        .u32(T_U32)
        .u32(2);
    let second_at = b.at();
    b.str("a").u32(T_U32).u32(3);
    let (off, field, kind) = fail(&b);
    assert_eq!((off, field.as_str()), (second_at, "metadata[2].key"));
    assert_eq!(
        kind,
        FormatError::DuplicateKey {
            key: "a".into(),
            first_index: 0
        }
    );
}

#[test]
fn alignment_must_be_a_nonzero_power_of_two() {
    for (ty, val, found) in [
        (T_U32, 0u64, "0"),
        (T_U32, 3, "3"),
        (T_U32, 48, "48"),
        (T_U64, 1 << 40, "1099511627776"),
    ] {
        let mut b = Bytes::default();
        b.header(0, 1).str("general.alignment").u32(ty);
        let at = b.at();
        if ty == T_U32 {
            b.u32(val as u32);
        } else {
            b.u64(val);
        }
        let (off, field, kind) = fail(&b);
        assert_eq!(
            (off, field.as_str()),
            (at, "metadata[0] (\"general.alignment\").value")
        );
        assert_eq!(
            kind,
            FormatError::BadAlignment {
                found: found.into()
            }
        );
    }
    let mut b = Bytes::default();
    b.header(0, 1)
        .str("general.alignment")
        .u32(T_STRING)
        .str("32");
    let (_, _, kind) = fail(&b);
    assert_eq!(
        kind,
        FormatError::BadAlignment {
            found: "string".into()
        }
    );

    // A valid 64 moves the data section to a multiple of 64.
    let mut b = Bytes::default();
    b.header(1, 1).str("general.alignment").u32(T_U32).u32(64);
    b.tensor_info("t", &[4], F32, 0);
    let data_at = b.pad(64).at();
    b.raw(&[1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16]);
    let f = b.parse().unwrap();
    assert_eq!(f.alignment(), 64);
    assert_eq!(f.data_offset(), data_at);
    assert_eq!(
        f.require_tensor("t").unwrap().data,
        &(1..=16).collect::<Vec<u8>>()[..]
    );
}

#[test]
fn unknown_tensor_types_are_named() {
    let mut b = Bytes::default();
    b.header(1, 0).str("t").u32(1).u64(32);
    let ty_at = b.at();
    b.u32(4).u64(0); // id 4 (the removed Q4_2) is not a type
    let (off, field, kind) = fail(&b);
    assert_eq!(
        (off, field.as_str()),
        (ty_at, "tensor_infos[0] (\"t\").type")
    );
    assert_eq!(kind, FormatError::UnknownTensorType { id: 4 });
}

#[test]
fn too_many_dims_and_overflowing_dims_are_rejected() {
    let mut b = Bytes::default();
    b.header(1, 0).str("t");
    let n_dims_at = b.at();
    b.u32(5).raw(&[0; 64]);
    let (off, field, kind) = fail(&b);
    assert_eq!(
        (off, field.as_str()),
        (n_dims_at, "tensor_infos[0] (\"t\").n_dims")
    );
    assert_eq!(kind, FormatError::TooManyDims { n_dims: 5, max: 4 });

    let mut b = Bytes::default();
    b.header(1, 0);
    b.tensor_info("t", &[1 << 32, 1 << 32], F32, 0);
    let (off, field, kind) = fail(&b);
    assert_eq!(
        (off, field.as_str()),
        (24 + 9, "tensor_infos[0] (\"t\").dims")
    );
    assert_eq!(
        kind,
        FormatError::SizeOverflow {
            dims: vec![1 << 32, 1 << 32]
        }
    );

    // Elements fit in u64 but bytes (x4 for F32) do not.
    let mut b = Bytes::default();
    b.header(1, 0);
    b.tensor_info("t", &[1 << 31, 1 << 31, 4], F32, 0);
    let (_, _, kind) = fail(&b);
    assert!(matches!(kind, FormatError::SizeOverflow { .. }), "{kind:?}");
}

#[test]
fn partial_blocks_are_rejected() {
    let mut b = Bytes::default();
    b.header(1, 0);
    b.tensor_info("q", &[33, 2], Q4_1, 0);
    let (off, field, kind) = fail(&b);
    assert_eq!(
        (off, field.as_str()),
        (24 + 9 + 4, "tensor_infos[0] (\"q\").dims[0]")
    );
    assert_eq!(
        kind,
        FormatError::PartialBlock {
            dim0: 33,
            ty: GgmlType::Q4_1,
            block_len: 32
        }
    );
}

#[test]
fn misaligned_offsets_are_rejected() {
    let mut b = Bytes::default();
    b.header(2, 0);
    b.tensor_info("a", &[1], F32, 0);
    let at = b.tensor_info("b", &[1], F32, 4);
    b.pad(32).raw(&[0; 36]);
    let (off, field, kind) = fail(&b);
    assert_eq!(
        (off, field.as_str()),
        (at, "tensor_infos[1] (\"b\").offset")
    );
    assert_eq!(
        kind,
        FormatError::Misaligned {
            offset: 4,
            alignment: 32
        }
    );
}

#[test]
fn offsets_outside_the_data_section_and_data_past_the_end_are_rejected() {
    // Offset past the data section.
    let mut b = Bytes::default();
    b.header(1, 0);
    let at = b.tensor_info("t", &[8], F32, 1024);
    b.pad(32).raw(&[0; 32]);
    let (off, field, kind) = fail(&b);
    assert_eq!(
        (off, field.as_str()),
        (at, "tensor_infos[0] (\"t\").offset")
    );
    assert_eq!(
        kind,
        FormatError::OutOfBounds {
            offset: 1024,
            n_bytes: 32,
            data_len: 32
        }
    );

    // Data one byte short of its size (a truncated file).
    let mut b = Bytes::default();
    b.header(1, 0);
    let at = b.tensor_info("t", &[8], F32, 0);
    b.pad(32).raw(&[0; 31]);
    let (off, _, kind) = fail(&b);
    assert_eq!(off, at);
    assert_eq!(
        kind,
        FormatError::OutOfBounds {
            offset: 0,
            n_bytes: 32,
            data_len: 31
        }
    );

    // An offset so large that offset + size overflows u64.
    let mut b = Bytes::default();
    b.header(1, 0);
    b.tensor_info("t", &[8], F32, u64::MAX - 31);
    b.pad(32);
    let (_, _, kind) = fail(&b);
    assert!(matches!(kind, FormatError::OutOfBounds { .. }), "{kind:?}");
}

#[test]
fn overlapping_tensor_data_is_rejected() {
    let mut b = Bytes::default();
    b.header(2, 0);
    b.tensor_info("big", &[16], F32, 0); // bytes [0, 64)
    let at = b.tensor_info("small", &[8], F32, 32); // bytes [32, 64)
    b.pad(32).raw(&[0; 64]);
    let (off, field, kind) = fail(&b);
    assert_eq!(
        (off, field.as_str()),
        (at, "tensor_infos[1] (\"small\").offset")
    );
    assert_eq!(
        kind,
        FormatError::Overlap {
            offset: 32,
            end: 64,
            other: "big".into(),
            other_offset: 0,
            other_end: 64
        }
    );

    // Adjacent ranges are fine, in either file order.
    let mut b = Bytes::default();
    b.header(2, 0);
    b.tensor_info("second", &[8], F32, 32);
    b.tensor_info("first", &[8], F32, 0);
    b.pad(32).raw(&[1; 32]).raw(&[2; 32]);
    let f = b.parse().unwrap();
    assert_eq!(f.require_tensor("first").unwrap().data, &[1; 32][..]);
    assert_eq!(f.require_tensor("second").unwrap().data, &[2; 32][..]);
    assert_eq!(f.tensors()[0].name, "second");
}

#[test]
fn duplicate_tensor_names_are_rejected() {
    let mut b = Bytes::default();
    b.header(2, 0);
    b.tensor_info("w", &[8], F32, 0);
    let second_at = b.at();
    b.tensor_info("w", &[8], F32, 32);
    b.pad(32).raw(&[0; 64]);
    let (off, field, kind) = fail(&b);
    assert_eq!((off, field.as_str()), (second_at, "tensor_infos[1].name"));
    assert_eq!(
        kind,
        FormatError::DuplicateTensor {
            name: "w".into(),
            first_index: 0
        }
    );
}

#[test]
fn errors_from_a_file_name_the_path() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bad.gguf");
    let mut b = Bytes::default();
    b.header(0, 1).str("k").u32(77).u32(0);
    // Long enough to take the memory-mapped route too.
    b.raw(&[0; 100]);
    std::fs::write(&path, &b.0).unwrap();
    let err = GgufFile::open(&path).unwrap_err();
    match &err {
        GgufError::Format {
            path: Some(p),
            offset,
            kind,
            ..
        } => {
            assert_eq!(p, &path);
            assert_eq!(*offset, 24 + 8 + 1);
            assert_eq!(*kind, FormatError::UnknownValueType { id: 77 });
        }
        other => panic!("expected a format error with a path, got {other:?}"),
    }
    let msg = err.to_string();
    assert!(
        msg.starts_with(&format!("{}: byte offset 33: ", path.display())),
        "{msg}"
    );

    // A short file (read, not mapped) too.
    std::fs::write(&path, b"GGUF").unwrap();
    match GgufFile::open(&path).unwrap_err() {
        GgufError::Format {
            path: Some(p),
            offset: 4,
            ..
        } => assert_eq!(p, path),
        other => panic!("{other:?}"),
    }

    let missing = dir.path().join("absent.gguf");
    match GgufFile::open(&missing).unwrap_err() {
        GgufError::Io { path: p, .. } => assert_eq!(p, missing),
        other => panic!("{other:?}"),
    }
}

#[test]
fn typed_accessors_check_type_and_range() {
    let mut md = Metadata::new();
    md.insert("neg", MetaValue::I32(-1));
    md.insert("small", MetaValue::U8(7));
    md.insert("big", MetaValue::U64(1 << 40));
    md.insert("name", MetaValue::String("x".into()));
    md.insert("eps", MetaValue::F64(1e-5));

    assert_eq!(md.get_u32("small").unwrap(), 7);
    assert_eq!(md.get_u64("big").unwrap(), 1 << 40);
    assert_eq!(md.get_f32("eps").unwrap(), 1e-5f32);
    assert!(matches!(
        md.get_u32("neg"),
        Err(GgufError::OutOfRange { ref key, ref value, expected: "u32" }) if key == "neg" && value == "-1"
    ));
    assert!(matches!(
        md.get_u32("big"),
        Err(GgufError::OutOfRange { .. })
    ));
    assert!(matches!(
        md.get_u64("neg"),
        Err(GgufError::OutOfRange { .. })
    ));
    match md.get_u32("name") {
        Err(GgufError::WrongType { key, found, .. }) => {
            assert_eq!(key, "name");
            assert_eq!(found, "string");
        }
        other => panic!("{other:?}"),
    }
    assert!(matches!(
        md.get_str("small"),
        Err(GgufError::WrongType { .. })
    ));
    assert!(matches!(
        md.get_bool("small"),
        Err(GgufError::WrongType { .. })
    ));
    assert!(matches!(
        md.get_str_array("name"),
        Err(GgufError::WrongType { .. })
    ));
    assert!(matches!(
        md.get_i32_array("name"),
        Err(GgufError::WrongType { .. })
    ));
    assert!(matches!(
        md.get_f32_array("name"),
        Err(GgufError::WrongType { .. })
    ));
    match md.get_str("nope") {
        Err(e @ GgufError::MissingKey { .. }) => assert!(e.to_string().contains("\"nope\"")),
        other => panic!("{other:?}"),
    }
}

#[test]
fn gguf_error_is_a_thread_safe_std_error() {
    fn check<E: std::error::Error + Send + Sync + 'static>(_: &E) {}
    let err = GgufFile::from_bytes(b"GGUX".to_vec()).unwrap_err();
    check(&err);
    let boxed: Box<dyn std::error::Error + Send + Sync> = Box::new(err);
    assert!(boxed.to_string().contains("bad magic"), "{boxed}");
}
