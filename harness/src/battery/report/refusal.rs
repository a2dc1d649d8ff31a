//! The refusals: every way a battery can find that it would measure nothing, typed.
//!
//! Each is spelled in the reports as [`RefusalKind::name`] says.

use std::fmt;

use serde::{Deserialize, Serialize};

/// The refusals: the instrument could not be trusted, so nothing more runs (exit 2). The
/// JSON report spells each in upper case with hyphens (`"CATALOG-DRIFT"`), as
/// [`fmt::Display`] does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING-KEBAB-CASE")]
pub enum RefusalKind {
    /// The catalog no longer matches the tree (a `find` text absent or not occurring the
    /// stated number of times, a duplicate id, a package or test target that is gone).
    CatalogDrift,
    /// The listed tests and the target's tests under the `select` pattern differ.
    FilterDrift,
    /// A listed test is not green without any mutation, or the unmutated tree does not
    /// build.
    BaselineRed,
    /// The two baseline runs disagree.
    Flaky,
    /// A mutated crate was not rebuilt.
    StaleBuild,
    /// The tree differs from its starting state, or a file was edited while a mutation
    /// was applied to it.
    TreeDirty,
    /// The host lock is held by someone else.
    Locked,
    /// `--incremental`: a reused verdict, re-checked (`--recheck`), proved wrong; the
    /// cache is dropped.
    ReusedWrong,
    /// The harness itself could not go on: cargo could not be run or answered nonsense, a
    /// file could not be read or written (the detail names it), or a switched build failed
    /// outside every mutated body.
    HarnessFault,
}

impl RefusalKind {
    /// Every kind, in the order the documentation lists them.
    pub const ALL: [RefusalKind; 9] = [
        RefusalKind::CatalogDrift,
        RefusalKind::FilterDrift,
        RefusalKind::BaselineRed,
        RefusalKind::Flaky,
        RefusalKind::StaleBuild,
        RefusalKind::TreeDirty,
        RefusalKind::Locked,
        RefusalKind::ReusedWrong,
        RefusalKind::HarnessFault,
    ];

    /// The name reports and messages use (`CATALOG-DRIFT`, ...).
    pub fn name(self) -> &'static str {
        match self {
            RefusalKind::CatalogDrift => "CATALOG-DRIFT",
            RefusalKind::FilterDrift => "FILTER-DRIFT",
            RefusalKind::BaselineRed => "BASELINE-RED",
            RefusalKind::Flaky => "FLAKY",
            RefusalKind::StaleBuild => "STALE-BUILD",
            RefusalKind::TreeDirty => "TREE-DIRTY",
            RefusalKind::Locked => "LOCKED",
            RefusalKind::ReusedWrong => "REUSED-WRONG",
            RefusalKind::HarnessFault => "HARNESS-FAULT",
        }
    }
}

impl fmt::Display for RefusalKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A refusal with its detail.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Refusal {
    /// Which.
    pub kind: RefusalKind,
    /// Why, naming files, tests and mutations.
    pub detail: String,
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.kind, self.detail)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_the_json_spelling() {
        for k in RefusalKind::ALL {
            let json = serde_json::to_string(&k).unwrap();
            assert_eq!(json, format!("\"{}\"", k.name()));
            let back: RefusalKind = serde_json::from_str(&json).unwrap();
            assert_eq!(back, k);
        }
    }
}
