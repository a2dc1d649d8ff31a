//! The committed fixture packages under `fixtures/packages/` are exactly what the builder produces (regenerate with `GENAI_REGEN_FIXTURES=1`).

use std::path::{Path, PathBuf};

use engine::workflow::fixtures::write_fixture_packages;

const REGEN_ENV: &str = "GENAI_REGEN_FIXTURES";

fn committed_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/packages")
}

const FILES: [&str; 5] = [
    "tiny-decoder/package.json",
    "tiny-decoder/model.gguf",
    "tiny-vlm/package.json",
    "tiny-vlm/model.gguf",
    "smollm2/package.json",
];

#[test]
fn committed_fixture_packages_match_the_builder() {
    if std::env::var_os(REGEN_ENV).is_some() {
        write_fixture_packages(&committed_root()).unwrap();
    }
    let tmp = tempfile::tempdir().unwrap();
    write_fixture_packages(tmp.path()).unwrap();
    for f in FILES {
        let built = std::fs::read(tmp.path().join(f)).unwrap();
        let committed = std::fs::read(committed_root().join(f)).unwrap_or_else(|e| {
            panic!("fixtures/packages/{f}: {e}; run with {REGEN_ENV}=1 to build it")
        });
        assert!(
            built == committed,
            "fixtures/packages/{f} differs from the builder's output; run `{REGEN_ENV}=1 cargo test -p engine --test workflow workflow_fixtures::` and commit"
        );
    }
}

#[test]
fn fixture_build_is_deterministic() {
    let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    write_fixture_packages(a.path()).unwrap();
    write_fixture_packages(b.path()).unwrap();
    for f in FILES {
        let x = std::fs::read(a.path().join(f)).unwrap();
        let y = std::fs::read(b.path().join(f)).unwrap();
        assert!(!x.is_empty() && x == y, "{f} is not reproducible");
    }
}
