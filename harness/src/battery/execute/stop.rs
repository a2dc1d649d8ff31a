//! Why a run stops early: a refusal or an interruption.
//!
//! `Stop`, and the errors of cargo, the tree and the catalog as the refusals they are.

use std::path::Path;

use crate::battery::report::refusal::{Refusal, RefusalKind};
use crate::battery::select::catalog::CatalogError;
use crate::battery::tree::TreeError;
use crate::cargo::CargoError;

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
