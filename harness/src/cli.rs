//! The command line: one clap enum of subcommands and their dispatch.

use std::path::{Path, PathBuf};

use clap::{Parser, Subcommand};

use crate::battery::catalog::{Catalog, CatalogError};
use crate::battery::{self, BatteryError};
use crate::battery::{report, workspace};
use crate::cargo::{CargoCmd, PackageMeta};
use crate::system::exit::ExitCode;
use crate::system::exit::{EXIT_ALL_MET, EXIT_REFUSED};
use crate::system::interrupt;
use crate::system::lock::{self, Hold, LockRecord, Nesting};
use crate::system::progress::Progress;
use crate::system::runner::{OnInterrupt, Output, Runner};

const EXIT_CODES: &str = "\
Exit codes:
  0    every expectation MET (and, on a full run, no test UNFALSIFIED)
  1    the tests are weak: some expectation UNMET or some listed test UNFALSIFIED;
       with --since: a changed function UNGUARDED-IN-DIFF (--require-guarded) or a
       generated mutant inside the diff missed (--mutants)
  2    the instrument could not be trusted: a refusal (below), a bad catalog or a
       state directory inside the workspace
  130  interrupted by a signal (the tree was restored first)
`lock run` exits with its command's exit code.

Refusals (exit 2; the report's `refusal.kind`):
  CATALOG-DRIFT     the catalog no longer matches the tree (a find text absent or not
                    occurring as stated, a duplicate id, a package, test target or
                    feature gone, a mutated file under .git)
  FILTER-DRIFT      the listed tests and the target's tests under `select` differ
  BASELINE-RED      a listed test is not green without any mutation, or the unmutated
                    tree does not build
  FLAKY             the two baseline runs disagree
  STALE-BUILD       the mutated file is in no target rebuilt for the tests (dep-info)
  TREE-DIRTY        the tree differs from its starting state, a file was edited while a
                    mutation was applied to it, or a file appeared while the tests ran
                    that no process of the run created (kept, named)
  LOCKED            the host lock is held by someone else (see --wait); the report is
                    still written
  REUSED-WRONG      --incremental: a reused verdict, run again by --recheck, came out
                    different; the verdict cache is dropped
  HARNESS-FAULT     the harness could not go on: cargo could not be run, a file could not
                    be read or written (named), a switched build failed outside every
                    mutated body

Host state (lock, restore journals): --state-dir, else $HARNESS_STATE_DIR, else
$TMPDIR/harness-<uid>; it must lie outside the workspace (refused before the lock is
taken, exit 2). Every command first restores files left mutated by a run that
was killed (see `harness restore`).";

const GATE_EXIT_CODES: &str = "\
Exit codes:
  0    the test command passed, every catalog test ran and passed in it, and every
       battery held (every expectation MET, no test UNFALSIFIED)
  1    the tests are weak or did not run: the test command failed, a catalog test is an
       island (not executed), failed, or was cut off by fail-fast; or a battery has an
       UNMET expectation or an UNFALSIFIED test. After a failed audit the batteries are
       not run.
  2    the instrument could not be trusted: the log cannot show which tests ran
       (`cargo test -q`: a catalog test UNKNOWN), a battery refusal (CATALOG-DRIFT,
       FILTER-DRIFT, BASELINE-RED, FLAKY, STALE-BUILD, TREE-DIRTY, LOCKED,
       REUSED-WRONG, HARNESS-FAULT; see `harness battery --help`), a bad catalog,
       catalogs of different workspaces, a test command that could not be started, or a
       harness fault
  130  interrupted by a signal (the tree was restored first)

Reports: <reports>/gate/gate.json (schema harness-gate/1), gate.md (pull-request
comment) and test.log (the test command's output), plus each battery's own reports.";

/// `harness`: mutation batteries that cannot silently measure nothing.
#[derive(Debug, Parser)]
#[command(name = "harness", version, about, after_help = EXIT_CODES)]
pub struct Cli {
    /// Host state directory: the host lock and the restore journals.
    #[arg(long, global = true, value_name = "DIR")]
    pub state_dir: Option<PathBuf>,
    /// The subcommand.
    #[command(subcommand)]
    pub command: Command,
}

/// Subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Validate catalogs without building: format, fields, drift against the tree, and the
    /// package and test targets (`cargo metadata`).
    Check {
        /// Catalog files.
        #[arg(required = true)]
        catalogs: Vec<PathBuf>,
        /// Also list the targets' tests (`cargo test ... -- --list`, which builds them) and
        /// refuse a listed test the targets do not hold, naming the nearest real one, and a
        /// test under `select` the catalog does not list.
        #[arg(long)]
        list: bool,
    },
    /// Write a starter catalog for a package: its targets, every test its targets list
    /// (`-- --list`, doc tests included; this builds them) and one commented example
    /// mutation. `harness check` accepts it and `harness battery` runs it (every test
    /// UNFALSIFIED until mutations name it). Exit 0 written, 2 not (the reason on stderr).
    Init {
        /// The workspace (directory holding the root `Cargo.toml`).
        #[arg(long, default_value = ".", value_name = "DIR")]
        workspace: PathBuf,
        /// The package (required when the workspace has several).
        #[arg(long, value_name = "P")]
        package: Option<String>,
        /// The catalog file to write (never overwritten; default
        /// `<workspace>/mutations/<package>.toml`).
        #[arg(long, value_name = "FILE")]
        output: Option<PathBuf>,
    },
    /// Print every test of a package, one a line, exactly as a catalog's `tests` and a
    /// must-run list take them: the library's, binaries' and test targets' tests, then the
    /// doc tests under rustdoc's names (`src/lib.rs - parse (line 7)`). Builds the targets.
    Tests {
        /// The workspace (directory holding the root `Cargo.toml`).
        #[arg(long, default_value = ".", value_name = "DIR")]
        workspace: PathBuf,
        /// The package (required when the workspace has several).
        #[arg(long, value_name = "P")]
        package: Option<String>,
    },
    /// Print one mutation as a unified diff.
    Show {
        /// Catalog file.
        catalog: PathBuf,
        /// Mutation id.
        id: String,
    },
    /// Print the mutations' ids, roles and expected killers.
    List {
        /// Catalog file.
        catalog: PathBuf,
    },
    /// Run batteries (takes the host lock) and write reports to `reports/<catalog>/`.
    #[command(after_help = EXIT_CODES)]
    Battery(BatteryArgs),
    /// Run the pinned cargo-mutants (takes the host lock), or import an existing
    /// `mutants.out`, and report its mutants grouped by function, with the missed mutants'
    /// diffs; a function with a missed mutant and no named mutation in `--catalog` is
    /// UNGUARDED (exit 1). Reports: `mutants.json`, `mutants.md` in `<reports>/mutants/`.
    Mutants(MutantsArgs),
    /// Restore files left mutated by a run that was killed (every command does this first).
    Restore,
    /// Whether named commits are in the base and merge each CI job tested (exit 0 every
    /// answer yes or no, 2 any unknown or no checkout line).
    BaseCheck(crate::ci::cibase::BaseCheckArgs),
    /// Which CI lanes ran the must-run tests (exit 0 all ran and passed in a required lane,
    /// 1 an island, failure or truncation, 2 the logs cannot answer: a test UNKNOWN
    /// (`cargo test -q`), a required lane without a log, unreadable input).
    LaneAudit(crate::ci::audit::LaneAuditArgs),
    /// CI gate: run the test command once, audit its log against the catalogs' test lists,
    /// run the batteries, and write one pull-request report to `reports/gate/`.
    #[command(after_help = GATE_EXIT_CODES)]
    Gate(GateArgs),
    /// Join the reports of a battery's shards (`battery --shard K/N`) into the report the
    /// unsharded run writes. Each DIR is one shard's `--reports` folder (holding
    /// `<catalog>/battery.json`). Refuses (exit 2) missing, duplicate or foreign shards,
    /// shards balanced by different timings and shards that did not complete; otherwise
    /// exits as the unsharded battery would (0 all MET, 1 weak).
    Merge(MergeArgs),
    /// The verdict cache of `--incremental` (in the host state directory).
    Cache {
        /// Cache subcommand.
        #[command(subcommand)]
        command: CacheCommand,
    },
    /// The host lock.
    Lock {
        /// Lock subcommand.
        #[command(subcommand)]
        command: LockCommand,
    },
}

/// How a command takes the host lock (shared by `battery`, `gate`, `mutants` and `lock run`).
#[derive(Debug, Clone, Default, clap::Args)]
pub struct LockArgs {
    /// Wait for the host lock instead of refusing with LOCKED.
    #[arg(long)]
    pub wait: bool,
    /// Expected maximum hold of the lock, in seconds (reported when exceeded).
    #[arg(long, value_name = "SECS")]
    pub ttl: Option<u64>,
    /// Owner name recorded in the lock (default: $USER).
    #[arg(long)]
    pub owner: Option<String>,
}

/// Where a command writes its reports (shared by `battery`, `gate` and `mutants`).
#[derive(Debug, Clone, Default, clap::Args)]
pub struct ReportsArgs {
    /// Directory under which the report directories are written (default:
    /// `<workspace>/reports`).
    #[arg(long, value_name = "DIR")]
    pub reports: Option<PathBuf>,
}

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
    pub shard: Option<crate::battery::shard::ShardSpec>,
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
    /// the scratch copy. Both give the same report, timings aside.
    #[arg(long, value_enum, default_value_t = Mode::Rebuild)]
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
    ) -> Result<battery::Options, battery::shard::TimingsError> {
        let mut opts = self.untimed_options(state, reports, lock);
        if let (Some(spec), Some(path)) = (self.shard, &self.timings) {
            opts.shard = Some(battery::shard::Shard::with_timings(spec, path)?);
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
            shard: self.shard.map(battery::shard::Shard::by_order),
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
        }
    }
}

/// `-j N`: a whole number, at least 1.
fn parse_jobs(s: &str) -> Result<usize, String> {
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

/// `harness gate` arguments.
#[derive(Debug, Clone, clap::Args)]
pub struct GateArgs {
    /// Battery catalogs: their `tests` are the must-run tests of the audit, and they run
    /// after it. All must name the same workspace.
    #[arg(required = true)]
    pub catalogs: Vec<PathBuf>,
    /// The test command, run once with `sh -c` in the workspace root; it must not stop at
    /// the first failing target (`--no-fail-fast`), or the audit reports what it cut off.
    /// Default: `scripts/test` when the workspace has that file, else
    /// `cargo test --workspace --no-fail-fast`.
    #[arg(long, value_name = "CMD")]
    pub test_command: Option<String>,
    /// How the batteries run (`--only`, `--mode`).
    #[command(flatten)]
    pub run: BatteryRunArgs,
    /// The host lock.
    #[command(flatten)]
    pub lock: LockArgs,
    /// The reports: `gate/` and the batteries' `<name>/` directories.
    #[command(flatten)]
    pub reports: ReportsArgs,
}

impl GateArgs {
    /// The gate's options, with host state in `state` and the host lock held as `lock` says.
    pub fn options(&self, state: &Path, lock: String) -> crate::ci::gate::GateOptions {
        crate::ci::gate::GateOptions {
            catalogs: self.catalogs.clone(),
            test_command: self.test_command.clone(),
            battery: self
                .run
                .untimed_options(state, self.reports.reports.clone(), lock),
            timings: self.run.timings.clone(),
            mode: self.run.mode,
        }
    }
}

/// Arguments of `harness merge`.
#[derive(Debug, clap::Args)]
pub struct MergeArgs {
    /// The shards' report folders.
    #[arg(required = true, value_name = "DIR")]
    pub dirs: Vec<PathBuf>,
    /// Where the merged `<catalog>/` folders go.
    #[arg(long, value_name = "OUT")]
    pub reports: PathBuf,
}

/// Arguments of `harness mutants`.
#[derive(Debug, clap::Args)]
pub struct MutantsArgs {
    /// The workspace cargo-mutants runs on.
    #[arg(long, default_value = ".", value_name = "DIR")]
    pub workspace: PathBuf,
    /// Mutate only this package (repeatable).
    #[arg(long, value_name = "P")]
    pub package: Vec<String>,
    /// Mutate only files matching this glob (repeatable).
    #[arg(long = "file", value_name = "GLOB")]
    pub files: Vec<String>,
    /// Mutate only code changed by this diff.
    #[arg(long, value_name = "FILE")]
    pub in_diff: Option<PathBuf>,
    /// Build and run only this test target (cargo-mutants `--cargo-arg=--test=T`; repeatable).
    #[arg(long, value_name = "T")]
    pub test_target: Vec<String>,
    /// Named batteries to join with (repeatable): their mutations guard functions.
    #[arg(long, value_name = "CATALOG")]
    pub catalog: Vec<PathBuf>,
    /// Import this existing `mutants.out` directory instead of running cargo-mutants.
    #[arg(long, value_name = "DIR")]
    pub import: Option<PathBuf>,
    /// The reports (`<reports>/mutants/`).
    #[command(flatten)]
    pub reports: ReportsArgs,
    /// The host lock.
    #[command(flatten)]
    pub lock: LockArgs,
    /// Run the generated mutants (`cargo mutants --list --json`) through the harness's own
    /// battery runner instead, with the first `--catalog`'s package, targets and test list:
    /// listed tests, per-test kill attribution, verified rebuilds, byte-identical restore
    /// and the kill matrix. The mutants are reported in their own terms (caught with the
    /// failing tests, missed, unviable, timeout, crashed, tests missing) in
    /// `<reports>/mutants/`, the battery's reports beside them. Exit 0: no mutant missed;
    /// 1: some mutant missed; 2: the battery refused or could not run; 130: interrupted.
    #[arg(long, requires = "catalog")]
    pub via_harness: bool,
    /// Battery mode for `--via-harness`.
    #[arg(long, value_enum, default_value_t = Mode::Rebuild)]
    pub mode: Mode,
    /// How many mutants are tested at once: cargo-mutants' own `--jobs` (each job in its
    /// own copy of the tree), or with `--via-harness --mode switch` the switch runner's
    /// `-j N` (as `battery -j N`; rebuild mode takes only 1).
    #[arg(short = 'j', long, value_name = "N", default_value_t = 1, value_parser = parse_jobs)]
    pub jobs: usize,
}

pub use crate::battery::Mode;

/// `harness cache` subcommands.
#[derive(Debug, Subcommand)]
pub enum CacheCommand {
    /// Remove every cached verdict: the next `--incremental` run runs every mutation.
    Clear,
}

/// `harness lock` subcommands.
#[derive(Debug, Subcommand)]
pub enum LockCommand {
    /// Run a command holding the host lock.
    Run {
        /// The host lock.
        #[command(flatten)]
        lock: LockArgs,
        /// The command and its arguments.
        #[arg(last = true, required = true)]
        command: Vec<String>,
    },
    /// Print who holds the host lock.
    Status,
}

/// The host state directory, absolute: the children run elsewhere (a test's private
/// `TMPDIR` lies under it, and a relative one would be read from the child's own directory).
fn state_dir(cli: &Cli) -> PathBuf {
    let dir = cli
        .state_dir
        .clone()
        .or_else(|| std::env::var_os("HARNESS_STATE_DIR").map(PathBuf::from))
        .unwrap_or_else(lock::default_dir);
    if dir.is_absolute() {
        return dir;
    }
    match std::env::current_dir() {
        Ok(cwd) => cwd.join(dir),
        Err(_) => dir,
    }
}

fn default_owner() -> String {
    std::env::var("USER").unwrap_or_else(|_| "unknown".into())
}

/// Runs a parsed command line; returns the process exit code.
pub fn run(cli: Cli) -> i32 {
    let state = state_dir(&cli);
    let recovered_ok = recover(&state);
    match cli.command {
        Command::Restore => {
            if recovered_ok {
                EXIT_ALL_MET
            } else {
                EXIT_REFUSED
            }
        }
        _ if !recovered_ok => EXIT_REFUSED,
        Command::Check { catalogs, list } => check(&catalogs, list.then_some(state.as_path())),
        Command::Init {
            workspace,
            package,
            output,
        } => init(&state, &workspace, package.as_deref(), output.as_deref()),
        Command::Tests { workspace, package } => tests(&state, &workspace, package.as_deref()),
        Command::BaseCheck(args) => ci_answer(crate::ci::cibase::run(&args)),
        Command::LaneAudit(args) => ci_answer(crate::ci::audit::run(&args)),
        Command::Show { catalog, id } => show(&catalog, &id),
        Command::Mutants(args) => run_mutants(&state, &args),
        Command::List { catalog } => list(&catalog),
        Command::Battery(args) => run_battery(&state, &args),
        Command::Merge(args) => run_merge(&args),
        Command::Cache {
            command: CacheCommand::Clear,
        } => match battery::cache::clear(&state) {
            Ok(n) => {
                println!(
                    "removed {n} verdict cache file(s) from {}",
                    battery::cache::cache_dir(&state).display()
                );
                EXIT_ALL_MET
            }
            Err(e) => {
                eprintln!(
                    "harness: {}: cannot clear the verdict cache: {e}",
                    battery::cache::cache_dir(&state).display()
                );
                EXIT_REFUSED
            }
        },
        Command::Gate(args) => run_gate(&state, &args),
        Command::Lock {
            command: LockCommand::Run { lock, command },
        } => lock_run(&state, &lock, command),
        Command::Lock {
            command: LockCommand::Status,
        } => lock_status(&state),
    }
}

/// The exit code of a CI question, or 2 with the error on stderr when it could not be answered.
fn ci_answer(result: anyhow::Result<i32>) -> i32 {
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("harness: error: {e:#}");
            EXIT_REFUSED
        }
    }
}

/// Restores from journals of dead runs; false if something could not be put back.
fn recover(state: &Path) -> bool {
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
    for (dir, res) in battery::parallel::recover_temp_dirs(state) {
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

fn report_catalog_error(e: &CatalogError) {
    if e.is_drift() {
        eprintln!("harness: CATALOG-DRIFT: {e}");
    } else {
        eprintln!("harness: bad catalog: {e}");
    }
}

/// `harness check`; with `list` (the state directory), also the tests against the targets'
/// own listing.
fn check(catalogs: &[PathBuf], list: Option<&Path>) -> i32 {
    let mut code = EXIT_ALL_MET;
    for path in catalogs {
        match Catalog::load(path).and_then(|c| c.prepare().map(|p| (c, p))) {
            Ok((c, p)) => match check_targets(&c) {
                Err(e) => {
                    eprintln!("harness: CATALOG-DRIFT: {}: {e}", path.display());
                    code = EXIT_REFUSED;
                }
                Ok(packages) => {
                    for w in battery::gates::unreachable_mutations(&c, &p, &packages) {
                        eprintln!("harness: warning: {}: {w}", path.display());
                    }
                    if p.is_empty() {
                        eprintln!(
                            "harness: warning: {}: no [[mutation]] yet: every listed test will be UNFALSIFIED",
                            path.display()
                        );
                    }
                    if let Some(state) = list
                        && let Err(e) = check_listed(&c, state)
                    {
                        eprintln!("harness: CATALOG-DRIFT: {}: {e}", path.display());
                        code = EXIT_REFUSED;
                        continue;
                    }
                    code = check_place(&c, &p, path, code);
                }
            },
            Err(e) => {
                report_catalog_error(&e);
                code = EXIT_REFUSED;
            }
        }
    }
    code
}

/// `check`'s last word on one catalog: where its target directory lies (or why it cannot).
fn check_place(
    c: &Catalog,
    p: &[crate::battery::catalog::PreparedMutation],
    path: &Path,
    code: i32,
) -> i32 {
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
            EXIT_REFUSED
        }
    }
}

/// `check --list`: every listed test is one the targets hold (the nearest real one named
/// when not), and every test of the targets under `select` is listed.
fn check_listed(c: &Catalog, state: &Path) -> Result<(), String> {
    let real = battery::starter::leaving_no_lock(&c.root, || {
        CargoCmd::new(c).with_state_dir(state).list()
    })
    .map_err(|e| format!("cannot list the targets' tests: {e}"))?;
    let (missing, unlisted) = battery::filter_drift(&c.spec.tests, &real, &c.spec.select);
    let mut parts: Vec<String> = missing
        .iter()
        .map(|t| {
            let i = c.spec.tests.iter().position(|x| x == t).unwrap_or(0);
            format!(
                "tests[{i}] {t:?} is not a test of the targets ({})",
                battery::nearest::describe(t, &real)
            )
        })
        .collect();
    if !unlisted.is_empty() {
        parts.push(format!(
            "in the targets under the pattern {:?} but not listed: {}",
            c.spec.select,
            unlisted.join(", ")
        ));
    }
    if parts.is_empty() {
        Ok(())
    } else {
        Err(parts.join("; "))
    }
}

/// `harness tests`: every test of the package, one a line.
fn tests(state: &Path, workspace: &Path, package: Option<&str>) -> i32 {
    match battery::starter::list(workspace, package, state) {
        Ok(l) => {
            for t in &l.tests {
                println!("{t}");
            }
            EXIT_ALL_MET
        }
        Err(e) => {
            eprintln!("harness: tests: {e}");
            EXIT_REFUSED
        }
    }
}

/// `harness init`: the starter catalog of the package, written to `output`.
fn init(state: &Path, workspace: &Path, package: Option<&str>, output: Option<&Path>) -> i32 {
    let listing = match battery::starter::list(workspace, package, state) {
        Ok(l) => l,
        Err(e) => {
            eprintln!("harness: init: {e}");
            return EXIT_REFUSED;
        }
    };
    let out = match output {
        Some(o) => o.to_path_buf(),
        None => workspace
            .join("mutations")
            .join(format!("{}.toml", listing.probe.spec.package)),
    };
    if let Err(e) = battery::starter::write_catalog(&listing, &out) {
        eprintln!("harness: init: {e}");
        return EXIT_REFUSED;
    }
    println!(
        "wrote {} (package {}, {} tests); next: add a [[mutation]], then `harness check --list {}` and `harness battery {}`",
        out.display(),
        listing.probe.spec.package,
        listing.tests.len(),
        out.display(),
        out.display()
    );
    EXIT_ALL_MET
}

/// The package and test targets named by the catalog exist (`cargo metadata`, no build);
/// returns the workspace's packages.
fn check_targets(c: &Catalog) -> Result<Vec<PackageMeta>, String> {
    let packages = CargoCmd::new(c).metadata().map_err(|e| e.to_string())?;
    PackageMeta::check_targets(&packages, &c.spec)?;
    Ok(packages)
}

fn show(path: &Path, id: &str) -> i32 {
    let res = Catalog::load(path).and_then(|c| c.prepare().map(|p| (c, p)));
    let (c, prepared) = match res {
        Ok(x) => x,
        Err(e) => {
            report_catalog_error(&e);
            return EXIT_REFUSED;
        }
    };
    let Some(pm) = prepared.iter().find(|p| c.spec.mutations[p.index].id == id) else {
        eprintln!("harness: {}: no mutation with id {id:?}", path.display());
        return EXIT_REFUSED;
    };
    let m = &c.spec.mutations[pm.index];
    println!("# {} ({}): {}", m.id, m.role, m.title);
    if m.killed_by.is_empty() {
        println!("# expected killers: none (expected to survive)");
    } else {
        println!("# expected killers: {}", m.killed_by.join(", "));
    }
    if let Some(msg) = &m.expect_message {
        println!("# expected message: {msg:?}");
    }
    println!("# rationale: {}", m.rationale);
    let old = String::from_utf8_lossy(&pm.original);
    let new = String::from_utf8_lossy(&pm.mutated);
    let name = pm.rel_path.display().to_string();
    let diff = similar::TextDiff::from_lines(old.as_ref(), new.as_ref());
    print!(
        "{}",
        diff.unified_diff()
            .context_radius(3)
            .header(&format!("a/{name}"), &format!("b/{name}"))
    );
    EXIT_ALL_MET
}

fn list(path: &Path) -> i32 {
    let c = match Catalog::load(path) {
        Ok(c) => c,
        Err(e) => {
            report_catalog_error(&e);
            return EXIT_REFUSED;
        }
    };
    let w = c
        .spec
        .mutations
        .iter()
        .map(|m| m.id.len())
        .max()
        .unwrap_or(2);
    for m in &c.spec.mutations {
        let killers = if m.killed_by.is_empty() {
            "(expected to survive)".to_string()
        } else {
            m.killed_by.join(", ")
        };
        println!("{:<w$}  {:<7}  {killers}", m.id, m.role.to_string());
    }
    EXIT_ALL_MET
}

fn command_line() -> Vec<String> {
    std::env::args().collect()
}

fn run_battery(state: &Path, args: &BatteryArgs) -> i32 {
    if let Err(e) = battery::check_jobs(args.run.jobs, args.run.mode) {
        eprintln!("harness: {e}");
        return EXIT_REFUSED;
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
            return EXIT_REFUSED;
        }
    };
    if let Err(e) = battery::check_state_dir_of(&args.catalogs, state) {
        eprintln!("harness: {e}");
        return EXIT_REFUSED;
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
        let res = battery::run_mode(path, &opts, &progress, args.run.mode);
        progress.finish();
        let c = match res {
            Ok(r) => {
                print!("{}", report::table(&r.report));
                if let Some(f) = &r.report.refusal {
                    eprintln!("harness: {}: {}", f.kind, f.detail);
                }
                for w in &r.written {
                    println!("report: {}", w.display());
                }
                ExitCode::of(r.report.exit_code)
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
    code.code()
}

fn run_merge(args: &MergeArgs) -> i32 {
    match battery::merge::merge(&args.dirs, &args.reports) {
        Ok(merged) => {
            let mut code = ExitCode::AllMet;
            for m in merged {
                print!("{}", report::table(&m.report));
                for w in &m.written {
                    println!("report: {}", w.display());
                }
                code = code.worst(ExitCode::of(m.report.exit_code));
            }
            code.code()
        }
        Err(e) => {
            eprintln!("harness: merge: {e}");
            EXIT_REFUSED
        }
    }
}

/// Writes the LOCKED report of each catalog (nothing ran); exit 2, or 2 with the error when a
/// catalog cannot be loaded or its report written.
fn locked_reports(catalogs: &[PathBuf], opts: &battery::Options, detail: &str) -> i32 {
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
    EXIT_REFUSED
}

/// Why the host lock was not taken: the exit code to return and, for LOCKED, the message
/// (already printed).
struct LockFailure {
    code: i32,
    locked: Option<String>,
}

/// Takes the host lock for a battery or gate (running under an ancestor's hold); on
/// failure, what to return.
fn take_lock(state: &Path, args: &LockArgs) -> Result<(Hold, String), LockFailure> {
    let owner = args.owner.clone().unwrap_or_else(default_owner);
    let record = LockRecord::for_current(&owner, command_line(), args.ttl);
    let hold = match lock::acquire(state, record, Nesting::RunUnder, args.wait, &mut |h| {
        eprintln!(
            "harness: waiting for the host lock held by {}",
            h.describe()
        )
    }) {
        Ok(h) => h,
        Err(lock::LockError::Interrupted(_)) => {
            return Err(LockFailure {
                code: interrupt::EXIT_INTERRUPTED,
                locked: None,
            });
        }
        Err(e) => {
            eprintln!("harness: {e}");
            let locked = matches!(e, lock::LockError::Held { .. }).then(|| e.to_string());
            return Err(LockFailure {
                code: EXIT_REFUSED,
                locked,
            });
        }
    };
    let lock_note = match &hold {
        Hold::Own { .. } => "own".to_string(),
        Hold::Ancestor(r) => {
            eprintln!(
                "harness: running under the host lock held by ancestor {}",
                r.describe()
            );
            format!("ancestor pid {}", r.holder.pid)
        }
    };
    Ok((hold, lock_note))
}

fn run_gate(state: &Path, args: &GateArgs) -> i32 {
    if let Err(e) = battery::check_jobs(args.run.jobs, args.run.mode) {
        eprintln!("harness: gate: {e}");
        return EXIT_REFUSED;
    }
    if let Err(e) = battery::check_state_dir_of(&args.catalogs, state) {
        eprintln!("harness: gate: {e}");
        return EXIT_REFUSED;
    }
    let (hold, lock_note) = match take_lock(state, &args.lock) {
        Ok(x) => x,
        Err(f) => return f.code,
    };
    let progress = Progress::auto();
    let res = crate::ci::gate::run(&args.options(state, lock_note), &progress);
    progress.finish();
    drop(hold);
    match res {
        Ok(out) => {
            print!("{}", crate::ci::gate::summary(&out.report));
            for w in &out.written {
                println!("report: {}", w.display());
            }
            out.report.exit_code
        }
        Err(crate::ci::gate::GateError::Catalog(e)) => {
            report_catalog_error(&e);
            EXIT_REFUSED
        }
        Err(e) => {
            eprintln!("harness: gate: {e}");
            EXIT_REFUSED
        }
    }
}

fn lock_run(state: &Path, args: &LockArgs, command: Vec<String>) -> i32 {
    let owner = args.owner.clone().unwrap_or_else(default_owner);
    let record = LockRecord::for_current(&owner, command.clone(), args.ttl);
    let hold = match lock::acquire(state, record, Nesting::Refuse, args.wait, &mut |h| {
        eprintln!(
            "harness: waiting for the host lock held by {}",
            h.describe()
        )
    }) {
        Ok(h) => h,
        Err(lock::LockError::Interrupted(_)) => return interrupt::EXIT_INTERRUPTED,
        Err(e) => {
            eprintln!("harness: {e}");
            return EXIT_REFUSED;
        }
    };
    // The command inherits the lock's descriptor and keeps the lock held for as long as it
    // (or anything it started) lives, also if this process is killed; it is therefore not
    // recorded as an orphan for a later command to kill.
    let res = Runner::new(&command[0])
        .args(&command[1..])
        .output(Output::Inherit)
        .on_interrupt(OnInterrupt::Forward)
        .run();
    drop(hold);
    match res {
        Ok(done) => done.status.code().unwrap_or_else(|| {
            use std::os::unix::process::ExitStatusExt;
            128 + done.status.signal().unwrap_or(0)
        }),
        Err(e) => {
            eprintln!("harness: {e}");
            EXIT_REFUSED
        }
    }
}

fn lock_status(state: &Path) -> i32 {
    match lock::status(state) {
        Ok(None) => {
            println!("host lock {}: free", state.display());
            EXIT_ALL_MET
        }
        Ok(Some(r)) => {
            let now = if r.holder.is_alive() {
                String::new()
            } else {
                let pids: Vec<String> = lock::fd_holders(&state.join("host.lock"))
                    .iter()
                    .map(u32::to_string)
                    .collect();
                format!("; held now by pid {}", pids.join(", "))
            };
            println!(
                "host lock {}: held by {}{now}",
                state.display(),
                r.describe()
            );
            EXIT_ALL_MET
        }
        Err(e) => {
            eprintln!("harness: {e}");
            EXIT_REFUSED
        }
    }
}

fn run_mutants(state: &Path, args: &MutantsArgs) -> i32 {
    use crate::mutants;
    if args.via_harness {
        return run_mutants_via_harness(state, args);
    }
    let named = match mutants::named_sites(&args.catalog) {
        Ok(n) => n,
        Err(e) => {
            eprintln!("harness: {e}");
            return EXIT_REFUSED;
        }
    };
    let out_dir = match &args.import {
        Some(d) => d.clone(),
        None => {
            let hold = match take_lock(state, &args.lock) {
                Ok((hold, _)) => hold,
                Err(f) => return f.code,
            };
            let opts = mutants::ToolOptions {
                workspace: args.workspace.clone(),
                output: args
                    .workspace
                    .join("target")
                    .join("harness")
                    .join("cargo-mutants"),
                packages: args.package.clone(),
                files: args.files.clone(),
                in_diff: args.in_diff.clone(),
                test_targets: args.test_target.clone(),
                timeout: None,
                jobs: args.jobs,
                state_dir: Some(state.to_path_buf()),
            };
            let res = mutants::run_tool(&opts);
            drop(hold);
            match res {
                Ok(d) => d,
                Err(mutants::MutantsError::Interrupted(_)) => return interrupt::EXIT_INTERRUPTED,
                Err(e) => {
                    eprintln!("harness: {e}");
                    return EXIT_REFUSED;
                }
            }
        }
    };
    let report = match mutants::import(&out_dir, &named) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("harness: {e}");
            return EXIT_REFUSED;
        }
    };
    print!("{}", mutants::markdown(&report));
    let dir = args
        .reports
        .reports
        .clone()
        .unwrap_or_else(|| args.workspace.join("reports"))
        .join("mutants");
    match mutants::write_reports(&dir, &report) {
        Ok(paths) => {
            for p in paths {
                println!("report: {}", p.display());
            }
        }
        Err(e) => {
            eprintln!("harness: {}: cannot write reports: {e}", dir.display());
            return EXIT_REFUSED;
        }
    }
    if report.unguarded.is_empty() {
        EXIT_ALL_MET
    } else {
        crate::system::exit::EXIT_WEAK
    }
}

fn run_mutants_via_harness(state: &Path, args: &MutantsArgs) -> i32 {
    if let Err(e) = battery::check_jobs(args.jobs, args.mode) {
        eprintln!("harness: {e}");
        return EXIT_REFUSED;
    }
    // Only its workspace, package, targets and tests are used: it needs no mutation.
    let base = match Catalog::load_base(&args.catalog[0]) {
        Ok(c) => c,
        Err(e) => {
            report_catalog_error(&e);
            return EXIT_REFUSED;
        }
    };
    // cargo-mutants' listing (`cargo metadata`), the listing of another package's tests
    // and the batteries' builds create the workspace's Cargo.lock when it has none: that
    // lock is this command's, removed at the end, so the tree is left as it was found.
    if let Err(e) = battery::check_state_dir(&base.root, state) {
        eprintln!("harness: {e}");
        return EXIT_REFUSED;
    }
    let lock_path = base.root.join("Cargo.lock");
    let lock_absent = std::fs::symlink_metadata(&lock_path).is_err();
    let code = via_harness(state, args, &base);
    if lock_absent && lock_path.is_file() {
        match std::fs::remove_file(&lock_path) {
            Ok(()) => eprintln!(
                "harness: removed the Cargo.lock this command's cargo created (the tree had none)"
            ),
            Err(e) => {
                eprintln!("harness: {}: cannot remove: {e}", lock_path.display());
                return ExitCode::of(code).worst(ExitCode::Refused).code();
            }
        }
    }
    code
}

fn via_harness(state: &Path, args: &MutantsArgs, base: &Catalog) -> i32 {
    use crate::mutants;
    let out = base
        .root
        .join("target")
        .join("harness")
        .join("cargo-mutants");
    let opts = mutants::ToolOptions {
        workspace: base.root.clone(),
        output: out.clone(),
        packages: args.package.clone(),
        files: args.files.clone(),
        in_diff: args.in_diff.clone(),
        test_targets: Vec::new(),
        timeout: None,
        jobs: 1,
        state_dir: Some(state.to_path_buf()),
    };
    let listed = match mutants::list_tool(&opts) {
        Ok(l) => l,
        Err(e) => {
            eprintln!("harness: {e}");
            return EXIT_REFUSED;
        }
    };
    let named = match mutants::named_sites(&args.catalog) {
        Ok(n) => n,
        Err(e) => {
            eprintln!("harness: {e}");
            return EXIT_REFUSED;
        }
    };
    let (hold, lock_note) = match take_lock(state, &args.lock) {
        Ok(x) => x,
        Err(f) => return f.code,
    };
    let code = via_harness_batteries(state, args, base, &listed, &named, lock_note);
    drop(hold);
    code
}

/// The run settings (package, targets, tests) each package's generated mutants are
/// tested with, as cargo-mutants tests a mutant with the tests of the package it lies in:
/// the base catalog's own for its package; for another package every test of its
/// library, binaries, test targets and doc tests (`cargo test -p P`'s tests), listed with
/// `--list` (which builds them). `Err` is the exit code, the error printed.
fn package_spec(
    state: &Path,
    base: &Catalog,
    packages: &[PackageMeta],
    package: &str,
) -> Result<Option<crate::battery::catalog::CatalogSpec>, i32> {
    if package == base.spec.package {
        return Ok(Some(base.spec.clone()));
    }
    let Some(p) = packages.iter().find(|p| p.name == package) else {
        eprintln!(
            "harness: cargo-mutants listed mutants of package {package}, which cargo metadata does not list"
        );
        return Err(EXIT_REFUSED);
    };
    let mut spec = base.spec.clone();
    spec.package = package.to_string();
    spec.lib_tests = p.has_lib;
    spec.bin_targets = p.bins.clone();
    spec.test_targets = p.test_targets.clone();
    spec.doc_tests = p.has_lib && p.lib_doctest;
    // The base catalog's features are its package's; another package is tested with its
    // default features, as cargo-mutants does.
    spec.features = Vec::new();
    spec.no_default_features = false;
    spec.select = String::new();
    spec.tests = Vec::new();
    spec.mutations = Vec::new();
    let probe = Catalog {
        path: base.path.clone(),
        name: base.name.clone(),
        root: base.root.clone(),
        target_dir: base.target_dir.clone(),
        spec: spec.clone(),
    };
    eprintln!("harness: listing the tests of package {package}");
    match CargoCmd::new(&probe).with_state_dir(state).list() {
        Ok(tests) if tests.is_empty() => Ok(None),
        Ok(tests) => {
            spec.tests = tests;
            Ok(Some(spec))
        }
        Err(crate::cargo::CargoError::Interrupted(_)) => Err(interrupt::EXIT_INTERRUPTED),
        Err(e) => {
            eprintln!("harness: cannot list the tests of package {package}: {e}");
            Err(EXIT_REFUSED)
        }
    }
}

/// The generated catalogs of `listed` (one per package, each with the tests of its
/// package) run as batteries, one after another, and joined into one report of the
/// mutants in their own terms. Returns the exit code.
fn via_harness_batteries(
    state: &Path,
    args: &MutantsArgs,
    base: &Catalog,
    listed: &[crate::mutants::MutantInfo],
    named: &[crate::mutants::NamedSite],
    lock_note: String,
) -> i32 {
    use crate::mutants;
    let out = base
        .root
        .join("target")
        .join("harness")
        .join("cargo-mutants");
    let mut by_package: Vec<(String, Vec<(usize, &mutants::MutantInfo)>)> = Vec::new();
    for (n, m) in listed.iter().enumerate() {
        match by_package.iter_mut().find(|(p, _)| *p == m.package) {
            Some((_, v)) => v.push((n, m)),
            None => by_package.push((m.package.clone(), vec![(n, m)])),
        }
    }
    let several = by_package.len() > 1 || by_package.iter().any(|(p, _)| *p != base.spec.package);
    let packages = if several {
        match CargoCmd::new(base).with_state_dir(state).metadata() {
            Ok(p) => p,
            Err(e) => {
                eprintln!("harness: {e}");
                return EXIT_REFUSED;
            }
        }
    } else {
        Vec::new()
    };
    let mut paths = Vec::new();
    for (package, mutants_of) in &by_package {
        let spec = match package_spec(state, base, &packages, package) {
            Ok(Some(s)) => s,
            Ok(None) => {
                eprintln!(
                    "harness: package {package} has no tests: its {} generated mutants are left out (no test can catch them)",
                    mutants_of.len()
                );
                continue;
            }
            Err(code) => return code,
        };
        let mut spec = spec;
        spec.name = Some(if several {
            format!("{}-generated-{package}", base.name)
        } else {
            format!("{}-generated", base.name)
        });
        let (spec, skipped) = mutants::generated_mutations(base, spec, mutants_of);
        for s in &skipped {
            eprintln!("harness: generated mutant left out: {s}");
        }
        if spec.mutations.is_empty() {
            continue;
        }
        let name = spec.name.clone().unwrap_or_default();
        let path = out.join(format!("{name}.toml"));
        let text = match toml::to_string(&spec) {
            Ok(t) => t,
            Err(e) => {
                eprintln!("harness: cannot write the generated catalog: {e}");
                return EXIT_REFUSED;
            }
        };
        if let Err(e) = std::fs::create_dir_all(&out).and_then(|_| std::fs::write(&path, text)) {
            eprintln!("harness: {}: {e}", path.display());
            return EXIT_REFUSED;
        }
        eprintln!(
            "harness: {} generated mutants of package {package} as catalog {}",
            spec.mutations.len(),
            path.display()
        );
        paths.push(path);
    }
    let opts = battery::Options {
        state_dir: state.to_path_buf(),
        reports_root: args.reports.reports.clone(),
        only: None,
        shard: None,
        lock: lock_note,
        since: None,
        incremental: false,
        recheck: 0,
        jobs: args.jobs,
        diff_scope: battery::DiffScope::default(),
        all_tests: false,
        generated: true,
    };
    let mut runs = Vec::new();
    for path in &paths {
        let progress = Progress::auto();
        progress.line(&format!("battery {}", path.display()));
        let res = battery::run_mode(path, &opts, &progress, args.mode);
        progress.finish();
        let run = match res {
            Ok(r) => r,
            Err(BatteryError::Catalog(e)) => {
                report_catalog_error(&e);
                return EXIT_REFUSED;
            }
            Err(e) => {
                eprintln!("harness: {e}");
                return EXIT_REFUSED;
            }
        };
        let battery_code = ExitCode::of(run.report.exit_code);
        if battery_code.stops() {
            if let Some(f) = &run.report.refusal {
                eprintln!("harness: {}: {}", f.kind, f.detail);
            }
            return battery_code.code();
        }
        runs.push(run);
    }
    let reports: Vec<&report::BatteryReport> = runs.iter().map(|r| &r.report).collect();
    let report = mutants::from_battery(&reports, listed, mutants::CARGO_MUTANTS_VERSION, named);
    print!("{}", mutants::markdown(&report));
    let dir = args
        .reports
        .reports
        .clone()
        .unwrap_or_else(|| base.root.join("reports"))
        .join("mutants");
    let written = mutants::write_reports(&dir, &report);
    for p in runs
        .iter()
        .flat_map(|r| r.written.iter())
        .chain(written.iter().flatten())
    {
        println!("report: {}", p.display());
    }
    if let Err(e) = written {
        eprintln!("harness: {}: cannot write reports: {e}", dir.display());
        return EXIT_REFUSED;
    }
    if report.missed > 0 {
        crate::system::exit::EXIT_WEAK
    } else {
        EXIT_ALL_MET
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::battery::RefusalKind;

    #[test]
    fn help_names_every_refusal() {
        for k in RefusalKind::ALL {
            assert!(
                EXIT_CODES.contains(&format!("\n  {k} ")),
                "{k} is not in `harness battery --help`"
            );
            assert!(
                GATE_EXIT_CODES.contains(k.name()),
                "{k} is not in the gate's help"
            );
        }
    }

    #[test]
    fn lock_and_reports_options_parse_the_same_everywhere() {
        let cli = Cli::try_parse_from([
            "harness",
            "battery",
            "c.toml",
            "--wait",
            "--ttl",
            "5",
            "--owner",
            "me",
            "--reports",
            "r",
        ])
        .unwrap();
        let Command::Battery(b) = cli.command else {
            panic!("not battery")
        };
        assert!(b.lock.wait && b.lock.ttl == Some(5) && b.lock.owner.as_deref() == Some("me"));
        assert_eq!(b.reports.reports.as_deref(), Some(Path::new("r")));
        let cli = Cli::try_parse_from(["harness", "mutants", "--wait", "--reports", "r"]).unwrap();
        let Command::Mutants(m) = cli.command else {
            panic!("not mutants")
        };
        assert!(m.lock.wait);
        assert_eq!(m.reports.reports.as_deref(), Some(Path::new("r")));
    }
}
