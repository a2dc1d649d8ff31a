//! `harness gate`: one CI step that runs the test command, audits its log against the batteries' test lists, runs the batteries and writes one pull-request report.
//!
//! The gate answers, for one workspace and one or more battery catalogs:
//!
//! 1. did the workspace's test command run (once, without fail-fast) every test a battery
//!    lists, and did they pass? Its log is kept and read with the lane-audit machinery
//!    ([`crate::ci::audit`]) as one required lane: a listed test the log does not show executed
//!    is an *island*; a run cut short by fail-fast leaves its unreached tests *truncated*;
//! 2. does each battery hold (every expectation MET, no test UNFALSIFIED)?
//!
//! It writes `gate.json` (schema [`GATE_SCHEMA`]), `gate.md`, the kept log `test.log` and
//! the batteries' findings on the diff (`gate.sarif`, `codequality.json`) under
//! `<reports>/gate/`, besides each battery's own reports under `<reports>/<name>/`.
//! When the audit fails, the batteries are not run (a battery needs green listed tests;
//! its baseline would only repeat the audit's answer) and the report says so.

use std::fmt::{self, Write as _};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use serde::Serialize;

use crate::battery::report::schema::BatteryReport;
use crate::battery::report::text;
use crate::battery::select::catalog::Catalog;
use crate::battery::{self, BatteryError, Checked};
use crate::ci::audit::{self, AuditReport, Lane, LanesConfig, MustRun};
use crate::ci::testlog::{self, LogError};
use crate::door::Door;
use crate::system::exit::ExitCode;
use crate::system::interrupt;
use crate::system::progress::Progress;
use crate::system::runner::{Output, RunError, Runner};

/// JSON schema identifier of [`GateReport`]; bumped on incompatible changes.
pub const GATE_SCHEMA: &str = "harness-gate/1";

/// The name of the single lane the gate audits (its own test command's log).
pub const GATE_LANE: &str = "gate";

/// The test command used when `--test-command` is not given and the workspace has no
/// `scripts/test`.
pub const FALLBACK_TEST_COMMAND: &str = "cargo test --workspace --no-fail-fast";

/// Errors that stop the gate before it can report (exit code 2).
#[derive(Debug, thiserror::Error)]
pub enum GateError {
    /// Two catalogs name different workspaces.
    #[error(
        "catalogs name different workspaces: {first_catalog} has {first}, {other_catalog} has {other}"
    )]
    MixedWorkspaces {
        /// The first catalog.
        first_catalog: PathBuf,
        /// Its workspace root.
        first: PathBuf,
        /// The catalog that disagrees.
        other_catalog: PathBuf,
        /// Its workspace root.
        other: PathBuf,
    },
    /// The test command could not be started or its output could not be kept.
    #[error("test command `{command}`: {source}")]
    TestCommand {
        /// The command.
        command: String,
        /// The cause (naming the command line, or the log file).
        source: RunError,
    },
    /// The kept log could not be read back.
    #[error(transparent)]
    Log(LogError),
    /// The gate's reports could not be written.
    #[error("{path}: cannot write the gate report: {source}")]
    Reports {
        /// The file.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
}

/// Where the test command came from (`gate.json` spells it as here).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum TestCommandSource {
    /// Given as `--test-command`.
    #[serde(rename = "--test-command")]
    Given,
    /// The workspace's `scripts/test`.
    #[serde(rename = "scripts/test")]
    ScriptsTest,
    /// [`FALLBACK_TEST_COMMAND`].
    #[serde(rename = "fallback")]
    Fallback,
}

impl TestCommandSource {
    /// The name `gate.json` and the reports use.
    pub fn name(self) -> &'static str {
        match self {
            TestCommandSource::Given => "--test-command",
            TestCommandSource::ScriptsTest => "scripts/test",
            TestCommandSource::Fallback => "fallback",
        }
    }
}

impl fmt::Display for TestCommandSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// How the test command ended.
#[derive(Debug, Clone, Serialize)]
pub struct TestRun {
    /// The command as run by `sh -c`.
    pub command: String,
    /// Where it came from.
    pub source: TestCommandSource,
    /// Its exit code, when it exited (`null` when the gate was interrupted: it killed the
    /// command's process group and reports no status).
    pub exit_code: Option<i32>,
    /// The signal that ended it, when one did.
    pub signal: Option<i32>,
    /// Wall seconds.
    pub seconds: f64,
    /// The kept log (standard output and error, interleaved), relative to the workspace
    /// root when it lies inside it.
    pub log: String,
    /// Lines in the log.
    pub log_lines: usize,
    /// The `CARGO_TARGET_DIR` the command ran with: the first catalog's target directory
    /// (the build the battery then uses), whatever the caller's environment said.
    pub target_dir: String,
}

impl TestRun {
    fn succeeded(&self) -> bool {
        self.exit_code == Some(0)
    }

    /// `exit code N`, `signal N` (with `killed by` before it when `killed`), or `no status`.
    fn status(&self, killed: &str) -> String {
        match (self.exit_code, self.signal) {
            (Some(c), _) => format!("exit code {c}"),
            (None, Some(s)) => format!("{killed}signal {s}"),
            _ => "no status".to_string(),
        }
    }
}

/// What became of one battery in the gate (`gate.json` spells it in lower case).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum BatteryStatus {
    /// It ran and wrote its report.
    Ran,
    /// Not run: the audit failed first, or the gate was interrupted.
    Skipped,
    /// It could not report (a bad `--only`, unwritable reports, a catalog drifted).
    Error,
}

impl BatteryStatus {
    /// The name `gate.json` uses (`ran`, `skipped`, `error`).
    pub fn name(self) -> &'static str {
        match self {
            BatteryStatus::Ran => "ran",
            BatteryStatus::Skipped => "skipped",
            BatteryStatus::Error => "error",
        }
    }
}

impl fmt::Display for BatteryStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The gate's verdict (`gate.json` spells it in lower case): one per exit code.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum GateVerdict {
    /// Exit 0: every must-run test ran and passed, every battery held.
    Pass,
    /// Exit 1: the tests failed, did not run, or are weak.
    Weak,
    /// Exit 2: the gate could not be trusted.
    Untrusted,
    /// Exit 130: interrupted by a signal.
    Interrupted,
}

impl GateVerdict {
    /// The verdict of exit code `code`.
    pub fn of(code: ExitCode) -> GateVerdict {
        match code {
            ExitCode::AllMet => GateVerdict::Pass,
            ExitCode::Weak => GateVerdict::Weak,
            ExitCode::Refused => GateVerdict::Untrusted,
            ExitCode::Interrupted => GateVerdict::Interrupted,
        }
    }

    /// The name `gate.json` uses (`pass`, `weak`, `untrusted`, `interrupted`).
    pub fn name(self) -> &'static str {
        match self {
            GateVerdict::Pass => "pass",
            GateVerdict::Weak => "weak",
            GateVerdict::Untrusted => "untrusted",
            GateVerdict::Interrupted => "interrupted",
        }
    }
}

impl fmt::Display for GateVerdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One battery in the gate report.
#[derive(Debug, Clone, Serialize)]
pub struct GateBattery {
    /// The catalog file as given.
    pub catalog: String,
    /// The battery's name (its report directory).
    pub name: String,
    /// Whether it ran.
    pub status: BatteryStatus,
    /// Why it was skipped or failed.
    pub note: Option<String>,
    /// The battery's own exit code, when it ran.
    pub exit_code: Option<ExitCode>,
    /// The battery's full report (schema `harness-battery/1`), when it ran.
    pub report: Option<BatteryReport>,
    /// The battery's report files.
    pub written: Vec<String>,
}

/// The gate's JSON report (`<reports>/gate/gate.json`, schema [`GATE_SCHEMA`]).
#[derive(Debug, Clone, Serialize)]
pub struct GateReport {
    /// Always [`GATE_SCHEMA`].
    pub schema: &'static str,
    /// Harness version that wrote it.
    pub harness_version: &'static str,
    /// Canonical workspace root.
    pub workspace: String,
    /// Start time, seconds since the Unix epoch.
    pub started_unix: u64,
    /// Wall seconds of the whole gate.
    pub wall_seconds: f64,
    /// How the host lock was held: `own` or `ancestor pid N`.
    pub lock: String,
    /// The test command's run.
    pub test_run: TestRun,
    /// The audit of its log (schema `harness.lane-audit/1`, one required lane named
    /// [`GATE_LANE`]); `null` when the gate was interrupted before it.
    pub audit: Option<AuditReport>,
    /// The batteries, in command-line order.
    pub batteries: Vec<GateBattery>,
    /// `pass` (exit 0), `weak` (exit 1), `untrusted` (exit 2) or `interrupted` (exit 130).
    pub verdict: GateVerdict,
    /// Why the gate did not pass, one sentence each.
    pub reasons: Vec<String>,
    /// The process exit code: 0, 1, 2 or 130.
    pub exit_code: ExitCode,
}

/// What [`run`] produced: the report and the files written.
#[derive(Debug)]
pub struct GateOutcome {
    /// The report.
    pub report: GateReport,
    /// `gate.json`, `gate.md`, `test.log`, then each battery's files.
    pub written: Vec<PathBuf>,
}

/// The must-run tests of a catalog: its listed tests, in its package; in its test target
/// when it names exactly one and no library tests, else in any target of the package.
pub fn must_run_of(c: &Catalog) -> Vec<MustRun> {
    let others = !c.spec.bin_targets.is_empty() || c.spec.doc_tests;
    let target = match (c.spec.test_targets.as_slice(), c.spec.lib_tests, others) {
        ([one], false, false) => Some(one.clone()),
        ([], true, false) => Some("lib".to_string()),
        _ => None,
    };
    c.spec
        .tests
        .iter()
        .map(|t| MustRun {
            package: Some(c.spec.package.clone()),
            target: target.clone(),
            path: t.clone(),
        })
        .collect()
}

/// The test command and where it came from: `given`, else `scripts/test` when the workspace
/// has that file, else [`FALLBACK_TEST_COMMAND`].
pub fn test_command(given: Option<&str>, root: &Path) -> (String, TestCommandSource) {
    match given {
        Some(c) => (c.to_string(), TestCommandSource::Given),
        None if root.join("scripts/test").is_file() => {
            ("scripts/test".to_string(), TestCommandSource::ScriptsTest)
        }
        None => (
            FALLBACK_TEST_COMMAND.to_string(),
            TestCommandSource::Fallback,
        ),
    }
}

fn rel(path: &Path, root: &Path) -> String {
    path.strip_prefix(root)
        .unwrap_or(path)
        .display()
        .to_string()
}

/// Runs `command` with `sh -c` in `root` through the one child runner
/// ([`crate::system::runner`]): in its own process group, recorded under `state` while it
/// runs, its output interleaved into `log` (made anew) and echoed to standard error.
/// Ctrl-C/SIGTERM kill its process group; the second value says whether that happened.
///
/// The command runs with `CARGO_TARGET_DIR=target_dir` (the battery's target directory),
/// replacing any value inherited from the caller: the log the audit reads must come from
/// the same build the battery's baseline then reuses, not from a build elsewhere (and a
/// shared directory such as a CI cache must not mix this workspace's build with another's).
fn run_test_command(
    command: &str,
    source: TestCommandSource,
    root: &Path,
    target_dir: &Path,
    log: &Path,
    state: &Path,
) -> Result<(TestRun, bool), GateError> {
    let fault = |source: RunError| GateError::TestCommand {
        command: command.to_string(),
        source,
    };
    let runner = Runner::new("sh")
        .args(["-c", command])
        .dir(root)
        .env("CARGO_TARGET_DIR", target_dir)
        .output(Output::Tee(log.to_path_buf()))
        .state_dir(Some(state));
    let log_fault = |e: std::io::Error| {
        fault(RunError::Spawn {
            command: runner.command_line(),
            source: std::io::Error::new(e.kind(), format!("{}: {e}", log.display())),
        })
    };
    std::fs::File::create(log).map_err(log_fault)?;
    let start = Instant::now();
    let (status, seconds, interrupted) = match runner.run() {
        Ok(done) => (Some(done.status), done.seconds, false),
        Err(RunError::Interrupted(_)) => (None, start.elapsed().as_secs_f64(), true),
        Err(e) => return Err(fault(e)),
    };
    let log_lines = count_lines(log).map_err(log_fault)?;
    use std::os::unix::process::ExitStatusExt;
    Ok((
        TestRun {
            command: command.to_string(),
            source,
            exit_code: status.and_then(|s| s.code()),
            signal: status.and_then(|s| s.signal()),
            seconds,
            log: rel(log, root),
            log_lines,
            target_dir: rel(target_dir, root),
        },
        interrupted,
    ))
}

/// The number of newline bytes in the file at `path`.
fn count_lines(path: &Path) -> std::io::Result<usize> {
    let mut file = std::fs::File::open(path)?;
    let mut buf = vec![0u8; 1 << 16];
    let mut lines = 0;
    loop {
        match file.read(&mut buf) {
            Ok(0) => return Ok(lines),
            Ok(n) => lines += buf[..n].iter().filter(|b| **b == b'\n').count(),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
}

/// Audits the kept log as the single required lane [`GATE_LANE`].
fn audit_log(
    log: &Path,
    must_run: &[MustRun],
    command: &str,
    workspace: Option<&crate::ci::targets::Workspace>,
) -> Result<AuditReport, GateError> {
    let wanted: std::collections::HashSet<&str> =
        must_run.iter().map(|m| m.path.as_str()).collect();
    let keep = |path: &str| wanted.contains(path);
    let mut parsed = match testlog::parse_file_filtered(log, Some(&keep)) {
        Ok(l) => l,
        // No test output at all: every must-run test is an island, not an unreadable log.
        Err(LogError::Empty { .. }) => testlog::parse_str(""),
        Err(e) => return Err(GateError::Log(e)),
    };
    if let Some(w) = workspace {
        w.map(&mut parsed);
    }
    let cfg = LanesConfig {
        lanes: vec![Lane {
            name: GATE_LANE.to_string(),
            required: true,
            runs: None,
            log: None,
            description: Some(command.to_string()),
            job: None,
        }],
    };
    let logs = [(Some(log.display().to_string()), Some(parsed))];
    Ok(audit::audit(&cfg, &logs, must_run))
}

/// What one gate works on: its catalogs (all of one workspace, planned and preflighted by
/// the front door) and where it writes.
struct Setup<'d> {
    catalogs: &'d [Checked],
    /// The workspace root.
    root: PathBuf,
    /// `<reports>/gate` (the door's reports root, else `<workspace>/reports`), made.
    dir: PathBuf,
}

impl Setup<'_> {
    /// The door's catalogs (they must name one workspace) and the gate's report directory,
    /// made.
    fn new(door: &Door) -> Result<Setup<'_>, GateError> {
        let catalogs = door.planned();
        let first = catalogs[0].catalog();
        let root = first.root.clone();
        for c in catalogs[1..].iter().map(Checked::catalog) {
            if c.root != root {
                return Err(GateError::MixedWorkspaces {
                    first_catalog: first.path.clone(),
                    first: root,
                    other_catalog: c.path.clone(),
                    other: c.root.clone(),
                });
            }
        }
        let dir = door
            .options()
            .reports_root
            .clone()
            .unwrap_or_else(|| root.join("reports"))
            .join("gate");
        std::fs::create_dir_all(&dir).map_err(|source| GateError::Reports {
            path: dir.clone(),
            source,
        })?;
        Ok(Setup {
            catalogs,
            root,
            dir,
        })
    }
}

/// The gate's answer as it grows: the exit code so far and why it is not a pass.
struct Judged {
    code: ExitCode,
    reasons: Vec<String>,
}

impl Judged {
    /// Worsens the exit code to `code` (if it is worse), for `reason`.
    fn fail(&mut self, code: ExitCode, reason: String) {
        self.code = self.code.worst(code);
        self.reasons.push(reason);
    }
}

/// Audits the test command's log against every catalog's must-run tests and judges it.
fn audit_step(
    s: &Setup,
    test_run: &TestRun,
    log: &Path,
    judged: &mut Judged,
) -> Result<AuditReport, GateError> {
    if !test_run.succeeded() {
        judged.fail(
            ExitCode::Weak,
            format!(
                "the test command `{}` failed ({})",
                test_run.command,
                test_run.status("killed by ")
            ),
        );
    }
    let must_run: Vec<MustRun> = s
        .catalogs
        .iter()
        .flat_map(|c| must_run_of(c.catalog()))
        .collect();
    // The workspace's targets name each cargo test target's package; without them
    // (metadata failed) the audit still matches when the log leaves one choice.
    let workspace = crate::ci::targets::Workspace::load(&s.root.join("Cargo.toml"));
    if let Err(e) = &workspace {
        judged
            .reasons
            .push(format!("the targets could not be mapped to packages: {e}"));
    }
    let a = audit_log(log, &must_run, &test_run.command, workspace.as_ref().ok())?;
    let count = |v: audit::Verdict| a.tests.iter().filter(|t| t.verdict == v).count();
    match a.exit_code {
        ExitCode::AllMet => {}
        ExitCode::Refused => judged.fail(
            ExitCode::Refused,
            format!(
                "the audit of its log cannot answer: {} of {} must-run tests UNKNOWN (the log does not show which tests ran: `cargo test -q` prints no test names)",
                count(audit::Verdict::Unknown),
                a.tests.len()
            ),
        ),
        _ => judged.fail(
            ExitCode::Weak,
            format!(
                "the audit of its log: {} of {} must-run tests not ok ({} islands: not executed by the test command)",
                a.tests.len() - count(audit::Verdict::Ok),
                a.tests.len(),
                a.islands.len()
            ),
        ),
    }
    Ok(a)
}

/// Runs every catalog's battery through the door after a passed audit; after a failed one
/// (or an interruption) lists them as skipped, saying why.
fn battery_step(
    s: &Setup<'_>,
    door: &Door,
    audit_ok: bool,
    progress: &Progress,
    judged: &mut Judged,
) -> Vec<GateBattery> {
    let mut batteries = Vec::new();
    for checked in s.catalogs {
        let c = checked.catalog();
        let mut entry = GateBattery {
            catalog: c.path.display().to_string(),
            name: c.name.clone(),
            status: BatteryStatus::Skipped,
            note: None,
            exit_code: None,
            report: None,
            written: Vec::new(),
        };
        if !audit_ok {
            entry.note = Some(
                "not run: the audit failed (a battery needs every listed test run and green)"
                    .to_string(),
            );
        } else if judged.code == ExitCode::Interrupted || interrupt::requested() {
            entry.note = Some("not run: interrupted".to_string());
            judged.code = ExitCode::Interrupted;
        } else {
            progress.line(&format!("gate: battery {}", c.path.display()));
            let res = door.run(checked, progress);
            one_battery(&mut entry, res, &s.root, judged);
        }
        batteries.push(entry);
    }
    batteries
}

/// Records in `entry` how one battery ended.
fn one_battery(
    entry: &mut GateBattery,
    res: Result<battery::RunResult, BatteryError>,
    root: &Path,
    judged: &mut Judged,
) {
    match res {
        Ok(r) => {
            entry.status = BatteryStatus::Ran;
            entry.exit_code = Some(r.report.exit_code);
            let code = r.report.exit_code;
            if code != ExitCode::AllMet {
                judged.fail(code, battery_reason(&r.report));
            }
            entry.written = r.written.iter().map(|p| rel(p, root)).collect();
            entry.report = Some(r.report);
        }
        Err(e) => {
            entry.status = BatteryStatus::Error;
            let msg = match &e {
                BatteryError::Catalog(ce) if ce.is_drift() => format!("CATALOG-DRIFT: {ce}"),
                other => other.to_string(),
            };
            judged.fail(
                ExitCode::Refused,
                format!("battery `{}` could not run: {msg}", entry.name),
            );
            entry.note = Some(msg);
        }
    }
}

/// Runs the gate on the batteries of `door` (planned, preflighted, the host lock held; its
/// options say how) with the test command `test_command` (`None`: see [`test_command`]),
/// and writes its reports: `gate/` and the batteries' `<name>/` report directories under
/// the door's reports root (`None`: `<workspace>/reports`).
///
/// # Errors
/// [`GateError`] when it cannot report at all (mixed workspaces, a test command that cannot
/// be started, an unreadable log, unwritable reports): exit code 2.
pub fn run(
    door: &Door,
    test_command: Option<&str>,
    progress: &Progress,
) -> Result<GateOutcome, GateError> {
    let started = Instant::now();
    let started_unix = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let s = Setup::new(door)?;
    let opts = door.options();
    let (state, lock) = (opts.state_dir.as_path(), opts.lock.as_str());
    let log = s.dir.join("test.log");
    let (command, source) = self::test_command(test_command, &s.root);
    // The first battery's build directory (see `run_test_command`).
    let target_dir = s.catalogs[0].catalog().target_dir.clone();
    progress.line(&format!(
        "gate: running the test command `{command}` ({source}) in {} with CARGO_TARGET_DIR={}; log {}",
        s.root.display(),
        target_dir.display(),
        log.display()
    ));
    let (test_run, interrupted) =
        run_test_command(&command, source, &s.root, &target_dir, &log, state)?;
    progress.line(&format!(
        "gate: test command finished in {:.1}s with {}",
        test_run.seconds,
        test_run.status("")
    ));

    let mut judged = Judged {
        code: ExitCode::AllMet,
        reasons: Vec::new(),
    };
    let mut audit_report = None;
    let mut batteries = Vec::new();
    if interrupted {
        judged.fail(
            ExitCode::Interrupted,
            "interrupted by a signal while the test command ran".to_string(),
        );
    } else {
        let a = audit_step(&s, &test_run, &log, &mut judged)?;
        let audit_ok = a.exit_code == ExitCode::AllMet;
        audit_report = Some(a);
        batteries = battery_step(&s, door, audit_ok, progress, &mut judged);
    }
    let report = GateReport {
        schema: GATE_SCHEMA,
        harness_version: env!("CARGO_PKG_VERSION"),
        workspace: s.root.display().to_string(),
        started_unix,
        wall_seconds: started.elapsed().as_secs_f64(),
        lock: lock.to_string(),
        test_run,
        audit: audit_report,
        batteries,
        verdict: GateVerdict::of(judged.code),
        reasons: judged.reasons,
        exit_code: judged.code,
    };
    let mut written = write(&s.dir, &report)?;
    written.push(log);
    for b in &report.batteries {
        written.extend(b.written.iter().map(|w| s.root.join(w)));
    }
    Ok(GateOutcome { report, written })
}

fn battery_reason(r: &BatteryReport) -> String {
    match &r.refusal {
        Some(f) => format!(
            "battery `{}` refused: {}: {}",
            r.catalog.name, f.kind, f.detail
        ),
        None => {
            let s = &r.summary;
            let mut extra = String::new();
            if r.require_guarded
                && let Some(u) = r.unguarded_in_diff.as_ref().filter(|u| !u.is_empty())
            {
                extra.push_str(&format!(
                    ", {} changed functions UNGUARDED-IN-DIFF (--require-guarded)",
                    u.len()
                ));
            }
            if let Some(g) = &r.generated_in_diff {
                match &g.refusal {
                    Some(f) => extra.push_str(&format!(
                        ", its generated mutants' battery refused: {}: {}",
                        f.kind, f.detail
                    )),
                    None if g.missed > 0 => extra.push_str(&format!(
                        ", {} generated mutants inside the diff missed",
                        g.missed
                    )),
                    None => {}
                }
            }
            format!(
                "battery `{}`: {} unmet expectations, {} unfalsified tests{extra} (exit {})",
                r.catalog.name,
                s.unmet,
                r.unfalsified.as_ref().map_or(0, Vec::len),
                r.exit_code
            )
        }
    }
}

/// Writes `gate.json`, `gate.md`, and the findings of the batteries that ran (each survived
/// mutant and unmet expectation) as `gate.sarif` (one SARIF run per battery) and
/// `codequality.json` into `dir`; returns their paths.
///
/// # Errors
/// [`GateError::Reports`] naming the file.
pub fn write(dir: &Path, r: &GateReport) -> Result<Vec<PathBuf>, GateError> {
    let json = dir.join("gate.json");
    let md = dir.join("gate.md");
    let text = serde_json::to_string_pretty(r).expect("gate report serializes") + "\n";
    std::fs::write(&json, text).map_err(|source| GateError::Reports {
        path: json.clone(),
        source,
    })?;
    std::fs::write(&md, markdown(r)).map_err(|source| GateError::Reports {
        path: md.clone(),
        source,
    })?;
    let ran: Vec<&BatteryReport> = r
        .batteries
        .iter()
        .filter_map(|b| b.report.as_ref())
        .collect();
    let findings =
        crate::battery::report::files::write_findings(dir, "gate", &ran).map_err(|source| {
            GateError::Reports {
                path: dir.join("gate.sarif"),
                source,
            }
        })?;
    let mut out = vec![json, md];
    out.extend(findings);
    Ok(out)
}

/// Adds one level to every Markdown heading of `md` (to nest a section under the gate's).
fn demote(md: &str) -> String {
    md.lines()
        .map(|l| {
            if l.starts_with('#') {
                format!("#{l}\n")
            } else {
                format!("{l}\n")
            }
        })
        .collect()
}

/// The pull-request comment: verdict and reasons, the test command, the audit of its log
/// and each battery's report.
pub fn markdown(r: &GateReport) -> String {
    let mut s = String::new();
    let mark = if r.verdict == GateVerdict::Pass {
        "PASS"
    } else {
        "FAIL"
    };
    let _ = writeln!(s, "## Gate: {mark} (exit {}, {})\n", r.exit_code, r.verdict);
    if r.reasons.is_empty() {
        let _ = writeln!(
            s,
            "Every must-run test ran and passed in the test command, and every battery held.\n"
        );
    } else {
        for reason in &r.reasons {
            let _ = writeln!(s, "- {}", reason.replace('\n', " "));
        }
        s.push('\n');
    }
    let t = &r.test_run;
    let _ = writeln!(s, "### Test command\n");
    let _ = writeln!(s, "| command | source | status | seconds | log |");
    let _ = writeln!(s, "|---|---|---|---:|---|");
    let _ = writeln!(
        s,
        "| `{}` | {} | {} | {:.1} | `{}` ({} lines) |\n",
        t.command.replace('|', "\\|"),
        t.source,
        match (t.exit_code, t.signal) {
            (Some(c), _) => format!("exit {c}"),
            (None, Some(sig)) => format!("signal {sig}"),
            _ => "-".to_string(),
        },
        t.seconds,
        t.log,
        t.log_lines
    );
    if let Some(a) = &r.audit {
        s.push_str(&demote(&a.to_markdown()));
        s.push('\n');
    }
    for b in &r.batteries {
        match &b.report {
            Some(rep) => {
                s.push_str(&demote(&text::markdown(rep)));
                s.push('\n');
            }
            None => {
                let _ = writeln!(
                    s,
                    "### Mutation battery `{}`\n\n**{}**: {}\n",
                    b.name,
                    b.status.name().to_uppercase(),
                    b.note.as_deref().unwrap_or("-")
                );
            }
        }
    }
    s
}

/// A short plain-text summary for the terminal.
pub fn summary(r: &GateReport) -> String {
    let mut s = String::new();
    if let Some(a) = &r.audit {
        s.push_str(&a.to_table());
        s.push('\n');
    }
    for b in &r.batteries {
        match &b.report {
            Some(rep) => s.push_str(&text::table(rep)),
            None => {
                let _ = writeln!(
                    s,
                    "battery {}: {}",
                    b.name,
                    b.note.as_deref().unwrap_or(b.status.name())
                );
            }
        }
    }
    let _ = writeln!(
        s,
        "gate: {} (exit {})",
        r.verdict.name().to_uppercase(),
        r.exit_code
    );
    for reason in &r.reasons {
        let _ = writeln!(s, "  - {reason}");
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn demote_adds_one_level_to_headings_only() {
        assert_eq!(demote("## A\ntext #1\n### B"), "### A\ntext #1\n#### B\n");
    }

    #[test]
    fn default_test_command_prefers_scripts_test() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(
            test_command(None, dir.path()),
            (
                FALLBACK_TEST_COMMAND.to_string(),
                TestCommandSource::Fallback
            )
        );
        std::fs::create_dir(dir.path().join("scripts")).unwrap();
        std::fs::write(dir.path().join("scripts/test"), "#!/bin/sh\n").unwrap();
        assert_eq!(test_command(None, dir.path()).0, "scripts/test");
        assert_eq!(
            test_command(Some("make check"), dir.path()),
            ("make check".to_string(), TestCommandSource::Given)
        );
    }
}
