//! Writing a GGUF file with `GgufWriter` and reading it back gives the same metadata and
//! tensor bytes (property test over random metadata, tensors, alignment and version).

use engine::gguf::{GgmlType, GgufError, GgufFile, GgufWriter, MetaArray, MetaValue};
use proptest::prelude::*;
use proptest::test_runner::{Config, RngSeed};

/// (type, elements per block, bytes per block), from the GGML block layouts
/// (ggml-common.h), written out here independently of the engine's table.
const TYPES: [(GgmlType, u64, u64); 10] = [
    (GgmlType::F32, 1, 4),
    (GgmlType::F16, 1, 2),
    (GgmlType::BF16, 1, 2),
    (GgmlType::I8, 1, 1),
    (GgmlType::I32, 1, 4),
    (GgmlType::Q4_0, 32, 18),
    (GgmlType::Q4_1, 32, 20),
    (GgmlType::Q8_0, 32, 34),
    (GgmlType::Q8_1, 32, 36),
    (GgmlType::Q4K, 256, 144),
];

fn config(cases: u32) -> Config {
    let mut c = Config::with_cases(cases);
    // A fixed seed unless PROPTEST_RNG_SEED asks for another: CI runs are reproducible.
    if std::env::var_os("PROPTEST_RNG_SEED").is_none() {
        c.rng_seed = RngSeed::Fixed(0x4747_5546);
    }
    c
}

fn f32_no_nan() -> impl Strategy<Value = f32> {
    any::<f32>().prop_filter("NaN != NaN", |x| !x.is_nan())
}

fn f64_no_nan() -> impl Strategy<Value = f64> {
    any::<f64>().prop_filter("NaN != NaN", |x| !x.is_nan())
}

fn leaf_array() -> impl Strategy<Value = MetaArray> {
    let n = 0..6usize;
    prop_oneof![
        prop::collection::vec(any::<u8>(), n.clone()).prop_map(MetaArray::U8),
        prop::collection::vec(any::<i8>(), n.clone()).prop_map(MetaArray::I8),
        prop::collection::vec(any::<u16>(), n.clone()).prop_map(MetaArray::U16),
        prop::collection::vec(any::<i16>(), n.clone()).prop_map(MetaArray::I16),
        prop::collection::vec(any::<u32>(), n.clone()).prop_map(MetaArray::U32),
        prop::collection::vec(any::<i32>(), n.clone()).prop_map(MetaArray::I32),
        prop::collection::vec(f32_no_nan(), n.clone()).prop_map(MetaArray::F32),
        prop::collection::vec(any::<bool>(), n.clone()).prop_map(MetaArray::Bool),
        prop::collection::vec("\\PC{0,12}", n.clone()).prop_map(MetaArray::String),
        prop::collection::vec(any::<u64>(), n.clone()).prop_map(MetaArray::U64),
        prop::collection::vec(any::<i64>(), n.clone()).prop_map(MetaArray::I64),
        prop::collection::vec(f64_no_nan(), n).prop_map(MetaArray::F64),
    ]
}

fn array() -> impl Strategy<Value = MetaArray> {
    leaf_array().prop_recursive(3, 24, 4, |inner| {
        prop::collection::vec(inner, 0..4).prop_map(MetaArray::Array)
    })
}

fn value() -> impl Strategy<Value = MetaValue> {
    prop_oneof![
        any::<u8>().prop_map(MetaValue::U8),
        any::<i8>().prop_map(MetaValue::I8),
        any::<u16>().prop_map(MetaValue::U16),
        any::<i16>().prop_map(MetaValue::I16),
        any::<u32>().prop_map(MetaValue::U32),
        any::<i32>().prop_map(MetaValue::I32),
        f32_no_nan().prop_map(MetaValue::F32),
        any::<bool>().prop_map(MetaValue::Bool),
        "\\PC{0,24}".prop_map(MetaValue::String),
        array().prop_map(MetaValue::Array),
        any::<u64>().prop_map(MetaValue::U64),
        any::<i64>().prop_map(MetaValue::I64),
        f64_no_nan().prop_map(MetaValue::F64),
    ]
}

/// A tensor: type index, dims (innermost a whole number of blocks), random bytes of the
/// size the layout gives.
fn tensor() -> impl Strategy<Value = (GgmlType, Vec<u64>, Vec<u8>)> {
    (
        0..TYPES.len(),
        0..4u64,
        prop::collection::vec(0..4u64, 0..3),
    )
        .prop_flat_map(|(t, blocks, outer)| {
            let (ty, block_len, block_bytes) = TYPES[t];
            let mut dims = vec![blocks * block_len];
            dims.extend(outer);
            let n: u64 = dims.iter().product();
            let bytes = (n / block_len * block_bytes) as usize;
            (
                Just(ty),
                Just(dims),
                prop::collection::vec(any::<u8>(), bytes),
            )
        })
}

#[derive(Debug, Clone)]
struct Model {
    version: u32,
    alignment: u64,
    metadata: Vec<(String, MetaValue)>,
    tensors: Vec<(GgmlType, Vec<u64>, Vec<u8>)>,
}

fn model() -> impl Strategy<Value = Model> {
    (
        prop_oneof![Just(2u32), Just(3u32)],
        prop_oneof![Just(1u64), Just(8), Just(32), Just(64), Just(256)],
        prop::collection::vec(("[a-z_.]{0,10}", value()), 0..8),
        prop::collection::vec(tensor(), 0..5),
    )
        .prop_map(|(version, alignment, kv, tensors)| Model {
            version,
            alignment,
            // Index-prefixed keys are unique and never `general.alignment`.
            metadata: kv
                .into_iter()
                .enumerate()
                .map(|(i, (k, v))| (format!("k{i}.{k}"), v))
                .collect(),
            tensors,
        })
}

fn build(m: &Model) -> GgufWriter {
    let mut w = GgufWriter::new().alignment(m.alignment).version(m.version);
    for (k, v) in &m.metadata {
        w.metadata(k, v.clone());
    }
    for (i, (ty, dims, data)) in m.tensors.iter().enumerate() {
        w.tensor(&format!("t{i}"), dims, *ty, data.clone()).unwrap();
    }
    w
}

proptest! {
    #![proptest_config(config(256))]

    #[test]
    fn write_then_read_gives_the_same_metadata_and_tensors(m in model()) {
        let bytes = build(&m).to_bytes();
        let f = GgufFile::from_bytes(bytes.clone()).unwrap();
        prop_assert_eq!(f.version(), m.version);
        prop_assert_eq!(f.alignment(), m.alignment);

        // The writer records a non-default alignment as general.alignment (u32), last.
        let mut expected = m.metadata.clone();
        if m.alignment != 32 {
            expected.push(("general.alignment".into(), MetaValue::U32(m.alignment as u32)));
        }
        let got: Vec<(String, MetaValue)> =
            f.metadata().iter().map(|(k, v)| (k.to_string(), v.clone())).collect();
        prop_assert_eq!(got, expected);

        prop_assert_eq!(f.tensors().len(), m.tensors.len());
        prop_assert_eq!(f.data_offset() % m.alignment, 0);
        for (i, (ty, dims, data)) in m.tensors.iter().enumerate() {
            let info = &f.tensors()[i];
            prop_assert_eq!(&info.name, &format!("t{i}"));
            prop_assert_eq!(&info.dims, dims);
            prop_assert_eq!(info.ty, *ty);
            prop_assert_eq!(info.offset % m.alignment, 0);
            let v = f.require_tensor(&info.name).unwrap();
            prop_assert_eq!(v.data, &data[..]);
            // The view is the bytes at data_offset + offset in the file itself.
            let at = (f.data_offset() + info.offset) as usize;
            prop_assert_eq!(&bytes[at..at + data.len()], &data[..]);
        }
        prop_assert_eq!(bytes.len() as u64 % m.alignment, 0);
    }
}

#[test]
fn every_scalar_type_and_nan_bits_round_trip_through_a_file() {
    let nan32 = f32::from_bits(0x7fc0_1234);
    let nan64 = f64::from_bits(0x7ff8_0000_0000_4321);
    let mut w = GgufWriter::new();
    w.metadata("u8", MetaValue::U8(200))
        .metadata("i8", MetaValue::I8(-100))
        .metadata("u16", MetaValue::U16(60000))
        .metadata("i16", MetaValue::I16(-30000))
        .metadata("u32", MetaValue::U32(4_000_000_000))
        .metadata("i32", MetaValue::I32(-2_000_000_000))
        .metadata("f32", MetaValue::F32(nan32))
        .metadata("bool", MetaValue::Bool(true))
        .metadata("string", MetaValue::String("héllo ✓".into()))
        .metadata(
            "nested",
            MetaValue::Array(MetaArray::Array(vec![
                MetaArray::String(vec!["a".into(), String::new()]),
                MetaArray::Array(vec![MetaArray::Bool(vec![false, true])]),
                MetaArray::F64(vec![nan64]),
            ])),
        )
        .metadata("u64", MetaValue::U64(u64::MAX))
        .metadata("i64", MetaValue::I64(i64::MIN))
        .metadata("f64", MetaValue::F64(nan64));
    w.tensor("w", &[32, 2], GgmlType::Q8_0, (0..68).collect())
        .unwrap();

    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("all.gguf");
    w.write_to(&path).unwrap();
    let f = GgufFile::open(&path).unwrap();
    assert_eq!(f.path(), Some(path.as_path()));
    let md = f.metadata();
    let keys: Vec<&str> = md.iter().map(|(k, _)| k).collect();
    assert_eq!(
        keys,
        [
            "u8", "i8", "u16", "i16", "u32", "i32", "f32", "bool", "string", "nested", "u64",
            "i64", "f64"
        ]
    );
    assert_eq!(md.get("u8"), Some(&MetaValue::U8(200)));
    assert_eq!(md.get("i8"), Some(&MetaValue::I8(-100)));
    assert_eq!(md.get("u16"), Some(&MetaValue::U16(60000)));
    assert_eq!(md.get("i16"), Some(&MetaValue::I16(-30000)));
    assert_eq!(md.get_u32("u32").unwrap(), 4_000_000_000);
    assert_eq!(md.get("i32"), Some(&MetaValue::I32(-2_000_000_000)));
    assert_eq!(md.get_f32("f32").unwrap().to_bits(), 0x7fc0_1234);
    assert!(md.get_bool("bool").unwrap());
    assert_eq!(md.get_str("string").unwrap(), "héllo ✓");
    match md.get("nested") {
        Some(MetaValue::Array(MetaArray::Array(v))) => {
            assert_eq!(v.len(), 3);
            assert_eq!(v[0], MetaArray::String(vec!["a".into(), String::new()]));
            assert_eq!(
                v[1],
                MetaArray::Array(vec![MetaArray::Bool(vec![false, true])])
            );
            match &v[2] {
                MetaArray::F64(x) => assert_eq!(x[0].to_bits(), nan64.to_bits()),
                other => panic!("{other:?}"),
            }
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(md.get_u64("u64").unwrap(), u64::MAX);
    assert_eq!(md.get("i64"), Some(&MetaValue::I64(i64::MIN)));
    match md.get("f64") {
        Some(MetaValue::F64(x)) => assert_eq!(x.to_bits(), nan64.to_bits()),
        other => panic!("{other:?}"),
    }
    assert_eq!(
        f.require_tensor("w").unwrap().data,
        &(0..68).collect::<Vec<u8>>()[..]
    );
}

#[test]
fn writer_layout_matches_the_specification_byte_for_byte() {
    // One u32 key and one 4-element F32 tensor, expected bytes assembled by hand.
    let mut w = GgufWriter::new();
    w.metadata("a", MetaValue::U32(7));
    w.tensor("t", &[4], GgmlType::F32, vec![9; 16]).unwrap();
    let mut want = Vec::new();
    want.extend_from_slice(b"GGUF");
    want.extend_from_slice(&3u32.to_le_bytes());
    want.extend_from_slice(&1u64.to_le_bytes()); // tensors
    want.extend_from_slice(&1u64.to_le_bytes()); // metadata
    want.extend_from_slice(&1u64.to_le_bytes());
    want.push(b'a');
    want.extend_from_slice(&4u32.to_le_bytes()); // u32
    want.extend_from_slice(&7u32.to_le_bytes());
    want.extend_from_slice(&1u64.to_le_bytes());
    want.push(b't');
    want.extend_from_slice(&1u32.to_le_bytes()); // n_dims
    want.extend_from_slice(&4u64.to_le_bytes());
    want.extend_from_slice(&0u32.to_le_bytes()); // F32
    want.extend_from_slice(&0u64.to_le_bytes()); // offset
    want.resize(96, 0); // 74 bytes of header, padded to 32
    want.extend_from_slice(&[9; 16]);
    want.resize(128, 0);
    assert_eq!(w.to_bytes(), want);
}

#[test]
fn writer_rejects_inconsistent_tensors() {
    let mut w = GgufWriter::new();
    let reason = |r: Result<&mut GgufWriter, GgufError>| match r {
        Err(GgufError::InvalidTensor { reason, .. }) => reason,
        Err(other) => panic!("{other:?}"),
        Ok(_) => panic!("accepted"),
    };
    assert!(reason(w.tensor("a", &[4], GgmlType::F32, vec![0; 15])).contains("15 bytes"));
    assert!(reason(w.tensor("a", &[33], GgmlType::Q4_1, vec![0; 40])).contains("block"));
    assert!(reason(w.tensor("a", &[1, 1, 1, 1, 1], GgmlType::F32, vec![0; 4])).contains("dims"));
    assert!(reason(w.tensor("a", &[1 << 32, 1 << 32], GgmlType::F32, vec![])).contains("overflow"));
    w.tensor("a", &[4], GgmlType::F32, vec![0; 16]).unwrap();
    assert!(reason(w.tensor("a", &[4], GgmlType::F32, vec![0; 16])).contains("already"));
}
