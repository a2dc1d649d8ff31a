//! The battery's JSON report (`battery.json`), schema `harness-battery/1`.
//!
//! Documented field by field on [`BatteryReport`] and in `docs/battery-report.md`.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::battery::report::verdict::{Expectation, KillMatrix, Verdict};
use crate::battery::select::catalog::Role;
use crate::cargo::Outcome;
use crate::system::exit::ExitCode;

/// Identifier of the JSON report format; bumped on any incompatible change.
pub const SCHEMA: &str = "harness-battery/1";

/// The battery's JSON report (`reports/<catalog>/battery.json`).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct BatteryReport {
    /// Always [`SCHEMA`].
    pub schema: String,
    /// Harness version that wrote it.
    pub harness_version: String,
    /// The catalog that ran.
    pub catalog: CatalogInfo,
    /// `complete`, `refused`, or `interrupted`.
    pub status: Status,
    /// Set when `status` is `refused`.
    pub refusal: Option<RefusalInfo>,
    /// The ids given with `--only`, if any (UNFALSIFIED is then not computed).
    pub only: Option<Vec<String>>,
    /// The revision given with `--since`, if any: only the mutations meeting the diff ran
    /// (UNFALSIFIED is then not computed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub since: Option<String>,
    /// With `--since`: UNGUARDED-IN-DIFF, the functions of the members' `src/` the diff
    /// changes that no mutation of the command's catalogs touches (file and line order).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unguarded_in_diff: Option<Vec<crate::battery::select::unguarded::UnguardedFn>>,
    /// `--require-guarded`: a function UNGUARDED-IN-DIFF makes the exit code 1.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub require_guarded: bool,
    /// With `--since --mutants`: cargo-mutants' generated mutants inside the diff, run
    /// through the switch runner and reported in their own terms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub generated_in_diff: Option<GeneratedInDiff>,
    /// Set on a shard's report (`--shard K/N`): what `harness merge` checks. Absent from
    /// unsharded and merged reports.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shard: Option<crate::battery::select::shard::ShardManifest>,
    /// Set on an `--incremental` run: the cache, the re-check sample's seed and ids.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub incremental: Option<IncrementalInfo>,
    /// How the host lock was held: `own` or `ancestor pid N`.
    pub lock: String,
    /// The mode that ran and how it was decided (`--mode`, or by the catalog's size when
    /// none was given: `crate::battery::execute::mode_choice`); absent from a merged report.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<ModeChoice>,
    /// Start time, seconds since the Unix epoch.
    pub started_unix: u64,
    /// Wall seconds of the whole battery.
    pub wall_seconds: f64,
    /// Baseline build and runs (absent if the battery refused before them).
    pub baseline: Option<Baseline>,
    /// One entry per mutation that ran, in run order.
    pub mutations: Vec<MutationReport>,
    /// The catalog's further configurations (`[[config]]`) that ran, in catalog order;
    /// absent when none did.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub configs: Vec<ConfigRun>,
    /// Tests x mutations.
    pub kill_matrix: KillMatrix,
    /// Listed tests no mutation killed; `null` when not computed (refusal, `--only` or a
    /// shard).
    pub unfalsified: Option<Vec<String>>,
    /// Counts.
    pub summary: Summary,
    /// The process exit code this report implies (0, 1, 2 or 130).
    pub exit_code: ExitCode,
}

/// How the mode of a run was decided (`battery.json`'s `mode`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ModeChoice {
    /// The mode that ran.
    pub mode: crate::battery::Mode,
    /// `option` (`--mode` given) or `size` (chosen by the selection's size).
    pub by: ChosenBy,
    /// Why, in words (printed, and in `battery.md`).
    pub reason: String,
}

/// Who decided the mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ChosenBy {
    /// `--mode` on the command line (or the caller) named it.
    Option,
    /// The selection's size (`crate::battery::execute::mode_choice`).
    Size,
}

/// The terms of a mutant's own test timeout (`battery.json`'s `timeout_rule`), as PIT and
/// Stryker time a mutant out from the time of the tests that cover it.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct TimeoutRule {
    /// The sum of the wall seconds its selected tests took each on its own, unmutated, in
    /// the reach run.
    pub tests_seconds: f64,
    /// The catalog's `timeout_factor`.
    pub factor: f64,
    /// The catalog's `timeout_margin_secs`.
    pub margin_seconds: f64,
}

/// The generated mutants inside the diff (`battery.json`'s `generated_in_diff`).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct GeneratedInDiff {
    /// The cargo-mutants version that listed them.
    pub cargo_mutants_version: String,
    /// The patch given to cargo-mutants' `--in-diff`: the `--since` diff, written from git2.
    pub patch: PathBuf,
    /// How many mutants cargo-mutants listed inside the diff (`--list --in-diff`).
    pub listed: usize,
    /// Listed mutants that could not be expressed as catalog mutations, with why.
    pub skipped: Vec<String>,
    /// The generated battery's name (its reports are in `<reports>/<name>/`); null when
    /// nothing was listed and nothing ran.
    pub battery: Option<String>,
    /// The generated battery's status (`complete`, `refused`, `interrupted`); null when
    /// nothing ran.
    pub status: Option<Status>,
    /// Why the generated battery refused.
    pub refusal: Option<RefusalInfo>,
    /// Caught: some listed test failed (the failing tests are each mutant's `killed_by`).
    pub caught: usize,
    /// Missed: every listed test passed. Any makes the battery weak (exit 1).
    pub missed: usize,
    /// The tests ran over the timeout.
    pub timeout: usize,
    /// The mutant did not compile.
    pub unviable: usize,
    /// A test binary died and no test failed.
    pub crashed: usize,
    /// Some listed test does not exist under the mutant.
    pub tests_missing: usize,
    /// Every mutant that ran, in cargo-mutants' order.
    pub mutants: Vec<crate::battery::report::generated::GeneratedMutant>,
    /// 0 (none missed), 1 (some missed), 2 (the generated battery refused), 130
    /// (interrupted).
    pub exit_code: ExitCode,
}

/// Battery status.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// Every selected mutation ran.
    Complete,
    /// The battery refused (see `refusal`) and ran nothing more.
    Refused,
    /// A signal stopped it (the tree was restored).
    Interrupted,
}

/// The catalog as run.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CatalogInfo {
    /// Battery name.
    pub name: String,
    /// Catalog path as given.
    pub path: PathBuf,
    /// Canonical workspace root.
    pub workspace: PathBuf,
    /// Package.
    pub package: String,
    /// Test targets.
    pub test_targets: Vec<String>,
    /// Whether `--lib` tests are included.
    pub lib_tests: bool,
    /// Binary targets whose unit tests are included (`--bin`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub bin_targets: Vec<String>,
    /// Whether the library's doc tests are included (`--doc`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub doc_tests: bool,
    /// Selection pattern.
    pub select: String,
    /// The listed tests.
    pub tests: Vec<String>,
    /// Tests of the targets the catalog leaves out, each with its reason (`[[skip]]`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub skipped: Vec<crate::battery::select::catalog::Skip>,
}

/// Why the battery refused.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RefusalInfo {
    /// Which refusal (CATALOG-DRIFT, FILTER-DRIFT, BASELINE-RED, FLAKY, STALE-BUILD,
    /// TREE-DIRTY, LOCKED or HARNESS-FAULT).
    pub kind: crate::battery::report::refusal::RefusalKind,
    /// What exactly, naming files, tests and mutations.
    pub detail: String,
}

/// The baseline.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Baseline {
    /// Seconds of the baseline build.
    pub build_seconds: f64,
    /// Seconds of each of the two baseline test runs.
    pub run_seconds: Vec<f64>,
    /// The per-mutation test timeout derived from them.
    pub timeout_seconds: f64,
    /// Number of tests the targets hold (listed or not).
    pub tests_in_targets: usize,
    /// Files the baseline runs created in the tree (removed).
    pub created_files: Vec<PathBuf>,
}

/// One failing test.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct FailedTest {
    /// Test name.
    pub name: String,
    /// Its failure message (libtest's captured output).
    pub message: String,
}

/// What an `--incremental` run reused and re-checked.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct IncrementalInfo {
    /// The verdict cache file.
    pub cache: PathBuf,
    /// How many reused verdicts were to be re-checked (`--recheck`).
    pub recheck: usize,
    /// The seed of the re-check sample.
    pub seed: u64,
    /// The ids whose evidence matched and that ran again as the re-check, catalog order.
    pub rechecked: Vec<String>,
}

/// One mutation's result.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct MutationReport {
    /// Id.
    pub id: String,
    /// Title.
    pub title: String,
    /// Role.
    pub role: Role,
    /// Mutated file, relative to the workspace root.
    pub file: PathBuf,
    /// Occurrences replaced.
    pub occurrences: usize,
    /// 1-based line and column of the first occurrence.
    pub line: usize,
    /// See `line`.
    pub column: usize,
    /// 1-based line and column just past the end of the first occurrence.
    pub end_line: usize,
    /// See `end_line`.
    pub end_column: usize,
    /// The replacement text.
    pub replace: String,
    /// KILLED, SURVIVED, UNVIABLE, TIMEOUT, CRASHED or TESTS_MISSING.
    pub verdict: Verdict,
    /// MET or UNMET.
    pub expectation: Expectation,
    /// Why UNMET (empty when MET).
    pub reasons: Vec<String>,
    /// The catalog's expected killers.
    pub expected_killers: Vec<String>,
    /// Failing listed tests with their messages.
    pub failed_tests: Vec<FailedTest>,
    /// Failing listed tests that are not expected killers.
    pub other_killers: Vec<String>,
    /// Outcome of every listed test (empty when UNVIABLE).
    pub outcomes: BTreeMap<String, Outcome>,
    /// Switch mode's reach run: the listed tests that execute the mutated function, in
    /// catalog order (empty: NO_COVERAGE); `None` when it is not known (rebuild mode, a
    /// rebuild fallback, an unproven switch, a reach run that could not be trusted).
    #[serde(default)]
    pub reached_by: Option<Vec<String>>,
    /// For UNVIABLE: the compiler's first error.
    pub compiler_error: Option<String>,
    /// The test binaries that died before reporting all their tests, each with its exit
    /// status or signal as cargo reports it (empty when none died).
    #[serde(default)]
    pub died: Vec<String>,
    /// When a test binary died before reporting some tests: the end of cargo's stderr.
    pub crash_output: Option<String>,
    /// For TIMEOUT: the tests that had finished.
    pub finished_tests: Option<Vec<String>>,
    /// Files the run created in the tree (removed).
    pub created_files: Vec<PathBuf>,
    /// Seconds of the rebuild.
    pub build_seconds: f64,
    /// Seconds of the test run (0 when UNVIABLE).
    pub test_seconds: f64,
    /// Its test run's timeout, seconds, when that was not the battery's
    /// (`baseline.timeout_seconds`): a reach-selected switched mutant's own timeout, from
    /// the seconds of the tests it ran (see `switch.json`'s `reach.test_seconds`), or a
    /// TIMEOUT re-checked from the cache under the timeout it was found under.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_seconds: Option<f64>,
    /// How a reach-selected switched mutant's own timeout was derived: `timeout_seconds` =
    /// min(`baseline.timeout_seconds`, `factor` x `tests_seconds` + `margin_seconds`).
    /// Absent when the mutant ran under the battery's timeout (rebuild mode, a rebuild
    /// fallback, `--all-tests`, no reach) or under a cached TIMEOUT's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_rule: Option<TimeoutRule>,
    /// Whether the verdict was reused from the cache (`--incremental`, evidence unchanged)
    /// rather than found by this run.
    #[serde(default)]
    pub reused: bool,
    /// The catalog's `[[config]]` this mutation ran under, when the catalog's own
    /// configuration compiled it into no unit (see the report's `configs`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config: Option<String>,
}

/// One `[[config]]` of the catalog as the battery ran it: the mutations its own
/// configuration left NOT_COMPILED, built and tested under this one's features.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ConfigRun {
    /// The configuration's name.
    pub name: String,
    /// The features it enabled (`all_features` resolved to the package's features).
    pub features: Vec<String>,
    /// Whether it built with `--no-default-features`.
    pub no_default_features: bool,
    /// The tests it ran besides the catalog's own (`tests` of the `[[config]]`).
    pub tests: Vec<String>,
    /// The mutations it was given (NOT_COMPILED so far), catalog order.
    pub given: Vec<String>,
    /// Those it compiled: their verdicts in `mutations` are this configuration's.
    pub ran: Vec<String>,
    /// Its run's status; a refusal or interruption there is the battery's exit code too.
    pub status: Status,
    /// Why it refused.
    pub refusal: Option<RefusalInfo>,
    /// Its own baseline build and runs.
    pub baseline: Option<Baseline>,
}

/// Counts over the mutations that ran.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Summary {
    /// Mutations that ran.
    pub mutations: usize,
    /// KILLED.
    pub killed: usize,
    /// SURVIVED.
    pub survived: usize,
    /// UNVIABLE.
    pub unviable: usize,
    /// TIMEOUT.
    pub timeout: usize,
    /// CRASHED.
    #[serde(default)]
    pub crashed: usize,
    /// TESTS_MISSING.
    #[serde(default)]
    pub tests_missing: usize,
    /// NOT_COMPILED.
    #[serde(default)]
    pub not_compiled: usize,
    /// NO_COVERAGE.
    #[serde(default)]
    pub no_coverage: usize,
    /// MET.
    pub met: usize,
    /// UNMET.
    pub unmet: usize,
    /// UNFALSIFIED tests (0 when not computed).
    pub unfalsified: usize,
}

impl Summary {
    /// Counts `mutations`.
    pub fn of(mutations: &[MutationReport], unfalsified: Option<&Vec<String>>) -> Summary {
        let mut s = Summary {
            mutations: mutations.len(),
            unfalsified: unfalsified.map_or(0, Vec::len),
            ..Summary::default()
        };
        for m in mutations {
            match m.verdict {
                Verdict::Killed => s.killed += 1,
                Verdict::Survived => s.survived += 1,
                Verdict::Unviable => s.unviable += 1,
                Verdict::Timeout => s.timeout += 1,
                Verdict::Crashed => s.crashed += 1,
                Verdict::TestsMissing => s.tests_missing += 1,
                Verdict::NotCompiled => s.not_compiled += 1,
                Verdict::NoCoverage => s.no_coverage += 1,
            }
            match m.expectation {
                Expectation::Met => s.met += 1,
                Expectation::Unmet => s.unmet += 1,
            }
        }
        s
    }
}
