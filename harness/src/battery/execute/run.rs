//! One battery run, written once for both modes: the phases as data ([`PHASES`],
//! [`MUTANT_PHASES`]), the opening checks, the control runs, the judging of each mutation,
//! the closing fingerprint and the report; what differs between rebuild and switch mode is
//! the `ModeRun` the run is given.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::battery::execute::cache;
use crate::battery::execute::cfg_probe;
use crate::battery::execute::parallel;
use crate::battery::execute::stop::{Stop, refuse};
use crate::battery::execute::workspace;
use crate::battery::report::refusal::RefusalKind;
use crate::battery::report::schema::{Baseline, FailedTest, MutationReport};
use crate::battery::report::verdict::{self, Expectation, Observation, Verdict};
use crate::battery::select::catalog::{Catalog, Mutation, PreparedMutation};
use crate::battery::tree::{self, TreeScan};
use crate::cargo::{Build, CargoCmd, Outcome, PackageMeta, TestRun, owning_package};
use crate::system::progress::Progress;

use crate::battery::{
    BatteryError, Mode, Options, derive_timeout, failure_summary, filter_drift, outcome_word,
};

/// The phases of a run, in order. Each ends the run with a refusal when what it checks
/// does not hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Fingerprint the user's tree, check the catalog against it (CATALOG-DRIFT), make the
    /// tree the builds run in, and check the package and test targets (CATALOG-DRIFT).
    Opening,
    /// The baseline build: the unmutated tree (rebuild mode) or the switched scratch copy
    /// (switch mode); a failed build is BASELINE-RED.
    BaselineBuild,
    /// List the targets' tests and compare them with the catalog's list (FILTER-DRIFT).
    ListTests,
    /// Run the listed tests twice without any mutation (FLAKY, BASELINE-RED) and derive
    /// the per-mutation timeout; then the mode's own controls (switch mode's forced-fail
    /// control).
    Controls,
    /// Every selected mutation through [`MUTANT_PHASES`].
    Mutations,
    /// Fingerprint the user's tree again (TREE-DIRTY).
    Closing,
}

/// Every run goes through these phases in this order.
pub const PHASES: [Phase; 6] = [
    Phase::Opening,
    Phase::BaselineBuild,
    Phase::ListTests,
    Phase::Controls,
    Phase::Mutations,
    Phase::Closing,
];

/// The phases of one mutation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MutantPhase {
    /// Apply the mutation and build it (or find it compiled in behind the switch);
    /// STALE-BUILD when the mutated package was not rebuilt.
    Build,
    /// Run the listed tests against it (skipped when UNVIABLE).
    Test,
    /// Put the original code back (always, whatever happened before) and remove the files
    /// the run created; TREE-DIRTY when the file was edited meanwhile.
    Restore,
    /// The verdict and the expectation.
    Judge,
}

/// Every mutation goes through these phases in this order.
pub const MUTANT_PHASES: [MutantPhase; 4] = [
    MutantPhase::Build,
    MutantPhase::Test,
    MutantPhase::Restore,
    MutantPhase::Judge,
];

/// What building one mutation gave.
#[derive(Debug, Clone)]
pub(crate) enum Built {
    /// Compiled in behind the switch already: nothing to build.
    Switched,
    /// Rebuilt (and verified rebuilt) in `seconds`.
    Rebuilt {
        /// Wall seconds of the build.
        seconds: f64,
    },
    /// The mutated file is not compiled under the catalog's features ([`not_compiled`]):
    /// nothing built, no test run.
    NotCompiled {
        /// Which gate keeps it out, and the features enabled.
        why: String,
    },
    /// No listed test reaches the mutated function (switch mode's reach run): nothing to
    /// build or run; NO_COVERAGE.
    NoCoverage,
    /// Does not compile.
    Unviable {
        /// The compiler's first error (rendered at its place in the mutated file).
        error: String,
        /// Wall seconds of the build (0 when found in the switched build).
        seconds: f64,
    },
}

/// One mutation as the mode sees it.
pub(crate) struct Mutant<'a> {
    /// The catalog entry.
    pub m: &'a Mutation,
    /// Its file's bytes, original and mutated.
    pub pm: &'a PreparedMutation,
    /// `[k/n] id`, for progress lines.
    pub tag: String,
}

/// What both modes share while a run goes on.
pub(crate) struct Shared<'a> {
    /// The user's catalog (when it takes its tests from the listing, `tests_from_listing`,
    /// after the listing phase the one in [`Shared::listed`]).
    pub catalog: &'a Catalog,
    /// Where the listing phase puts the catalog with the tests its targets list when the
    /// catalog's `tests_from_listing` asks for it (`None`: a run that lists no tests).
    pub listed: Option<&'a std::sync::OnceLock<Catalog>>,
    /// Run options.
    pub opts: &'a Options,
    /// Progress output.
    pub progress: &'a Progress,
    /// Directories the fingerprint never walks (the private target, the reports).
    pub exclude: Vec<PathBuf>,
    /// `--since`: the changed lines a mutation must meet to run.
    pub diff: Option<&'a crate::battery::select::diffscope::DiffLines>,
    /// The mode: part of every mutation's evidence.
    pub mode: Mode,
}

/// The mode of a run: where the code under test is built, how a mutant is selected, how
/// the original is put back. Methods return [`Stop`] to end the run.
pub(crate) trait ModeRun: Sync {
    /// Makes the tree the builds run in (switch mode: syncs the scratch copy from `start`).
    fn open(&mut self, sh: &Shared<'_>, start: &TreeScan) -> Result<(), Stop>;
    /// The workspace packages of that tree (`cargo metadata`).
    fn metadata(&mut self) -> Result<Vec<PackageMeta>, Stop>;
    /// The baseline build of the `selected` mutations' tree; mutations found UNVIABLE on
    /// the way are the mode's to remember.
    fn build_baseline(
        &mut self,
        sh: &Shared<'_>,
        packages: Vec<PackageMeta>,
        selected: &[&PreparedMutation],
    ) -> Result<Build, Stop>;
    /// Every test the targets hold, in listing order.
    fn list_tests(&self) -> Result<Vec<String>, Stop>;
    /// The paths under the tree the tests run in (what a run created is removed).
    fn snapshot(&self, sh: &Shared<'_>) -> Result<TreeScan, Stop>;
    /// The root of that tree.
    fn root(&self) -> &Path;
    /// One run of the listed tests without any mutation.
    fn control_run(&self, sh: &Shared<'_>, timeout: Duration) -> Result<TestRun, Stop>;
    /// The second run of the listed tests without any mutation (the FLAKY control). A mode
    /// may leave tests out of it (they then have no outcome in it) when it runs each of
    /// them unmutated again before a mutant's verdict can rest on it (switch mode's doc
    /// tests). Default: [`ModeRun::control_run`].
    fn second_control_run(&self, sh: &Shared<'_>, timeout: Duration) -> Result<TestRun, Stop> {
        self.control_run(sh, timeout)
    }
    /// The mode's controls after the baseline (switch mode: the forced-fail control).
    fn after_controls(&mut self, sh: &Shared<'_>, timeout: Duration) -> Result<(), Stop>;
    /// The order to run `selected` in (indices into it).
    fn order(&self, selected: &[&PreparedMutation]) -> Vec<usize>;
    /// [`MutantPhase::Build`].
    fn build_mutant(&mut self, sh: &Shared<'_>, mu: &Mutant<'_>) -> Result<Built, Stop>;
    /// [`MutantPhase::Test`].
    fn test_mutant(
        &mut self,
        sh: &Shared<'_>,
        mu: &Mutant<'_>,
        timeout: Duration,
    ) -> Result<TestRun, Stop>;
    /// [`MutantPhase::Restore`] of the code (the run removes created files itself).
    fn restore_mutant(&mut self, sh: &Shared<'_>, mu: &Mutant<'_>) -> Result<(), Stop>;
    /// Whether `pm` needs nothing built and nothing written to the tree before its tests
    /// run, so that its test run may go on beside other mutants' (`-j N`, see
    /// [`crate::battery::execute::parallel`]): switch mode's switched and UNVIABLE
    /// mutations. Default: no.
    fn concurrent(&self, _pm: &PreparedMutation) -> bool {
        false
    }
    /// The command that runs the listed tests of a [`ModeRun::concurrent`] mutation with it
    /// selected (its switch in the environment); `None` when it runs no tests (UNVIABLE).
    fn concurrent_tests(&self, _pm: &PreparedMutation) -> Option<CargoCmd> {
        None
    }
    /// The listed tests that execute `pm`'s mutated function, in catalog order, as the
    /// mode's reach run found them (switch mode); `None` when not known. Default: `None`.
    fn reached_by(&self, _pm: &PreparedMutation) -> Option<Vec<String>> {
        None
    }
    /// The listed tests `pm`'s test run runs when that is fewer than all (reach-guided
    /// selection: the others cannot observe the mutation and are judged
    /// [`Outcome::NotReached`]); `None`: every listed test. Default: `None`.
    fn tests_for(&self, _pm: &PreparedMutation) -> Option<Vec<String>> {
        None
    }
    /// The timeout of `pm`'s test run under the battery's `timeout`: switch mode gives a
    /// reach-selected mutant its own ([`crate::battery::execute::mutant_timeout`]).
    /// Default: `timeout`.
    fn mutant_timeout(&self, _pm: &PreparedMutation, timeout: Duration) -> Duration {
        timeout
    }
    /// How [`ModeRun::mutant_timeout`] derived `pm`'s own timeout under the battery's
    /// `timeout`, when it gave one: the report's `timeout_rule`. Default: `None`.
    fn timeout_rule(
        &self,
        _pm: &PreparedMutation,
        _timeout: Duration,
    ) -> Option<crate::battery::report::schema::TimeoutRule> {
        None
    }
    /// How the concurrent test runs went: `jobs` at most at once, and the mutations that
    /// ran again on their own because a file appeared in the tree while other runs went on.
    fn concurrency(&mut self, _jobs: usize, _ran_again_alone: &[String]) {}
    /// After the last mutation (switch mode: the scratch copy back to the original).
    fn finish(&mut self) -> Result<(), Stop>;
    /// Writes the mode's own reports into `dir`; `overheads` are the harness's seconds
    /// around each switched mutant's test run.
    fn write_reports(
        &mut self,
        dir: &Path,
        overheads: &[f64],
    ) -> Result<Vec<PathBuf>, BatteryError>;
}

/// One mutation's result.
struct Ran {
    built: Built,
    run: Option<TestRun>,
    created: Vec<PathBuf>,
    /// [`ModeRun::reached_by`] of the mutation.
    reached_by: Option<Vec<String>>,
    /// Its test run's timeout when that was not the battery's (a reach-selected mutant's
    /// own, [`ModeRun::mutant_timeout`], or a cached TIMEOUT's), seconds.
    own_timeout: Option<f64>,
    /// How the mode derived [`Ran::own_timeout`] ([`ModeRun::timeout_rule`]).
    timeout_rule: Option<crate::battery::report::schema::TimeoutRule>,
}

/// The run's state from phase to phase.
pub(crate) struct Run<'a> {
    sh: Shared<'a>,
    start: Option<TreeScan>,
    prepared: Vec<PreparedMutation>,
    /// Indices into `prepared` of the selected mutations, in catalog order.
    selected: Vec<usize>,
    build: Option<Build>,
    tests_in_targets: usize,
    timeout: Duration,
    /// The baseline, once the control runs ran.
    pub baseline: Option<Baseline>,
    results: BTreeMap<usize, Ran>,
    /// Seconds the harness spent around each switched mutant's test run.
    pub overheads: Vec<f64>,
    /// `--incremental`: the cache, each selected mutation's evidence, what is reused.
    pub reuse: Option<Reuse>,
    /// The user's tree had no `Cargo.lock` at its root when the run started.
    lock_absent: bool,
    /// The `Cargo.lock` the run's own cargo created in the user's tree (the content hash
    /// it had when first seen), removed when the run ends ([`Run::remove_run_lock`]).
    run_lock: Option<String>,
    /// Selected mutations whose file the baseline build does not compile under the
    /// catalog's features ([`not_compiled`]), by index into the catalog, with why.
    not_compiled: BTreeMap<usize, String>,
}

/// The state of `--incremental` in one run.
pub struct Reuse {
    /// The cache file.
    pub path: PathBuf,
    /// The cache as read at the start.
    pub file: cache::CacheFile,
    /// Evidence hash of each selected mutation, by index into the catalog.
    pub evidence: BTreeMap<usize, String>,
    /// Verdicts reused without running, by index into the catalog.
    pub reused: BTreeMap<usize, cache::Entry>,
    /// Verdicts whose evidence matched but that run again to check them (`--recheck`).
    pub rechecked: BTreeMap<usize, cache::Entry>,
    /// The seed of the re-check sample.
    pub seed: u64,
}

impl<'a> Run<'a> {
    /// A run of `sh.catalog` that has not started.
    pub fn new(sh: Shared<'a>) -> Run<'a> {
        Run {
            sh,
            start: None,
            prepared: Vec::new(),
            selected: Vec::new(),
            build: None,
            tests_in_targets: 0,
            timeout: Duration::ZERO,
            baseline: None,
            results: BTreeMap::new(),
            overheads: Vec::new(),
            reuse: None,
            lock_absent: false,
            run_lock: None,
            not_compiled: BTreeMap::new(),
        }
    }

    /// The catalog as run: the user's, or after the listing phase of one that takes its
    /// tests from the listing (`tests_from_listing`) the one with the tests the targets list.
    pub fn catalog(&self) -> &'a Catalog {
        self.sh.catalog
    }

    /// Runs every phase of [`PHASES`] in order; the first refusal or interruption ends it.
    /// A signal is looked for between phases as well as inside them, so that one arriving
    /// at any point ends the run as interrupted.
    /// However it ends, the `Cargo.lock` the run's cargo created is removed first
    /// ([`Run::remove_run_lock`]).
    pub fn go(&mut self, mode: &mut dyn ModeRun) -> Result<(), Stop> {
        let res = self.phases(mode);
        let removed = self.remove_run_lock();
        res.and(removed)
    }

    fn phases(&mut self, mode: &mut dyn ModeRun) -> Result<(), Stop> {
        for phase in PHASES {
            interrupted()?;
            match phase {
                Phase::Opening => self.opening(mode)?,
                Phase::BaselineBuild => self.baseline_build(mode)?,
                Phase::ListTests => self.list_tests(mode)?,
                Phase::Controls => {
                    self.controls(mode)?;
                    mode.after_controls(&self.sh, self.timeout)?;
                }
                Phase::Mutations => {
                    self.mutations(mode)?;
                    mode.finish()?;
                }
                Phase::Closing => self.closing()?,
            }
        }
        interrupted()
    }

    fn opening(&mut self, mode: &mut dyn ModeRun) -> Result<(), Stop> {
        let c = self.sh.catalog;
        self.sh.progress.phase("fingerprinting the tree");
        self.lock_absent = std::fs::symlink_metadata(c.root.join("Cargo.lock")).is_err();
        let start = tree::scan(&c.root, &self.sh.exclude)?;
        self.prepared = c.prepare()?;
        self.selected = selected_indices(c, &self.prepared, self.sh.opts, self.sh.diff);
        mode.open(&self.sh, &start)?;
        self.start = Some(start);
        Ok(())
    }

    fn baseline_build(&mut self, mode: &mut dyn ModeRun) -> Result<(), Stop> {
        let c = self.sh.catalog;
        let packages = mode.metadata()?;
        c.spec.check_targets(&packages).map_err(|e| {
            refuse(
                RefusalKind::CatalogDrift,
                format!("{}: {e}", c.path.display()),
            )
        })?;
        if self.sh.opts.incremental {
            self.reuse = Some(self.plan_reuse(mode.root(), &packages));
        }
        let to_run = self.to_run();
        // rustc's word on the code behind cfg gates comes first: a mutation it compiles
        // nowhere is never switched, built or run.
        self.probe_cfg_gates(&packages, mode.root(), &to_run)?;
        let selected: Vec<&PreparedMutation> = to_run
            .iter()
            .map(|&k| &self.prepared[k])
            .filter(|pm| !self.not_compiled.contains_key(&pm.index))
            .collect();
        let build = mode.build_baseline(&self.sh, packages.clone(), &selected);
        self.claim_run_lock()?;
        let build = build?;
        if !build.success {
            return Err(refuse(
                RefusalKind::BaselineRed,
                format!(
                    "the unmutated tree does not build: {}",
                    build.first_error.clone().unwrap_or_default()
                ),
            ));
        }
        let root = mode.root().to_path_buf();
        for &k in &to_run {
            let pm = &self.prepared[k];
            if self.not_compiled.contains_key(&pm.index) {
                continue;
            }
            if let Some(why) =
                not_compiled(&build, &packages, &root, &root.join(&pm.rel_path), &c.spec)
            {
                self.not_compiled.insert(pm.index, why);
            }
        }
        self.build = Some(build);
        Ok(())
    }

    /// The selected mutations with `cfg` gates on their file's way or around their changed
    /// bytes are probed once ([`cfg_probe`]): those rustc compiles in no unit of the
    /// catalog's build are NOT_COMPILED with their gates named. `root` is the tree the
    /// mode builds (its `packages`). Nothing runs when no selected mutation has a gate.
    fn probe_cfg_gates(
        &mut self,
        packages: &[PackageMeta],
        root: &Path,
        to_run: &[usize],
    ) -> Result<(), Stop> {
        let c = self.sh.catalog;
        let mut modules: BTreeMap<PathBuf, crate::battery::select::gates::ModuleGates> =
            BTreeMap::new();
        let canon_root = root.canonicalize().unwrap_or_else(|_| root.to_path_buf());
        let mut gated: Vec<cfg_probe::Gated> = Vec::new();
        let mut files: BTreeMap<PathBuf, Option<crate::battery::select::cfg_spans::Parsed>> =
            BTreeMap::new();
        for pm in to_run.iter().map(|&k| &self.prepared[k]) {
            let abs = canon_root.join(&pm.rel_path);
            let file_gates = match owning_package(packages, &abs) {
                Some(owner) => {
                    let dir = owner
                        .dir
                        .canonicalize()
                        .unwrap_or_else(|_| owner.dir.clone());
                    modules
                        .entry(dir.clone())
                        .or_insert_with(|| crate::battery::select::gates::ModuleGates::of(&dir))
                        .on_the_way_to(&abs)
                        .into_iter()
                        .filter_map(|g| {
                            let rel = g.file.strip_prefix(&canon_root).ok()?.to_path_buf();
                            Some((rel, g))
                        })
                        .collect()
                }
                None => Vec::new(),
            };
            // Each file is parsed once for all its mutations.
            let parsed = files.entry(pm.rel_path.clone()).or_insert_with(|| {
                std::str::from_utf8(&pm.original)
                    .ok()
                    .and_then(|t| crate::battery::select::cfg_spans::Parsed::of(t).ok())
            });
            let m = &c.spec.mutations[pm.index];
            if let Some(g) = cfg_probe::gated(m, pm, parsed.as_ref(), file_gates) {
                gated.push(g);
            }
        }
        if gated.is_empty() {
            return Ok(());
        }
        let Some(scan) = self.start.as_ref() else {
            return Ok(());
        };
        self.sh.progress.phase("cfg probe");
        let package = packages.iter().find(|p| p.name == c.spec.package);
        let features = (c.spec.features.as_slice(), c.spec.no_default_features);
        let ev = cfg_probe::probe(c, package, &c.root, scan, &gated, features)?;
        interrupted()?;
        if let Some(why) = &ev.inconclusive {
            self.sh.progress.line(&format!(
                "cfg probe: {} mutation(s) behind cfg gates, nothing concluded ({why}); they run as usual",
                ev.probed
            ));
            return Ok(());
        }
        self.sh.progress.line(&format!(
            "cfg probe: {} mutation(s) behind cfg gates, {} compiled in no unit (rustc, {:.1}s)",
            ev.probed,
            ev.not_compiled.len(),
            ev.seconds
        ));
        self.not_compiled.extend(ev.not_compiled);
        Ok(())
    }

    /// Indices into `prepared` of the selected mutations that run (not reused), in order.
    fn to_run(&self) -> Vec<usize> {
        self.selected
            .iter()
            .copied()
            .filter(|&k| {
                self.reuse
                    .as_ref()
                    .is_none_or(|r| !r.reused.contains_key(&self.prepared[k].index))
            })
            .collect()
    }

    /// Reads the cache and decides, for each selected mutation, whether its verdict is
    /// reused (evidence unchanged), re-checked (`--recheck`'s sample of those) or run.
    fn plan_reuse(&self, root: &Path, packages: &[PackageMeta]) -> Reuse {
        let c = self.sh.catalog;
        let p = self.sh.progress;
        let start = self.start.as_ref().expect("the opening phase ran");
        let files = cache::evidence_files(start, root, packages, &c.spec.package);
        let shared = cache::RunEvidence::gather(root, self.sh.mode, &files);
        let path = cache::cache_path(&self.sh.opts.state_dir, c);
        let file = cache::load(&path, c).unwrap_or_else(|e| {
            p.line(&format!("incremental: {e}; nothing is reused"));
            cache::CacheFile {
                schema: cache::CACHE_SCHEMA.into(),
                catalog: c.path.clone(),
                entries: BTreeMap::new(),
            }
        });
        let mut evidence = BTreeMap::new();
        let mut matching = BTreeMap::new();
        for &k in &self.selected {
            let i = self.prepared[k].index;
            let m = &c.spec.mutations[i];
            let ev = shared.of(c, m);
            if let Some(e) = file.entries.get(&m.id).filter(|e| e.evidence == ev) {
                matching.insert(i, e.clone());
            }
            evidence.insert(i, ev);
        }
        let seed = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0);
        let ids: Vec<String> = matching
            .keys()
            .map(|&i| c.spec.mutations[i].id.clone())
            .collect();
        let picked = cache::sample(&ids, self.sh.opts.recheck, seed);
        let (rechecked, reused): (BTreeMap<_, _>, BTreeMap<_, _>) = matching
            .into_iter()
            .partition(|(i, _)| picked.contains(&c.spec.mutations[*i].id));
        p.line(&format!(
            "incremental: {} of {} verdicts reused on unchanged evidence ({} evidence files), {} re-checked (seed {seed}), {} to run",
            reused.len(),
            self.selected.len(),
            files.len(),
            rechecked.len(),
            self.selected.len() - reused.len()
        ));
        Reuse {
            path,
            file,
            evidence,
            reused,
            rechecked,
            seed,
        }
    }

    /// The cache to write after a complete run: the entries read at the start, each
    /// selected mutation's replaced by this run's verdict under its evidence.
    pub fn cache_after(&self) -> Option<(PathBuf, cache::CacheFile)> {
        let r = self.reuse.as_ref()?;
        let c = self.sh.catalog;
        let mut file = r.file.clone();
        for (report, column) in self.mutation_reports() {
            let Some(i) = c.spec.mutations.iter().position(|m| m.id == report.id) else {
                continue;
            };
            if let Some(e) = r.reused.get(&i) {
                file.entries.insert(report.id.clone(), e.clone());
                continue;
            }
            let Some(ev) = r.evidence.get(&i) else {
                continue;
            };
            let timeout_seconds = report.timeout_seconds.unwrap_or(self.timeout.as_secs_f64());
            file.entries.insert(
                report.id.clone(),
                cache::Entry {
                    evidence: ev.clone(),
                    report,
                    column,
                    timeout_seconds,
                },
            );
        }
        Some((r.path.clone(), file))
    }

    fn list_tests(&mut self, mode: &mut dyn ModeRun) -> Result<(), Stop> {
        let c = self.sh.catalog;
        self.sh.progress.phase("listing tests");
        let in_targets = mode.list_tests()?;
        self.tests_in_targets = in_targets.len();
        if c.spec.tests_from_listing
            && let Some(cell) = self.sh.listed
        {
            // The catalog's tests are every test of its targets: those the baseline build
            // lists. The drift check below then holds by construction.
            let mut listed = c.clone();
            listed.spec.tests = in_targets.clone();
            listed.spec.tests_from_listing = false;
            self.sh.catalog = cell.get_or_init(|| listed);
            self.sh.progress.line(&format!(
                "tests: every test the targets list ({})",
                in_targets.len()
            ));
        }
        let c = self.sh.catalog;
        let drift = filter_drift(
            &c.spec.tests,
            &c.spec.skipped_names(),
            &in_targets,
            &c.spec.select,
        );
        let mut parts = Vec::new();
        if !drift.missing.is_empty() {
            let named: Vec<String> = drift
                .missing
                .iter()
                .map(|t| {
                    format!(
                        "{t} ({})",
                        crate::battery::select::nearest::describe(t, &in_targets)
                    )
                })
                .collect();
            parts.push(format!(
                "listed but not in the target: {}",
                named.join(", ")
            ));
        }
        if !drift.stale_skips.is_empty() {
            parts.push(format!(
                "skipped but not in the target: {}",
                drift.stale_skips.join(", ")
            ));
        }
        if !drift.unlisted.is_empty() {
            parts.push(format!(
                "in the target under the pattern {:?} but not listed: {}",
                c.spec.select,
                drift.unlisted.join(", ")
            ));
        }
        if parts.is_empty() {
            Ok(())
        } else {
            Err(refuse(RefusalKind::FilterDrift, parts.join("; ")))
        }
    }

    fn controls(&mut self, mode: &mut dyn ModeRun) -> Result<(), Stop> {
        let c = self.sh.catalog;
        let p = self.sh.progress;
        let baseline_timeout =
            Duration::from_secs_f64((c.spec.timeout_floor_secs * 20.0).max(1800.0));
        let before = Created::watch(&self.sh, mode)?;
        let mut runs = Vec::new();
        let mut ran = Ok(());
        if self.sh.opts.jobs >= 2 {
            // `-j N` lets N test runs go at once (switch mode only): the two baseline runs
            // then go together, under the load the mutants' runs will see.
            let (m, sh): (&dyn ModeRun, &Shared<'_>) = (&*mode, &self.sh);
            let (first, second) = std::thread::scope(|s| {
                p.phase("baseline run 1/2");
                let other = s.spawn(|| m.control_run(sh, baseline_timeout));
                p.phase("baseline run 2/2");
                let second = m.second_control_run(sh, baseline_timeout);
                (other.join(), second)
            });
            let first = first.unwrap_or_else(|_| {
                Err(refuse(
                    RefusalKind::HarnessFault,
                    "the thread of baseline run 1/2 panicked".to_string(),
                ))
            });
            match (first, second) {
                (Ok(a), Ok(b)) => runs.extend([a, b]),
                (Err(stop), _) | (_, Err(stop)) => ran = Err(stop),
            }
        } else {
            for i in 1..=2 {
                p.phase(&format!("baseline run {i}/2"));
                let run = if i == 1 {
                    mode.control_run(&self.sh, baseline_timeout)
                } else {
                    mode.second_control_run(&self.sh, baseline_timeout)
                };
                match run {
                    Ok(r) => runs.push(r),
                    Err(stop) => {
                        ran = Err(stop);
                        break;
                    }
                }
            }
        }
        let created = before.settle(&self.sh, mode, "baseline runs");
        ran?;
        let created = created?;
        let run_seconds: Vec<f64> = runs.iter().map(|r| r.seconds).collect();
        self.timeout = derive_timeout(
            &run_seconds,
            c.spec.timeout_factor,
            c.spec.timeout_floor_secs,
        );
        let build_seconds = self.build.as_ref().map_or(0.0, |b| b.seconds);
        let skipped = match c.spec.skipped.len() {
            0 => String::new(),
            n => format!(", {n} skipped by the catalog"),
        };
        p.line(&format!(
            "baseline ran twice ({} tests{skipped}; build {build_seconds:.1}s, runs {:.1}s and {:.1}s); test timeout {:.1}s",
            c.spec.tests.len(),
            run_seconds[0],
            run_seconds[1],
            self.timeout.as_secs_f64()
        ));
        self.baseline = Some(Baseline {
            build_seconds,
            run_seconds,
            timeout_seconds: self.timeout.as_secs_f64(),
            tests_in_targets: self.tests_in_targets,
            created_files: created,
        });
        judge_controls(&c.spec.tests, &runs)
    }

    /// [`Phase::Mutations`]: each mutation in the mode's order; a stretch of mutations
    /// whose test runs may overlap ([`ModeRun::concurrent`]) goes through
    /// [`concurrent_block`], up to `--jobs` of them at once, the others one at a time.
    fn mutations(&mut self, mode: &mut dyn ModeRun) -> Result<(), Stop> {
        let c = self.sh.catalog;
        let (shut, to_run): (Vec<usize>, Vec<usize>) = self
            .to_run()
            .into_iter()
            .partition(|&k| self.not_compiled.contains_key(&self.prepared[k].index));
        let total = shut.len() + to_run.len();
        self.sh.progress.set_total(total);
        // Not compiled under the catalog's features: judged without building or running.
        for (j, &k) in shut.iter().enumerate() {
            let pm = &self.prepared[k];
            let m = &c.spec.mutations[pm.index];
            let mu = Mutant {
                m,
                pm,
                tag: format!("[{}/{total}] {}", j + 1, m.id),
            };
            let why = self.not_compiled[&pm.index].clone();
            let ran = Ran {
                built: Built::NotCompiled { why },
                run: None,
                created: Vec::new(),
                reached_by: None,
                own_timeout: None,
                timeout_rule: None,
            };
            judged(&self.sh, self.reuse.as_ref(), &mut self.results, &mu, ran)?;
        }
        let selected: Vec<&PreparedMutation> = to_run.iter().map(|&k| &self.prepared[k]).collect();
        let n = selected.len();
        let order = mode.order(&selected);
        let mut ran_again_alone = Vec::new();
        let mut k = 0;
        while k < n {
            let end = (k..n)
                .find(|&j| !mode.concurrent(selected[order[j]]))
                .unwrap_or(n);
            if end > k {
                let items: Vec<(usize, &PreparedMutation)> =
                    (k..end).map(|j| (j, selected[order[j]])).collect();
                let block = Block {
                    n,
                    timeout: self.timeout,
                    reuse: self.reuse.as_ref(),
                };
                ran_again_alone.extend(concurrent_block(
                    &self.sh,
                    mode,
                    &block,
                    &items,
                    &mut self.results,
                    &mut self.overheads,
                )?);
                k = end;
                continue;
            }
            interrupted()?;
            let pm = selected[order[k]];
            let m = &c.spec.mutations[pm.index];
            let mu = Mutant {
                m,
                pm,
                tag: format!("[{}/{n}] {}", k + 1, m.id),
            };
            let timeout = timeout_for(self.reuse.as_ref(), mode, pm, self.timeout);
            let mut ran = one_mutant(&self.sh, mode, &mu, timeout, &mut self.overheads)?;
            ran.own_timeout = own_timeout(&ran, timeout, self.timeout);
            ran.timeout_rule = timeout_rule(&ran, self.reuse.as_ref(), mode, pm, self.timeout);
            // A signal during the mutant (its test binary may have died of it) is never a
            // verdict.
            interrupted()?;
            judged(&self.sh, self.reuse.as_ref(), &mut self.results, &mu, ran)?;
            k += 1;
        }
        mode.concurrency(self.sh.opts.jobs, &ran_again_alone);
        Ok(())
    }

    /// A workspace without a `Cargo.lock` (the norm for a library) gets one from the first
    /// cargo command that resolves its dependencies: in rebuild mode, the baseline build in
    /// the user's tree. A lock absent at the start and present after the baseline build
    /// was written by the run's own cargo: it is the run's, recorded here with its content
    /// hash, and removed when the run ends. A lock present at the start is the user's and
    /// is never touched.
    fn claim_run_lock(&mut self) -> Result<(), Stop> {
        let path = self.sh.catalog.root.join("Cargo.lock");
        if !self.lock_absent || self.run_lock.is_some() {
            return Ok(());
        }
        match std::fs::read(&path) {
            Ok(bytes) => {
                self.run_lock = Some(tree::sha256_hex(&bytes));
                Ok(())
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(refuse(
                RefusalKind::HarnessFault,
                format!("{}: cannot read: {e}", path.display()),
            )),
        }
    }

    /// Removes the `Cargo.lock` the run's cargo created ([`Run::claim_run_lock`]), so the
    /// user's tree is left without one, as it was found. A lock whose content changed since
    /// (someone else wrote it) is kept, and the closing fingerprint names it.
    fn remove_run_lock(&mut self) -> Result<(), Stop> {
        let Some(hash) = self.run_lock.take() else {
            return Ok(());
        };
        let path = self.sh.catalog.root.join("Cargo.lock");
        let same = std::fs::read(&path).is_ok_and(|b| tree::sha256_hex(&b) == hash);
        if !same {
            return Ok(());
        }
        std::fs::remove_file(&path).map_err(|e| {
            refuse(
                RefusalKind::HarnessFault,
                format!(
                    "{}: cannot remove the Cargo.lock the run's cargo created: {e}",
                    path.display()
                ),
            )
        })?;
        self.sh
            .progress
            .line("removed the Cargo.lock the run's cargo created (the tree had none)");
        Ok(())
    }

    fn closing(&mut self) -> Result<(), Stop> {
        let c = self.sh.catalog;
        self.remove_run_lock()?;
        self.sh.progress.phase("final fingerprint");
        let end = tree::scan(&c.root, &self.sh.exclude)?;
        let start = self.start.as_ref().expect("the opening phase ran");
        if end.fingerprint() != start.fingerprint() {
            return Err(refuse(
                RefusalKind::TreeDirty,
                format!(
                    "the tree differs from its state at the start: {}",
                    start.differences(&end).join(", ")
                ),
            ));
        }
        Ok(())
    }

    /// The tree's fingerprint at the start of the run (`None` before the opening scan).
    pub fn start_fingerprint(&self) -> Option<String> {
        self.start.as_ref().map(TreeScan::fingerprint)
    }

    /// The reports of the mutations that ran, in catalog order, and the kill matrix's
    /// columns (outcomes; `None` for UNVIABLE).
    pub fn mutation_reports(&self) -> Vec<(MutationReport, Option<BTreeMap<String, Outcome>>)> {
        let c = self.sh.catalog;
        self.selected
            .iter()
            .map(|&k| &self.prepared[k])
            .filter_map(|pm| {
                if let Some(e) = self.reuse.as_ref().and_then(|r| r.reused.get(&pm.index)) {
                    let mut report = e.report.clone();
                    report.reused = true;
                    return Some((report, e.column.clone()));
                }
                let ran = self.results.get(&pm.index)?;
                Some(mutation_report(&c.spec.mutations[pm.index], pm, ran))
            })
            .collect()
    }
}

/// [`Stop::Interrupted`] once a signal has asked the harness to stop.
fn interrupted() -> Result<(), Stop> {
    if crate::system::interrupt::requested() {
        Err(Stop::Interrupted)
    } else {
        Ok(())
    }
}

/// The tree the tests run in, as it was before a test phase: what they create is settled
/// against it afterwards. In the user's tree (rebuild mode) its file set is journaled, so a
/// later command can settle it if the run is killed; switch mode's scratch copy is the
/// run's own, and everything new in it is removed.
struct Created {
    before: TreeScan,
    journal: Option<PathBuf>,
}

impl Created {
    fn watch(sh: &Shared<'_>, mode: &dyn ModeRun) -> Result<Created, Stop> {
        let before = mode.snapshot(sh)?;
        let journal = if user_tree(sh, mode) {
            Some(workspace::journal_tree(
                &sh.opts.state_dir,
                mode.root(),
                &sh.exclude,
                &before,
            )?)
        } else {
            None
        };
        Ok(Created { before, journal })
    }

    /// Removes the files the run created since [`Created::watch`]; in the user's tree, a new
    /// file the run did not make is kept and the run refused TREE-DIRTY naming it (`during`
    /// says when it appeared).
    fn settle(
        self,
        sh: &Shared<'_>,
        mode: &dyn ModeRun,
        during: &str,
    ) -> Result<Vec<PathBuf>, Stop> {
        let after = mode.snapshot(sh)?;
        if !user_tree(sh, mode) {
            return Ok(workspace::remove_created(
                mode.root(),
                &self.before,
                &after,
            )?);
        }
        let settled = workspace::settle_created(mode.root(), &self.before, &after)?;
        if let Some(j) = &self.journal {
            workspace::forget_tree(j);
        }
        if settled.kept.is_empty() {
            return Ok(settled.removed);
        }
        Err(refuse(
            RefusalKind::TreeDirty,
            format!(
                "files appeared in the tree during the {during} that no process of the run created; kept: {}",
                settled
                    .kept
                    .iter()
                    .map(|f| f.display().to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        ))
    }
}

/// Whether the tests run in the user's tree (rebuild mode) rather than in a copy the run
/// owns (switch mode's scratch copy).
fn user_tree(sh: &Shared<'_>, mode: &dyn ModeRun) -> bool {
    mode.root() == sh.catalog.root
}

/// FLAKY when the two control runs disagree on a listed test (one the mode left out of
/// the second, [`ModeRun::second_control_run`], is the mode's to run again); BASELINE-RED
/// when a listed test is not green in the first (or the run timed out).
fn judge_controls(tests: &[String], runs: &[TestRun]) -> Result<(), Stop> {
    let (a, b) = (&runs[0], &runs[1]);
    let differing: Vec<String> = tests
        .iter()
        .filter(|t| b.outcomes.contains_key(*t) && a.outcomes.get(*t) != b.outcomes.get(*t))
        .map(|t| {
            format!(
                "{t} ({} then {})",
                outcome_word(a.outcomes.get(t)),
                outcome_word(b.outcomes.get(t))
            )
        })
        .collect();
    if !differing.is_empty() {
        return Err(refuse(
            RefusalKind::Flaky,
            format!("the two baseline runs disagree: {}", differing.join(", ")),
        ));
    }
    let not_green: Vec<String> = a
        .outcomes
        .iter()
        .filter(|(_, o)| **o != Outcome::Passed)
        .map(|(t, o)| {
            let msg = a
                .messages
                .get(t)
                .map(|m| failure_summary(m))
                .unwrap_or_default();
            let sep = if msg.is_empty() { "" } else { ": " };
            format!("{t} ({}{sep}{msg})", outcome_word(Some(o)))
        })
        .collect();
    if !not_green.is_empty() || a.timed_out {
        return Err(refuse(
            RefusalKind::BaselineRed,
            format!(
                "listed tests are not green without any mutation: {}",
                not_green.join(", ")
            ),
        ));
    }
    Ok(())
}

/// [`MUTANT_PHASES`] for one mutation: build, test, restore (always; a failed restore
/// outranks what went wrong before it), remove what the run created.
fn one_mutant(
    sh: &Shared<'_>,
    mode: &mut dyn ModeRun,
    mu: &Mutant<'_>,
    timeout: Duration,
    overheads: &mut Vec<f64>,
) -> Result<Ran, Stop> {
    let t0 = Instant::now();
    let watch = Created::watch(sh, mode)?;
    let mut overhead = t0.elapsed().as_secs_f64();
    let mut built = None;
    let mut run = None;
    let mut outcome = Ok(());
    for phase in MUTANT_PHASES {
        let step = match phase {
            MutantPhase::Build => mode.build_mutant(sh, mu).map(|b| built = Some(b)),
            MutantPhase::Test => match &built {
                Some(Built::Switched | Built::Rebuilt { .. }) => {
                    mode.test_mutant(sh, mu, timeout).map(|r| run = Some(r))
                }
                _ => Ok(()),
            },
            MutantPhase::Restore => {
                let restored = mode.restore_mutant(sh, mu);
                outcome = restored.and(outcome);
                break;
            }
            MutantPhase::Judge => unreachable!("judged by the caller"),
        };
        if let Err(stop) = step {
            outcome = Err(stop);
            let restored = mode.restore_mutant(sh, mu);
            outcome = restored.and(outcome);
            break;
        }
    }
    // The created files are settled whatever happened before (an interrupted run removes
    // them too); what went wrong first is reported first.
    let t1 = Instant::now();
    let created = watch.settle(
        sh,
        mode,
        &format!("build and tests of mutation {}", mu.m.id),
    );
    outcome?;
    let created = created?;
    overhead += t1.elapsed().as_secs_f64();
    if !created.is_empty() {
        sh.progress.line(&removed_line(&mu.tag, &created));
    }
    let built = built.expect("the build phase ran");
    if matches!(built, Built::Switched) {
        overheads.push(overhead);
    }
    if let (Some(r), Some(ran_tests)) = (run.as_mut(), mode.tests_for(mu.pm)) {
        mark_not_reached(r, &sh.catalog.spec.tests, &ran_tests);
    }
    if matches!(built, Built::NoCoverage) {
        run = Some(nothing_reached(&sh.catalog.spec.tests));
    }
    Ok(Ran {
        built,
        run,
        created,
        reached_by: mode.reached_by(mu.pm),
        own_timeout: None,
        timeout_rule: None,
    })
}

/// The indices into `prepared` (`catalog`'s mutations, prepared) of the mutations a run
/// with `opts` selects, in catalog order: those `--only` names, in `--shard`'s part, and
/// meeting the `--since` diff's changed lines.
pub(crate) fn selected_indices(
    c: &Catalog,
    prepared: &[PreparedMutation],
    opts: &crate::battery::Options,
    diff: Option<&crate::battery::select::diffscope::DiffLines>,
) -> Vec<usize> {
    let only = opts.only.as_ref();
    let shard = opts.shard.as_ref().map(|s| s.select(&c.mutation_ids()));
    (0..prepared.len())
        .filter(|&k| {
            let pm = &prepared[k];
            let m = &c.spec.mutations[pm.index];
            only.is_none_or(|o| o.contains(&m.id))
                && shard.as_ref().is_none_or(|s| s.contains(&m.id))
                && diff.is_none_or(|d| {
                    d.meets(
                        &pm.rel_path,
                        &crate::battery::select::diffscope::occurrence_lines(&pm.original, &m.find),
                    )
                })
        })
        .collect()
}

/// [`Ran::own_timeout`]: `timeout`, the one `ran`'s tests ran under, when they ran and it
/// was not the battery's `battery`.
fn own_timeout(ran: &Ran, timeout: Duration, battery: Duration) -> Option<f64> {
    (ran.run.is_some()
        && matches!(ran.built, Built::Switched | Built::Rebuilt { .. })
        && timeout != battery)
        .then_some(timeout.as_secs_f64())
}

/// [`Ran::timeout_rule`]: the mode's rule for `pm`'s own timeout when `ran` ran under it
/// (not a cached TIMEOUT's re-check timeout).
fn timeout_rule(
    ran: &Ran,
    reuse: Option<&Reuse>,
    mode: &dyn ModeRun,
    pm: &PreparedMutation,
    battery: Duration,
) -> Option<crate::battery::report::schema::TimeoutRule> {
    ran.own_timeout?;
    if reuse.is_some_and(|r| r.rechecked.contains_key(&pm.index)) {
        return None;
    }
    mode.timeout_rule(pm, battery)
}

/// The timeout of one mutation's test run under the battery's `battery`: the mode's for it
/// ([`ModeRun::mutant_timeout`]), or for a TIMEOUT re-checked from the cache, the timeout it
/// was found under.
fn timeout_for(
    reuse: Option<&Reuse>,
    mode: &dyn ModeRun,
    pm: &PreparedMutation,
    battery: Duration,
) -> Duration {
    match reuse.and_then(|r| r.rechecked.get(&pm.index)) {
        Some(e) if e.report.verdict == verdict::Verdict::Timeout => {
            Duration::from_secs_f64(e.timeout_seconds)
        }
        _ => mode.mutant_timeout(pm, battery),
    }
}

/// [`MutantPhase::Judge`] of a mutation that ran: its verdict line; for a re-checked cached
/// verdict, REUSED-WRONG (the cache dropped) when the run disproves it; then the result is
/// kept.
fn judged(
    sh: &Shared<'_>,
    reuse: Option<&Reuse>,
    results: &mut BTreeMap<usize, Ran>,
    mu: &Mutant<'_>,
    ran: Ran,
) -> Result<(), Stop> {
    log_verdict(sh.progress, mu, &ran, sh.opts.generated);
    if let Some((r, e)) = reuse.and_then(|r| r.rechecked.get(&mu.pm.index).map(|e| (r, e))) {
        let (fresh, _) = mutation_report(mu.m, mu.pm, &ran);
        if let Some(why) = cache::disproves(&e.report, &fresh) {
            let dropped = match std::fs::remove_file(&r.path) {
                Ok(()) => format!("the cache {} is dropped", r.path.display()),
                Err(err) => format!("the cache {} could not be dropped: {err}", r.path.display()),
            };
            return Err(refuse(
                RefusalKind::ReusedWrong,
                format!("{why}; {dropped}"),
            ));
        }
    }
    results.insert(mu.pm.index, ran);
    sh.progress.advance();
    Ok(())
}

/// What a [`concurrent_block`] needs of the run.
struct Block<'r> {
    /// The number of mutations that run (for the `[k/n]` tags).
    n: usize,
    /// The run's timeout.
    timeout: Duration,
    /// `--incremental`'s state.
    reuse: Option<&'r Reuse>,
}

/// A stretch of mutations whose test runs may overlap (`items`: each one's place in the
/// run's order and the mutation), run through [`parallel::run_block`] with up to `--jobs`
/// test runs at once, each in its own temporary directory, and judged in order exactly as
/// [`one_mutant`] and [`judged`] judge one: the same lines, verdicts and created files.
/// Returns the ids of the mutations that ran again on their own.
fn concurrent_block(
    sh: &Shared<'_>,
    mode: &mut dyn ModeRun,
    block: &Block<'_>,
    items: &[(usize, &PreparedMutation)],
    results: &mut BTreeMap<usize, Ran>,
    overheads: &mut Vec<f64>,
) -> Result<Vec<String>, Stop> {
    let c = sh.catalog;
    let mut mus = Vec::with_capacity(items.len());
    let mut built = Vec::with_capacity(items.len());
    let mut jobs = Vec::with_capacity(items.len());
    let mut reached = Vec::with_capacity(items.len());
    let mut timeouts = Vec::with_capacity(items.len());
    for &(k, pm) in items {
        let m = &c.spec.mutations[pm.index];
        let mu = Mutant {
            m,
            pm,
            tag: format!("[{}/{}] {}", k + 1, block.n, m.id),
        };
        let b = mode.build_mutant(sh, &mu)?;
        let timeout = timeout_for(block.reuse, mode, pm, block.timeout);
        timeouts.push(timeout);
        jobs.push(match (&b, mode.concurrent_tests(pm)) {
            (Built::Switched, Some(cmd)) => Some(parallel::Job {
                cmd,
                timeout,
                tests: mode.tests_for(pm),
            }),
            (Built::Switched, None) => {
                return Err(refuse(
                    RefusalKind::HarnessFault,
                    format!("mutation {}: switched, but no command runs its tests", m.id),
                ));
            }
            _ => None,
        });
        reached.push((mode.reached_by(pm), mode.tests_for(pm)));
        mus.push(mu);
        built.push(Some(b));
    }
    let p = sh.progress;
    let root = mode.root().to_path_buf();
    let mut take = |i: usize, done: Option<parallel::Done>| -> Result<(), Stop> {
        let mu = &mus[i];
        let b = built[i].take().expect("each item is taken once");
        let (reached_by, ran_tests) = reached[i].clone();
        let (run, created) = match done {
            Some(mut d) => {
                p.past(&format!("{}: testing (switched)", mu.tag));
                overheads.push(d.overhead);
                if let Some(ran_tests) = &ran_tests {
                    mark_not_reached(&mut d.run, &c.spec.tests, ran_tests);
                }
                (Some(d.run), d.created)
            }
            None if matches!(b, Built::NoCoverage) => {
                (Some(nothing_reached(&c.spec.tests)), Vec::new())
            }
            None => (None, Vec::new()),
        };
        if !created.is_empty() {
            p.line(&removed_line(&mu.tag, &created));
        }
        let mut ran = Ran {
            built: b,
            run,
            created,
            reached_by,
            own_timeout: None,
            timeout_rule: None,
        };
        ran.own_timeout = own_timeout(&ran, timeouts[i], block.timeout);
        ran.timeout_rule = timeout_rule(&ran, block.reuse, mode, mu.pm, block.timeout);
        judged(sh, block.reuse, results, mu, ran)
    };
    if let Some((k, _)) = items.first() {
        p.live(&format!(
            "testing mutants {}..{} of {}, up to {} at once",
            k + 1,
            k + items.len(),
            block.n,
            sh.opts.jobs
        ));
    }
    let stats = parallel::run_block(
        &root,
        &sh.opts.state_dir,
        sh.opts.jobs,
        &c.spec.tests,
        jobs,
        &mut take,
    )?;
    Ok(stats
        .ran_again_alone
        .iter()
        .map(|&i| items[i].1)
        .map(|pm| c.spec.mutations[pm.index].id.clone())
        .collect())
}

/// The listed tests a reach-selected run did not run get [`Outcome::NotReached`]: they
/// cannot observe the mutation. A listed test the run was given keeps its own outcome
/// (missing when it did not report).
fn mark_not_reached(run: &mut TestRun, listed: &[String], ran: &[String]) {
    for t in listed {
        if !ran.contains(t) {
            run.outcomes.insert(t.clone(), Outcome::NotReached);
        }
    }
}

/// The run of a NO_COVERAGE mutant that ran nothing: every listed test
/// [`Outcome::NotReached`].
fn nothing_reached(listed: &[String]) -> TestRun {
    let mut run = TestRun::empty();
    mark_not_reached(&mut run, listed, &[]);
    run
}

fn observation<'r>(ran: &'r Ran) -> Observation<'r> {
    match &ran.built {
        Built::NotCompiled { why } => return Observation::NotCompiled(why),
        Built::NoCoverage => return Observation::NoCoverage,
        _ => {}
    }
    // Reached by no listed test, run anyway (`--all-tests`): NO_COVERAGE as when nothing
    // ran, unless the run saw something (which the reach says it cannot: then its verdict).
    if ran.reached_by.as_ref().is_some_and(Vec::is_empty)
        && let Some(r) = &ran.run
        && !r.timed_out
        && r.outcomes
            .values()
            .all(|o| matches!(o, Outcome::Passed | Outcome::Ignored | Outcome::NotReached))
    {
        return Observation::NoCoverage;
    }
    match &ran.run {
        None => Observation::Unviable,
        Some(r) => Observation::Ran {
            outcomes: &r.outcomes,
            messages: &r.messages,
            timed_out: r.timed_out,
            died: &r.died,
        },
    }
}

fn log_verdict(p: &Progress, mu: &Mutant<'_>, ran: &Ran, generated: bool) {
    let j = verdict::judge(mu.m, &observation(ran));
    let mut line = verdict_line(&mu.tag, mu.m, &j, generated);
    if j.verdict == Verdict::Timeout
        && let Some(t) = ran.own_timeout
    {
        line.push_str(&format!(" (its own test timeout, {t:.1} s)"));
    }
    p.line(&line);
}

/// The progress line of one judged mutation. A catalog's mutation: `TAG: VERDICT
/// (EXPECTATION)`, an UNMET one with its reasons and, killed by other tests than the
/// expected, the tests that killed it. A generated mutant (cargo-mutants', whose catalog
/// expects nothing of it) in its own terms: `TAG: caught by T, U`, `TAG: missed` (`TAG:
/// missed, no listed test reaches it` for NO_COVERAGE), or its verdict when it neither was
/// caught nor missed (`UNVIABLE`, `TIMEOUT`, ...).
pub(crate) fn verdict_line(
    tag: &str,
    m: &Mutation,
    j: &verdict::Judgement,
    generated: bool,
) -> String {
    if generated {
        return match j.verdict {
            Verdict::Killed => {
                let mut by: Vec<&str> = m.killed_by.iter().map(String::as_str).collect();
                by.extend(j.other_killers.iter().map(String::as_str));
                format!("{tag}: caught by {}", by.join(", "))
            }
            Verdict::Survived => format!("{tag}: missed"),
            Verdict::NoCoverage => format!("{tag}: missed, no listed test reaches it"),
            // Not a miss: rustc compiles the mutated code into no unit (the reason says
            // which gate keeps it out).
            Verdict::NotCompiled => format!(
                "{tag}: not compiled ({})",
                j.reasons.first().map_or("", |r| r
                    .trim_start_matches("not compiled under the catalog's configuration: "))
            ),
            v => format!("{tag}: {v}"),
        };
    }
    let mut note = match j.expectation {
        Expectation::Unmet => format!(": {}", j.reasons.join("; ")),
        Expectation::Met => String::new(),
    };
    if j.expectation == Expectation::Unmet
        && j.verdict == Verdict::Killed
        && m.role != crate::battery::select::catalog::Role::Gap
        && !j.other_killers.is_empty()
    {
        note.push_str(&format!(
            "; killed instead by {}",
            j.other_killers.join(", ")
        ));
    }
    format!("{tag}: {} ({}){note}", j.verdict, j.expectation)
}

/// [`MutantPhase::Judge`]: the report of one mutation and its kill-matrix column.
fn mutation_report(
    m: &Mutation,
    pm: &PreparedMutation,
    ran: &Ran,
) -> (MutationReport, Option<BTreeMap<String, Outcome>>) {
    let j = verdict::judge(m, &observation(ran));
    let (compiler_error, build_seconds) = match &ran.built {
        Built::Switched | Built::NotCompiled { .. } | Built::NoCoverage => (None, 0.0),
        Built::Rebuilt { seconds } => (None, *seconds),
        Built::Unviable { error, seconds } => (Some(error.clone()), *seconds),
    };
    let r = ran.run.as_ref();
    let report = MutationReport {
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
        failed_tests: r.map_or_else(Vec::new, failed_tests),
        other_killers: j.other_killers,
        outcomes: r.map(|r| r.outcomes.clone()).unwrap_or_default(),
        compiler_error,
        crash_output: r
            .filter(|r| r.outcomes.values().any(|o| *o == Outcome::NoResult))
            .map(|r| r.stderr_tail.clone()),
        died: r.map(|r| r.died.clone()).unwrap_or_default(),
        finished_tests: r.and_then(|r| {
            r.timed_out.then(|| {
                r.outcomes
                    .iter()
                    .filter(|(_, o)| !matches!(o, Outcome::Unfinished))
                    .map(|(t, _)| t.clone())
                    .collect()
            })
        }),
        created_files: ran.created.clone(),
        build_seconds,
        test_seconds: r.map_or(0.0, |r| r.seconds),
        reached_by: ran.reached_by.clone(),
        timeout_seconds: ran.own_timeout,
        timeout_rule: ran.timeout_rule,
        reused: false,
        config: None,
    };
    (report, r.map(|r| r.outcomes.clone()))
}

fn failed_tests(r: &TestRun) -> Vec<FailedTest> {
    r.outcomes
        .iter()
        .filter(|(_, o)| verdict::is_kill(**o))
        .map(|(t, _)| FailedTest {
            name: t.clone(),
            message: r.messages.get(t).cloned().unwrap_or_default(),
        })
        .collect()
}

/// [`MutantPhase::Build`] of a mutation written into a tree and rebuilt there (rebuild
/// mode, and switch mode's fallback): STALE-BUILD unless the build compiled `file` again
/// ([`check_rebuilt`]); UNVIABLE with the compiler's first error when the build failed.
/// `root` is the root of the workspace that was built.
pub(crate) fn rebuilt(
    build: Build,
    packages: &[PackageMeta],
    root: &Path,
    file: &Path,
    mu: &Mutant<'_>,
) -> Result<Built, Stop> {
    check_rebuilt(&build, packages, root, file, mu)?;
    Ok(built_of(build))
}

/// A mutant's build as its verdict reads it: REBUILT when `build` succeeded, UNVIABLE with
/// its first compiler error when not. No freshness check (see [`rebuilt`]).
pub(crate) fn built_of(build: Build) -> Built {
    if build.success {
        Built::Rebuilt {
            seconds: build.seconds,
        }
    } else {
        Built::Unviable {
            error: build.first_error.unwrap_or_default(),
            seconds: build.seconds,
        }
    }
}

/// STALE-BUILD unless a successful `build` compiled `file` (the mutated file, absolute)
/// again into a target the tests run: `file` must be among the sources (rustc's dep-info,
/// [`crate::cargo::Artifact::sources`]) of an artifact cargo did not report fresh, build
/// scripts aside. `root` is the root of the workspace that was built. Cargo reporting every
/// artifact of the owning package fresh, or rebuilding only targets that do not compile
/// `file` (a binary the tests do not build, a file no `mod` declares, a build script
/// re-run), means the tests run code without the mutation.
pub(crate) fn check_rebuilt(
    build: &Build,
    packages: &[PackageMeta],
    root: &Path,
    file: &Path,
    mu: &Mutant<'_>,
) -> Result<(), Stop> {
    if !build.success {
        return Ok(());
    }
    stale_detail(build, packages, root, file).map_or(Ok(()), |why| {
        Err(refuse(
            RefusalKind::StaleBuild,
            format!("mutation {}: {why}", mu.m.id),
        ))
    })
}

/// Why a successful `build` does not hold `file` compiled afresh into a target the tests
/// run, or `None` when it does (see [`check_rebuilt`]). The reason names `file` relative to
/// `root`.
pub(crate) fn stale_detail(
    build: &Build,
    packages: &[PackageMeta],
    root: &Path,
    file: &Path,
) -> Option<String> {
    let canon = |p: &Path| p.canonicalize().unwrap_or_else(|_| p.to_path_buf());
    let want = canon(file);
    let shown = file
        .strip_prefix(root)
        .unwrap_or(file)
        .display()
        .to_string();
    let owner = owning_package(packages, &want);
    let rebuilt: Vec<&crate::cargo::Artifact> = build
        .artifacts
        .iter()
        .filter(|a| !a.fresh && !a.kind.iter().any(|k| k == "custom-build"))
        .collect();
    let mut unread = Vec::new();
    for a in &rebuilt {
        match a.sources(root) {
            Some(srcs) if srcs.iter().any(|s| canon(s) == want) => return None,
            Some(_) => {}
            None => unread.push(a.target.clone()),
        }
    }
    let of_owner: Vec<String> = rebuilt
        .iter()
        .filter(|a| owner.is_none_or(|o| o.id == a.package_id))
        .map(|a| format!("{} ({})", a.target, a.kind.join(", ")))
        .collect();
    let owner_name = owner.map_or("(none)", |o| o.name.as_str());
    let mut why = if of_owner.is_empty() {
        format!(
            "cargo reports every artifact of package {owner_name} fresh after {shown} was mutated: the mutated code was not rebuilt"
        )
    } else {
        format!(
            "{shown} is not among the sources of any target cargo rebuilt for the tests (rebuilt of package {owner_name}: {}; rustc's dep-info lists their sources): the tests run code without the mutation",
            of_owner.join(", ")
        )
    };
    if !unread.is_empty() {
        why.push_str(&format!(" (no dep-info found for: {})", unread.join(", ")));
    }
    Some(why)
}

/// Why the mutated `file` (absolute, in the tree built at `root`) is not compiled under the
/// catalog's features, or `None`: `file` must be among the sources (rustc's dep-info) of
/// none of its owning package's artifacts in the successful `build` (build scripts aside;
/// every one of them with a dep-info file, so the absence is proven), and a
/// `cfg(feature = ...)` on its way from a crate root
/// ([`crate::battery::select::gates::feature_gate`]) must not let it in with the features the catalog enables in that package (its `features`
/// and, unless `no_default_features`, the defaults). Any other file missing from the build
/// (one no `mod` declares) is not this: it goes on to STALE-BUILD.
pub(crate) fn not_compiled(
    build: &Build,
    packages: &[PackageMeta],
    root: &Path,
    file: &Path,
    spec: &crate::battery::select::catalog::CatalogSpec,
) -> Option<String> {
    let canon = |p: &Path| p.canonicalize().unwrap_or_else(|_| p.to_path_buf());
    let want = canon(file);
    let owner = owning_package(packages, &want)?;
    let of_owner: Vec<&crate::cargo::Artifact> = build
        .artifacts
        .iter()
        .filter(|a| a.package_id == owner.id && !a.kind.iter().any(|k| k == "custom-build"))
        .collect();
    if of_owner.is_empty() {
        return None;
    }
    for a in &of_owner {
        match a.sources(root) {
            Some(srcs) if srcs.iter().any(|s| canon(s) == want) => return None,
            Some(_) => {}
            None => return None,
        }
    }
    let gates = crate::battery::select::gates::feature_gate(&canon(&owner.dir), &want);
    let (features, no_default): (&[String], bool) = if owner.name == spec.package {
        (&spec.features, spec.no_default_features)
    } else {
        (&[], false)
    };
    let on =
        crate::battery::select::gates::enabled_features(&owner.feature_table, features, no_default);
    let shut: Vec<String> = gates
        .iter()
        .filter(|g| g.enabled(&on) == Some(false))
        .map(|g| g.describe(&canon(root)))
        .collect();
    if shut.is_empty() {
        return None;
    }
    let on_list = if on.is_empty() {
        "none".to_string()
    } else {
        on.iter().cloned().collect::<Vec<_>>().join(", ")
    };
    Some(format!(
        "{} is compiled into no target of package {} (rustc's dep-info), kept out by {} (features enabled: {on_list})",
        file.strip_prefix(root).unwrap_or(file).display(),
        owner.name,
        shut.join(", ")
    ))
}

/// The progress line naming the files a mutant's test run created (removed by the harness).
fn removed_line(tag: &str, created: &[std::path::PathBuf]) -> String {
    let names: Vec<String> = created.iter().map(|f| f.display().to_string()).collect();
    format!("{tag}: removed files the run created: {}", names.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::battery::select::catalog::Role;

    fn mutation(role: Role, killed_by: &[&str]) -> Mutation {
        Mutation {
            id: "m".into(),
            title: "t".into(),
            role,
            file: "src/lib.rs".into(),
            find: "a".into(),
            occurrences: 1,
            replace: "b".into(),
            killed_by: killed_by.iter().map(|s| s.to_string()).collect(),
            expect_message: None,
            rationale: "r".into(),
        }
    }

    fn judged(m: &Mutation, failing: &[&str], passing: &[&str]) -> verdict::Judgement {
        let outcomes: BTreeMap<String, Outcome> = failing
            .iter()
            .map(|t| (t.to_string(), Outcome::Failed))
            .chain(passing.iter().map(|t| (t.to_string(), Outcome::Passed)))
            .collect();
        let messages = BTreeMap::new();
        verdict::judge(
            m,
            &Observation::Ran {
                outcomes: &outcomes,
                messages: &messages,
                timed_out: false,
                died: &[],
            },
        )
    }

    #[test]
    fn an_unmet_kill_names_who_really_killed_it() {
        let m = mutation(Role::Defect, &["a::expected"]);
        let j = judged(&m, &["b::real"], &["a::expected"]);
        assert_eq!(
            verdict_line("[1/1] m", &m, &j, false),
            "[1/1] m: KILLED (UNMET): a::expected did not fail (passed); killed instead by b::real"
        );
    }

    #[test]
    fn a_generated_mutant_is_caught_or_missed_never_a_closed_gap() {
        let m = mutation(Role::Gap, &[]);
        let caught = verdict_line(
            "[2/9] gen-2",
            &m,
            &judged(&m, &["t::one"], &["t::two"]),
            true,
        );
        assert_eq!(caught, "[2/9] gen-2: caught by t::one");
        let missed = verdict_line("[3/9] gen-3", &m, &judged(&m, &[], &["t::one"]), true);
        assert_eq!(missed, "[3/9] gen-3: missed");
        let shut = verdict::judge(&m, &Observation::NotCompiled("src/lib.rs:3 is shut"));
        let line = verdict_line("[4/9] gen-4", &m, &shut, true);
        assert!(
            line.starts_with("[4/9] gen-4: not compiled (src/lib.rs:3 is shut; no test ran"),
            "{line}"
        );
        for line in [caught, missed] {
            assert!(!line.contains("UNMET") && !line.contains("gap"), "{line}");
        }
    }
}
