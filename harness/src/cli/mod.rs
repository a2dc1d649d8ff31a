//! The command line: the clap [`Cli`] with its [`Command`]s, and the dispatch to one module per subcommand.
//!
//! Every command first restores what a killed run left ([`restore::recover`]), then runs in
//! the module named after it (`harness lane-audit` in [`lane_audit`], `harness tests` in
//! [`test_list`]). The argument groups several commands share live with the command that
//! owns them: [`lock::LockArgs`], [`battery::BatteryRunArgs`] (also `gate`'s) and
//! [`ReportsArgs`] here.

pub mod annotate;
pub mod base_check;
pub mod battery;
pub mod cache;
pub mod check;
pub mod gate;
pub mod init;
pub mod lane_audit;
pub mod list;
pub mod lock;
pub mod merge;
pub mod mutants;
pub mod restore;
pub mod show;
pub mod test_list;

use std::path::PathBuf;

use clap::{Parser, Subcommand};

use crate::battery::select::catalog::CatalogError;
use crate::system::exit::{ExitCode, ProcessExit};

/// The exit codes and refusals of `harness --help` and `harness battery --help`.
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
    Battery(battery::BatteryArgs),
    /// Run the pinned cargo-mutants (takes the host lock), or import an existing
    /// `mutants.out`, and report its mutants grouped by function, with the missed mutants'
    /// diffs; a function with a missed mutant and no named mutation in `--catalog` is
    /// UNGUARDED (exit 1). Reports: `mutants.json`, `mutants.md` in `<reports>/mutants/`.
    Mutants(mutants::MutantsArgs),
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
    #[command(after_help = gate::GATE_EXIT_CODES)]
    Gate(gate::GateArgs),
    /// Join the reports of a battery's shards (`battery --shard K/N`) into the report the
    /// unsharded run writes. Each DIR is one shard's `--reports` folder (holding
    /// `<catalog>/battery.json`). Refuses (exit 2) missing, duplicate or foreign shards,
    /// shards balanced by different timings and shards that did not complete; otherwise
    /// exits as the unsharded battery would (0 all MET, 1 weak).
    Merge(merge::MergeArgs),
    /// The verdict cache of `--incremental` (in the host state directory).
    Cache {
        /// Cache subcommand.
        #[command(subcommand)]
        command: cache::CacheCommand,
    },
    /// The host lock.
    Lock {
        /// Lock subcommand.
        #[command(subcommand)]
        command: lock::LockCommand,
    },
}

/// Where a command writes its reports (shared by `battery`, `gate` and `mutants`).
#[derive(Debug, Clone, Default, clap::Args)]
pub struct ReportsArgs {
    /// Directory under which the report directories are written (default:
    /// `<workspace>/reports`).
    #[arg(long, value_name = "DIR")]
    pub reports: Option<PathBuf>,
}

/// The host state directory, absolute: the children run elsewhere (a test's private
/// `TMPDIR` lies under it, and a relative one would be read from the child's own directory).
fn state_dir(cli: &Cli) -> PathBuf {
    let dir = cli
        .state_dir
        .clone()
        .or_else(|| std::env::var_os("HARNESS_STATE_DIR").map(PathBuf::from))
        .unwrap_or_else(crate::system::lock::default_dir);
    if dir.is_absolute() {
        return dir;
    }
    match std::env::current_dir() {
        Ok(cwd) => cwd.join(dir),
        Err(_) => dir,
    }
}

/// Runs a parsed command line; returns how the process ends.
pub fn run(cli: Cli) -> ProcessExit {
    let state = state_dir(&cli);
    let recovered_ok = restore::recover(&state);
    let code = match cli.command {
        Command::Restore => {
            if recovered_ok {
                ExitCode::AllMet
            } else {
                ExitCode::Refused
            }
        }
        _ if !recovered_ok => ExitCode::Refused,
        Command::Check { catalogs, list } => check::run(&catalogs, list.then_some(state.as_path())),
        Command::Init {
            workspace,
            package,
            output,
        } => init::run(&state, &workspace, package.as_deref(), output.as_deref()),
        Command::Tests { workspace, package } => {
            test_list::run(&state, &workspace, package.as_deref())
        }
        Command::BaseCheck(args) => base_check::run(&args),
        Command::LaneAudit(args) => lane_audit::run(&args),
        Command::Show { catalog, id } => show::run(&catalog, &id),
        Command::Mutants(args) => mutants::run(&state, &args),
        Command::List { catalog } => list::run(&catalog),
        Command::Battery(args) => battery::run(&state, &args),
        Command::Merge(args) => merge::run(&args),
        Command::Cache { command } => cache::run(&state, &command),
        Command::Gate(args) => gate::run(&state, &args),
        Command::Lock { command } => return lock::run(&state, command),
    };
    code.into()
}

/// The exit code of a CI question, or 2 with the error on stderr when it could not be answered.
fn ci_answer(result: anyhow::Result<ExitCode>) -> ExitCode {
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("harness: error: {e:#}");
            ExitCode::Refused
        }
    }
}

/// Prints why a catalog could not be used: CATALOG-DRIFT when it no longer matches the tree.
fn report_catalog_error(e: &CatalogError) {
    if e.is_drift() {
        eprintln!("harness: CATALOG-DRIFT: {e}");
    } else {
        eprintln!("harness: bad catalog: {e}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::battery::report::refusal::RefusalKind;
    use std::path::Path;

    #[test]
    fn help_names_every_refusal() {
        for k in RefusalKind::ALL {
            assert!(
                EXIT_CODES.contains(&format!("\n  {k} ")),
                "{k} is not in `harness battery --help`"
            );
            assert!(
                gate::GATE_EXIT_CODES.contains(k.name()),
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
