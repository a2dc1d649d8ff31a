//! The one front door: `battery`, `gate` and `mutants --via-harness` refuse the same way,
//! with the same words, because they plan, preflight, lock and run through one path.
//!
//! Each case runs the three commands on the same sandbox and compares the refusal line each
//! prints: a state directory inside the workspace, `-j 2` in rebuild mode, a host lock held
//! by someone else (LOCKED), and a red baseline while running under an ancestor's hold
//! (`lock run -- harness ...`).

use crate::common;

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use common::{Run, Sandbox};

/// The three commands' arguments for the sample catalog `cat`, then `extra`.
fn commands(cat: &str, extra: &[&str]) -> Vec<(&'static str, Vec<String>)> {
    let with = |head: &[&str]| -> Vec<String> {
        head.iter()
            .chain(extra)
            .map(|s| s.to_string())
            .collect::<Vec<_>>()
    };
    vec![
        ("battery", with(&["battery", cat])),
        ("gate", with(&["gate", cat])),
        (
            "mutants",
            with(&["mutants", "--via-harness", "--catalog", cat]),
        ),
    ]
}

/// `harness --state-dir STATE ARGS...` in the sandbox's directory.
fn harness(sb: &Sandbox, state: &Path, args: &[String]) -> Run {
    let out = Command::new(env!("CARGO_BIN_EXE_harness"))
        .arg("--state-dir")
        .arg(state)
        .args(args)
        .current_dir(sb.dir.path())
        .env_remove("HARNESS_STATE_DIR")
        .output()
        .unwrap();
    Run::from(out)
}

/// The one stderr line of `run` holding `needle`.
fn line_with(name: &str, run: &Run, needle: &str) -> String {
    let lines: Vec<&str> = run.stderr.lines().filter(|l| l.contains(needle)).collect();
    assert_eq!(
        lines.len(),
        1,
        "{name}: not one line with {needle:?}:\n{}",
        run.stderr
    );
    lines[0].to_string()
}

/// Runs the three commands with `extra`, each on a tree without reports, and checks that
/// each exits 2 with the same line holding `needle`, nothing built and the tree unchanged.
/// Returns that line.
fn same_refusal(sb: &Sandbox, state: &Path, extra: &[&str], needle: &str) -> String {
    let before = sb.tree();
    let mut seen: Vec<(&str, String)> = Vec::new();
    for (name, args) in commands(sb.catalog.to_str().unwrap(), extra) {
        let run = harness(sb, state, &args);
        run.expect_code(2);
        seen.push((name, line_with(name, &run, needle)));
        assert!(!sb.ws.join("target").exists(), "{name} built something");
        assert_eq!(sb.tree(), before, "{name} changed the tree");
    }
    for (name, line) in &seen[1..] {
        assert_eq!(line, &seen[0].1, "{name} refuses otherwise than battery");
    }
    seen[0].1.clone()
}

#[test]
fn a_state_dir_inside_the_workspace_is_refused_alike_by_every_command() {
    let sb = Sandbox::new();
    let inside = sb.ws.join("target/.harness-state");
    let line = same_refusal(&sb, &inside, &[], "is inside the workspace");
    assert!(line.starts_with("harness: --state-dir "), "{line}");
    assert!(!inside.exists(), "the state directory was made");
    assert!(!sb.ws.join("reports").exists(), "a report was written");
}

#[test]
fn jobs_in_rebuild_mode_are_refused_alike_by_every_command() {
    let sb = Sandbox::new();
    let line = same_refusal(
        &sb,
        &sb.state,
        &["--mode", "rebuild", "-j", "2"],
        "only switch mode",
    );
    assert!(line.starts_with("harness: -j 2: "), "{line}");
    assert!(!sb.ws.join("reports").exists(), "a report was written");
}

/// Waits until `lock status` says the lock is held; returns what it says.
fn wait_until_held(sb: &Sandbox) -> String {
    let start = Instant::now();
    loop {
        let s = sb.run(&["lock", "status"]).stdout;
        if s.contains("held by") {
            return s;
        }
        assert!(start.elapsed() < Duration::from_secs(30), "never held: {s}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn a_held_lock_is_locked_alike_for_every_command_and_each_planned_battery_reports_it() {
    let sb = Sandbox::new();
    let pidfile = sb.dir.path().join("sleep.pid");
    let script = format!("echo $$ > {}; exec sleep 60", pidfile.display());
    let (mut holder, _rx) = sb.spawn(&[
        "lock", "run", "--owner", "holder", "--", "sh", "-c", &script,
    ]);
    wait_until_held(&sb);
    let before = sb.tree();
    let mut lines = Vec::new();
    for (name, args) in commands(sb.catalog.to_str().unwrap(), &[]) {
        let _ = std::fs::remove_dir_all(sb.ws.join("reports"));
        let run = harness(&sb, &sb.state, &args);
        run.expect_code(2);
        let line = line_with(name, &run, "LOCKED");
        assert!(line.starts_with("harness: LOCKED: the host lock"), "{line}");
        assert!(line.contains("owner holder"), "{line}");
        // How long the holder has held it is the one thing that moves between the runs.
        let held = line.find("held for ").unwrap();
        let secs = line[held..].find('s').unwrap();
        lines.push((
            name,
            format!("{}held for Ns{}", &line[..held], &line[held + secs + 1..]),
        ));
        // The batteries `battery` and `gate` were asked to run get their LOCKED report;
        // `mutants --via-harness` makes its batteries under the lock, so none is planned.
        let report = sb.ws.join("reports/sample/battery.json");
        if name == "mutants" {
            assert!(!sb.ws.join("reports").exists(), "{name} wrote a report");
        } else {
            run.stdout_has(&format!("report: {}", report.display()));
            let r = sb.report_json();
            assert_eq!(r["status"], "refused", "{name}: {r}");
            assert_eq!(r["refusal"]["kind"], "LOCKED", "{name}: {r}");
            assert_eq!(r["lock"], "not taken (held by someone else)", "{name}: {r}");
            assert!(
                !sb.ws.join("reports/gate").exists(),
                "{name}: the gate started"
            );
        }
        assert!(!sb.ws.join("target").exists(), "{name} built something");
        assert_eq!(sb.tree(), before, "{name} changed the tree");
    }
    for (name, line) in &lines[1..] {
        assert_eq!(line, &lines[0].1, "{name} is LOCKED otherwise than battery");
    }
    holder.kill().unwrap();
    holder.wait().unwrap();
    let sleep = std::fs::read_to_string(&pidfile).unwrap();
    Command::new("kill")
        .args(["-9", sleep.trim()])
        .status()
        .unwrap();
}

/// Under an ancestor's hold (`lock run -- harness CMD`), with a listed test that fails
/// whatever the tree (the catalog's environment names a marker in a folder that does not
/// exist): each command runs under the hold, says so, and refuses BASELINE-RED with the
/// same line; the battery's report says how the lock was held.
#[test]
fn a_red_baseline_under_an_ancestors_hold_is_refused_alike_by_every_command() {
    if !common::cargo_mutants_present(
        "a_red_baseline_under_an_ancestors_hold_is_refused_alike_by_every_command",
    ) {
        return;
    }
    let sb = Sandbox::new();
    let marker = sb.dir.path().join("no-such-folder/marker");
    let text = sb.read("mutations/sample.toml");
    sb.write(
        "mutations/sample.toml",
        &format!(
            "{text}\n[env]\nSAMPLE_FLAKY_MARKER = {:?}\n",
            marker.display().to_string()
        ),
    );
    let exe = env!("CARGO_BIN_EXE_harness");
    let state = sb.state.to_str().unwrap();
    let mut lines = Vec::new();
    for (name, args) in commands(sb.catalog.to_str().unwrap(), &[]) {
        let _ = std::fs::remove_dir_all(sb.ws.join("reports"));
        let mut all: Vec<&str> = vec!["lock", "run", "--", exe, "--state-dir", state];
        all.extend(args.iter().map(String::as_str));
        let run = sb.run(&all);
        run.expect_code(2)
            .stderr_has("running under the host lock held by ancestor");
        let line = line_with(name, &run, "BASELINE-RED");
        assert!(
            line.starts_with("harness: BASELINE-RED: listed tests are not green"),
            "{line}"
        );
        assert!(
            line.contains("contract::flaky_when_marker_is_absent"),
            "{line}"
        );
        lines.push((name, line));
        let battery = if name == "mutants" {
            "sample-generated"
        } else {
            "sample"
        };
        let r = sb.report_of(battery);
        assert_eq!(r["refusal"]["kind"], "BASELINE-RED", "{name}: {r}");
        assert!(
            r["lock"].as_str().unwrap().starts_with("ancestor pid "),
            "{name}: {r}"
        );
    }
    for (name, line) in &lines[1..] {
        assert_eq!(line, &lines[0].1, "{name} refuses otherwise than battery");
    }
}
