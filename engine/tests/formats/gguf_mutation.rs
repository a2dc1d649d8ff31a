//! Byte mutations of a valid GGUF file (flips, truncations, insertions, deletions, u64
//! overwrites) give an error or a valid parse: never a panic, with no `catch_unwind`.

use std::collections::HashSet;

use engine::gguf::{GgmlType, GgufError, GgufFile, GgufWriter, MetaArray, MetaValue};
use proptest::prelude::*;
use proptest::test_runner::{Config, RngSeed};

/// A small valid file exercising every value type, a nested array and three tensors.
fn base_file() -> Vec<u8> {
    let mut w = GgufWriter::new();
    w.metadata("general.architecture", MetaValue::String("llama".into()))
        .metadata("llama.block_count", MetaValue::U32(2))
        .metadata("a.u8", MetaValue::U8(1))
        .metadata("a.i8", MetaValue::I8(-1))
        .metadata("a.u16", MetaValue::U16(2))
        .metadata("a.i16", MetaValue::I16(-2))
        .metadata("a.i32", MetaValue::I32(-3))
        .metadata("a.f32", MetaValue::F32(0.5))
        .metadata("a.bool", MetaValue::Bool(true))
        .metadata("a.u64", MetaValue::U64(5))
        .metadata("a.i64", MetaValue::I64(-5))
        .metadata("a.f64", MetaValue::F64(0.25))
        .metadata(
            "tokenizer.ggml.tokens",
            MetaValue::Array(MetaArray::String(vec![
                "<s>".into(),
                "a".into(),
                "é".into(),
            ])),
        )
        .metadata(
            "a.nested",
            MetaValue::Array(MetaArray::Array(vec![
                MetaArray::I32(vec![1, 2]),
                MetaArray::Array(vec![MetaArray::Bool(vec![true])]),
            ])),
        );
    w.tensor("norm", &[8], GgmlType::F32, (0..32).collect())
        .unwrap();
    w.tensor("w", &[32, 2], GgmlType::Q4_1, (0..40).collect())
        .unwrap();
    w.tensor("emb", &[32, 1], GgmlType::Q8_0, (0..34).collect())
        .unwrap();
    w.to_bytes()
}

#[derive(Debug, Clone)]
enum Mutation {
    Flip {
        pos: usize,
        bit: u8,
    },
    Truncate {
        len: usize,
    },
    Insert {
        pos: usize,
        bytes: Vec<u8>,
    },
    Delete {
        pos: usize,
        len: usize,
    },
    /// Overwrite 8 bytes with a u64: hits counts, string lengths, dims and offsets.
    PutU64 {
        pos: usize,
        value: u64,
    },
}

fn mutation() -> impl Strategy<Value = Mutation> {
    let interesting = prop_oneof![
        Just(u64::MAX),
        Just(1u64 << 63),
        Just(1u64 << 32),
        Just(0u64),
        0..1024u64,
        any::<u64>(),
    ];
    prop_oneof![
        3 => (any::<usize>(), 0..8u8).prop_map(|(pos, bit)| Mutation::Flip { pos, bit }),
        2 => any::<usize>().prop_map(|len| Mutation::Truncate { len }),
        2 => (any::<usize>(), prop::collection::vec(any::<u8>(), 1..16))
            .prop_map(|(pos, bytes)| Mutation::Insert { pos, bytes }),
        1 => (any::<usize>(), 1..16usize).prop_map(|(pos, len)| Mutation::Delete { pos, len }),
        3 => (any::<usize>(), interesting).prop_map(|(pos, value)| Mutation::PutU64 { pos, value }),
    ]
}

fn apply(bytes: &mut Vec<u8>, m: &Mutation) {
    let n = bytes.len();
    match m {
        Mutation::Flip { pos, bit } if n > 0 => bytes[pos % n] ^= 1 << bit,
        Mutation::Flip { .. } => {}
        Mutation::Truncate { len } => bytes.truncate(len % (n + 1)),
        Mutation::Insert { pos, bytes: ins } => {
            let at = pos % (n + 1);
            bytes.splice(at..at, ins.iter().copied());
        }
        Mutation::Delete { pos, len } if n > 0 => {
            let at = pos % n;
            bytes.drain(at..(at + len).min(n));
        }
        Mutation::Delete { .. } => {}
        Mutation::PutU64 { pos, value } if n >= 8 => {
            let at = pos % (n - 7);
            bytes[at..at + 8].copy_from_slice(&value.to_le_bytes());
        }
        Mutation::PutU64 { .. } => {}
    }
}

fn config() -> Config {
    let mut c = Config::with_cases(1024);
    // A fixed seed unless PROPTEST_RNG_SEED asks for another: CI runs are reproducible.
    if std::env::var_os("PROPTEST_RNG_SEED").is_none() {
        c.rng_seed = RngSeed::Fixed(0x6d75_7461);
    }
    c
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn mutated_files_give_an_error_or_a_valid_parse(
        muts in prop::collection::vec(mutation(), 1..4)
    ) {
        let mut bytes = base_file();
        for m in &muts {
            apply(&mut bytes, m);
        }
        let len = bytes.len() as u64;
        match GgufFile::from_bytes(bytes) {
            Ok(f) => {
                // A valid parse is internally consistent.
                prop_assert!(f.alignment().is_power_of_two());
                prop_assert_eq!(f.data_offset() % f.alignment(), 0);
                let mut names = HashSet::new();
                for info in f.tensors() {
                    prop_assert!(names.insert(info.name.clone()), "duplicate {}", info.name);
                    prop_assert_eq!(info.offset % f.alignment(), 0);
                    prop_assert!(f.data_offset() + info.offset + info.n_bytes() <= len);
                    let v = f.tensor(&info.name).unwrap();
                    prop_assert_eq!(v.data.len() as u64, info.n_bytes());
                }
                let keys: HashSet<&str> = f.metadata().iter().map(|(k, _)| k).collect();
                prop_assert_eq!(keys.len(), f.metadata().len());
            }
            Err(e) => {
                // A format error points into the file and says something.
                match &e {
                    GgufError::Format { offset, field, .. } => {
                        prop_assert!(*offset <= len, "offset {} past {} bytes", offset, len);
                        prop_assert!(!field.is_empty());
                    }
                    other => prop_assert!(false, "unexpected error kind {other:?}"),
                }
                prop_assert!(!e.to_string().is_empty());
            }
        }
    }
}

#[test]
fn the_base_file_is_valid() {
    let f = GgufFile::from_bytes(base_file()).unwrap();
    assert_eq!(f.tensors().len(), 3);
    assert_eq!(f.metadata().len(), 14);
}
