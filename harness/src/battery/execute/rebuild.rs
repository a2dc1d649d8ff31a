//! Rebuild mode: each mutation is written into the user's tree (journaled first), the
//! workspace rebuilt in the catalog's private target directory, the tests run, and the
//! original bytes put back and verified.

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::battery::execute::workspace::{self, Applied};
use crate::battery::select::catalog::{Catalog, PreparedMutation};
use crate::battery::tree::{self, TreeScan};
use crate::cargo::{Build, CargoCmd, PackageMeta, TestRun};

use crate::battery::execute::stop::{Stop, refuse};

use crate::battery::execute::run::{Built, ModeRun, Mutant, Shared, rebuilt};
use crate::battery::report::refusal::RefusalKind;
use crate::battery::{BatteryError, Options};

/// Rebuild mode's state.
pub(crate) struct Rebuild {
    cargo: CargoCmd,
    root: PathBuf,
    state_dir: PathBuf,
    packages: Vec<PackageMeta>,
    /// The mutation applied now, if any.
    applied: Option<Applied>,
}

impl Rebuild {
    /// Rebuild mode for `catalog`.
    pub fn new(catalog: &Catalog, opts: &Options) -> Rebuild {
        Rebuild {
            cargo: catalog.cargo().with_state_dir(&opts.state_dir),
            root: catalog.root.clone(),
            state_dir: opts.state_dir.clone(),
            packages: Vec::new(),
            applied: None,
        }
    }
}

impl ModeRun for Rebuild {
    fn open(&mut self, _: &Shared<'_>, _: &TreeScan) -> Result<(), Stop> {
        Ok(())
    }

    fn metadata(&mut self) -> Result<Vec<PackageMeta>, Stop> {
        Ok(self.cargo.metadata()?)
    }

    fn build_baseline(
        &mut self,
        sh: &Shared<'_>,
        packages: Vec<PackageMeta>,
        _: &[&PreparedMutation],
    ) -> Result<Build, Stop> {
        self.packages = packages;
        sh.progress.phase("baseline build");
        Ok(self.cargo.build()?)
    }

    fn list_tests(&self) -> Result<Vec<String>, Stop> {
        Ok(self.cargo.list()?)
    }

    fn snapshot(&self, sh: &Shared<'_>) -> Result<TreeScan, Stop> {
        Ok(tree::scan(&self.root, &sh.exclude)?)
    }

    fn root(&self) -> &Path {
        &self.root
    }

    fn control_run(&self, sh: &Shared<'_>, timeout: Duration) -> Result<TestRun, Stop> {
        Ok(self.cargo.run(&sh.catalog.spec.tests, Some(timeout))?)
    }

    fn after_controls(&mut self, _: &Shared<'_>, _: Duration) -> Result<(), Stop> {
        Ok(())
    }

    fn order(&self, selected: &[&PreparedMutation]) -> Vec<usize> {
        (0..selected.len()).collect()
    }

    fn build_mutant(&mut self, sh: &Shared<'_>, mu: &Mutant<'_>) -> Result<Built, Stop> {
        let pm = mu.pm;
        self.applied = Some(workspace::apply(
            &self.state_dir,
            &sh.catalog.path,
            &mu.m.id,
            &pm.abs_path,
            &pm.original,
            &pm.mutated,
        )?);
        sh.progress
            .line(&format!("{}: applied to {}", mu.tag, pm.rel_path.display()));
        sh.progress.phase(&format!("{}: building", mu.tag));
        rebuilt(
            self.cargo.build()?,
            &self.packages,
            &self.root,
            &pm.abs_path,
            mu,
        )
    }

    fn test_mutant(
        &mut self,
        sh: &Shared<'_>,
        mu: &Mutant<'_>,
        timeout: Duration,
    ) -> Result<TestRun, Stop> {
        sh.progress.phase(&format!("{}: testing", mu.tag));
        Ok(self.cargo.run(&sh.catalog.spec.tests, Some(timeout))?)
    }

    /// Puts the original bytes back; a file that no longer holds the mutated bytes was
    /// edited during the run: TREE-DIRTY, both versions kept ([`Applied::restore`]).
    fn restore_mutant(&mut self, _: &Shared<'_>, mu: &Mutant<'_>) -> Result<(), Stop> {
        let Some(applied) = self.applied.take() else {
            return Ok(());
        };
        if !applied.still_mutated()? {
            applied.restore()?;
            return Err(refuse(
                RefusalKind::TreeDirty,
                format!(
                    "{} changed while mutation {} was applied",
                    mu.pm.rel_path.display(),
                    mu.m.id
                ),
            ));
        }
        applied.restore()?;
        Ok(())
    }

    fn finish(&mut self) -> Result<(), Stop> {
        Ok(())
    }

    fn write_reports(&mut self, _: &Path, _: &[f64]) -> Result<Vec<PathBuf>, BatteryError> {
        Ok(Vec::new())
    }
}
