//! `harness battery`: run mutation batteries, with the run options `gate` shares.

use std::path::{Path, PathBuf};

use super::ReportsArgs;
use super::lock::LockArgs;
use crate::battery::{self, Mode, report};
use crate::door::{Door, Request, Role};
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
    /// The front door's request for `catalogs` (as `role`) run as these arguments say, with
    /// host state in `state`, reports under `reports` (default `<workspace>/reports`), the
    /// host lock taken as `lock` says.
    pub fn request(
        &self,
        state: &Path,
        catalogs: &[PathBuf],
        role: Role,
        reports: &ReportsArgs,
        lock: &LockArgs,
    ) -> Request {
        Request {
            catalogs: catalogs.to_vec(),
            role,
            options: self.options(state, reports.reports.clone()),
            timings: self.timings.clone(),
            mode: self.mode,
            lock: lock.request(),
        }
    }

    /// Opens the front door for `catalogs`, the batteries to run (`battery`, `gate`):
    /// [`BatteryRunArgs::request`] through [`Door::open`]. `Err` is the exit code of its
    /// refusal (printed).
    pub fn open(
        &self,
        state: &Path,
        catalogs: &[PathBuf],
        reports: &ReportsArgs,
        lock: &LockArgs,
    ) -> Result<Door, ExitCode> {
        Door::open(&self.request(state, catalogs, Role::Batteries, reports, lock))
    }

    /// The battery options of these arguments, with host state in `state` and reports
    /// under `reports`; a shard is dealt in catalog order (the front door balances it by
    /// `--timings`), the lock and the guards are the front door's to fill.
    fn options(&self, state: &Path, reports: Option<PathBuf>) -> battery::Options {
        battery::Options {
            state_dir: state.to_path_buf(),
            reports_root: reports,
            only: self.only.clone(),
            shard: self.shard.map(battery::select::shard::Shard::by_order),
            lock: String::new(),
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
            scratch_incremental: true,
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

/// Runs `harness battery` through the front door ([`crate::door`]): the catalogs planned,
/// preflighted and locked at once, then each battery in turn, stopping after a refusal or
/// an interruption; returns the worst exit code.
pub fn run(state: &Path, args: &BatteryArgs) -> ExitCode {
    let door = match args
        .run
        .open(state, &args.catalogs, &args.reports, &args.lock)
    {
        Ok(d) => d,
        Err(code) => return code,
    };
    let mut code = ExitCode::AllMet;
    for checked in door.planned() {
        let progress = Progress::auto();
        progress.line(&format!("battery {}", checked.catalog().path.display()));
        let res = door.run(checked, &progress);
        progress.finish();
        let c = match res {
            Ok(r) => {
                print!("{}", report::text::table(&r.report));
                super::annotate::print_batteries([&r.report]);
                for w in &r.written {
                    println!("report: {}", w.display());
                }
                r.report.exit_code
            }
            Err(e) => {
                eprintln!("harness: {}", crate::door::error_message(&e));
                ExitCode::Refused
            }
        };
        code = code.worst(c);
        if c.stops() {
            break;
        }
    }
    code
}
