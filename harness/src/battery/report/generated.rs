//! cargo-mutants' generated mutants as the harness's reports show them.
//!
//! What happened to each ([`Status`]) and its entry ([`GeneratedMutant`]), in
//! `mutants.json` and in a `--since --mutants` battery's `generated_in_diff`.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// What happened to a generated mutant, in the harness's words.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum Status {
    /// A test failed (cargo-mutants: caught).
    Caught,
    /// Every test passed (cargo-mutants: missed).
    Missed,
    /// The tests ran over the timeout.
    Timeout,
    /// It did not compile.
    Unviable,
    /// The harness's runner only: no test failed, but a test binary died (signal, abort)
    /// before reporting some tests; no test is named as its killer.
    Crashed,
    /// The harness's runner only: no test failed or died, but some listed tests do not
    /// exist under the mutant.
    TestsMissing,
    /// The harness's runner only: the mutated code is compiled into no unit of the
    /// package's build under its features and platform (a `cfg` gate keeps its file, or the
    /// function, block or arm around it, out; rustc's evidence); nothing ran.
    NotCompiled,
}

impl Status {
    /// The word the reports use (`caught`, `missed`, `timeout`, `unviable`, `crashed`,
    /// `tests missing`).
    pub fn word(self) -> &'static str {
        match self {
            Status::Caught => "caught",
            Status::Missed => "missed",
            Status::Timeout => "timeout",
            Status::Unviable => "unviable",
            Status::Crashed => "crashed",
            Status::TestsMissing => "tests missing",
            Status::NotCompiled => "not compiled",
        }
    }
}

/// One generated mutant in the harness report.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct GeneratedMutant {
    /// cargo-mutants' name.
    pub name: String,
    /// Package.
    pub package: String,
    /// File relative to the tree root.
    pub file: String,
    /// Enclosing function name (`(no function)` outside one).
    pub function: String,
    /// 1-based line of the replaced span.
    pub line: usize,
    /// Replacement text.
    pub replacement: String,
    /// Genre.
    pub genre: String,
    /// Status.
    pub status: Status,
    /// The tests that failed under it (run by the harness; cargo-mutants does not name them).
    #[serde(default)]
    pub killed_by: Vec<String>,
    /// Unified diff (missed mutants only).
    pub diff: Option<String>,
    /// Seconds per phase (`check`, `build`, `test`).
    pub phase_seconds: BTreeMap<String, f64>,
}
