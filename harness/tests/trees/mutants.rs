//! `harness mutants`: a recorded cargo-mutants 27.1.0 run (fixtures/cargo-mutants) imported
//! into the harness's reports, the join with a named battery, and `--via-harness`.

use crate::common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use common::Run;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn recorded() -> PathBuf {
    repo().join("fixtures/cargo-mutants/sample/mutants.out")
}

fn harness(state: &Path, args: &[&str]) -> Run {
    harness_with(state, args, &[])
}

/// [`harness`] with `env` set.
fn harness_with(state: &Path, args: &[&str], env: &[(&str, &Path)]) -> Run {
    let out = Command::new(env!("CARGO_BIN_EXE_harness"))
        .arg("--state-dir")
        .arg(state)
        .args(args)
        .env_remove("HARNESS_STATE_DIR")
        .envs(env.iter().copied())
        .output()
        .unwrap();
    Run::from(out)
}

/// `harness mutants --via-harness --mode switch` on the mutants-sample copy in `dir/ws`
/// ([`common::mutants_sample`]), state in `dir/state`, with `env` set.
fn via_harness_on_sample(dir: &Path, env: &[(&str, &Path)]) -> Run {
    let catalog = dir.join("ws/mutations/named.toml");
    harness_with(
        &dir.join("state"),
        &[
            "mutants",
            "--via-harness",
            "--mode",
            "switch",
            "--catalog",
            catalog.to_str().unwrap(),
        ],
        env,
    )
}

/// cargo-mutants' own summary per mutant name, read straight from the recording.
fn recorded_summaries() -> BTreeMap<String, String> {
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(recorded().join("outcomes.json")).unwrap())
            .unwrap();
    assert_eq!(v["cargo_mutants_version"], "27.1.0");
    v["outcomes"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|o| {
            let m = o["scenario"].get("Mutant")?;
            Some((
                m["name"].as_str().unwrap().to_string(),
                o["summary"].as_str().unwrap().to_string(),
            ))
        })
        .collect()
}

fn import(catalogs: &[&Path]) -> (Run, serde_json::Value, String) {
    let dir = tempfile::tempdir().unwrap();
    let reports = dir.path().join("reports");
    let mut args = vec![
        "mutants".to_string(),
        "--import".into(),
        recorded().display().to_string(),
        "--reports".into(),
        reports.display().to_string(),
    ];
    for c in catalogs {
        args.push("--catalog".into());
        args.push(c.display().to_string());
    }
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let run = harness(&dir.path().join("state"), &args);
    let json = std::fs::read_to_string(reports.join("mutants/mutants.json"))
        .unwrap_or_else(|e| panic!("no mutants.json ({e}); {run:?}"));
    let md = std::fs::read_to_string(reports.join("mutants/mutants.md")).unwrap();
    (run, serde_json::from_str(&json).unwrap(), md)
}

#[test]
fn recorded_outcomes_import_with_timeouts_unviable_and_missed_diffs() {
    let named = repo().join("fixtures/workspaces/mutants-sample/mutations/named.toml");
    let (run, r, md) = import(&[&named]);
    // `halvings` has a timed-out mutant and no named mutation: UNGUARDED, exit 1.
    run.expect_code(1);
    assert_eq!(r["schema"], "harness-mutants/1");
    assert_eq!(r["cargo_mutants_version"], "27.1.0");

    let want = recorded_summaries();
    assert_eq!(want.len(), 22);
    let word = |s: &str| match s {
        "CaughtMutant" => "CAUGHT",
        "MissedMutant" => "MISSED",
        "Timeout" => "TIMEOUT",
        "Unviable" => "UNVIABLE",
        other => panic!("unexpected summary {other}"),
    };
    let got: BTreeMap<String, String> = r["mutants"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            (
                m["name"].as_str().unwrap().to_string(),
                m["status"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    let want_words: BTreeMap<String, String> = want
        .iter()
        .map(|(k, v)| (k.clone(), word(v).to_string()))
        .collect();
    assert_eq!(got, want_words);
    assert_eq!(
        (&r["caught"], &r["missed"], &r["timeout"], &r["unviable"]),
        (
            &serde_json::json!(15),
            &serde_json::json!(5),
            &serde_json::json!(1),
            &serde_json::json!(1)
        )
    );
    assert_eq!(
        got["src/lib.rs:11:13: replace > with >= in halvings"],
        "TIMEOUT"
    );
    assert_eq!(
        got["src/lib.rs:24:5: replace meters -> Meters with Default::default()"],
        "UNVIABLE"
    );

    // Grouped by function, the named gap guarding is_odd.
    let f: BTreeMap<String, &serde_json::Value> = r["functions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| (g["function"].as_str().unwrap().to_string(), g))
        .collect();
    assert_eq!(
        f.keys().collect::<Vec<_>>(),
        ["add", "halvings", "is_odd", "meters"]
    );
    assert_eq!(f["is_odd"]["missed"], 5);
    assert_eq!(
        f["is_odd"]["named"],
        serde_json::json!(["named:odd-is-even"])
    );
    assert_eq!(f["is_odd"]["unguarded"], false);
    assert_eq!(f["halvings"]["timeout"], 1);
    assert_eq!(f["halvings"]["unguarded"], true);
    assert_eq!(f["meters"]["unviable"], 1);
    assert_eq!(f["meters"]["unguarded"], false);
    assert_eq!(r["unguarded"], serde_json::json!(["src/lib.rs: halvings"]));

    // Missed mutants carry their diffs; others do not.
    for m in r["mutants"].as_array().unwrap() {
        if m["status"] == "MISSED" {
            let d = m["diff"].as_str().unwrap();
            assert!(d.contains("-    n % 2 != 0"), "{d}");
        } else {
            assert!(m["diff"].is_null(), "{m}");
        }
    }
    assert!(md.contains("```diff") && md.contains("UNGUARDED"), "{md}");
    insta::assert_snapshot!("recorded_mutants_markdown", md);
}

#[test]
fn without_a_named_battery_every_function_with_a_missed_mutant_is_unguarded() {
    let (run, r, _) = import(&[]);
    run.expect_code(1);
    assert_eq!(
        r["unguarded"],
        serde_json::json!(["src/lib.rs: halvings", "src/lib.rs: is_odd"])
    );
}

#[test]
fn malformed_outcomes_are_refused_naming_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("mutants.out");
    std::fs::create_dir_all(&out).unwrap();
    std::fs::write(out.join("outcomes.json"), "{\"outcomes\": 3}").unwrap();
    let run = harness(
        &dir.path().join("state"),
        &["mutants", "--import", out.to_str().unwrap()],
    );
    run.expect_code(2);
    run.stderr_has("outcomes.json: not a cargo-mutants outcomes file");
}

/// Needs the pinned cargo-mutants (`scripts/install-cargo-mutants`); run with `--ignored`.
#[test]
#[ignore = "needs cargo-mutants 27.1.0: run scripts/install-cargo-mutants, then --ignored"]
fn via_harness_gives_the_verdicts_cargo_mutants_gave() {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    common::mutants_sample(&ws);
    let run = via_harness_on_sample(dir.path(), &[]);
    assert!(
        !run.stderr.contains("cargo-mutants 27.1.0 is required"),
        "cargo-mutants is missing: run scripts/install-cargo-mutants\n{}",
        run.stderr
    );
    // The recording has missed mutants: exit 1, and no catalog words for them.
    run.expect_code(1);
    assert!(!run.stdout.contains("UNMET"), "{}", run.stdout);
    let r: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(ws.join("reports/named-generated/battery.json")).unwrap(),
    )
    .unwrap();
    let harness_word = |v: &str| match v {
        "KILLED" => "CaughtMutant",
        // No listed test reaches it (reach-guided selection): cargo-mutants, which runs
        // every test, misses it.
        "SURVIVED" | "NO_COVERAGE" => "MissedMutant",
        "TIMEOUT" => "Timeout",
        "UNVIABLE" => "Unviable",
        other => panic!("{other}"),
    };
    let got: BTreeMap<String, String> = r["mutations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            (
                m["title"].as_str().unwrap().to_string(),
                harness_word(m["verdict"].as_str().unwrap()).to_string(),
            )
        })
        .collect();
    assert_eq!(got, recorded_summaries());
    assert_eq!(r["kill_matrix"]["tests"].as_array().unwrap().len(), 3);
}

/// A cargo-mutants of another version than the pinned one is refused before any battery,
/// naming both versions, although its listing runs beside the version check and succeeds:
/// its mutants are not used, and the tree gets no generated catalog or report.
#[test]
fn via_harness_refuses_a_cargo_mutants_of_another_version() {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    common::mutants_sample(&ws);
    // cargo finds `cargo-mutants` in `$CARGO_HOME/bin` first: a fake one that says it is
    // 26.0.0 and lists one mutant.
    let home = dir.path().join("cargo-home");
    std::fs::create_dir_all(home.join("bin")).unwrap();
    let fake = home.join("bin/cargo-mutants");
    std::fs::write(
        &fake,
        "#!/bin/sh\ncase \"$*\" in\n*--version*) echo 'cargo-mutants 26.0.0' ;;\n\
         *) echo '[{\"package\":\"mutants-sample\",\"file\":\"src/lib.rs\",\"function\":null,\"span\":{\"start\":{\"line\":1,\"column\":1},\"end\":{\"line\":1,\"column\":2}},\"replacement\":\"()\",\"genre\":\"FnValue\",\"name\":\"x\"}]' ;;\nesac\n",
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).unwrap();
    let run = via_harness_on_sample(dir.path(), &[("CARGO_HOME", &home)]);
    run.expect_code(2);
    assert!(
        run.stderr
            .contains("cargo-mutants 27.1.0 is required (cargo-mutants 26.0.0)"),
        "{}",
        run.stderr
    );
    assert!(!ws.join("reports").exists(), "{}", run.stderr);
    assert!(
        !ws.join("target/harness/cargo-mutants")
            .join("named-generated.toml")
            .exists()
    );
}
