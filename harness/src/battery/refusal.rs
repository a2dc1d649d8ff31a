//! The refusals: every way a battery can find that it would measure nothing, typed, and the
//! reasons a run stops early.

use std::fmt;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::battery::catalog::CatalogError;
use crate::battery::workspace::TreeError;
use crate::cargo::CargoError;

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

/// Why a battery stopped early.
#[derive(Debug)]
pub(crate) enum Stop {
    /// A refusal (including HARNESS-FAULT).
    Refused(Refusal),
    /// A signal asked the harness to stop.
    Interrupted,
}

/// A [`Stop::Refused`] of `kind`.
pub(crate) fn refuse(kind: RefusalKind, detail: impl Into<String>) -> Stop {
    Stop::Refused(Refusal {
        kind,
        detail: detail.into(),
    })
}

/// HARNESS-FAULT for an I/O error on `path` while doing `op`.
pub(crate) fn io_fault(path: &Path, op: &str, e: std::io::Error) -> Stop {
    refuse(
        RefusalKind::HarnessFault,
        format!("{}: {op}: {e}", path.display()),
    )
}

impl From<CargoError> for Stop {
    fn from(e: CargoError) -> Stop {
        match e {
            CargoError::Interrupted(_) => Stop::Interrupted,
            e => refuse(RefusalKind::HarnessFault, e.to_string()),
        }
    }
}

/// A file edited during the run (before its mutation was applied, or while it was) is
/// TREE-DIRTY in both modes; any other tree error is a HARNESS-FAULT naming its path.
impl From<TreeError> for Stop {
    fn from(e: TreeError) -> Stop {
        match e {
            e @ (TreeError::ConcurrentEdit { .. } | TreeError::ChangedBeforeApply { .. }) => {
                refuse(RefusalKind::TreeDirty, e.to_string())
            }
            e => refuse(RefusalKind::HarnessFault, e.to_string()),
        }
    }
}

impl From<CatalogError> for Stop {
    fn from(e: CatalogError) -> Stop {
        let kind = if e.is_drift() {
            RefusalKind::CatalogDrift
        } else {
            RefusalKind::HarnessFault
        };
        refuse(kind, e.to_string())
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
