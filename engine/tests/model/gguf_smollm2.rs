//! The real SmolLM2-135M-Instruct Q4_1 GGUF opens with the expected tensors and metadata.

use std::collections::BTreeMap;

use engine::gguf::{GgmlType, GgufError, GgufFile};

use crate::common;
use common::model_path;

#[test]
fn smollm2_q4_1_opens_with_272_tensors_llama_30_blocks() {
    let path = model_path();
    let f = GgufFile::open(&path).expect("the real model must parse");
    assert_eq!(f.path(), Some(path.as_path()));
    assert_eq!(f.version(), 3);
    assert_eq!(f.alignment(), 32);

    let t = f.tensors();
    assert_eq!(t.len(), 272);
    let mut by_type: BTreeMap<&str, usize> = BTreeMap::new();
    for info in t {
        *by_type.entry(info.ty.name()).or_default() += 1;
    }
    assert_eq!(
        by_type,
        BTreeMap::from([("F32", 61), ("Q4_1", 210), ("Q8_0", 1)])
    );

    let emb = f.require_tensor("token_embd.weight").unwrap();
    assert_eq!(emb.info.ty, GgmlType::Q8_0);
    // Hidden size 576, vocabulary 49152 (the model card); Q8_0 is 34 bytes per 32 values.
    assert_eq!(emb.info.dims, vec![576, 49152]);
    assert_eq!(emb.data.len(), 576 * 49152 / 32 * 34);

    let md = f.metadata();
    assert_eq!(md.get_str("general.architecture").unwrap(), "llama");
    assert_eq!(md.get_u32("llama.block_count").unwrap(), 30);
    assert_eq!(md.get_u32("llama.embedding_length").unwrap(), 576);
    assert_eq!(
        md.get_str_array("tokenizer.ggml.tokens").unwrap().len(),
        49152
    );

    // Every layer has its attention projections, and every view has its declared size.
    for layer in 0..30 {
        let q = f
            .require_tensor(&format!("blk.{layer}.attn_q.weight"))
            .unwrap();
        assert_eq!(q.info.ty, GgmlType::Q4_1);
        assert_eq!(q.info.dims, vec![576, 576]);
        assert_eq!(q.data.len(), 576 * 576 / 32 * 20);
    }
    let file_len = std::fs::metadata(&path).unwrap().len();
    for info in t {
        let v = f.tensor(&info.name).unwrap();
        assert_eq!(v.data.len() as u64, info.n_bytes());
        assert!(f.data_offset() + info.offset + info.n_bytes() <= file_len);
    }

    match f.require_tensor("blk.30.attn_q.weight") {
        Err(GgufError::MissingTensor {
            name,
            path: Some(p),
        }) => {
            assert_eq!(name, "blk.30.attn_q.weight");
            assert_eq!(p, path);
        }
        other => panic!("expected MissingTensor, got {other:?}"),
    }
}

/// Releasing a tensor's pages (after the model packs it) keeps its bytes readable and
/// unchanged, releases only whole pages inside the tensor, and does nothing for a file
/// held in memory.
#[test]
fn released_tensor_pages_read_back_unchanged() {
    let f = GgufFile::open(model_path()).unwrap();
    let i = f.tensor_index("token_embd.weight").unwrap();
    let before = f.tensor_at(i).unwrap().data.to_vec();
    let released = f.release_tensor_pages(i);
    assert!(
        released > 0 && released <= before.len() && released.is_multiple_of(4096),
        "released {released} of {} bytes",
        before.len()
    );
    assert!(
        f.tensor_at(i).unwrap().data == &before[..],
        "bytes changed after the release"
    );
    assert_eq!(
        f.release_tensor_pages(f.tensors().len()),
        0,
        "index past the end"
    );
    let small = f.tensor_index("output_norm.weight").unwrap();
    assert_eq!(
        f.release_tensor_pages(small),
        0,
        "a 2304-byte tensor holds no whole page"
    );
    let bytes = std::fs::read(model_path()).unwrap();
    let owned = GgufFile::from_bytes(bytes).unwrap();
    assert_eq!(owned.release_tensor_pages(i), 0, "a file held in memory");
}
