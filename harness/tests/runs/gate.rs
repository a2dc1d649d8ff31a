//! The real `harness gate` on a private copy of the sample workspace: a green gate, a test
//! command that filters out the catalog's tests (islands), a failing test command, a bad
//! catalog.

use crate::common;

use std::time::Duration;

use common::Sandbox;

/// The four sample mutations whose expectations are MET (no UNVIABLE or TIMEOUT one), so
/// that a gate over them passes.
const MET: &str = "add-subtracts,max-takes-min,clamp-upper-inverted,even-negative-odd";

fn gate_json(sb: &Sandbox) -> serde_json::Value {
    let p = sb.ws.join("reports/gate/gate.json");
    serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap()
}

fn gate_md(sb: &Sandbox) -> String {
    std::fs::read_to_string(sb.ws.join("reports/gate/gate.md")).unwrap()
}

/// Masks what varies between runs: the seconds and log line count of the Markdown's
/// test-command row, and log line numbers (`(line N)`: cargo may print extra lines such as
/// "Blocking waiting for file lock").
fn mask_test_row(md: &str) -> String {
    mask_line_numbers(md)
        .lines()
        .map(|l| {
            if l.contains("`reports/gate/test.log`") {
                let cells: Vec<&str> = l.split(" | ").collect();
                assert_eq!(cells.len(), 5, "test-command row: {l}");
                let log = cells[4].split(" (").next().unwrap();
                format!(
                    "{} | {} | {} | [secs] | {log} ([n] lines) |\n",
                    cells[0], cells[1], cells[2]
                )
            } else {
                format!("{l}\n")
            }
        })
        .collect()
}

fn mask_line_numbers(s: &str) -> String {
    let mut out = String::new();
    let mut rest = s;
    while let Some(i) = rest.find("(line ") {
        let (head, tail) = rest.split_at(i + "(line ".len());
        out.push_str(head);
        let digits = tail.chars().take_while(char::is_ascii_digit).count();
        if digits > 0 {
            out.push_str("[n]");
        }
        rest = &tail[digits..];
    }
    out.push_str(rest);
    out
}

fn verdicts(j: &serde_json::Value) -> Vec<(String, String)> {
    j["audit"]["tests"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            (
                t["test"].as_str().unwrap().to_string(),
                t["verdict"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

#[test]
fn green_gate_runs_the_default_test_command_audits_it_and_runs_the_battery() {
    let sb = Sandbox::new();
    let before = sb.tree();
    let cat = sb.catalog.to_str().unwrap();
    // No --test-command: the sample has no scripts/test, so the fallback runs. As a GitHub
    // Actions step, it prints the surviving known gap as a notice on its line.
    let run = common::Run::from(
        sb.cmd()
            // Rebuild mode, as gates ran before the mode was chosen by size: the snapshot
            // holds no timings.
            .args(["gate", cat, "--only", MET, "--mode", "rebuild"])
            .env("GITHUB_ACTIONS", "true")
            .output()
            .unwrap(),
    );
    let src = sb.read("src/lib.rs");
    let gap_line = src[..src.find("n % 2 == 0").unwrap()].matches('\n').count() + 1;
    let notices: Vec<&str> = run.stdout.lines().filter(|l| l.starts_with("::")).collect();
    assert_eq!(notices.len(), 1, "{}", run.stdout);
    assert!(
        notices[0].starts_with(&format!("::notice file=src/lib.rs,line={gap_line},")),
        "{}",
        notices[0]
    );
    // The gate's SARIF holds one run per battery, valid against the SARIF 2.1.0 schema.
    let sarif: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(sb.ws.join("reports/gate/gate.sarif")).unwrap(),
    )
    .unwrap();
    assert_eq!(
        common::sarif_errors(&common::sarif_validator(), &sarif),
        Vec::<String>::new()
    );
    assert_eq!(
        sarif["runs"][0]["results"][0]["ruleId"],
        "harness/known-gap"
    );
    assert!(sb.ws.join("reports/gate/codequality.json").is_file());
    run.expect_code(0)
        .stdout_has("gate: PASS (exit 0)")
        .stderr_has(
            "gate: running the test command `cargo test --workspace --no-fail-fast` (fallback)",
        );
    assert_eq!(sb.tree(), before, "the gate left the tree changed");

    let j = gate_json(&sb);
    assert_eq!(j["schema"], "harness-gate/1");
    assert_eq!(j["verdict"], "pass");
    assert_eq!(j["exit_code"], 0);
    assert_eq!(j["reasons"], serde_json::json!([]));
    assert_eq!(j["test_run"]["source"], "fallback");
    assert_eq!(j["test_run"]["exit_code"], 0);
    assert_eq!(j["test_run"]["log"], "reports/gate/test.log");
    // Every listed test was executed and passed in the gate's own run.
    let v = verdicts(&j);
    assert_eq!(v.len(), 7);
    assert!(v.iter().all(|(_, verdict)| verdict == "ok"), "{v:?}");
    assert_eq!(j["audit"]["islands"], serde_json::json!([]));
    // The kept log is the test command's real output.
    let log = std::fs::read_to_string(sb.ws.join("reports/gate/test.log")).unwrap();
    assert!(
        log.contains("test contract::adds_two_numbers ... ok"),
        "{log}"
    );
    assert!(log.contains("test helper_smoke ... ok"), "{log}");
    // The battery ran and is embedded with its own schema; its reports exist too.
    let b = &j["batteries"][0];
    assert_eq!(b["status"], "ran");
    assert_eq!(b["exit_code"], 0);
    assert_eq!(b["report"]["schema"], "harness-battery/1");
    assert_eq!(b["report"]["summary"]["met"], 4);
    assert!(sb.ws.join("reports/sample/battery.json").is_file());

    insta::assert_snapshot!("green_gate_markdown", mask_test_row(&gate_md(&sb)));
}

#[test]
fn a_quiet_test_command_cannot_show_which_tests_ran_exit_2() {
    let sb = Sandbox::new();
    let cat = sb.catalog.to_str().unwrap();
    // `cargo test -q` prints one character per test: green, but the log names no test.
    let run = sb.run(&[
        "gate",
        cat,
        "--test-command",
        "cargo test --no-fail-fast -q",
    ]);
    run.expect_code(2).stdout_has("gate: UNTRUSTED (exit 2)");
    let j = gate_json(&sb);
    assert_eq!(j["verdict"], "untrusted");
    assert_eq!(j["test_run"]["exit_code"], 0);
    assert!(
        verdicts(&j).iter().all(|(_, v)| v == "unknown"),
        "{:?}",
        verdicts(&j)
    );
    assert_eq!(j["audit"]["islands"], serde_json::json!([]));
    assert_eq!(j["batteries"][0]["status"], "skipped");
}

#[test]
fn a_test_command_that_filters_out_the_catalog_tests_leaves_them_islands() {
    let sb = Sandbox::new();
    let cat = sb.catalog.to_str().unwrap();
    // Runs only the test outside the battery: green, but it proves nothing about the catalog.
    let run = sb.run(&[
        "gate",
        cat,
        "--test-command",
        "cargo test --no-fail-fast -- helper_smoke",
    ]);
    run.expect_code(1)
        .stdout_has("gate: WEAK (exit 1)")
        .stdout_has("island: sample::contract contract::adds_two_numbers");
    let j = gate_json(&sb);
    assert_eq!(j["verdict"], "weak");
    assert_eq!(j["test_run"]["exit_code"], 0);
    assert_eq!(j["test_run"]["source"], "--test-command");
    let islands: Vec<&str> = j["audit"]["islands"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    assert_eq!(islands.len(), 7, "{islands:?}");
    assert!(islands.contains(&"sample::contract contract::clamp_bounds"));
    assert!(
        verdicts(&j).iter().all(|(_, v)| v == "island"),
        "{:?}",
        verdicts(&j)
    );
    // The battery was not run after a failed audit, and the report says why.
    let b = &j["batteries"][0];
    assert_eq!(b["status"], "skipped");
    assert!(b["report"].is_null());
    assert!(!sb.ws.join("reports/sample").exists());
    assert_eq!(
        j["reasons"],
        serde_json::json!([
            "the audit of its log: 7 of 7 must-run tests not ok (7 islands: not executed by the test command)"
        ])
    );
    insta::assert_snapshot!("islands_gate_markdown", mask_test_row(&gate_md(&sb)));
}

#[test]
fn a_failing_test_command_fails_the_gate_and_names_the_failed_test() {
    let sb = Sandbox::new();
    sb.edit("src/lib.rs", "a + b", "a + b + 1");
    let cat = sb.catalog.to_str().unwrap();
    let run = sb.run(&["gate", cat, "--test-command", "cargo test --no-fail-fast"]);
    run.expect_code(1);
    let j = gate_json(&sb);
    assert_eq!(j["verdict"], "weak");
    assert_eq!(j["test_run"]["exit_code"], 101);
    let failed: Vec<String> = verdicts(&j)
        .into_iter()
        .filter(|(_, v)| v != "ok")
        .map(|(t, v)| format!("{t}: {v}"))
        .collect();
    assert_eq!(
        failed,
        ["sample::contract contract::adds_two_numbers: failed"]
    );
    let reasons: Vec<&str> = j["reasons"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    assert_eq!(
        reasons,
        [
            "the test command `cargo test --no-fail-fast` failed (exit code 101)",
            "the audit of its log: 1 of 7 must-run tests not ok (0 islands: not executed by the test command)",
        ]
    );
    assert_eq!(j["batteries"][0]["status"], "skipped");
    let md = gate_md(&sb);
    assert!(md.starts_with("## Gate: FAIL (exit 1, weak)"), "{md}");
    assert!(
        md.contains("| `sample::contract contract::adds_two_numbers` | FAILED | gate: failed |"),
        "{md}"
    );
}

#[test]
fn a_fail_fast_test_command_that_stops_early_fails_the_gate() {
    let sb = Sandbox::new();
    // A failing unit test in the library runs before the contract target; without
    // --no-fail-fast cargo stops there and the contract tests never run.
    let lib = sb.read("src/lib.rs");
    sb.write(
        "src/lib.rs",
        &format!("{lib}\n#[cfg(test)]\nmod unit {{\n    #[test]\n    fn fails() {{\n        panic!(\"unit test fails\");\n    }}\n}}\n"),
    );
    let cat = sb.catalog.to_str().unwrap();
    let run = sb.run(&["gate", cat, "--test-command", "cargo test"]);
    run.expect_code(1);
    let j = gate_json(&sb);
    assert_eq!(j["audit"]["lanes"][0]["truncated"], true);
    let v = verdicts(&j);
    assert_eq!(v.len(), 7);
    assert!(v.iter().all(|(_, verdict)| verdict == "island"), "{v:?}");
}

#[test]
fn an_inherited_cargo_target_dir_moves_neither_the_test_build_nor_the_battery() {
    let sb = Sandbox::new();
    let cat = sb.catalog.to_str().unwrap();
    // A caller (a CI cache, a developer's shell) that points every cargo at a shared
    // directory: the test command's build and the battery's must still be the catalog's.
    let elsewhere = sb.dir.path().join("elsewhere");
    let out = sb
        .cmd()
        .env("CARGO_TARGET_DIR", &elsewhere)
        .args([
            "gate",
            cat,
            "--only",
            MET,
            "--test-command",
            "cargo test --no-fail-fast",
        ])
        .output()
        .unwrap();
    common::Run::from(out)
        .expect_code(0)
        .stderr_has("with CARGO_TARGET_DIR=");
    assert!(
        !elsewhere.exists(),
        "a cargo started by the gate built in the inherited CARGO_TARGET_DIR"
    );
    let j = gate_json(&sb);
    assert_eq!(j["test_run"]["target_dir"], "target/harness/sample");
    // The audited log is the build in the battery's own target directory.
    let log = std::fs::read_to_string(sb.ws.join("reports/gate/test.log")).unwrap();
    let running = log
        .lines()
        .find(|l| l.contains("Running tests/contract.rs"))
        .unwrap_or_else(|| panic!("no contract target in the log:\n{log}"));
    assert!(
        running.contains("target/harness/sample/debug/deps/contract-"),
        "{running}"
    );
    assert_eq!(j["batteries"][0]["exit_code"], 0);
}

#[test]
fn a_bad_catalog_is_exit_2_and_runs_nothing() {
    let sb = Sandbox::new();
    let missing = sb.ws.join("mutations/nope.toml");
    let marker = sb.dir.path().join("ran");
    let cmd = format!("touch {}", marker.display());
    sb.run(&["gate", missing.to_str().unwrap(), "--test-command", &cmd])
        .expect_code(2)
        .stderr_has("nope.toml");
    assert!(
        !marker.exists(),
        "the test command ran despite a bad catalog"
    );
}

#[test]
fn help_documents_the_gate_exit_codes() {
    let sb = Sandbox::new();
    sb.run(&["gate", "--help"])
        .expect_code(0)
        .stdout_has("Exit codes:")
        .stdout_has("1    the tests are weak or did not run")
        .stdout_has("2    the instrument could not be trusted")
        .stdout_has("harness-gate/1");
}

#[test]
fn the_gate_runs_its_batteries_in_the_mode_it_is_given() {
    let sb = Sandbox::new();
    let before = sb.tree();
    let cat = sb.catalog.to_str().unwrap();
    let run = sb.run(&[
        "gate",
        cat,
        "--only",
        "add-subtracts",
        "--mode",
        "switch",
        "--test-command",
        "cargo test --no-fail-fast",
    ]);
    run.expect_code(0).stdout_has("gate: PASS (exit 0)");
    assert_eq!(sb.tree(), before, "the gate left the tree changed");
    let j = gate_json(&sb);
    let b = &j["batteries"][0];
    assert_eq!(b["status"], "ran");
    assert_eq!(b["report"]["mutations"][0]["verdict"], "KILLED");
    // Switch mode's plan is written beside the report, and the mutant cost no build of
    // its own: it ran behind the switch.
    let written: Vec<&str> = b["written"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    assert!(
        written.contains(&"reports/sample/switch.json"),
        "{written:?}"
    );
    assert_eq!(b["report"]["mutations"][0]["build_seconds"], 0.0);
}

#[test]
fn an_interrupted_test_command_is_killed_and_the_gate_exits_130() {
    let sb = Sandbox::new();
    let cat = sb.catalog.to_str().unwrap();
    let marker = sb.dir.path().join("survived");
    // The command's child would write the marker if it outlived the interruption.
    let cmd = format!(
        "echo started; (sleep 3; touch {}) & sleep 60",
        marker.display()
    );
    let (mut child, rx) = sb.spawn(&["gate", cat, "--test-command", &cmd]);
    common::wait_for_line(&rx, "started", Duration::from_secs(60));
    // While it runs, its process group is recorded in the host state directory.
    let records = || std::fs::read_dir(sb.state.join("children")).map_or(0, |d| d.count());
    let start = std::time::Instant::now();
    while records() == 0 && start.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(records(), 1);
    // SAFETY: signalling our own child.
    unsafe {
        libc::kill(child.id() as libc::pid_t, libc::SIGINT);
    }
    let status = common::wait_with_limit(&mut child, Duration::from_secs(30));
    assert_eq!(status.code(), Some(130));
    let j = gate_json(&sb);
    assert_eq!(j["verdict"], "interrupted");
    assert_eq!(j["exit_code"], 130);
    assert_eq!(
        j["reasons"],
        serde_json::json!(["interrupted by a signal while the test command ran"])
    );
    assert!(j["test_run"]["exit_code"].is_null());
    assert!(j["audit"].is_null());
    assert_eq!(j["batteries"], serde_json::json!([]));
    let log = std::fs::read_to_string(sb.ws.join("reports/gate/test.log")).unwrap();
    assert_eq!(log, "started\n");
    assert_eq!(j["test_run"]["log_lines"], 1);
    assert_eq!(records(), 0);
    std::thread::sleep(Duration::from_millis(3500));
    assert!(
        !marker.exists(),
        "the test command's child outlived the gate"
    );
}
