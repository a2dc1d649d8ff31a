//! `harness battery --mode switch` on a private copy of the sample workspace: the same
//! verdicts, killers and kill matrix as rebuild mode, the fallback for mutations outside a
//! function body, and the user's tree untouched during and after the run.

use crate::common;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use common::{Sandbox, as_full_run, redact};

/// Per mutation: (verdict, expectation, sorted failing tests).
fn verdicts(r: &serde_json::Value) -> BTreeMap<String, (String, String, Vec<String>)> {
    r["mutations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            let killers = common::killers(m);
            (
                m["id"].as_str().unwrap().to_string(),
                (
                    m["verdict"].as_str().unwrap().to_string(),
                    m["expectation"].as_str().unwrap().to_string(),
                    killers,
                ),
            )
        })
        .collect()
}

/// A battery report with its timings (and the sandbox's path) replaced by placeholders.
fn without_timings(sb: &Sandbox, r: &serde_json::Value) -> serde_json::Value {
    let mut r = as_full_run(r);
    redact(&mut r, &sb.ws.canonicalize().unwrap());
    r
}

fn plan(sb: &Sandbox, name: &str) -> BTreeMap<String, serde_json::Value> {
    let p = sb.ws.join(format!("reports/{name}/switch.json"));
    let v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap();
    assert_eq!(v["schema"], "harness-switch/2");
    v["plan"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| (e["id"].as_str().unwrap().to_string(), e.clone()))
        .collect()
}

#[test]
fn switch_mode_equals_rebuild_mode_and_never_touches_the_tree() {
    let sb = Sandbox::new();
    let before = sb.tree();

    let rebuild = sb.battery(&[]);
    rebuild.expect_code(1);
    let r1 = sb.report_json();
    assert_eq!(r1["status"], "complete");

    // Switch mode, watching the user's tree while it runs.
    let (mut child, _rx) = sb.spawn(&["battery", sb.catalog.to_str().unwrap(), "--mode", "switch"]);
    let start = Instant::now();
    let mut looks = 0;
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        assert!(
            start.elapsed() < Duration::from_secs(600),
            "switch run did not finish"
        );
        assert_eq!(
            sb.tree(),
            before,
            "the user's tree changed during the switch run"
        );
        looks += 1;
        std::thread::sleep(Duration::from_millis(100));
    };
    assert!(looks > 5, "the tree was looked at only {looks} times");
    assert_eq!(status.code(), Some(1));
    assert_eq!(
        sb.tree(),
        before,
        "the user's tree changed after the switch run"
    );
    let r2 = sb.report_json();
    assert_eq!(r2["status"], "complete");

    // The whole report is the same, timings aside.
    assert_eq!(without_timings(&sb, &r1), without_timings(&sb, &r2));
    // The same verdicts, expectations, killers, kill matrix and UNFALSIFIED tests.
    let (v1, v2) = (verdicts(&r1), verdicts(&r2));
    assert_eq!(v1.len(), 6);
    assert_eq!(v1, v2);
    assert_eq!(r1["kill_matrix"], as_full_run(&r2["kill_matrix"]));
    assert_eq!(r1["unfalsified"], r2["unfalsified"]);
    assert_eq!(r1["summary"], r2["summary"]);
    // Rebuild mode's own answers, so that equality is not equality of two empty reports.
    assert_eq!(v2["add-subtracts"].0, "KILLED");
    assert_eq!(v2["countdown-hangs"].0, "TIMEOUT");
    assert_eq!(v2["add-does-not-compile"].0, "UNVIABLE");
    assert_eq!(v2["even-negative-odd"].0, "SURVIVED");
    let err = r2["mutations"][4]["compiler_error"].as_str().unwrap();
    assert!(err.contains("mismatched types"), "{err}");

    // Every viable mutation went behind the switch; the one that does not compile was
    // left out by its own compile check.
    let p = plan(&sb, "sample");
    for id in [
        "add-subtracts",
        "max-takes-min",
        "clamp-upper-inverted",
        "even-negative-odd",
        "countdown-hangs",
    ] {
        assert_eq!(p[id]["mode"], "switched", "{id}: {}", p[id]);
    }
    // The unviable one was found by the switched build itself: rustc's error lies inside
    // its mutated body; the switched build was repeated without it, once.
    assert_eq!(p["add-does-not-compile"]["mode"], "unviable");
    let how = p["add-does-not-compile"]["reason"].as_str().unwrap();
    assert!(how.contains("switched build"), "{how}");
    assert_eq!(p["add-subtracts"]["function"], "add");
    assert_eq!(p["clamp-upper-inverted"]["function"], "clamp");
    // Switch-mode mutants cost no build of their own.
    for m in r2["mutations"].as_array().unwrap() {
        assert_eq!(m["build_seconds"].as_f64().unwrap(), 0.0, "{}", m["id"]);
    }
    // The forced-fail control reached switched code in the tests that call it.
    let sw: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(sb.ws.join("reports/sample/switch.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(sw["switched_builds"], 2, "{sw}");
    assert_eq!(sw["checked_alone_because"], serde_json::Value::Null);
    // Its error is shown where the mutated file has it (`a + b` is at line 9, column 5 of
    // src/lib.rs), as rebuild mode shows it, not where the switched copy had it.
    let at = |r: &serde_json::Value| {
        let e = r["mutations"][4]["compiler_error"]
            .as_str()
            .unwrap()
            .to_string();
        e.lines()
            .find(|l| l.trim_start().starts_with("-->"))
            .unwrap_or_default()
            .trim()
            .to_string()
    };
    assert_eq!(at(&r2), "--> src/lib.rs:9:5");
    assert_eq!(at(&r1), at(&r2));
    let failed: Vec<&str> = sw["forced_fail_failed"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    assert!(failed.contains(&"contract::adds_two_numbers"), "{failed:?}");
    assert!(failed.contains(&"contract::clamp_bounds"), "{failed:?}");
    // The scratch copy is back to the original sources after the run.
    let scratch = sb.ws.join("target/harness/sample/switch/tree/src/lib.rs");
    assert_eq!(
        std::fs::read(scratch).unwrap(),
        before[std::path::Path::new("src/lib.rs")]
    );
}

#[test]
fn a_mutation_outside_a_function_body_falls_back_to_rebuild_mode() {
    let sb = Sandbox::new();
    let base = sb.read("mutations/sample.toml");
    let header = &base[..base.find("[[mutation]]").unwrap()];
    let catalog = format!(
        "{}{}",
        header.replace("name = \"sample\"", "name = \"fallback\""),
        r#"
[[mutation]]
id = "add-subtracts"
title = "add subtracts instead"
role = "defect"
file = "src/lib.rs"
find = "a + b"
replace = "a - b"
killed_by = ["contract::adds_two_numbers"]
rationale = "Inside a body: switched."

[[mutation]]
id = "add-signature-and-body"
title = "a find text spanning the signature and the body"
role = "defect"
file = "src/lib.rs"
find = "b: i64) -> i64 {\n    a + b"
replace = "b: i64) -> i64 {\n    a * b"
killed_by = ["contract::adds_two_numbers"]
rationale = "What it changes lies inside the body: switched."

[[mutation]]
id = "add-signature-changed"
title = "a change that starts in the signature"
role = "defect"
file = "src/lib.rs"
find = "a: i64, b: i64) -> i64 {\n    a + b"
replace = "b: i64, a: i64) -> i64 {\n    a - b"
killed_by = ["contract::adds_two_numbers"]
rationale = "Not inside one body: falls back to a rebuild."

[[mutation]]
id = "doc-comment"
title = "an attribute outside every function"
role = "gap"
file = "src/lib.rs"
find = "/// Sum of two integers.\n"
replace = "/// Sum of two integers.\n#[inline]\n"
rationale = "Outside any function body: falls back and survives."
"#
    );
    sb.write("mutations/fallback.toml", &catalog);
    let before = sb.tree();
    let run = sb.run(&[
        "battery",
        sb.ws.join("mutations/fallback.toml").to_str().unwrap(),
        "--mode",
        "switch",
    ]);
    run.expect_code(1);
    assert_eq!(sb.tree(), before);
    let r: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(sb.ws.join("reports/fallback/battery.json")).unwrap(),
    )
    .unwrap();
    let v = verdicts(&r);
    let kill = vec!["contract::adds_two_numbers".to_string()];
    assert_eq!(
        v["add-subtracts"],
        ("KILLED".into(), "MET".into(), kill.clone())
    );
    assert_eq!(
        v["add-signature-and-body"],
        ("KILLED".into(), "MET".into(), kill.clone())
    );
    assert_eq!(
        v["add-signature-changed"],
        ("KILLED".into(), "MET".into(), kill)
    );
    assert_eq!(v["doc-comment"], ("SURVIVED".into(), "MET".into(), vec![]));
    let p = plan(&sb, "fallback");
    // A find text may take in the signature (cargo-mutants widens its texts to whole
    // lines): what decides is where the changed bytes lie.
    for id in ["add-subtracts", "add-signature-and-body"] {
        assert_eq!(p[id]["mode"], "switched", "{id}: {}", p[id]);
        assert_eq!(p[id]["function"], "add", "{id}");
    }
    for id in ["add-signature-changed", "doc-comment"] {
        assert_eq!(p[id]["mode"], "rebuild", "{id}");
        let why = p[id]["reason"].as_str().unwrap();
        assert!(why.contains("outside any function body"), "{id}: {why}");
    }
    // The fallback mutations paid a build; the switched ones did not.
    let m = r["mutations"].as_array().unwrap();
    assert_eq!(m[0]["build_seconds"].as_f64().unwrap(), 0.0);
    assert_eq!(m[1]["build_seconds"].as_f64().unwrap(), 0.0);
    assert!(m[2]["build_seconds"].as_f64().unwrap() > 0.0);
    run.stderr_has("add-signature-changed: rebuild mode (");
}

/// A sandbox whose sample package depends on `tinydep`, a path dependency outside the
/// workspace (so not a member: built the same way for the user's tree and the scratch copy).
fn with_outside_dependency() -> Sandbox {
    let sb = Sandbox::new();
    let dep = sb.dir.path().join("vendor/tinydep");
    std::fs::create_dir_all(dep.join("src")).unwrap();
    std::fs::write(
        dep.join("Cargo.toml"),
        "[package]\nname = \"tinydep\"\nversion = \"0.1.0\"\nedition = \"2021\"\n",
    )
    .unwrap();
    std::fs::write(
        dep.join("src/lib.rs"),
        "//! A dependency from outside the workspace.\n\n/// One.\npub fn one() -> i64 {\n    1\n}\n",
    )
    .unwrap();
    sb.edit(
        "Cargo.toml",
        "[dependencies]",
        &format!(
            "[dependencies]\ntinydep = {{ path = {:?} }}",
            dep.display().to_string()
        ),
    );
    sb.edit(
        "src/lib.rs",
        "    a + b\n",
        "    a + b + tinydep::one() - 1\n",
    );
    // The lock file is part of the tree: write it before the tree is fingerprinted.
    let out = std::process::Command::new(env!("CARGO"))
        .args(["generate-lockfile", "--offline", "--manifest-path"])
        .arg(sb.ws.join("Cargo.toml"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    sb
}

type Stats = BTreeMap<std::path::PathBuf, (u64, std::time::SystemTime)>;

/// The paths whose length or modification time differ between two stat trees.
fn changed(a: &Stats, b: &Stats) -> Vec<String> {
    let mut out: Vec<String> = a
        .iter()
        .filter(|(p, s)| b.get(*p) != Some(s))
        .map(|(p, _)| p.display().to_string())
        .collect();
    out.extend(
        b.keys()
            .filter(|p| !a.contains_key(*p))
            .map(|p| format!("{} (created)", p.display())),
    );
    out
}

#[test]
fn switch_mode_reuses_dependency_builds_and_never_writes_the_users_build_products() {
    let sb = with_outside_dependency();
    let only = ["--only", "add-subtracts", "--only", "clamp-upper-inverted"];
    // cargo's default incremental setting on every side (a CI's `CARGO_INCREMENTAL=0`
    // would win over the harness's and hide what the battery chooses).
    let battery = |args: &[&str]| {
        let mut all = vec!["battery", sb.catalog.to_str().unwrap()];
        all.extend_from_slice(args);
        let out = sb
            .cmd()
            .args(all)
            .env_remove("CARGO_INCREMENTAL")
            .output()
            .unwrap();
        common::Run::from(out)
    };
    // Rebuild mode fills the catalog's target directory (the user's build products); the
    // user's own `cargo test` then brings them up to date with the original code.
    battery(&[&only[..], &["--mode", "rebuild"]].concat()).expect_code(0);
    let target = sb.ws.join("target/harness/sample");
    let users_cargo_test = || {
        let out = std::process::Command::new(env!("CARGO"))
            .env_remove("CARGO_INCREMENTAL")
            .args(["test", "--offline", "--test", "contract", "--manifest-path"])
            .arg(sb.ws.join("Cargo.toml"))
            .arg("--target-dir")
            .arg(&target)
            .args(["--", "--exact", "contract::adds_two_numbers"])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    users_cargo_test();
    let users = harness::battery::execute::scratch::stat_tree(&target.join("debug")).unwrap();
    assert!(
        users
            .keys()
            .any(|p| p.to_string_lossy().contains("libtinydep-")),
        "the rebuild run built tinydep"
    );

    let mut args = only.to_vec();
    args.extend(["--mode", "switch"]);
    let run = battery(&args);
    run.expect_code(0);
    let r = sb.report_json();
    let v = verdicts(&r);
    assert_eq!(v["add-subtracts"].0, "KILLED");
    assert_eq!(v["clamp-upper-inverted"].0, "KILLED");

    // Not one of the user's build products was written, created or removed.
    let after = harness::battery::execute::scratch::stat_tree(&target.join("debug")).unwrap();
    assert_eq!(changed(&users, &after), Vec::<String>::new());
    // tinydep was seeded from them and found fresh: reused, not rebuilt; the member was
    // built by the scratch copy itself.
    let sw: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(sb.ws.join("reports/sample/switch.json")).unwrap(),
    )
    .unwrap();
    let fresh: Vec<&str> = sw["fresh_packages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    assert_eq!(fresh, ["tinydep"], "{sw}");
    assert!(sw["seed"]["linked"].as_u64().unwrap() >= 1, "{sw}");
    assert!(sw["seed"]["members_skipped"].as_u64().unwrap() >= 1, "{sw}");
    let names: Vec<String> = std::fs::read_dir(target.join("switch/target/debug/deps"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(
        names.iter().any(|n| n.starts_with("libsample-")),
        "the scratch copy built its own sample: {names:?}"
    );
    // A battery builds its member incrementally (the next run after an edit recompiles
    // only what changed): rustc's session for `sample` is in the scratch target.
    let sessions: Vec<String> = std::fs::read_dir(target.join("switch/target/debug/incremental"))
        .map(|d| {
            d.map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    assert!(
        sessions.iter().any(|n| n.starts_with("sample-")),
        "no incremental session for the member: {sessions:?}"
    );

    // The user's own cargo finds its build of the original code fresh (rewrites nothing)
    // and green.
    users_cargo_test();
    let again = harness::battery::execute::scratch::stat_tree(&target.join("debug")).unwrap();
    assert_eq!(changed(&users, &again), Vec::<String>::new());
}

#[test]
fn a_rebuild_fallback_in_a_clean_checkout_compiles_no_dependency_a_second_time() {
    // No run before: the catalog's target directory is empty, so the switched build
    // compiles tinydep (a dependency, not a member) itself. The fallback's own target
    // directory is seeded from the switched build's: tinydep is found fresh there, and only
    // the member is built again.
    let sb = with_outside_dependency();
    let base = sb.read("mutations/sample.toml");
    let header = &base[..base.find("[[mutation]]").unwrap()];
    sb.write(
        "mutations/clean.toml",
        &format!(
            "{}{}",
            header.replace("name = \"sample\"", "name = \"clean\""),
            r#"
[[mutation]]
id = "add-subtracts"
title = "add subtracts instead"
role = "defect"
file = "src/lib.rs"
find = "a + b"
replace = "a - b"
killed_by = ["contract::adds_two_numbers"]
rationale = "Inside a body: switched."

[[mutation]]
id = "doc-comment"
title = "an attribute outside every function"
role = "gap"
file = "src/lib.rs"
find = "/// Sum of two integers.\n"
replace = "/// Sum of two integers.\n#[inline]\n"
rationale = "Outside any function body: falls back and survives."
"#
        ),
    );
    let target = sb.ws.join("target/harness/clean");
    assert!(!target.exists());
    let run = sb.run(&[
        "battery",
        sb.ws.join("mutations/clean.toml").to_str().unwrap(),
        "--mode",
        "switch",
    ]);
    // Six tests no mutation kills: weak.
    run.expect_code(1);
    let p = plan(&sb, "clean");
    assert_eq!(p["add-subtracts"]["mode"], "switched");
    assert_eq!(p["doc-comment"]["mode"], "rebuild");
    let sw: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(sb.ws.join("reports/clean/switch.json")).unwrap(),
    )
    .unwrap();
    // The switched build compiled tinydep (nothing to seed it from)...
    assert!(
        !sw["fresh_packages"]
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p == "tinydep"),
        "{sw}"
    );
    // ... and the fallback found it fresh, seeded from the switched build's target.
    assert_eq!(
        sw["fallback_dependencies_built"],
        serde_json::json!([]),
        "{sw}"
    );
    assert!(sw["fallback_seed"]["linked"].as_u64().unwrap() >= 1, "{sw}");
    let names: Vec<String> = std::fs::read_dir(target.join("switch/fallback-target/debug/deps"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(
        names.iter().any(|n| n.starts_with("libtinydep-")),
        "{names:?}"
    );
}

#[test]
fn under_a_denied_unused_lint_each_mutation_is_checked_on_its_own() {
    // `b` unused is an error here: `a + 0` does not compile on its own, although it would
    // compile behind the switch (where the original body still uses `b`).
    let sb = Sandbox::new();
    sb.edit(
        "src/lib.rs",
        "mod crlf;",
        "#![deny(unused_variables)]\n\nmod crlf;",
    );
    let base = sb.read("mutations/sample.toml");
    let header = &base[..base.find("[[mutation]]").unwrap()];
    sb.write(
        "mutations/lints.toml",
        &format!(
            "{}{}",
            header.replace("name = \"sample\"", "name = \"lints\""),
            r#"
[[mutation]]
id = "add-subtracts"
title = "add subtracts instead"
role = "defect"
file = "src/lib.rs"
find = "a + b"
replace = "a - b"
killed_by = ["contract::adds_two_numbers"]
rationale = "Compiles either way."

[[mutation]]
id = "add-drops-b"
title = "add ignores b"
role = "defect"
file = "src/lib.rs"
find = "a + b"
replace = "a + 0"
killed_by = ["contract::adds_two_numbers"]
rationale = "Leaves b unused: UNVIABLE under deny(unused_variables)."
"#
        ),
    );
    let catalog = sb.ws.join("mutations/lints.toml");
    let catalog = catalog.to_str().unwrap();
    let reports = |name: &str| -> serde_json::Value {
        serde_json::from_str(
            &std::fs::read_to_string(sb.ws.join(format!("reports/lints/{name}"))).unwrap(),
        )
        .unwrap()
    };
    sb.run(&["battery", catalog]).expect_code(1);
    let r1 = reports("battery.json");
    let run = sb.run(&["battery", catalog, "--mode", "switch"]);
    run.expect_code(1);
    run.stderr_has("checking each switched mutation on its own");
    let r2 = reports("battery.json");
    let (v1, v2) = (verdicts(&r1), verdicts(&r2));
    assert_eq!(v1["add-drops-b"].0, "UNVIABLE");
    assert_eq!(v1, v2);
    assert_eq!(v2["add-subtracts"].0, "KILLED");
    assert_eq!(r1["kill_matrix"], as_full_run(&r2["kill_matrix"]));
    let sw = reports("switch.json");
    let why = sw["checked_alone_because"].as_str().unwrap();
    assert!(why.ends_with("src/lib.rs:3"), "{why}");
    let p = plan(&sb, "lints");
    assert_eq!(p["add-subtracts"]["mode"], "switched");
    assert_eq!(p["add-drops-b"]["mode"], "unviable");
    assert_eq!(p["add-drops-b"]["reason"], "does not compile on its own");
}

/// The other sample catalog (`fixtures/workspaces/mutants-sample`, catalog `named`) in both
/// modes: its one mutation lies in a function no listed test calls, so the forced-fail
/// control fails no listed test and switch mode cannot prove its switch is reached. It then
/// rebuilds that mutation on its own, as rebuild mode does, and both see the gap survive:
/// the two reports are the same, timings aside.
#[test]
fn the_mutants_sample_catalog_in_both_modes() {
    let sb = Sandbox::new();
    let ws = sb.dir.path().join("ms");
    common::mutants_sample(&ws);
    git2::Repository::init(&ws).unwrap();
    // The lock file is part of the tree: write it before the tree is fingerprinted.
    let out = std::process::Command::new(env!("CARGO"))
        .args(["generate-lockfile", "--offline", "--manifest-path"])
        .arg(ws.join("Cargo.toml"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let catalog = ws.join("mutations/named.toml");
    let read = |name: &str| -> serde_json::Value {
        let text = std::fs::read_to_string(ws.join("reports/named").join(name)).unwrap();
        serde_json::from_str(&text).unwrap()
    };
    let report = || {
        let mut v = read("battery.json");
        redact(&mut v, &ws.canonicalize().unwrap());
        v
    };
    sb.run(&["battery", catalog.to_str().unwrap()])
        .expect_code(1);
    let r1 = report();
    sb.run(&["battery", catalog.to_str().unwrap(), "--mode", "switch"])
        .expect_code(1)
        .stderr_has("the forced-fail control failed no listed test");
    let r2 = report();
    // The whole report is the same, timings and the mode that ran aside.
    assert_eq!(r1["mode"]["mode"], "rebuild");
    assert_eq!(r2["mode"]["mode"], "switch");
    let without_mode = |r: &serde_json::Value| {
        let mut r = r.clone();
        r.as_object_mut().unwrap().remove("mode");
        r
    };
    assert_eq!(without_mode(&r1), without_mode(&r2));
    // Rebuild mode's own answer, so that equality is not equality of two empty reports.
    assert_eq!(r1["status"], "complete");
    assert_eq!(r1["mutations"][0]["verdict"], "SURVIVED");
    assert_eq!(r1["mutations"][0]["expectation"], "MET");
    // Switch mode did switch the mutation, found no listed test failing under the
    // forced-fail control, and so rebuilt it on its own.
    let sw = read("switch.json");
    assert_eq!(sw["forced_fail_failed"], serde_json::json!([]));
    assert_eq!(
        sw["forced_fail_passed"],
        serde_json::json!(["adds", "converts", "halves"])
    );
    let entry = &sw["plan"][0];
    assert_eq!(entry["id"], "odd-is-even");
    assert_eq!(entry["mode"], "rebuild", "{entry}");
    assert_eq!(entry["function"], "is_odd");
    assert_eq!(entry["reason"], harness::battery::execute::switch::UNPROVEN);
    // It cost a build of its own, as a switched mutant never does.
    let built = read("battery.json")["mutations"][0]["build_seconds"]
        .as_f64()
        .unwrap();
    assert!(built > 0.0, "{built}");
}

/// What `scripts/bench-llamacpp` leaves in this repository: an ignored folder holding a
/// link to a folder. Switch mode copies the file set the fingerprint covers, so the ignored
/// folder is not copied; an untracked link to a folder and a dangling link (both in the set)
/// are copied as links.
#[test]
fn switch_mode_copies_links_and_leaves_ignored_folders_alone() {
    let sb = Sandbox::new();
    let venv = sb.ws.join(".venv-bench");
    std::fs::create_dir_all(venv.join("lib/python3/site-packages")).unwrap();
    std::fs::write(venv.join("lib/python3/site-packages/x.py"), "x = 1\n").unwrap();
    std::os::unix::fs::symlink("lib", venv.join("lib64")).unwrap();
    let ignore = sb.read(".gitignore");
    sb.write(".gitignore", &format!("{ignore}/.venv*\n"));
    std::os::unix::fs::symlink("src", sb.ws.join("src-link")).unwrap();
    std::os::unix::fs::symlink("nowhere", sb.ws.join("dangling")).unwrap();
    let lib = sb.read("src/lib.rs");
    let run = sb.battery(&["--only", "add-subtracts", "--mode", "switch"]);
    run.expect_code(0);
    assert_eq!(sb.read("src/lib.rs"), lib);
    let scratch = sb.ws.join("target/harness/sample/switch/tree");
    assert!(!scratch.join(".venv-bench").exists());
    assert_eq!(
        std::fs::read_link(scratch.join("src-link")).unwrap(),
        std::path::PathBuf::from("src")
    );
    assert_eq!(
        std::fs::read_link(scratch.join("dangling")).unwrap(),
        std::path::PathBuf::from("nowhere")
    );
}

/// An `async fn` is switched: a mutant that keeps the future `Send` is one test run of the
/// switched build, and a mutant whose future is not `Send` where the code requires it (an
/// `Rc` held across an `.await`) breaks the switched build outside every mutated body, so
/// each mutation is compiled on its own and that one is UNVIABLE: the same verdicts, killers
/// and kill matrix as rebuild mode.
#[test]
fn async_functions_are_switched_and_a_mutant_that_is_not_send_is_unviable() {
    let sb = Sandbox::new();
    sb.write(
        "src/later.rs",
        r#"//! An async function whose future must be `Send`.

/// A future that is ready at its second poll.
struct Yield(bool);

impl std::future::Future for Yield {
    type Output = ();
    fn poll(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<()> {
        if self.0 {
            return std::task::Poll::Ready(());
        }
        self.0 = true;
        cx.waker().wake_by_ref();
        std::task::Poll::Pending
    }
}

/// `a + b`, after one suspension.
pub async fn add_later(a: i64, b: i64) -> i64 {
    let first = a;
    Yield(false).await;
    first + b
}

fn must_be_send<F: std::future::Future + Send>(f: F) -> F {
    f
}

/// Runs `add_later` to completion on this thread.
pub fn add_later_now(a: i64, b: i64) -> i64 {
    let mut fut = std::pin::pin!(must_be_send(add_later(a, b)));
    let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
    loop {
        if let std::task::Poll::Ready(v) = std::future::Future::poll(fut.as_mut(), &mut cx) {
            return v;
        }
    }
}
"#,
    );
    sb.edit(
        "src/lib.rs",
        "mod crlf;",
        "mod crlf;\nmod later;\n\npub use later::add_later_now;",
    );
    sb.write(
        "tests/later.rs",
        "mod later {\n    #[test]\n    fn adds_after_a_suspension() {\n        \
         assert_eq!(sample::add_later_now(2, 3), 5);\n    }\n}\n",
    );
    let base = sb.read("mutations/sample.toml");
    let header = &base[..base.find("[[mutation]]").unwrap()];
    let header = header
        .replace("name = \"sample\"", "name = \"later\"")
        .replace(
            "test_targets = [\"contract\"]",
            "test_targets = [\"later\"]",
        )
        .replace("select = \"contract::\"", "select = \"later::\"");
    let tests_at = header.find("tests = [").unwrap();
    let tests_end = tests_at + header[tests_at..].find(']').unwrap() + 1;
    let header = format!(
        "{}tests = [\"later::adds_after_a_suspension\"]{}",
        &header[..tests_at],
        &header[tests_end..]
    );
    sb.write(
        "mutations/later.toml",
        &format!(
            "{header}{}",
            r#"
[[mutation]]
id = "later-subtracts"
title = "add_later subtracts"
role = "defect"
file = "src/later.rs"
find = "first + b"
replace = "first - b"
killed_by = ["later::adds_after_a_suspension"]
rationale = "The sum is the contract."

[[mutation]]
id = "later-holds-an-rc"
title = "add_later holds an Rc across its await"
role = "defect"
file = "src/later.rs"
find = "let first = a;"
replace = "let first = *std::rc::Rc::new(a); let _keep = std::rc::Rc::new(());"
killed_by = ["later::adds_after_a_suspension"]
rationale = "The future is no longer Send: UNVIABLE."
"#
        ),
    );
    let catalog = sb.ws.join("mutations/later.toml");
    let catalog = catalog.to_str().unwrap();
    let reports = |name: &str| -> serde_json::Value {
        serde_json::from_str(
            &std::fs::read_to_string(sb.ws.join(format!("reports/later/{name}"))).unwrap(),
        )
        .unwrap()
    };
    sb.run(&["battery", catalog]).expect_code(1);
    let r1 = reports("battery.json");
    let run = sb.run(&["battery", catalog, "--mode", "switch"]);
    run.expect_code(1);
    run.stderr_has("checking each switched mutation on its own");
    let r2 = reports("battery.json");
    let (v1, v2) = (verdicts(&r1), verdicts(&r2));
    assert_eq!(v1["later-holds-an-rc"].0, "UNVIABLE");
    assert_eq!(v1["later-subtracts"].0, "KILLED");
    assert_eq!(v1, v2);
    assert_eq!(r1["kill_matrix"], as_full_run(&r2["kill_matrix"]));
    let p = plan(&sb, "later");
    assert_eq!(p["later-subtracts"]["mode"], "switched");
    assert_eq!(p["later-holds-an-rc"]["mode"], "unviable");
}

/// A catalog of the sample with a function no listed test calls (`uncalled`) beside `add`.
fn with_uncalled(sb: &Sandbox, extra_tests: &[&str]) -> String {
    sb.edit(
        "src/lib.rs",
        "mod crlf;",
        "mod crlf;\n\n/// Called by no listed test.\npub fn uncalled(x: i64) -> i64 {\n    x * 3\n}",
    );
    let base = sb.read("mutations/sample.toml");
    let header = &base[..base.find("[[mutation]]").unwrap()];
    let mut header = header.replace("name = \"sample\"", "name = \"reach\"");
    for t in extra_tests {
        header = header.replace(
            "    \"contract::adds_two_numbers\",\n",
            &format!("    \"contract::adds_two_numbers\",\n    \"{t}\",\n"),
        );
    }
    sb.write(
        "mutations/reach.toml",
        &format!(
            "{header}{}",
            r#"
[[mutation]]
id = "add-subtracts"
title = "add subtracts instead"
role = "defect"
file = "src/lib.rs"
find = "a + b"
replace = "a - b"
killed_by = ["contract::adds_two_numbers"]
rationale = "The sum is the contract."

[[mutation]]
id = "uncalled-defect"
title = "uncalled triples no more"
role = "defect"
file = "src/lib.rs"
find = "x * 3"
replace = "x * 4"
killed_by = ["contract::adds_two_numbers"]
rationale = "No listed test calls it: NO_COVERAGE, UNMET."

[[mutation]]
id = "uncalled-gap"
title = "uncalled doubles"
role = "gap"
file = "src/lib.rs"
find = "x * 3"
replace = "x * 2"
rationale = "A known gap: no listed test calls it."
"#
        ),
    );
    sb.ws
        .join("mutations/reach.toml")
        .to_string_lossy()
        .into_owned()
}

/// Reach-guided selection: each switched mutant runs only the listed tests that execute its
/// function, and gives the verdicts and kill matrix of a run of every listed test
/// (`--all-tests`) and of rebuild mode; a mutation no listed test reaches is NO_COVERAGE
/// (UNMET for a defect, MET for a gap) in both switch runs, and nothing runs for it when
/// selection is on.
#[test]
fn reach_selected_runs_give_the_full_runs_verdicts_and_uncalled_code_is_no_coverage() {
    let sb = Sandbox::new();
    let catalog = with_uncalled(&sb, &[]);
    let report = |name: &str| -> serde_json::Value {
        serde_json::from_str(
            &std::fs::read_to_string(sb.ws.join(format!("reports/reach/{name}"))).unwrap(),
        )
        .unwrap()
    };
    let selected = sb.run(&["battery", &catalog, "--mode", "switch"]);
    selected.expect_code(1);
    selected.stderr_has("reach run: 7 tests on their own");
    selected.stderr_has("2 of 3 switched mutations reached by no listed test");
    selected.stdout_has("NO_COVERAGE");
    let r_sel = report("battery.json");
    let stryker = report("mutation-report.json");
    let sw = report("switch.json");
    sb.run(&["battery", &catalog, "--mode", "switch", "--all-tests"])
        .expect_code(1);
    let r_all = report("battery.json");
    let sw_all = report("switch.json");
    sb.run(&["battery", &catalog]).expect_code(1);
    let r_reb = report("battery.json");

    let (v_sel, v_all, v_reb) = (verdicts(&r_sel), verdicts(&r_all), verdicts(&r_reb));
    assert_eq!(v_sel, v_all);
    assert_eq!(v_sel["add-subtracts"].0, "KILLED");
    assert_eq!(
        (
            v_sel["uncalled-defect"].0.as_str(),
            v_sel["uncalled-defect"].1.as_str()
        ),
        ("NO_COVERAGE", "UNMET")
    );
    assert_eq!(
        (
            v_sel["uncalled-gap"].0.as_str(),
            v_sel["uncalled-gap"].1.as_str()
        ),
        ("NO_COVERAGE", "MET")
    );
    // Rebuild mode cannot tell: the uncalled mutants survive there, the rest is the same.
    assert_eq!(v_reb["uncalled-defect"].0, "SURVIVED");
    assert_eq!(v_reb["uncalled-gap"].0, "SURVIVED");
    assert_eq!(v_reb["add-subtracts"], v_sel["add-subtracts"]);
    assert_eq!(as_full_run(&r_sel["kill_matrix"]), r_all["kill_matrix"]);
    assert_eq!(r_all["kill_matrix"], r_reb["kill_matrix"]);

    let by_id = |r: &serde_json::Value, id: &str| -> serde_json::Value {
        r["mutations"]
            .as_array()
            .unwrap()
            .iter()
            .find(|m| m["id"] == id)
            .unwrap()
            .clone()
    };
    let add = by_id(&r_sel, "add-subtracts");
    assert_eq!(
        add["reached_by"],
        serde_json::json!(["contract::adds_two_numbers"])
    );
    assert_eq!(add["outcomes"]["contract::adds_two_numbers"], "failed");
    assert_eq!(add["outcomes"]["contract::clamp_bounds"], "not_reached");
    // `--all-tests` runs them all, and still reports the reach.
    let add_all = by_id(&r_all, "add-subtracts");
    assert_eq!(add_all["outcomes"]["contract::clamp_bounds"], "passed");
    assert_eq!(add_all["reached_by"], add["reached_by"]);
    let un = by_id(&r_sel, "uncalled-defect");
    assert_eq!(un["reached_by"], serde_json::json!([]));
    assert!(
        un["outcomes"]
            .as_object()
            .unwrap()
            .values()
            .all(|o| o == "not_reached"),
        "nothing ran for it: {un}"
    );
    assert_eq!(un["test_seconds"], 0.0);
    assert_eq!(
        by_id(&r_reb, "uncalled-defect")["reached_by"],
        serde_json::Value::Null
    );
    assert_eq!(r_sel["summary"]["no_coverage"], 2);
    assert_eq!(sw["reach"]["selection"], true);
    assert_eq!(sw_all["reach"]["selection"], false);
    assert_eq!(
        sw["reach"]["reached_by"]["add-subtracts"],
        add["reached_by"]
    );

    let mutants: Vec<&serde_json::Value> = stryker["files"]
        .as_object()
        .unwrap()
        .values()
        .flat_map(|f| f["mutants"].as_array().unwrap())
        .collect();
    let st = |id: &str| mutants.iter().find(|m| m["id"] == id).unwrap();
    assert_eq!(st("uncalled-defect")["status"], "NoCoverage");
    assert_eq!(st("uncalled-defect")["coveredBy"], serde_json::json!([]));
    assert_eq!(st("add-subtracts")["coveredBy"], add["reached_by"]);
}

/// A listed test that passes only after another test ran (state shared in the process)
/// fails when run on its own: the reach run then cannot be trusted, no mutant's tests are
/// cut down, and the switch report says why.
#[test]
fn a_test_that_needs_another_to_run_first_turns_selection_off() {
    let sb = Sandbox::new();
    sb.edit(
        "tests/contract.rs",
        "mod contract {",
        "mod contract {\n    static SET_BY_ANOTHER: std::sync::atomic::AtomicBool =\n        std::sync::atomic::AtomicBool::new(false);\n\n    #[test]\n    fn a_sets_a_flag() {\n        SET_BY_ANOTHER.store(true, std::sync::atomic::Ordering::SeqCst);\n    }\n\n    #[test]\n    fn b_needs_the_flag() {\n        for _ in 0..100 {\n            if SET_BY_ANOTHER.load(std::sync::atomic::Ordering::SeqCst) {\n                return;\n            }\n            std::thread::sleep(std::time::Duration::from_millis(20));\n        }\n        panic!(\"no other test set the flag\");\n    }\n",
    );
    let catalog = with_uncalled(
        &sb,
        &["contract::a_sets_a_flag", "contract::b_needs_the_flag"],
    );
    let run = sb.run(&["battery", &catalog, "--mode", "switch"]);
    run.expect_code(1);
    run.stderr_has("reach run: not used, every mutant runs every listed test: contract::b_needs_the_flag did not pass when run on its own");
    let r: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(sb.ws.join("reports/reach/battery.json")).unwrap(),
    )
    .unwrap();
    let sw: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(sb.ws.join("reports/reach/switch.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(sw["reach"]["selection"], false);
    for m in r["mutations"].as_array().unwrap() {
        assert_eq!(m["reached_by"], serde_json::Value::Null, "{}", m["id"]);
        assert!(
            m["outcomes"]
                .as_object()
                .unwrap()
                .values()
                .all(|o| o != "not_reached"),
            "{m}"
        );
    }
    let v = verdicts(&r);
    assert_eq!(v["uncalled-defect"].0, "SURVIVED");
}

/// A run stopped during a build of the scratch copy leaves the build mark in the scratch
/// target directory (rustc and the linker may have left half-written artifacts there, and a
/// later build can then fail to link with no fault of the tree): the next run removes that
/// target directory and builds cold, and says so. A run whose builds all ended leaves no
/// mark and keeps its warm target directory.
#[test]
fn a_build_the_run_was_stopped_during_makes_the_next_run_start_cold() {
    let sb = Sandbox::new();
    let catalog = sb.catalog.to_str().unwrap().to_string();
    sb.run(&["battery", &catalog, "--mode", "switch"])
        .expect_code(1);
    let target = sb.ws.join("target/harness/sample/switch/target");
    let mark = target.join("harness-build-in-progress");
    assert!(target.join("debug").is_dir(), "no scratch build products");
    assert!(!mark.exists(), "a finished run left its build mark");

    // A warm run keeps what is there.
    let kept = target.join("debug/kept-by-a-warm-run");
    std::fs::write(&kept, "x").unwrap();
    let warm = sb.run(&["battery", &catalog, "--mode", "switch"]);
    warm.expect_code(1);
    assert!(!warm.stderr.contains("did not finish"), "{}", warm.stderr);
    assert!(
        kept.exists(),
        "a warm run removed the scratch target directory"
    );
    let sw = |sb: &Sandbox| -> serde_json::Value {
        serde_json::from_str(&sb.read("reports/sample/switch.json")).unwrap()
    };
    assert_eq!(sw(&sb)["cold_after_interrupted_build"], false);

    // As a run killed during its switched build leaves it.
    std::fs::write(&mark, "12345\n").unwrap();
    let cold = sb.run(&["battery", &catalog, "--mode", "switch"]);
    cold.expect_code(1)
        .stderr_has("the last build of the scratch copy did not finish");
    assert!(!kept.exists(), "the half-built target directory was kept");
    assert!(!mark.exists(), "the cold run left the build mark");
    assert_eq!(sw(&sb)["cold_after_interrupted_build"], true);
    // The same verdicts as the warm run.
    let r: serde_json::Value =
        serde_json::from_str(&sb.read("reports/sample/battery.json")).unwrap();
    assert_eq!(verdicts(&r)["add-subtracts"].0, "KILLED");
}

/// Functions returning `impl Trait` are switched: a mutant whose value keeps the original's
/// type runs behind the switch; one whose value has a type of its own (a closure of its own)
/// makes the switched build fail inside that function's switch, goes back to a rebuild, and
/// gets rebuild mode's verdict; one that does not compile is UNVIABLE, as in rebuild mode.
/// Both modes give the same verdicts.
#[test]
fn functions_returning_impl_trait_are_switched_and_a_type_of_its_own_is_rebuilt() {
    let sb = Sandbox::new();
    sb.write(
        "src/opaque.rs",
        r#"//! Iterators behind `impl Trait`.

/// The digits.
pub fn digits() -> impl Iterator<Item = u32> {
    0..10
}

/// The even numbers below `n`.
pub fn evens(n: u32) -> impl Iterator<Item = u32> {
    (0..n).filter(|x| x % 2 == 0)
}

/// Seven, to be shown.
pub fn seven() -> impl std::fmt::Display {
    7u32
}
"#,
    );
    sb.edit(
        "src/lib.rs",
        "mod crlf;",
        "mod crlf;\nmod opaque;\n\npub use opaque::{digits, evens, seven};",
    );
    sb.write(
        "tests/opaque.rs",
        "mod opaque {\n    #[test]\n    fn ten_digits() {\n        \
         assert_eq!(sample::digits().collect::<Vec<_>>(), (0..10).collect::<Vec<_>>());\n    }\n\n    \
         #[test]\n    fn evens_below_seven() {\n        \
         assert_eq!(sample::evens(7).collect::<Vec<_>>(), [0, 2, 4, 6]);\n    }\n\n    \
         #[test]\n    fn seven_shows_7() {\n        \
         assert_eq!(sample::seven().to_string(), \"7\");\n    }\n}\n",
    );
    let base = sb.read("mutations/sample.toml");
    let header = &base[..base.find("[[mutation]]").unwrap()];
    let header = header
        .replace("name = \"sample\"", "name = \"opaque\"")
        .replace(
            "test_targets = [\"contract\"]",
            "test_targets = [\"opaque\"]",
        )
        .replace("select = \"contract::\"", "select = \"opaque::\"");
    let tests_at = header.find("tests = [").unwrap();
    let tests_end = tests_at + header[tests_at..].find(']').unwrap() + 1;
    let header = format!(
        "{}tests = [\"opaque::ten_digits\", \"opaque::evens_below_seven\", \"opaque::seven_shows_7\"]{}",
        &header[..tests_at],
        &header[tests_end..]
    );
    sb.write(
        "mutations/opaque.toml",
        &format!(
            "{header}{}",
            r#"
[[mutation]]
id = "digits-from-one"
title = "digits start at one"
role = "defect"
file = "src/opaque.rs"
find = "    0..10"
replace = "    1..10"
killed_by = ["opaque::ten_digits"]
rationale = "Same type (a range): switched."

[[mutation]]
id = "evens-odd"
title = "evens keeps the odd numbers"
role = "defect"
file = "src/opaque.rs"
find = "x % 2 == 0)"
replace = "x % 2 == 1)"
killed_by = ["opaque::evens_below_seven"]
rationale = "A closure of its own: its own type, rebuilt."

[[mutation]]
id = "seven-plus-a-string"
title = "seven plus a string"
role = "defect"
file = "src/opaque.rs"
find = "    7u32"
replace = "    7u32 + \"x\""
killed_by = ["opaque::seven_shows_7"]
rationale = "Does not compile: UNVIABLE (its function goes back to a rebuild, which finds it)."
"#
        ),
    );
    let catalog = sb.ws.join("mutations/opaque.toml");
    let catalog = catalog.to_str().unwrap();
    let reports = |name: &str| -> serde_json::Value {
        serde_json::from_str(&sb.read(&format!("reports/opaque/{name}"))).unwrap()
    };
    sb.run(&["battery", catalog]).expect_code(1);
    let r1 = reports("battery.json");
    let run = sb.run(&["battery", catalog, "--mode", "switch"]);
    run.expect_code(1);
    run.stderr_has("functions returning `impl Trait` go back to rebuilds");
    let r2 = reports("battery.json");
    let (v1, v2) = (verdicts(&r1), verdicts(&r2));
    assert_eq!(v1, v2);
    assert_eq!(v2["digits-from-one"].0, "KILLED");
    assert_eq!(v2["evens-odd"].0, "KILLED");
    assert_eq!(v2["seven-plus-a-string"].0, "UNVIABLE");
    assert_eq!(r1["kill_matrix"], as_full_run(&r2["kill_matrix"]));
    let p = plan(&sb, "opaque");
    assert_eq!(
        p["digits-from-one"]["mode"], "switched",
        "{}",
        p["digits-from-one"]
    );
    assert_eq!(p["evens-odd"]["mode"], "rebuild", "{}", p["evens-odd"]);
    let why = p["evens-odd"]["reason"].as_str().unwrap();
    assert!(why.contains("returns `impl Trait`"), "{why}");
    assert_eq!(
        p["seven-plus-a-string"]["mode"], "rebuild",
        "{}",
        p["seven-plus-a-string"]
    );
}

/// switch.json of catalog `name`.
fn switch_info(sb: &Sandbox, name: &str) -> serde_json::Value {
    let p = sb.ws.join(format!("reports/{name}/switch.json"));
    serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap()
}

#[test]
fn an_unchanged_switched_build_and_fallback_are_fresh_next_run_and_changed_bytes_are_rebuilt() {
    let sb = Sandbox::new();
    let base = sb.read("mutations/sample.toml");
    let header =
        base[..base.find("[[mutation]]").unwrap()].replace("name = \"sample\"", "name = \"warm\"");
    let catalog = |switched: &str, fallback: &str| {
        format!(
            r#"{header}
[[mutation]]
id = "add-changed"
title = "add's body changed"
role = "defect"
file = "src/lib.rs"
find = "a + b"
replace = "{switched}"
killed_by = ["contract::adds_two_numbers"]
rationale = "Inside a body: switched."

[[mutation]]
id = "add-signature-changed"
title = "a change that starts in the signature"
role = "defect"
file = "src/lib.rs"
find = "a: i64, b: i64) -> i64 {{\n    a + b"
replace = "{fallback}"
killed_by = ["contract::adds_two_numbers"]
rationale = "Not inside one body: a rebuild fallback."
"#
        )
    };
    let run = |text: &str| {
        sb.write("mutations/warm.toml", text);
        sb.run(&[
            "battery",
            sb.ws.join("mutations/warm.toml").to_str().unwrap(),
            "--mode",
            "switch",
        ]);
        let r = sb.report_of("warm");
        (verdicts(&r), switch_info(&sb, "warm"))
    };
    let fresh = |sw: &serde_json::Value| {
        sw["fresh_packages"]
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p == "sample")
    };
    let biting = catalog("a - b", "b: i64, a: i64) -> i64 {\\n    a - b");
    let (v1, sw1) = run(&biting);
    assert_eq!(v1["add-changed"].0, "KILLED");
    assert_eq!(v1["add-signature-changed"].0, "KILLED");
    assert_eq!(sw1["reused_switched_files"], 0, "{sw1}");
    assert!(!fresh(&sw1), "{sw1}");

    // The same catalog on the same tree: the switched build finds the package fresh, and
    // so does the fallback in its own target directory; the verdicts are the same.
    let (v2, sw2) = run(&biting);
    assert_eq!(v2, v1);
    assert_eq!(sw2["reused_switched_files"], 1, "{sw2}");
    assert!(fresh(&sw2), "{sw2}");
    assert_eq!(
        sw2["reused_fallbacks"],
        serde_json::json!(["add-signature-changed"])
    );

    // Other bytes behind the switch and in the fallback (both mutants now equivalent): both
    // are compiled again, and nothing of the last run's code is run.
    let (v3, sw3) = run(&catalog("b + a", "b: i64, a: i64) -> i64 {\\n    a + b"));
    assert_eq!(v3["add-changed"].0, "SURVIVED", "{sw3}");
    assert_eq!(v3["add-signature-changed"].0, "SURVIVED", "{sw3}");
    assert_eq!(sw3["reused_switched_files"], 0, "{sw3}");
    assert!(!fresh(&sw3), "{sw3}");
    assert_eq!(sw3["reused_fallbacks"], serde_json::json!([]));
}

#[test]
fn with_no_mode_a_handful_rebuilds_a_larger_selection_switches_and_the_verdicts_agree() {
    let sb = Sandbox::new();
    // No `--mode` (straight through `cmd`, which adds none).
    let auto = |only: &str| {
        let out = sb
            .cmd()
            .args(["battery", sb.catalog.to_str().unwrap(), "--only", only])
            .output()
            .unwrap();
        let run = common::Run::from(out);
        run.expect_code(0);
        (run, sb.report_json())
    };
    let switch_json = sb.ws.join("reports/sample/switch.json");
    // One mutation: switch mode's fixed runs cost more than one rebuild.
    let (run, r) = auto("add-subtracts");
    run.stderr_has("mode rebuild (chosen by size: 1 of 1 selected mutation(s) the switch can hold, 7 listed test(s); below max(2, 7/10) = 2");
    assert_eq!(r["mode"]["mode"], "rebuild");
    assert_eq!(r["mode"]["by"], "size");
    assert!(!switch_json.exists());
    assert!(!sb.ws.join("target/harness/sample/switch").exists());
    let md = sb.read("reports/sample/battery.md");
    assert!(
        md.contains("Mode: rebuild (chosen by size: 1 of 1 "),
        "{md}"
    );
    let one = verdicts(&r);

    // Three: switch mode.
    let three = "add-subtracts,max-takes-min,clamp-upper-inverted";
    let (run, r) = auto(three);
    run.stderr_has("mode switch (chosen by size: 3 of 3 selected mutation(s) the switch can hold");
    assert_eq!(r["mode"]["mode"], "switch");
    assert!(switch_json.exists());
    let switched = verdicts(&r);
    assert_eq!(switched["add-subtracts"], one["add-subtracts"]);

    // `--mode` still forces one: the same three rebuilt, the same verdicts.
    let forced = sb.battery(&["--only", three, "--mode", "rebuild"]);
    forced.expect_code(0);
    let r = sb.report_json();
    assert_eq!(
        r["mode"],
        serde_json::json!({"mode": "rebuild", "by": "option", "reason": "--mode rebuild"})
    );
    assert_eq!(verdicts(&r), switched);
}

/// A binary whose integration tests start it (`fixtures/workspaces/spawns`: one test through
/// `CARGO_BIN_EXE_spawns`, one through `target/debug/spawns`), the mutations in code only
/// the binary runs. In switch mode the tests' own processes run no switched function; the
/// binary records them as their child. So both tests run from their executables, without
/// `cargo test`, in the reach run and for every mutant; the binary, started by the test,
/// runs the mutant the test's process was given (each defect is killed by the test that
/// starts the binary on it, the gap survives); and what the binary reached counts for the
/// test that started it. Each run of the binary by a test is logged (`SPAWNS_LOG`) with the
/// mutant selected and the test's parent process, which is not cargo for a mutant's run.
#[test]
fn tests_that_start_the_binary_run_directly_and_its_reach_counts_for_them() {
    let sb = Sandbox::of("spawns", "mutations/spawns.toml");
    let log = sb.dir.path().join("spawns.log");
    let out = sb
        .cmd()
        .args(["battery", sb.catalog.to_str().unwrap(), "--mode", "switch"])
        .env("SPAWNS_LOG", &log)
        .output()
        .unwrap();
    common::Run::from(out).expect_code(0);
    let v = verdicts(&sb.report_of("spawns"));
    let want = |verdict: &str, killers: &[&str], expectation: &str| {
        (
            verdict.to_string(),
            expectation.to_string(),
            killers.iter().map(|k| k.to_string()).collect::<Vec<_>>(),
        )
    };
    assert_eq!(v["shout-lowers"], want("KILLED", &["shouts"], "MET"));
    assert_eq!(v["count-one-more"], want("KILLED", &["counts"], "MET"));
    assert_eq!(v["usage-exit-code"], want("SURVIVED", &[], "MET"));

    let sw: serde_json::Value =
        serde_json::from_str(&sb.read("reports/spawns/switch.json")).unwrap();
    let reach = &sw["reach"];
    for e in sw["plan"].as_array().unwrap() {
        assert_eq!(e["mode"], "switched", "{e}");
    }
    assert_eq!(reach["selection"], true, "{reach}");
    // The binary's reach is its test's: `main` is started by both tests.
    assert_eq!(
        reach["reached_by"],
        serde_json::json!({
            "shout-lowers": ["shouts"],
            "count-one-more": ["counts"],
            "usage-exit-code": ["shouts", "counts"],
        }),
        "{reach}"
    );
    assert_eq!(reach["direct_tests"], 2, "{reach}");
    assert!(reach.get("tests_not_direct").is_none(), "{reach}");
    assert_eq!(reach["started_directly"], 2, "{reach}");

    // Every run of a test under a mutant started the binary from a process the harness
    // started itself, not cargo.
    let log = std::fs::read_to_string(&log).unwrap();
    let mutant_runs: Vec<(&str, &str, &str)> = log
        .lines()
        .map(|l| {
            let f: Vec<&str> = l.split(' ').collect();
            (f[0], f[1], f[2])
        })
        .filter(|(m, _, _)| *m != "-" && !m.contains("forced_fail"))
        .collect();
    let tests: std::collections::BTreeSet<&str> = mutant_runs.iter().map(|r| r.2).collect();
    assert_eq!(tests, ["counts", "shouts"].into(), "{log}");
    for (m, parent, t) in &mutant_runs {
        assert_eq!(
            *parent, "harness",
            "{t} under {m} was not started by the harness:\n{log}"
        );
    }
}
