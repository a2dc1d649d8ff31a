//! Lane audit over logs captured from real cargo test / nextest / libtest runs (fixtures/ci/).

use std::path::{Path, PathBuf};
use std::process::Command;

use harness::ci::audit::{self, LaneAuditArgs, OutputFormat, Verdict};
use harness::ci::testlog::{self, Finding, LogFormat, Outcome, RunLog};
use harness::system::exit::ExitCode;

fn fixture(name: &str) -> PathBuf {
    // Relative to the package directory (the tests' working directory), so reports and
    // snapshots hold no machine path.
    Path::new("../fixtures/ci").join(name)
}

fn parse(name: &str) -> RunLog {
    testlog::parse_file(&fixture(name)).unwrap_or_else(|e| panic!("{name}: {e}"))
}

/// (target, [(path, outcome)]): targets in log order, tests sorted, the package left out.
fn shape(log: &RunLog) -> Vec<(String, Vec<(String, Outcome)>)> {
    log.targets
        .iter()
        .map(|t| {
            let mut tests: Vec<(String, Outcome)> = t
                .tests
                .iter()
                .map(|r| (r.path.clone(), r.outcome))
                .collect();
            // libtest prints results as threads finish: order differs between runs.
            tests.sort_by(|a, b| a.0.cmp(&b.0));
            (t.target.clone(), tests)
        })
        .collect()
}

fn outcome(log: &RunLog, target: &str, path: &str) -> Option<(Outcome, u32)> {
    log.targets
        .iter()
        .filter(|t| t.target == target)
        .flat_map(|t| &t.tests)
        .find(|r| r.path == path)
        .map(|r| (r.outcome, r.attempts))
}

#[test]
fn cargo_fail_fast_second_of_three_targets_stops_the_run() {
    let log = parse("cargo-fail-fast.log");
    assert_eq!(log.format, LogFormat::CargoTest);
    let targets: Vec<&str> = log.targets.iter().map(|t| t.target.as_str()).collect();
    // lib unit tests, then alpha, then beta fails: gamma and the doc tests never ran.
    assert_eq!(targets, ["lib", "alpha", "beta"]);
    let ff = log.fail_fast.as_ref().expect("fail-fast stop detected");
    assert_eq!(ff.after_target.as_deref(), Some("?::beta"));
    assert!(ff.evidence.contains("--test beta"), "{}", ff.evidence);
    assert_eq!(outcome(&log, "beta", "doubles"), Some((Outcome::Failed, 1)));
    assert_eq!(log.failed_targets, ["--test beta"]);
    let findings = log.findings();
    assert!(matches!(findings[0], Finding::FailFastTruncation { .. }));
    assert!(
        findings
            .iter()
            .any(|f| matches!(f, Finding::PartialSummary { covers, .. } if covers.starts_with("?::beta only")))
    );
}

#[test]
fn cargo_no_fail_fast_runs_every_target_and_lists_failures() {
    let log = parse("cargo-no-fail-fast.log");
    let targets: Vec<&str> = log.targets.iter().map(|t| t.target.as_str()).collect();
    assert_eq!(targets, ["lib", "alpha", "beta", "gamma", "doc"]);
    assert_eq!(
        log.fail_fast, None,
        "a run that went on after a failure is not truncated"
    );
    assert_eq!(log.failed_targets, ["--test beta"]);
    assert_eq!(
        outcome(&log, "gamma", "must_run_budget"),
        Some((Outcome::Passed, 1))
    );
    assert_eq!(
        outcome(&log, "doc", "src/lib.rs - add (line 6)"),
        Some((Outcome::Passed, 1))
    );
    let doc = log.targets.iter().find(|t| t.target == "doc").unwrap();
    // cargo prints the crate name, not the package: the package stays unknown.
    assert_eq!(
        (doc.package.as_deref(), doc.krate.as_deref()),
        (None, Some("lanes_sample"))
    );
}

#[test]
fn github_timestamped_log_reads_like_the_plain_one() {
    let plain = parse("cargo-fail-fast.log");
    let stamped = parse("cargo-fail-fast.github.log");
    assert_eq!(shape(&stamped), shape(&plain));
    assert_eq!(
        stamped.fail_fast.as_ref().map(|f| f.line),
        plain.fail_fast.as_ref().map(|f| f.line)
    );
}

#[test]
fn zero_test_target_and_ignored_test_are_seen() {
    let log = parse("cargo-green.log");
    let lib = &log.targets[0];
    assert_eq!((lib.target.as_str(), lib.declared), ("lib", Some(0)));
    assert!(
        log.findings()
            .iter()
            .any(|f| matches!(f, Finding::ZeroTests { target, .. } if target == "?::lib"))
    );
    assert_eq!(
        outcome(&log, "alpha", "adds_large"),
        Some((Outcome::Ignored, 1))
    );
    assert_eq!(log.fail_fast, None);
}

#[test]
fn filter_that_excluded_the_must_run_tests_is_reported() {
    let log = parse("cargo-filtered.log");
    let filtered: Vec<(String, u64)> = log
        .findings()
        .into_iter()
        .filter_map(|f| match f {
            Finding::FilteredOut { target, count, .. } => Some((target, count)),
            _ => None,
        })
        .collect();
    assert_eq!(
        filtered,
        [
            ("?::beta".to_string(), 2),
            ("?::gamma".to_string(), 2),
            ("?::doc".to_string(), 1)
        ]
    );
    let must = audit::MustRun {
        package: Some("lanes-sample".into()),
        target: Some("gamma".into()),
        path: "must_run_budget".into(),
    };
    assert_eq!(
        audit::lane_status(&log, &must).status,
        audit::LaneStatus::FilteredOut
    );
}

#[test]
fn nextest_fail_fast_names_the_tests_not_run() {
    let log = parse("nextest-fail-fast.log");
    assert_eq!(log.format, LogFormat::Nextest);
    let ff = log
        .fail_fast
        .as_ref()
        .expect("nextest cancellation is a truncation");
    assert_eq!(ff.not_run, Some(2));
    assert_eq!(ff.after_target.as_deref(), Some("lanes-sample::beta"));
    let rs = log.run_summary.unwrap();
    assert_eq!((rs.run, rs.total, rs.failed), (4, 6, 1));
    assert_eq!(outcome(&log, "gamma", "must_run_budget"), None);
    assert!(
        log.findings().iter().any(
            |f| matches!(f, Finding::PartialSummary { covers, .. } if covers == "4 of 6 tests")
        )
    );
}

#[test]
fn nextest_no_fail_fast_ran_everything() {
    let log = parse("nextest-no-fail-fast.log");
    assert_eq!(log.fail_fast, None);
    let rs = log.run_summary.unwrap();
    assert_eq!((rs.run, rs.total, rs.passed, rs.failed), (6, 6, 5, 1));
    // The recap after `Summary` repeats the failure: it must not count twice.
    assert_eq!(log.targets.iter().map(|t| t.tests.len()).sum::<usize>(), 6);
    assert_eq!(outcome(&log, "beta", "doubles"), Some((Outcome::Failed, 1)));
}

#[test]
fn retried_test_is_flaky_in_nextest_output_and_junit() {
    let text = parse("nextest-retries.log");
    assert_eq!(
        outcome(&text, "gamma", "flaky_once"),
        Some((Outcome::Flaky, 2))
    );
    let junit = parse("nextest-retries-junit.xml");
    assert_eq!(junit.format, LogFormat::Junit);
    assert_eq!(
        outcome(&junit, "gamma", "flaky_once"),
        Some((Outcome::Flaky, 2))
    );
    assert_eq!(
        outcome(&junit, "beta", "doubles"),
        Some((Outcome::Passed, 1))
    );
    assert_eq!(junit.targets[0].package.as_deref(), Some("lanes-sample"));
    assert_eq!(
        junit.targets.iter().map(|t| t.tests.len()).sum::<usize>(),
        6
    );
}

#[test]
fn libtest_list_enumerates_without_running() {
    let log = parse("libtest-list.log");
    assert_eq!(log.format, LogFormat::LibtestList);
    let declared: Vec<(&str, Option<u64>, usize)> = log
        .targets
        .iter()
        .map(|t| (t.target.as_str(), t.declared, t.tests.len()))
        .collect();
    assert_eq!(
        declared,
        [
            ("lib", Some(0), 0),
            ("alpha", Some(3), 3),
            ("beta", Some(2), 2),
            ("gamma", Some(2), 2),
            ("doc", Some(1), 1)
        ]
    );
    assert!(
        log.targets
            .iter()
            .flat_map(|t| &t.tests)
            .all(|r| r.outcome == Outcome::Listed)
    );
}

fn args(lanes: &str, must_run: &str, logs: &[&str]) -> LaneAuditArgs {
    LaneAuditArgs {
        lanes: fixture(lanes),
        logs: logs.iter().map(|s| s.to_string()).collect(),
        must_run: fixture(must_run),
        manifest_path: None,
        jobs: None,
        format: OutputFormat::Table,
    }
}

#[test]
fn audit_names_islands_failures_and_exit_code() {
    let report = audit::audit_files(&args("lanes.toml", "must-run.txt", &[])).unwrap();
    let verdicts: Vec<(&str, Verdict)> = report
        .tests
        .iter()
        .map(|t| (t.test.as_str(), t.verdict))
        .collect();
    assert_eq!(
        verdicts,
        [
            // Required lanes: `unit` stopped before gamma, `quick` filtered it out; only
            // the optional nightly lane ran it.
            ("lanes-sample::gamma must_run_budget", Verdict::Island),
            (
                "lanes-sample::beta admission::refuses_over_budget",
                Verdict::Ok
            ),
            ("lanes-sample::beta doubles", Verdict::Failed),
            // Ignored everywhere: never executed.
            ("lanes-sample::alpha adds_large", Verdict::Island),
            ("adds_small", Verdict::Ok),
        ]
    );
    assert_eq!(
        report.islands,
        [
            "lanes-sample::gamma must_run_budget",
            "lanes-sample::alpha adds_large"
        ]
    );
    assert_eq!(report.exit_code, ExitCode::Weak);
    insta::assert_snapshot!("audit_table", report.to_table());
    insta::assert_snapshot!("audit_markdown", report.to_markdown());
    insta::assert_json_snapshot!("audit_json", report);
}

#[test]
fn truncated_required_lane_fails_the_audit_even_when_another_lane_passed() {
    // `unit` (fail-fast) never reached gamma; `nightly`, made required via --log of a
    // no-fail-fast run, did run it. The test ran and passed in a required lane, but sits
    // in a truncated required lane meant to run it.
    let dir = tempfile::tempdir().unwrap();
    let lanes = dir.path().join("lanes.toml");
    std::fs::write(
        &lanes,
        "[[lane]]\nname = \"unit\"\nrequired = true\n\n[[lane]]\nname = \"full\"\nrequired = true\n",
    )
    .unwrap();
    let must = dir.path().join("must-run.txt");
    std::fs::write(&must, "lanes-sample::gamma must_run_budget\n").unwrap();
    let a = LaneAuditArgs {
        lanes,
        logs: vec![
            format!("unit={}", fixture("cargo-fail-fast.log").display()),
            format!("full={}", fixture("cargo-no-fail-fast.log").display()),
        ],
        must_run: must,
        manifest_path: None,
        jobs: None,
        format: OutputFormat::Json,
    };
    let report = audit::audit_files(&a).unwrap();
    assert_eq!(report.tests[0].verdict, Verdict::Truncated);
    assert_eq!(report.exit_code, ExitCode::Weak);
}

#[test]
fn green_required_lane_exits_zero_with_catalog_must_run() {
    let report = audit::audit_files(&args("lanes-green.toml", "catalog.toml", &[])).unwrap();
    let tests: Vec<&str> = report.tests.iter().map(|t| t.test.as_str()).collect();
    assert_eq!(
        tests,
        [
            "lanes-sample::beta admission::refuses_over_budget",
            "lanes-sample::beta doubles"
        ]
    );
    assert!(report.tests.iter().all(|t| t.verdict == Verdict::Ok));
    assert_eq!(report.exit_code, ExitCode::AllMet);
}

fn harness(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_harness"))
        .args(args)
        .output()
        .expect("run harness");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn cli_exit_codes_0_1_2() {
    let lanes = fixture("lanes.toml").display().to_string();
    let green = fixture("lanes-green.toml").display().to_string();
    let must = fixture("must-run.txt").display().to_string();
    let catalog = fixture("catalog.toml").display().to_string();
    let (code, out, _) = harness(&["lane-audit", "--lanes", &green, "--must-run", &catalog]);
    assert_eq!(code, 0, "{out}");
    let (code, out, _) = harness(&["lane-audit", "--lanes", &lanes, "--must-run", &must]);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("island: lanes-sample::gamma must_run_budget"),
        "{out}"
    );
    // A log that cannot be read: exit 2, naming the lane and the file.
    let (code, _, err) = harness(&[
        "lane-audit",
        "--lanes",
        &lanes,
        "--must-run",
        &must,
        "--log",
        "unit=no-such.log",
    ]);
    assert_eq!(code, 2);
    assert!(
        err.contains("lane unit") && err.contains("no-such.log"),
        "{err}"
    );
    // --log for a lane the config does not have.
    let (code, _, err) = harness(&[
        "lane-audit",
        "--lanes",
        &lanes,
        "--must-run",
        &must,
        "--log",
        "nope=x.log",
    ]);
    assert_eq!(code, 2);
    assert!(err.contains("no lane named \"nope\""), "{err}");
}

#[test]
fn bad_lanes_config_is_a_typed_error_naming_the_field() {
    let dir = tempfile::tempdir().unwrap();
    let cases = [
        ("[[lane]]\nname = \"a\"\n", "required"),
        (
            "[[lane]]\nname = \"a\"\nrequired = true\nruns = [\"beta\"]\n",
            "runs entry \"beta\"",
        ),
        (
            "[[lane]]\nname = \"a\"\nrequired = true\n[[lane]]\nname = \"a\"\nrequired = false\n",
            "appears twice",
        ),
        (
            "[[lane]]\nname = \"a\"\nrequired = true\nrun = []\n",
            "unknown field `run`",
        ),
        ("", "no [[lane]] table"),
    ];
    for (text, want) in cases {
        let p = dir.path().join("lanes.toml");
        std::fs::write(&p, text).unwrap();
        let err = audit::LanesConfig::load(&p).unwrap_err().to_string();
        assert!(
            err.contains(want) && err.contains("lanes.toml"),
            "{text:?}: {err}"
        );
    }
}

#[test]
fn log_with_no_test_output_is_an_error_not_an_empty_pass() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("empty.log");
    std::fs::write(
        &p,
        "    Finished `test` profile\nerror: could not compile `x`\n",
    )
    .unwrap();
    let err = testlog::parse_file(&p).unwrap_err();
    assert!(matches!(err, testlog::LogError::Empty { .. }), "{err}");
}

#[test]
fn keep_filter_drops_other_results_but_counts_them() {
    let all = parse("cargo-no-fail-fast.log");
    let keep = |p: &str| p == "must_run_budget";
    let some =
        testlog::parse_file_filtered(&fixture("cargo-no-fail-fast.log"), Some(&keep)).unwrap();
    let kept: Vec<&str> = some
        .targets
        .iter()
        .flat_map(|t| &t.tests)
        .map(|r| r.path.as_str())
        .collect();
    assert_eq!(kept, ["must_run_budget"]);
    let counts = |l: &RunLog| l.targets.iter().map(|t| t.counts).collect::<Vec<_>>();
    assert_eq!(counts(&some), counts(&all));
    assert_eq!(some.findings(), all.findings());
    // Counts agree with the summary lines cargo printed (independent of our result lines).
    for t in &all.targets {
        let s = t.summary.unwrap();
        assert_eq!(
            (t.counts.passed, t.counts.failed, t.counts.ignored),
            (s.counts.passed, s.counts.failed, s.counts.ignored),
            "{}",
            t.label()
        );
    }
}

#[test]
fn a_required_lane_whose_job_was_skipped_ran_nothing_though_its_log_is_green() {
    // GitHub reports a skipped required job as a success; the run's job list says it was
    // skipped: its (green) log is not read and the must-run tests only it ran are islands.
    let green = fixture("lanes-green.toml").display().to_string();
    let catalog = fixture("catalog.toml").display().to_string();
    let skipped = fixture("jobs-unit-skipped.json").display().to_string();
    let ran = fixture("jobs-all-ran.json").display().to_string();
    let base = ["lane-audit", "--lanes", &green, "--must-run", &catalog];
    let (code, out, err) = harness(&[&base[..], &["--jobs", &ran]].concat());
    assert_eq!(code, 0, "{out}{err}");
    let (code, out, err) =
        harness(&[&base[..], &["--jobs", &skipped, "--format", "json"]].concat());
    assert_eq!(code, 1, "{out}{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["islands"].as_array().unwrap().len(), 2, "{out}");
    let unit = &v["tests"][0]["lanes"][0];
    assert_eq!(unit["lane"], "unit");
    assert_eq!(unit["status"], "job-did-not-run");
    let findings = v["lanes"][0]["findings"][0].as_str().unwrap();
    assert!(
        findings.starts_with(
            "its job did not run (skipped): GitHub reports a skipped required job as a success"
        ),
        "{findings}"
    );
    // A lane whose job the list does not hold is an error naming it (exit 2).
    let lanes = fixture("lanes.toml").display().to_string();
    let must = fixture("must-run.txt").display().to_string();
    let (code, _, err) = harness(&[
        "lane-audit",
        "--lanes",
        &lanes,
        "--must-run",
        &must,
        "--jobs",
        &skipped,
    ]);
    assert_eq!(code, 2);
    assert!(
        err.contains("no job named \"quick\"") && err.contains("lane quick"),
        "{err}"
    );
}
