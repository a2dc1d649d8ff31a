//! `harness gate`: the CI gate's arguments, turned into a front door request ([`crate::door`]) and run.

use std::path::{Path, PathBuf};

use super::ReportsArgs;
use super::battery::BatteryRunArgs;
use super::lock::LockArgs;
use crate::system::exit::ExitCode;
use crate::system::progress::Progress;

/// The exit codes and reports of `harness gate --help`.
pub(super) const GATE_EXIT_CODES: &str = "\
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

/// Runs `harness gate` through the front door ([`crate::door`]: the catalogs planned,
/// preflighted and locked as `battery` does it); returns the gate's exit code.
pub fn run(state: &Path, args: &GateArgs) -> ExitCode {
    let door = match args
        .run
        .open(state, &args.catalogs, &args.reports, &args.lock)
    {
        Ok(d) => d,
        Err(code) => return code,
    };
    let progress = Progress::auto();
    let res = crate::ci::gate::run(&door, args.test_command.as_deref(), &progress);
    progress.finish();
    drop(door);
    match res {
        Ok(out) => {
            print!("{}", crate::ci::gate::summary(&out.report));
            super::annotate::print_batteries(
                out.report
                    .batteries
                    .iter()
                    .filter_map(|b| b.report.as_ref()),
            );
            for w in &out.written {
                println!("report: {}", w.display());
            }
            out.report.exit_code
        }
        Err(e) => {
            eprintln!("harness: gate: {e}");
            ExitCode::Refused
        }
    }
}
