//! The audit on the corpus captured from real cargo test and cargo-nextest runs (fixtures/ci/corpus-*,
//! scripts/capture-test-logs): every answer is checked against the runners' own records
//! (nextest's JUnit, libtest's `--list` and summary lines), never against text written here.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use harness::ci::audit::{self, Lane, LaneStatus, LanesConfig, MustRun, Verdict};
use harness::ci::targets::Workspace;
use harness::ci::testlog::{self, LogError, LogFormat, Outcome, RunLog};
use harness::system::exit::ExitCode;

fn fixture(name: &str) -> PathBuf {
    Path::new("../fixtures/ci").join(name)
}

fn parse(name: &str) -> RunLog {
    testlog::parse_file(&fixture(name)).unwrap_or_else(|e| panic!("{name}: {e}"))
}

fn workspace() -> Workspace {
    Workspace::from_json(&std::fs::read(fixture("corpus-metadata.json")).unwrap()).unwrap()
}

fn mapped(name: &str) -> RunLog {
    let mut log = parse(name);
    workspace().map(&mut log);
    log
}

/// nextest's JUnit report: (binary id, test name) → passed (flaky included) or not.
fn junit(name: &str) -> BTreeMap<(String, String), bool> {
    let f = std::fs::File::open(fixture(name)).unwrap();
    let report = quick_junit::Report::deserialize(std::io::BufReader::new(f)).unwrap();
    let mut out = BTreeMap::new();
    for suite in &report.test_suites {
        for case in &suite.test_cases {
            let passed = matches!(case.status, quick_junit::TestCaseStatus::Success { .. });
            out.insert((suite.name.to_string(), case.name.to_string()), passed);
        }
    }
    out
}

/// `--list` output: per crate section (`Running`/`Doc-tests` line order), the names.
fn listed() -> Vec<Vec<String>> {
    let text = std::fs::read_to_string(fixture("corpus-cargo-list.log")).unwrap();
    let mut out: Vec<Vec<String>> = Vec::new();
    for line in text.lines() {
        let t = line.trim();
        if t.starts_with("Running ") || t.starts_with("Doc-tests ") {
            out.push(Vec::new());
        } else if let Some(name) = harness::libtest::list_entry(line)
            && let Some(last) = out.last_mut()
        {
            last.push(name.to_string());
        }
    }
    out
}

/// The lane audit of one log as the single required lane, with these must-run tests.
fn audit_one(log: RunLog, tests: &[MustRun]) -> audit::AuditReport {
    let cfg = LanesConfig {
        lanes: vec![Lane {
            name: "ci".into(),
            required: true,
            runs: None,
            log: None,
            description: None,
            job: None,
        }],
    };
    audit::audit(&cfg, &[(Some("log".into()), Some(log))], tests)
}

fn must(binary_id: &str, path: &str) -> MustRun {
    let (package, target) = testlog::split_binary_id(binary_id);
    MustRun {
        package: Some(package),
        target: Some(target),
        path: path.into(),
    }
}

fn outcomes(log: &RunLog) -> BTreeMap<(String, String), Outcome> {
    let mut out = BTreeMap::new();
    for t in &log.targets {
        let id = match t.target.as_str() {
            "lib" => t.package.clone().unwrap_or_default(),
            other => format!("{}::{other}", t.package.as_deref().unwrap_or("?")),
        };
        for r in &t.tests {
            out.insert((id.clone(), r.path.clone()), r.outcome);
        }
    }
    out
}

#[test]
fn cargo_test_names_are_the_names_list_prints_for_every_decoration() {
    // should panic, compile fail, compile (no_run), ignored with a reason, `::`, non-ASCII.
    let log = parse("corpus-cargo.log");
    let got: Vec<Vec<String>> = log
        .targets
        .iter()
        .map(|t| {
            let mut v: Vec<String> = t.tests.iter().map(|r| r.path.clone()).collect();
            v.sort();
            v
        })
        .collect();
    let mut want = listed();
    for v in &mut want {
        v.sort();
    }
    assert_eq!(got, want);
    // Each target's results add up to libtest's own summary line.
    for t in &log.targets {
        let s = t.summary.expect("summary");
        assert_eq!(
            (t.counts.passed, t.counts.failed, t.counts.ignored),
            (s.counts.passed, s.counts.failed, s.counts.ignored),
            "{}",
            t.label()
        );
    }
}

#[test]
fn case_1_decorated_tests_that_passed_are_ok_not_islands() {
    let truth = junit("corpus-nextest-ci-junit.xml");
    let tests = [
        must("acme-codec", "tests::panics"),
        must("acme-codec", "tests::panics_with_message"),
        must("acme-codec", "tests::grüße_ünïcode"),
        must("acme-codec", "tests::deep::er::nested"),
    ];
    for t in &tests {
        let id = match t.target.as_deref() {
            Some("lib") => t.package.clone().unwrap(),
            _ => unreachable!(),
        };
        assert_eq!(truth.get(&(id, t.path.clone())), Some(&true), "{t}");
    }
    let report = audit_one(mapped("corpus-cargo.log"), &tests);
    assert_eq!(report.exit_code, ExitCode::AllMet, "{}", report.to_table());
    // Doc tests: `--list` names them without ` - compile fail`/` - compile`; cargo test exited 0.
    let docs = listed()
        .into_iter()
        .find(|v| v.iter().any(|n| n.contains("codec.rs")))
        .unwrap();
    assert_eq!(docs.len(), 4);
    let doc_tests: Vec<MustRun> = docs
        .iter()
        .filter(|n| !n.ends_with("(line 17)"))
        .map(|n| must("acme-codec::doc", n))
        .collect();
    assert_eq!(doc_tests.len(), 3, "{docs:?}");
    let report = audit_one(mapped("corpus-cargo.log"), &doc_tests);
    assert_eq!(report.exit_code, ExitCode::AllMet, "{}", report.to_table());
    // The `ignore` doc test and `#[ignore = "reason"]` are present and ignored, not absent.
    let log = mapped("corpus-cargo.log");
    let hit = audit::lane_status(&log, &must("acme-codec", "tests::ignored_with_reason"));
    assert_eq!(hit.status, LaneStatus::Ignored);
}

#[test]
fn case_2_library_named_unlike_its_package_maps_through_metadata() {
    let log = mapped("corpus-cargo.log");
    let codec = log
        .targets
        .iter()
        .find(|t| t.krate.as_deref() == Some("codec") && t.target == "lib")
        .expect("codec unit tests");
    assert_eq!(codec.package.as_deref(), Some("acme-codec"));
    let doc = log
        .targets
        .iter()
        .find(|t| t.krate.as_deref() == Some("codec") && t.target == "doc")
        .unwrap();
    assert_eq!(doc.package.as_deref(), Some("acme-codec"));
    // Every JUnit test nextest ran is found with cargo test's outcome, its binary id
    // rebuilt from the metadata mapping.
    let truth = junit("corpus-nextest-ci-junit.xml");
    let tests: Vec<MustRun> = truth.keys().map(|(id, path)| must(id, path)).collect();
    let report = audit_one(log, &tests);
    assert_eq!(report.exit_code, ExitCode::AllMet, "{}", report.to_table());
    // Named by metadata alone, except the two packages' `round_trip` targets (same name,
    // same source path): cargo's order decides, and the report says so.
    for t in &report.tests {
        let by_order = t.test.contains("::round_trip ");
        assert_eq!(t.lanes[0].inferred.is_some(), by_order, "{}", t.test);
    }
}

#[test]
fn case_2_without_metadata_a_match_is_inferred_or_cannot_tell() {
    let log = parse("corpus-cargo.log");
    // Two packages hold tests/round_trip.rs with a passing `round`: they agree, inferred.
    let hit = audit::lane_status(&log, &must("acme-util::round_trip", "round"));
    assert_eq!(hit.status, LaneStatus::Passed);
    assert!(hit.inferred.is_some());
    // acme-util's library is named like its package: inferred from the crate name.
    let hit = audit::lane_status(&log, &must("acme-util", "tests::doubles"));
    assert_eq!(hit.status, LaneStatus::Passed);
    assert!(
        hit.inferred.as_deref().unwrap().contains("named like"),
        "{hit:?}"
    );
    // `codec` may be acme-codec's library, but so may another: never ISLAND, exit 2.
    let report = audit_one(log, &[must("acme-codec", "tests::adds")]);
    assert_eq!(
        report.tests[0].verdict,
        Verdict::Unknown,
        "{}",
        report.to_table()
    );
    assert_eq!(report.exit_code, ExitCode::Refused);
}

#[test]
fn case_3_nextest_counters_are_never_binaries() {
    let truth = junit("corpus-nextest-ci-junit.xml");
    let log = parse("corpus-nextest-ci.log");
    assert_eq!(log.format, LogFormat::Nextest);
    let got = outcomes(&log);
    let want: BTreeMap<(String, String), Outcome> = truth
        .iter()
        .map(|(k, passed)| {
            (
                k.clone(),
                if *passed {
                    Outcome::Passed
                } else {
                    Outcome::Failed
                },
            )
        })
        .collect();
    // JUnit counts a flaky test as a success; the log says flaky.
    let got_plain: BTreeMap<_, _> = got
        .iter()
        .map(|(k, o)| {
            (
                k.clone(),
                if *o == Outcome::Flaky {
                    Outcome::Passed
                } else {
                    *o
                },
            )
        })
        .collect();
    assert_eq!(got_plain, want);
    assert_eq!(
        got[&("acme-codec::round_trip".into(), "flaky_once".into())],
        Outcome::Flaky
    );
    // The same tests, whatever nextest's settings: default (no terminal) and under a pty.
    for name in ["corpus-nextest-default.log", "corpus-nextest-tty.log"] {
        let log = parse(name);
        let keys: Vec<_> = outcomes(&log).into_keys().collect();
        let want_keys: Vec<_> = truth.keys().cloned().collect();
        assert_eq!(keys, want_keys, "{name}");
        assert!(
            outcomes(&log).values().all(|o| *o == Outcome::Passed),
            "{name}"
        );
    }
}

#[test]
fn case_3_failures_match_junit() {
    let truth = junit("corpus-nextest-break-junit.xml");
    assert!(truth.values().any(|p| !p), "the break run has failures");
    let log = parse("corpus-nextest-break.log");
    for ((id, path), passed) in &truth {
        let got = outcomes(&log)[&(id.clone(), path.clone())];
        assert_eq!(got == Outcome::Failed, !passed, "{id} {path}");
    }
}

#[test]
fn an_unplaceable_status_line_is_an_error_naming_the_line() {
    let text = std::fs::read_to_string(fixture("corpus-nextest-ci.log")).unwrap();
    let (n, line) = text
        .lines()
        .enumerate()
        .find(|(_, l)| l.contains("( 2/12)"))
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("broken.log");
    std::fs::write(
        &p,
        text.replace(line, &line.replace("( 2/12)", "(2 of 12)")),
    )
    .unwrap();
    match testlog::parse_file(&p) {
        Err(LogError::Unplaced { line, text, .. }) => {
            assert_eq!(line, n + 1);
            assert!(text.contains("(2 of 12)"), "{text}");
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn libtest_json_from_nextest_gives_the_junit_outcomes() {
    let truth = junit("corpus-nextest-ci-junit.xml");
    let log = mapped("corpus-nextest-libtest-json.log");
    assert_eq!(log.format, LogFormat::LibtestJson);
    let tests: Vec<MustRun> = truth.keys().map(|(id, path)| must(id, path)).collect();
    let report = audit_one(log, &tests);
    assert_eq!(report.exit_code, ExitCode::AllMet, "{}", report.to_table());
}

#[test]
fn case_5_quiet_cargo_test_cannot_show_which_tests_ran() {
    let log = parse("corpus-cargo-q.log");
    // libtest printed no names: none of `--list`'s names is in the log.
    let text = std::fs::read_to_string(fixture("corpus-cargo-q.log")).unwrap();
    for name in listed().concat() {
        assert!(!text.contains(&name), "{name}");
    }
    assert!(log.targets.iter().all(|t| t.terse || t.declared == Some(0)));
    let report = audit_one(log, &[must("acme-codec", "tests::adds")]);
    assert_eq!(report.tests[0].verdict, Verdict::Unknown);
    assert_eq!(report.exit_code, ExitCode::Refused);
    assert!(report.islands.is_empty());
}

#[test]
fn case_5_lane_audit_exits_2_on_a_quiet_log_and_on_a_required_lane_without_log() {
    let dir = tempfile::tempdir().unwrap();
    let lanes = dir.path().join("lanes.toml");
    std::fs::write(
        &lanes,
        "[[lane]]\nname = \"ci\"\nrequired = true\n\n[[lane]]\nname = \"other\"\nrequired = true\n",
    )
    .unwrap();
    let must_run = dir.path().join("must-run.txt");
    std::fs::write(&must_run, "acme-codec tests::adds\n").unwrap();
    let run = |logs: &[String]| {
        let mut c = Command::new(env!("CARGO_BIN_EXE_harness"));
        c.arg("lane-audit")
            .arg("--lanes")
            .arg(&lanes)
            .arg("--must-run")
            .arg(&must_run);
        for l in logs {
            c.arg("--log").arg(l);
        }
        c.output().unwrap().status.code()
    };
    let q = format!("ci={}", fixture("corpus-cargo-q.log").display());
    let full = format!("other={}", fixture("corpus-nextest-ci.log").display());
    // A quiet log beside a log that shows the test passing: answered (exit 0).
    assert_eq!(run(&[q.clone(), full.clone()]), Some(0));
    // The quiet log alone, the other required lane without a log: exit 2.
    assert_eq!(run(&[q]), Some(2));
    assert_eq!(run(&[full]), Some(2));
}

#[test]
fn must_run_list_names_doc_tests_and_the_audit_finds_them() {
    // Doc test names as cargo test printed them in the captured runs (spaces, `(line N)`),
    // with and without the package, and one copied from a result line with its test mode.
    let dir = tempfile::tempdir().unwrap();
    let list = dir.path().join("must-run.txt");
    std::fs::write(
        &list,
        "acme-codec::doc acme-codec/src/codec.rs - add (line 5)\n\
         acme-codec/src/codec.rs - add (line 9) - compile fail\n\
         acme-util acme-util/src/lib.rs - double (line 5)\n\
         acme-codec tests::adds\n",
    )
    .unwrap();
    let tests = audit::load_must_run(&list).unwrap();
    assert_eq!(tests.len(), 4);
    let verdicts = |log: &str| -> Vec<(String, Verdict)> {
        audit_one(mapped(log), &tests)
            .tests
            .iter()
            .map(|t| (t.test.clone(), t.verdict))
            .collect()
    };
    let green = verdicts("corpus-cargo.log");
    assert!(green.iter().all(|(_, v)| *v == Verdict::Ok), "{green:?}");
    // CORPUS_BREAK=1: the doc test of `codec::add` at line 5 fails, the others still pass.
    let broken = verdicts("corpus-cargo-break.log");
    assert_eq!(broken[0].1, Verdict::Failed, "{broken:?}");
    assert_eq!(broken[1].1, Verdict::Ok, "{broken:?}");
    assert_eq!(broken[2].1, Verdict::Ok, "{broken:?}");
}

#[test]
fn flaky_result_fail_makes_a_test_that_passed_on_retry_a_failure_in_log_and_junit() {
    // nextest --flaky-result fail: JUnit reports the flaky test as a failure
    // (`type="flaky failure"`), the human log's recap says `FLKY-FL 2/3` and its summary
    // counts it failed. Every outcome of the log must be JUnit's.
    let truth = junit("corpus-nextest-flaky-fail-junit.xml");
    let key = (
        "acme-codec::round_trip".to_string(),
        "flaky_once".to_string(),
    );
    assert_eq!(
        truth.get(&key),
        Some(&false),
        "JUnit says the flaky test failed"
    );
    for name in [
        "corpus-nextest-flaky-fail.log",
        "corpus-nextest-flaky-fail-junit.xml",
    ] {
        let log = parse(name);
        let got = outcomes(&log);
        for (k, passed) in &truth {
            let o = got[k];
            assert_eq!(
                *passed,
                matches!(o, Outcome::Passed | Outcome::Flaky),
                "{name} {k:?}: {o:?}"
            );
        }
        assert_eq!(got[&key], Outcome::Failed, "{name}");
        let report = audit_one(log, &[must("acme-codec::round_trip", "flaky_once")]);
        assert_eq!(report.tests[0].verdict, Verdict::Failed, "{name}");
        assert_eq!(report.tests[0].lanes[0].attempts, 2, "{name}");
        assert_eq!(report.exit_code, ExitCode::Weak, "{name}");
    }
}

#[test]
fn nextest_recordings_give_the_outcomes_and_attempts_of_the_same_runs_junit() {
    // Recorded runs (nextest's experimental `record`, the event log of a portable recording)
    // of the corpus' runs whose JUnit is kept: every test's outcome and attempts are JUnit's.
    for (recording, junit_file) in [
        (
            "corpus-nextest-recording.run.log.zst",
            "corpus-nextest-ci-junit.xml",
        ),
        (
            "corpus-nextest-flaky-fail-recording.run.log.zst",
            "corpus-nextest-flaky-fail-junit.xml",
        ),
        (
            "corpus-nextest-break-recording.run.log.zst",
            "corpus-nextest-break-junit.xml",
        ),
    ] {
        let rec = parse(recording);
        assert_eq!(rec.format, LogFormat::NextestRecording);
        let truth = parse(junit_file);
        let attempts = |log: &RunLog| -> BTreeMap<(String, String), (Outcome, u32)> {
            let mut out = BTreeMap::new();
            for t in &log.targets {
                let id = match t.target.as_str() {
                    "lib" => t.package.clone().unwrap_or_default(),
                    other => format!("{}::{other}", t.package.as_deref().unwrap_or("?")),
                };
                // nextest's JUnit leaves ignored tests out (`junit.report-skipped`).
                for r in t.tests.iter().filter(|r| r.outcome != Outcome::Ignored) {
                    out.insert((id.clone(), r.path.clone()), (r.outcome, r.attempts));
                }
            }
            out
        };
        assert_eq!(
            attempts(&rec),
            attempts(&truth),
            "{recording} against {junit_file}"
        );
    }
    let key = (
        "acme-codec::round_trip".to_string(),
        "flaky_once".to_string(),
    );
    let flaky = outcomes(&parse("corpus-nextest-recording.run.log.zst"));
    assert_eq!(flaky[&key], Outcome::Flaky);
    // The two ignored tests (the human log's `2 skipped`) are ignored, not absent.
    let ignored = flaky.values().filter(|o| **o == Outcome::Ignored).count();
    assert_eq!(ignored, 2);
    let failed = parse("corpus-nextest-flaky-fail-recording.run.log.zst");
    assert_eq!(outcomes(&failed)[&key], Outcome::Failed);
    let report = audit_one(failed, &[must("acme-codec::round_trip", "flaky_once")]);
    assert_eq!(report.tests[0].verdict, Verdict::Failed);
    assert_eq!(report.exit_code, ExitCode::Weak);
}
