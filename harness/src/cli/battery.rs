//! `harness battery`: run mutation batteries, with the run options `gate` shares.

use std::path::{Path, PathBuf};

use super::lock::{LockArgs, LockFailure, take_lock};
use super::{ReportsArgs, report_catalog_error};
use crate::battery::{self, BatteryError, Mode, report};
use crate::system::exit::ExitCode;
use crate::system::progress::Progress;

/// How a battery runs (shared by `battery` and `gate`).
#[derive(Debug, Clone, Default, clap::Args)]
pub struct BatteryRunArgs {
    /// Run only these mutation ids (comma-separated); UNFALSIFIED is then not computed.
    #[arg(
        long,
        value_delimiter = ',',
        value_name = "IDS",
        conflicts_with = "shard"
    )]
    pub only: Option<Vec<String>>,
    /// Run shard K of N (1-based): a deterministic part of each catalog's mutations, dealt
    /// in catalog order, or balanced by `--timings`. The report carries a manifest that
    /// `harness merge` checks; UNFALSIFIED is computed by the merge.
    #[arg(long, value_name = "K/N")]
    pub shard: Option<crate::battery::select::shard::ShardSpec>,
    /// Switch mode: run up to N mutants' tests at once, each with its own environment and
    /// its own temporary directory (TMPDIR); the reports equal those of `-j 1`, timings
    /// aside. Rebuild mode rebuilds one tree per mutation and takes only 1.
    #[arg(short = 'j', long, value_name = "N", default_value_t = 1, value_parser = parse_jobs)]
    pub jobs: usize,
    /// Balance the shards by the per-mutation seconds of an earlier `battery.json` (every
    /// shard must be given the same file).
    #[arg(long, value_name = "FILE", requires = "shard")]
    pub timings: Option<PathBuf>,
    /// Reuse the verdict of every mutation whose evidence is unchanged since the run that
    /// found it (catalog entry and settings, mode, toolchain, RUST*/CARGO* environment, the
    /// bytes of every file except those of workspace members the mutated package does not
    /// depend on); the cache lives in the host state directory (`harness cache clear`).
    /// Each mutation in `battery.json` says `"reused": true|false`.
    #[arg(long)]
    pub incremental: bool,
    /// With `--incremental`: run this many of the reusable verdicts again, a seeded random
    /// sample, and refuse the run (REUSED-WRONG, exit 2; the cache is dropped) when one
    /// comes out different. A TIMEOUT is re-checked with the timeout it was found under.
    #[arg(long, value_name = "N", default_value_t = 1, requires = "incremental")]
    pub recheck: usize,
    /// Run only the mutations whose occurrences meet the lines changed in the working tree
    /// (uncommitted changes and untracked files included) against the merge base of HEAD
    /// and REV; UNFALSIFIED is then not computed. A revision that does not fit the tree
    /// (unknown, no merge base, no git work tree) is refused (exit 2).
    #[arg(long, value_name = "REV")]
    pub since: Option<String>,
    /// With `--since`: exit 1 (weak) when a function of the members' `src/` that the diff
    /// changes is touched by no mutation of the given catalogs (UNGUARDED-IN-DIFF, always
    /// listed in the reports).
    #[arg(long, requires = "since")]
    pub require_guarded: bool,
    /// With `--since`: also run cargo-mutants' generated mutants inside the same diff
    /// through the switch runner (reports in `<reports>/<catalog>-generated/`); a missed one
    /// makes the exit 1 (weak).
    #[arg(long, requires = "since")]
    pub mutants: bool,
    /// `rebuild`: apply, rebuild and test each mutation in the workspace. `switch`:
    /// compile every mutation that lies in one function body once, in a scratch copy,
    /// behind a run-time switch (`HARNESS_MUTANT`); the others fall back to rebuilds in
    /// the scratch copy. Both give the same report, timings aside. `auto` (the default):
    /// rebuild for a selection too small for switch mode's fixed runs to pay, switch
    /// otherwise; the mode and why are printed and in the report.
    #[arg(long, value_enum, default_value_t = Mode::Auto)]
    pub mode: Mode,
    /// Switch mode: run every listed test for every mutant. By default a mutant's test run
    /// runs only the listed tests that execute its function, as a reach run (each listed
    /// test on its own, recording the switched functions it runs) found them; the others
    /// cannot observe the mutation. The verdicts are the same either way; a mutation no
    /// listed test reaches is NO_COVERAGE in both.
    #[arg(long)]
    pub all_tests: bool,
}

impl BatteryRunArgs {
    /// The options of a battery run with host state in `state`, reports under `reports`
    /// (default `<workspace>/reports`), the host lock held as `lock` says.
    ///
    /// Errors: the `--timings` file cannot be read or is not a battery report with timings.
    pub fn options(
        &self,
        state: &Path,
        reports: Option<PathBuf>,
        lock: String,
    ) -> Result<battery::Options, battery::select::shard::TimingsError> {
        let mut opts = self.untimed_options(state, reports, lock);
        if let (Some(spec), Some(path)) = (self.shard, &self.timings) {
            opts.shard = Some(battery::select::shard::Shard::with_timings(spec, path)?);
        }
        Ok(opts)
    }

    /// [`BatteryRunArgs::options`] without reading `--timings`: a shard is dealt in catalog
    /// order.
    pub fn untimed_options(
        &self,
        state: &Path,
        reports: Option<PathBuf>,
        lock: String,
    ) -> battery::Options {
        battery::Options {
            state_dir: state.to_path_buf(),
            reports_root: reports,
            only: self.only.clone(),
            shard: self.shard.map(battery::select::shard::Shard::by_order),
            lock,
            since: self.since.clone(),
            incremental: self.incremental,
            recheck: self.recheck,
            jobs: self.jobs,
            diff_scope: battery::DiffScope {
                guards: Vec::new(),
                require_guarded: self.require_guarded,
                mutants: self.mutants,
            },
            all_tests: self.all_tests,
            generated: false,
            scratch_name: None,
        }
    }
}

/// `-j N`: a whole number, at least 1.
pub(super) fn parse_jobs(s: &str) -> Result<usize, String> {
    match s.parse::<usize>() {
        Ok(0) => Err("-j 0: at least one test run must go on at a time (give 1 or more)".into()),
        Ok(n) => Ok(n),
        Err(e) => Err(format!("-j {s:?}: not a whole number: {e}")),
    }
}

/// Arguments of `harness battery`.
#[derive(Debug, Clone, clap::Args)]
pub struct BatteryArgs {
    /// Catalog files, run in order.
    #[arg(required = true)]
    pub catalogs: Vec<PathBuf>,
    /// How the batteries run.
    #[command(flatten)]
    pub run: BatteryRunArgs,
    /// The host lock.
    #[command(flatten)]
    pub lock: LockArgs,
    /// The reports.
    #[command(flatten)]
    pub reports: ReportsArgs,
}

/// Runs `harness battery`: each catalog in turn under the host lock, stopping after a
/// refusal or an interruption; returns the worst exit code.
pub fn run(state: &Path, args: &BatteryArgs) -> ExitCode {
    if let Err(e) = battery::check_jobs(args.run.jobs, args.run.mode) {
        eprintln!("harness: {e}");
        return ExitCode::Refused;
    }
    let opts = match args
        .run
        .options(state, args.reports.reports.clone(), String::new())
    {
        Ok(mut o) => {
            o.diff_scope.guards = args.catalogs.clone();
            o
        }
        Err(e) => {
            eprintln!("harness: {e}");
            return ExitCode::Refused;
        }
    };
    if let Err(e) = battery::check_state_dir_of(&args.catalogs, state) {
        eprintln!("harness: {e}");
        return ExitCode::Refused;
    }
    let (hold, lock_note) = match take_lock(state, &args.lock) {
        Ok(x) => x,
        Err(LockFailure {
            locked: Some(detail),
            ..
        }) => return locked_reports(&args.catalogs, &opts, &detail),
        Err(f) => return f.code,
    };
    let opts = battery::Options {
        lock: lock_note,
        ..opts
    };
    let mut code = ExitCode::AllMet;
    for path in &args.catalogs {
        let progress = Progress::auto();
        progress.line(&format!("battery {}", path.display()));
        let res = crate::mutants::in_diff::run_battery(path, &opts, &progress, args.run.mode);
        progress.finish();
        let c = match res {
            Ok(r) => {
                print!("{}", report::text::table(&r.report));
                super::annotate::print_batteries([&r.report]);
                if let Some(f) = &r.report.refusal {
                    eprintln!("harness: {}: {}", f.kind, f.detail);
                }
                for w in &r.written {
                    println!("report: {}", w.display());
                }
                r.report.exit_code
            }
            Err(BatteryError::Catalog(e)) => {
                report_catalog_error(&e);
                ExitCode::Refused
            }
            Err(e) => {
                eprintln!("harness: {e}");
                ExitCode::Refused
            }
        };
        code = code.worst(c);
        if c.stops() {
            break;
        }
    }
    drop(hold);
    code
}

/// Writes the LOCKED report of each catalog (nothing ran); exit 2, or 2 with the error when a
/// catalog cannot be loaded or its report written.
fn locked_reports(catalogs: &[PathBuf], opts: &battery::Options, detail: &str) -> ExitCode {
    let opts = battery::Options {
        lock: "not taken (held by someone else)".into(),
        ..opts.clone()
    };
    for path in catalogs {
        match battery::write_locked(path, &opts, detail) {
            Ok(r) => {
                for w in &r.written {
                    println!("report: {}", w.display());
                }
            }
            Err(BatteryError::Catalog(e)) => report_catalog_error(&e),
            Err(e) => eprintln!("harness: {e}"),
        }
    }
    ExitCode::Refused
}
