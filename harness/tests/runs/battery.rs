//! The real `harness` binary on a private copy of the sample workspace: every verdict, every
//! refusal, recovery after SIGKILL, concurrent edits and CRLF files.

use crate::common;

use std::time::Duration;

use common::{Sandbox, redact, wait_for_line, wait_with_limit};

#[test]
fn full_battery_gives_every_verdict_and_restores_the_tree() {
    let sb = Sandbox::new();
    let before = sb.tree();
    let run = sb.battery(&[]);
    // One UNVIABLE and one TIMEOUT mutation are UNMET and four tests are UNFALSIFIED: weak.
    run.expect_code(1);
    assert_eq!(
        sb.tree(),
        before,
        "tree not byte-identical after the battery"
    );

    let r = sb.report_json();
    assert_eq!(r["schema"], "harness-battery/1");
    assert_eq!(r["status"], "complete");
    let verdicts: Vec<(String, String, String)> = r["mutations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            (
                m["id"].as_str().unwrap().to_string(),
                m["verdict"].as_str().unwrap().to_string(),
                m["expectation"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    let want = [
        ("add-subtracts", "KILLED", "MET"),
        ("max-takes-min", "KILLED", "MET"),
        ("clamp-upper-inverted", "KILLED", "MET"),
        ("even-negative-odd", "SURVIVED", "MET"),
        ("add-does-not-compile", "UNVIABLE", "UNMET"),
        ("countdown-hangs", "TIMEOUT", "UNMET"),
    ];
    let want: Vec<(String, String, String)> = want
        .iter()
        .map(|(a, b, c)| (a.to_string(), b.to_string(), c.to_string()))
        .collect();
    assert_eq!(verdicts, want);

    let m = &r["mutations"];
    // UNVIABLE carries the compiler's first error.
    let err = m[4]["compiler_error"].as_str().unwrap();
    assert!(err.starts_with("error[E0308]: mismatched types"), "{err}");
    // TIMEOUT lists the tests that had finished (all but the hanging one).
    let finished: Vec<&str> = m[5]["finished_tests"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    assert_eq!(finished.len(), 6);
    assert!(!finished.contains(&"contract::countdown_counts_steps"));
    assert_eq!(
        m[5]["outcomes"]["contract::countdown_counts_steps"],
        "unfinished"
    );
    // KILLED with the expected message.
    let msg = m[0]["failed_tests"][0]["message"].as_str().unwrap();
    assert!(msg.contains("right: 5"), "{msg}");
    // Files a failing test wrote into the tree are removed and listed.
    assert_eq!(
        m[1]["created_files"],
        serde_json::json!(["proptest-regressions/contract.txt"])
    );
    assert!(!sb.ws.join("proptest-regressions").exists());
    assert!(
        run.stderr.contains(
            "max-takes-min: removed files the run created: proptest-regressions/contract.txt"
        ),
        "{}",
        run.stderr
    );
    // Per-mutation build and test seconds are numbers.
    assert!(m[0]["build_seconds"].as_f64().unwrap() > 0.0);
    assert!(m[0]["test_seconds"].as_f64().unwrap() > 0.0);
    assert_eq!(
        r["unfalsified"],
        serde_json::json!([
            "contract::max_of_empty_is_none",
            "contract::is_even_on_small_numbers",
            "contract::countdown_counts_steps",
            "contract::flaky_when_marker_is_absent"
        ])
    );

    // The hanging test binary was killed with its process group.
    assert_eq!(leftover_processes(&sb), "");

    let ws = sb.ws.canonicalize().unwrap();
    let mut json = r.clone();
    redact(&mut json, &ws);
    insta::assert_json_snapshot!("sample_battery_json", json);
    let md = std::fs::read_to_string(sb.ws.join("reports/sample/battery.md")).unwrap();
    insta::assert_snapshot!("sample_battery_markdown", md);
    let mut stryker: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(sb.ws.join("reports/sample/mutation-report.json")).unwrap(),
    )
    .unwrap();
    // The HTML page embeds that same document for the component, and the kill matrix.
    let page = std::fs::read_to_string(sb.ws.join("reports/sample/index.html")).unwrap();
    let open = "<script type=\"application/json\" id=\"battery-report\">";
    let data = &page[page.find(open).unwrap() + open.len()..];
    let data = &data[..data.find("</script>").unwrap()];
    let embedded: serde_json::Value = serde_json::from_str(data).unwrap();
    assert_eq!(embedded, stryker);
    assert!(page.contains("<mutation-test-report-app"));
    for id in r["kill_matrix"]["mutations"].as_array().unwrap() {
        let id = id.as_str().unwrap();
        assert!(
            page.contains(&format!("<th><code>{id}</code></th>")),
            "{id} not in the matrix"
        );
    }
    redact(&mut stryker, &ws);
    insta::assert_json_snapshot!("sample_battery_stryker", stryker);
    // The terminal table, with the digits of its seconds columns blanked.
    let header = run.stdout.lines().next().unwrap();
    let (from, to) = (
        header.find("BUILD s").unwrap(),
        header.find("NOTE").unwrap(),
    );
    let table: String = run
        .stdout
        .lines()
        .filter(|l| !l.starts_with("report: "))
        .map(|l| {
            let masked: String = l
                .char_indices()
                .map(|(i, c)| {
                    let row = matches!(
                        l.split_whitespace().nth(1),
                        Some("defect" | "gap" | "vacuity")
                    );
                    if row && (from..to).contains(&i) && c.is_ascii_digit() {
                        '#'
                    } else {
                        c
                    }
                })
                .collect();
            masked + "\n"
        })
        .collect();
    insta::assert_snapshot!("sample_battery_table", table);
}

#[test]
fn crlf_mutation_is_killed_and_restored_byte_identically() {
    let sb = Sandbox::new();
    let crlf_before = std::fs::read(sb.ws.join("src/crlf.rs")).unwrap();
    assert!(crlf_before.windows(2).any(|w| w == b"\r\n"));
    let before = sb.tree();
    let run = sb.battery(&["--only", "clamp-upper-inverted,add-subtracts"]);
    run.expect_code(0)
        .stdout_has("unfalsified not computed (--only)");
    assert_eq!(
        std::fs::read(sb.ws.join("src/crlf.rs")).unwrap(),
        crlf_before
    );
    assert_eq!(sb.tree(), before);
    let r = sb.report_json();
    assert_eq!(r["mutations"][0]["id"], "add-subtracts");
    assert_eq!(r["mutations"][1]["verdict"], "KILLED");
    assert_eq!(r["mutations"][1]["expectation"], "MET");
    assert_eq!(r["unfalsified"], serde_json::Value::Null);
}

#[test]
fn gap_that_gets_killed_is_unmet_gap_closed() {
    let sb = Sandbox::new();
    // A new listed test closes the gap: negative odd numbers are now checked.
    sb.edit(
        "tests/contract.rs",
        "    #[test]\n    fn countdown_counts_steps()",
        "    #[test]\n    fn is_even_on_negative_numbers() {\n        assert!(!is_even(-3));\n    }\n\n    #[test]\n    fn countdown_counts_steps()",
    );
    sb.edit(
        "mutations/sample.toml",
        "    \"contract::countdown_counts_steps\",\n",
        "    \"contract::countdown_counts_steps\",\n    \"contract::is_even_on_negative_numbers\",\n",
    );
    sb.battery(&["--only", "even-negative-odd"])
        .expect_code(1)
        .stdout_has("gap closed: update the catalog");
    let r = sb.report_json();
    assert_eq!(r["mutations"][0]["verdict"], "KILLED");
    assert_eq!(r["mutations"][0]["expectation"], "UNMET");
}

#[test]
fn catalog_drift_when_find_text_is_absent() {
    let sb = Sandbox::new();
    sb.edit(
        "mutations/sample.toml",
        "find = \".max()\"",
        "find = \".maximum()\"",
    );
    sb.battery(&[])
        .expect_code(2)
        .stderr_has("CATALOG-DRIFT")
        .stderr_has("mutation max-takes-min: `find` text \".maximum()\" occurs 0 time(s) in src/lib.rs, the catalog says 1");
    // Refused before any build.
    assert!(!sb.ws.join("target").exists());
    sb.run(&["check", sb.catalog.to_str().unwrap()])
        .expect_code(2)
        .stderr_has("CATALOG-DRIFT");
}

#[test]
fn catalog_drift_when_find_text_occurs_twice() {
    let sb = Sandbox::new();
    sb.edit(
        "src/lib.rs",
        "/// Sum of two integers.",
        "/// Sum of two integers: a + b.",
    );
    sb.battery(&[])
        .expect_code(2)
        .stderr_has("CATALOG-DRIFT")
        .stderr_has("mutation add-subtracts: `find` text \"a + b\" occurs 2 time(s)");
    let r = sb.report_json();
    assert_eq!(r["status"], "refused");
    assert_eq!(r["refusal"]["kind"], "CATALOG-DRIFT");
}

#[test]
fn filter_drift_when_a_listed_test_is_renamed() {
    let sb = Sandbox::new();
    sb.edit(
        "tests/contract.rs",
        "fn adds_two_numbers()",
        "fn adds_numbers()",
    );
    sb.battery(&[])
        .expect_code(2)
        .stderr_has("FILTER-DRIFT")
        .stderr_has("listed but not in the target: contract::adds_two_numbers")
        .stderr_has("not listed: contract::adds_numbers");
}

#[test]
fn filter_drift_when_an_unlisted_test_matches_the_pattern() {
    let sb = Sandbox::new();
    sb.edit(
        "tests/contract.rs",
        "    #[test]\n    fn max_of_empty_is_none()",
        "    #[test]\n    fn brand_new() {}\n\n    #[test]\n    fn max_of_empty_is_none()",
    );
    let run = sb.battery(&[]);
    run.expect_code(2)
        .stderr_has("FILTER-DRIFT: in the target under the pattern \"contract::\" but not listed: contract::brand_new");
    // `helper_smoke` is outside the pattern: never drift.
    assert!(!run.stderr.contains("helper_smoke"));
}

#[test]
fn a_skipped_test_is_left_out_with_its_reason_and_a_stale_skip_is_filter_drift() {
    let sb = Sandbox::new();
    sb.edit(
        "tests/contract.rs",
        "    #[test]\n    fn max_of_empty_is_none()",
        "    #[test]\n    fn reads_the_model() {\n        panic!(\"no model in this tree\")\n    }\n\n    #[test]\n    fn max_of_empty_is_none()",
    );
    let catalog = sb.read("mutations/sample.toml");
    let (head, mutations) = catalog.split_at(catalog.find("[[mutation]]").unwrap());
    sb.write(
        "mutations/sample.toml",
        &format!(
            "{head}[[skip]]\ntest = \"contract::reads_the_model\"\nreason = \"reads a model file this tree does not hold\"\n\n{mutations}"
        ),
    );
    // Skipped: not drift, and never run (it would fail the baseline).
    sb.battery(&["--only", "add-subtracts"])
        .expect_code(0)
        .stderr_has("1 skipped by the catalog");
    let r = sb.report_json();
    assert_eq!(
        r["catalog"]["skipped"][0]["test"],
        "contract::reads_the_model"
    );
    let md = std::fs::read_to_string(sb.ws.join("reports/sample/battery.md")).unwrap();
    assert!(
        md.contains("### Tests the catalog skips\n\n- `contract::reads_the_model`: reads a model file this tree does not hold"),
        "{md}"
    );
    // The test is renamed: the skip names nothing, which is drift, not a silent no-op.
    sb.edit(
        "tests/contract.rs",
        "fn reads_the_model()",
        "fn loads_the_model()",
    );
    sb.battery(&["--only", "add-subtracts"])
        .expect_code(2)
        .stderr_has("FILTER-DRIFT")
        .stderr_has("skipped but not in the target: contract::reads_the_model")
        .stderr_has("not listed: contract::loads_the_model");
    sb.run(&["check", "--list", sb.catalog.to_str().unwrap()])
        .expect_code(2)
        .stderr_has("skip[0] \"contract::reads_the_model\" is not a test of the targets");
    // A skip without a reason, or of a listed test, is a bad catalog.
    let skipped = sb.read("mutations/sample.toml");
    sb.write(
        "mutations/sample.toml",
        &skipped.replace(
            "reason = \"reads a model file this tree does not hold\"",
            "reason = \" \"",
        ),
    );
    sb.run(&["check", sb.catalog.to_str().unwrap()])
        .expect_code(2)
        .stderr_has("skip[0]")
        .stderr_has("gives no reason");
    sb.write(
        "mutations/sample.toml",
        &skipped.replace(
            "test = \"contract::reads_the_model\"",
            "test = \"contract::adds_two_numbers\"",
        ),
    );
    sb.run(&["check", sb.catalog.to_str().unwrap()])
        .expect_code(2)
        .stderr_has("is both listed in `tests` and skipped");
}

#[test]
fn baseline_red_when_a_listed_test_fails_unmutated() {
    let sb = Sandbox::new();
    sb.edit(
        "tests/contract.rs",
        "clamp(2, 0, 3), 2)",
        "clamp(2, 0, 3), 3)",
    );
    sb.battery(&[])
        .expect_code(2)
        .stderr_has("BASELINE-RED: listed tests are not green without any mutation: contract::clamp_bounds (failed: assertion `left == right` failed left: 2 right: 3)");
    let r = sb.report_json();
    assert_eq!(r["mutations"], serde_json::json!([]));
    assert_eq!(r["refusal"]["kind"], "BASELINE-RED");
    // The baseline's timings are kept for diagnosis.
    assert_eq!(r["baseline"]["run_seconds"].as_array().unwrap().len(), 2);
}

#[test]
fn flaky_when_the_two_baseline_runs_disagree() {
    let sb = Sandbox::new();
    let marker = sb.dir.path().join("flaky-marker");
    sb.edit(
        "mutations/sample.toml",
        "select = \"contract::\"\n",
        &format!(
            "select = \"contract::\"\nenv = {{ SAMPLE_FLAKY_MARKER = {:?} }}\n",
            marker.to_str().unwrap()
        ),
    );
    sb.battery(&[])
        .expect_code(2)
        .stderr_has("FLAKY: the two baseline runs disagree: contract::flaky_when_marker_is_absent (failed then passed)");
    assert!(marker.exists());
}

#[test]
fn stale_build_when_the_mutated_file_is_not_compiled() {
    let sb = Sandbox::new();
    let before = sb.tree();
    let cat = sb.read("mutations/sample.toml");
    sb.write(
        "mutations/sample.toml",
        &format!(
            "{cat}\n[[mutation]]\nid = \"uncompiled\"\ntitle = \"t\"\nrole = \"defect\"\nfile = \"src/unused.rs\"\nfind = \"7\"\nreplace = \"8\"\nkilled_by = [\"contract::adds_two_numbers\"]\nrationale = \"r\"\n"
        ),
    );
    let after_catalog_edit = sb.tree();
    sb.battery(&["--only", "uncompiled"])
        .expect_code(2)
        .stderr_has("STALE-BUILD: mutation uncompiled: cargo reports every artifact of package sample fresh after src/unused.rs was mutated");
    assert_eq!(sb.tree(), after_catalog_edit);
    assert_eq!(
        before.get(std::path::Path::new("src/unused.rs")),
        after_catalog_edit.get(std::path::Path::new("src/unused.rs"))
    );
}

#[test]
fn a_test_binary_that_dies_is_crashed_never_killed() {
    let sb = Sandbox::new();
    let cat = sb.read("mutations/sample.toml");
    sb.write(
        "mutations/sample.toml",
        &format!(
            "{cat}\n[[mutation]]\nid = \"add-aborts\"\ntitle = \"add aborts the process\"\nrole = \"defect\"\nfile = \"src/lib.rs\"\nfind = \"a + b\"\nreplace = \"std::process::abort()\"\nkilled_by = [\"contract::adds_two_numbers\"]\nrationale = \"r\"\n"
        ),
    );
    sb.battery(&["--only", "add-aborts"]).expect_code(1);
    let r = sb.report_json();
    let m = &r["mutations"][0];
    assert_eq!(m["verdict"], "CRASHED");
    assert_eq!(m["expectation"], "UNMET");
    assert_eq!(
        m["outcomes"]["contract::adds_two_numbers"], "no_result",
        "{m}"
    );
    assert_eq!(m["failed_tests"], serde_json::json!([]));
    assert_eq!(
        m["died"],
        serde_json::json!(["tests/contract.rs (signal: 6, SIGABRT: process abort signal)"]),
        "{m}"
    );
    assert!(
        m["crash_output"].as_str().unwrap().contains("SIGABRT"),
        "{m}"
    );
    assert_eq!(r["summary"]["killed"], 0);
    assert_eq!(r["summary"]["crashed"], 1);
}

/// Processes whose command line mentions this sandbox's target directory.
fn leftover_processes(sb: &Sandbox) -> String {
    let out = std::process::Command::new("pgrep")
        .args(["-a", "-f", &sb.ws.join("target").to_string_lossy()])
        .output()
        .expect("pgrep runs");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn sigkill_after_apply_is_recovered_by_restore_and_by_the_next_command() {
    let sb = Sandbox::new();
    let before = sb.tree();
    let cat = sb.catalog.to_str().unwrap();
    // (line to wait for before the SIGKILL, the next command)
    let rounds: [(&str, Vec<&str>); 3] = [
        ("countdown-hangs: applied to src/lib.rs", vec!["restore"]),
        ("countdown-hangs: applied to src/lib.rs", vec!["list", cat]),
        // Killed while the hanging test runs: the next command also kills that orphan.
        ("countdown-hangs: testing", vec!["restore"]),
    ];
    for (line, next) in rounds {
        let (mut child, rx) = sb.spawn(&["battery", cat, "--only", "countdown-hangs"]);
        wait_for_line(&rx, line, Duration::from_secs(120));
        if line.ends_with("testing") {
            // Let the test binary start and the other tests report, so that only the
            // hanging test remains: an orphan that would otherwise spin forever.
            std::thread::sleep(Duration::from_millis(1500));
        }
        child.kill().unwrap(); // SIGKILL: no handler runs
        child.wait().unwrap();
        assert!(
            sb.read("src/lib.rs").contains("n -= 0;"),
            "the kill left the mutation in place"
        );
        let run = sb.run(&next);
        run.stderr_has("restored")
            .stderr_has("from the journal of an interrupted run")
            .stderr_has("mutation countdown-hangs");
        assert_eq!(run.code, Some(0), "{run:?}");
        assert_eq!(sb.tree(), before, "after `{}`", next[0]);
        if line.ends_with("testing") {
            run.stderr_has("killed process group");
            std::thread::sleep(Duration::from_millis(200));
            assert_eq!(leftover_processes(&sb), "");
        }
    }
    // Nothing left to restore.
    let run = sb.run(&["restore"]);
    run.expect_code(0);
    assert!(!run.stderr.contains("restored"));
}

#[test]
fn sigterm_restores_before_exiting() {
    let sb = Sandbox::new();
    let before = sb.tree();
    let (mut child, rx) = sb.spawn(&[
        "battery",
        sb.catalog.to_str().unwrap(),
        "--only",
        "countdown-hangs",
    ]);
    wait_for_line(&rx, "countdown-hangs: applied", Duration::from_secs(120));
    // SAFETY: signalling our own child.
    unsafe {
        libc::kill(child.id() as libc::pid_t, libc::SIGTERM);
    }
    let status = wait_with_limit(&mut child, Duration::from_secs(60));
    assert_eq!(status.code(), Some(130));
    assert_eq!(sb.tree(), before);
    assert_eq!(sb.report_json()["status"], "interrupted");
}

#[test]
fn concurrent_edit_is_detected_before_restore() {
    let sb = Sandbox::new();
    let original = sb.read("src/lib.rs");
    let (mut child, rx) = sb.spawn(&[
        "battery",
        sb.catalog.to_str().unwrap(),
        "--only",
        "countdown-hangs",
    ]);
    wait_for_line(&rx, "countdown-hangs: applied", Duration::from_secs(120));
    let edited = format!("{}// edited by someone else\n", sb.read("src/lib.rs"));
    sb.write("src/lib.rs", &edited);
    let status = wait_with_limit(&mut child, Duration::from_secs(120));
    let rest: Vec<String> = rx.try_iter().collect();
    let text = rest.join("\n");
    assert_eq!(status.code(), Some(2), "{text}");
    assert!(text.contains("TREE-DIRTY"), "{text}");
    assert!(
        text.contains("was edited while mutation countdown-hangs was applied"),
        "{text}"
    );
    // Both versions kept: the edit in place, the original where the message says.
    assert_eq!(sb.read("src/lib.rs"), edited);
    let kept = text
        .split("the original bytes are kept at ")
        .nth(1)
        .expect("message names the kept copy")
        .lines()
        .next()
        .unwrap()
        .trim();
    assert_eq!(std::fs::read_to_string(kept).unwrap(), original);
}

#[test]
fn tree_dirty_when_another_file_changes_during_the_run() {
    let sb = Sandbox::new();
    let (mut child, rx) = sb.spawn(&[
        "battery",
        sb.catalog.to_str().unwrap(),
        "--only",
        "add-subtracts",
    ]);
    wait_for_line(&rx, "add-subtracts: applied", Duration::from_secs(120));
    let unused = format!("{}// touched during the run\n", sb.read("src/unused.rs"));
    sb.write("src/unused.rs", &unused);
    let status = wait_with_limit(&mut child, Duration::from_secs(120));
    let text = rx.try_iter().collect::<Vec<_>>().join("\n");
    assert_eq!(status.code(), Some(2), "{text}");
    assert!(
        text.contains(
            "TREE-DIRTY: the tree differs from its state at the start: src/unused.rs (changed)"
        ),
        "{text}"
    );
    // The mutated file itself was restored; the foreign edit is left alone.
    assert!(sb.read("src/lib.rs").contains("a + b"));
    assert_eq!(sb.read("src/unused.rs"), unused);
}

#[test]
fn check_list_and_show() {
    let sb = Sandbox::new();
    let cat = sb.catalog.to_str().unwrap();
    sb.run(&["check", cat])
        .expect_code(0)
        .stdout_has("ok (6 mutations, 7 tests");
    let list = sb.run(&["list", cat]);
    list.expect_code(0);
    insta::assert_snapshot!("sample_list", list.stdout);
    let show = sb.run(&["show", cat, "clamp-upper-inverted"]);
    show.expect_code(0);
    // The CRLF line endings of the file are part of the diff; show them.
    insta::assert_snapshot!("sample_show_crlf", show.stdout.replace('\r', "<CR>"));
    sb.run(&["show", cat, "nope"])
        .expect_code(2)
        .stderr_has("no mutation with id \"nope\"");
    // A test target that does not exist: found without building.
    let good = sb.read("mutations/sample.toml");
    sb.edit(
        "mutations/sample.toml",
        "test_targets = [\"contract\"]",
        "test_targets = [\"contracts\"]",
    );
    sb.run(&["check", cat])
        .expect_code(2)
        .stderr_has("CATALOG-DRIFT")
        .stderr_has(
            "package sample has no test target \"contracts\" (it has: contract, isolation)",
        );
    assert!(!sb.ws.join("target").exists());
    sb.write("mutations/sample.toml", &good);
    // A malformed catalog: unknown field, exit 2 naming it.
    sb.edit(
        "mutations/sample.toml",
        "select = ",
        "colour = 1\nselect = ",
    );
    sb.run(&["check", cat])
        .expect_code(2)
        .stderr_has("bad catalog")
        .stderr_has("colour");
}

#[test]
fn help_documents_the_exit_codes() {
    let sb = Sandbox::new();
    let help = sb.run(&["--help"]);
    help.expect_code(0)
        .stdout_has("Exit codes:")
        .stdout_has("0    every expectation MET")
        .stdout_has("1    the tests are weak")
        .stdout_has("2    the instrument could not be trusted");
    sb.run(&["battery", "--help"])
        .expect_code(0)
        .stdout_has("Exit codes:");
}
