//! Shared helpers of the base-check tests: the captured checkout fixtures, the git
//! command-line tool, and a mirror of a captured server's bundle.

use std::path::{Path, PathBuf};
use std::process::Command;

use harness::ci::cibase::Answer;

/// `fixtures/ci/checkout`: the logs, bundles and truth `scripts/capture-checkout-logs` made.
pub fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/ci/checkout")
}

/// Runs `git ARGS` in `dir`; panics with git's stderr when it fails.
pub fn git(dir: &Path, args: &[&str]) -> std::process::Output {
    let out = Command::new("git")
        .current_dir(dir)
        .args(args)
        .output()
        .expect("the git command-line tool is needed");
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// Real git's answer to whether `commit` is an ancestor of `tip` in `repo`.
pub fn git_is_ancestor(repo: &Path, commit: &str, tip: &str) -> Answer {
    let st = Command::new("git")
        .current_dir(repo)
        .args(["merge-base", "--is-ancestor", commit, tip])
        .status()
        .unwrap();
    match st.code() {
        Some(0) => Answer::Yes,
        Some(1) => Answer::No,
        c => panic!("git merge-base --is-ancestor {commit} {tip}: exit {c:?}"),
    }
}

/// A mirror of the captured server `bundle` (`app.bundle`, `gitlab-app.bundle`,
/// `queue-app.bundle`...) that serves any sha it holds, as the hosts do.
pub fn server_of(bundle: &str) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let bundle = fixtures().join(bundle);
    git(
        dir.path(),
        &[
            "clone",
            "--quiet",
            "--mirror",
            bundle.to_str().unwrap(),
            "app.git",
        ],
    );
    let path = dir.path().join("app.git");
    git(&path, &["config", "uploadpack.allowAnySHA1InWant", "true"]);
    (dir, path)
}
