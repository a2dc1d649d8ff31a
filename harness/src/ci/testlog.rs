//! Test-log parsers: cargo test (libtest), cargo nextest (human output and JUnit XML) and libtest `--list`, streamed into per-target results.
//!
//! A test is identified by package, target and path. Targets use cargo-nextest's naming
//! (nextest's "binary id" without the package): `lib` for a library's unit tests,
//! `bin/NAME` for a binary's, the target name for an integration test, and `doc` for doc
//! tests. cargo test does not print the package of an integration test or binary target,
//! so [`TargetRun::package`] is `None` there and matching treats it as any package.
//!
//! Formats read (as printed by cargo 1.95, libtest and cargo-nextest 0.9; see
//! `fixtures/ci/` for captured examples):
//! - cargo test: `     Running unittests src/lib.rs (target/debug/deps/NAME-HASH)`,
//!   `   Doc-tests CRATE`, `running N tests`, `test PATH ... ok | FAILED | ignored[, reason]`,
//!   `test result: ok. P passed; F failed; I ignored; M measured; X filtered out; ...`,
//!   `error: test failed, to rerun pass ARG`, `error: N targets failed:` with one
//!   indented `ARG` per line.
//! - cargo nextest: `Starting N tests across M binaries`, status lines
//!   `[TRY n ]STATUS [ time] BINARY-ID PATH`, `Summary [ time] [RUN/]N tests run: ...`,
//!   `Cancelling due to test failure`, `warning: X/Y tests were not run ...`.
//! - JUnit XML as nextest writes it (read with the `quick-junit` crate): one
//!   `testsuite` per binary id, `flakyFailure` for passing retries, `rerunFailure` for
//!   failing ones.
//! - libtest `--list` (also through `cargo test -- --list`): `PATH: test` lines and
//!   `N tests, M benchmarks`.
//!
//! Lines may carry a CI prefix (GitHub's ISO timestamp, ANSI colour codes); [`clean_line`]
//! removes it. Text logs are read line by line: memory grows with the number of tests
//! and targets, not with the size of the log.

use std::fmt;
use std::io::{BufRead, Read};
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::ci::nextest;
use crate::libtest;

/// Errors reading a test log.
#[derive(Debug, thiserror::Error)]
pub enum LogError {
    /// The log file could not be opened or read.
    #[error("cannot read test log {path}: {source}")]
    Io {
        /// The log's path.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
    /// The log looked like JUnit XML but could not be parsed.
    #[error("cannot parse JUnit XML {path}: {message}")]
    Junit {
        /// The log's path.
        path: PathBuf,
        /// The parser's message (with the element path at fault).
        message: String,
    },
    /// A line that looks like a nextest status line but whose fields cannot be read: the
    /// log is not understood, and no target is made up from it.
    #[error("{path}:{line}: cannot place this nextest status line ({text})")]
    Unplaced {
        /// The log's path.
        path: PathBuf,
        /// 1-based line.
        line: usize,
        /// Why, and the line as cleaned.
        text: String,
    },
    /// The log looked like a nextest recording but could not be read.
    #[error("cannot read nextest recording {path}: {message}")]
    Recording {
        /// The recording's path.
        path: PathBuf,
        /// What is wrong (the event line at fault).
        message: String,
    },
    /// The log holds no line of any known test-runner format.
    #[error(
        "{path}: no test-runner output found (expected cargo test, cargo nextest, JUnit XML or libtest --list output)"
    )]
    Empty {
        /// The log's path.
        path: PathBuf,
    },
}

/// Which runner printed a log.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum LogFormat {
    /// `cargo test` (libtest's human output, with cargo's `Running` lines).
    CargoTest,
    /// `cargo nextest run` human output.
    Nextest,
    /// JUnit XML (as written by cargo-nextest).
    Junit,
    /// libtest `--list` output: tests enumerated, none executed.
    LibtestList,
    /// libtest's JSON event lines, as `cargo nextest run --message-format libtest-json`
    /// writes them (test names `package::crate$path`); other lines are skipped.
    LibtestJson,
    /// A nextest recorded run (0.9.123+): a portable recording (`.zip`), its `run.log.zst`,
    /// or the event lines ([`crate::ci::recording`]).
    NextestRecording,
}

impl fmt::Display for LogFormat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            LogFormat::CargoTest => "cargo test",
            LogFormat::Nextest => "cargo nextest",
            LogFormat::Junit => "JUnit XML",
            LogFormat::LibtestList => "libtest --list",
            LogFormat::LibtestJson => "libtest JSON",
            LogFormat::NextestRecording => "nextest recording",
        })
    }
}

/// The outcome of one test in one log.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Outcome {
    /// Ran and passed on its first attempt.
    Passed,
    /// Failed on an earlier attempt and passed on a retry.
    Flaky,
    /// Ran and failed (on every attempt).
    Failed,
    /// Not run: `#[ignore]`d, or skipped by the runner.
    Ignored,
    /// Only listed (`--list`): it exists, it did not run.
    Listed,
}

impl Outcome {
    /// Whether the test body executed.
    pub fn ran(self) -> bool {
        matches!(self, Outcome::Passed | Outcome::Flaky | Outcome::Failed)
    }
}

impl fmt::Display for Outcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Outcome::Passed => "passed",
            Outcome::Flaky => "flaky",
            Outcome::Failed => "failed",
            Outcome::Ignored => "ignored",
            Outcome::Listed => "listed",
        })
    }
}

/// One test's result within a target.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TestResult {
    /// The test's path inside its target, e.g. `admission::refuses_over_budget`.
    pub path: String,
    /// Its outcome.
    pub outcome: Outcome,
    /// How many times it was attempted (1 without retries; 0 when it did not run).
    pub attempts: u32,
    /// 1-based line of the log that gave the (last) outcome; 0 for JUnit.
    pub line: usize,
}

/// A libtest `test result:` summary line of a log: its counts and where it stands (the
/// JSON spells the counts beside `line`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Summary {
    /// What the line says.
    #[serde(flatten)]
    pub counts: libtest::SummaryCounts,
    /// 1-based line of the summary.
    pub line: usize,
}

/// How many results of each outcome a target printed (all of them, kept or not).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Counts {
    /// Passed on the first attempt.
    pub passed: u64,
    /// Passed on a retry.
    pub flaky: u64,
    /// Failed.
    pub failed: u64,
    /// Ignored or skipped.
    pub ignored: u64,
    /// Listed only.
    pub listed: u64,
}

impl Counts {
    fn add(&mut self, o: Outcome, delta: i64) {
        let slot = match o {
            Outcome::Passed => &mut self.passed,
            Outcome::Flaky => &mut self.flaky,
            Outcome::Failed => &mut self.failed,
            Outcome::Ignored => &mut self.ignored,
            Outcome::Listed => &mut self.listed,
        };
        *slot = slot.saturating_add_signed(delta);
    }

    /// All results.
    pub fn total(&self) -> u64 {
        self.passed + self.flaky + self.failed + self.ignored + self.listed
    }

    /// Results whose test body executed.
    pub fn executed(&self) -> u64 {
        self.passed + self.flaky + self.failed
    }
}

/// How a target's package and kind were learnt.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Mapping {
    /// The log names package and target (nextest's binary id, JUnit's suite name).
    Printed,
    /// `cargo metadata` of the workspace: the crate name and source file cargo printed
    /// belong to exactly one target of one package.
    Metadata,
    /// From cargo test's `Running`/`Doc-tests` line alone: the package is not known and a
    /// unit-test target away from `src/lib.rs`, `src/main.rs` and `src/bin/` may be a
    /// library or a binary. Matching then needs the log to leave one choice.
    Guessed,
    /// `cargo metadata` left several packages with a target of this name and source
    /// (`tests/round_trip.rs` in two packages); the package comes from the order cargo
    /// runs packages and their targets in (see [`crate::ci::targets::Workspace::map`]).
    Order,
}

/// One test target (binary) as seen in a log.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TargetRun {
    /// The package, when known (printed by nextest/JUnit, or from `cargo metadata`).
    pub package: Option<String>,
    /// The target, nextest-style: `lib`, `bin/NAME`, `doc`, or the integration test's name.
    pub target: String,
    /// The crate name cargo printed (`Running ... (deps/NAME-HASH)`, `Doc-tests NAME`), if any.
    pub krate: Option<String>,
    /// How `package` and `target` were learnt.
    pub mapping: Mapping,
    /// The target printed libtest's terse (`-q`) progress: its passing tests are not named.
    pub terse: bool,
    /// The other target this may be, when the log cannot tell: a unit-test target at a
    /// non-default path is `lib` or `bin/NAME` (`target` holds `lib`, this `bin/NAME`).
    pub alt_target: Option<String>,
    /// Its source file as printed by cargo (`tests/alpha.rs`), when printed.
    pub source: Option<String>,
    /// 1-based line where the target starts; 0 for JUnit.
    pub line: usize,
    /// `running N tests` (or the `--list` count): how many tests the target announced.
    pub declared: Option<u64>,
    /// Results in log order: all of them, or those a keep filter selected
    /// ([`parse_file_filtered`]); [`TargetRun::counts`] always counts every result.
    pub tests: Vec<TestResult>,
    /// Counts of every result printed.
    pub counts: Counts,
    /// The `test result:` line, when the target finished.
    pub summary: Option<Summary>,
}

impl TargetRun {
    fn new(package: Option<String>, target: String, source: Option<String>, line: usize) -> Self {
        TargetRun {
            mapping: if package.is_some() {
                Mapping::Printed
            } else {
                Mapping::Guessed
            },
            package,
            target,
            krate: None,
            terse: false,
            alt_target: None,
            source,
            line,
            declared: None,
            tests: Vec::new(),
            counts: Counts::default(),
            summary: None,
        }
    }

    /// `package::target` (or `?::target` when the package is not known), for messages.
    pub fn label(&self) -> String {
        format!(
            "{}::{}",
            self.package.as_deref().unwrap_or("?"),
            self.target
        )
    }

    /// How many tests in this target executed (passed, flaky or failed).
    pub fn executed(&self) -> u64 {
        self.counts.executed()
    }
}

/// nextest's closing `Summary` line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct RunSummary {
    /// Tests that ran.
    pub run: u64,
    /// Tests the run meant to run (`N/M tests run`); equal to `run` when nextest printed one number.
    pub total: u64,
    /// Passed (flaky included).
    pub passed: u64,
    /// Failed.
    pub failed: u64,
    /// Skipped.
    pub skipped: u64,
    /// 1-based line.
    pub line: usize,
}

/// Where a run stopped early because of a failure (fail-fast).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FailFast {
    /// 1-based line of the evidence (`error: test failed, ...` that ended the log, or
    /// nextest's `Cancelling due to test failure`).
    pub line: usize,
    /// The evidence, as printed.
    pub evidence: String,
    /// The target whose failure stopped the run, when known.
    pub after_target: Option<String>,
    /// Tests known not to have run (nextest's `X/Y tests were not run`), when printed.
    pub not_run: Option<u64>,
}

/// Everything one log says about a run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RunLog {
    /// The detected format.
    pub format: LogFormat,
    /// Targets in log order.
    pub targets: Vec<TargetRun>,
    /// Set when the run stopped at a failure and later targets never ran.
    pub fail_fast: Option<FailFast>,
    /// Targets cargo reported as failed (`error: N targets failed:` / rerun hints), as printed (`--test beta`).
    pub failed_targets: Vec<String>,
    /// nextest's `Summary` line, when present.
    pub run_summary: Option<RunSummary>,
    /// nextest's `Starting N tests across M binaries`: N.
    pub announced: Option<u64>,
    /// Lines read.
    pub lines: usize,
    /// The first line that looked like a nextest status line but could not be read (line
    /// number, why and the line); [`parse_file`] turns it into [`LogError::Unplaced`].
    #[serde(skip)]
    pub unplaced: Option<(usize, String)>,
}

/// Something in a log that makes "green" say less than it seems to.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Finding {
    /// The run stopped at a failure: whatever came after never ran.
    FailFastTruncation {
        /// Evidence line.
        line: usize,
        /// The failing target, when known.
        after_target: Option<String>,
        /// Tests not run, when printed.
        not_run: Option<u64>,
    },
    /// A target announced `running 0 tests` without filtering anything out.
    ZeroTests {
        /// `package::target`.
        target: String,
        /// Line of the target.
        line: usize,
    },
    /// A target's name filter excluded tests.
    FilteredOut {
        /// `package::target`.
        target: String,
        /// How many were excluded.
        count: u64,
        /// Line of the summary.
        line: usize,
    },
    /// A target printed libtest's terse (`-q`) progress: the log names none of its passing tests.
    Terse {
        /// `package::target`.
        target: String,
        /// Line of the target.
        line: usize,
    },
    /// A target started but printed no `test result:` (crashed, killed, or the log was cut).
    Unfinished {
        /// `package::target`.
        target: String,
        /// Line of the target.
        line: usize,
    },
    /// A target announced more tests than the log shows results for.
    MissingResults {
        /// `package::target`.
        target: String,
        /// Announced.
        declared: u64,
        /// Results seen.
        seen: u64,
    },
    /// The log's last summary line describes less than the whole run.
    PartialSummary {
        /// Line of that summary.
        line: usize,
        /// What it covers.
        covers: String,
        /// What the whole run holds.
        whole: String,
    },
}

impl fmt::Display for Finding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Finding::FailFastTruncation {
                line,
                after_target,
                not_run,
            } => {
                write!(f, "fail-fast truncation at line {line}")?;
                if let Some(t) = after_target {
                    write!(f, " after {t} failed")?;
                }
                if let Some(n) = not_run {
                    write!(f, " ({n} tests not run)")?;
                }
                f.write_str(": later targets never ran")
            }
            Finding::ZeroTests { target, line } => {
                write!(f, "{target} (line {line}) ran 0 tests")
            }
            Finding::FilteredOut {
                target,
                count,
                line,
            } => write!(
                f,
                "{target}: {count} tests filtered out by a name filter (line {line})"
            ),
            Finding::Terse { target, line } => write!(
                f,
                "{target} (line {line}) printed terse progress (`cargo test -q`): the log cannot show which of its tests ran"
            ),
            Finding::Unfinished { target, line } => write!(
                f,
                "{target} (line {line}) started but printed no `test result:` line"
            ),
            Finding::MissingResults {
                target,
                declared,
                seen,
            } => write!(
                f,
                "{target} announced {declared} tests but the log shows {seen} results"
            ),
            Finding::PartialSummary {
                line,
                covers,
                whole,
            } => write!(
                f,
                "the last summary line (line {line}) covers {covers}, not the whole run ({whole})"
            ),
        }
    }
}

impl RunLog {
    /// The findings of [`Finding`]'s kinds for this run, in a fixed order: truncation,
    /// per-target findings in log order, then the partial-summary check.
    pub fn findings(&self) -> Vec<Finding> {
        let mut out = Vec::new();
        if let Some(ff) = &self.fail_fast {
            out.push(Finding::FailFastTruncation {
                line: ff.line,
                after_target: ff.after_target.clone(),
                not_run: ff.not_run,
            });
        }
        if self.format == LogFormat::LibtestList {
            return out;
        }
        for t in &self.targets {
            if t.terse {
                out.push(Finding::Terse {
                    target: t.label(),
                    line: t.line,
                });
            }
            let filtered = t.summary.map(|s| s.counts.filtered_out).unwrap_or(0);
            if t.declared == Some(0) && filtered == 0 {
                out.push(Finding::ZeroTests {
                    target: t.label(),
                    line: t.line,
                });
            }
            if let Some(s) = t.summary.filter(|s| s.counts.filtered_out > 0) {
                out.push(Finding::FilteredOut {
                    target: t.label(),
                    count: s.counts.filtered_out,
                    line: s.line,
                });
            }
            if self.format == LogFormat::CargoTest {
                if t.summary.is_none() {
                    out.push(Finding::Unfinished {
                        target: t.label(),
                        line: t.line,
                    });
                } else if let Some(declared) = t.declared.filter(|_| !t.terse) {
                    let seen = t.counts.total();
                    if seen < declared {
                        out.push(Finding::MissingResults {
                            target: t.label(),
                            declared,
                            seen,
                        });
                    }
                }
            }
        }
        match self.format {
            LogFormat::CargoTest => {
                let with_summary: Vec<&TargetRun> = self
                    .targets
                    .iter()
                    .filter(|t| t.summary.is_some())
                    .collect();
                if let Some(last) = with_summary.last()
                    && with_summary.len() > 1
                {
                    let s = last.summary.expect("filtered on summary");
                    let all: u64 = self.targets.iter().map(|t| t.counts.total()).sum();
                    let failed: usize = self
                        .targets
                        .iter()
                        .filter(|t| t.summary.is_some_and(|s| !s.counts.ok))
                        .count();
                    out.push(Finding::PartialSummary {
                        line: s.line,
                        covers: format!(
                            "{} only ({} passed, {} failed)",
                            last.label(),
                            s.counts.passed,
                            s.counts.failed
                        ),
                        whole: format!(
                            "{} targets, {} test results, {} failed targets",
                            self.targets.len(),
                            all,
                            failed
                        ),
                    });
                }
            }
            LogFormat::Nextest => {
                if let Some(rs) = self.run_summary
                    && rs.run < rs.total
                {
                    out.push(Finding::PartialSummary {
                        line: rs.line,
                        covers: format!("{} of {} tests", rs.run, rs.total),
                        whole: format!("{} tests announced", rs.total),
                    });
                }
            }
            _ => {}
        }
        out
    }
}

/// Remove a CI prefix from one log line: a GitHub Actions ISO-8601 timestamp
/// (`2024-05-01T10:00:00.1234567Z `), ANSI escape sequences, GitLab's
/// `section_start:...`/`section_end:...` markers, and a trailing `\r`.
pub fn clean_line(raw: &str) -> std::borrow::Cow<'_, str> {
    let mut s = raw.strip_suffix('\r').unwrap_or(raw);
    s = strip_timestamp(s);
    if !s.contains('\u{1b}') && !s.contains('\r') {
        return std::borrow::Cow::Borrowed(s);
    }
    // GitLab writes `section_start:TIME:NAME\r\x1b[0K` before the visible text.
    if let Some(pos) = s.rfind('\r') {
        s = &s[pos + 1..];
    }
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            // CSI: ESC [ params final-byte (0x40..=0x7e).
            if chars.next() == Some('[') {
                for d in chars.by_ref() {
                    if ('\u{40}'..='\u{7e}').contains(&d) {
                        break;
                    }
                }
            }
        } else {
            out.push(c);
        }
    }
    std::borrow::Cow::Owned(out)
}

/// Strip a leading `YYYY-MM-DDTHH:MM:SS[.fraction]Z ` timestamp, if there is one.
pub fn strip_timestamp(s: &str) -> &str {
    let b = s.as_bytes();
    let digits =
        |r: std::ops::Range<usize>| r.clone().all(|i| b.get(i).is_some_and(u8::is_ascii_digit));
    if b.len() < 20
        || !digits(0..4)
        || b[4] != b'-'
        || !digits(5..7)
        || b[7] != b'-'
        || !digits(8..10)
        || b[10] != b'T'
        || !digits(11..13)
        || b[13] != b':'
        || !digits(14..16)
        || b[16] != b':'
        || !digits(17..19)
    {
        return s;
    }
    let mut i = 19;
    if b.get(i) == Some(&b'.') {
        i += 1;
        while b.get(i).is_some_and(u8::is_ascii_digit) {
            i += 1;
        }
    }
    if b.get(i) == Some(&b'Z') {
        i += 1;
    } else {
        return s;
    }
    match b.get(i) {
        Some(b' ') => &s[i + 1..],
        None => "",
        _ => s,
    }
}

/// Guess the format from the start of a log (the first few KiB).
pub fn detect_format(head: &str) -> LogFormat {
    let trimmed = head.trim_start_matches('\u{feff}').trim_start();
    if trimmed.starts_with("<?xml") || trimmed.starts_with("<testsuites") {
        return LogFormat::Junit;
    }
    if trimmed.starts_with("{\"type\":") {
        return LogFormat::LibtestJson;
    }
    // Drawn for a terminal, nextest's whole run may be one line of redraws.
    if head.contains("Nextest run ID ") || head.contains("Nextest run\u{1b}[0m ID ") {
        return LogFormat::Nextest;
    }
    let mut list_lines = 0;
    for raw in head.lines() {
        let line = clean_line(raw);
        let t = line.trim();
        if t.starts_with("Nextest run ID") || (t.starts_with("Starting ") && t.contains(" across "))
        {
            return LogFormat::Nextest;
        }
        if t.starts_with("running ") || t.starts_with("test result:") {
            return LogFormat::CargoTest;
        }
        if t.ends_with(": test") || t.ends_with(": bench") || libtest::parse_list_count(t).is_some()
        {
            list_lines += 1;
        }
    }
    if list_lines > 0 {
        LogFormat::LibtestList
    } else {
        LogFormat::CargoTest
    }
}

/// Read and parse the log at `path` (format detected from its first 64 KiB).
///
/// # Errors
/// [`LogError::Io`] when it cannot be read, [`LogError::Junit`] for malformed XML,
/// [`LogError::Empty`] when no target or test line of any known format is found.
pub fn parse_file(path: &Path) -> Result<RunLog, LogError> {
    parse_file_filtered(path, None)
}

/// Like [`parse_file`], but a cargo test or `--list` log keeps in [`TargetRun::tests`] only
/// the results whose path `keep` accepts (all are still counted): memory then grows with
/// the number of targets and kept tests, not with the log. nextest and JUnit logs keep all
/// results (retries are matched by path).
///
/// # Errors
/// As [`parse_file`].
pub fn parse_file_filtered(
    path: &Path,
    keep: Option<&dyn Fn(&str) -> bool>,
) -> Result<RunLog, LogError> {
    let io = |source| LogError::Io {
        path: path.to_path_buf(),
        source,
    };
    let file = std::fs::File::open(path).map_err(io)?;
    let mut reader = std::io::BufReader::with_capacity(1 << 16, file);
    let mut head = Vec::with_capacity(1 << 16);
    (&mut reader)
        .take(1 << 16)
        .read_to_end(&mut head)
        .map_err(io)?;
    if crate::ci::recording::looks_like(&head) {
        reader.read_to_end(&mut head).map_err(io)?;
        let rec = crate::ci::recording::read(&head).map_err(|message| LogError::Recording {
            path: path.to_path_buf(),
            message,
        })?;
        return Ok(from_recording(&rec));
    }
    let format = detect_format(&String::from_utf8_lossy(&head));
    let chained = std::io::BufReader::new(std::io::Cursor::new(head).chain(reader));
    let log = match format {
        LogFormat::Junit => parse_junit(chained).map_err(|message| LogError::Junit {
            path: path.to_path_buf(),
            message,
        })?,
        LogFormat::LibtestJson => parse_libtest_json(chained).map_err(io)?,
        text => parse_text_filtered(chained, text, keep).map_err(io)?,
    };
    if let Some((line, text)) = log.unplaced.clone() {
        return Err(LogError::Unplaced {
            path: path.to_path_buf(),
            line,
            text,
        });
    }
    if log.targets.is_empty() && log.run_summary.is_none() {
        return Err(LogError::Empty {
            path: path.to_path_buf(),
        });
    }
    Ok(log)
}

/// Parse JUnit XML (nextest's layout: `testsuite` name = binary id, `testcase` name = test path).
///
/// # Errors
/// The deserializer's message when the XML is malformed.
pub fn parse_junit<R: BufRead>(reader: R) -> Result<RunLog, String> {
    use quick_junit::{Report, TestCaseStatus};
    let report = Report::deserialize(reader).map_err(|e| e.to_string())?;
    let mut log = RunLog::empty(LogFormat::Junit);
    log.announced = Some(report.tests as u64);
    for suite in &report.test_suites {
        let (package, target) = split_binary_id(suite.name.as_str());
        let mut run = TargetRun::new(Some(package), target, None, 0);
        run.declared = Some(suite.test_cases.len() as u64);
        for case in &suite.test_cases {
            let (outcome, attempts) = match &case.status {
                TestCaseStatus::Success { flaky_runs } if flaky_runs.is_empty() => {
                    (Outcome::Passed, 1)
                }
                TestCaseStatus::Success { flaky_runs } => {
                    (Outcome::Flaky, flaky_runs.len() as u32 + 1)
                }
                // nextest `--flaky-result fail`: `<failure type="flaky failure" message="test
                // passed on attempt 2/3 but is configured to fail when flaky">` beside its
                // `flakyFailure` runs (which quick-junit does not keep under a failure): the
                // attempts are the message's.
                TestCaseStatus::NonSuccess {
                    ty,
                    message,
                    reruns,
                    ..
                } if ty.as_deref() == Some("flaky failure") => (
                    Outcome::Failed,
                    message
                        .as_deref()
                        .and_then(flaky_failure_attempts)
                        .unwrap_or(reruns.len() as u32 + 1),
                ),
                TestCaseStatus::NonSuccess { reruns, .. } => {
                    (Outcome::Failed, reruns.len() as u32 + 1)
                }
                TestCaseStatus::Skipped { .. } => (Outcome::Ignored, 0),
            };
            run.counts.add(outcome, 1);
            run.tests.push(TestResult {
                path: case.name.as_str().to_string(),
                outcome,
                attempts,
                line: 0,
            });
        }
        log.targets.push(run);
    }
    Ok(log)
}

/// Read libtest JSON event lines (`{"type":"test","event":"ok","name":...}`), one object a
/// line; lines that are not JSON objects (a merged human log) are skipped. nextest names a
/// test `package::crate$path`: the package is known, the crate may be the library, a
/// binary or an integration test ([`TargetRun::alt_target`] says `lib` when it may be the
/// library under another name). A plain libtest name (no `$`) goes to one unnamed target.
///
/// # Errors
/// I/O errors from `reader`.
pub fn parse_libtest_json<R: BufRead>(mut reader: R) -> std::io::Result<RunLog> {
    let mut log = RunLog::empty(LogFormat::LibtestJson);
    let mut buf = Vec::new();
    let mut line_no = 0;
    loop {
        buf.clear();
        if reader.read_until(b'\n', &mut buf)? == 0 {
            break;
        }
        line_no += 1;
        let text = String::from_utf8_lossy(&buf);
        let t = clean_line(text.trim_end_matches('\n'));
        let t = t.trim();
        if !t.starts_with('{') {
            continue;
        }
        let Ok(v) = serde_json::from_str::<serde_json::Value>(t) else {
            continue;
        };
        if v["type"] != "test" {
            continue;
        }
        let outcome = match v["event"].as_str() {
            Some("ok") => Outcome::Passed,
            Some("failed" | "timeout") => Outcome::Failed,
            Some("ignored") => Outcome::Ignored,
            _ => continue,
        };
        let Some(name) = v["name"].as_str() else {
            continue;
        };
        let (binary, path) = match name.split_once('$') {
            Some((b, p)) => (Some(b), p),
            None => (None, name),
        };
        let (package, krate) = match binary.map(|b| b.split_once("::").unwrap_or((b, b))) {
            Some((p, k)) => (Some(p.to_string()), Some(k.to_string())),
            None => (None, None),
        };
        let idx = match log
            .targets
            .iter()
            .position(|r| r.package == package && r.krate == krate)
        {
            Some(i) => i,
            None => {
                let mut run = match (&package, &krate) {
                    (Some(p), Some(k)) if p.replace('-', "_") == *k => {
                        let mut r =
                            TargetRun::new(Some(p.clone()), "lib".to_string(), None, line_no);
                        r.alt_target = Some(format!("bin/{k}"));
                        r
                    }
                    (Some(p), Some(k)) => {
                        let mut r = TargetRun::new(Some(p.clone()), k.clone(), None, line_no);
                        r.alt_target = Some("lib".to_string());
                        r
                    }
                    _ => TargetRun::new(None, "?".to_string(), None, line_no),
                };
                run.krate = krate.clone();
                run.mapping = Mapping::Guessed;
                log.targets.push(run);
                log.targets.len() - 1
            }
        };
        let run = &mut log.targets[idx];
        run.counts.add(outcome, 1);
        run.tests.push(TestResult {
            path: path.to_string(),
            outcome,
            attempts: u32::from(outcome.ran()),
            line: line_no,
        });
    }
    log.lines = line_no;
    Ok(log)
}

/// Split a nextest binary id (`pkg`, `pkg::name`, `pkg::bin/name`) into package and target.
pub fn split_binary_id(id: &str) -> (String, String) {
    match id.split_once("::") {
        Some((pkg, target)) => (pkg.to_string(), target.to_string()),
        None => (id.to_string(), "lib".to_string()),
    }
}

impl RunLog {
    fn empty(format: LogFormat) -> Self {
        RunLog {
            format,
            targets: Vec::new(),
            fail_fast: None,
            failed_targets: Vec::new(),
            run_summary: None,
            announced: None,
            lines: 0,
            unplaced: None,
        }
    }
}

/// Parse a text log (cargo test, nextest or libtest `--list`) line by line.
///
/// # Errors
/// I/O errors from `reader`. Invalid UTF-8 is replaced, never an error.
pub fn parse_text<R: BufRead>(reader: R, format: LogFormat) -> std::io::Result<RunLog> {
    parse_text_filtered(reader, format, None)
}

/// [`parse_text`] with a keep filter (see [`parse_file_filtered`]).
///
/// # Errors
/// I/O errors from `reader`.
pub fn parse_text_filtered<R: BufRead>(
    mut reader: R,
    format: LogFormat,
    keep: Option<&dyn Fn(&str) -> bool>,
) -> std::io::Result<RunLog> {
    if format == LogFormat::LibtestJson {
        return parse_libtest_json(reader);
    }
    let mut p = TextParser::new(format, keep);
    let mut buf = Vec::with_capacity(256);
    loop {
        buf.clear();
        if reader.read_until(b'\n', &mut buf)? == 0 {
            break;
        }
        if buf.last() == Some(&b'\n') {
            buf.pop();
        }
        let raw = String::from_utf8_lossy(&buf);
        p.line(&raw);
    }
    Ok(p.finish())
}

/// Parse a text log held in memory (see [`parse_text`]).
pub fn parse_str(text: &str) -> RunLog {
    let mut end = text.len().min(1 << 16);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    let format = detect_format(&text[..end]);
    parse_text(text.as_bytes(), format).expect("reading from memory cannot fail")
}

struct TextParser<'k> {
    log: RunLog,
    keep: Option<&'k dyn Fn(&str) -> bool>,
    line_no: usize,
    /// `test X ... ` printed without its outcome yet (libtest with --nocapture output between).
    pending: Option<String>,
    /// The last line was `error: test failed, to rerun pass ...`: a fail-fast stop unless
    /// another target follows.
    stop_candidate: Option<FailFast>,
    /// Inside cargo's `error: N targets failed:` list.
    in_failed_list: bool,
    /// Inside libtest's failure summary of a terse target (`---- NAME stdout ----` headings).
    in_failures: bool,
    /// After nextest's `Summary` line: status lines there repeat earlier ones.
    after_summary: bool,
    /// Inside a test's captured output as nextest prints it (after `stdout ───`,
    /// `stderr ───` or `--- STDOUT: ...`): a line there is never taken for a status line.
    in_output: bool,
    cancelled: Option<FailFast>,
    /// The first nextest line that looked like a status line but could not be read.
    unplaced: Option<(usize, String)>,
}

impl<'k> TextParser<'k> {
    fn new(format: LogFormat, keep: Option<&'k dyn Fn(&str) -> bool>) -> Self {
        TextParser {
            log: RunLog::empty(format),
            keep,
            line_no: 0,
            pending: None,
            stop_candidate: None,
            in_failed_list: false,
            in_failures: false,
            after_summary: false,
            in_output: false,
            cancelled: None,
            unplaced: None,
        }
    }

    fn line(&mut self, raw: &str) {
        self.line_no += 1;
        match self.log.format {
            LogFormat::Nextest if is_terminal_drawing(raw) => {
                // Drawn for a terminal: status lines padded to its width, a progress bar
                // redrawn in place, no newline between them.
                for segment in terminal_segments(raw) {
                    self.nextest_line(&segment);
                }
            }
            LogFormat::Nextest => {
                let line = clean_line(raw);
                self.nextest_line(&line);
            }
            _ => {
                let line = clean_line(raw);
                self.cargo_line(&line);
            }
        }
    }

    fn start_target(&mut self, target: TargetRun) {
        // Another target started after `error: test failed`: not a fail-fast stop.
        self.stop_candidate = None;
        self.pending = None;
        self.in_failures = false;
        self.log.targets.push(target);
    }

    fn cargo_line(&mut self, line: &str) {
        let t = line.trim();
        if self.in_failed_list {
            if let Some(arg) = t.strip_prefix('`').and_then(|a| a.strip_suffix('`')) {
                if !self.log.failed_targets.iter().any(|x| x == arg) {
                    self.log.failed_targets.push(arg.to_string());
                }
                return;
            }
            self.in_failed_list = false;
        }
        if let Some(rest) = t.strip_prefix("Running ") {
            if let Some(target) = parse_running(rest, self.line_no) {
                self.start_target(target);
            }
            return;
        }
        if let Some(krate) = t.strip_prefix("Doc-tests ") {
            let mut target = TargetRun::new(None, "doc".to_string(), None, self.line_no);
            target.krate = Some(krate.trim().to_string());
            self.start_target(target);
            return;
        }
        // Everything below belongs to a libtest binary and starts at column 0.
        if line.starts_with(' ') {
            return;
        }
        if let Some(n) = libtest::parse_running(t) {
            // `cargo test -q` prints no `Running` line: a second `running N tests` in the
            // same target starts the next (unnamed) one.
            if self
                .log
                .targets
                .last()
                .is_some_and(|l| l.declared.is_some() || l.summary.is_some())
            {
                let unnamed = TargetRun::new(None, "?".to_string(), None, self.line_no);
                self.start_target(unnamed);
            }
            self.ensure_target().declared = Some(n);
            return;
        }
        if let Some(rest) = t.strip_prefix("test result: ") {
            if let Some(c) = libtest::parse_summary(rest) {
                let line = self.line_no;
                let target = self.ensure_target();
                target.summary = Some(Summary { counts: c, line });
            }
            self.in_failures = false;
            return;
        }
        if self.log.format == LogFormat::CargoTest
            && self.pending.is_none()
            && self
                .log
                .targets
                .last()
                .is_some_and(|l| l.declared.is_some() && l.summary.is_none())
            && libtest::is_terse_progress(t)
        {
            self.ensure_target().terse = true;
            return;
        }
        if let Some(rest) = t.strip_prefix("test ") {
            if let Some(r) = libtest::parse_result(rest) {
                match r.status {
                    Some(s) => {
                        self.pending = None;
                        self.push_result(r.name.to_string(), outcome_of(s), 1);
                    }
                    None => self.pending = Some(r.name.to_string()),
                }
            }
            return;
        }
        if let Some(name) = self.pending.take() {
            if let Some((s, _)) = libtest::status_of(t) {
                self.push_result(name, outcome_of(s), 1);
                return;
            }
            self.pending = Some(name);
        }
        if t == "failures:" {
            self.in_failures = true;
            return;
        }
        if self.in_failures
            && let Some(name) = libtest::failure_heading(t)
        {
            // A terse target names its failed tests only here.
            if self.log.targets.last().is_some_and(|l| l.terse) {
                self.push_result(name.to_string(), Outcome::Failed, 1);
            }
            return;
        }
        if self.log.format == LogFormat::LibtestList {
            if let Some(path) = libtest::list_entry(t) {
                self.push_result(path.to_string(), Outcome::Listed, 0);
            } else if let Some(n) = libtest::parse_list_count(t) {
                self.ensure_target().declared = Some(n);
            }
            return;
        }
        self.cargo_error_line(t);
    }

    /// cargo's own `error: ...` lines after a failed target: a fail-fast stop, or the list
    /// of failed targets that `--no-fail-fast` prints at the end.
    fn cargo_error_line(&mut self, t: &str) {
        if let Some(rest) = t
            .strip_prefix("error: test failed, to rerun pass ")
            .or_else(|| t.strip_prefix("error: doctest failed, to rerun pass "))
        {
            let arg = rest.trim_matches('`').to_string();
            if !self.log.failed_targets.contains(&arg) {
                self.log.failed_targets.push(arg);
            }
            self.stop_candidate = Some(FailFast {
                line: self.line_no,
                evidence: t.to_string(),
                after_target: self.log.targets.last().map(TargetRun::label),
                not_run: None,
            });
            return;
        }
        if t.starts_with("error: ")
            && (t.ends_with(" targets failed:") || t.ends_with(" target failed:"))
        {
            // `--no-fail-fast` lists every failed target at the end.
            self.stop_candidate = None;
            self.in_failed_list = true;
        }
    }

    fn ensure_target(&mut self) -> &mut TargetRun {
        if self.log.targets.is_empty() {
            // A bare libtest binary's output (or `cargo test -q`) has no `Running` line.
            self.log
                .targets
                .push(TargetRun::new(None, "?".to_string(), None, self.line_no));
        }
        self.log.targets.last_mut().expect("just ensured")
    }

    fn push_result(&mut self, path: String, outcome: Outcome, attempts: u32) {
        let line = self.line_no;
        let kept = self.keep.is_none_or(|k| k(&path));
        let target = self.ensure_target();
        target.counts.add(outcome, 1);
        if kept {
            target.tests.push(TestResult {
                path,
                outcome,
                attempts,
                line,
            });
        }
    }

    fn nextest_line(&mut self, line: &str) {
        let t = line.trim();
        if t.is_empty() {
            return;
        }
        if let Some(rest) = t.strip_prefix("Starting ") {
            if let Some((n, _)) = rest.split_once(' ')
                && let Ok(n) = n.parse::<u64>()
            {
                self.log.announced = Some(n);
            }
            self.in_output = false;
            return;
        }
        if let Some(rest) = t.strip_prefix("Summary [") {
            self.after_summary = true;
            self.in_output = false;
            if let Some((_, counts)) = rest.split_once(']')
                && let Some(mut rs) = parse_nextest_summary(counts.trim())
            {
                rs.line = self.line_no;
                self.log.run_summary = Some(rs);
            }
            return;
        }
        if t.starts_with("Cancelling due to ") || t.starts_with("Cancelling ") {
            self.in_output = false;
            if self.cancelled.is_none() {
                self.cancelled = Some(FailFast {
                    line: self.line_no,
                    evidence: t.to_string(),
                    after_target: self.last_failed_binary(),
                    not_run: None,
                });
            }
            return;
        }
        if let Some(rest) = t.strip_prefix("warning: ")
            && rest.contains(" tests were not run due to test failure")
        {
            let not_run = rest
                .split_once('/')
                .and_then(|(n, _)| n.parse::<u64>().ok());
            let last_failed = self.last_failed_binary();
            let ff = self.cancelled.get_or_insert(FailFast {
                line: self.line_no,
                evidence: t.to_string(),
                after_target: None,
                not_run: None,
            });
            ff.not_run = not_run;
            if ff.after_target.is_none() {
                ff.after_target = last_failed;
            }
            return;
        }
        if is_output_heading(t) {
            self.in_output = true;
            return;
        }
        let status = match nextest::parse_status_line(t) {
            nextest::Parsed::NotStatus => return,
            nextest::Parsed::Unplaceable(_) if self.in_output => return,
            nextest::Parsed::Unplaceable(why) => {
                if self.unplaced.is_none() {
                    self.unplaced = Some((self.line_no, format!("{why}: {t}")));
                }
                return;
            }
            nextest::Parsed::Status(s) => s,
        };
        self.in_output = false;
        let Some(outcome) = status.outcome.map(outcome_of_nextest) else {
            // SLOW, RETRY, DELAY, START, TERMINATING, the progress bar's running list.
            return;
        };
        if self.after_summary {
            // The closing recap repeats verdicts known from the lines above, except
            // `FLKY-FL a/b`: a test that passed on a retry and that the run counts failed
            // (`--flaky-result fail`).
            if status.status.starts_with("FLKY-FL") {
                self.flaky_failed(&status);
            }
            return;
        }
        self.record_status(&status, outcome);
    }

    /// The recap's `FLKY-FL a/b`: the test (flaky by the lines above) is failed, after a
    /// attempts; one the lines above did not show is recorded so.
    fn flaky_failed(&mut self, status: &nextest::StatusLine<'_>) {
        let (package, target) = split_binary_id(status.binary_id);
        let line = self.line_no;
        let found = self
            .log
            .targets
            .iter_mut()
            .filter(|r| r.package.as_deref() == Some(package.as_str()) && r.target == target)
            .find_map(|run| {
                let i = run.tests.iter().position(|r| r.path == status.test)?;
                Some((run, i))
            });
        match found {
            Some((run, i)) => {
                let prev = &mut run.tests[i];
                let before = prev.outcome;
                prev.outcome = Outcome::Failed;
                prev.line = line;
                if let Some(a) = status.attempt {
                    prev.attempts = prev.attempts.max(a);
                }
                run.counts.add(before, -1);
                run.counts.add(Outcome::Failed, 1);
            }
            None => self.record_status(status, Outcome::Failed),
        }
    }

    /// Records one nextest status line's verdict `outcome` for its test: a new result, or
    /// a retry of one seen before.
    fn record_status(&mut self, status: &nextest::StatusLine<'_>, outcome: Outcome) {
        let (package, target) = split_binary_id(status.binary_id);
        let idx = match self
            .log
            .targets
            .iter()
            .position(|r| r.package.as_deref() == Some(package.as_str()) && r.target == target)
        {
            Some(i) => i,
            None => {
                self.log
                    .targets
                    .push(TargetRun::new(Some(package), target, None, self.line_no));
                self.log.targets.len() - 1
            }
        };
        let line = self.line_no;
        let run = &mut self.log.targets[idx];
        match run.tests.iter_mut().find(|r| r.path == status.test) {
            Some(prev) => {
                // A retry of a test seen before.
                let before = prev.outcome;
                prev.attempts += 1;
                prev.line = line;
                prev.outcome = match (prev.outcome, outcome) {
                    (Outcome::Failed | Outcome::Flaky, Outcome::Passed) => Outcome::Flaky,
                    (_, o) => o,
                };
                if let Some(a) = status.attempt {
                    prev.attempts = prev.attempts.max(a);
                }
                run.counts.add(before, -1);
                run.counts.add(prev.outcome, 1);
            }
            None => {
                // `TRY 2 PASS` without an earlier line (the first attempt's failure hidden
                // by the status level): it passed on a retry.
                let outcome = match (status.attempt, outcome) {
                    (Some(a), Outcome::Passed) if a > 1 => Outcome::Flaky,
                    (_, o) => o,
                };
                run.counts.add(outcome, 1);
                run.tests.push(TestResult {
                    path: status.test.to_string(),
                    outcome,
                    attempts: if outcome.ran() {
                        status.attempt.unwrap_or(1)
                    } else {
                        0
                    },
                    line,
                })
            }
        }
    }

    fn last_failed_binary(&self) -> Option<String> {
        let mut last: Option<(usize, String)> = None;
        for t in &self.log.targets {
            for r in &t.tests {
                if r.outcome == Outcome::Failed && last.as_ref().is_none_or(|(l, _)| r.line > *l) {
                    last = Some((r.line, t.label()));
                }
            }
        }
        last.map(|(_, l)| l)
    }

    fn finish(mut self) -> RunLog {
        self.log.lines = self.line_no;
        self.log.unplaced = self.unplaced.take();
        self.log.fail_fast = match self.log.format {
            LogFormat::Nextest => self.cancelled.filter(|c| {
                // nextest prints `Cancelling` even when nothing was left; only a shortfall truncates.
                c.not_run.is_some_and(|n| n > 0)
                    || self.log.run_summary.is_some_and(|rs| rs.run < rs.total)
            }),
            _ => self.stop_candidate,
        };
        self.log
    }
}

fn outcome_of(s: libtest::Status) -> Outcome {
    match s {
        libtest::Status::Passed => Outcome::Passed,
        libtest::Status::Failed => Outcome::Failed,
        libtest::Status::Ignored => Outcome::Ignored,
    }
}

/// A nextest recording's tests as a run log: one target per binary id, in event order; a
/// run cancelled before every test finished is cut short (fail-fast).
pub fn from_recording(rec: &crate::ci::recording::Recording) -> RunLog {
    use crate::ci::recording::RecordedOutcome;
    let mut log = RunLog::empty(LogFormat::NextestRecording);
    log.announced = rec.initial_run_count;
    log.lines = rec.lines;
    for t in &rec.tests {
        let (package, target) = split_binary_id(&t.binary_id);
        let idx = match log
            .targets
            .iter()
            .position(|r| r.package.as_deref() == Some(package.as_str()) && r.target == target)
        {
            Some(i) => i,
            None => {
                log.targets
                    .push(TargetRun::new(Some(package), target, None, t.line));
                log.targets.len() - 1
            }
        };
        let outcome = match t.outcome {
            RecordedOutcome::Passed => Outcome::Passed,
            RecordedOutcome::Flaky => Outcome::Flaky,
            RecordedOutcome::Failed => Outcome::Failed,
            RecordedOutcome::Ignored => Outcome::Ignored,
        };
        let run = &mut log.targets[idx];
        run.counts.add(outcome, 1);
        run.tests.push(TestResult {
            path: t.name.clone(),
            outcome,
            attempts: t.attempts,
            line: t.line,
        });
    }
    if rec.cut_short()
        && let Some((reason, line)) = &rec.cancelled
    {
        let after_target = rec
            .tests
            .iter()
            .rev()
            .find(|t| t.outcome == RecordedOutcome::Failed)
            .map(|t| t.binary_id.clone());
        log.fail_fast = Some(FailFast {
            line: *line,
            evidence: format!("run cancelled ({reason})"),
            after_target,
            not_run: match (rec.initial_run_count, rec.finished_count) {
                (Some(i), Some(f)) => Some(i.saturating_sub(f)),
                _ => None,
            },
        });
    }
    log
}

/// The attempt a flaky test passed on, from nextest's flaky-failure message (`test passed on
/// attempt 2/3 but is configured to fail when flaky`).
fn flaky_failure_attempts(message: &str) -> Option<u32> {
    let rest = &message[message.find("attempt ")? + "attempt ".len()..];
    rest.split('/').next()?.trim().parse().ok()
}

fn outcome_of_nextest(o: nextest::Outcome) -> Outcome {
    match o {
        nextest::Outcome::Passed => Outcome::Passed,
        nextest::Outcome::Flaky => Outcome::Flaky,
        nextest::Outcome::Failed => Outcome::Failed,
        nextest::Outcome::Ignored => Outcome::Ignored,
    }
}

/// nextest's heading before a test's captured output: `stdout ───`, `stderr ───`,
/// `output ───` (0.9.7x and later) or `--- STDOUT: ... ---` (earlier 0.9 releases).
fn is_output_heading(t: &str) -> bool {
    let words = ["stdout", "stderr", "output"];
    words.iter().any(|w| {
        t.strip_prefix(w)
            .is_some_and(|r| r.trim_start().starts_with('─') || r.trim_start().starts_with("---"))
    }) || t.starts_with("--- STDOUT:")
        || t.starts_with("--- STDERR:")
}

/// Whether a raw line holds terminal drawing: a carriage return or a cursor-movement
/// escape (`ESC [ n A`, `ESC [ 2 K`, ...), as nextest's progress bar writes them.
fn is_terminal_drawing(raw: &str) -> bool {
    let b = raw.as_bytes();
    raw.trim_end_matches('\r').contains('\r')
        || b.windows(2).enumerate().any(|(i, w)| {
            w == b"\x1b[" && {
                let mut j = i + 2;
                while j < b.len() && (b[j].is_ascii_digit() || b[j] == b';') {
                    j += 1;
                }
                j < b.len() && b[j] != b'm'
            }
        })
}

/// Split a terminal drawing into the lines a screen would show: carriage returns and
/// cursor-movement escapes end a line, colour escapes are dropped, and a run of four or
/// more spaces outside `[...]` and `(...)` ends a line too (lines are padded to the
/// terminal's width instead of ending in a newline).
pub fn terminal_segments(raw: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut depth = 0usize;
    let mut spaces = 0usize;
    let flush = |cur: &mut String, out: &mut Vec<String>| {
        let t = cur.trim();
        if !t.is_empty() {
            out.push(t.to_string());
        }
        cur.clear();
    };
    let mut chars = raw.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\u{1b}' => {
                if chars.peek() == Some(&'[') {
                    chars.next();
                    let mut fin = 'm';
                    for d in chars.by_ref() {
                        if ('\u{40}'..='\u{7e}').contains(&d) {
                            fin = d;
                            break;
                        }
                    }
                    if fin != 'm' {
                        flush(&mut cur, &mut out);
                        depth = 0;
                        spaces = 0;
                    }
                }
            }
            '\r' | '\n' => {
                flush(&mut cur, &mut out);
                depth = 0;
                spaces = 0;
            }
            ' ' => {
                spaces += 1;
                if spaces == 4 && depth == 0 {
                    flush(&mut cur, &mut out);
                } else if spaces < 4 || depth > 0 {
                    cur.push(' ');
                }
            }
            _ => {
                spaces = 0;
                match c {
                    '[' | '(' => depth += 1,
                    ']' | ')' => depth = depth.saturating_sub(1),
                    _ => {}
                }
                cur.push(c);
            }
        }
    }
    flush(&mut cur, &mut out);
    out
}

/// `N tests run: a passed (k flaky), b failed, c skipped` or `R/N tests run: ...`.
fn parse_nextest_summary(s: &str) -> Option<RunSummary> {
    let (count, rest) = s
        .split_once(" tests run:")
        .or_else(|| s.split_once(" test run:"))?;
    let (run, total) = match count.split_once('/') {
        Some((r, t)) => (r.parse().ok()?, t.parse().ok()?),
        None => {
            let n: u64 = count.parse().ok()?;
            (n, n)
        }
    };
    let mut rs = RunSummary {
        run,
        total,
        passed: 0,
        failed: 0,
        skipped: 0,
        line: 0,
    };
    // `12 passed (1 slow, 1 flaky, 1 leaky), 2 skipped`: drop the parenthesised details.
    let mut plain = String::with_capacity(rest.len());
    let mut depth = 0usize;
    for c in rest.chars() {
        match c {
            '(' => depth += 1,
            ')' => depth = depth.saturating_sub(1),
            _ if depth == 0 => plain.push(c),
            _ => {}
        }
    }
    for part in plain.split(',') {
        let part = part.trim();
        let Some((n, word)) = part.split_once(' ') else {
            continue;
        };
        let Ok(n) = n.parse::<u64>() else { continue };
        let word = word.split_whitespace().next().unwrap_or("");
        match word {
            "passed" => rs.passed = n,
            "failed" => rs.failed += n,
            "timed" => rs.failed += n,
            "skipped" => rs.skipped = n,
            _ => {}
        }
    }
    Some(rs)
}

/// `unittests src/lib.rs (target/debug/deps/NAME-HASH)` or `tests/alpha.rs (…/alpha-HASH)`.
///
/// The package is not printed: it stays `None` (see [`Mapping::Guessed`]). A unit-test
/// target is `lib` at `src/lib.rs`, `bin/NAME` at `src/main.rs` or under `src/bin/`, and
/// either elsewhere (`target` = `lib`, [`TargetRun::alt_target`] = `bin/NAME`).
fn parse_running(rest: &str, line: usize) -> Option<TargetRun> {
    let (what, binary) = rest.rsplit_once(" (")?;
    let binary = binary.strip_suffix(')')?;
    let file = binary.rsplit(['/', '\\']).next()?;
    let file = file.strip_suffix(".exe").unwrap_or(file);
    let name = match file.rsplit_once('-') {
        Some((n, hash)) if hash.len() == 16 && hash.bytes().all(|b| b.is_ascii_hexdigit()) => n,
        _ => file,
    };
    let (unit, source) = match what.strip_prefix("unittests ") {
        Some(src) => (true, src.trim()),
        None => (false, what.trim()),
    };
    let mut alt = None;
    let target = if unit {
        let src = source.replace('\\', "/");
        if src == "src/lib.rs" {
            "lib".to_string()
        } else if src == "src/main.rs" || src.starts_with("src/bin/") {
            format!("bin/{name}")
        } else {
            alt = Some(format!("bin/{name}"));
            "lib".to_string()
        }
    } else {
        name.to_string()
    };
    let mut run = TargetRun::new(None, target, Some(source.to_string()), line);
    run.krate = Some(name.to_string());
    run.alt_target = alt;
    Some(run)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn strips_github_timestamps_only_when_well_formed() {
        assert_eq!(
            strip_timestamp("2024-05-01T10:00:00.1234567Z running 2 tests"),
            "running 2 tests"
        );
        assert_eq!(strip_timestamp("2024-05-01T10:00:00Z x"), "x");
        assert_eq!(
            strip_timestamp("2024-05-01 10:00:00Z x"),
            "2024-05-01 10:00:00Z x"
        );
        assert_eq!(strip_timestamp("test a ... ok"), "test a ... ok");
    }

    #[test]
    fn cleans_ansi_and_gitlab_sections() {
        assert_eq!(
            clean_line(
                "section_start:1700000000:step_script\r\u{1b}[0K\u{1b}[32;1mChecking out\u{1b}[0;m"
            ),
            "Checking out"
        );
    }

    #[test]
    fn running_lines_name_targets_nextest_style() {
        let lib = parse_running(
            "unittests src/lib.rs (target/debug/deps/lanes_sample-f83c98c32e79bb9d)",
            1,
        )
        .unwrap();
        assert_eq!(
            (
                lib.package.as_deref(),
                lib.target.as_str(),
                lib.krate.as_deref()
            ),
            (None, "lib", Some("lanes_sample"))
        );
        let other = parse_running(
            "unittests src/codec.rs (target/debug/deps/codec-ead26561b9b9f4a2)",
            1,
        )
        .unwrap();
        assert_eq!(
            (other.target.as_str(), other.alt_target.as_deref()),
            ("lib", Some("bin/codec"))
        );
        let bin = parse_running(
            "unittests src/main.rs (target/debug/deps/harness-0123456789abcdef)",
            1,
        )
        .unwrap();
        assert_eq!((bin.package, bin.target.as_str()), (None, "bin/harness"));
        let it = parse_running(
            "tests/alpha.rs (target/debug/deps/alpha-580865da5778d747)",
            1,
        )
        .unwrap();
        assert_eq!(
            (it.target.as_str(), it.source.as_deref()),
            ("alpha", Some("tests/alpha.rs"))
        );
    }

    #[test]
    fn pending_outcome_on_a_later_line_is_joined() {
        let log = parse_str(
            "running 1 test\ntest slow ... \nsome output\nok\n\ntest result: ok. 1 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.00s\n",
        );
        assert_eq!(log.targets[0].tests[0].path, "slow");
        assert_eq!(log.targets[0].tests[0].outcome, Outcome::Passed);
    }

    proptest! {
        // Arbitrary bytes never panic the text parser, whatever the format.
        #[test]
        fn arbitrary_text_never_panics(lines in proptest::collection::vec(".{0,60}", 0..40)) {
            let text = lines.join("\n");
            for format in [LogFormat::CargoTest, LogFormat::Nextest, LogFormat::LibtestList] {
                let log = parse_text(text.as_bytes(), format).unwrap();
                let want = if text.is_empty() { 0 } else { text.split('\n').count() - usize::from(text.ends_with('\n')) };
                prop_assert_eq!(log.lines, want);
            }
        }

        // Any text, multi-byte characters included, parses without panicking.
        #[test]
        fn parse_str_never_panics(text in "(\\PC|\n){0,200}") {
            let log = parse_str(&text);
            let want = if text.is_empty() { 0 } else { text.split('\n').count() - usize::from(text.ends_with('\n')) };
            prop_assert_eq!(log.lines, want);
        }

        // The timestamp prefix is removed for any valid time and any payload.
        #[test]
        fn timestamp_prefix_removed(h in 0u32..24, m in 0u32..60, frac in "[0-9]{0,7}", payload in "[ -~]{0,40}") {
            let dot = if frac.is_empty() { String::new() } else { format!(".{frac}") };
            let line = format!("2026-11-29T{h:02}:{m:02}:07{dot}Z {payload}");
            prop_assert_eq!(strip_timestamp(&line), payload.as_str());
        }
    }
}
