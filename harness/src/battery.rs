//! One battery run from start to end: lock, fingerprint, drift check, baseline, filter check,
//! then per mutation apply / rebuild / test / verify / restore, and the final fingerprint.
//!
//! A battery that cannot be trusted refuses with one of CATALOG-DRIFT, FILTER-DRIFT,
//! BASELINE-RED, FLAKY, STALE-BUILD, TREE-DIRTY or LOCKED and runs nothing more.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crate::cargo::{CargoCmd, CargoError, Outcome, PackageMeta};
use crate::catalog::{Catalog, CatalogError, PreparedMutation};
use crate::progress::Progress;
use crate::report::{
    Baseline, BatteryReport, CatalogInfo, FailedTest, MutationReport, RefusalInfo, Status, Summary,
};
use crate::verdict::{self, Expectation, KillMatrix, Observation};
use crate::workspace::{self, TreeError, TreeScan};
use crate::{EXIT_ALL_MET, EXIT_REFUSED, EXIT_WEAK};

/// The refusals: the instrument could not be trusted, so nothing more runs (exit 2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RefusalKind {
    /// The catalog no longer matches the tree.
    CatalogDrift,
    /// The listed tests and the target's tests under the pattern differ.
    FilterDrift,
    /// A listed test fails without any mutation.
    BaselineRed,
    /// The two baseline runs disagree.
    Flaky,
    /// A mutated crate was not rebuilt.
    StaleBuild,
    /// The tree differs from its starting state (or was edited during the run).
    TreeDirty,
    /// The host lock is held by someone else.
    Locked,
}

impl fmt::Display for RefusalKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            RefusalKind::CatalogDrift => "CATALOG-DRIFT",
            RefusalKind::FilterDrift => "FILTER-DRIFT",
            RefusalKind::BaselineRed => "BASELINE-RED",
            RefusalKind::Flaky => "FLAKY",
            RefusalKind::StaleBuild => "STALE-BUILD",
            RefusalKind::TreeDirty => "TREE-DIRTY",
            RefusalKind::Locked => "LOCKED",
        })
    }
}

/// A refusal with its detail.
#[derive(Debug, Clone)]
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
enum Stop {
    Refused(Refusal),
    Interrupted,
    Fault(String),
}

fn refuse(kind: RefusalKind, detail: impl Into<String>) -> Stop {
    Stop::Refused(Refusal {
        kind,
        detail: detail.into(),
    })
}

impl From<CargoError> for Stop {
    fn from(e: CargoError) -> Stop {
        match e {
            CargoError::Interrupted(_) => Stop::Interrupted,
            e => Stop::Fault(e.to_string()),
        }
    }
}

impl From<TreeError> for Stop {
    fn from(e: TreeError) -> Stop {
        match e {
            e @ (TreeError::ConcurrentEdit { .. } | TreeError::ChangedBeforeApply { .. }) => {
                refuse(RefusalKind::TreeDirty, e.to_string())
            }
            e => Stop::Fault(e.to_string()),
        }
    }
}

/// Options of one battery run.
#[derive(Debug, Clone)]
pub struct Options {
    /// Host state directory (journals).
    pub state_dir: PathBuf,
    /// Where `<name>/` report directories go (default `<workspace>/reports`).
    pub reports_root: Option<PathBuf>,
    /// Run only these mutation ids.
    pub only: Option<Vec<String>>,
    /// How the host lock is held, for the report.
    pub lock: String,
}

/// Outcome of [`run`]: the report (when the catalog could be loaded) and where it went.
#[derive(Debug)]
pub struct RunResult {
    /// The report.
    pub report: BatteryReport,
    /// Report files written.
    pub written: Vec<PathBuf>,
}

/// Errors that prevent a report at all: a malformed catalog or an unknown `--only` id.
#[derive(Debug, thiserror::Error)]
pub enum BatteryError {
    /// Malformed catalog.
    #[error(transparent)]
    Catalog(#[from] CatalogError),
    /// `--only` named an id the catalog does not have.
    #[error("{catalog}: --only names unknown mutation id(s): {ids}")]
    UnknownOnly {
        /// Catalog path.
        catalog: PathBuf,
        /// The unknown ids.
        ids: String,
    },
    /// The reports could not be written.
    #[error("{path}: cannot write reports: {source}")]
    Reports {
        /// Report directory.
        path: PathBuf,
        /// Cause.
        source: std::io::Error,
    },
}

struct State<'a> {
    catalog: &'a Catalog,
    cargo: CargoCmd,
    progress: &'a Progress,
    opts: &'a Options,
    exclude: Vec<PathBuf>,
    baseline: Option<Baseline>,
    mutations: Vec<MutationReport>,
    columns: Vec<(String, Option<BTreeMap<String, Outcome>>)>,
}

/// Runs the battery in `catalog_path` (the caller holds the host lock) and writes its
/// reports. Refusals and interruptions are in the report's `status`; only a malformed
/// catalog (or unwritable reports) is an error.
pub fn run(
    catalog_path: &Path,
    opts: &Options,
    progress: &Progress,
) -> Result<RunResult, BatteryError> {
    let started = Instant::now();
    let started_unix = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    // A catalog that does not load (malformed, or duplicate ids: drift) gets no report
    // directory; the caller prints the error and exits 2.
    let catalog = Catalog::load(catalog_path)?;
    if let Some(only) = &opts.only {
        let known: BTreeSet<&str> = catalog
            .spec
            .mutations
            .iter()
            .map(|m| m.id.as_str())
            .collect();
        let unknown: Vec<&str> = only
            .iter()
            .map(String::as_str)
            .filter(|i| !known.contains(i))
            .collect();
        if !unknown.is_empty() {
            return Err(BatteryError::UnknownOnly {
                catalog: catalog_path.to_path_buf(),
                ids: unknown.join(", "),
            });
        }
    }
    let reports_root = opts
        .reports_root
        .clone()
        .unwrap_or_else(|| catalog.root.join("reports"));
    let reports_root = std::fs::create_dir_all(&reports_root)
        .and_then(|_| reports_root.canonicalize())
        .map_err(|source| BatteryError::Reports {
            path: reports_root.clone(),
            source,
        })?;
    let mut st = State {
        cargo: CargoCmd::new(&catalog).with_state_dir(&opts.state_dir),
        catalog: &catalog,
        progress,
        opts,
        exclude: vec![catalog.target_dir.clone(), reports_root.clone()],
        baseline: None,
        mutations: Vec::new(),
        columns: Vec::new(),
    };
    let stop = st.go().err();
    let (status, refusal) = match &stop {
        None => (Status::Complete, None),
        Some(Stop::Interrupted) => (Status::Interrupted, None),
        Some(Stop::Refused(r)) => (
            Status::Refused,
            Some(RefusalInfo {
                kind: r.kind.to_string(),
                detail: r.detail.clone(),
            }),
        ),
        Some(Stop::Fault(msg)) => (
            Status::Refused,
            Some(RefusalInfo {
                kind: "HARNESS-FAULT".into(),
                detail: msg.clone(),
            }),
        ),
    };
    let columns: Vec<(String, Option<&BTreeMap<String, Outcome>>)> = st
        .columns
        .iter()
        .map(|(id, o)| (id.clone(), o.as_ref()))
        .collect();
    let kill_matrix = KillMatrix::build(&catalog.spec.tests, &columns);
    let unfalsified =
        (status == Status::Complete && opts.only.is_none()).then(|| kill_matrix.unfalsified());
    let summary = Summary::of(&st.mutations, unfalsified.as_ref());
    let exit_code = match status {
        Status::Interrupted => crate::interrupt::EXIT_INTERRUPTED,
        Status::Refused => EXIT_REFUSED,
        Status::Complete if summary.unmet > 0 || summary.unfalsified > 0 => EXIT_WEAK,
        Status::Complete => EXIT_ALL_MET,
    };
    let report = BatteryReport {
        schema: crate::report::SCHEMA.to_string(),
        harness_version: env!("CARGO_PKG_VERSION").to_string(),
        catalog: CatalogInfo {
            name: catalog.name.clone(),
            path: catalog.path.clone(),
            workspace: catalog.root.clone(),
            package: catalog.spec.package.clone(),
            test_targets: catalog.spec.test_targets.clone(),
            lib_tests: catalog.spec.lib_tests,
            select: catalog.spec.select.clone(),
            tests: catalog.spec.tests.clone(),
        },
        status,
        refusal,
        only: opts.only.clone(),
        lock: opts.lock.clone(),
        started_unix,
        wall_seconds: started.elapsed().as_secs_f64(),
        baseline: st.baseline.take(),
        mutations: std::mem::take(&mut st.mutations),
        kill_matrix,
        unfalsified,
        summary,
        exit_code,
    };
    let dir = crate::report::report_dir(&reports_root, &catalog.name);
    let written = crate::report::write_all(&dir, &report)
        .map_err(|source| BatteryError::Reports { path: dir, source })?;
    Ok(RunResult { report, written })
}

/// The per-mutation test timeout: `max(floor, factor x slowest baseline run)`.
pub fn derive_timeout(run_seconds: &[f64], factor: f64, floor: f64) -> Duration {
    let slowest = run_seconds.iter().copied().fold(0.0, f64::max);
    Duration::from_secs_f64((slowest * factor).max(floor))
}

/// Listed tests vs. the target's tests under the pattern: (missing from the target,
/// matching the pattern but unlisted).
pub fn filter_drift(
    listed: &[String],
    in_targets: &[String],
    select: &str,
) -> (Vec<String>, Vec<String>) {
    let have: BTreeSet<&str> = in_targets.iter().map(String::as_str).collect();
    let want: BTreeSet<&str> = listed.iter().map(String::as_str).collect();
    let missing = listed
        .iter()
        .filter(|t| !have.contains(t.as_str()))
        .cloned()
        .collect();
    let unlisted = in_targets
        .iter()
        .filter(|t| t.contains(select) && !want.contains(t.as_str()))
        .cloned()
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    (missing, unlisted)
}

/// The package whose directory is the longest prefix of `file`.
fn owning_package<'p>(packages: &'p [PackageMeta], file: &Path) -> Option<&'p PackageMeta> {
    packages
        .iter()
        .filter(|p| {
            let dir = p.dir.canonicalize().unwrap_or_else(|_| p.dir.clone());
            file.starts_with(dir)
        })
        .max_by_key(|p| p.dir.components().count())
}

impl State<'_> {
    fn scan(&self) -> Result<TreeScan, Stop> {
        Ok(workspace::scan(&self.catalog.root, &self.exclude)?)
    }

    fn go(&mut self) -> Result<(), Stop> {
        let c = self.catalog;
        let p = self.progress;
        p.phase("fingerprinting the tree");
        let start_scan = self.scan()?;
        let prepared = c.prepare().map_err(|e| match e {
            CatalogError::Drift { .. } => refuse(RefusalKind::CatalogDrift, e.to_string()),
            e => Stop::Fault(e.to_string()),
        })?;
        let selected: Vec<&PreparedMutation> = prepared
            .iter()
            .filter(|pm| {
                let id = &c.spec.mutations[pm.index].id;
                self.opts.only.as_ref().is_none_or(|o| o.contains(id))
            })
            .collect();
        let packages = self.cargo.metadata()?;
        PackageMeta::check_targets(
            &packages,
            &c.spec.package,
            &c.spec.test_targets,
            c.spec.lib_tests,
        )
        .map_err(|e| {
            refuse(
                RefusalKind::CatalogDrift,
                format!("{}: {e}", c.path.display()),
            )
        })?;

        p.phase("baseline build");
        let build = self.cargo.build()?;
        if !build.success {
            return Err(refuse(
                RefusalKind::BaselineRed,
                format!(
                    "the unmutated tree does not build: {}",
                    build.first_error.unwrap_or_default()
                ),
            ));
        }
        p.phase("listing tests");
        let in_targets = self.cargo.list()?;
        let (missing, unlisted) = filter_drift(&c.spec.tests, &in_targets, &c.spec.select);
        if !missing.is_empty() || !unlisted.is_empty() {
            let mut parts = Vec::new();
            if !missing.is_empty() {
                parts.push(format!(
                    "listed but not in the target: {}",
                    missing.join(", ")
                ));
            }
            if !unlisted.is_empty() {
                parts.push(format!(
                    "in the target under the pattern {:?} but not listed: {}",
                    c.spec.select,
                    unlisted.join(", ")
                ));
            }
            return Err(refuse(RefusalKind::FilterDrift, parts.join("; ")));
        }
        let baseline_timeout =
            Duration::from_secs_f64((c.spec.timeout_floor_secs * 20.0).max(1800.0));
        let before_runs = self.scan()?;
        let mut runs = Vec::new();
        for i in 1..=2 {
            p.phase(&format!("baseline run {i}/2"));
            runs.push(self.cargo.run(&c.spec.tests, Some(baseline_timeout))?);
        }
        let after_runs = self.scan()?;
        let baseline_created = workspace::remove_created(&c.root, &before_runs, &after_runs)?;
        let run_seconds: Vec<f64> = runs.iter().map(|r| r.seconds).collect();
        let timeout = derive_timeout(
            &run_seconds,
            c.spec.timeout_factor,
            c.spec.timeout_floor_secs,
        );
        p.line(&format!(
            "baseline ran twice ({} tests; build {:.1}s, runs {:.1}s and {:.1}s); test timeout {:.1}s",
            c.spec.tests.len(),
            build.seconds,
            run_seconds[0],
            run_seconds[1],
            timeout.as_secs_f64()
        ));
        self.baseline = Some(Baseline {
            build_seconds: build.seconds,
            run_seconds,
            timeout_seconds: timeout.as_secs_f64(),
            tests_in_targets: in_targets.len(),
            created_files: baseline_created,
        });

        let differing: Vec<String> = c
            .spec
            .tests
            .iter()
            .filter(|t| runs[0].outcomes.get(*t) != runs[1].outcomes.get(*t))
            .map(|t| {
                format!(
                    "{t} ({} then {})",
                    outcome_word(runs[0].outcomes.get(t)),
                    outcome_word(runs[1].outcomes.get(t))
                )
            })
            .collect();
        if !differing.is_empty() {
            return Err(refuse(
                RefusalKind::Flaky,
                format!("the two baseline runs disagree: {}", differing.join(", ")),
            ));
        }
        let not_green: Vec<String> = runs[0]
            .outcomes
            .iter()
            .filter(|(_, o)| **o != Outcome::Passed)
            .map(|(t, o)| {
                let msg = runs[0]
                    .messages
                    .get(t)
                    .map(|m| failure_summary(m))
                    .unwrap_or_default();
                format!(
                    "{t} ({}{}{})",
                    outcome_word(Some(o)),
                    if msg.is_empty() { "" } else { ": " },
                    msg
                )
            })
            .collect();
        if !not_green.is_empty() || runs[0].timed_out {
            return Err(refuse(
                RefusalKind::BaselineRed,
                format!(
                    "listed tests are not green without any mutation: {}",
                    not_green.join(", ")
                ),
            ));
        }
        p.set_total(selected.len());
        let n = selected.len();
        for (i, pm) in selected.iter().enumerate() {
            if crate::interrupt::requested() {
                return Err(Stop::Interrupted);
            }
            let m = &c.spec.mutations[pm.index];
            let tag = format!("[{}/{n}] {}", i + 1, m.id);
            let before = self.scan()?;
            let applied = workspace::apply(
                &self.opts.state_dir,
                &c.path,
                &m.id,
                &pm.abs_path,
                &pm.original,
                &pm.mutated,
            )?;
            p.line(&format!("{tag}: applied to {}", pm.rel_path.display()));
            p.phase(&format!("{tag}: building"));
            let build = match self.cargo.build() {
                Ok(b) => b,
                Err(e) => {
                    applied.restore()?;
                    return Err(e.into());
                }
            };
            let owner = owning_package(&packages, &pm.abs_path);
            let rebuilt = build
                .artifacts
                .iter()
                .any(|a| !a.fresh && owner.is_none_or(|o| o.id == a.package_id));
            if build.success && !rebuilt {
                applied.restore()?;
                return Err(refuse(
                    RefusalKind::StaleBuild,
                    format!(
                        "mutation {}: cargo reports every artifact of package {} fresh after {} was mutated: the mutated code was not rebuilt",
                        m.id,
                        owner.map_or("(none)", |o| o.name.as_str()),
                        pm.rel_path.display()
                    ),
                ));
            }
            let run = if build.success {
                p.phase(&format!("{tag}: testing"));
                match self.cargo.run(&c.spec.tests, Some(timeout)) {
                    Ok(r) => Some(r),
                    Err(e) => {
                        applied.restore()?;
                        return Err(e.into());
                    }
                }
            } else {
                None
            };
            if !applied.still_mutated()? {
                // restore() keeps both versions and says where.
                return Err(applied
                    .restore()
                    .map_err(Stop::from)
                    .err()
                    .unwrap_or_else(|| {
                        refuse(
                            RefusalKind::TreeDirty,
                            format!(
                                "{} changed while mutation {} was applied",
                                pm.rel_path.display(),
                                m.id
                            ),
                        )
                    }));
            }
            applied.restore()?;
            let after = self.scan()?;
            let created = workspace::remove_created(&c.root, &before, &after)?;
            if !created.is_empty() {
                p.line(&format!(
                    "{tag}: removed files the run created: {}",
                    created
                        .iter()
                        .map(|f| f.display().to_string())
                        .collect::<Vec<_>>()
                        .join(", ")
                ));
            }
            let obs = match &run {
                None => Observation::Unviable,
                Some(r) => Observation::Ran {
                    outcomes: &r.outcomes,
                    messages: &r.messages,
                    timed_out: r.timed_out,
                },
            };
            let j = verdict::judge(m, &obs);
            let (outcomes, failed_tests, finished, test_seconds) = match &run {
                None => (BTreeMap::new(), Vec::new(), None, 0.0),
                Some(r) => (
                    r.outcomes.clone(),
                    r.outcomes
                        .iter()
                        .filter(|(_, o)| verdict::is_kill(**o))
                        .map(|(t, _)| FailedTest {
                            name: t.clone(),
                            message: r.messages.get(t).cloned().unwrap_or_default(),
                        })
                        .collect(),
                    r.timed_out.then(|| {
                        r.outcomes
                            .iter()
                            .filter(|(_, o)| !matches!(o, Outcome::Unfinished))
                            .map(|(t, _)| t.clone())
                            .collect()
                    }),
                    r.seconds,
                ),
            };
            p.line(&format!(
                "{tag}: {} ({}){}",
                j.verdict,
                j.expectation,
                if j.expectation == Expectation::Unmet {
                    format!(": {}", j.reasons.join("; "))
                } else {
                    String::new()
                }
            ));
            self.columns
                .push((m.id.clone(), run.as_ref().map(|r| r.outcomes.clone())));
            self.mutations.push(MutationReport {
                id: m.id.clone(),
                title: m.title.clone(),
                role: m.role,
                file: pm.rel_path.clone(),
                occurrences: m.occurrences,
                line: pm.first_at.0,
                column: pm.first_at.1,
                end_line: pm.first_end.0,
                end_column: pm.first_end.1,
                replace: m.replace.clone(),
                verdict: j.verdict,
                expectation: j.expectation,
                reasons: j.reasons,
                expected_killers: m.killed_by.clone(),
                failed_tests,
                other_killers: j.other_killers,
                outcomes,
                compiler_error: build.first_error.clone(),
                crash_output: run
                    .as_ref()
                    .filter(|r| r.outcomes.values().any(|o| *o == Outcome::NoResult))
                    .map(|r| r.stderr_tail.clone()),
                finished_tests: finished,
                created_files: created,
                build_seconds: build.seconds,
                test_seconds,
            });
            p.advance();
        }
        p.phase("final fingerprint");
        let end_scan = self.scan()?;
        if end_scan.fingerprint() != start_scan.fingerprint() {
            return Err(refuse(
                RefusalKind::TreeDirty,
                format!(
                    "the tree differs from its state at the start: {}",
                    start_scan.differences(&end_scan).join(", ")
                ),
            ));
        }
        Ok(())
    }
}

/// The gist of a libtest failure message: its first few lines that are not the
/// `thread '...' panicked at` header, a note or a backtrace, joined on one line.
pub fn failure_summary(message: &str) -> String {
    message
        .lines()
        .map(str::trim)
        .take_while(|l| *l != "stack backtrace:")
        .filter(|l| !l.is_empty() && !l.starts_with("thread '") && !l.starts_with("note: "))
        .take(3)
        .collect::<Vec<_>>()
        .join(" ")
}

fn outcome_word(o: Option<&Outcome>) -> &'static str {
    match o {
        Some(Outcome::Passed) => "passed",
        Some(Outcome::Failed) => "failed",
        Some(Outcome::Ignored) => "ignored",
        Some(Outcome::Unfinished) => "unfinished",
        Some(Outcome::NoResult) => "no result",
        None => "absent",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timeout_is_factor_times_slowest_run_with_a_floor() {
        assert_eq!(
            derive_timeout(&[1.0, 3.0], 5.0, 2.0),
            Duration::from_secs(15)
        );
        assert_eq!(
            derive_timeout(&[0.1, 0.2], 5.0, 4.0),
            Duration::from_secs(4)
        );
    }

    #[test]
    fn failure_summary_skips_header_notes_and_backtrace() {
        let m = "thread 'a' (12) panicked at t.rs:1:1:\nassertion `left == right` failed\n  left: 1\n right: 2\nstack backtrace:\n   0: x\nnote: run with";
        assert_eq!(
            failure_summary(m),
            "assertion `left == right` failed left: 1 right: 2"
        );
    }

    #[test]
    fn filter_drift_finds_missing_and_unlisted() {
        let listed = vec!["c::a".to_string(), "c::b".to_string()];
        let have = vec![
            "c::a".to_string(),
            "c::new".to_string(),
            "other".to_string(),
        ];
        let (missing, unlisted) = filter_drift(&listed, &have, "c::");
        assert_eq!(missing, vec!["c::b".to_string()]);
        assert_eq!(unlisted, vec!["c::new".to_string()]);
    }
}
