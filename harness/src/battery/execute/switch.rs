//! Switch mode's run (`harness battery --mode switch`).
//!
//! Every catalog mutation that lies inside one function body is compiled into a scratch
//! copy of the workspace behind a run-time switch
//! ([`crate::battery::execute::instrument`]), so the whole battery costs about one build;
//! the others fall back to rebuilds in the same scratch copy.
//!
//! Run order: fingerprint the user's tree; sync the scratch copy
//! (`<target_dir>/switch/tree`) and seed its target directory
//! (`<target_dir>/switch/target`) with the user's build products of every package that is
//! not a workspace member ([`crate::battery::execute::scratch`] says why the members are
//! never shared); write the switched files and build once. When that build fails, rustc's
//! JSON diagnostics name the byte spans of each error: an error inside a mutated body is
//! that mutation's own (each mutated body is a verbatim copy of the body the mutated file
//! would hold), so it is UNVIABLE, its error is reported at its place in the mutated file,
//! and the build is repeated without it; an error no mutated body holds sends every
//! remaining switched mutation through a compile check on its own
//! (`cargo check --profile test`) before one last build. The successful build must have rebuilt the package (else
//! STALE-BUILD). Then: list tests (FILTER-DRIFT); the control run with no mutant selected,
//! twice (BASELINE-RED, FLAKY); the forced-fail control (every switched function panics)
//! must fail at least one listed test, which proves the switch is reached (when none fails,
//! every switched mutation falls back to a rebuild, so that no verdict rests on an unproven
//! switch); one test run per switched mutant; then the fallback mutations one rebuild each;
//! finally the user's tree must still have its fingerprint (TREE-DIRTY). The user's tree is
//! only read, and the user's target directory only read from.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::battery::execute::diagnostics::{self, CompilerError};
use crate::battery::execute::instrument::{
    FORCED_FAIL, FnBody, Layout, Placement, SWITCH_ENV, SwitchedFn, blame, function_bodies,
    mutated_body, place, site_path, support_items, support_tag, switched_file,
};
use crate::battery::execute::scratch::{self, SeedStats, list_tree, sync_tree};
use crate::battery::report::verdict;
use crate::battery::select::catalog::{Catalog, PreparedMutation};
use crate::battery::tree::TreeScan;
use crate::cargo::{
    Build, CargoCmd, Outcome, PackageMeta, TestRun, owning_package, parse_build_messages,
};

use crate::battery::execute::built_sources;
use crate::battery::execute::parallel;
use crate::battery::execute::reach::{self, REACH_ENV, fresh_dir};
use crate::battery::execute::run::{
    Built, ModeRun, Mutant, Shared, built_of, not_compiled, rebuilt, stale_detail,
};
use crate::battery::execute::stop::{Stop, io_fault, refuse};
use crate::battery::report::refusal::RefusalKind;
use crate::battery::{BatteryError, Options, failure_summary};
use crate::doctest_keep::{KEEP_ENV, RECORD_ENV};

/// Why every switched mutation is rebuilt when the forced-fail control fails no listed test
/// (its plan entry's `reason`).
pub const UNPROVEN: &str = "the switch is not proven reached (the forced-fail control failed no listed test): rebuilt on its own";
/// Schema tag of `switch.json`.
pub const SWITCH_SCHEMA: &str = "harness-switch/2";

/// How one mutation runs in switch mode (`switch.json` spells it in lower case).
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum PlanMode {
    /// Compiled in behind the switch: one test run, no build of its own.
    Switched,
    /// Not switchable (the plan entry says why): rebuilt on its own in the scratch copy.
    Rebuild,
    /// Does not compile (found by the switched build or a compile check on its own).
    Unviable,
}

/// How one mutation runs in switch mode.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct PlanEntry {
    /// Mutation id.
    pub id: String,
    /// Switched, rebuild (fallback) or unviable.
    pub mode: PlanMode,
    /// The function whose body holds it (switched and unviable ones, and switched ones
    /// rebuilt because the switch was not proven reached).
    pub function: Option<String>,
    /// Why it falls back to rebuild mode, or how it was found UNVIABLE.
    pub reason: Option<String>,
}

/// The plan of a switch run, written next to the battery report as `switch.json`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SwitchInfo {
    /// [`SWITCH_SCHEMA`].
    pub schema: String,
    /// Scratch copy of the workspace.
    pub scratch: PathBuf,
    /// Per mutation, in catalog order.
    pub plan: Vec<PlanEntry>,
    /// Seconds spent syncing the scratch copy.
    pub sync_seconds: f64,
    /// Seconds spent seeding the scratch target directory with the user's dependency build
    /// products.
    pub seed_seconds: f64,
    /// What the seeding linked, copied and left out.
    pub seed: SeedStats,
    /// Packages whose artifacts cargo reported fresh in the successful switched build
    /// (dependencies reused, not rebuilt), sorted, without duplicates.
    pub fresh_packages: Vec<String>,
    /// Switched builds run: 1 when every switched mutation compiles; one more per round of
    /// mutations found UNVIABLE (and one more after compile checks on their own).
    pub switched_builds: usize,
    /// Seconds of the switched builds that failed and of any compile checks of mutations on
    /// their own, all together (0 when the first switched build succeeds).
    pub check_seconds: f64,
    /// Seconds of the successful switched build.
    pub switched_build_seconds: f64,
    /// Why every switched mutation was compile-checked on its own before the switched build
    /// (a lint level that makes unused code an error; see
    /// [`crate::battery::select::lints`]), if it was.
    pub checked_alone_because: Option<String>,
    /// Listed tests that failed under the forced-fail control (they reach switched code).
    pub forced_fail_failed: Vec<String>,
    /// Listed tests that passed under the forced-fail control (they reach no switched code).
    pub forced_fail_passed: Vec<String>,
    /// Median harness overhead per switched mutant (scratch listing and cleanup), seconds.
    pub overhead_seconds_median: Option<f64>,
    /// How many switched mutants' test runs went on at once at most (`-j N`).
    pub jobs: usize,
    /// Switched mutations whose first test run was dropped because a file appeared in the
    /// scratch copy while other runs went on: they ran again one at a time (see
    /// [`crate::battery::execute::parallel`]).
    pub ran_again_alone: Vec<String>,
    /// The reach run ([`crate::battery::execute::reach`]): `None` when none ran (no
    /// switched mutation, or the switch not proven reached).
    #[serde(default)]
    pub reach: Option<crate::battery::execute::reach::ReachInfo>,
    /// Whether the scratch target directory was removed at the start because the last
    /// build in it did not finish ([`BUILD_MARK`] was left), so every build started cold.
    #[serde(default)]
    pub cold_after_interrupted_build: bool,
    /// How many switched files held the bytes the scratch target directory's last build
    /// compiled (their modification times given back, [`built_sources`]): when every one
    /// did and nothing else changed, the switched build found its artifacts fresh.
    #[serde(default)]
    pub reused_switched_files: usize,
    /// The rebuild fallbacks whose mutated file held the bytes the fallbacks' target
    /// directory's last build compiled (the same mutation, built by an earlier run): their
    /// build found its artifacts fresh unless something else changed.
    #[serde(default)]
    pub reused_fallbacks: Vec<String>,
    /// What seeding the rebuild fallbacks' target directory took from the switched build's
    /// target directory (its dependency build products, made or seeded earlier in this run)
    /// and from the user's: the fallbacks compile no dependency a second time.
    #[serde(default)]
    pub fallback_seed: SeedStats,
    /// Dependency packages (not workspace members) that a rebuild fallback's build compiled
    /// rather than found fresh, sorted, without duplicates: empty when the seeding gave the
    /// fallbacks every dependency the switched build had compiled.
    #[serde(default)]
    pub fallback_dependencies_built: Vec<String>,
    /// The doc tests whose second baseline run (before the rebuild fallbacks, which run
    /// every listed test) ran their executables kept from the reach run, without rustdoc
    /// building them again: each has been built and run once already, against the same
    /// switched library, unmutated. The other doc tests of that run went through `cargo
    /// test --doc`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub second_baseline_kept_doc_tests: Vec<String>,
}

/// The file in the scratch target directory that says a build in it is going on (it holds
/// the harness's pid); left behind, it says that build did not finish.
pub const BUILD_MARK: &str = "harness-build-in-progress";

fn write_file(path: &Path, bytes: &[u8]) -> Result<(), Stop> {
    std::fs::write(path, bytes).map_err(|e| io_fault(path, "write", e))
}

/// file -> body index -> mutation indices: the mutations behind the switch.
type SwitchedSet = BTreeMap<PathBuf, BTreeMap<usize, Vec<usize>>>;

/// Switch mode's state (see the module docs for its order of work).
pub(crate) struct Switch {
    /// The catalog pointed at the scratch copy and its target directory.
    scratch: Catalog,
    /// The user's catalog's target directory (seeding reads its dependency builds).
    user_target: PathBuf,
    state: PathBuf,
    info: SwitchInfo,
    packages: Vec<PackageMeta>,
    /// [`crate::battery::Options::scratch_incremental`].
    incremental: bool,
    /// Per mutation index, how it runs.
    plan: BTreeMap<usize, PlanEntry>,
    switched: SwitchedSet,
    /// Mutations found UNVIABLE by the switched build or a compile check: their error.
    unviable: BTreeMap<usize, String>,
    /// Original bytes of every scratch file that has held switched code.
    originals: BTreeMap<PathBuf, Vec<u8>>,
    /// The crate roots (relative, among [`Switch::originals`]) that get `extern crate std;`
    /// appended while they hold switched code: `#![no_std]` roots of packages with
    /// switched files ([`crate::battery::execute::instrument::needs_std_linked`]).
    std_linked: BTreeSet<PathBuf>,
    /// The doc tests' lines in the switched files mapped back to the user's
    /// ([`crate::cargo::DocLines`]): the switch adds lines, and a doc test's name holds its
    /// line.
    doc_lines: std::sync::Arc<crate::cargo::DocLines>,
    /// Every test of the targets, as listed (the doc tests' filters are chosen among them).
    listed: std::sync::OnceLock<std::sync::Arc<Vec<String>>>,
    /// The doc tests the reach run kept the executables of ([`crate::doctest_keep`]): a
    /// switched mutant's run runs them without rustdoc.
    kept_docs: std::sync::Arc<BTreeMap<String, crate::doctest_keep::KeptDoc>>,
    /// The libtest tests the reach run saw cargo run, with their executables
    /// ([`crate::libtest_direct`]): a switched mutant's run runs them without `cargo test`.
    direct: std::sync::Arc<BTreeMap<String, crate::libtest_direct::Binary>>,
    /// The reaching tests' own seconds, for each reach-selected mutant's own timeout;
    /// `None` when not used.
    timing: Option<crate::battery::execute::mutant_timeout::Timing>,
    /// The switched build's test executables and the artifacts that made them.
    test_artifacts: BTreeMap<PathBuf, crate::cargo::Artifact>,
    /// Whether the scratch copy holds the original sources again (no switched code).
    restored: bool,
    /// `--all-tests`: no reach-guided selection.
    all_tests: bool,
    /// The scratch file a fallback mutation is written to, and its original bytes.
    fallback: Option<(PathBuf, Vec<u8>)>,
    /// The rebuild fallbacks' own target directory, `<target_dir>/switch/fallback-target`:
    /// built there, a fallback leaves the switched build's artifacts as they were, so the
    /// next run finds them fresh ([`built_sources`]). It is seeded with the switched
    /// build's dependency products ([`Switch::seed_fallback_target`]), so a fallback
    /// compiles only the workspace members.
    fallback_target: PathBuf,
    /// Whether [`Switch::fallback_target`] has been seeded in this run.
    fallback_seeded: bool,
    /// Every scratch file a rebuild fallback of this run has written (relative paths).
    fallback_files: BTreeSet<PathBuf>,
}

/// The progress line's tail naming the first test of `left_out` (test -> why) and how many
/// more `switch.json` names: `; WORD: T (why) and N more (switch.json)`, empty when none.
fn first_left_out(word: &str, left_out: &BTreeMap<String, String>) -> String {
    let Some((t, why)) = left_out.iter().next() else {
        return String::new();
    };
    let more = match left_out.len() {
        1 => String::new(),
        n => format!(" and {} more (switch.json)", n - 1),
    };
    format!("; {word}: {t} ({why}){more}")
}

/// Takes mutation `i` out of the switched set.
fn remove_switched(switched: &mut SwitchedSet, i: usize) {
    for fns in switched.values_mut() {
        for idxs in fns.values_mut() {
            idxs.retain(|&j| j != i);
        }
        fns.retain(|_, v| !v.is_empty());
    }
    switched.retain(|_, v| !v.is_empty());
}

/// A build of the switched scratch copy, with rustc's errors located.
struct SwitchedBuild {
    build: crate::cargo::Build,
    errors: Vec<CompilerError>,
    /// The switched files whose bytes the last build in the scratch target directory
    /// compiled ([`built_sources`]).
    same: built_sources::Restored,
}

/// The package name in a cargo package id (`registry+https://...#serde@1.0.0` → `serde`,
/// `path+file:///ws/engine#0.1.0` → `engine`).
fn package_name(id: &str) -> String {
    match id.rsplit_once('#') {
        Some((url, frag)) => match frag.split_once('@') {
            Some((name, _)) => name.to_string(),
            None => url.rsplit('/').next().unwrap_or(url).to_string(),
        },
        None => id.split_whitespace().next().unwrap_or(id).to_string(),
    }
}

fn median(mut v: Vec<f64>) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    v.sort_by(|a, b| a.total_cmp(b));
    Some(v[v.len() / 2])
}

/// What the switched build needs of the selected mutations: their files' bytes and the
/// function bodies of those files.
struct Sources<'p> {
    by_index: BTreeMap<usize, &'p PreparedMutation>,
    bodies: BTreeMap<PathBuf, Vec<FnBody>>,
}

impl Switch {
    /// Switch mode for `catalog`: its scratch copy is `<target_dir>/switch/tree`, built in
    /// `<target_dir>/switch/target` (`switch` or [`Options::scratch_name`]).
    pub fn new(catalog: &Catalog, opts: &Options) -> Switch {
        let switch_dir = catalog
            .target_dir
            .join(opts.scratch_name.as_deref().unwrap_or("switch"));
        let mut scratch = catalog.clone();
        scratch.root = switch_dir.join("tree");
        scratch.target_dir = switch_dir.join("target");
        Switch {
            fallback_target: switch_dir.join("fallback-target"),
            fallback_seeded: false,
            fallback_files: BTreeSet::new(),
            user_target: catalog.target_dir.clone(),
            state: opts.state_dir.clone(),
            info: SwitchInfo {
                schema: SWITCH_SCHEMA.into(),
                scratch: scratch.root.clone(),
                plan: Vec::new(),
                sync_seconds: 0.0,
                seed_seconds: 0.0,
                seed: SeedStats::default(),
                fresh_packages: Vec::new(),
                switched_builds: 0,
                checked_alone_because: None,
                check_seconds: 0.0,
                switched_build_seconds: 0.0,
                forced_fail_failed: Vec::new(),
                forced_fail_passed: Vec::new(),
                overhead_seconds_median: None,
                jobs: opts.jobs.max(1),
                ran_again_alone: Vec::new(),
                reach: None,
                cold_after_interrupted_build: false,
                reused_switched_files: 0,
                reused_fallbacks: Vec::new(),
                fallback_seed: SeedStats::default(),
                fallback_dependencies_built: Vec::new(),
                second_baseline_kept_doc_tests: Vec::new(),
            },
            scratch,
            packages: Vec::new(),
            incremental: opts.scratch_incremental,
            plan: BTreeMap::new(),
            switched: BTreeMap::new(),
            unviable: BTreeMap::new(),
            originals: BTreeMap::new(),
            std_linked: BTreeSet::new(),
            doc_lines: std::sync::Arc::new(crate::cargo::DocLines::new()),
            listed: std::sync::OnceLock::new(),
            kept_docs: std::sync::Arc::new(BTreeMap::new()),
            direct: std::sync::Arc::new(BTreeMap::new()),
            timing: None,
            test_artifacts: BTreeMap::new(),
            restored: true,
            all_tests: opts.all_tests,
            fallback: None,
        }
    }

    /// The reach of switched mutation `i` when the reach run found it and it can be
    /// trusted: the listed tests that execute its function.
    fn reach_of(&self, i: usize) -> Option<&Vec<String>> {
        if self.mode_of(i) != PlanMode::Switched {
            return None;
        }
        let r = self.info.reach.as_ref()?;
        if r.untrusted_because.is_some() {
            return None;
        }
        r.reached_by.get(self.id(i))
    }

    /// The per-mutant timeouts ([`crate::battery::execute::mutant_timeout`]): each test
    /// that reaches a switched mutation keeps its seconds from the reach run
    /// (`reach_seconds`), which ran it on its own, unmutated. No test runs again. Fills
    /// `info`'s `test_seconds` and `mutant_timeouts` (or `no_mutant_timeouts_because`, when
    /// a reaching test has no seconds there) and [`Switch::timing`].
    fn time_reaching_tests(
        &mut self,
        sh: &Shared<'_>,
        info: &mut crate::battery::execute::reach::ReachInfo,
        reach_seconds: &BTreeMap<String, f64>,
    ) {
        let reaching: BTreeSet<&String> = info.reached_by.values().flatten().collect();
        if reaching.is_empty() {
            return;
        }
        let mut seconds = BTreeMap::new();
        for t in reaching {
            match reach_seconds.get(t) {
                Some(&s) => {
                    seconds.insert(t.clone(), s);
                }
                None => {
                    info.no_mutant_timeouts_because = Some(format!(
                        "{t} reaches a mutation but has no seconds of its own in the reach run"
                    ));
                    return;
                }
            }
        }
        info.test_seconds = seconds.clone();
        // A kept doc test's seconds in the reach run are mostly rustdoc building it; a
        // mutant runs its kept executable (no rustdoc), so its timeout takes one unmutated
        // run of that executable when shorter ([`ReachInfo::kept_doc_seconds`]).
        for (t, s) in seconds.iter_mut() {
            let Some(k) = self.kept_docs.get(t) else {
                continue;
            };
            let budget = Some(Duration::from_secs_f64(*s));
            let env = &self.scratch.spec.env;
            match k.replay(
                env,
                budget,
                Some(&self.state),
                Some(crate::cargo::RUN_UMASK),
            ) {
                Ok(r) if r.passed && r.seconds < *s => {
                    *s = r.seconds;
                    info.kept_doc_seconds.insert(t.clone(), r.seconds);
                }
                _ => {}
            }
        }
        info.mutant_timeouts = true;
        self.timing = Some(crate::battery::execute::mutant_timeout::Timing {
            seconds,
            factor: sh.catalog.spec.timeout_factor,
            margin: sh.catalog.spec.timeout_margin_secs,
        });
    }

    fn cargo(&self, mutant: Option<&str>) -> CargoCmd {
        let mut c = self.scratch.clone();
        if let Some(id) = mutant {
            c.spec.env.insert(SWITCH_ENV.into(), id.into());
        }
        // `mutants --via-harness`: cold builds, as cargo-mutants' copies, where an
        // incremental session is written and not read again; batteries keep it for the
        // next run after an edit.
        let members: Vec<String> = if self.incremental {
            Vec::new()
        } else {
            self.packages.iter().map(|p| p.name.clone()).collect()
        };
        let mut cmd = c
            .cargo()
            .without_incremental(&members)
            .with_state_dir(&self.state)
            .with_doc_lines(self.doc_lines.clone());
        if let Some(listed) = self.listed.get() {
            cmd = cmd.with_doc_names(listed.clone());
        }
        // A kept doc test holds the switched build: only a switched mutant may run it (a
        // rebuild fallback's library is another).
        if mutant.is_some() {
            cmd = cmd
                .with_kept_doc_tests(self.kept_docs.clone())
                .with_direct_tests(self.direct.clone());
        }
        cmd
    }

    /// The `cargo` invocation of a rebuild fallback: the scratch copy built in the
    /// fallbacks' own target directory.
    fn fallback_cargo(&self) -> CargoCmd {
        let mut c = self.scratch.clone();
        c.target_dir = self.fallback_target.clone();
        c.cargo().with_state_dir(&self.state)
    }

    /// [`Switch::doc_lines`] from the switched files now in the scratch copy: the k-th doc
    /// comment fence of a switched file is the k-th of its original (the switch adds code,
    /// never doc comments), keyed by the file's path relative to the workspace root and to
    /// its package (rustdoc names it relative to the package).
    fn map_doc_lines(&mut self) {
        let root = self.scratch.root.clone();
        let mut map = crate::cargo::DocLines::new();
        for (file, original) in &self.originals {
            let Ok(now) = std::fs::read_to_string(root.join(file)) else {
                continue;
            };
            let was = crate::cargo::doc_fence_lines(&String::from_utf8_lossy(original));
            let is = crate::cargo::doc_fence_lines(&now);
            if was.len() != is.len() || was == is {
                continue;
            }
            let lines: BTreeMap<usize, usize> = is.into_iter().zip(was).collect();
            let abs = root.join(file);
            let mut keys = vec![file.to_string_lossy().replace('\\', "/")];
            if let Some(p) = owning_package(&self.packages, &abs)
                && let Ok(rel) = abs.strip_prefix(p.dir.canonicalize().unwrap_or(p.dir.clone()))
            {
                keys.push(rel.to_string_lossy().replace('\\', "/"));
            }
            for k in keys {
                map.insert(k, lines.clone());
            }
        }
        self.doc_lines = std::sync::Arc::new(map);
    }

    /// One run of the listed tests with `mutant` selected (`None`: the original code), with
    /// a private temporary directory ([`parallel::run_alone`]).
    fn run_tests(
        &self,
        sh: &Shared<'_>,
        mutant: Option<&str>,
        timeout: Duration,
    ) -> Result<TestRun, Stop> {
        parallel::run_alone(
            &self.state,
            self.cargo(mutant),
            &sh.catalog.spec.tests,
            timeout,
        )
    }

    fn id(&self, i: usize) -> &str {
        &self.scratch.spec.mutations[i].id
    }

    /// `cargo check --profile test` of the catalog's package and targets in the scratch copy:
    /// `Ok(None)` when it compiles, `Ok(Some(first error))` when not.
    fn compile_check(&self) -> Result<Option<String>, Stop> {
        let target = self.scratch.target_dir.clone();
        let (ok, stdout, stderr) = self.marked(&target, || Ok(self.cargo(None).check()?))?;
        if ok {
            return Ok(None);
        }
        let (_, first) = parse_build_messages(&stdout);
        Ok(Some(first.unwrap_or_else(|| stderr.trim().to_string())))
    }

    /// Builds the test targets of the scratch copy (`cargo test --no-run`, the arguments
    /// the test runs use; for doc tests the library they link against) and locates rustc's
    /// errors.
    fn switched_build(&self) -> Result<SwitchedBuild, Stop> {
        let target = self.scratch.target_dir.clone();
        let same = built_sources::restore_times(&target, &self.scratch.root)?;
        let (build, stdout) = self.marked(&target, || Ok(self.cargo(None).build_output()?))?;
        let errors = if build.success {
            // What cargo learned of rustc in this cold target directory, kept where the next
            // run's scratch target is seeded from ([`Switch::seed`]) when nothing is there.
            scratch::seed_rustc_info(&target, &self.user_target).map_err(|e| {
                refuse(
                    RefusalKind::HarnessFault,
                    format!("keeping the rustc information of {}: {e}", target.display()),
                )
            })?;
            Vec::new()
        } else {
            diagnostics::compiler_errors(&stdout)
        };
        Ok(SwitchedBuild {
            build,
            errors,
            same,
        })
    }

    /// The plan: which selected mutations go behind the switch, grouped per file and
    /// function, and why the others fall back to rebuilds.
    fn plan_mutations<'p>(&mut self, selected: &[&'p PreparedMutation]) -> Sources<'p> {
        let mut bodies: BTreeMap<PathBuf, Vec<FnBody>> = BTreeMap::new();
        for pm in selected {
            let m = &self.scratch.spec.mutations[pm.index];
            let text = String::from_utf8_lossy(&pm.original).into_owned();
            let fns = bodies
                .entry(pm.rel_path.clone())
                .or_insert_with(|| function_bodies(&pm.rel_path, &text).unwrap_or_default());
            let mut entry = PlanEntry {
                id: m.id.clone(),
                mode: PlanMode::Rebuild,
                function: None,
                reason: None,
            };
            match place(&text, &m.find, &m.replace, fns) {
                Placement::Outside { reason } => entry.reason = Some(reason),
                Placement::InBody { index } => {
                    let per_file = self.switched.entry(pm.rel_path.clone()).or_default();
                    let clash = per_file.keys().find(|&&j| {
                        j != index && {
                            let (a, b) = (&fns[j].body, &fns[index].body);
                            a.start < b.end && b.start < a.end
                        }
                    });
                    if let Some(&j) = clash {
                        entry.reason = Some(format!(
                            "function {} overlaps switched function {}",
                            fns[index].name, fns[j].name
                        ));
                    } else {
                        entry.mode = PlanMode::Switched;
                        entry.function = Some(fns[index].name.clone());
                        per_file.entry(index).or_default().push(pm.index);
                    }
                }
            }
            self.plan.insert(pm.index, entry);
        }
        self.switched.retain(|_, v| !v.is_empty());
        let by_index: BTreeMap<usize, &PreparedMutation> =
            selected.iter().map(|pm| (pm.index, *pm)).collect();
        for (file, fns) in &self.switched {
            let i = fns.values().flatten().next().expect("non-empty");
            self.originals
                .insert(file.clone(), by_index[i].original.clone());
        }
        self.link_std_where_missing();
        Sources { by_index, bodies }
    }

    /// Finds the `#![no_std]` crate roots of the packages that hold switched files and
    /// adds them to [`Switch::originals`] (so that they are restored) and
    /// [`Switch::std_linked`].
    fn link_std_where_missing(&mut self) {
        let sroot = self.scratch.root.clone();
        let base = sroot.canonicalize().unwrap_or_else(|_| sroot.clone());
        let owners: BTreeSet<&PathBuf> = self
            .switched
            .keys()
            .filter_map(|f| owning_package(&self.packages, &sroot.join(f)).map(|p| &p.dir))
            .collect();
        let roots: Vec<PathBuf> = self
            .packages
            .iter()
            .filter(|p| owners.contains(&p.dir))
            .flat_map(|p| p.crate_roots.iter())
            .filter_map(|r| {
                let abs = r.canonicalize().ok()?;
                abs.strip_prefix(&base).ok().map(Path::to_path_buf)
            })
            .collect();
        for rel in roots {
            let bytes = match self.originals.get(&rel) {
                Some(b) => b.clone(),
                None => match std::fs::read(sroot.join(&rel)) {
                    Ok(b) => b,
                    Err(_) => continue,
                },
            };
            if crate::battery::execute::instrument::needs_std_linked(&String::from_utf8_lossy(
                &bytes,
            )) {
                self.originals.entry(rel.clone()).or_insert(bytes);
                self.std_linked.insert(rel);
            }
        }
    }

    /// Runs `build`, a cargo build or check of the scratch copy in `target` (the scratch
    /// target directory or the fallbacks'), with the mark [`BUILD_MARK`] in `target` while
    /// it runs: the mark is removed when cargo ended on its own, and stays when the run was
    /// interrupted during the build (a signal, or the harness killed), so the next run knows
    /// that `target` may hold a half-written build. The record of what `target`'s last build
    /// compiled ([`built_sources`]) is removed first: this build replaces it.
    fn marked<T>(&self, target: &Path, build: impl FnOnce() -> Result<T, Stop>) -> Result<T, Stop> {
        let mark = target.join(BUILD_MARK);
        std::fs::create_dir_all(target)
            .and_then(|()| std::fs::write(&mark, format!("{}\n", std::process::id())))
            .map_err(|e| {
                refuse(
                    RefusalKind::HarnessFault,
                    format!("{}: cannot write: {e}", mark.display()),
                )
            })?;
        built_sources::forget(target)?;
        let res = build();
        if !matches!(res, Err(Stop::Interrupted)) {
            std::fs::remove_file(&mark).map_err(|e| {
                refuse(
                    RefusalKind::HarnessFault,
                    format!("{}: cannot remove: {e}", mark.display()),
                )
            })?;
        }
        res
    }

    /// Seeds the scratch target directory with the user's dependency build products. A
    /// scratch target directory whose last build did not finish ([`BUILD_MARK`] left) is
    /// removed first: rustc and the linker may have left its artifacts half-written
    /// (a later build then fails to link, with no fault of the tree), so the build starts cold.
    fn seed(&mut self, sh: &Shared<'_>) -> Result<(), Stop> {
        let target = self.scratch.target_dir.clone();
        let user = self.user_target.clone();
        self.info.seed = self.seed_target(sh, &target, "the scratch target directory", &[&user])?;
        Ok(())
    }

    /// Seeds the rebuild fallbacks' target directory: first with the dependency build
    /// products of the switched build's target directory (what this run's switched build
    /// compiled or was seeded with: the same tree, lock, profile and features, so cargo finds
    /// them fresh), then with the user's (see [`Switch::seed_target`]). Without the first, a
    /// fallback in a clean checkout (the user's target directory empty) compiled the whole
    /// dependency tree a second time, cold. The workspace members are never taken from
    /// either: the switched build's hold switched code, and a fallback builds its own.
    fn seed_fallback_target(&mut self, sh: &Shared<'_>) -> Result<(), Stop> {
        let target = self.fallback_target.clone();
        let switched = self.scratch.target_dir.clone();
        let user = self.user_target.clone();
        self.info.fallback_seed = self.seed_target(
            sh,
            &target,
            "the rebuild fallbacks' target directory",
            &[&switched, &user],
        )?;
        Ok(())
    }

    /// Adds to [`SwitchInfo::fallback_dependencies_built`] the packages that are not
    /// workspace members among the artifacts `build` (a rebuild fallback's) did not find
    /// fresh.
    fn note_dependencies_built(&mut self, build: &Build) {
        let members: BTreeSet<&str> = self.packages.iter().map(|p| p.id.as_str()).collect();
        let mut built: BTreeSet<String> = self
            .info
            .fallback_dependencies_built
            .iter()
            .cloned()
            .collect();
        built.extend(
            build
                .artifacts
                .iter()
                .filter(|a| !a.fresh && !members.contains(a.package_id.as_str()))
                .map(|a| package_name(&a.package_id)),
        );
        self.info.fallback_dependencies_built = built.into_iter().collect();
    }

    /// Seeds `target` (the scratch target directory or the fallbacks') with the dependency
    /// build products of the target directories `from`, in order (an entry one of them gave
    /// is not taken again from a later one), after removing `target` when its last build did
    /// not finish (see [`Switch::seed`]). `what` names it in the progress line. Adds the time
    /// taken to `seed_seconds`.
    fn seed_target(
        &mut self,
        sh: &Shared<'_>,
        target: &Path,
        what: &str,
        from: &[&Path],
    ) -> Result<SeedStats, Stop> {
        let mark = target.join(BUILD_MARK);
        if mark.exists() {
            sh.progress.line(&format!(
                "the last build of the scratch copy did not finish (the run was stopped during it): removing {} and building cold",
                target.display()
            ));
            std::fs::remove_dir_all(target).map_err(|e| {
                refuse(
                    RefusalKind::HarnessFault,
                    format!("{}: cannot remove: {e}", target.display()),
                )
            })?;
            self.info.cold_after_interrupted_build = true;
        }
        sh.progress.phase(&format!("seeding {what}"));
        let t = Instant::now();
        let members = scratch::Members::of(&self.packages);
        let mut stats = SeedStats::default();
        for source in from {
            let (src, to) = (source.join("debug"), target.join("debug"));
            let seeding = |e| {
                refuse(
                    RefusalKind::HarnessFault,
                    format!("seeding {} from {}: {e}", to.display(), src.display()),
                )
            };
            let s = scratch::seed_dependencies(&src, &to, &members).map_err(seeding)?;
            stats.linked += s.linked;
            stats.copied += s.copied;
            stats.members_skipped += s.members_skipped;
            if scratch::seed_rustc_info(source, target).map_err(seeding)? {
                stats.copied += 1;
            }
        }
        self.info.seed_seconds += t.elapsed().as_secs_f64();
        Ok(stats)
    }

    /// Records mutation `i` as UNVIABLE with compiler error `err`, found `how`, and takes
    /// it out of the switched set.
    fn mark_unviable(&mut self, sh: &Shared<'_>, i: usize, how: &str, err: String) {
        sh.progress.line(&format!(
            "{}: UNVIABLE ({how}): {}",
            self.id(i),
            failure_summary(&err)
        ));
        if let Some(e) = self.plan.get_mut(&i) {
            e.mode = PlanMode::Unviable;
            e.reason = Some(how.to_string());
        }
        self.unviable.insert(i, err);
        remove_switched(&mut self.switched, i);
    }

    /// Compile-checks every switched mutation on its own in the (restored) scratch copy;
    /// those that do not compile are UNVIABLE and leave the switched set.
    fn check_alone(&mut self, sh: &Shared<'_>, src: &Sources<'_>) -> Result<(), Stop> {
        let t = Instant::now();
        self.restore_scratch()?;
        let ids: Vec<(PathBuf, usize)> = self
            .switched
            .iter()
            .flat_map(|(f, fns)| fns.values().flatten().map(move |&i| (f.clone(), i)))
            .collect();
        for (file, i) in ids {
            if crate::system::interrupt::requested() {
                return Err(Stop::Interrupted);
            }
            sh.progress.phase(&format!("{}: compile check", self.id(i)));
            let dst = self.scratch.root.join(&file);
            write_file(&dst, &src.by_index[&i].mutated)?;
            let res = self.compile_check();
            write_file(&dst, &src.by_index[&i].original)?;
            if let Some(err) = res? {
                self.mark_unviable(sh, i, "does not compile on its own", err);
            }
        }
        self.info.check_seconds += t.elapsed().as_secs_f64();
        Ok(())
    }

    /// The switched build, repeated until it succeeds: errors inside a mutated body make
    /// that mutation UNVIABLE and the build is repeated without it; an error outside every
    /// mutated body sends the remaining switched mutations through compile checks on their
    /// own, once. A build with no switched mutation left that still fails is the unmutated
    /// tree's (BASELINE-RED, returned as a failed build); one that fails outside every
    /// mutated body after the compile checks is a HARNESS-FAULT. Returns the last build and
    /// the switched files it found as the scratch target directory's last build compiled
    /// them ([`built_sources`]).
    fn build_until_green(
        &mut self,
        sh: &Shared<'_>,
        src: &Sources<'_>,
        mut checked_alone: bool,
    ) -> Result<(Build, built_sources::Restored), Stop> {
        let sroot = self.scratch.root.clone();
        loop {
            let layouts = self.write_switched(&src.bodies, &src.by_index)?;
            self.restored = self.switched.is_empty();
            self.info.switched_builds += 1;
            let n: usize = self
                .switched
                .values()
                .flat_map(|f| f.values())
                .map(Vec::len)
                .sum();
            sh.progress
                .phase(&format!("switched build ({n} switched mutations)"));
            let SwitchedBuild {
                build,
                errors,
                same,
            } = self.switched_build()?;
            if build.success || self.switched.is_empty() {
                return Ok((build, same));
            }
            self.info.check_seconds += build.seconds;
            if self.retreat_opaque(sh, &src.bodies, &errors, &sroot, &layouts) {
                continue;
            }
            let (blamed, stray) = blame(&errors, &sroot, &layouts);
            if !blamed.is_empty() {
                self.unviable_in_switched_build(sh, blamed);
                continue;
            }
            let first = stray
                .first()
                .map(|e| e.rendered.clone())
                .or(build.first_error.clone())
                .unwrap_or_default();
            if checked_alone {
                self.restore_scratch()?;
                return Err(refuse(
                    RefusalKind::HarnessFault,
                    format!("the switched scratch copy does not build: {first}"),
                ));
            }
            sh.progress.line(&format!(
                "the switched build fails outside every mutated body ({}): checking each switched mutation on its own",
                failure_summary(&first)
            ));
            self.check_alone(sh, src)?;
            checked_alone = true;
        }
    }

    /// After a failed switched build: takes the mutations of switched functions that return
    /// `impl Trait` back to rebuild fallbacks (their mutated bodies may have types of their
    /// own, which the switch's `match` cannot join, and which no error site tells apart from
    /// a mutant that does not compile), so that the next switched build's errors are those
    /// of the other mutations; each one taken back gets the verdict a rebuild gives it. The
    /// functions whose switch holds an error are taken back; when no error lies in any
    /// switch, every such function is (its type may fail elsewhere). Returns whether any
    /// mutation was taken back.
    fn retreat_opaque(
        &mut self,
        sh: &Shared<'_>,
        bodies: &BTreeMap<PathBuf, Vec<FnBody>>,
        errors: &[CompilerError],
        root: &Path,
        layouts: &BTreeMap<PathBuf, Layout>,
    ) -> bool {
        // (file, body index) of every switched function returning `impl Trait`.
        let opaque: Vec<(PathBuf, usize)> = self
            .switched
            .iter()
            .flat_map(|(file, fns)| {
                fns.keys()
                    .filter(|&&bi| bodies[file][bi].opaque_return)
                    .map(move |&bi| (file.clone(), bi))
            })
            .collect();
        if opaque.is_empty() {
            return false;
        }
        // The switched functions whose switch holds an error site.
        let mut holding: BTreeSet<(PathBuf, usize)> = BTreeSet::new();
        for site in errors.iter().flat_map(|e| &e.sites) {
            let Some((rel, layout)) =
                site_path(&site.file, root).and_then(|r| layouts.get_key_value(r))
            else {
                continue;
            };
            for (body, region) in &layout.regions {
                if region.start <= site.bytes.start
                    && site.bytes.end <= region.end
                    && let Some(bi) = bodies[rel].iter().position(|b| b.body.start == body.start)
                {
                    holding.insert((rel.clone(), bi));
                }
            }
        }
        let implicated: Vec<&(PathBuf, usize)> =
            opaque.iter().filter(|k| holding.contains(*k)).collect();
        let taken: Vec<&(PathBuf, usize)> = if implicated.is_empty() && holding.is_empty() {
            opaque.iter().collect()
        } else {
            implicated
        };
        let opaque: Vec<(usize, String)> = taken
            .into_iter()
            .flat_map(|(file, bi)| {
                self.switched[file][bi]
                    .iter()
                    .map(|&i| (i, bodies[file][*bi].name.clone()))
            })
            .collect();
        if opaque.is_empty() {
            return false;
        }
        sh.progress.line(&format!(
            "the switched build fails: {} mutation(s) of functions returning `impl Trait` go back to rebuilds, and the switched build is repeated without them",
            opaque.len()
        ));
        for (i, name) in opaque {
            if let Some(e) = self.plan.get_mut(&i) {
                e.mode = PlanMode::Rebuild;
                e.reason = Some(format!(
                    "function {name} returns `impl Trait` and the switched build failed (a mutated body may have a type of its own)"
                ));
            }
            remove_switched(&mut self.switched, i);
        }
        true
    }

    /// Marks the mutations the switched build blamed UNVIABLE, each with the errors rustc gave
    /// inside its mutated body, moved to where the mutated file has them
    /// ([`crate::battery::execute::instrument::blame`]). No mutation is compiled again on its
    /// own: that cannot change the verdict (the error lies in its own body), and on a crate
    /// whose mutants mostly do not compile it was most of the battery's time (61 `cargo
    /// check`s, 17.8 s, on `either` 1.13.0).
    fn unviable_in_switched_build(
        &mut self,
        sh: &Shared<'_>,
        blamed: BTreeMap<usize, Vec<String>>,
    ) {
        let how = "rustc reports an error inside its mutated body in the switched build";
        for (i, errs) in blamed {
            let err = errs.join("\n").trim_end().to_string();
            self.mark_unviable(sh, i, how, err);
        }
    }

    /// Writes every file of [`Switch::originals`] into the scratch copy: the switched source
    /// for the files that still hold switched mutations, the original for the others.
    /// Returns where the mutated bodies sit.
    fn write_switched(
        &self,
        bodies: &BTreeMap<PathBuf, Vec<FnBody>>,
        by_index: &BTreeMap<usize, &PreparedMutation>,
    ) -> Result<BTreeMap<PathBuf, Layout>, Stop> {
        let mut layouts = BTreeMap::new();
        for (file, original) in &self.originals {
            let dst = self.scratch.root.join(file);
            let tail = if self.std_linked.contains(file) {
                crate::battery::execute::instrument::STD_FOR_NO_STD
            } else {
                ""
            };
            let Some(fns) = self.switched.get(file) else {
                let mut text = original.clone();
                text.extend_from_slice(tail.as_bytes());
                write_file(&dst, &text)?;
                continue;
            };
            let text = String::from_utf8_lossy(original).into_owned();
            let fb = &bodies[file];
            let list: Vec<SwitchedFn> = fns
                .iter()
                .map(|(&bi, idxs)| {
                    let b = &fb[bi];
                    SwitchedFn {
                        name: b.name.clone(),
                        body: b.body.clone(),
                        mutants: idxs
                            .iter()
                            .map(|&i| {
                                (self.id(i).to_string(), mutated_body(&text, by_index[&i], b))
                            })
                            .collect(),
                        module_depth: b.module_depth,
                    }
                })
                .collect();
            let tag = support_tag(file);
            let sw = switched_file(&text, &list, &tag);
            write_file(
                &dst,
                format!("{}{}{tail}", sw.text, support_items(&tag)).as_bytes(),
            )?;
            let index_of: BTreeMap<&str, usize> =
                fns.values().flatten().map(|&i| (self.id(i), i)).collect();
            let arms = sw
                .arms
                .iter()
                .map(|(id, range, at)| {
                    let i = index_of[id.as_str()];
                    let mutated = String::from_utf8_lossy(&by_index[&i].mutated).into_owned();
                    (i, range.clone(), *at, mutated)
                })
                .collect();
            layouts.insert(
                file.clone(),
                Layout {
                    text: sw.text,
                    arms,
                    regions: sw.regions,
                },
            );
        }
        Ok(layouts)
    }

    /// Writes the original bytes back over every file of the scratch copy that has held
    /// switched code.
    fn restore_scratch(&mut self) -> Result<(), Stop> {
        for (file, original) in &self.originals {
            write_file(&self.scratch.root.join(file), original)?;
        }
        self.restored = true;
        Ok(())
    }

    /// Sends every switched mutation to a rebuild of its own, `why`, and puts the original
    /// sources back into the scratch copy.
    fn unswitch_all(&mut self, why: &str) -> Result<(), Stop> {
        for fns in std::mem::take(&mut self.switched).into_values() {
            for i in fns.into_values().flatten() {
                if let Some(e) = self.plan.get_mut(&i) {
                    e.mode = PlanMode::Rebuild;
                    e.reason = Some(why.to_string());
                }
            }
        }
        self.info.plan = self.plan.values().cloned().collect();
        self.restore_scratch()
    }

    fn mode_of(&self, i: usize) -> PlanMode {
        self.plan.get(&i).map_or(PlanMode::Rebuild, |e| e.mode)
    }

    /// The forced-fail control and the reach run ([`ModeRun::after_controls`]).
    fn forced_fail_and_reach(&mut self, sh: &Shared<'_>, timeout: Duration) -> Result<(), Stop> {
        if self.switched.is_empty() {
            return Ok(());
        }
        sh.progress.phase("forced-fail control");
        // Each test executable the forced-fail control starts records how cargo started it,
        // so that the reach run can start each test from it ([`reach::start_directly`]).
        let record_dir = self.scratch.target_dir.join("harness-records");
        fresh_dir(&record_dir)?;
        let ff = parallel::run_alone(
            &self.state,
            self.cargo(Some(FORCED_FAIL))
                .with_env(REACH_ENV, &record_dir.join("reach").to_string_lossy())
                .with_env(RECORD_ENV, &record_dir.to_string_lossy()),
            &sh.catalog.spec.tests,
            timeout,
        )?;
        let recs = crate::libtest_direct::records(&record_dir).ok();
        let direct = reach::start_directly(
            &crate::libtest_direct::records_and_spawners(&record_dir).unwrap_or_default(),
            &sh.catalog.spec.tests,
            &[REACH_ENV, KEEP_ENV, RECORD_ENV, SWITCH_ENV],
            |p| self.test_artifacts.contains_key(p),
            timeout,
            &self.state,
        );
        for (t, o) in &ff.outcomes {
            if verdict::is_kill(*o) || *o == Outcome::NoResult {
                self.info.forced_fail_failed.push(t.clone());
            } else {
                self.info.forced_fail_passed.push(t.clone());
            }
        }
        let unreached = {
            let cmd = self.cargo(None);
            reach::unreached_doc_tests(
                recs.as_deref(),
                &sh.catalog.spec.tests,
                &self.info.forced_fail_failed,
                |p| self.test_artifacts.contains_key(p),
                |t| reach::doc_fence(&cmd, t),
            )
        };
        let _ = std::fs::remove_dir_all(&record_dir);
        if self.info.forced_fail_failed.is_empty() {
            sh.progress.line(
                "the forced-fail control failed no listed test: the switch is not proven reached, so every switched mutation is rebuilt on its own",
            );
            self.unswitch_all(UNPROVEN)?;
            return Ok(());
        }
        let switched: Vec<String> = self
            .plan
            .iter()
            .filter(|(_, e)| e.mode == PlanMode::Switched)
            .map(|(_, e)| e.id.clone())
            .collect();
        if switched.is_empty() {
            return Ok(());
        }
        sh.progress.phase(
            "reach run: every listed test on its own, recording the switched functions it runs",
        );
        let cmd = self.cargo(None);
        let dir = self.scratch.target_dir.join("harness-reach");
        let keep_dir = self.scratch.target_dir.join("harness-kept");
        let reach = reach::run(&reach::Request {
            state: &self.state,
            cmd: &cmd,
            tests: &sh.catalog.spec.tests,
            switched: &switched,
            forced_fail_failed: &self.info.forced_fail_failed,
            jobs: self.info.jobs,
            timeout,
            dir: &dir,
            keep_dir: &keep_dir,
            direct: &direct,
            unreached: &unreached,
        })?;
        let mut info = reach.info;
        info.selection &= !self.all_tests;
        if info.selection {
            self.kept_docs = std::sync::Arc::new(reach.kept);
            let mut direct = reach.direct;
            direct.retain(|t, b| match self.test_artifacts.get(&b.program) {
                Some(a) => {
                    b.described = a.test_description(&b.cwd);
                    true
                }
                None => {
                    info.tests_not_direct.insert(
                        t.clone(),
                        format!(
                            "its executable {} is not among the switched build's",
                            b.program.display()
                        ),
                    );
                    false
                }
            });
            info.direct_tests = direct.len();
            self.direct = std::sync::Arc::new(direct);
            self.time_reaching_tests(sh, &mut info, &reach.seconds);
        } else {
            info.kept_doc_tests.clear();
            info.doc_tests_not_kept.clear();
            info.direct_tests = 0;
            info.tests_not_direct.clear();
        }
        match &info.untrusted_because {
            Some(why) => sh.progress.line(&format!(
                "reach run: not used, every mutant runs every listed test: {why}"
            )),
            None => {
                let uncovered = info.reached_by.values().filter(|v| v.is_empty()).count();
                sh.progress.line(&format!(
                    "reach run: {} tests on their own ({} started from their executables, without cargo test; {} doc tests the forced-fail control showed to reach nothing left out) in {:.1} s; {} of {} switched mutations reached by no listed test{}",
                    info.tests_run,
                    info.started_directly,
                    info.doc_tests_unreached,
                    info.seconds,
                    uncovered,
                    switched.len(),
                    if info.selection {
                        "; each mutant runs the tests that reach it"
                    } else {
                        " (--all-tests: each mutant runs every listed test)"
                    }
                ));
                let (direct, not) = (info.direct_tests, info.tests_not_direct.len());
                if direct + not > 0 {
                    sh.progress.line(&format!(
                        "libtest tests: {direct} of {} that reach a mutation run from their executables, without cargo test{}",
                        direct + not,
                        first_left_out("not", &info.tests_not_direct)
                    ));
                }
                if info.mutant_timeouts {
                    let spec = &sh.catalog.spec;
                    sh.progress.line(&format!(
                        "per-mutant timeouts: each mutant's tests time out at min({:.1} s, {} x their seconds in the reach run + {} s)",
                        timeout.as_secs_f64(),
                        spec.timeout_factor,
                        spec.timeout_margin_secs
                    ));
                } else if let Some(why) = &info.no_mutant_timeouts_because {
                    sh.progress.line(&format!(
                        "per-mutant timeouts: every mutant keeps the test timeout of {:.1} s: {why}",
                        timeout.as_secs_f64()
                    ));
                }
                let (kept, not) = (info.kept_doc_tests.len(), info.doc_tests_not_kept.len());
                if kept + not > 0 {
                    sh.progress.line(&format!(
                        "doc tests: {kept} of {} that reach a mutation kept from the reach run, run without rustdoc{}",
                        kept + not,
                        first_left_out("not kept", &info.doc_tests_not_kept)
                    ));
                }
            }
        }
        self.info.reach = Some(info);
        Ok(())
    }

    /// The doc tests [`ModeRun::second_control_run`] leaves out: every listed doc test, when
    /// the mutants may run reach-selected (switch mode with switched mutations and without
    /// `--all-tests`); none otherwise.
    fn deferred_doc_tests(&self, sh: &Shared<'_>) -> Vec<String> {
        if self.all_tests || self.switched.is_empty() {
            return Vec::new();
        }
        sh.catalog
            .spec
            .tests
            .iter()
            .filter(|t| crate::libtest::is_doc_test(t))
            .cloned()
            .collect()
    }

    /// The second baseline of the doc tests `deferred` that the second control run left
    /// out, run when a mutant may run them without the reach run having run them alone
    /// (no reach is used, or a rebuild fallback runs every listed test): each must pass, as
    /// it did in the first (FLAKY otherwise).
    fn second_baseline_of_doc_tests(
        &mut self,
        sh: &Shared<'_>,
        deferred: &[String],
        timeout: Duration,
    ) -> Result<(), Stop> {
        // A doc test kept from the reach run was built by rustdoc there and ran on its own,
        // unmutated: its second run is its kept executable's (as a switched mutant runs
        // it), not rustdoc building it once more (most of such a run's time).
        let (kept, built): (Vec<String>, Vec<String>) = deferred
            .iter()
            .cloned()
            .partition(|t| self.kept_docs.contains_key(t));
        sh.progress.phase(&format!(
            "baseline run 2/2 of the {} doc tests it left out (mutants may run them without their reach run; {} from the executables kept in the reach run, without rustdoc)",
            deferred.len(),
            kept.len()
        ));
        let mut run = if built.is_empty() {
            crate::cargo::TestRun::empty()
        } else {
            parallel::run_alone(&self.state, self.cargo(None), &built, timeout)?
        };
        let env = &self.scratch.spec.env;
        for t in &kept {
            let k = &self.kept_docs[t];
            let r = k
                .replay(
                    env,
                    Some(timeout),
                    Some(&self.state),
                    Some(crate::cargo::RUN_UMASK),
                )
                .map_err(crate::cargo::CargoError::from)?;
            let o = if r.passed {
                Outcome::Passed
            } else if r.timed_out {
                Outcome::Unfinished
            } else {
                Outcome::Failed
            };
            run.outcomes.insert(t.clone(), o);
        }
        self.info.second_baseline_kept_doc_tests = kept;
        let differing: Vec<String> = deferred
            .iter()
            .filter(|t| run.outcomes.get(*t) != Some(&Outcome::Passed))
            .map(|t| {
                format!(
                    "{t} (passed then {})",
                    crate::battery::outcome_word(run.outcomes.get(t))
                )
            })
            .collect();
        if differing.is_empty() {
            return Ok(());
        }
        self.restore_scratch()?;
        Err(refuse(
            RefusalKind::Flaky,
            format!("the two baseline runs disagree: {}", differing.join(", ")),
        ))
    }
}

impl ModeRun for Switch {
    fn open(&mut self, sh: &Shared<'_>, start: &TreeScan) -> Result<(), Stop> {
        sh.progress.phase("syncing the scratch copy");
        let t = Instant::now();
        crate::battery::tree::mark_cache_dir(&self.user_target)?;
        sync_tree(&sh.catalog.root, start, &self.scratch.root)?;
        self.info.sync_seconds = t.elapsed().as_secs_f64();
        Ok(())
    }

    fn metadata(&mut self) -> Result<Vec<PackageMeta>, Stop> {
        Ok(self.cargo(None).metadata()?)
    }

    fn build_baseline(
        &mut self,
        sh: &Shared<'_>,
        packages: Vec<PackageMeta>,
        selected: &[&PreparedMutation],
    ) -> Result<Build, Stop> {
        self.packages = packages;
        let src = self.plan_mutations(selected);
        self.seed(sh)?;
        // Where a denied usage lint may be in force, a mutation can compile behind the
        // switch and not on its own (see `crate::battery::select::lints`): check each on its own first.
        let sroot = self.scratch.root.clone();
        let owners: BTreeSet<PathBuf> = self
            .switched
            .keys()
            .map(|f| {
                owning_package(&self.packages, &sroot.join(f))
                    .map_or_else(|| sroot.clone(), |o| o.dir.clone())
            })
            .collect();
        let strict = owners.iter().find_map(|dir| {
            crate::battery::select::lints::strict_usage_lints(&sroot, dir, &self.scratch.spec.env)
        });
        if let Some(why) = &strict {
            sh.progress.line(&format!(
                "a lint level that makes unused code an error may be in force ({why}): checking each switched mutation on its own"
            ));
            self.info.checked_alone_because = Some(why.clone());
            self.check_alone(sh, &src)?;
        }
        let (build, same) = self.build_until_green(sh, &src, strict.is_some())?;
        self.map_doc_lines();
        self.info.switched_build_seconds = build.seconds;
        self.info.plan = self.plan.values().cloned().collect();
        let fresh: BTreeSet<String> = build
            .artifacts
            .iter()
            .filter(|a| a.fresh)
            .map(|a| package_name(&a.package_id))
            .collect();
        self.info.fresh_packages = fresh.into_iter().collect();
        self.test_artifacts = build
            .artifacts
            .iter()
            .filter_map(|a| a.executable.clone().map(|e| (e, a.clone())))
            .collect();
        // Every switched file must be compiled into a target the tests run, as rebuild mode
        // checks for each mutation (`check_rebuilt`); a file the catalog's features leave
        // out is the run's to judge NOT_COMPILED (`run::not_compiled`), not a stale build.
        for (file, fns) in &self.switched {
            if !build.success {
                break;
            }
            let abs = sroot.join(file);
            if not_compiled(&build, &self.packages, &sroot, &abs, &self.scratch.spec).is_some() {
                continue;
            }
            // Cargo may report a switched file's artifacts fresh only when the last build in
            // the scratch target directory compiled its very bytes, and passed this check.
            if same.proves(file) {
                continue;
            }
            if let Some(why) = stale_detail(&build, &self.packages, &sroot, &sroot.join(file)) {
                let ids: Vec<&str> = fns.values().flatten().map(|&i| self.id(i)).collect();
                return Err(refuse(
                    RefusalKind::StaleBuild,
                    format!("mutation {}: {why}", ids.join(", ")),
                ));
            }
        }
        if build.success {
            built_sources::record(
                &self.scratch.target_dir,
                &sroot,
                self.originals.keys().map(PathBuf::as_path),
            )?;
        }
        self.info.reused_switched_files = same.len();
        Ok(build)
    }

    fn list_tests(&self) -> Result<Vec<String>, Stop> {
        // The switched build's own test executables list their tests, without a cargo start.
        let artifacts: Vec<crate::cargo::Artifact> =
            self.test_artifacts.values().cloned().collect();
        let listed = self.cargo(None).list_built(&artifacts)?;
        let _ = self.listed.set(std::sync::Arc::new(listed.clone()));
        Ok(listed)
    }

    fn snapshot(&self, _: &Shared<'_>) -> Result<TreeScan, Stop> {
        let root = &self.scratch.root;
        Ok(list_tree(root)?)
    }

    fn root(&self) -> &Path {
        &self.scratch.root
    }

    fn control_run(&self, sh: &Shared<'_>, timeout: Duration) -> Result<TestRun, Stop> {
        self.run_tests(sh, None, timeout)
    }

    /// The listed tests less the doc tests ([`Switch::deferred_doc_tests`]): each doc test a
    /// reach-selected mutant runs has already run on its own, unmutated, in the reach run
    /// (rustdoc builds every doc test again per run, most of such a run's time), and the
    /// others run in a second baseline of their own when a mutant may run them
    /// ([`Switch::second_baseline_of_doc_tests`]).
    fn second_control_run(&self, sh: &Shared<'_>, timeout: Duration) -> Result<TestRun, Stop> {
        let deferred = self.deferred_doc_tests(sh);
        if deferred.is_empty() {
            return self.control_run(sh, timeout);
        }
        let tests: Vec<String> = sh
            .catalog
            .spec
            .tests
            .iter()
            .filter(|t| !deferred.contains(t))
            .cloned()
            .collect();
        parallel::run_alone(&self.state, self.cargo(None), &tests, timeout)
    }

    /// The forced-fail control: with every switched function panicking, at least one
    /// listed test must fail, which proves that the tests run the switched build and that
    /// the switch reaches them. When none fails, no switched verdict could be trusted: a
    /// mutant that survives might only never have been selected. Every switched mutation
    /// then falls back to a rebuild of its own in the scratch copy ([`UNPROVEN`]), which
    /// gives rebuild mode's verdict whatever the reason (most often: no listed test calls
    /// a switched function, and each such mutation SURVIVES). Then the reach run, and the
    /// second baseline of the doc tests the second control run left out when a mutant may
    /// run them without the reach run having run them alone.
    fn after_controls(&mut self, sh: &Shared<'_>, timeout: Duration) -> Result<(), Stop> {
        // The tests as run: the catalog's may have been taken from the listing
        // (`tests_from_listing`) after this copy was made.
        self.scratch.spec.tests.clone_from(&sh.catalog.spec.tests);
        let deferred = self.deferred_doc_tests(sh);
        self.forced_fail_and_reach(sh, timeout)?;
        let selected = self.info.reach.as_ref().is_some_and(|r| r.selection);
        let rebuilds = self.plan.values().any(|e| e.mode == PlanMode::Rebuild);
        if !deferred.is_empty() && (!selected || rebuilds) {
            self.second_baseline_of_doc_tests(sh, &deferred, timeout)?;
        }
        Ok(())
    }

    /// The switched (and UNVIABLE) mutations first, in catalog order, then the rebuild
    /// fallbacks: the switched build serves the former, each of the latter replaces it.
    fn order(&self, selected: &[&PreparedMutation]) -> Vec<usize> {
        let (first, then): (Vec<usize>, Vec<usize>) = (0..selected.len())
            .partition(|&k| self.mode_of(selected[k].index) != PlanMode::Rebuild);
        first.into_iter().chain(then).collect()
    }

    fn build_mutant(&mut self, sh: &Shared<'_>, mu: &Mutant<'_>) -> Result<Built, Stop> {
        let i = mu.pm.index;
        match self.mode_of(i) {
            PlanMode::Unviable => {
                return Ok(Built::Unviable {
                    error: self.unviable.get(&i).cloned().unwrap_or_default(),
                    seconds: 0.0,
                });
            }
            PlanMode::Switched => {
                let uncovered = self.reach_of(i).is_some_and(Vec::is_empty);
                return Ok(if uncovered && !self.all_tests {
                    Built::NoCoverage
                } else {
                    Built::Switched
                });
            }
            PlanMode::Rebuild => {}
        }
        if !self.restored {
            self.restore_scratch()?;
        }
        let reason = self.plan.get(&i).and_then(|e| e.reason.clone());
        sh.progress.line(&format!(
            "{}: rebuild mode ({})",
            mu.tag,
            reason.unwrap_or_default()
        ));
        if !self.fallback_seeded {
            self.seed_fallback_target(sh)?;
            self.fallback_seeded = true;
        }
        sh.progress
            .phase(&format!("{}: building (rebuild fallback)", mu.tag));
        let dst = self.scratch.root.join(&mu.pm.rel_path);
        self.fallback = Some((dst.clone(), mu.pm.original.clone()));
        write_file(&dst, &mu.pm.mutated)?;
        self.fallback_files.insert(mu.pm.rel_path.clone());
        let target = self.fallback_target.clone();
        let same = built_sources::restore_times(&target, &self.scratch.root)?;
        let build = self.marked(&target, || Ok(self.fallback_cargo().build()?))?;
        self.note_dependencies_built(&build);
        // The mutated file's artifacts may be fresh only when the last fallback build
        // compiled these very bytes (the same mutation, in an earlier run) and passed
        // this check then.
        let built = if same.proves(&mu.pm.rel_path) {
            self.info.reused_fallbacks.push(mu.m.id.clone());
            built_of(build)
        } else {
            rebuilt(build, &self.packages, &self.scratch.root, &dst, mu)?
        };
        if matches!(built, Built::Rebuilt { .. }) {
            let files: BTreeSet<&Path> = self
                .originals
                .keys()
                .chain(&self.fallback_files)
                .map(PathBuf::as_path)
                .collect();
            built_sources::record(&target, &self.scratch.root, files)?;
        }
        Ok(built)
    }

    fn test_mutant(
        &mut self,
        sh: &Shared<'_>,
        mu: &Mutant<'_>,
        timeout: Duration,
    ) -> Result<TestRun, Stop> {
        let switched = self.mode_of(mu.pm.index) == PlanMode::Switched;
        let (how, mutant) = if switched {
            ("switched", Some(mu.m.id.as_str()))
        } else {
            ("rebuild fallback", None)
        };
        sh.progress.phase(&format!("{}: testing ({how})", mu.tag));
        if !switched {
            return parallel::run_alone(
                &self.state,
                self.fallback_cargo(),
                &sh.catalog.spec.tests,
                timeout,
            );
        }
        match self.tests_for(mu.pm) {
            Some(tests) => parallel::run_alone(&self.state, self.cargo(mutant), &tests, timeout),
            None => self.run_tests(sh, mutant, timeout),
        }
    }

    fn restore_mutant(&mut self, _: &Shared<'_>, _: &Mutant<'_>) -> Result<(), Stop> {
        match self.fallback.take() {
            Some((dst, original)) => write_file(&dst, &original),
            None => Ok(()),
        }
    }

    fn concurrent(&self, pm: &PreparedMutation) -> bool {
        self.mode_of(pm.index) != PlanMode::Rebuild
    }

    fn reached_by(&self, pm: &PreparedMutation) -> Option<Vec<String>> {
        self.reach_of(pm.index).cloned()
    }

    fn mutant_timeout(&self, pm: &PreparedMutation, timeout: Duration) -> Duration {
        match (&self.timing, self.mode_of(pm.index)) {
            (Some(timing), PlanMode::Switched) => match self.tests_for(pm) {
                Some(tests) => timing.timeout(&tests, timeout),
                None => timeout,
            },
            _ => timeout,
        }
    }

    fn timeout_rule(
        &self,
        pm: &PreparedMutation,
        timeout: Duration,
    ) -> Option<crate::battery::report::schema::TimeoutRule> {
        match (&self.timing, self.mode_of(pm.index)) {
            (Some(timing), PlanMode::Switched) => timing.rule(&self.tests_for(pm)?, timeout),
            _ => None,
        }
    }

    fn tests_for(&self, pm: &PreparedMutation) -> Option<Vec<String>> {
        if self.all_tests {
            return None;
        }
        self.reach_of(pm.index)
            .filter(|r| !r.is_empty() && r.len() < self.scratch.spec.tests.len())
            .cloned()
    }

    fn concurrent_tests(&self, pm: &PreparedMutation) -> Option<CargoCmd> {
        (self.mode_of(pm.index) == PlanMode::Switched).then(|| self.cargo(Some(self.id(pm.index))))
    }

    fn concurrency(&mut self, jobs: usize, ran_again_alone: &[String]) {
        self.info.jobs = jobs.max(1);
        self.info.ran_again_alone = ran_again_alone.to_vec();
    }

    fn finish(&mut self) -> Result<(), Stop> {
        self.restore_scratch()
    }

    fn write_reports(
        &mut self,
        dir: &Path,
        overheads: &[f64],
    ) -> Result<Vec<PathBuf>, BatteryError> {
        self.info.overhead_seconds_median = median(overheads.to_vec());
        let sw = dir.join("switch.json");
        std::fs::write(
            &sw,
            serde_json::to_string_pretty(&self.info).expect("switch info serializes") + "\n",
        )
        .map_err(|source| BatteryError::Reports {
            path: sw.clone(),
            source,
        })?;
        Ok(vec![sw])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn package_names_from_ids() {
        assert_eq!(
            package_name("registry+https://github.com/rust-lang/crates.io-index#serde@1.0.228"),
            "serde"
        );
        assert_eq!(package_name("path+file:///ws/engine#0.1.0"), "engine");
        assert_eq!(package_name("path+file:///ws/x#my-dep@0.2.0"), "my-dep");
    }
}
