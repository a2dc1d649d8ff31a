//! `harness restore` (and the first step of every command): put back what a killed run left.

use std::path::Path;

use crate::battery;
use crate::battery::execute::workspace;

/// Restores from journals of dead runs; false if something could not be put back.
pub fn recover(state: &Path) -> bool {
    for pgid in crate::system::process::reap_orphans(state) {
        eprintln!(
            "harness: killed process group {pgid} left running by a harness run that was killed"
        );
    }
    let restored_ok = match workspace::recover(state) {
        Ok(list) => {
            let mut ok = true;
            for r in list {
                match r.result {
                    Ok(outcome) => eprintln!(
                        "harness: restored {} from the journal of an interrupted run (pid {}, mutation {}, catalog {}){}",
                        r.journal.file.display(),
                        r.journal.owner.pid,
                        r.journal.mutation,
                        r.journal.catalog.display(),
                        if outcome == workspace::RestoreOutcome::AlreadyOriginal {
                            ": it already held the original bytes"
                        } else {
                            ""
                        }
                    ),
                    Err(e) => {
                        ok = false;
                        eprintln!("harness: TREE-DIRTY: {e}");
                    }
                }
            }
            ok
        }
        Err(e) => {
            eprintln!("harness: cannot recover from the restore journals: {e}");
            false
        }
    };
    let created_ok = match workspace::recover_created(state) {
        Ok(list) => {
            let mut ok = true;
            for r in list {
                let (root, pid) = (r.journal.root.display(), r.journal.owner.pid);
                match r.result {
                    Ok(settled) => {
                        for f in &settled.removed {
                            eprintln!(
                                "harness: removed {}, created in {root} by the tests of an interrupted run (pid {pid})",
                                f.display()
                            );
                        }
                        for f in &settled.kept {
                            eprintln!(
                                "harness: kept {}: it appeared in {root} during an interrupted run (pid {pid}) but no process of the run created it",
                                f.display()
                            );
                        }
                    }
                    Err(e) => {
                        ok = false;
                        eprintln!(
                            "harness: cannot remove the files an interrupted run (pid {pid}) created in {root}: {e}"
                        );
                    }
                }
            }
            ok
        }
        Err(e) => {
            eprintln!("harness: cannot recover from the restore journals: {e}");
            false
        }
    };
    for (dir, res) in battery::execute::parallel::recover_temp_dirs(state) {
        match res {
            Ok(()) => eprintln!(
                "harness: removed {}, the temporary directory of a killed run's tests",
                dir.display()
            ),
            Err(e) => eprintln!(
                "harness: cannot remove {}, the temporary directory of a killed run's tests: {e}",
                dir.display()
            ),
        }
    }
    restored_ok && created_ok
}
