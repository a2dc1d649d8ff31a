//! Helpers shared by the test files that run the real SmolLM2-135M-Instruct.

use std::path::PathBuf;

/// The SmolLM2 file `scripts/fetch-model` writes; panics, naming the file and the
/// command, when it is missing.
pub fn model_path() -> PathBuf {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../fixtures/models/SmolLM2-135M-Instruct.Q4_1.gguf");
    assert!(
        p.is_file(),
        "model file {} is missing: run `scripts/fetch-model` from the repository root first",
        p.display()
    );
    p
}
