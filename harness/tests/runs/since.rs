//! `--since REV` on a private copy of the sample workspace committed to git: only the
//! mutations whose occurrences meet the working tree's diff against the merge base run, and
//! a revision that does not fit the tree is refused.

use crate::common;

use common::Sandbox;

/// The sample catalog without its TIMEOUT mutation (which alone costs the timeout floor).
fn short_catalog(sb: &Sandbox) -> String {
    let text = sb.read("mutations/sample.toml");
    let cut = text.find("[[mutation]]\nid = \"countdown-hangs\"").unwrap();
    sb.write("mutations/short.toml", &text[..cut]);
    sb.ws.join("mutations/short.toml").display().to_string()
}

fn commit_all(ws: &std::path::Path) {
    let repo = git2::Repository::open(ws).unwrap();
    let mut index = repo.index().unwrap();
    index
        .add_all(["*"], git2::IndexAddOption::DEFAULT, None)
        .unwrap();
    index.write().unwrap();
    let tree = repo.find_tree(index.write_tree().unwrap()).unwrap();
    let sig = git2::Signature::now("test", "test@example.invalid").unwrap();
    repo.commit(Some("HEAD"), &sig, &sig, "sample", &tree, &[])
        .unwrap();
}

fn ids(dir: &std::path::Path) -> Vec<String> {
    let r: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("sample/battery.json")).unwrap())
            .unwrap();
    assert_eq!(r["since"], "HEAD");
    assert!(r["unfalsified"].is_null());
    r["mutations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn only_mutations_meeting_the_diff_run_and_a_foreign_revision_is_refused() {
    let sb = Sandbox::new();
    let catalog = short_catalog(&sb);
    commit_all(&sb.ws);
    let out = sb.dir.path();
    let run = |name: &str| {
        let dir = out.join(name);
        let r = sb.run(&[
            "battery",
            &catalog,
            "--since",
            "HEAD",
            "--reports",
            dir.to_str().unwrap(),
        ]);
        (r, dir)
    };

    // Nothing changed: nothing runs.
    let (clean, d0) = run("clean");
    assert_eq!(clean.code, Some(0), "{clean:?}");
    assert!(ids(&d0).is_empty());

    // An uncommitted edit of the line `clamp-upper-inverted` mutates, and of a line of
    // src/lib.rs between `max-takes-min` (line 14) and `even-negative-odd` (line 19) that
    // no mutation covers: only the first runs.
    sb.edit("src/crlf.rs", "if x > hi {", "if x > hi  {");
    sb.edit(
        "src/lib.rs",
        "/// Whether `n` is even",
        "/// Whether `n` is even,",
    );
    let (edited, d1) = run("edited");
    assert!(
        edited.code == Some(0) || edited.code == Some(1),
        "{edited:?}"
    );
    assert_eq!(ids(&d1), ["clamp-upper-inverted"]);

    // The line of `max-takes-min` edited too: it joins.
    sb.edit(
        "src/lib.rs",
        "xs.iter().copied().max()",
        "xs.iter().copied().max() ",
    );
    let (more, d2) = run("more");
    assert!(more.code == Some(0) || more.code == Some(1), "{more:?}");
    assert_eq!(ids(&d2), ["max-takes-min", "clamp-upper-inverted"]);

    // A revision the repository does not have is refused, naming it.
    sb.run(&["battery", &catalog, "--since", "no-such-branch"])
        .expect_code(2)
        .stderr_has("--since no-such-branch: no-such-branch does not name a commit");
}

fn report(dir: &std::path::Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(dir.join("sample/battery.json")).unwrap())
        .unwrap()
}

/// `(file, function)` of every UNGUARDED-IN-DIFF entry of a report.
fn unguarded(r: &serde_json::Value) -> Vec<(String, String)> {
    r["unguarded_in_diff"]
        .as_array()
        .expect("unguarded_in_diff is a list with --since")
        .iter()
        .map(|f| {
            (
                f["file"].as_str().unwrap().to_string(),
                f["function"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

#[test]
fn changed_functions_no_mutation_touches_are_unguarded_in_diff() {
    let sb = Sandbox::new();
    let catalog = short_catalog(&sb);
    commit_all(&sb.ws);
    let out = sb.dir.path();
    let run = |name: &str, extra: &[&str]| {
        let dir = out.join(name);
        let mut args = vec![
            "battery",
            &catalog,
            "--since",
            "HEAD",
            "--reports",
            dir.to_str().unwrap(),
        ];
        args.extend_from_slice(extra);
        (sb.run(&args), dir)
    };

    // Comments, doc comments and whitespace only, in `countdown` (no mutation of the short
    // catalog touches it): its tokens are unchanged, nothing is listed, and
    // --require-guarded passes.
    sb.edit(
        "src/lib.rs",
        "/// Number of decrements",
        "/// The number of decrements",
    );
    sb.edit(
        "src/lib.rs",
        "    let mut steps = 0;\n",
        "    // counted below\n    let mut steps  =  0;\n",
    );
    let (comments, d0) = run("comments", &["--require-guarded"]);
    comments.expect_code(0);
    assert_eq!(unguarded(&report(&d0)), []);

    // A code change in `countdown` (unguarded), one in `max_of` (guarded by
    // `max-takes-min`), a new untracked module with a function and a `#[cfg(test)]`
    // module, a helper added to the integration tests, and a deleted function.
    sb.edit(
        "src/lib.rs",
        "let mut steps  =  0;",
        "let mut steps = 0u64;",
    );
    sb.edit(
        "src/lib.rs",
        "xs.iter().copied().max()",
        "xs.iter().copied().max().map(|m| m + 0)",
    );
    sb.edit("src/lib.rs", "mod crlf;\n", "mod crlf;\nmod extra;\n");
    sb.write(
        "src/extra.rs",
        "//! New.\n\n/// Three times `x`.\npub fn triple(x: i64) -> i64 {\n    3 * x\n}\n\n#[cfg(test)]\nmod tests {\n    fn helper() -> i64 {\n        super::triple(1)\n    }\n}\n",
    );
    let tests = sb.read("tests/contract.rs");
    sb.write(
        "tests/contract.rs",
        &format!("{tests}\nfn unused_helper() -> u8 {{\n    1\n}}\n"),
    );
    sb.edit(
        "src/unused.rs",
        "pub fn never_compiled() -> u32 {\n    7\n}\n",
        "",
    );
    let (listed, d1) = run("listed", &[]);
    listed
        .expect_code(0)
        .stdout_has("UNGUARDED-IN-DIFF  src/lib.rs: countdown (changed lines 23,25-26)")
        .stdout_has("UNGUARDED-IN-DIFF  src/extra.rs: triple (changed lines 3-6)");
    let r = report(&d1);
    assert_eq!(
        unguarded(&r),
        [
            ("src/extra.rs".to_string(), "triple".to_string()),
            ("src/lib.rs".to_string(), "countdown".to_string()),
        ]
    );
    let countdown = &r["unguarded_in_diff"][1];
    assert_eq!(countdown["line"], 23);
    assert_eq!(countdown["end_line"], 32);
    assert_eq!(
        countdown["changed_lines"],
        serde_json::json!([[23, 23], [25, 26]])
    );
    assert_eq!(ids(&d1), ["max-takes-min"]);
    let md = std::fs::read_to_string(d1.join("sample/battery.md")).unwrap();
    assert!(
        md.contains("| `src/lib.rs` | `countdown` | 23-32 | 23,25-26 |"),
        "{md}"
    );
    let section = &md[md.find("### Unguarded").unwrap()..md.find("<details>").unwrap()];
    insta::assert_snapshot!("since_unguarded_markdown", section);

    // The same with --require-guarded: weak.
    let (required, d2) = run("required", &["--require-guarded"]);
    required.expect_code(1);
    let r = report(&d2);
    assert_eq!(r["exit_code"], 1);
    assert_eq!(r["require_guarded"], true);
    assert_eq!(r["summary"]["unmet"], 0);
}

#[test]
fn gate_require_guarded_fails_on_an_unguarded_change() {
    let sb = Sandbox::new();
    let catalog = short_catalog(&sb);
    commit_all(&sb.ws);
    sb.edit("src/lib.rs", "let mut steps = 0;", "let mut steps = 0u64;");
    let dir = sb.dir.path().join("gate");
    let run = sb.run(&[
        "gate",
        &catalog,
        "--since",
        "HEAD",
        "--require-guarded",
        "--reports",
        dir.to_str().unwrap(),
    ]);
    run.expect_code(1).stdout_has("gate: WEAK (exit 1)");
    let j: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("gate/gate.json")).unwrap())
            .unwrap();
    let reasons = j["reasons"].to_string();
    assert!(
        reasons.contains("1 changed functions UNGUARDED-IN-DIFF (--require-guarded)"),
        "{reasons}"
    );
    let md = std::fs::read_to_string(dir.join("gate/gate.md")).unwrap();
    assert!(md.contains("#### Unguarded in diff"), "{md}");
}

#[test]
fn a_conflicted_index_is_refused() {
    let sb = Sandbox::new();
    let catalog = short_catalog(&sb);
    commit_all(&sb.ws);
    let git = |args: &[&str]| {
        let o = std::process::Command::new("git")
            .args(["-c", "user.name=t", "-c", "user.email=t@example.invalid"])
            .args(args)
            .current_dir(&sb.ws)
            .output()
            .unwrap();
        assert!(o.status.code().is_some(), "{o:?}");
    };
    git(&["checkout", "-q", "-b", "other"]);
    sb.edit("src/lib.rs", "a + b", "b + a");
    git(&["commit", "-q", "-am", "other"]);
    git(&["checkout", "-q", "-"]);
    sb.edit("src/lib.rs", "a + b", "a + b + 0");
    git(&["commit", "-q", "-am", "here"]);
    git(&["merge", "-q", "other"]);
    sb.run(&["battery", &catalog, "--since", "other"])
        .expect_code(2)
        .stderr_has("--since other: the index holds unmerged entries")
        .stderr_has("src/lib.rs");
}

#[test]
fn mutants_since_runs_the_generated_mutants_inside_the_diff() {
    let sb = Sandbox::new();
    let catalog = short_catalog(&sb);
    commit_all(&sb.ws);
    // A code change in `countdown` (which a listed test checks) and a new function no test
    // calls.
    sb.edit(
        "src/lib.rs",
        "        steps += 1;\n",
        "        steps += 1u64;\n",
    );
    let lib = sb.read("src/lib.rs");
    sb.write(
        "src/lib.rs",
        &format!(
            "{lib}\n/// Twice `x`, untested.\npub fn double(x: i64) -> i64 {{\n    x * 2\n}}\n"
        ),
    );
    let dir = sb.dir.path().join("mutants");
    let run = sb.run(&[
        "battery",
        &catalog,
        "--since",
        "HEAD",
        "--mutants",
        "--reports",
        dir.to_str().unwrap(),
    ]);
    let r = report(&dir);
    let g = &r["generated_in_diff"];
    let mutants = g["mutants"].as_array().unwrap();

    // cargo-mutants' own list on the same diff file (the patch the harness wrote from git2).
    let patch = dir.join("sample/since.diff");
    assert_eq!(g["patch"], patch.to_str().unwrap());
    let own = std::process::Command::new("cargo")
        .args([
            "mutants",
            "--list",
            "--json",
            "--package",
            "sample",
            "--dir",
        ])
        .arg(&sb.ws)
        .arg("--in-diff")
        .arg(&patch)
        .env_remove("CARGO_TARGET_DIR")
        .output()
        .unwrap();
    assert!(own.status.success(), "{own:?}");
    let own: serde_json::Value = serde_json::from_slice(&own.stdout).unwrap();
    let own_names: Vec<&str> = own
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["name"].as_str().unwrap())
        .collect();
    let ran: Vec<&str> = mutants
        .iter()
        .map(|m| m["name"].as_str().unwrap())
        .collect();
    assert_eq!(ran, own_names);
    assert_eq!(g["listed"], own_names.len());
    // Only mutants of the two changed functions, and some of each.
    let functions: std::collections::BTreeSet<&str> = mutants
        .iter()
        .map(|m| m["function"].as_str().unwrap())
        .collect();
    assert_eq!(
        functions.into_iter().collect::<Vec<_>>(),
        ["countdown", "double"]
    );
    // The whole file holds more mutants than the diff: the others did not run.
    let all = std::process::Command::new("cargo")
        .args([
            "mutants",
            "--list",
            "--json",
            "--package",
            "sample",
            "--dir",
        ])
        .arg(&sb.ws)
        .env_remove("CARGO_TARGET_DIR")
        .output()
        .unwrap();
    let all: serde_json::Value = serde_json::from_slice(&all.stdout).unwrap();
    assert!(all.as_array().unwrap().len() > own_names.len());

    // countdown's mutants are caught by the test that checks it (or hang its loop: TIMEOUT;
    // cargo-mutants takes every mutant of a function the diff touches); double's are
    // missed, which makes the battery weak.
    for m in mutants {
        let status = m["status"].as_str().unwrap();
        match m["function"].as_str().unwrap() {
            "countdown" => {
                assert!(["CAUGHT", "UNVIABLE", "TIMEOUT"].contains(&status), "{m}");
                if status == "CAUGHT" {
                    assert_eq!(
                        m["killed_by"],
                        serde_json::json!(["contract::countdown_counts_steps"]),
                        "{m}"
                    );
                }
            }
            _ => assert!(status == "MISSED" || status == "UNVIABLE", "{m}"),
        }
    }
    assert!(g["missed"].as_u64().unwrap() > 0, "{g}");
    run.expect_code(1).stdout_has("GENERATED  MISSED");
    assert_eq!(r["exit_code"], 1);
    assert_eq!(r["summary"]["unmet"], 0);
    let md = std::fs::read_to_string(dir.join("sample/battery.md")).unwrap();
    assert!(md.contains("### Generated mutants inside the diff"), "{md}");
    assert!(dir.join("sample-generated/battery.json").is_file());
    assert!(dir.join("sample-generated/mutants.json").is_file());
}
