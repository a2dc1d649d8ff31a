//! `genai info --memory` on the real SmolLM2-135M-Instruct: the packed weight matrices
//! replace the file's pages of those matrices instead of doubling the resident weights.

use engine::gguf::GgmlType;
use engine::kernels::Isa;
use engine::kernels::matmul::uses_packed;
use std::process::Command;

use crate::common;
use common::model_path;

/// `genai info --memory` on `isa`: its resident bytes after one forward pass and its
/// memory-bound verdict line.
fn resident(isa: Isa) -> (u64, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_genai"))
        .args([
            "info",
            "--memory",
            "--threads",
            "2",
            "--isa",
            &isa.to_string(),
            "--model",
        ])
        .arg(model_path())
        .output()
        .expect("run genai info");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "genai info --memory on {isa} failed: {text}"
    );
    let rss = text
        .lines()
        .find_map(|l| l.strip_prefix("resident bytes"))
        .and_then(|l| l.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no resident bytes line in: {text}"));
    let bound = text
        .lines()
        .find(|l| l.starts_with("memory bound"))
        .unwrap_or_else(|| panic!("no memory bound line in: {text}"))
        .to_string();
    (rss, bound)
}

/// On every path of this CPU that packs the model's Q4_1 matrices, the process holds no
/// more than the unpacked (portable) path plus 8 MiB, and `genai info` reports it within
/// 1.3 × the file + KV cache. Before the packings released the file's pages of the
/// matrices they replace, a packed path held about 95 MB more (2.23x the 98 MB file).
#[test]
fn packed_weights_do_not_double_resident_memory() {
    let (plain, _) = resident(Isa::Portable);
    let packed: Vec<Isa> = Isa::available()
        .into_iter()
        .filter(|&i| uses_packed(i, GgmlType::Q4_1))
        .collect();
    for isa in packed {
        let (rss, bound) = resident(isa);
        assert!(
            rss <= plain + (8 << 20),
            "{isa}: resident {rss} bytes against {plain} unpacked (portable)"
        );
        assert!(bound.ends_with("within"), "{isa}: {bound}");
    }
}
