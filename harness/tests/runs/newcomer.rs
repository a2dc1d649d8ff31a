//! A newcomer's first ten minutes on a crate they do not know (fixtures/workspaces/newcomer):
//! `harness tests` and `harness init` list the tests cargo lists, `check --list` refuses a
//! name no target holds and names the nearest real one, the console and the HTML page speak
//! of expectations, and a state directory inside the workspace is refused up front.

use crate::common;

use std::path::Path;
use std::process::Command;

use common::Sandbox;

fn newcomer() -> Sandbox {
    Sandbox::of("newcomer", "mutations/expectations.toml")
}

/// The names `cargo test -- --list EXTRA...` prints for every target of the package, doc
/// tests last, run here independently of the harness.
fn cargo_list(ws: &Path, target_dir: &Path, extra: &[&str]) -> Vec<String> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let mut names = Vec::new();
    for sel in [&["--lib", "--bins", "--tests"][..], &["--doc"][..]] {
        let out = Command::new(&cargo)
            .args(["test", "--offline", "-q", "--manifest-path"])
            .arg(ws.join("Cargo.toml"))
            .arg("--target-dir")
            .arg(target_dir)
            .args(sel)
            .args(["--", "--list"])
            .args(extra)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        names.extend(
            String::from_utf8_lossy(&out.stdout)
                .lines()
                .filter_map(|l| l.strip_suffix(": test"))
                .map(str::to_string),
        );
    }
    names
}

#[test]
fn tests_prints_every_test_as_cargo_lists_it_doc_tests_included() {
    let sb = newcomer();
    let before = sb.tree();
    let run = sb.run(&["tests", "--workspace", sb.ws.to_str().unwrap()]);
    run.expect_code(0);
    // The listing's Cargo.lock was cargo's, not the user's: the tree is left as found.
    assert_eq!(sb.tree(), before);
    insta::assert_snapshot!("newcomer_tests", run.stdout);
    let listed: Vec<String> = run.stdout.lines().map(str::to_string).collect();
    let mut real = cargo_list(&sb.ws, &sb.dir.path().join("own-target"), &[]);
    let mut sorted = listed.clone();
    sorted.sort();
    real.sort();
    assert_eq!(
        sorted, real,
        "harness tests differs from cargo's own --list"
    );
}

#[test]
fn init_writes_a_catalog_that_check_accepts_and_battery_runs() {
    let sb = newcomer();
    let ws = sb.ws.to_str().unwrap();
    let run = sb.run(&["init", "--workspace", ws]);
    run.expect_code(0).stdout_has("(package spans, 5 tests)");
    let catalog = sb.ws.join("mutations/spans.toml");
    let text = std::fs::read_to_string(&catalog).unwrap();
    insta::assert_snapshot!("newcomer_init_catalog", text);
    assert!(
        !sb.ws.join("Cargo.lock").exists(),
        "init left cargo's Cargo.lock"
    );
    // Never over an existing catalog.
    sb.run(&["init", "--workspace", ws])
        .expect_code(2)
        .stderr_has("exists already");
    let cat = catalog.to_str().unwrap();
    sb.run(&["check", cat])
        .expect_code(0)
        .stdout_has("ok (0 mutations, 5 tests");
    sb.run(&["check", "--list", cat]).expect_code(0);
    // No mutation yet: the baseline runs every test, and each is UNFALSIFIED (exit 1).
    let run = sb.run(&["battery", cat]);
    run.expect_code(1);
    let r = sb.report_of("spans");
    assert_eq!(r["status"], "complete", "{r}");
    assert_eq!(r["unfalsified"].as_array().unwrap().len(), 5, "{r}");
}

/// A crate whose own tests mark some ignored (an `#[ignore]` test, an `ignore` doc test, as
/// `bytesize` 1.3.0 has): `init` skips exactly those cargo lists with `--ignored`, each with
/// why, so that the battery's baseline, which refuses a test that reports ignored, is green;
/// `tests` leaves them out and names them on standard error.
#[test]
fn init_skips_the_tests_that_mark_themselves_ignored_and_the_baseline_is_green() {
    let sb = newcomer();
    sb.edit(
        "src/lib.rs",
        "pub fn seconds(",
        "///\n/// ```ignore\n/// not even Rust\n/// ```\npub fn seconds(",
    );
    sb.edit(
        "tests/parse.rs",
        "#[test]\nfn refuses_a_missing_count() {",
        "#[test]\n#[ignore = \"slow\"]\nfn waits_a_long_time() {}\n\n#[test]\nfn refuses_a_missing_count() {",
    );
    let ws = sb.ws.to_str().unwrap();
    // What cargo itself lists as ignored, run independently of the harness.
    let ignored = cargo_list(&sb.ws, &sb.dir.path().join("own-target"), &["--ignored"]);
    assert_eq!(ignored.len(), 2, "{ignored:?}");
    let _ = std::fs::remove_file(sb.ws.join("Cargo.lock"));
    let run = sb.run(&["tests", "--workspace", ws]);
    run.expect_code(0);
    for t in &ignored {
        assert!(
            !run.stdout.lines().any(|l| l == t),
            "{t} listed:\n{}",
            run.stdout
        );
        assert!(
            run.stderr.contains(t.as_str()),
            "{t} not named:\n{}",
            run.stderr
        );
    }
    sb.run(&["init", "--workspace", ws])
        .expect_code(0)
        .stdout_has("(package spans, 5 tests, 2 skipped as marked ignored)");
    let catalog = sb.ws.join("mutations/spans.toml");
    let spec: toml::Value = toml::from_str(&std::fs::read_to_string(&catalog).unwrap()).unwrap();
    let skipped: Vec<&str> = spec["skip"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["test"].as_str().unwrap())
        .collect();
    assert_eq!(
        skipped,
        ignored.iter().map(String::as_str).collect::<Vec<_>>()
    );
    let cat = catalog.to_str().unwrap();
    sb.run(&["check", cat]).expect_code(0);
    let run = sb.run(&["battery", cat]);
    run.expect_code(1);
    let r = sb.report_of("spans");
    assert_eq!(r["status"], "complete", "{r}");
    assert_eq!(r["unfalsified"].as_array().unwrap().len(), 5, "{r}");
}

#[test]
fn init_needs_a_package_when_the_workspace_has_several_and_refuses_an_unknown_one() {
    let sb = newcomer();
    let several = sb.dir.path().join("several");
    for member in ["alpha", "beta"] {
        std::fs::create_dir_all(several.join(member).join("src")).unwrap();
        std::fs::write(
            several.join(member).join("Cargo.toml"),
            format!("[package]\nname = \"{member}\"\nversion = \"0.1.0\"\nedition = \"2021\"\n"),
        )
        .unwrap();
        std::fs::write(several.join(member).join("src/lib.rs"), "").unwrap();
    }
    std::fs::write(
        several.join("Cargo.toml"),
        "[workspace]\nmembers = [\"alpha\", \"beta\"]\nresolver = \"2\"\n",
    )
    .unwrap();
    sb.run(&["init", "--workspace", several.to_str().unwrap()])
        .expect_code(2)
        .stderr_has("the workspace has 2 packages (alpha, beta): name one with --package");
    assert!(!several.join("mutations").exists());
    let ws = sb.ws.to_str().unwrap();
    sb.run(&["init", "--workspace", ws, "--package", "spams"])
        .expect_code(2)
        .stderr_has("package \"spams\" is not in the workspace (it has: spans)");
    sb.run(&["tests", "--workspace", sb.dir.path().to_str().unwrap()])
        .expect_code(2)
        .stderr_has("holds no Cargo.toml");
}

#[test]
fn check_list_refuses_a_test_the_targets_do_not_have_naming_the_nearest() {
    let sb = newcomer();
    sb.edit(
        "mutations/expectations.toml",
        "    \"duration::test::test_units\",\n",
        "    \"test_units\",\n",
    );
    sb.edit(
        "mutations/expectations.toml",
        "    \"counts_minutes_and_hours\",\n",
        "    \"counts_minutes_and_hour\",\n",
    );
    sb.edit(
        "mutations/expectations.toml",
        "killed_by = [\"counts_minutes_and_hours\"]",
        "killed_by = [\"counts_minutes_and_hour\"]",
    );
    let cat = sb.catalog.to_str().unwrap();
    let run = sb.run(&["check", "--list", cat]);
    run.expect_code(2)
        .stderr_has("CATALOG-DRIFT")
        .stderr_has(
            "tests[0] \"test_units\" is not a test of the targets (nearest real test: \"duration::test::test_units\")",
        )
        .stderr_has(
            "tests[2] \"counts_minutes_and_hour\" is not a test of the targets (nearest real test: \"counts_minutes_and_hours\")",
        );
    assert!(!run.stdout.contains(": ok"), "{}", run.stdout);
    assert!(!sb.ws.join("Cargo.lock").exists());
}

/// Each row's text with its two seconds columns replaced (the rest is stable).
fn without_seconds(table: &str) -> String {
    table
        .lines()
        .map(|l| {
            l.split("  ")
                .filter(|c| !c.is_empty())
                .map(|c| {
                    let c = c.trim();
                    if c.parse::<f64>().is_ok() && c.contains('.') {
                        "[s]"
                    } else {
                        c
                    }
                })
                .collect::<Vec<_>>()
                .join(" | ")
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn the_console_names_who_killed_an_unmet_mutation() {
    let sb = newcomer();
    let run = sb.battery(&[]);
    run.expect_code(1);
    let table: String = run
        .stdout
        .lines()
        .filter(|l| !l.starts_with("report: "))
        .map(|l| format!("{l}\n"))
        .collect();
    insta::assert_snapshot!("newcomer_expectations_table", without_seconds(&table));
    run.stderr_has(
        "seconds-doubled: KILLED (UNMET): counts_minutes_and_hours did not fail (passed); killed instead by duration::test::test_units",
    );
}

#[test]
fn the_page_headline_counts_expectations_and_colours_by_them() {
    let sb = newcomer();
    sb.battery(&[]).expect_code(1);
    let page = sb.read("reports/expectations/index.html");
    let headline = page
        .lines()
        .find(|l| l.starts_with("<p id=\"headline\">"))
        .unwrap();
    assert!(
        headline.contains("2 mutations: 1 MET, 1 UNMET; 1 killed, 1 survived (exit 1)"),
        "{headline}"
    );
    let row = |id: &str| {
        page.lines()
            .find(|l| l.starts_with("<tr class=") && l.contains(&format!("<code>{id}</code>")))
            .unwrap_or_else(|| panic!("no expectations row for {id}"))
            .to_string()
    };
    // The expected survivor is green (met), the kill by the wrong test red (unmet).
    let gap = row("overflow-wraps");
    assert!(
        gap.starts_with("<tr class=\"met\">") && gap.contains("SURVIVED"),
        "{gap}"
    );
    let wrong = row("seconds-doubled");
    assert!(
        wrong.starts_with("<tr class=\"unmet\">") && wrong.contains("KILLED"),
        "{wrong}"
    );
    assert!(
        wrong.contains("killed instead by duration::test::test_units"),
        "{wrong}"
    );
}

#[test]
fn a_state_dir_inside_the_workspace_is_refused_before_anything_runs() {
    let sb = newcomer();
    let before = sb.tree();
    for (cwd, state) in [
        (
            sb.dir.path().to_path_buf(),
            sb.ws.join("target/.harness-state"),
        ),
        (sb.ws.clone(), Path::new(".harness").to_path_buf()),
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_harness"))
            .arg("--state-dir")
            .arg(&state)
            .args(["battery", sb.catalog.to_str().unwrap()])
            .current_dir(&cwd)
            .env_remove("HARNESS_STATE_DIR")
            .output()
            .unwrap();
        let run = common::Run::from(out);
        run.expect_code(2)
            .stderr_has("is inside the workspace")
            .stderr_has("the host lock and the restore journals would be files of the tree");
        assert!(!run.stderr.contains("TREE-DIRTY"), "{}", run.stderr);
        assert!(
            !cwd.join(&state).exists(),
            "{} was created",
            state.display()
        );
        assert!(!sb.ws.join("reports").exists(), "a report was written");
    }
    assert_eq!(sb.tree(), before);
}

/// A relative `--state-dir` is the caller's: the tests' private temporary directories under
/// it are found from the directory the tests run in (here the switch mode's scratch copy,
/// where a doc test's rustdoc makes its temporary files).
#[test]
fn a_relative_state_dir_outside_the_workspace_serves_switch_mode_doc_tests() {
    let sb = newcomer();
    let out = Command::new(env!("CARGO_BIN_EXE_harness"))
        .args(["--state-dir", "relative-state", "battery"])
        .arg(&sb.catalog)
        .args(["--mode", "switch"])
        .current_dir(sb.dir.path())
        .env_remove("HARNESS_STATE_DIR")
        .output()
        .unwrap();
    let run = common::Run::from(out);
    run.expect_code(1);
    let r = sb.report_of("expectations");
    assert_eq!(r["status"], "complete", "{r}");
    assert_eq!(r["summary"]["met"], 1, "{r}");
    assert_eq!(r["summary"]["unmet"], 1, "{r}");
    assert!(sb.dir.path().join("relative-state").is_dir());
}

/// `harness tests`' output is a must-run list as it stands: `lane-audit` finds every name of
/// it run and passed in a real `cargo test` log of the package (doc tests included).
#[test]
fn the_tests_output_is_a_must_run_list_lane_audit_takes() {
    let sb = newcomer();
    let run = sb.run(&["tests", "--workspace", sb.ws.to_str().unwrap()]);
    run.expect_code(0);
    let must_run = sb.dir.path().join("must-run.txt");
    std::fs::write(&must_run, &run.stdout).unwrap();
    // One stream, as a CI job's log holds it: cargo's lines (stderr) between the tests'.
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = Command::new("sh")
        .arg("-c")
        .arg("\"$0\" test --offline --no-fail-fast --manifest-path \"$1\" --target-dir \"$2\" 2>&1")
        .arg(&cargo)
        .arg(sb.ws.join("Cargo.toml"))
        .arg(sb.dir.path().join("own-target"))
        .env("CARGO_TERM_COLOR", "never")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    let log = sb.dir.path().join("test.log");
    std::fs::write(&log, &out.stdout).unwrap();
    let lanes = sb.dir.path().join("lanes.toml");
    std::fs::write(&lanes, "[[lane]]\nname = \"unit\"\nrequired = true\n").unwrap();
    let audit = sb.run(&[
        "lane-audit",
        "--lanes",
        lanes.to_str().unwrap(),
        "--log",
        &format!("unit={}", log.display()),
        "--must-run",
        must_run.to_str().unwrap(),
        "--manifest-path",
        sb.ws.join("Cargo.toml").to_str().unwrap(),
    ]);
    audit.expect_code(0);
    for name in run.stdout.lines() {
        audit.stdout_has(name);
    }
}

/// cargo-mutants' generated mutants, run by the harness, are printed as caught (with the
/// tests that caught them) or missed, never as a catalog's gap ("KILLED (UNMET): gap closed:
/// update the catalog"). Needs the pinned cargo-mutants (skipped, saying so, without it).
#[test]
fn generated_mutants_print_caught_or_missed_never_a_closed_gap() {
    if !common::cargo_mutants_present("generated_mutants_print_caught_or_missed_never_a_closed_gap")
    {
        return;
    }
    for mode in ["rebuild", "switch"] {
        let sb = newcomer();
        let run = sb.run(&[
            "mutants",
            "--via-harness",
            "--mode",
            mode,
            "--catalog",
            sb.catalog.to_str().unwrap(),
            "--file",
            "src/main.rs",
            "--file",
            "src/duration.rs",
        ]);
        // `main` replaced with `()` is missed (no test runs the binary's main): exit 1.
        run.expect_code(1);
        for word in ["gap closed", "UNMET", "KILLED", "SURVIVED"] {
            assert!(
                !run.stderr.contains(word) && !run.stdout.contains(word),
                "{mode}: {word:?} printed for a generated mutant:\n{}\n{}",
                run.stderr,
                run.stdout
            );
        }
        // Rebuild mode runs the tests and none fails; switch mode's reach run finds that no
        // test executes `main` at all.
        let missed = if mode == "switch" {
            ": missed, no listed test reaches it\n"
        } else {
            ": missed\n"
        };
        run.stderr_has(": caught by duration::test::test_units\n")
            .stderr_has(missed);
    }
}
