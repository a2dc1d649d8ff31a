//! `harness gate`: one CI step that runs the test command, audits its log against the batteries' test lists, runs the batteries and writes one pull-request report.
//!
//! The gate answers, for one workspace and one or more battery catalogs:
//!
//! 1. did the workspace's test command run (once, without fail-fast) every test a battery
//!    lists, and did they pass? Its log is kept and read with the lane-audit machinery
//!    ([`crate::audit`]) as one required lane: a listed test the log does not show executed
//!    is an *island*; a run cut short by fail-fast leaves its unreached tests *truncated*;
//! 2. does each battery hold (every expectation MET, no test UNFALSIFIED)?
//!
//! It writes `gate.json` (schema [`GATE_SCHEMA`]), `gate.md` and the kept log `test.log`
//! under `<reports>/gate/`, besides each battery's own reports under `<reports>/<name>/`.
//! When the audit fails, the batteries are not run (a battery needs green listed tests;
//! its baseline would only repeat the audit's answer) and the report says so.

use std::fmt::Write as _;
use std::io::{Read, Write};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde::Serialize;

use crate::audit::{self, AuditReport, Lane, LanesConfig, MustRun};
use crate::battery::{self, BatteryError};
use crate::catalog::Catalog;
use crate::interrupt::{self, EXIT_INTERRUPTED};
use crate::progress::Progress;
use crate::report::{self, BatteryReport};
use crate::system::exit::worst;
use crate::testlog::{self, LogError};
use crate::{EXIT_ALL_MET, EXIT_REFUSED, EXIT_WEAK};

/// JSON schema identifier of [`GateReport`]; bumped on incompatible changes.
pub const GATE_SCHEMA: &str = "harness-gate/1";

/// The name of the single lane the gate audits (its own test command's log).
pub const GATE_LANE: &str = "gate";

/// The test command used when `--test-command` is not given and the workspace has no
/// `scripts/test`.
pub const FALLBACK_TEST_COMMAND: &str = "cargo test --workspace --no-fail-fast";

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
    /// Run only these mutation ids (comma-separated) in the batteries.
    #[arg(long, value_delimiter = ',', value_name = "IDS")]
    pub only: Option<Vec<String>>,
    /// Wait for the host lock instead of refusing with LOCKED.
    #[arg(long)]
    pub wait: bool,
    /// Expected maximum hold of the lock, in seconds (reported when exceeded).
    #[arg(long, value_name = "SECS")]
    pub ttl: Option<u64>,
    /// Owner name recorded in the lock (default: $USER).
    #[arg(long)]
    pub owner: Option<String>,
    /// Directory under which `gate/` and the batteries' `<name>/` report directories are
    /// written (default: `<workspace>/reports`).
    #[arg(long, value_name = "DIR")]
    pub reports: Option<PathBuf>,
}

/// Errors that stop the gate before it can report (exit code 2).
#[derive(Debug, thiserror::Error)]
pub enum GateError {
    /// A catalog could not be loaded.
    #[error("{0}")]
    Catalog(#[from] crate::catalog::CatalogError),
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
    #[error("test command `{command}`: {what}: {source}")]
    TestCommand {
        /// The command.
        command: String,
        /// What failed (spawn, log file, pipe).
        what: &'static str,
        /// The cause.
        source: std::io::Error,
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

/// How the test command ended.
#[derive(Debug, Clone, Serialize)]
pub struct TestRun {
    /// The command as run by `sh -c`.
    pub command: String,
    /// Where it came from: `--test-command`, `scripts/test` or `fallback`.
    pub source: String,
    /// Its exit code, when it exited.
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
}

/// One battery in the gate report.
#[derive(Debug, Clone, Serialize)]
pub struct GateBattery {
    /// The catalog file as given.
    pub catalog: String,
    /// The battery's name (its report directory).
    pub name: String,
    /// `ran`, `skipped` (the audit failed first) or `error` (no report: bad `--only`,
    /// unwritable reports).
    pub status: String,
    /// Why it was skipped or failed.
    pub note: Option<String>,
    /// The battery's own exit code, when it ran.
    pub exit_code: Option<i32>,
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
    /// `pass`, `weak` (exit 1), `untrusted` (exit 2) or `interrupted` (exit 130).
    pub verdict: String,
    /// Why the gate did not pass, one sentence each.
    pub reasons: Vec<String>,
    /// The process exit code: 0, 1, 2 or 130.
    pub exit_code: i32,
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
    let target = match (c.spec.test_targets.as_slice(), c.spec.lib_tests) {
        ([one], false) => Some(one.clone()),
        ([], true) => Some("lib".to_string()),
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

/// The test command and where it came from (see [`GateArgs::test_command`]).
pub fn test_command(given: Option<&str>, root: &Path) -> (String, String) {
    match given {
        Some(c) => (c.to_string(), "--test-command".to_string()),
        None if root.join("scripts/test").is_file() => {
            ("scripts/test".to_string(), "scripts/test".to_string())
        }
        None => (FALLBACK_TEST_COMMAND.to_string(), "fallback".to_string()),
    }
}

fn rel(path: &Path, root: &Path) -> String {
    path.strip_prefix(root)
        .unwrap_or(path)
        .display()
        .to_string()
}

/// Runs `command` with `sh -c` in `root`, its output interleaved into `log` and echoed to
/// standard error. Ctrl-C/SIGTERM stop its process group.
///
/// The command runs with `CARGO_TARGET_DIR=target_dir` (the battery's target directory),
/// replacing any value inherited from the caller: the log the audit reads must come from
/// the same build the battery's baseline then reuses, not from a build elsewhere (and a
/// shared directory such as a CI cache must not mix this workspace's build with another's).
fn run_test_command(
    command: &str,
    source: String,
    root: &Path,
    target_dir: &Path,
    log: &Path,
    state: &Path,
) -> Result<(TestRun, bool), GateError> {
    let err = |what: &'static str| {
        move |source| GateError::TestCommand {
            command: command.to_string(),
            what,
            source,
        }
    };
    let mut file = std::fs::File::create(log).map_err(err("cannot create the log file"))?;
    let (mut reader, writer) = std::io::pipe().map_err(err("cannot create a pipe"))?;
    let writer2 = writer.try_clone().map_err(err("cannot create a pipe"))?;
    let mut cmd = Command::new("sh");
    cmd.arg("-c")
        .arg(command)
        .current_dir(root)
        .env("CARGO_TARGET_DIR", target_dir)
        .stdin(Stdio::null())
        .stdout(writer)
        .stderr(writer2)
        .process_group(0);
    let start = Instant::now();
    let mut child = cmd.spawn().map_err(err("cannot start `sh -c`"))?;
    // The pipe's write ends now live only in the child; dropping `cmd` closes ours.
    drop(cmd);
    let record = crate::process::record_child(state, child.id()).ok();
    let copier = std::thread::spawn(move || -> std::io::Result<usize> {
        let mut buf = vec![0u8; 1 << 16];
        let mut lines = 0;
        let mut echo = std::io::stderr();
        loop {
            let n = match reader.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            };
            lines += buf[..n].iter().filter(|b| **b == b'\n').count();
            file.write_all(&buf[..n])?;
            let _ = echo.write_all(&buf[..n]);
        }
        file.flush()?;
        Ok(lines)
    });
    let mut interrupted = false;
    let status = loop {
        if let Some(s) = child.try_wait().map_err(err("cannot wait for it"))? {
            break s;
        }
        if interrupt::requested() && !interrupted {
            interrupted = true;
            crate::process::kill_group(child.id());
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let seconds = start.elapsed().as_secs_f64();
    if interrupted {
        crate::process::kill_group(child.id());
    }
    if let Some(r) = record {
        let _ = std::fs::remove_file(r);
    }
    let lines = copier
        .join()
        .unwrap_or_else(|_| Err(std::io::Error::other("log copier panicked")))
        .map_err(err("cannot keep its output in the log"))?;
    use std::os::unix::process::ExitStatusExt;
    Ok((
        TestRun {
            command: command.to_string(),
            source,
            exit_code: status.code(),
            signal: status.signal(),
            seconds,
            log: rel(log, root),
            log_lines: lines,
            target_dir: rel(target_dir, root),
        },
        interrupted,
    ))
}

/// Audits the kept log as the single required lane [`GATE_LANE`].
fn audit_log(
    log: &Path,
    must_run: &[MustRun],
    command: &str,
    workspace: Option<&crate::targets::Workspace>,
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
        }],
    };
    let logs = [(Some(log.display().to_string()), Some(parsed))];
    Ok(audit::audit(&cfg, &logs, must_run))
}

/// Runs the gate (the caller holds the host lock; `lock` says how) and writes its reports.
///
/// # Errors
/// [`GateError`] when it cannot report at all (bad catalog, mixed workspaces, a test
/// command that cannot be started, an unreadable log, unwritable reports): exit code 2.
pub fn run(
    args: &GateArgs,
    state: &Path,
    lock: &str,
    progress: &Progress,
) -> Result<GateOutcome, GateError> {
    let started = Instant::now();
    let started_unix = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let mut catalogs = Vec::new();
    for p in &args.catalogs {
        catalogs.push(Catalog::load(p)?);
    }
    let root = catalogs[0].root.clone();
    for c in &catalogs[1..] {
        if c.root != root {
            return Err(GateError::MixedWorkspaces {
                first_catalog: catalogs[0].path.clone(),
                first: root,
                other_catalog: c.path.clone(),
                other: c.root.clone(),
            });
        }
    }
    let reports_root = args.reports.clone().unwrap_or_else(|| root.join("reports"));
    let dir = reports_root.join("gate");
    std::fs::create_dir_all(&dir).map_err(|source| GateError::Reports {
        path: dir.clone(),
        source,
    })?;
    let log = dir.join("test.log");
    let (command, source) = test_command(args.test_command.as_deref(), &root);
    // The first battery's build directory (see `run_test_command`).
    let target_dir = catalogs[0].target_dir.clone();
    progress.line(&format!(
        "gate: running the test command `{command}` ({source}) in {} with CARGO_TARGET_DIR={}; log {}",
        root.display(),
        target_dir.display(),
        log.display()
    ));
    let (test_run, interrupted) =
        run_test_command(&command, source, &root, &target_dir, &log, state)?;
    progress.line(&format!(
        "gate: test command finished in {:.1}s with {}",
        test_run.seconds,
        match (test_run.exit_code, test_run.signal) {
            (Some(c), _) => format!("exit code {c}"),
            (None, Some(s)) => format!("signal {s}"),
            _ => "no status".to_string(),
        }
    ));

    let mut reasons = Vec::new();
    let mut code = EXIT_ALL_MET;
    let mut audit_report = None;
    let mut batteries = Vec::new();
    if interrupted {
        reasons.push("interrupted by a signal while the test command ran".to_string());
        code = EXIT_INTERRUPTED;
    } else {
        if !test_run.succeeded() {
            reasons.push(format!(
                "the test command `{}` failed ({})",
                test_run.command,
                match (test_run.exit_code, test_run.signal) {
                    (Some(c), _) => format!("exit code {c}"),
                    (None, Some(s)) => format!("killed by signal {s}"),
                    _ => "no status".to_string(),
                }
            ));
            code = worst(code, EXIT_WEAK);
        }
        let must_run: Vec<MustRun> = catalogs.iter().flat_map(must_run_of).collect();
        // The workspace's targets name each cargo test target's package; without them
        // (metadata failed) the audit still matches when the log leaves one choice.
        let workspace = crate::targets::Workspace::load(&root.join("Cargo.toml"));
        if let Err(e) = &workspace {
            reasons.push(format!("the targets could not be mapped to packages: {e}"));
        }
        let a = audit_log(&log, &must_run, &command, workspace.as_ref().ok())?;
        let not_ok = a
            .tests
            .iter()
            .filter(|t| t.verdict != audit::Verdict::Ok)
            .count();
        if a.exit_code == EXIT_REFUSED {
            reasons.push(format!(
                "the audit of its log cannot answer: {} of {} must-run tests UNKNOWN (the log does not show which tests ran: `cargo test -q` prints no test names)",
                a.tests.iter().filter(|t| t.verdict == audit::Verdict::Unknown).count(),
                a.tests.len()
            ));
            code = worst(code, EXIT_REFUSED);
        } else if a.exit_code != 0 {
            reasons.push(format!(
                "the audit of its log: {not_ok} of {} must-run tests not ok ({} islands: not executed by the test command)",
                a.tests.len(),
                a.islands.len()
            ));
            code = worst(code, EXIT_WEAK);
        }
        let audit_ok = a.exit_code == 0;
        audit_report = Some(a);
        let opts = battery::Options {
            state_dir: state.to_path_buf(),
            reports_root: Some(reports_root.clone()),
            only: args.only.clone(),
            shard: None,
            lock: lock.to_string(),
        };
        for c in &catalogs {
            let mut entry = GateBattery {
                catalog: c.path.display().to_string(),
                name: c.name.clone(),
                status: "skipped".to_string(),
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
            } else if code == EXIT_INTERRUPTED || interrupt::requested() {
                entry.note = Some("not run: interrupted".to_string());
                code = EXIT_INTERRUPTED;
            } else {
                progress.line(&format!("gate: battery {}", c.path.display()));
                match battery::run(&c.path, &opts, progress) {
                    Ok(r) => {
                        entry.status = "ran".to_string();
                        entry.exit_code = Some(r.report.exit_code);
                        if r.report.exit_code != EXIT_ALL_MET {
                            reasons.push(battery_reason(&r.report));
                        }
                        code = worst(code, r.report.exit_code);
                        entry.written = r.written.iter().map(|p| rel(p, &root)).collect();
                        entry.report = Some(r.report);
                    }
                    Err(e) => {
                        entry.status = "error".to_string();
                        let msg = match &e {
                            BatteryError::Catalog(ce) if ce.is_drift() => {
                                format!("CATALOG-DRIFT: {ce}")
                            }
                            other => other.to_string(),
                        };
                        reasons.push(format!("battery `{}` could not run: {msg}", c.name));
                        entry.note = Some(msg);
                        code = worst(code, EXIT_REFUSED);
                    }
                }
            }
            batteries.push(entry);
        }
    }
    let verdict = match code {
        EXIT_ALL_MET => "pass",
        EXIT_WEAK => "weak",
        EXIT_REFUSED => "untrusted",
        _ => "interrupted",
    };
    let report = GateReport {
        schema: GATE_SCHEMA,
        harness_version: env!("CARGO_PKG_VERSION"),
        workspace: root.display().to_string(),
        started_unix,
        wall_seconds: started.elapsed().as_secs_f64(),
        lock: lock.to_string(),
        test_run,
        audit: audit_report,
        batteries,
        verdict: verdict.to_string(),
        reasons,
        exit_code: code,
    };
    let mut written = write(&dir, &report)?;
    written.push(log);
    for b in &report.batteries {
        written.extend(b.written.iter().map(|w| root.join(w)));
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
            format!(
                "battery `{}`: {} unmet expectations, {} unfalsified tests (exit {})",
                r.catalog.name,
                s.unmet,
                r.unfalsified.as_ref().map_or(0, Vec::len),
                r.exit_code
            )
        }
    }
}

/// Writes `gate.json` and `gate.md` into `dir`; returns their paths.
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
    Ok(vec![json, md])
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
    let mark = if r.exit_code == EXIT_ALL_MET {
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
                s.push_str(&demote(&report::markdown(rep)));
                s.push('\n');
            }
            None => {
                let _ = writeln!(
                    s,
                    "### Mutation battery `{}`\n\n**{}**: {}\n",
                    b.name,
                    b.status.to_uppercase(),
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
            Some(rep) => s.push_str(&report::table(rep)),
            None => {
                let _ = writeln!(
                    s,
                    "battery {}: {}",
                    b.name,
                    b.note.as_deref().unwrap_or(&b.status)
                );
            }
        }
    }
    let _ = writeln!(
        s,
        "gate: {} (exit {})",
        r.verdict.to_uppercase(),
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
            (FALLBACK_TEST_COMMAND.to_string(), "fallback".to_string())
        );
        std::fs::create_dir(dir.path().join("scripts")).unwrap();
        std::fs::write(dir.path().join("scripts/test"), "#!/bin/sh\n").unwrap();
        assert_eq!(test_command(None, dir.path()).0, "scripts/test");
        assert_eq!(
            test_command(Some("make check"), dir.path()),
            ("make check".to_string(), "--test-command".to_string())
        );
    }

    #[test]
    fn worst_orders_interrupted_over_untrusted_over_weak() {
        assert_eq!(worst(0, 1), 1);
        assert_eq!(worst(2, 1), 2);
        assert_eq!(worst(1, 130), 130);
        assert_eq!(worst(130, 2), 130);
    }
}
