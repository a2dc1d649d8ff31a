//! The battery: a catalog of named mutations run against a workspace's tests.
//!
//! In rebuild mode each mutation is applied to the tree and rebuilt; in switch mode all
//! are compiled once in a scratch copy behind a run-time switch. A battery goes through
//! three stages, each a folder:
//!
//! - [`select`]: what runs, read from the catalog and the tree before anything is built
//!   (the catalog, the `--since` diff, shards, static checks of the sources);
//! - [`execute`]: the one run of [`execute::run`] in either mode (lock, fingerprint, drift
//!   check, baseline, filter check, control runs, then per mutation build / test / restore /
//!   judge, and the final fingerprint);
//! - [`report`]: verdicts, refusals and the report files.
//!
//! [`tree`] is the tree under test's file set and fingerprint, which every stage reads.
//! This module ties the stages together for one loaded catalog: [`preflight`] checks it
//! before the host lock is taken, [`run_unwritten`] runs it and [`Unwritten::write`] writes
//! its reports. Commands never call them directly: every battery enters through
//! `crate::door` (plan, preflight, lock, run).
//!
//! A battery that cannot be trusted refuses with one of the
//! [`report::refusal::RefusalKind`]s and runs nothing more.

pub mod execute;
pub mod report;
pub mod select;
pub mod tree;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crate::cargo::Outcome;
use crate::system::exit::ExitCode;
use crate::system::progress::Progress;
use execute::run::{ModeRun, Run, Shared};
use execute::stop::Stop;
use execute::{cache, rebuild, switch};
use report::files;
use report::refusal::{Refusal, RefusalKind};
use report::schema::{self, BatteryReport, CatalogInfo, RefusalInfo, Status, Summary};
use report::verdict::KillMatrix;
use select::catalog::{self, Catalog, CatalogError};
use select::{diffscope, shard, unguarded};

/// How a battery runs its mutations. Spelled `rebuild`, `switch` and `auto` on the command
/// line and in JSON (a mutation's evidence, [`execute::cache`], holds the mode that ran,
/// never `auto`).
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Default,
    clap::ValueEnum,
    serde::Serialize,
    serde::Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// One rebuild per mutation, in the workspace itself (journaled, restored).
    #[default]
    Rebuild,
    /// Compile once in a scratch copy, one test run per mutation (see [`execute::switch`]).
    Switch,
    /// Rebuild or switch by the size of the selection ([`execute::mode_choice`]): what a
    /// command runs given no `--mode`.
    Auto,
}

impl Mode {
    /// The command line's word for it.
    pub fn word(self) -> &'static str {
        match self {
            Mode::Rebuild => "rebuild",
            Mode::Switch => "switch",
            Mode::Auto => "auto",
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
    /// Run only this shard's part of the catalog (`--shard K/N`); UNFALSIFIED is then
    /// computed by `harness merge`, not here.
    pub shard: Option<shard::Shard>,
    /// How the host lock is held, for the report.
    pub lock: String,
    /// Run only the mutations whose occurrences meet the diff of the working tree against
    /// the merge base of `HEAD` and this revision (`--since REV`).
    pub since: Option<String>,
    /// Reuse verdicts whose evidence is unchanged (`--incremental`; see [`execute::cache`]).
    pub incremental: bool,
    /// With `incremental`: how many reused verdicts to run again as a check (`--recheck`).
    pub recheck: usize,
    /// Switch mode: how many mutants' test runs may go on at once (`-j N`, at least 1; see
    /// [`execute::parallel`]). Rebuild mode takes only 1 ([`BatteryError::JobsNeedSwitchMode`]).
    pub jobs: usize,
    /// What `--since` adds besides selecting mutations (see [`DiffScope`]).
    pub diff_scope: DiffScope,
    /// Switch mode: run every listed test for every mutant (`--all-tests`), not only the
    /// tests the reach run found executing its function ([`execute::reach`]). The verdicts are the
    /// same; the reach is still found and reported.
    pub all_tests: bool,
    /// The catalog's mutations are cargo-mutants' generated mutants (`mutants
    /// --via-harness`, `--since --mutants`): the progress lines speak of them in their own
    /// terms (caught by, missed), never of a catalog's expectations.
    pub generated: bool,
    /// Switch mode: the name of the folder under the catalog's target directory that holds
    /// the scratch copy and its builds (`None`: `switch`). Batteries that run at the same time
    /// with one target directory (`mutants --via-harness` on several packages) need one each.
    pub scratch_name: Option<String>,
    /// Switch mode: build the scratch copy's workspace members incrementally, as cargo's
    /// dev profile does (`true` for `battery` and `gate`: after an edit the next run
    /// recompiles only what changed, 2.7 s against 69.6 s for this project's engine).
    /// `mutants --via-harness` turns it off ([`crate::cargo::CargoCmd::without_incremental`]):
    /// its runs stand where cargo-mutants' cold copies stand, and a cold build without an
    /// incremental session to write is faster (0.15 s against 0.22 s of rustc on
    /// cargo-mutants' `factorial`).
    pub scratch_incremental: bool,
}

/// With `--since`: UNGUARDED-IN-DIFF and cargo-mutants' generated mutants inside the diff.
#[derive(Debug, Clone, Default)]
pub struct DiffScope {
    /// The catalogs whose mutations guard changed functions (every catalog of the command,
    /// as its plan loaded them); empty: the battery's own catalog alone. The battery's own
    /// catalog always counts.
    pub guards: Vec<Catalog>,
    /// `--require-guarded`: a changed function no mutation touches makes the battery weak
    /// (exit 1).
    pub require_guarded: bool,
    /// `--mutants`: also run cargo-mutants' generated mutants inside the diff through the
    /// switch runner; a missed one makes the battery weak (exit 1). The battery does not
    /// act on it: the run step of `crate::door` runs it after the battery
    /// (`crate::mutants::in_diff`).
    pub mutants: bool,
}

/// Outcome of a battery run ([`Unwritten::write`]): the report (when the catalog could be loaded) and where it went.
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
    /// `--since REV`: the diff does not fit the tree.
    #[error(transparent)]
    Since(#[from] diffscope::SinceError),
    /// `--since REV`: the workspace members (whose `src/` is guarded code) could not be
    /// listed.
    #[error("--since: cannot list the workspace members (cargo metadata): {0}")]
    Members(#[source] crate::cargo::CargoError),
    /// `--mutants`: cargo-mutants could not list the generated mutants inside the diff, or
    /// their catalog could not be written.
    #[error("--mutants: {0}")]
    Generated(String),
    /// The `--timings` file of `--shard` could not be used.
    #[error(transparent)]
    Timings(#[from] shard::TimingsError),
    /// `--only` named an id the catalog does not have.
    #[error("{catalog}: --only names unknown mutation id(s): {ids}")]
    UnknownOnly {
        /// Catalog path.
        catalog: PathBuf,
        /// The unknown ids.
        ids: String,
    },
    /// `-j N` with N > 1 in rebuild mode, whose mutations are written into the one tree and
    /// rebuilt there, one at a time.
    #[error(
        "-j {jobs}: only switch mode (--mode switch) runs several mutants' tests at once; rebuild mode rebuilds the one tree for each mutation, one at a time (use -j 1)"
    )]
    JobsNeedSwitchMode {
        /// The number given.
        jobs: usize,
    },
    /// The host state directory (lock, restore journals) lies inside the workspace: the
    /// run's own journals would appear in the tree it fingerprints and be blamed on the
    /// user (TREE-DIRTY), and a restore would read them from the tree it restores.
    #[error(
        "--state-dir {state} is inside the workspace {root}: the host lock and the restore journals would be files of the tree under test; give a directory outside it (default: $TMPDIR/harness-<uid>)"
    )]
    StateDirInWorkspace {
        /// The state directory, resolved.
        state: PathBuf,
        /// The workspace root.
        root: PathBuf,
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

/// A catalog that passed [`preflight`] for one run: the only thing [`run_unwritten`] and
/// [`write_locked`] take, so no battery runs unchecked.
#[derive(Debug, Clone)]
pub struct Checked {
    catalog: Catalog,
    place: catalog::TargetPlace,
    mode: Mode,
}

impl Checked {
    /// The catalog, as loaded once.
    pub fn catalog(&self) -> &Catalog {
        &self.catalog
    }

    /// The mode it runs in.
    pub fn mode(&self) -> Mode {
        self.mode
    }
}

/// The checks a battery passes before the host lock is taken and anything is built, in
/// this order: `-j N` fits `mode` ([`check_jobs`]), the host state directory lies outside
/// the workspace ([`check_state_dir`]), `--only` names ids the catalog has, and the
/// catalog's target directory holds none of the tree's files
/// ([`Catalog::check_target_dir`]). Reads the tree; writes nothing.
///
/// Errors: [`BatteryError::JobsNeedSwitchMode`], [`BatteryError::StateDirInWorkspace`],
/// [`BatteryError::UnknownOnly`], [`BatteryError::Catalog`] (field `target_dir`).
pub fn preflight(catalog: Catalog, opts: &Options, mode: Mode) -> Result<Checked, BatteryError> {
    check_jobs(opts.jobs, mode)?;
    check_state_dir(&catalog.root, &opts.state_dir)?;
    check_only(&catalog, opts.only.as_deref())?;
    let place = catalog.check_target_dir()?;
    Ok(Checked {
        catalog,
        place,
        mode,
    })
}

/// A battery that ran, its report assembled but not yet written: a caller may add to the
/// report (the generated mutants of `--since --mutants`) before [`Unwritten::write`].
pub struct Unwritten {
    /// The report; its wall time is set when it is written.
    pub report: BatteryReport,
    /// The catalog that ran.
    pub catalog: Catalog,
    /// `--since REV`: the diff the mutations were selected by.
    pub diff: Option<diffscope::DiffLines>,
    /// Where the report directories go (canonical).
    pub reports_root: PathBuf,
    /// This battery's report directory (`<reports_root>/<catalog name>`).
    pub dir: PathBuf,
    /// The mode that ran, for its own reports.
    mode: Box<dyn ModeRun>,
    /// Seconds the harness spent around each switched mutant's test run.
    overheads: Vec<f64>,
    /// When the battery started (the report's wall time runs to its writing).
    started: Instant,
}

impl Unwritten {
    /// Writes the report files and the mode's own reports into [`Unwritten::dir`], the
    /// report's wall time set to now. Errors: [`BatteryError::Reports`].
    pub fn write(mut self) -> Result<RunResult, BatteryError> {
        let mut report = self.report;
        report.wall_seconds = self.started.elapsed().as_secs_f64();
        let dir = self.dir;
        let mut written =
            files::write_all(&dir, &report).map_err(|source| BatteryError::Reports {
                path: dir.clone(),
                source,
            })?;
        written.extend(self.mode.write_reports(&dir, &self.overheads)?);
        Ok(RunResult { report, written })
    }
}

/// Runs the battery of `checked` in its mode (the caller holds the host lock) up to its
/// report, unwritten: [`Unwritten::write`] writes `battery.json`, `battery.md`,
/// `mutation-report.json` (switch mode adds `switch.json`). Refusals and interruptions are
/// in the report's `status`; only a `--since` revision that does not fit the tree, a guard
/// catalog that cannot be read or unwritable reports are errors. Both modes give the same
/// report, timings aside.
///
/// The `--mutants` step of `--since` (`opts.diff_scope.mutants`) is not the battery's: the
/// run step of `crate::door` runs it before the report is written.
pub fn run_unwritten(
    checked: &Checked,
    opts: &Options,
    progress: &Progress,
) -> Result<Unwritten, BatteryError> {
    let started = Instant::now();
    let started_unix = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let catalog = checked.catalog.clone();
    let mode = checked.mode;
    let diff = match &opts.since {
        Some(rev) => {
            let d = diffscope::changed_lines(&catalog.root, rev)?;
            progress.line(&format!(
                "--since {rev}: merge base {}, {} changed file(s)",
                &d.merge_base[..d.merge_base.len().min(12)],
                d.files.len()
            ));
            Some(d)
        }
        None => None,
    };
    let unguarded = match &diff {
        Some(d) => Some(unguarded_list(&catalog, d, opts)?),
        None => None,
    };
    progress.line(&format!("target directory {}", checked.place));
    let choice = execute::mode_choice::resolve(mode, &catalog, opts, diff.as_ref());
    progress.line(&format!("mode {} ({})", choice.mode.word(), choice.reason));
    let mode = choice.mode;
    // Chosen by size, rebuild mode takes one job whatever `-j` asked.
    let one_job;
    let opts = if mode == Mode::Rebuild && opts.jobs > 1 {
        progress.line(&format!(
            "-j {}: rebuild mode rebuilds the one tree for each mutation, one at a time",
            opts.jobs
        ));
        one_job = Options {
            jobs: 1,
            ..opts.clone()
        };
        &one_job
    } else {
        opts
    };
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
    let mode_kind = mode;
    let mut mode: Box<dyn ModeRun> = match mode_kind {
        Mode::Switch => Box::new(switch::Switch::new(&catalog, opts)),
        Mode::Rebuild | Mode::Auto => Box::new(rebuild::Rebuild::new(&catalog, opts)),
    };
    // With `tests_from_listing`, the catalog as run: its tests, those its targets list.
    let listed = std::sync::OnceLock::new();
    let mut run = Run::new(Shared {
        catalog: &catalog,
        listed: Some(&listed),
        opts,
        progress,
        exclude: vec![catalog.target_dir.clone(), reports_root.clone()],
        diff: diff.as_ref(),
        mode: mode_kind,
    });
    let mut stop = run.go(mode.as_mut()).err();
    // A signal that arrived at any point ends the run as interrupted, never as a verdict or
    // a refusal it may have caused (a test binary killed by the same signal).
    if crate::system::interrupt::requested() {
        stop = Some(Stop::Interrupted);
    }
    let mut report = assemble(run.catalog(), opts, &run, stop);
    report.mode = Some(choice);
    if report.status == Status::Complete
        && let Some((path, file)) = run.cache_after()
        && let Err(e) = cache::save(&path, &file)
    {
        progress.line(&format!(
            "incremental: {}: cannot write the verdict cache: {e}",
            path.display()
        ));
    }
    if let Some(s) = &opts.shard {
        report.shard = Some(shard_manifest(run.catalog(), s, &run, &report)?);
    }
    let dir = files::report_dir(&reports_root, &catalog.name);
    if let Some(list) = unguarded {
        report.require_guarded = opts.diff_scope.require_guarded;
        if report.status == Status::Complete && report.require_guarded && !list.is_empty() {
            report.exit_code = report.exit_code.worst(ExitCode::Weak);
        }
        report.unguarded_in_diff = Some(list);
    }
    report.started_unix = started_unix;
    let overheads = std::mem::take(&mut run.overheads);
    drop(run);
    let catalog = listed.into_inner().unwrap_or(catalog);
    if report.status == Status::Complete && !catalog.spec.configs.is_empty() {
        run_configs(
            &catalog,
            opts,
            progress,
            mode_kind,
            &reports_root,
            &mut report,
        );
    }
    Ok(Unwritten {
        report,
        catalog,
        diff,
        reports_root,
        dir,
        mode,
        overheads,
        started,
    })
}

/// [`BatteryError::StateDirInWorkspace`] when `state` (the host state directory, which
/// need not exist yet) is `root` or lies inside it. `state` is resolved against the current
/// directory and through its nearest existing ancestor's symbolic links.
pub fn check_state_dir(root: &Path, state: &Path) -> Result<(), BatteryError> {
    let abs = if state.is_absolute() {
        state.to_path_buf()
    } else {
        std::env::current_dir()
            .map(|d| d.join(state))
            .unwrap_or_else(|_| state.to_path_buf())
    };
    // The nearest ancestor that exists, canonical, then the rest lexically.
    let mut existing = abs.as_path();
    let mut rest = Vec::new();
    let resolved = loop {
        if let Ok(c) = existing.canonicalize() {
            break rest.iter().rev().fold(c, |p: PathBuf, n| p.join(n));
        }
        match (existing.parent(), existing.file_name()) {
            (Some(parent), Some(name)) => {
                rest.push(name.to_os_string());
                existing = parent;
            }
            _ => break abs.clone(),
        }
    };
    let resolved = catalog::lexical(&resolved);
    let root = root.canonicalize().unwrap_or_else(|_| root.to_path_buf());
    if resolved.starts_with(&root) {
        return Err(BatteryError::StateDirInWorkspace {
            state: resolved,
            root,
        });
    }
    Ok(())
}

/// [`BatteryError::JobsNeedSwitchMode`] for `jobs` > 1 in rebuild mode (`jobs` 0 is the
/// command line's to refuse; it runs as 1).
pub fn check_jobs(jobs: usize, mode: Mode) -> Result<(), BatteryError> {
    if jobs > 1 && mode == Mode::Rebuild {
        return Err(BatteryError::JobsNeedSwitchMode { jobs });
    }
    Ok(())
}

/// UNGUARDED-IN-DIFF for `catalog`'s workspace: the changed functions of its members'
/// `src/` that no mutation of `opts.diff_scope.guards` (and of `catalog`) touches.
fn unguarded_list(
    catalog: &Catalog,
    diff: &diffscope::DiffLines,
    opts: &Options,
) -> Result<Vec<unguarded::UnguardedFn>, BatteryError> {
    let members = catalog.cargo().metadata().map_err(BatteryError::Members)?;
    let root = &catalog.root;
    let src_dirs: Vec<PathBuf> = members
        .iter()
        .filter_map(|p| {
            let dir = p.dir.canonicalize().unwrap_or_else(|_| p.dir.clone());
            dir.strip_prefix(root).ok().map(|d| d.join("src"))
        })
        .collect();
    let mut catalogs = vec![catalog];
    catalogs.extend(opts.diff_scope.guards.iter());
    let guards = unguarded::guards(root, &catalogs);
    Ok(unguarded::unguarded_in_diff(
        root, diff, &src_dirs, &guards,
    )?)
}

/// The manifest of a shard's report: the catalog's bytes, the tree, the partition.
fn shard_manifest(
    catalog: &Catalog,
    s: &shard::Shard,
    run: &Run<'_>,
    report: &BatteryReport,
) -> Result<shard::ShardManifest, BatteryError> {
    let all = catalog.mutation_ids();
    Ok(shard::ShardManifest {
        k: s.spec.k,
        n: s.spec.n,
        catalog_sha256: catalog.sha256.clone(),
        tree_fingerprint: run.start_fingerprint().unwrap_or_default(),
        timings: s.source.clone(),
        mutations: report.mutations.iter().map(|m| m.id.clone()).collect(),
        catalog_mutations: all,
    })
}

/// The report of a battery that could not start because the host lock is held by someone
/// else (LOCKED, `detail` names the holder): written like any refusal's, nothing run.
///
/// Errors: [`BatteryError::Reports`].
pub fn write_locked(
    checked: &Checked,
    opts: &Options,
    detail: &str,
) -> Result<RunResult, BatteryError> {
    let started_unix = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let catalog = &checked.catalog;
    let reports_root = opts
        .reports_root
        .clone()
        .unwrap_or_else(|| catalog.root.join("reports"));
    let progress = Progress::plain();
    let run = Run::new(Shared {
        catalog,
        listed: None,
        opts,
        progress: &progress,
        exclude: Vec::new(),
        diff: None,
        mode: Mode::Rebuild,
    });
    let stop = Stop::Refused(Refusal {
        kind: RefusalKind::Locked,
        detail: detail.to_string(),
    });
    let mut report = assemble(catalog, opts, &run, Some(stop));
    report.started_unix = started_unix;
    let dir = files::report_dir(&reports_root, &catalog.name);
    let written = files::write_all(&dir, &report).map_err(|source| BatteryError::Reports {
        path: dir.clone(),
        source,
    })?;
    Ok(RunResult { report, written })
}

/// `--only` must name ids the catalog has.
fn check_only(catalog: &Catalog, only: Option<&[String]>) -> Result<(), BatteryError> {
    let Some(only) = only else { return Ok(()) };
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
    if unknown.is_empty() {
        return Ok(());
    }
    Err(BatteryError::UnknownOnly {
        catalog: catalog.path.clone(),
        ids: unknown.join(", "),
    })
}

/// The report of a run that ended with `stop` (timings zero; the caller sets them).
fn assemble(catalog: &Catalog, opts: &Options, run: &Run<'_>, stop: Option<Stop>) -> BatteryReport {
    let (status, refusal) = match stop {
        None => (Status::Complete, None),
        Some(Stop::Interrupted) => (Status::Interrupted, None),
        Some(Stop::Refused(r)) => (
            Status::Refused,
            Some(RefusalInfo {
                kind: r.kind,
                detail: r.detail,
            }),
        ),
    };
    let (mutations, columns): (Vec<_>, Vec<_>) = run.mutation_reports().into_iter().unzip();
    let cols: Vec<(String, Option<&BTreeMap<String, Outcome>>)> = mutations
        .iter()
        .zip(&columns)
        .map(|(m, o)| (m.id.clone(), o.as_ref()))
        .collect();
    let kill_matrix = KillMatrix::build(&catalog.spec.tests, &cols);
    let unfalsified = (status == Status::Complete
        && opts.only.is_none()
        && opts.shard.is_none()
        && opts.since.is_none())
    .then(|| kill_matrix.unfalsified());
    let summary = Summary::of(&mutations, unfalsified.as_ref());
    let exit_code = match status {
        Status::Interrupted => ExitCode::Interrupted,
        Status::Refused => ExitCode::Refused,
        Status::Complete => complete_exit_code(&summary),
    };
    BatteryReport {
        schema: schema::SCHEMA.to_string(),
        harness_version: env!("CARGO_PKG_VERSION").to_string(),
        catalog: CatalogInfo {
            name: catalog.name.clone(),
            path: catalog.path.clone(),
            workspace: catalog.root.clone(),
            package: catalog.spec.package.clone(),
            test_targets: catalog.spec.test_targets.clone(),
            lib_tests: catalog.spec.lib_tests,
            bin_targets: catalog.spec.bin_targets.clone(),
            doc_tests: catalog.spec.doc_tests,
            select: catalog.spec.select.clone(),
            tests: catalog.spec.tests.clone(),
            skipped: catalog.spec.skipped.clone(),
        },
        status,
        refusal,
        only: opts.only.clone(),
        since: opts.since.clone(),
        unguarded_in_diff: None,
        require_guarded: false,
        generated_in_diff: None,
        shard: None,
        incremental: run.reuse.as_ref().map(|r| schema::IncrementalInfo {
            cache: r.path.clone(),
            recheck: opts.recheck,
            seed: r.seed,
            rechecked: r
                .rechecked
                .keys()
                .map(|&i| catalog.spec.mutations[i].id.clone())
                .collect(),
        }),
        lock: opts.lock.clone(),
        mode: None,
        started_unix: 0,
        wall_seconds: 0.0,
        baseline: run.baseline.clone(),
        mutations,
        configs: Vec::new(),
        kill_matrix,
        unfalsified,
        summary,
        exit_code,
    }
}

/// Runs the catalog's `[[config]]`s in order, each on the mutations still NOT_COMPILED in
/// `report` (the catalog's own configuration compiles them into no unit), as a battery of
/// the same catalog under that configuration's features, with the catalog's tests and the
/// configuration's own, in a target directory of its own (`<target_dir>/config/<name>`).
/// A mutation it compiles takes its verdict from there (`config` names it); one it does
/// not stays NOT_COMPILED for the next. The kill matrix, UNFALSIFIED, the summary and the
/// exit code are computed again over the whole; a configuration's refusal or interruption
/// is the battery's exit code too, and so is a package whose features cannot be listed for
/// `all_features` (that configuration refuses, CATALOG-DRIFT).
fn run_configs(
    catalog: &Catalog,
    opts: &Options,
    progress: &Progress,
    mode_kind: Mode,
    reports_root: &Path,
    report: &mut BatteryReport,
) {
    use report::verdict::Verdict;
    for cfg in &catalog.spec.configs {
        let given: Vec<String> = report
            .mutations
            .iter()
            .filter(|m| m.verdict == Verdict::NotCompiled)
            .map(|m| m.id.clone())
            .collect();
        if given.is_empty() {
            break;
        }
        let declared = if cfg.all_features {
            match catalog.cargo().with_state_dir(&opts.state_dir).metadata() {
                Ok(packages) => packages
                    .iter()
                    .find(|p| p.name == catalog.spec.package)
                    .map(|p| p.features.clone())
                    .unwrap_or_default(),
                Err(e) => {
                    report.exit_code = report.exit_code.worst(ExitCode::Refused);
                    report.configs.push(schema::ConfigRun {
                        name: cfg.name.clone(),
                        features: Vec::new(),
                        no_default_features: cfg.no_default_features,
                        tests: cfg.tests.clone(),
                        given,
                        ran: Vec::new(),
                        status: Status::Refused,
                        refusal: Some(RefusalInfo {
                            kind: RefusalKind::CatalogDrift,
                            detail: format!("cannot list the package's features: {e}"),
                        }),
                        baseline: None,
                    });
                    continue;
                }
            }
        } else {
            Vec::new()
        };
        let features = cfg.enabled(&declared);
        let derived = catalog.for_config(cfg, &features, &given);
        progress.line(&format!(
            "configuration {} (features: {}{}): {} mutation(s) the catalog's own configuration does not compile",
            cfg.name,
            if features.is_empty() { "none".to_string() } else { features.join(", ") },
            if cfg.no_default_features { ", no default features" } else { "" },
            given.len()
        ));
        let sub_opts = Options {
            only: None,
            shard: None,
            since: None,
            incremental: false,
            ..opts.clone()
        };
        let mut mode: Box<dyn ModeRun> = match mode_kind {
            Mode::Switch => Box::new(switch::Switch::new(&derived, &sub_opts)),
            Mode::Rebuild | Mode::Auto => Box::new(rebuild::Rebuild::new(&derived, &sub_opts)),
        };
        let mut run = Run::new(Shared {
            catalog: &derived,
            listed: None,
            opts: &sub_opts,
            progress,
            exclude: vec![catalog.target_dir.clone(), reports_root.to_path_buf()],
            diff: None,
            mode: mode_kind,
        });
        let mut stop = run.go(mode.as_mut()).err();
        if crate::system::interrupt::requested() {
            stop = Some(Stop::Interrupted);
        }
        let sub = assemble(&derived, &sub_opts, &run, stop);
        drop(run);
        fold_config(report, sub, cfg, features);
        if report.exit_code == ExitCode::Interrupted {
            break;
        }
    }
}

/// Folds the battery of configuration `cfg` (enabling `features`) into `report`: each of
/// its mutations it compiled replaces the NOT_COMPILED entry of the same id; then the
/// kill matrix (over the catalog's tests and the configuration's), UNFALSIFIED, the
/// summary and the exit code are computed again.
fn fold_config(
    report: &mut BatteryReport,
    sub: BatteryReport,
    cfg: &catalog::Config,
    features: Vec<String>,
) {
    use report::verdict::Verdict;
    let given: Vec<String> = sub.mutations.iter().map(|m| m.id.clone()).collect();
    let mut ran = Vec::new();
    for m in sub.mutations {
        if m.verdict == Verdict::NotCompiled {
            continue;
        }
        if let Some(slot) = report.mutations.iter_mut().find(|x| x.id == m.id) {
            ran.push(m.id.clone());
            *slot = schema::MutationReport {
                config: Some(cfg.name.clone()),
                ..m
            };
        }
    }
    let mut tests = report.kill_matrix.tests.clone();
    for t in &cfg.tests {
        if !tests.contains(t) {
            tests.push(t.clone());
        }
    }
    let cols: Vec<(String, Option<&BTreeMap<String, Outcome>>)> = report
        .mutations
        .iter()
        .map(|m| (m.id.clone(), Some(&m.outcomes)))
        .collect();
    report.kill_matrix = KillMatrix::build(&tests, &cols);
    if report.unfalsified.is_some() {
        report.unfalsified = Some(report.kill_matrix.unfalsified());
    }
    report.summary = Summary::of(&report.mutations, report.unfalsified.as_ref());
    let own = match sub.status {
        Status::Complete => ExitCode::AllMet,
        Status::Refused => ExitCode::Refused,
        Status::Interrupted => ExitCode::Interrupted,
    };
    if report.status == Status::Complete {
        report.exit_code = complete_exit_code(&report.summary).worst(own);
    }
    report.configs.push(schema::ConfigRun {
        name: cfg.name.clone(),
        features,
        no_default_features: cfg.no_default_features,
        tests: cfg.tests.clone(),
        given,
        ran,
        status: sub.status,
        refusal: sub.refusal,
        baseline: sub.baseline,
    });
}

/// The exit code of a battery that completed: 1 (weak) when an expectation is unmet or a
/// listed test is UNFALSIFIED, else 0.
pub fn complete_exit_code(summary: &schema::Summary) -> ExitCode {
    if summary.unmet > 0 || summary.unfalsified > 0 {
        ExitCode::Weak
    } else {
        ExitCode::AllMet
    }
}

/// The per-mutation test timeout: `max(floor, factor x slowest baseline run)`.
pub fn derive_timeout(run_seconds: &[f64], factor: f64, floor: f64) -> Duration {
    let slowest = run_seconds.iter().copied().fold(0.0, f64::max);
    Duration::from_secs_f64((slowest * factor).max(floor))
}

/// How the listed and skipped tests differ from the targets' tests under the pattern.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FilterDrift {
    /// Listed tests the targets do not hold, catalog order.
    pub missing: Vec<String>,
    /// Tests of the targets under the pattern, neither listed nor skipped, sorted.
    pub unlisted: Vec<String>,
    /// Skipped tests (`[[skip]]`) the targets do not hold, catalog order.
    pub stale_skips: Vec<String>,
}

impl FilterDrift {
    /// Whether the lists agree with the targets.
    pub fn is_empty(&self) -> bool {
        self.missing.is_empty() && self.unlisted.is_empty() && self.stale_skips.is_empty()
    }
}

/// Listed tests and skipped tests vs. the target's tests under the pattern: a listed or
/// skipped test the targets lack, and a test of the targets under the pattern that is
/// neither listed nor skipped, are drift.
pub fn filter_drift(
    listed: &[String],
    skipped: &[String],
    in_targets: &[String],
    select: &str,
) -> FilterDrift {
    let have: BTreeSet<&str> = in_targets.iter().map(String::as_str).collect();
    let accounted: BTreeSet<&str> = listed.iter().chain(skipped).map(String::as_str).collect();
    let absent = |names: &[String]| -> Vec<String> {
        names
            .iter()
            .filter(|t| !have.contains(t.as_str()))
            .cloned()
            .collect()
    };
    let unlisted = in_targets
        .iter()
        .filter(|t| t.contains(select) && !accounted.contains(t.as_str()))
        .cloned()
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    FilterDrift {
        missing: absent(listed),
        unlisted,
        stale_skips: absent(skipped),
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

pub(crate) fn outcome_word(o: Option<&Outcome>) -> &'static str {
    match o {
        Some(Outcome::Passed) => "passed",
        Some(Outcome::Failed) => "failed",
        Some(Outcome::Ignored) => "ignored",
        Some(Outcome::Unfinished) => "unfinished",
        Some(Outcome::NoResult) => "no result",
        Some(Outcome::Missing) => "missing",
        Some(Outcome::NotReached) => "not reached",
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
        let d = filter_drift(&listed, &[], &have, "c::");
        assert_eq!(d.missing, vec!["c::b".to_string()]);
        assert_eq!(d.unlisted, vec!["c::new".to_string()]);
        assert!(d.stale_skips.is_empty());
    }

    #[test]
    fn a_skipped_test_is_accounted_for_and_a_stale_skip_is_drift() {
        let listed = vec!["c::a".to_string()];
        let have = vec!["c::a".to_string(), "c::needs_model".to_string()];
        let skipped = vec!["c::needs_model".to_string()];
        assert!(filter_drift(&listed, &skipped, &have, "c::").is_empty());
        let skipped = vec!["c::needs_model".to_string(), "c::gone".to_string()];
        let d = filter_drift(&listed, &skipped, &have, "c::");
        assert_eq!(d.stale_skips, vec!["c::gone".to_string()]);
        assert!(d.missing.is_empty() && d.unlisted.is_empty());
    }
}
