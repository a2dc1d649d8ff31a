//! `harness battery --mode switch -j N` on a private copy of the sample workspace with the
//! catalog `mutations/parallel.toml` (the sample's mutations, plus a test that holds a fixed
//! file name in its temporary directory for a second): the reports and the console equal
//! those of `-j 1`, timings aside; each mutant's test run has a temporary directory of its
//! own, removed afterwards; the hanging mutant is still TIMEOUT and leaves no process behind;
//! a killed harness's temporary directories go with the next command; `-j 0` and `-j 2` in
//! rebuild mode are refused.

use crate::common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use common::{Sandbox, redact, wait_with_limit};

/// The sandbox with the parallel catalog, each run of the isolation test logging its
/// temporary directory to `<sandbox>/tmplog/`.
fn sandbox() -> (Sandbox, PathBuf) {
    sandbox_with("")
}

/// [`sandbox`], with `extra` (`, NAME = "VALUE"`) added to the catalog's environment.
fn sandbox_with(extra: &str) -> (Sandbox, PathBuf) {
    let mut sb = Sandbox::new();
    sb.catalog = sb.ws.join("mutations/parallel.toml");
    let log = sb.dir.path().join("tmplog");
    std::fs::create_dir_all(&log).unwrap();
    sb.edit(
        "mutations/parallel.toml",
        "select = \"::\"\n",
        &format!(
            "select = \"::\"\nenv = {{ SAMPLE_TMPDIR_LOG = {:?}{extra} }}\n",
            log.to_str().unwrap()
        ),
    );
    (sb, log)
}

/// Every number with a decimal point (seconds) replaced, so that two runs' text compares.
fn without_seconds(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let b = s.as_bytes();
    let mut i = 0;
    while i < b.len() {
        if b[i].is_ascii_digit() {
            let start = i;
            while i < b.len() && (b[i].is_ascii_digit() || b[i] == b'.') {
                i += 1;
            }
            let num = &s[start..i];
            if num.contains('.') {
                out.push_str("<secs>");
            } else {
                out.push_str(num);
            }
        } else {
            out.push(b[i] as char);
            i += 1;
        }
    }
    out
}

/// What one run wrote and printed, without its timings.
struct Outcome {
    battery: serde_json::Value,
    stryker: serde_json::Value,
    markdown: String,
    console: String,
    switch: serde_json::Value,
}

/// A switch run with `-j jobs` of every listed test for every mutant (`--all-tests`: the
/// isolation test, which reaches no mutated function, must run with each mutant to probe
/// its temporary directory).
fn run_with(sb: &Sandbox, jobs: &str) -> Outcome {
    run_with_args(sb, jobs, &["--all-tests"])
}

fn run_with_args(sb: &Sandbox, jobs: &str, extra: &[&str]) -> Outcome {
    let reports = sb
        .dir
        .path()
        .join(format!("reports-j{jobs}{}", extra.join("")));
    let mut args = vec![
        "--mode",
        "switch",
        "-j",
        jobs,
        "--reports",
        reports.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    let run = sb.battery(&args);
    run.expect_code(1);
    let dir = reports.join("parallel");
    let ws = sb.ws.canonicalize().unwrap();
    let read = |f: &str| std::fs::read_to_string(dir.join(f)).unwrap();
    let json = |f: &str| {
        let mut v: serde_json::Value = serde_json::from_str(&read(f)).unwrap();
        redact(&mut v, &ws);
        v
    };
    let switch: serde_json::Value = serde_json::from_str(&read("switch.json")).unwrap();
    Outcome {
        battery: json("battery.json"),
        stryker: json("mutation-report.json"),
        markdown: without_seconds(&read("battery.md")),
        console: without_seconds(&run.stderr),
        switch,
    }
}

/// Per log line of the isolation test: (mutant, temporary directory); the control runs
/// (no mutant, the forced-fail control) left out.
fn tmpdirs(log: &Path) -> Vec<(String, PathBuf)> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(log).unwrap() {
        let text = std::fs::read_to_string(e.unwrap().path()).unwrap();
        let (mutant, dir) = text.trim_end().split_once(' ').unwrap();
        if mutant != "-" && mutant != "__harness_forced_fail__" {
            out.push((mutant.to_string(), PathBuf::from(dir)));
        }
    }
    out.sort();
    out
}

/// The processes whose command line mentions `dir` (the sandbox): what a run left behind.
fn processes_under(dir: &Path) -> Vec<String> {
    let needle = dir.to_string_lossy().into_owned();
    let mut out = Vec::new();
    for p in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(cmd) = std::fs::read(p.path().join("cmdline")) else {
            continue;
        };
        let cmd = String::from_utf8_lossy(&cmd).replace('\0', " ");
        let zombie = std::fs::read_to_string(p.path().join("stat"))
            .is_ok_and(|s| s[s.rfind(')').unwrap() + 1..].split_whitespace().next() == Some("Z"));
        if cmd.contains(&needle) && !zombie {
            out.push(format!("{}: {cmd}", p.file_name().to_string_lossy()));
        }
    }
    out
}

#[test]
fn jobs_2_and_3_report_as_jobs_1_each_run_in_its_own_temporary_directory() {
    let (sb, log) = sandbox();
    let one = run_with(&sb, "1");
    let per_run_one = tmpdirs(&log);
    for e in std::fs::read_dir(&log).unwrap() {
        std::fs::remove_file(e.unwrap().path()).unwrap();
    }
    let start = Instant::now();
    let two = run_with(&sb, "2");
    let two_secs = start.elapsed();
    let per_run_two = tmpdirs(&log);
    let three = run_with(&sb, "3");

    // The answers of -j 1, so that equality is not equality of two empty reports.
    let verdicts: BTreeMap<String, String> = one.battery["mutations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            (
                m["id"].as_str().unwrap().to_string(),
                m["verdict"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    let want: BTreeMap<String, String> = [
        ("add-subtracts", "KILLED"),
        ("max-takes-min", "KILLED"),
        ("clamp-upper-inverted", "KILLED"),
        ("even-negative-odd", "SURVIVED"),
        ("add-does-not-compile", "UNVIABLE"),
        ("countdown-hangs", "TIMEOUT"),
    ]
    .into_iter()
    .map(|(a, b)| (a.to_string(), b.to_string()))
    .collect();
    assert_eq!(verdicts, want);
    // The private temporary directory never made the isolation test kill anything.
    let unfalsified = one.battery["unfalsified"].as_array().unwrap();
    assert!(
        unfalsified.contains(&serde_json::json!("isolation::tmpdir_is_private")),
        "{unfalsified:?}"
    );
    // The failing proptest-like test's file is reported as that mutant's, with any -j.
    assert_eq!(
        one.battery["mutations"][1]["created_files"],
        serde_json::json!(["proptest-regressions/contract.txt"])
    );

    for (jobs, other) in [("2", &two), ("3", &three)] {
        assert_eq!(one.battery, other.battery, "battery.json, -j {jobs}");
        assert_eq!(
            one.stryker, other.stryker,
            "mutation-report.json, -j {jobs}"
        );
        assert_eq!(one.markdown, other.markdown, "battery.md, -j {jobs}");
        assert_eq!(one.console, other.console, "console, -j {jobs}");
        assert_eq!(other.switch["jobs"], jobs.parse::<u64>().unwrap());
    }
    assert_eq!(one.switch["jobs"], 1);
    assert_eq!(one.switch["ran_again_alone"], serde_json::json!([]));
    // With reach-guided selection (the reach run itself then goes on -j 2 at once) the
    // reports are the same with any -j too, and read as the runs of every test.
    let sel_one = run_with_args(&sb, "1", &[]);
    let sel_two = run_with_args(&sb, "2", &[]);
    assert_eq!(
        sel_one.battery, sel_two.battery,
        "battery.json, selected, -j 2"
    );
    assert_eq!(sel_two.switch["reach"]["selection"], true);
    // The same verdicts and kills as the runs of every test. Not every cell: under the
    // hanging mutant a run of every test leaves the tests after the hang unfinished, where
    // the selected run never started them (not reached).
    let kills = |r: &serde_json::Value| -> Vec<(String, String, Vec<bool>)> {
        let km = &r["kill_matrix"];
        r["mutations"]
            .as_array()
            .unwrap()
            .iter()
            .enumerate()
            .map(|(j, m)| {
                let col = km["cells"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|row| row[j] == "killed")
                    .collect();
                (
                    m["id"].as_str().unwrap().to_string(),
                    m["verdict"].as_str().unwrap().to_string(),
                    col,
                )
            })
            .collect()
    };
    assert_eq!(kills(&sel_two.battery), kills(&one.battery));

    // Each switched mutant's run that reached the isolation test had a temporary directory
    // of its own: not the harness's, not another run's, under the state directory, and gone
    // once the run ended. The hanging mutant never reaches the isolation test.
    let state = sb.state.canonicalize().unwrap();
    for (jobs, runs) in [("1", &per_run_one), ("2", &per_run_two)] {
        let mutants: BTreeSet<&str> = runs.iter().map(|(m, _)| m.as_str()).collect();
        for m in [
            "add-subtracts",
            "max-takes-min",
            "clamp-upper-inverted",
            "even-negative-odd",
        ] {
            assert!(
                mutants.contains(m),
                "-j {jobs}: no run of {m} logged: {runs:?}"
            );
        }
        let dirs: BTreeSet<&PathBuf> = runs.iter().map(|(_, d)| d).collect();
        assert_eq!(
            dirs.len(),
            runs.len(),
            "-j {jobs}: runs shared a directory: {runs:?}"
        );
        for (m, d) in runs {
            assert_ne!(
                d,
                &std::env::temp_dir(),
                "-j {jobs}: {m} ran in the harness's TMPDIR"
            );
            assert!(
                d.starts_with(&state),
                "-j {jobs}: {m} ran in {}",
                d.display()
            );
            assert!(!d.exists(), "-j {jobs}: {} was left behind", d.display());
        }
    }
    assert!(
        !state.join("tmp").exists()
            || std::fs::read_dir(state.join("tmp"))
                .unwrap()
                .next()
                .is_none(),
        "temporary directories left in the state directory"
    );
    // The TIMEOUT mutant's test binary was killed with its group: nothing of the runs is
    // alive.
    let left = processes_under(sb.dir.path());
    assert!(left.is_empty(), "processes left behind: {left:?}");
    eprintln!("-j 2 run: {:.1} s", two_secs.as_secs_f64());
}

#[test]
fn a_timeout_under_jobs_2_is_timeout_and_leaves_no_process() {
    let (sb, _log) = sandbox();
    let reports = sb.dir.path().join("reports");
    let run = sb.battery(&[
        "--mode",
        "switch",
        "-j",
        "2",
        "--only",
        "countdown-hangs,even-negative-odd",
        "--reports",
        reports.to_str().unwrap(),
    ]);
    run.expect_code(1);
    let r: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(reports.join("parallel/battery.json")).unwrap(),
    )
    .unwrap();
    let hang = r["mutations"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["id"] == "countdown-hangs")
        .unwrap();
    assert_eq!(hang["verdict"], "TIMEOUT");
    assert_eq!(
        hang["outcomes"]["contract::countdown_counts_steps"],
        "unfinished"
    );
    // The hang ran the one test that reaches it, under a timeout of its own from that
    // test's seconds on its own in the reach run: shorter than the battery's.
    let battery = r["baseline"]["timeout_seconds"].as_f64().unwrap();
    let timeout = hang["timeout_seconds"]
        .as_f64()
        .expect("a reach-selected mutant has a timeout of its own");
    assert!(
        timeout < battery,
        "own timeout {timeout} s, battery's {battery} s"
    );
    let switch: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(reports.join("parallel/switch.json")).unwrap(),
    )
    .unwrap();
    let own = switch["reach"]["test_seconds"]["contract::countdown_counts_steps"]
        .as_f64()
        .expect("the reaching test was timed");
    assert!(
        (timeout - (5.0 * own + 2.0)).abs() < 1e-6,
        "own timeout {timeout} s from a test of {own} s"
    );
    // Those seconds are the reach run's own: no test ran again to be timed.
    assert_eq!(switch["reach"]["tests_timed"], 0, "{}", switch["reach"]);
    assert!(!run.stderr.contains("timing run"), "{}", run.stderr);
    run.stderr_has("per-mutant timeouts: each mutant's tests time out at min(");
    // The rule is in the report, per mutant: JSON and Markdown.
    assert_eq!(
        hang["timeout_rule"],
        serde_json::json!({"tests_seconds": own, "factor": 5.0, "margin_seconds": 2.0})
    );
    let md = std::fs::read_to_string(reports.join("parallel/battery.md")).unwrap();
    let row = format!("| `countdown-hangs` | TIMEOUT | {timeout:.2} s = 5 x {own:.3} s + 2 s |");
    assert!(md.contains(&row), "{row} not in:\n{md}");
    // The other mutant's own timeout is shown too, with its verdict.
    assert!(md.contains("| `even-negative-odd` | SURVIVED | "), "{md}");
    // Measured against its own timeout: at least the timeout, not far beyond it.
    let took = hang["test_seconds"].as_f64().unwrap();
    assert!(
        took >= timeout && took < timeout + 20.0,
        "test run {took} s against a timeout of {timeout} s"
    );
    let left = processes_under(sb.dir.path());
    assert!(left.is_empty(), "processes left behind: {left:?}");
}

#[test]
fn a_killed_harness_leaves_its_temporary_directories_to_the_next_command() {
    let pause = tempfile::tempdir().unwrap();
    let pause = pause.path();
    let (sb, _log) = sandbox_with(&format!(
        ", SAMPLE_PAUSE_DIR = {:?}",
        pause.to_str().unwrap()
    ));
    let cat = sb.catalog.to_str().unwrap();
    let (mut child, _rx) = sb.spawn(&[
        "battery",
        cat,
        "--mode",
        "switch",
        "-j",
        "2",
        "--only",
        "add-subtracts,even-negative-odd",
    ]);
    // The failing test of add-subtracts waits at the known point.
    let start = Instant::now();
    let test_pid: u32 = loop {
        if let Ok(p) = std::fs::read_to_string(pause.join("paused"))
            && let Ok(p) = p.trim().parse()
        {
            break p;
        }
        assert!(
            child.try_wait().unwrap().is_none(),
            "the harness exited first"
        );
        assert!(start.elapsed() < Duration::from_secs(300), "never paused");
        std::thread::sleep(Duration::from_millis(50));
    };
    let owner_dirs = |state: &Path| -> Vec<PathBuf> {
        std::fs::read_dir(state.join("tmp"))
            .map(|rd| rd.flatten().map(|e| e.path()).collect())
            .unwrap_or_default()
    };
    let dirs = owner_dirs(&sb.state);
    assert_eq!(dirs.len(), 1, "{dirs:?}");
    assert!(
        dirs[0]
            .file_name()
            .unwrap()
            .to_string_lossy()
            .starts_with(&format!("{}-", child.id())),
        "{dirs:?}"
    );
    child.kill().unwrap(); // SIGKILL: no handler runs
    wait_with_limit(&mut child, Duration::from_secs(30));
    assert!(dirs[0].exists(), "removed by a dead process?");
    let restore = sb.run(&["restore"]);
    restore.expect_code(0).stderr_has(&format!(
        "removed {}, the temporary directory of a killed run's tests",
        dirs[0].display()
    ));
    assert!(owner_dirs(&sb.state).is_empty());
    let start = Instant::now();
    while std::path::Path::new(&format!("/proc/{test_pid}")).exists()
        && !std::fs::read_to_string(format!("/proc/{test_pid}/stat"))
            .is_ok_and(|s| s[s.rfind(')').unwrap() + 1..].split_whitespace().next() == Some("Z"))
    {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "the paused test outlived the restore"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn jobs_0_and_jobs_in_rebuild_mode_are_refused() {
    let (sb, _log) = sandbox();
    let zero = sb.battery(&["--mode", "switch", "-j", "0"]);
    zero.expect_code(2)
        .stderr_has("-j 0: at least one test run must go on at a time");
    let rebuild = sb.battery(&["-j", "2"]);
    rebuild
        .expect_code(2)
        .stderr_has("-j 2: only switch mode (--mode switch) runs several mutants' tests at once");
    let gate = sb.run(&[
        "gate",
        sb.catalog.to_str().unwrap(),
        "--test-command",
        "true",
        "-j",
        "3",
    ]);
    gate.expect_code(2).stderr_has("-j 3: only switch mode");
    // Nothing ran: no report was written.
    assert!(!sb.ws.join("reports").exists());
}

#[test]
fn a_signal_while_runs_go_on_interrupts_and_leaves_nothing() {
    let pause = tempfile::tempdir().unwrap();
    let pause = pause.path();
    let (sb, _log) = sandbox_with(&format!(
        ", SAMPLE_PAUSE_DIR = {:?}",
        pause.to_str().unwrap()
    ));
    let before = sb.tree();
    let cat = sb.catalog.to_str().unwrap();
    let (mut child, _rx) = sb.spawn(&[
        "battery",
        cat,
        "--mode",
        "switch",
        "-j",
        "2",
        "--only",
        "add-subtracts,even-negative-odd,clamp-upper-inverted",
    ]);
    let start = Instant::now();
    while !pause.join("paused").exists() {
        assert!(
            child.try_wait().unwrap().is_none(),
            "the harness exited first"
        );
        assert!(start.elapsed() < Duration::from_secs(300), "never paused");
        std::thread::sleep(Duration::from_millis(50));
    }
    // SAFETY: signalling the harness this test started.
    unsafe {
        libc::kill(child.id() as i32, libc::SIGTERM);
    }
    let status = wait_with_limit(&mut child, Duration::from_secs(60));
    assert_eq!(status.code(), Some(130));
    assert_eq!(sb.report_of("parallel")["status"], "interrupted");
    assert_eq!(sb.tree(), before);
    let left = processes_under(sb.dir.path());
    assert!(left.is_empty(), "processes left behind: {left:?}");
    assert!(
        std::fs::read_dir(sb.state.join("tmp"))
            .map(|mut rd| rd.next().is_none())
            .unwrap_or(true),
        "temporary directories left in the state directory"
    );
}
