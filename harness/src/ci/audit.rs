//! Lane audit: which CI lanes actually ran the must-run tests, per `lanes.toml` and the lanes' test logs.
//!
//! A *lane* is one CI job that runs tests. `lanes.toml` names each lane, says whether it
//! is *required* (its failure blocks a merge) and what it is meant to run:
//!
//! ```toml
//! [[lane]]
//! name = "unit"
//! required = true
//! runs = ["lanes-sample::*"]     # `package::target` selectors, `*` for any; default: everything
//! log = "logs/unit.log"          # optional, relative to lanes.toml; `--log unit=FILE` overrides
//! description = "cargo test --workspace on every push"
//! ```
//!
//! The audit reads each lane's log with [`crate::ci::testlog`], then reports every must-run
//! test with the lanes that ran it and its outcome there. A must-run test that no required
//! lane executed is an *island*. Exit codes of [`run`]: 0 every must-run test ran and
//! passed in a required lane; 1 one is an island, failed in a required lane, or was never
//! reached in a truncated required lane; 2 (an `Err`) a log, the lanes file or the
//! must-run list cannot be read.

use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::ci::testlog::{self, Finding, LogError, Outcome, RunLog};
use crate::system::exit::ExitCode;

/// JSON schema identifier of [`AuditReport`].
pub const AUDIT_SCHEMA: &str = "harness.lane-audit/1";

/// Output formats shared by `base-check` and `lane-audit`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum OutputFormat {
    /// A plain-text table for a terminal.
    Table,
    /// JSON with a versioned `schema` field.
    Json,
    /// Markdown for a pull-request comment.
    Markdown,
}

/// Errors that stop an audit (exit code 2).
#[derive(Debug, thiserror::Error)]
pub enum AuditError {
    /// A file could not be read.
    #[error("cannot read {what} {path}: {source}")]
    Read {
        /// What the file is (`lanes file`, `must-run list`).
        what: &'static str,
        /// Its path.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// `lanes.toml` is not valid.
    #[error("lanes file {path}: {message}")]
    Lanes {
        /// Its path.
        path: PathBuf,
        /// What is wrong (field and value).
        message: String,
    },
    /// The must-run list is not valid.
    #[error("must-run list {path}: {message}")]
    MustRun {
        /// Its path.
        path: PathBuf,
        /// What is wrong (line or key).
        message: String,
    },
    /// A `--log` argument is not `LANE=FILE` or names no lane.
    #[error("--log {arg}: {message}")]
    LogArg {
        /// The argument as given.
        arg: String,
        /// What is wrong.
        message: String,
    },
    /// `cargo metadata` of `--manifest-path` failed.
    #[error(transparent)]
    Metadata(crate::ci::targets::TargetsError),
    /// The job list (`--jobs`) could not be read, or names no job of a lane.
    #[error(transparent)]
    Jobs(crate::ci::jobs::JobsError),
    /// A lane's job is not in the job list.
    #[error("--jobs {path}: no job named {job:?} (lane {lane}; set `job` in the lanes file)")]
    NoJob {
        /// The job list.
        path: PathBuf,
        /// The lane.
        lane: String,
        /// The job name looked for.
        job: String,
    },
    /// A lane's log could not be read or parsed.
    #[error("lane {lane}: {source}")]
    Log {
        /// The lane.
        lane: String,
        /// The cause.
        source: LogError,
    },
}

/// `lanes.toml`.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct LanesConfig {
    /// The lanes, in file order.
    #[serde(rename = "lane", default)]
    pub lanes: Vec<Lane>,
}

/// One lane of `lanes.toml`.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Lane {
    /// Unique name, as used by `--log NAME=FILE`.
    pub name: String,
    /// Whether the lane is required (its result gates a merge).
    pub required: bool,
    /// What it is meant to run: `package::target` selectors (`*` matches any package or
    /// target; package names compare with `-` and `_` equal). Absent: everything.
    #[serde(default)]
    pub runs: Option<Vec<String>>,
    /// Default log path, relative to the lanes file.
    #[serde(default)]
    pub log: Option<PathBuf>,
    /// Free text: the command or trigger.
    #[serde(default)]
    pub description: Option<String>,
    /// The lane's job name in the run's job list (`--jobs`); absent: the lane's name.
    #[serde(default)]
    pub job: Option<String>,
}

impl LanesConfig {
    /// Read and validate `lanes.toml`: at least one lane, unique names, well-formed selectors.
    ///
    /// # Errors
    /// [`AuditError::Read`] or [`AuditError::Lanes`] naming the field at fault.
    pub fn load(path: &Path) -> Result<Self, AuditError> {
        let text = std::fs::read_to_string(path).map_err(|source| AuditError::Read {
            what: "lanes file",
            path: path.to_path_buf(),
            source,
        })?;
        Self::parse(&text, path)
    }

    /// Parse `lanes.toml` text (see [`LanesConfig::load`]); `path` is for messages.
    ///
    /// # Errors
    /// [`AuditError::Lanes`].
    pub fn parse(text: &str, path: &Path) -> Result<Self, AuditError> {
        let bad = |message: String| AuditError::Lanes {
            path: path.to_path_buf(),
            message,
        };
        let cfg: LanesConfig = toml::from_str(text).map_err(|e| bad(e.to_string()))?;
        if cfg.lanes.is_empty() {
            return Err(bad("no [[lane]] table".to_string()));
        }
        let mut seen = BTreeSet::new();
        for (i, lane) in cfg.lanes.iter().enumerate() {
            if lane.name.trim().is_empty() || lane.name.contains('=') {
                return Err(bad(format!(
                    "lane {}: name {:?} must be non-empty and hold no `=`",
                    i + 1,
                    lane.name
                )));
            }
            if !seen.insert(lane.name.as_str()) {
                return Err(bad(format!("lane name {:?} appears twice", lane.name)));
            }
            for sel in lane.runs.iter().flatten() {
                if sel != "*" && !sel.contains("::") {
                    return Err(bad(format!(
                        "lane {:?}: runs entry {sel:?} is not `package::target` or `*`",
                        lane.name
                    )));
                }
            }
        }
        Ok(cfg)
    }
}

/// A must-run test: package and target when known, and its path inside the target.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub struct MustRun {
    /// Package (`None`: any).
    pub package: Option<String>,
    /// Target, nextest-style (`lib`, `bin/NAME`, `doc`, integration test name; `None`: any).
    pub target: Option<String>,
    /// Test path, e.g. `admission::refuses_over_budget`.
    pub path: String,
}

impl std::fmt::Display for MustRun {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match (&self.package, &self.target) {
            (None, None) => f.write_str(&self.path),
            (p, t) => write!(
                f,
                "{}::{} {}",
                p.as_deref().unwrap_or("*"),
                t.as_deref().unwrap_or("*"),
                self.path
            ),
        }
    }
}

/// Read the must-run tests: a battery catalog when the file name ends in `.toml`, else a
/// list with one test per line (`#` comments and blank lines skipped), each line one of:
///
/// - `PATH`: a test of any package and target (`admission::refuses_over_budget`);
/// - `PACKAGE::TARGET PATH` (nextest's display form; `PACKAGE PATH` for its lib target):
///   the first space ends the binary id, the rest is the test's path;
/// - `FILE - ITEM (line N)`: a doc test of any package, named as libtest prints it
///   (`src/lib.rs - f (line 3)`; target `doc`);
/// - `PACKAGE[::doc] FILE - ITEM (line N)`: a doc test of one package (a bare package
///   means its `doc` target; any other target is an error).
///
/// Only a doc test's name may hold spaces (a bare doc test's FILE may not: give its
/// package then); a test mode printed after a name (` - should panic`, ` - compile fail`,
/// ` - compile`) is dropped, as `--list` and `--exact` spell names without it.
///
/// A catalog is read loosely as TOML: its `tests` array (strings, or tables with a
/// `path`, `name` or `id` string) at the top level or in one top-level table, with
/// `package` and `test_target` (or `target`) beside it or at the top level.
///
/// # Errors
/// [`AuditError::Read`], or [`AuditError::MustRun`] naming the line or key at fault.
pub fn load_must_run(path: &Path) -> Result<Vec<MustRun>, AuditError> {
    let text = std::fs::read_to_string(path).map_err(|source| AuditError::Read {
        what: "must-run list",
        path: path.to_path_buf(),
        source,
    })?;
    let bad = |message: String| AuditError::MustRun {
        path: path.to_path_buf(),
        message,
    };
    let tests = if path.extension().is_some_and(|e| e == "toml") {
        must_run_from_catalog(&text).map_err(bad)?
    } else {
        must_run_from_lines(&text).map_err(bad)?
    };
    if tests.is_empty() {
        return Err(bad("lists no test".to_string()));
    }
    Ok(tests)
}

/// Whether `name` has the shape of a doc test's name as libtest prints it:
/// `FILE - ITEM (line N)` (rustdoc's naming, e.g. `src/lib.rs - f (line 3)`).
pub fn is_doc_test_name(name: &str) -> bool {
    let Some((file, rest)) = name.split_once(" - ") else {
        return false;
    };
    let Some(line) = rest
        .strip_suffix(')')
        .and_then(|r| r.rsplit_once(" (line "))
        .map(|(_, n)| n)
    else {
        return false;
    };
    !file.trim().is_empty()
        && !line.is_empty()
        && line.bytes().all(|b| b.is_ascii_digit())
        && !rest.starts_with('(')
}

/// One line of a must-run list (see [`load_must_run`] for the format).
fn must_run_line(line: &str) -> Result<MustRun, String> {
    // A result line's test mode (` - should panic`, ` - compile fail`) is not part of the name.
    let (line, _mode) = crate::libtest::test_name(line);
    let Some((first, rest)) = line.split_once(char::is_whitespace) else {
        return Ok(MustRun {
            package: None,
            target: None,
            path: line.to_string(),
        });
    };
    let rest = rest.trim_start();
    // `FILE - ITEM (line N)` alone: a doc test of any package.
    if rest.starts_with("- ") {
        if !is_doc_test_name(line) {
            return Err(format!(
                "{line:?} is neither `PACKAGE::TARGET PATH`, `PATH` nor a doc test `FILE - ITEM (line N)`"
            ));
        }
        return Ok(MustRun {
            package: None,
            target: Some("doc".to_string()),
            path: line.to_string(),
        });
    }
    let (package, target) = testlog::split_binary_id(first);
    if is_doc_test_name(rest) {
        // A doc test runs in its package's `doc` target; a bare package means that one.
        let target = if first.contains("::") {
            target
        } else {
            "doc".to_string()
        };
        if target != "doc" && target != "*" {
            return Err(format!(
                "{line:?}: a doc test runs in target `doc`, not `{target}`: write `{package}::doc {rest}`"
            ));
        }
        return Ok(MustRun {
            package: Some(package),
            target: Some(target),
            path: rest.to_string(),
        });
    }
    if rest.contains(char::is_whitespace) {
        return Err(format!(
            "{line:?} is neither `PACKAGE::TARGET PATH`, `PATH` nor a doc test `FILE - ITEM (line N)`: \
             only a doc test's name holds spaces"
        ));
    }
    Ok(MustRun {
        package: Some(package),
        target: Some(target),
        path: rest.to_string(),
    })
}

fn must_run_from_lines(text: &str) -> Result<Vec<MustRun>, String> {
    let mut out = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let line = raw.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        out.push(must_run_line(line).map_err(|e| format!("line {}: {e}", i + 1))?);
    }
    Ok(out)
}

fn must_run_from_catalog(text: &str) -> Result<Vec<MustRun>, String> {
    let root: toml::Value = toml::from_str(text).map_err(|e| e.to_string())?;
    let root = root.as_table().ok_or("not a TOML table")?;
    let str_key = |t: &toml::Table, k: &str| t.get(k).and_then(|v| v.as_str()).map(str::to_string);
    // The table holding `tests`: the top level, or the one top-level table that has it.
    let holder: &toml::Table = if root.contains_key("tests") {
        root
    } else {
        let found: Vec<&toml::Table> = root
            .values()
            .filter_map(|v| v.as_table())
            .filter(|t| t.contains_key("tests"))
            .collect();
        match found.as_slice() {
            [one] => one,
            [] => {
                return Err("no `tests` list at the top level or in a top-level table".to_string());
            }
            _ => return Err("more than one table holds a `tests` list".to_string()),
        }
    };
    let package = str_key(holder, "package").or_else(|| str_key(root, "package"));
    let target = ["test_target", "target"]
        .iter()
        .find_map(|k| str_key(holder, k).or_else(|| str_key(root, k)));
    let list = holder
        .get("tests")
        .and_then(|v| v.as_array())
        .ok_or("`tests` is not an array")?;
    let mut out = Vec::new();
    for (i, item) in list.iter().enumerate() {
        let path = match item {
            toml::Value::String(s) => s.clone(),
            toml::Value::Table(t) => ["path", "name", "id"]
                .iter()
                .find_map(|k| str_key(t, k))
                .ok_or(format!("tests[{i}] has no `path`, `name` or `id` string"))?,
            other => {
                return Err(format!(
                    "tests[{i}] is a {}, not a string",
                    other.type_str()
                ));
            }
        };
        out.push(MustRun {
            package: package.clone(),
            target: target.clone(),
            path,
        });
    }
    Ok(out)
}

fn norm_package(p: &str) -> String {
    p.replace('-', "_")
}

fn package_matches(want: Option<&str>, have: Option<&str>) -> bool {
    match (want, have) {
        (Some(w), Some(h)) => w == "*" || norm_package(w) == norm_package(h),
        _ => true,
    }
}

fn target_matches(want: Option<&str>, have: &str) -> bool {
    want.is_none_or(|w| w == "*" || w == have)
}

impl Lane {
    /// Whether this lane is meant to run `test` (by its `runs` selectors).
    pub fn meant_to_run(&self, test: &MustRun) -> bool {
        let Some(runs) = &self.runs else { return true };
        runs.iter().any(|sel| {
            if sel == "*" {
                return true;
            }
            let (p, t) = sel.split_once("::").unwrap_or((sel, "*"));
            package_matches(Some(p), test.package.as_deref())
                && (t == "*" || test.target.as_deref().is_none_or(|tt| tt == t))
        })
    }
}

/// What one lane's log says about one must-run test.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum LaneStatus {
    /// Ran and passed.
    Passed,
    /// Passed after failing on an earlier attempt.
    Flaky,
    /// Ran and failed.
    Failed,
    /// Present but ignored/skipped.
    Ignored,
    /// Only listed (the log is `--list` output).
    Listed,
    /// Its target ran but a name filter excluded tests and it is not among the results.
    FilteredOut,
    /// Not in the log, and the run stopped early at a failure (fail-fast truncation).
    NeverReached,
    /// Not in the log (its target did not run, or ran without it).
    Absent,
    /// The log cannot show whether it ran: its target printed libtest's terse (`-q`)
    /// progress, which names no passing test.
    Unknowable,
    /// Several targets of unknown package fit and disagree about it (give `--manifest-path`).
    Ambiguous,
    /// The lane has no log.
    NoLog,
    /// The lane's job did not run (the job list says `skipped`, `cancelled`, `manual`, ...):
    /// GitHub reports a skipped required job as a success.
    JobDidNotRun,
}

impl LaneStatus {
    fn from_outcome(o: Outcome) -> Self {
        match o {
            Outcome::Passed => LaneStatus::Passed,
            Outcome::Flaky => LaneStatus::Flaky,
            Outcome::Failed => LaneStatus::Failed,
            Outcome::Ignored => LaneStatus::Ignored,
            Outcome::Listed => LaneStatus::Listed,
        }
    }

    fn executed(self) -> bool {
        matches!(
            self,
            LaneStatus::Passed | LaneStatus::Flaky | LaneStatus::Failed
        )
    }

    fn label(self) -> &'static str {
        match self {
            LaneStatus::Passed => "passed",
            LaneStatus::Flaky => "flaky",
            LaneStatus::Failed => "failed",
            LaneStatus::Ignored => "ignored",
            LaneStatus::Listed => "listed only",
            LaneStatus::FilteredOut => "filtered out",
            LaneStatus::NeverReached => "never reached (fail-fast)",
            LaneStatus::Absent => "absent",
            LaneStatus::Unknowable => {
                "cannot tell (the log names no passing test: `cargo test -q`)"
            }
            LaneStatus::Ambiguous => "cannot tell which package's target (give --manifest-path)",
            LaneStatus::NoLog => "no log",
            LaneStatus::JobDidNotRun => "its job did not run (skipped)",
        }
    }
}

/// One lane's view of one must-run test.
#[derive(Debug, Clone, Serialize)]
pub struct LaneHit {
    /// Lane name.
    pub lane: String,
    /// Whether the lane is required.
    pub required: bool,
    /// Whether the lane is meant to run this test (`runs`).
    pub meant_to_run: bool,
    /// What its log says.
    pub status: LaneStatus,
    /// Attempts (retries included), 0 when it did not run.
    pub attempts: u32,
    /// 1-based log line of the outcome, when there is one.
    pub line: Option<usize>,
    /// Why the log's target was taken for the test's, when the log does not name its
    /// package (see [`lane_status`]); `None` when the log or `cargo metadata` names it.
    pub inferred: Option<String>,
}

/// The audit's verdict for one must-run test.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Verdict {
    /// Ran and passed in a required lane, failed in none, never reached in none meant to run it.
    Ok,
    /// Failed in a required lane.
    Failed,
    /// No required lane executed it.
    Island,
    /// Passed in a required lane, but a required lane meant to run it stopped before reaching it.
    Truncated,
    /// No required lane shows it executed, and a required lane's log cannot show it
    /// (`cargo test -q`) or is missing: the audit cannot answer (exit 2).
    Unknown,
}

impl Verdict {
    fn label(self) -> &'static str {
        match self {
            Verdict::Ok => "ok",
            Verdict::Failed => "FAILED",
            Verdict::Island => "ISLAND",
            Verdict::Truncated => "TRUNCATED",
            Verdict::Unknown => "UNKNOWN",
        }
    }
}

/// One must-run test in the report.
#[derive(Debug, Clone, Serialize)]
pub struct TestReport {
    /// The test as listed.
    pub test: String,
    /// The verdict.
    pub verdict: Verdict,
    /// Every lane's view, in lanes-file order.
    pub lanes: Vec<LaneHit>,
}

/// Per-target counts of one lane's log.
#[derive(Debug, Clone, Serialize)]
pub struct TargetSummary {
    /// `package::target` (`?` for a package cargo did not print).
    pub target: String,
    /// Tests announced (`running N tests`).
    pub declared: Option<u64>,
    /// Tests that executed.
    pub executed: u64,
    /// Of which failed.
    pub failed: u64,
    /// Tests excluded by a name filter.
    pub filtered_out: u64,
}

/// One lane in the report.
#[derive(Debug, Clone, Serialize)]
pub struct LaneReport {
    /// Name.
    pub name: String,
    /// Required or not.
    pub required: bool,
    /// The log read, if any.
    pub log: Option<String>,
    /// Its detected format.
    pub format: Option<String>,
    /// Whether the run stopped early at a failure.
    pub truncated: bool,
    /// Per-target counts.
    pub targets: Vec<TargetSummary>,
    /// What makes the lane's result say less than it seems to.
    pub findings: Vec<String>,
}

/// The whole audit (the JSON output; `schema` = [`AUDIT_SCHEMA`]).
#[derive(Debug, Clone, Serialize)]
pub struct AuditReport {
    /// Schema identifier.
    pub schema: &'static str,
    /// Lanes in file order.
    pub lanes: Vec<LaneReport>,
    /// Must-run tests in list order.
    pub tests: Vec<TestReport>,
    /// The must-run tests no required lane executed.
    pub islands: Vec<String>,
    /// The exit code of `lane-audit`: 0 every must-run test ok; 1 one is not; 2 the logs
    /// cannot answer (a verdict UNKNOWN, or a required lane without a log).
    pub exit_code: ExitCode,
}

/// What one log says about one must-run test (see [`lane_status`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lookup {
    /// The status.
    pub status: LaneStatus,
    /// Attempts (0 when it did not run).
    pub attempts: u32,
    /// 1-based log line of the outcome.
    pub line: Option<usize>,
    /// Set when the log does not name the target's package and the match was inferred:
    /// why this target was taken (the log left one choice).
    pub inferred: Option<String>,
}

fn target_fits(want: Option<&str>, t: &testlog::TargetRun) -> bool {
    target_matches(want, &t.target)
        || t.alt_target
            .as_deref()
            .is_some_and(|a| target_matches(want, a))
}

/// The targets of `log` that may hold `test`, and why when the match is inferred.
fn candidates<'l>(
    log: &'l RunLog,
    test: &MustRun,
) -> (Vec<&'l testlog::TargetRun>, Option<String>) {
    let named: Vec<&testlog::TargetRun> = log
        .targets
        .iter()
        .filter(|t| {
            t.package.is_some()
                && package_matches(test.package.as_deref(), t.package.as_deref())
                && target_fits(test.target.as_deref(), t)
        })
        .collect();
    let unnamed: Vec<&testlog::TargetRun> = log
        .targets
        .iter()
        .filter(|t| {
            t.package.is_none() && t.target != "?" && target_fits(test.target.as_deref(), t)
        })
        .collect();
    let Some(package) = test.package.as_deref() else {
        // Any package will do: every target of the right name is a candidate.
        return (named.into_iter().chain(unnamed).collect(), None);
    };
    // A package learnt from cargo's order, not from the target alone.
    if let [one] = named.as_slice()
        && one.mapping == testlog::Mapping::Order
    {
        let why = format!(
            "several packages have this target; package `{}` by cargo's order of packages",
            one.package.as_deref().unwrap_or("?")
        );
        return (named, Some(why));
    }
    // A target the log names by a guess (`lib` for a unit-test target away from src/lib.rs).
    let guessed_kind = named
        .iter()
        .any(|t| t.target != test.target.as_deref().unwrap_or(&t.target));
    if !named.is_empty() {
        let why = guessed_kind.then(|| {
            format!(
                "library or binary not in the log; crate `{}` is the package's only possible `{}`",
                named[0].krate.as_deref().unwrap_or(&named[0].target),
                test.target.as_deref().unwrap_or("*")
            )
        });
        if guessed_kind && named.len() > 1 {
            return (Vec::new(), None);
        }
        return (named, why);
    }
    let what = test.target.as_deref().unwrap_or("*");
    let like_package: Vec<&testlog::TargetRun> = unnamed
        .iter()
        .copied()
        .filter(|t| {
            matches!(t.target.as_str(), "lib" | "doc")
                && t.krate
                    .as_deref()
                    .is_some_and(|k| k == norm_package(package))
        })
        .collect();
    match (like_package.as_slice(), unnamed.as_slice()) {
        ([one], _) => (
            vec![*one],
            Some(format!(
                "package not in the log; crate `{}` is named like it",
                one.krate.as_deref().unwrap_or("?")
            )),
        ),
        ([], [one]) | ([_, _, ..], [one]) => (
            vec![*one],
            Some(format!(
                "package not in the log; its only `{what}` target (crate `{}`)",
                one.krate.as_deref().unwrap_or(&one.target)
            )),
        ),
        ([], []) => (Vec::new(), None),
        _ => {
            // Several targets of unknown package fit: the answer holds only when they agree.
            let why = format!(
                "package not in the log; {} `{what}` targets fit (give --manifest-path)",
                unnamed.len()
            );
            (unnamed, Some(why))
        }
    }
}

/// Look `test` up in one parsed log. Targets the log leaves without a package (cargo
/// test's lines, unless mapped by `cargo metadata`) are matched only when the log leaves
/// one choice, and the answer then says the mapping was inferred.
pub fn lane_status(log: &RunLog, test: &MustRun) -> Lookup {
    let (targets, inferred) = candidates(log, test);
    if targets.len() > 1 && inferred.is_some() && test.package.is_some() {
        let seen: Vec<Option<Outcome>> = targets
            .iter()
            .map(|t| {
                t.tests
                    .iter()
                    .find(|r| r.path == test.path)
                    .map(|r| r.outcome)
            })
            .collect();
        let agree = seen.windows(2).all(|w| w[0] == w[1]);
        if seen.iter().any(Option::is_some) && !agree {
            return Lookup {
                status: LaneStatus::Ambiguous,
                attempts: 0,
                line: None,
                inferred,
            };
        }
    }
    let mut filtered = false;
    let mut terse = false;
    let mut best: Option<(LaneStatus, u32, usize)> = None;
    for t in &targets {
        filtered |= t.summary.is_some_and(|s| s.counts.filtered_out > 0);
        terse |= t.terse;
        for r in t.tests.iter().filter(|r| r.path == test.path) {
            let st = LaneStatus::from_outcome(r.outcome);
            // A failure anywhere wins over a pass elsewhere (e.g. a doubled target).
            let rank = |s: LaneStatus| match s {
                LaneStatus::Failed => 3,
                LaneStatus::Passed | LaneStatus::Flaky => 2,
                _ => 1,
            };
            if best.is_none_or(|(b, _, _)| rank(st) > rank(b)) {
                best = Some((st, r.attempts, r.line));
            }
        }
    }
    if let Some((status, attempts, line)) = best {
        return Lookup {
            status,
            attempts,
            line: (line > 0).then_some(line),
            inferred,
        };
    }
    let target_seen = !targets.is_empty();
    // `cargo test -q`: a terse target names only its failures; unnamed terse targets may be any.
    let unnamed_terse = log.targets.iter().any(|t| t.terse && t.target == "?");
    let status = if terse || unnamed_terse {
        LaneStatus::Unknowable
    } else if target_seen && filtered {
        LaneStatus::FilteredOut
    } else if log.fail_fast.is_some() {
        LaneStatus::NeverReached
    } else if !target_seen
        && test.target.is_none()
        && log
            .targets
            .iter()
            .any(|t| t.summary.is_some_and(|s| s.counts.filtered_out > 0))
    {
        LaneStatus::FilteredOut
    } else {
        LaneStatus::Absent
    };
    Lookup {
        status,
        attempts: 0,
        line: None,
        inferred: if status == LaneStatus::Unknowable {
            None
        } else {
            inferred
        },
    }
}

/// Audit parsed lane logs (`logs[i]` belongs to `cfg.lanes[i]`; `None`: no log).
pub fn audit(
    cfg: &LanesConfig,
    logs: &[(Option<String>, Option<RunLog>)],
    must_run: &[MustRun],
) -> AuditReport {
    audit_jobs(cfg, logs, must_run, &vec![None; cfg.lanes.len()])
}

/// [`audit`], knowing from the run's job list which lanes' jobs did not run
/// (`not_run[i]`: the job's state, for `cfg.lanes[i]`): such a lane ran nothing, whatever
/// log is given, and a must-run test no other required lane executed is an island.
pub fn audit_jobs(
    cfg: &LanesConfig,
    logs: &[(Option<String>, Option<RunLog>)],
    must_run: &[MustRun],
    not_run: &[Option<String>],
) -> AuditReport {
    let none: Option<RunLog> = None;
    let logs: Vec<(Option<String>, &Option<RunLog>)> = logs
        .iter()
        .zip(not_run)
        .map(|((p, l), skip)| (p.clone(), if skip.is_some() { &none } else { l }))
        .collect();
    let mut lanes = Vec::new();
    for ((lane, (path, log)), skip) in cfg.lanes.iter().zip(&logs).zip(not_run) {
        let mut report = LaneReport {
            name: lane.name.clone(),
            required: lane.required,
            log: path.clone(),
            format: log.as_ref().map(|l| l.format.to_string()),
            truncated: log.as_ref().is_some_and(|l| l.fail_fast.is_some()),
            targets: Vec::new(),
            findings: Vec::new(),
        };
        if let Some(log) = log {
            report.targets = log
                .targets
                .iter()
                .map(|t| TargetSummary {
                    target: t.label(),
                    declared: t.declared,
                    executed: t.executed(),
                    failed: t.counts.failed,
                    filtered_out: t.summary.map(|s| s.counts.filtered_out).unwrap_or(0),
                })
                .collect();
            report.findings = log.findings().iter().map(Finding::to_string).collect();
        } else if let Some(state) = skip {
            report.findings.push(format!(
                "its job did not run ({state}){}",
                if lane.required {
                    ": GitHub reports a skipped required job as a success, but it ran no test"
                } else {
                    ""
                }
            ));
        } else {
            report.findings.push("no log given".to_string());
        }
        lanes.push(report);
    }
    let mut tests = Vec::new();
    let mut islands = Vec::new();
    for test in must_run {
        let hits: Vec<LaneHit> = cfg
            .lanes
            .iter()
            .zip(&logs)
            .zip(not_run)
            .map(|((lane, (_, log)), skip)| {
                let found = match log {
                    Some(log) => lane_status(log, test),
                    None if skip.is_some() => Lookup {
                        status: LaneStatus::JobDidNotRun,
                        attempts: 0,
                        line: None,
                        inferred: None,
                    },
                    None => Lookup {
                        status: LaneStatus::NoLog,
                        attempts: 0,
                        line: None,
                        inferred: None,
                    },
                };
                LaneHit {
                    lane: lane.name.clone(),
                    required: lane.required,
                    meant_to_run: lane.meant_to_run(test),
                    status: found.status,
                    attempts: found.attempts,
                    line: found.line,
                    inferred: found.inferred,
                }
            })
            .collect();
        let required = || hits.iter().filter(|h| h.required);
        let verdict = if required().any(|h| h.status == LaneStatus::Failed) {
            Verdict::Failed
        } else if !required().any(|h| h.status.executed())
            && required().any(|h| {
                matches!(
                    h.status,
                    LaneStatus::Unknowable | LaneStatus::Ambiguous | LaneStatus::NoLog
                )
            })
        {
            Verdict::Unknown
        } else if !required().any(|h| h.status.executed()) {
            Verdict::Island
        } else if required().any(|h| h.meant_to_run && h.status == LaneStatus::NeverReached) {
            Verdict::Truncated
        } else {
            Verdict::Ok
        };
        if verdict == Verdict::Island {
            islands.push(test.to_string());
        }
        tests.push(TestReport {
            test: test.to_string(),
            verdict,
            lanes: hits,
        });
    }
    let required_without_log = cfg
        .lanes
        .iter()
        .zip(&logs)
        .zip(not_run)
        .any(|((l, (_, log)), skip)| l.required && log.is_none() && skip.is_none());
    let exit_code = if required_without_log || tests.iter().any(|t| t.verdict == Verdict::Unknown) {
        ExitCode::Refused
    } else if tests.iter().any(|t| t.verdict != Verdict::Ok) {
        ExitCode::Weak
    } else {
        ExitCode::AllMet
    };
    AuditReport {
        schema: AUDIT_SCHEMA,
        lanes,
        tests,
        islands,
        exit_code,
    }
}

impl AuditReport {
    /// Render as a plain-text table.
    pub fn to_table(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(
            out,
            "lane-audit: {} lanes, {} must-run tests, {} islands, {} not ok",
            self.lanes.len(),
            self.tests.len(),
            self.islands.len(),
            self.tests
                .iter()
                .filter(|t| t.verdict != Verdict::Ok)
                .count()
        );
        out.push('\n');
        let rows: Vec<[String; 5]> = self
            .lanes
            .iter()
            .map(|l| {
                [
                    l.name.clone(),
                    if l.required { "yes" } else { "no" }.to_string(),
                    l.format.clone().unwrap_or_else(|| "-".to_string()),
                    l.targets.len().to_string(),
                    l.targets
                        .iter()
                        .map(|t| t.executed)
                        .sum::<u64>()
                        .to_string(),
                ]
            })
            .collect();
        table(
            &mut out,
            &["LANE", "REQUIRED", "FORMAT", "TARGETS", "TESTS RUN"],
            &rows,
        );
        for l in &self.lanes {
            for f in &l.findings {
                let _ = writeln!(out, "  {}: {f}", l.name);
            }
        }
        out.push('\n');
        let rows: Vec<[String; 3]> = self
            .tests
            .iter()
            .map(|t| {
                [
                    t.test.clone(),
                    t.verdict.label().to_string(),
                    hits_text(&t.lanes),
                ]
            })
            .collect();
        table(&mut out, &["MUST-RUN TEST", "VERDICT", "LANES"], &rows);
        if !self.islands.is_empty() {
            out.push('\n');
            for i in &self.islands {
                let _ = writeln!(out, "island: {i} (no required lane executed it)");
            }
        }
        out
    }

    /// Render as Markdown for a pull-request comment.
    pub fn to_markdown(&self) -> String {
        let mut out = String::new();
        let bad = self
            .tests
            .iter()
            .filter(|t| t.verdict != Verdict::Ok)
            .count();
        let _ = writeln!(out, "## Lane audit\n");
        let _ = writeln!(
            out,
            "{} lanes, {} must-run tests: **{}**.\n",
            self.lanes.len(),
            self.tests.len(),
            if bad == 0 {
                "every must-run test ran and passed in a required lane".to_string()
            } else {
                format!("{bad} not ok, {} islands", self.islands.len())
            }
        );
        let _ = writeln!(
            out,
            "| Lane | Required | Format | Targets | Tests run | Findings |"
        );
        let _ = writeln!(out, "| --- | --- | --- | ---: | ---: | --- |");
        for l in &self.lanes {
            let _ = writeln!(
                out,
                "| {} | {} | {} | {} | {} | {} |",
                md(&l.name),
                if l.required { "yes" } else { "no" },
                l.format.as_deref().unwrap_or("-"),
                l.targets.len(),
                l.targets.iter().map(|t| t.executed).sum::<u64>(),
                if l.findings.is_empty() {
                    "-".to_string()
                } else {
                    l.findings
                        .iter()
                        .map(|f| md(f))
                        .collect::<Vec<_>>()
                        .join("<br>")
                }
            );
        }
        let _ = writeln!(out, "\n| Must-run test | Verdict | Lanes |");
        let _ = writeln!(out, "| --- | --- | --- |");
        for t in &self.tests {
            let _ = writeln!(
                out,
                "| `{}` | {} | {} |",
                t.test,
                t.verdict.label(),
                md(&hits_text(&t.lanes))
            );
        }
        if !self.islands.is_empty() {
            let _ = writeln!(out, "\n**Islands** (no required lane executed them):\n");
            for i in &self.islands {
                let _ = writeln!(out, "- `{i}`");
            }
        }
        out
    }
}

fn hits_text(hits: &[LaneHit]) -> String {
    hits.iter()
        .map(|h| {
            let mut s = format!(
                "{}{}: {}",
                h.lane,
                if h.required { "" } else { " (optional)" },
                h.status.label()
            );
            if h.attempts > 1 {
                let _ = write!(s, " after {} attempts", h.attempts);
            }
            if let Some(why) = &h.inferred {
                let _ = write!(s, " (inferred: {why})");
            }
            if !h.meant_to_run {
                s.push_str(" [not meant to run it]");
            }
            s
        })
        .collect::<Vec<_>>()
        .join("; ")
}

fn md(s: &str) -> String {
    s.replace('|', "\\|")
}

/// Write a left-aligned text table with a header row.
pub(crate) fn table<const N: usize>(out: &mut String, header: &[&str; N], rows: &[[String; N]]) {
    let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for r in rows {
        for (w, c) in widths.iter_mut().zip(r) {
            *w = (*w).max(c.chars().count());
        }
    }
    let line = |out: &mut String, cells: &mut dyn Iterator<Item = &str>| {
        let mut s = String::new();
        for (i, (c, w)) in cells.zip(&widths).enumerate() {
            if i + 1 == N {
                s.push_str(c);
            } else {
                let _ = write!(s, "{c:<w$}  ");
            }
        }
        let _ = writeln!(out, "{}", s.trim_end());
    };
    line(out, &mut header.iter().copied());
    for r in rows {
        line(out, &mut r.iter().map(String::as_str));
    }
}

/// `harness lane-audit` arguments.
#[derive(Debug, Clone, clap::Args)]
pub struct LaneAuditArgs {
    /// The lanes file (`lanes.toml`).
    #[arg(long, value_name = "FILE")]
    pub lanes: PathBuf,
    /// A lane's log: cargo test / nextest output, nextest JUnit XML, or libtest --list output.
    #[arg(long = "log", value_name = "LANE=FILE")]
    pub logs: Vec<String>,
    /// The must-run tests: a battery catalog (`*.toml`) or a file with one test per line.
    #[arg(long, value_name = "CATALOG|FILE")]
    pub must_run: PathBuf,
    /// The workspace's `Cargo.toml`: name each cargo test target's package through
    /// `cargo metadata` (without it, a target the log leaves without a package is matched
    /// only when the log leaves one choice, and the report says the match was inferred).
    #[arg(long, value_name = "Cargo.toml")]
    pub manifest_path: Option<PathBuf>,
    /// The run's job list (GitHub's `gh api repos/O/R/actions/runs/ID/jobs`, GitLab's
    /// pipeline jobs): a lane whose job was skipped (or cancelled, manual) ran nothing,
    /// though GitHub reports a skipped required job as a success. Lanes are found by their
    /// `job` (default: their name).
    #[arg(long, value_name = "JOBS.json")]
    pub jobs: Option<PathBuf>,
    /// Output format.
    #[arg(long, value_enum, default_value = "table")]
    pub format: OutputFormat,
}

/// Load the lanes file, the must-run list and every lane's log, and audit them.
///
/// # Errors
/// Any [`AuditError`] (the CLI's exit code 2).
pub fn audit_files(args: &LaneAuditArgs) -> Result<AuditReport, AuditError> {
    let cfg = LanesConfig::load(&args.lanes)?;
    let must_run = load_must_run(&args.must_run)?;
    let base = args.lanes.parent().unwrap_or(Path::new("."));
    let mut paths: Vec<Option<PathBuf>> = cfg
        .lanes
        .iter()
        .map(|l| l.log.as_ref().map(|p| base.join(p)))
        .collect();
    for arg in &args.logs {
        let (lane, file) = arg.split_once('=').ok_or_else(|| AuditError::LogArg {
            arg: arg.clone(),
            message: "expected LANE=FILE".to_string(),
        })?;
        let idx = cfg
            .lanes
            .iter()
            .position(|l| l.name == lane)
            .ok_or_else(|| AuditError::LogArg {
                arg: arg.clone(),
                message: format!("no lane named {lane:?} in {}", args.lanes.display()),
            })?;
        paths[idx] = Some(PathBuf::from(file));
    }
    // Only the must-run tests' results are kept; every result is still counted.
    let wanted: std::collections::HashSet<&str> =
        must_run.iter().map(|m| m.path.as_str()).collect();
    let keep = |path: &str| wanted.contains(path);
    let workspace = match &args.manifest_path {
        Some(m) => Some(crate::ci::targets::Workspace::load(m).map_err(AuditError::Metadata)?),
        None => None,
    };
    let mut logs = Vec::new();
    for (lane, path) in cfg.lanes.iter().zip(paths) {
        match path {
            Some(p) => {
                let mut log = testlog::parse_file_filtered(&p, Some(&keep)).map_err(|source| {
                    AuditError::Log {
                        lane: lane.name.clone(),
                        source,
                    }
                })?;
                if let Some(w) = &workspace {
                    w.map(&mut log);
                }
                logs.push((Some(p.display().to_string()), Some(log)));
            }
            None => logs.push((None, None)),
        }
    }
    let mut not_run = vec![None; cfg.lanes.len()];
    if let Some(path) = &args.jobs {
        let jobs = crate::ci::jobs::load(path).map_err(AuditError::Jobs)?;
        for (i, lane) in cfg.lanes.iter().enumerate() {
            let name = lane.job.as_deref().unwrap_or(&lane.name);
            let job = jobs
                .iter()
                .find(|j| j.name == name)
                .ok_or_else(|| AuditError::NoJob {
                    path: path.clone(),
                    lane: lane.name.clone(),
                    job: name.to_string(),
                })?;
            if job.did_not_run {
                not_run[i] = Some(job.state.clone());
            }
        }
    }
    Ok(audit_jobs(&cfg, &logs, &must_run, &not_run))
}

/// `harness lane-audit`: print the report; returns the exit code (0, 1 or 2).
///
/// # Errors
/// Any [`AuditError`]: the caller exits with code 2.
pub fn run(args: &LaneAuditArgs) -> anyhow::Result<ExitCode> {
    let report = audit_files(args)?;
    match args.format {
        OutputFormat::Table => print!("{}", report.to_table()),
        OutputFormat::Markdown => print!("{}", report.to_markdown()),
        OutputFormat::Json => println!("{}", serde_json::to_string_pretty(&report)?),
    }
    Ok(report.exit_code)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn catalog_tests_list_is_read_loosely() {
        let cat = r#"
            id = "admission"
            [battery]
            package = "engine"
            test_target = "admission"
            tests = ["refuses_over_budget", { name = "clamps_budget" }]
        "#;
        let got = must_run_from_catalog(cat).unwrap();
        assert_eq!(got.len(), 2);
        assert_eq!(got[1].path, "clamps_budget");
        assert_eq!(got[0].package.as_deref(), Some("engine"));
        assert_eq!(got[0].target.as_deref(), Some("admission"));
        assert!(
            must_run_from_catalog("tests = [1]")
                .unwrap_err()
                .contains("tests[0]")
        );
    }

    #[test]
    fn must_run_lines_reject_three_fields() {
        let err = must_run_from_lines("a::b c\n\nx y z\n").unwrap_err();
        assert!(err.starts_with("line 3:"), "{err}");
    }

    fn must(package: Option<&str>, target: Option<&str>, path: &str) -> MustRun {
        MustRun {
            package: package.map(str::to_string),
            target: target.map(str::to_string),
            path: path.to_string(),
        }
    }

    #[test]
    fn must_run_lines_name_doc_tests_with_their_spaces() {
        let text = "\
# unit, integration and doc tests
engine::lib admission::refuses_over_budget
engine doubles
adds_small
src/lib.rs - f (line 3)
acme-codec::doc acme-codec/src/codec.rs - add (line 9)
acme-util acme-util/src/lib.rs - double (line 5)
acme-codec acme-codec/src/codec.rs - add (line 13) - compile fail
tests::panics - should panic
";
        assert_eq!(
            must_run_from_lines(text).unwrap(),
            [
                must(
                    Some("engine"),
                    Some("lib"),
                    "admission::refuses_over_budget"
                ),
                must(Some("engine"), Some("lib"), "doubles"),
                must(None, None, "adds_small"),
                must(None, Some("doc"), "src/lib.rs - f (line 3)"),
                must(
                    Some("acme-codec"),
                    Some("doc"),
                    "acme-codec/src/codec.rs - add (line 9)"
                ),
                must(
                    Some("acme-util"),
                    Some("doc"),
                    "acme-util/src/lib.rs - double (line 5)"
                ),
                must(
                    Some("acme-codec"),
                    Some("doc"),
                    "acme-codec/src/codec.rs - add (line 13)"
                ),
                must(None, None, "tests::panics"),
            ]
        );
    }

    #[test]
    fn must_run_lines_with_spaces_that_are_no_doc_test_are_errors() {
        for (text, want) in [
            (
                "engine::lib src/lib.rs - f (line 3)\n",
                "target `doc`, not `lib`",
            ),
            ("src/lib.rs - f\n", "nor a doc test"),
            ("engine::lib a b\n", "only a doc test's name holds spaces"),
            ("x - f (line three)\n", "nor a doc test"),
        ] {
            let err = must_run_from_lines(text).unwrap_err();
            assert!(
                err.starts_with("line 1: ") && err.contains(want),
                "{text:?}: {err}"
            );
        }
    }

    #[test]
    fn lane_selectors_match_packages_with_either_separator() {
        let lane = Lane {
            name: "l".into(),
            required: true,
            runs: Some(vec!["lanes_sample::beta".into()]),
            log: None,
            description: None,
            job: None,
        };
        let t = |p: &str, tg: &str| MustRun {
            package: Some(p.into()),
            target: Some(tg.into()),
            path: "x".into(),
        };
        assert!(lane.meant_to_run(&t("lanes-sample", "beta")));
        assert!(!lane.meant_to_run(&t("lanes-sample", "gamma")));
        assert!(!lane.meant_to_run(&t("other", "beta")));
    }
}
