//! `harness check`: validate catalogs without building (with `--list`, against the targets' own tests).

use std::path::{Path, PathBuf};

use super::report_catalog_error;
use crate::battery;
use crate::battery::select::catalog::Catalog;
use crate::cargo::PackageMeta;
use crate::system::exit::ExitCode;

/// `harness check`; with `list` (the state directory), also the tests against the targets'
/// own listing.
pub fn run(catalogs: &[PathBuf], list: Option<&Path>) -> ExitCode {
    let mut code = ExitCode::AllMet;
    for path in catalogs {
        match Catalog::load(path).and_then(|c| c.prepare().map(|p| (c, p))) {
            Ok((c, p)) => match check_targets(&c) {
                Err(e) => {
                    eprintln!("harness: CATALOG-DRIFT: {}: {e}", path.display());
                    code = ExitCode::Refused;
                }
                Ok(packages) => {
                    for w in battery::select::gates::unreachable_mutations(&c, &p, &packages) {
                        eprintln!("harness: warning: {}: {w}", path.display());
                    }
                    if p.is_empty() {
                        eprintln!(
                            "harness: warning: {}: no [[mutation]] yet: every listed test will be UNFALSIFIED",
                            path.display()
                        );
                    }
                    if let Some(state) = list
                        && let Err(e) = check_listed(&c, state, &packages)
                    {
                        eprintln!("harness: CATALOG-DRIFT: {}: {e}", path.display());
                        code = ExitCode::Refused;
                        continue;
                    }
                    code = check_place(&c, &p, path, code);
                }
            },
            Err(e) => {
                report_catalog_error(&e);
                code = ExitCode::Refused;
            }
        }
    }
    code
}

/// `check`'s last word on one catalog: where its target directory lies (or why it cannot).
fn check_place(
    c: &Catalog,
    p: &[crate::battery::select::catalog::PreparedMutation],
    path: &Path,
    code: ExitCode,
) -> ExitCode {
    match c.check_target_dir() {
        Ok(place) => {
            println!(
                "{}: ok ({} mutations, {} tests, workspace {}, target directory {place})",
                path.display(),
                p.len(),
                c.spec.tests.len(),
                c.root.display()
            );
            code
        }
        Err(e) => {
            report_catalog_error(&e);
            ExitCode::Refused
        }
    }
}

/// `check --list`: every listed test is one the targets hold (the nearest real one named
/// when not), and every test of the targets under `select` is listed.
fn check_listed(c: &Catalog, state: &Path, packages: &[PackageMeta]) -> Result<(), String> {
    let real = battery::select::starter::leaving_no_lock(&c.root, || {
        c.cargo().with_state_dir(state).list()
    })
    .map_err(|e| format!("cannot list the targets' tests: {e}"))?;
    let drift = battery::filter_drift(
        &c.spec.tests,
        &c.spec.skipped_names(),
        &real,
        &c.spec.select,
    );
    // A listed test the targets hold only with more features on is named as such, not
    // as a misspelling of its nearest neighbour.
    let gated = if drift.missing.is_empty() {
        None
    } else {
        with_every_feature(c, state, packages)
    };
    let mut parts: Vec<String> = drift
        .missing
        .iter()
        .map(|t| {
            let i = c.spec.tests.iter().position(|x| x == t).unwrap_or(0);
            match &gated {
                Some((features, all)) if all.contains(t) => format!(
                    "tests[{i}] {t:?} is a test of the targets only with more features enabled (it is listed with all of the package's features: {}): enable its feature in `features`, or list it in the `tests` of a [[config]] that enables it",
                    features.join(", ")
                ),
                _ => format!(
                    "tests[{i}] {t:?} is not a test of the targets ({})",
                    battery::select::nearest::describe(t, &real)
                ),
            }
        })
        .collect();
    for t in &drift.stale_skips {
        let i = c
            .spec
            .skipped
            .iter()
            .position(|s| &s.test == t)
            .unwrap_or(0);
        parts.push(format!(
            "skip[{i}] {t:?} is not a test of the targets ({})",
            battery::select::nearest::describe(t, &real)
        ));
    }
    if !drift.unlisted.is_empty() {
        parts.push(format!(
            "in the targets under the pattern {:?} but not listed: {}",
            c.spec.select,
            drift.unlisted.join(", ")
        ));
    }
    if parts.is_empty() {
        Ok(())
    } else {
        Err(parts.join("; "))
    }
}

/// The tests the catalog's targets list with every feature of its package enabled (built
/// in `<target_dir>/all-features`, so the catalog's own build stays fresh), with those
/// features; `None` when the package declares no feature beyond its own configuration's
/// or the listing fails (then nothing more is said).
fn with_every_feature(
    c: &Catalog,
    state: &Path,
    packages: &[PackageMeta],
) -> Option<(Vec<String>, Vec<String>)> {
    let p = packages.iter().find(|p| p.name == c.spec.package)?;
    let features: Vec<String> = p
        .features
        .iter()
        .filter(|f| f.as_str() != "default")
        .cloned()
        .collect();
    if features.iter().all(|f| c.spec.features.contains(f)) {
        return None;
    }
    let all = battery::select::starter::leaving_no_lock(&c.root, || {
        c.cargo()
            .with_target_dir(&c.target_dir.join("all-features"))
            .with_features(&features, false)
            .with_state_dir(state)
            .list()
    })
    .ok()?;
    Some((features, all))
}

/// The package and test targets named by the catalog exist (`cargo metadata`, no build);
/// returns the workspace's packages.
fn check_targets(c: &Catalog) -> Result<Vec<PackageMeta>, String> {
    let packages = c.cargo().metadata().map_err(|e| e.to_string())?;
    c.spec.check_targets(&packages)?;
    Ok(packages)
}
