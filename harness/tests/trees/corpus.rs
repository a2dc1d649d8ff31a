//! The harness on other people's workspaces: trees shaped as library crates are (doc tests,
//! binaries, several packages, no Cargo.lock, a feature-gated file), from cargo-mutants' own
//! testdata (fixtures/cargo-mutants/testdata, kept unchanged) and a generated workspace
//! (fixtures/workspaces/doctests), in both modes; and `mutants --via-harness` against
//! cargo-mutants itself, mutant by mutant.

use crate::common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

use common::Sandbox;

const MODES: [&str; 2] = ["rebuild", "switch"];

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Copies `from` to `to`, naming every `Cargo_test.toml` `Cargo.toml`, as cargo-mutants'
/// own tests do with their testdata trees (so that the trees are no Cargo packages inside
/// cargo-mutants' repository).
fn copy_testdata(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let name = e.file_name();
        let dst = if name == "Cargo_test.toml" {
            to.join("Cargo.toml")
        } else {
            to.join(&name)
        };
        if e.file_type().unwrap().is_dir() {
            copy_testdata(&e.path(), &dst);
        } else {
            std::fs::copy(e.path(), &dst).unwrap();
        }
    }
}

/// A git-initialised copy of cargo-mutants' testdata tree `name`, with the catalog
/// `fixtures/cargo-mutants/catalogs/<name>.toml` in its `mutations/` folder.
fn testdata(name: &str) -> Sandbox {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    copy_testdata(
        &repo().join("fixtures/cargo-mutants/testdata").join(name),
        &ws,
    );
    git2::Repository::init(&ws).unwrap();
    let catalog = ws.join("mutations").join(format!("{name}.toml"));
    std::fs::create_dir_all(catalog.parent().unwrap()).unwrap();
    std::fs::copy(
        repo().join(format!("fixtures/cargo-mutants/catalogs/{name}.toml")),
        &catalog,
    )
    .unwrap();
    Sandbox {
        state: dir.path().join("state"),
        dir,
        ws,
        catalog,
    }
}

/// Each mutation's id and verdict.
fn verdicts(r: &serde_json::Value) -> BTreeMap<String, String> {
    r["mutations"]
        .as_array()
        .unwrap_or_else(|| panic!("no mutations in {r}"))
        .iter()
        .map(|m| {
            (
                m["id"].as_str().unwrap().to_string(),
                m["verdict"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

/// The verdicts of `fixtures/workspaces/doctests`' own catalog: every mutation KILLED.
fn doctests_all_killed() -> BTreeMap<String, String> {
    owned(&[
        ("is-left-sees-right", "KILLED"),
        ("is-right-sees-left", "KILLED"),
        ("left-drops-value", "KILLED"),
    ])
}

/// The doctests workspace's `switch.json` (switch mode's report of its battery).
fn doctests_switch_json(sb: &Sandbox) -> serde_json::Value {
    serde_json::from_str(
        &std::fs::read_to_string(sb.ws.join("reports/doctests/switch.json")).unwrap(),
    )
    .unwrap()
}

/// The doctests workspace with `code` (one line of Rust) run first in the example of
/// `is_left`, and the catalog giving its tests `DOC_FLAKY_MARKER` = the sandbox's file
/// `marker`, with `mutations` as its mutations (the catalog's own when `None`). Returns the
/// sandbox and the marker's path.
fn flaky_doc_sandbox(
    marker: &str,
    code: &str,
    mutations: Option<&str>,
) -> (Sandbox, std::path::PathBuf) {
    let sb = Sandbox::of("doctests", "mutations/doctests.toml");
    let marker = sb.dir.path().join(marker);
    sb.edit(
        "src/lib.rs",
        "    /// use doctests::Either;\n    /// assert!(Either::<u8, u8>::Left(1).is_left());\n",
        &format!("    /// use doctests::Either; {code}\n    /// assert!(Either::<u8, u8>::Left(1).is_left());\n"),
    );
    let cat = sb.read("mutations/doctests.toml");
    let at = cat.find("[[mutation]]").unwrap();
    let env = format!(
        "env = {{ DOC_FLAKY_MARKER = {:?} }}\n\n",
        marker.to_str().unwrap()
    );
    sb.write(
        "mutations/doctests.toml",
        &format!("{}{env}{}", &cat[..at], mutations.unwrap_or(&cat[at..])),
    );
    (sb, marker)
}

/// The refusal of a battery whose `is_left` doc test passed once, then failed.
const IS_LEFT_FLAKY: &str = "FLAKY: the two baseline runs disagree: src/lib.rs - Either<L,R>::is_left (line 18) (passed then failed)";

fn owned(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect()
}

/// Case 4: a tree without Cargo.lock (the norm for a library) gets one from the run's own
/// cargo; the run removes it at the end, so the tree is left as it was found, and the
/// verdicts stand in both modes.
#[test]
fn a_tree_without_a_cargo_lock_is_left_without_one_in_both_modes() {
    for mode in MODES {
        let sb = Sandbox::of("doctests", "mutations/api.toml");
        assert!(!sb.ws.join("Cargo.lock").exists());
        let before = sb.tree();
        let run = sb.battery(&["--mode", mode]);
        run.expect_code(0);
        let r = sb.report_of("api");
        assert_eq!(r["status"], "complete", "{mode}: {r}");
        assert_eq!(
            verdicts(&r),
            owned(&[("is-right-sees-left", "KILLED")]),
            "{mode}"
        );
        assert!(
            !sb.ws.join("Cargo.lock").exists(),
            "{mode}: the run's Cargo.lock was left behind"
        );
        assert_eq!(sb.tree(), before, "{mode}");
    }
}

/// A Cargo.lock the user made is the user's: never removed, never rewritten.
#[test]
fn a_cargo_lock_the_user_made_is_never_touched() {
    let sb = Sandbox::of("doctests", "mutations/api.toml");
    let out = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
        .args(["generate-lockfile", "--offline", "--manifest-path"])
        .arg(sb.ws.join("Cargo.toml"))
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let lock = std::fs::read(sb.ws.join("Cargo.lock")).unwrap();
    for mode in MODES {
        sb.battery(&["--mode", mode]).expect_code(0);
        assert_eq!(
            std::fs::read(sb.ws.join("Cargo.lock")).unwrap(),
            lock,
            "{mode}"
        );
    }
}

/// Case 1: doc tests are listed under rustdoc's names and run; a mutation only a doc test
/// kills is KILLED by it, in both modes (switch mode: the doc tests link the switched
/// library, and the switch variable reaches them).
#[test]
fn a_mutation_only_a_doc_test_kills_is_killed_in_both_modes() {
    for mode in MODES {
        let sb = Sandbox::of("doctests", "mutations/doctests.toml");
        let run = sb.battery(&["--mode", mode]);
        run.expect_code(0);
        let r = sb.report_of("doctests");
        assert_eq!(verdicts(&r), doctests_all_killed(), "{mode}");
        let left = r["mutations"]
            .as_array()
            .unwrap()
            .iter()
            .find(|m| m["id"] == "left-drops-value")
            .unwrap();
        assert_eq!(left["expectation"], "MET", "{mode}: {left}");
        let killers: Vec<&str> = left["failed_tests"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| f["name"].as_str().unwrap())
            .collect();
        assert_eq!(
            killers,
            ["src/lib.rs - Either<L,R>::left (line 34)"],
            "{mode}"
        );
        // The other doc test has a result under it, not a filtered-out name: in rebuild
        // mode it ran and passed; in switch mode the reach run found that it never calls
        // `left`, so it did not run (doc tests are split by reach like any other test).
        let other = if mode == "switch" {
            "not_reached"
        } else {
            "passed"
        };
        assert_eq!(
            left["outcomes"]["src/lib.rs - Either<L,R>::is_left (line 18)"], other,
            "{mode}"
        );
        if mode == "switch" {
            assert_eq!(
                left["reached_by"],
                serde_json::json!(["src/lib.rs - Either<L,R>::left (line 34)"]),
                "{mode}"
            );
        }
        assert_eq!(r["baseline"]["tests_in_targets"], 4, "{mode}");
    }
}

/// A doc test that catches the forced-fail control's panic passes it, though it reaches the
/// switched function: the reach run must still run it (its process recorded itself, one
/// more than the doc tests that failed), so the mutant it alone kills is KILLED by it, not
/// left to no test.
#[test]
fn a_doc_test_that_catches_the_forced_fail_panic_still_reaches_what_it_calls() {
    let sb = Sandbox::of("doctests", "mutations/doctests.toml");
    sb.edit(
        "src/lib.rs",
        "    /// assert_eq!(Either::<u8, u8>::Left(7).left(), Some(7));\n    /// assert_eq!(Either::<u8, u8>::Right(7).left(), None);\n",
        "    /// let got = std::panic::catch_unwind(|| Either::<u8, u8>::Left(7).left());\n    /// assert!(got.map_or(true, |v| v == Some(7)), \"assertion `left == right` failed\");\n",
    );
    let run = sb.battery(&["--mode", "switch"]);
    run.expect_code(0);
    let r = sb.report_of("doctests");
    assert_eq!(verdicts(&r), doctests_all_killed());
    let sw = doctests_switch_json(&sb);
    let left = "src/lib.rs - Either<L,R>::left (line 34)";
    assert!(
        sw["forced_fail_passed"]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t == left),
        "{}",
        sw["forced_fail_passed"]
    );
    assert_eq!(sw["reach"]["doc_tests_unreached"], 0, "{}", sw["reach"]);
    assert_eq!(
        sw["reach"]["reached_by"]["left-drops-value"],
        serde_json::json!([left]),
        "{}",
        sw["reach"]
    );
}

/// Switch mode's second baseline run leaves the doc tests out (each that a reach-selected
/// mutant runs has run alone, unmutated, in the reach run). A doc test that passes once and
/// then fails is still FLAKY: here it fails on its own in the reach run, so no reach is
/// used, every mutant would run it, and its second baseline runs before any mutant does.
#[test]
fn a_doc_test_left_out_of_the_second_baseline_is_still_flaky_when_a_mutant_would_run_it() {
    let (sb, marker) = flaky_doc_sandbox(
        "doc-flaky-marker",
        "if let Ok(m) = std::env::var(\"DOC_FLAKY_MARKER\") { if std::fs::metadata(&m).is_ok() { panic!(\"a second run fails\") } std::fs::write(&m, b\"seen\").unwrap(); }",
        None,
    );
    sb.battery(&["--mode", "switch", "-j", "2"])
        .expect_code(2)
        .stderr_has(IS_LEFT_FLAKY);
    assert!(marker.exists());
    let sw = doctests_switch_json(&sb);
    assert_eq!(sw["reach"]["selection"], false, "{}", sw["reach"]);
}

/// The same when reach is used but a rebuild fallback runs every listed test: a doc test
/// that reaches no switched function does not run alone, so its second baseline runs
/// before the fallback's run (here its third run fails).
#[test]
fn a_doc_test_left_out_of_the_second_baseline_is_still_flaky_under_a_rebuild_fallback() {
    let (sb, marker) = flaky_doc_sandbox(
        "doc-flaky-count",
        "if let Ok(m) = std::env::var(\"DOC_FLAKY_MARKER\") { let n = std::fs::read(&m).map_or(0, |b| b.len()); std::fs::write(&m, vec![b'x'; n + 1]).unwrap(); assert!(n < 2, \"a third run fails\"); }",
        Some(
            "[[mutation]]\nid = \"is-right-sees-left\"\ntitle = \"is_right answers for the left side\"\nrole = \"defect\"\nfile = \"src/lib.rs\"\nfind = \"matches!(self, Either::Right(_))\"\nreplace = \"matches!(self, Either::Left(_))\"\nkilled_by = [\"left_and_right_are_told_apart\", \"tests::is_right_sees_the_right_side\"]\nrationale = \"Switched.\"\n\n[[mutation]]\nid = \"not-eq\"\ntitle = \"Either is no longer Eq\"\nrole = \"gap\"\nfile = \"src/lib.rs\"\nfind = \"PartialEq, Eq)]\"\nreplace = \"PartialEq)]\"\nrationale = \"Outside every function body: a rebuild fallback.\"\n",
        ),
    );
    sb.battery(&["--mode", "switch", "-j", "2"])
        .expect_code(2)
        .stderr_has(IS_LEFT_FLAKY);
    let sw = doctests_switch_json(&sb);
    assert_eq!(sw["reach"]["selection"], true, "{}", sw["reach"]);
    assert_eq!(std::fs::read(&marker).unwrap().len(), 3);
}

/// The doc tests a switched mutant runs from their executables kept in the reach run are
/// timed and run again as such a mutant runs them, not through rustdoc: a mutant reached
/// by a doc test alone times out from one run of its kept executable (the reach run's
/// seconds are mostly rustdoc building it), and the second baseline a rebuild fallback
/// needs runs the kept executables. The verdicts are those of the catalog.
#[test]
fn kept_doc_tests_are_timed_and_run_again_from_their_executables_not_rustdoc() {
    let sb = Sandbox::of("doctests", "mutations/doctests.toml");
    let cat = sb.read("mutations/doctests.toml");
    sb.write(
        "mutations/doctests.toml",
        &format!(
            "{cat}\n[[mutation]]\nid = \"not-eq\"\ntitle = \"Either is no longer Eq\"\nrole = \"gap\"\nfile = \"src/lib.rs\"\nfind = \"PartialEq, Eq)]\"\nreplace = \"PartialEq)]\"\nrationale = \"Outside every function body: a rebuild fallback.\"\n"
        ),
    );
    sb.battery(&["--mode", "switch", "-j", "2"]).expect_code(0);
    let r = sb.report_of("doctests");
    let mut want = doctests_all_killed();
    want.insert("not-eq".into(), "SURVIVED".into());
    assert_eq!(verdicts(&r), want);
    let sw = doctests_switch_json(&sb);
    let (left, is_left) = (
        "src/lib.rs - Either<L,R>::left (line 34)",
        "src/lib.rs - Either<L,R>::is_left (line 18)",
    );
    assert_eq!(
        sw["second_baseline_kept_doc_tests"],
        serde_json::json!([is_left, left]),
        "{sw}"
    );
    let reach = &sw["reach"];
    assert_eq!(
        reach["reached_by"]["left-drops-value"],
        serde_json::json!([left])
    );
    let kept = reach["kept_doc_seconds"][left]
        .as_f64()
        .unwrap_or_else(|| panic!("{reach}"));
    let built = reach["test_seconds"][left].as_f64().unwrap();
    assert!(kept < built, "kept {kept} s, through rustdoc {built} s");
    let m = r["mutations"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["id"] == "left-drops-value")
        .unwrap();
    assert_eq!(
        m["timeout_rule"]["tests_seconds"].as_f64(),
        Some(kept),
        "{m}"
    );
}

/// A `should_panic` doc test passes when its example panics: under a mutant that stops the
/// panic it fails, in both modes. In switch mode it runs from its kept executable (not
/// through rustdoc), judged by rustdoc's rule; a `no_run` example never runs, so it reaches
/// nothing and is not kept.
#[test]
fn a_should_panic_doc_test_kills_the_mutant_that_stops_its_panic_in_both_modes() {
    for mode in MODES {
        let sb = Sandbox::of("doctests", "mutations/doctests.toml");
        sb.edit(
            "src/lib.rs",
            "    /// Whether this is a `Right` (its test is a unit test).\n",
            "    /// Whether this is a `Right` (its test is a unit test).\n    ///\n    /// ```should_panic\n    /// assert!(doctests::Either::<u8, u8>::Left(1).is_right());\n    /// ```\n    ///\n    /// ```no_run\n    /// assert!(doctests::Either::<u8, u8>::Right(1).is_right());\n    /// ```\n",
        );
        let lib = sb.read("src/lib.rs");
        let fence = |after: &str| {
            lib.lines()
                .position(|l| l.ends_with(after))
                .map(|i| i + 1)
                .unwrap()
        };
        let panics = format!(
            "src/lib.rs - Either<L,R>::is_right (line {})",
            fence("```should_panic")
        );
        let never_runs = format!(
            "src/lib.rs - Either<L,R>::is_right (line {})",
            fence("```no_run")
        );
        let left = format!(
            "src/lib.rs - Either<L,R>::left (line {})",
            // Two lines above its first assertion.
            lib.lines()
                .position(|l| l.contains("Left(7).left(), Some(7)"))
                .unwrap()
                - 1
        );
        let catalog = format!(
            "name = \"panics\"\nworkspace = \"..\"\npackage = \"doctests\"\nlib_tests = true\ndoc_tests = true\ntest_targets = [\"api\"]\nselect = \"\"\ntests = [\"left_and_right_are_told_apart\", \"tests::is_right_sees_the_right_side\", \"src/lib.rs - Either<L,R>::is_left (line 18)\", {left:?}, {panics:?}, {never_runs:?}]\ntimeout_floor_secs = 10.0\n\n[[mutation]]\nid = \"is-right-always\"\ntitle = \"is_right is always true\"\nrole = \"defect\"\nfile = \"src/lib.rs\"\nfind = \"matches!(self, Either::Right(_))\"\nreplace = \"true\"\nkilled_by = [\"left_and_right_are_told_apart\", \"tests::is_right_sees_the_right_side\", {panics:?}]\nrationale = \"The should_panic example needs is_right to say no.\"\n"
        );
        sb.write("mutations/panics.toml", &catalog);
        let cat = sb.ws.join("mutations/panics.toml");
        // `--only`: the other listed tests kill nothing here (UNFALSIFIED is a full run's).
        let run = sb.run(&[
            "battery",
            cat.to_str().unwrap(),
            "--mode",
            mode,
            "--only",
            "is-right-always",
        ]);
        assert_eq!(run.code, Some(0), "{mode}: {}", run.stderr);
        let r: serde_json::Value = serde_json::from_str(
            &std::fs::read_to_string(sb.ws.join("reports/panics/battery.json")).unwrap(),
        )
        .unwrap();
        let m = &r["mutations"][0];
        assert_eq!(m["verdict"], "KILLED", "{mode}: {m}");
        assert_eq!(m["expectation"], "MET", "{mode}: {m}");
        let message = m["failed_tests"]
            .as_array()
            .unwrap()
            .iter()
            .find(|f| f["name"] == panics.as_str())
            .map(|f| f["message"].as_str().unwrap().to_string())
            .unwrap_or_default();
        eprintln!("{mode}: {message}");
        assert!(message.contains("marked `should_panic`"), "{mode}: {m}");
        if mode == "switch" {
            let sw: serde_json::Value = serde_json::from_str(
                &std::fs::read_to_string(sb.ws.join("reports/panics/switch.json")).unwrap(),
            )
            .unwrap();
            assert_eq!(
                sw["reach"]["kept_doc_tests"],
                serde_json::json!([panics]),
                "{}",
                sw["reach"]
            );
            assert_eq!(m["outcomes"][&never_runs], "not_reached", "{m}");
        }
    }
}

/// A `#![no_std]` library has no `std` prelude, and links `std` only if it says so. One
/// that links it itself (`extern crate std;`, as `either` 1.13.0 does): the code switch mode
/// adds to its functions (the switch, the reach recorder, the keeper of doc test
/// executables) names every trait it uses by its path. One that does not (`extern crate
/// alloc;` only, as `heck` 0.5.0): switch mode appends `extern crate std;` to its crate root
/// while the root is switched, and restores it. Either way the switched build compiles, the
/// doc tests are kept and the libtest tests run directly, with rebuild mode's verdicts, and
/// the user's tree is left as it was.
#[test]
fn a_no_std_library_is_switched_with_rebuild_modes_verdicts() {
    for links in ["extern crate std;", "extern crate alloc;"] {
        no_std_library_in_both_modes(links);
    }
}

fn no_std_library_in_both_modes(links: &str) {
    let mut reports = Vec::new();
    for mode in MODES {
        let sb = Sandbox::of("doctests", "mutations/doctests.toml");
        // Same line count, so the doc tests keep their names.
        sb.edit(
            "src/lib.rs",
            "//! Either of two values, tested mostly by its examples.\n\n#[cfg(feature = \"extra\")]\npub mod extra;\n\n",
            &format!("//! Either of two values, tested mostly by its examples.\n#![no_std]\n#[cfg(feature = \"extra\")]\npub mod extra;\n{links}\n"),
        );
        let before = sb.tree();
        let run = sb.battery(&["--mode", mode]);
        run.expect_code(0);
        assert_eq!(sb.tree(), before, "{links} {mode}");
        let r = sb.report_of("doctests");
        assert_eq!(verdicts(&r), doctests_all_killed(), "{links} {mode}");
        if mode == "switch" {
            let sw = doctests_switch_json(&sb);
            assert!(
                sw["plan"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .all(|e| e["mode"] == "switched"),
                "{}",
                sw["plan"]
            );
            assert_eq!(
                sw["reach"]["kept_doc_tests"].as_array().map(Vec::len),
                Some(2),
                "{}",
                sw["reach"]
            );
            assert_eq!(sw["reach"]["direct_tests"], 2, "{}", sw["reach"]);
            // The reach run started both from their executables, without `cargo test`.
            assert_eq!(sw["reach"]["started_directly"], 2, "{}", sw["reach"]);
        }
        reports.push(common::as_full_run(&r)["kill_matrix"].clone());
    }
    assert_eq!(reports[0], reports[1], "{links}");
}

/// Case 2: the unit tests of a `[[bin]]` are listed with `bin_targets` and kill the
/// mutants of the binary, in both modes (cargo-mutants' testdata tree `factorial`, which
/// has no Cargo.lock either).
#[test]
fn the_unit_tests_of_a_binary_kill_its_mutants_in_both_modes() {
    for mode in MODES {
        let sb = testdata("factorial");
        let before = sb.tree();
        let run = sb.battery(&["--mode", mode]);
        run.expect_code(0);
        let r = sb.report_of("factorial");
        assert_eq!(
            verdicts(&r),
            owned(&[("product-becomes-sum", "KILLED")]),
            "{mode}"
        );
        assert_eq!(
            r["catalog"]["bin_targets"],
            serde_json::json!(["factorial"])
        );
        assert_eq!(sb.tree(), before, "{mode}");
    }
}

/// A binary target the package does not have is CATALOG-DRIFT, naming the ones it has.
#[test]
fn a_missing_binary_target_is_drift_naming_the_real_ones() {
    let sb = testdata("factorial");
    let text = std::fs::read_to_string(&sb.catalog)
        .unwrap()
        .replace("bin_targets = [\"factorial\"]", "bin_targets = [\"fact\"]");
    std::fs::write(&sb.catalog, text).unwrap();
    sb.run(&["check", sb.catalog.to_str().unwrap()])
        .expect_code(2)
        .stderr_has("has no binary target \"fact\" (it has: factorial)");
}

/// Case 5: a mutation of a file compiled only under a feature the catalog does not enable
/// is NOT_COMPILED (UNMET, exit 1) and the others get their verdicts, in both modes;
/// `harness check` warns about it before anything is built.
#[test]
fn a_feature_gated_mutation_is_not_compiled_and_the_rest_get_verdicts() {
    for mode in MODES {
        let sb = Sandbox::of("doctests", "mutations/features.toml");
        let run = sb.battery(&["--mode", mode]);
        run.expect_code(1);
        let r = sb.report_of("features");
        assert_eq!(r["status"], "complete", "{mode}: {r}");
        assert_eq!(
            verdicts(&r),
            owned(&[
                ("is-right-sees-left", "KILLED"),
                ("triple-adds", "NOT_COMPILED"),
            ]),
            "{mode}"
        );
        let gated = r["mutations"]
            .as_array()
            .unwrap()
            .iter()
            .find(|m| m["id"] == "triple-adds")
            .unwrap();
        assert_eq!(gated["expectation"], "UNMET");
        let why = gated["reasons"][0].as_str().unwrap();
        assert!(
            why.contains("kept out by `#[cfg(feature = \"extra\")]` at src/lib.rs:3"),
            "{mode}: {why}"
        );
        assert_eq!(r["summary"]["not_compiled"], 1, "{mode}");
        let km = &r["kill_matrix"];
        let col = km["mutations"]
            .as_array()
            .unwrap()
            .iter()
            .position(|m| m == "triple-adds")
            .unwrap();
        for row in km["cells"].as_array().unwrap() {
            assert_eq!(row[col], "not_run", "{mode}: {km}");
        }
    }
    let sb = Sandbox::of("doctests", "mutations/features.toml");
    sb.run(&["check", sb.catalog.to_str().unwrap()])
        .expect_code(0)
        .stderr_has("mutation triple-adds: src/extra.rs is compiled only where `cfg(feature = \"extra\")` at src/lib.rs:3 holds");
    // With the feature on, the gate is open: no warning, and the mutation is measured.
    let text = std::fs::read_to_string(&sb.catalog)
        .unwrap()
        .replace("select = \"\"", "features = [\"extra\"]\nselect = \"\"");
    std::fs::write(&sb.catalog, text).unwrap();
    let run = sb.run(&["check", sb.catalog.to_str().unwrap()]);
    run.expect_code(0);
    assert!(!run.stderr.contains("NOT_COMPILED"), "{}", run.stderr);
    sb.battery(&["--only", "triple-adds"]).expect_code(0);
    assert_eq!(
        verdicts(&sb.report_of("features")),
        owned(&[("triple-adds", "SURVIVED")])
    );
}

/// cargo-mutants' own verdict per mutant name, from a run of it on a copy of `tree`.
fn cargo_mutants_verdicts(tree: &Path, files: &[&str]) -> BTreeMap<String, String> {
    let out = tempfile::tempdir().unwrap();
    let mut cmd = Command::new("cargo");
    cmd.args(["mutants", "--no-shuffle", "--timeout", "60", "--dir"])
        .arg(tree)
        .arg("--output")
        .arg(out.path());
    for f in files {
        cmd.args(["--file", f]);
    }
    let o = cmd
        .env("CI", "true")
        .env_remove("CARGO_TARGET_DIR")
        .output()
        .unwrap();
    // 0: all caught; 2: some missed; 3: some timed out.
    assert!(
        matches!(o.status.code(), Some(0 | 2 | 3)),
        "cargo mutants failed: {o:?}"
    );
    let v: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(out.path().join("mutants.out/outcomes.json")).unwrap(),
    )
    .unwrap();
    v["outcomes"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|o| {
            let m = o["scenario"].get("Mutant")?;
            let word = match o["summary"].as_str().unwrap() {
                "CaughtMutant" => "CAUGHT",
                "MissedMutant" => "MISSED",
                "Unviable" => "UNVIABLE",
                "Timeout" => "TIMEOUT",
                other => panic!("unexpected summary {other}"),
            };
            Some((m["name"].as_str().unwrap().to_string(), word.to_string()))
        })
        .collect()
}

/// `harness mutants --via-harness` on `sb` in `mode`: each generated mutant's status.
fn via_harness_verdicts(sb: &Sandbox, mode: &str, files: &[&str]) -> BTreeMap<String, String> {
    via_harness_run(sb, &["--mode", mode], files).0
}

/// `harness mutants --via-harness ARGS` on `sb`: each generated mutant's status, and the
/// run's standard error.
fn via_harness_run(
    sb: &Sandbox,
    extra: &[&str],
    files: &[&str],
) -> (BTreeMap<String, String>, String) {
    let mode = extra.join(" ");
    let mut args = vec!["mutants", "--via-harness"];
    args.extend(extra);
    args.extend(["--catalog", sb.catalog.to_str().unwrap()]);
    for f in files {
        args.extend(["--file", f]);
    }
    let run = sb.run(&args);
    assert!(
        matches!(run.code, Some(0 | 1)),
        "{mode}: stdout:\n{}\nstderr:\n{}",
        run.stdout,
        run.stderr
    );
    let r: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(sb.ws.join("reports/mutants/mutants.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(r["runner"], "harness");
    let statuses = r["mutants"]
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
    (statuses, run.stderr)
}

/// The issue's "done when": on cargo-mutants' testdata trees `factorial` (a binary with a
/// unit test and an untested `main`), `workspace` (three packages, no root package) and
/// `well_tested`'s `simple_fns.rs` (a function only a doc test tests), none with a
/// Cargo.lock, `mutants --via-harness` agrees with cargo-mutants mutant by mutant, in
/// both modes: each package's mutants are tested with its own package's tests (cases 3
/// and 1), the base catalogs hold no mutation (case 6), and the trees are left without a
/// Cargo.lock (case 4).
#[test]
fn via_harness_agrees_with_cargo_mutants_mutant_by_mutant() {
    if !common::cargo_mutants_present("via_harness_agrees_with_cargo_mutants_mutant_by_mutant") {
        return;
    }
    let trees: [(&str, &[&str]); 3] = [
        ("factorial", &[]),
        ("workspace", &[]),
        ("well_tested", &["src/simple_fns.rs"]),
    ];
    for (tree, files) in trees {
        let reference = testdata(tree);
        std::fs::remove_dir_all(reference.ws.join("mutations")).unwrap();
        let want = cargo_mutants_verdicts(&reference.ws, files);
        assert!(want.len() >= 5, "{tree}: {want:?}");
        for mode in MODES {
            let sb = testdata(tree);
            let before = sb.tree();
            let got = via_harness_verdicts(&sb, mode, files);
            assert_eq!(got, want, "{tree}, {mode}");
            assert!(!sb.ws.join("Cargo.lock").exists(), "{tree}, {mode}");
            let mut after = sb.tree();
            after.retain(|p, _| !p.starts_with("reports"));
            assert_eq!(after, before, "{tree}, {mode}");
        }
    }
}

/// With `-j 2` in switch mode, `mutants --via-harness` runs the batteries of a workspace's
/// three packages at once, each in a scratch copy of its own (`switch-<package>`) with
/// `-j 2`, and gives the verdicts cargo-mutants gives, mutant by mutant, leaving the tree
/// as it was.
#[test]
fn via_harness_runs_the_batteries_of_several_packages_at_once() {
    if !common::cargo_mutants_present("via_harness_runs_the_batteries_of_several_packages_at_once")
    {
        return;
    }
    let reference = testdata("workspace");
    std::fs::remove_dir_all(reference.ws.join("mutations")).unwrap();
    let want = cargo_mutants_verdicts(&reference.ws, &[]);
    let sb = testdata("workspace");
    let before = sb.tree();
    let (got, stderr) = via_harness_run(&sb, &["--mode", "switch", "-j", "2"], &[]);
    assert_eq!(got, want);
    let mut after = sb.tree();
    after.retain(|p, _| !p.starts_with("reports"));
    assert_eq!(after, before);
    // Each package's battery built in a scratch copy of its own.
    let mut scratches = BTreeSet::new();
    for package in ["cargo_mutants_testdata_workspace_utils", "main", "main2"] {
        let sw: serde_json::Value = serde_json::from_str(
            &std::fs::read_to_string(
                sb.ws
                    .join(format!("reports/workspace-generated-{package}/switch.json")),
            )
            .unwrap(),
        )
        .unwrap();
        let scratch = sw["scratch"].as_str().unwrap().to_string();
        assert!(
            scratch.ends_with(&format!("switch-{package}/tree")),
            "{package}: {scratch}"
        );
        assert_eq!(sw["jobs"], 2, "{package}: each battery has the -j 2");
        // `mutants --via-harness` builds its members without incremental compilation
        // (cold builds, as cargo-mutants' copies): no rustc session for the package.
        let sessions = std::path::Path::new(&scratch)
            .parent()
            .unwrap()
            .join("target/debug/incremental");
        let crate_name = format!("{}-", package.replace('-', "_"));
        let written: Vec<String> = std::fs::read_dir(&sessions)
            .map(|d| {
                d.map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                    .filter(|n| n.starts_with(&crate_name))
                    .collect()
            })
            .unwrap_or_default();
        assert!(
            written.is_empty(),
            "{package}: incremental sessions {written:?}"
        );
        scratches.insert(scratch);
    }
    assert_eq!(scratches.len(), 3);
    // The packages other than the base catalog's took their tests from their own switched
    // build's listing: no build of the original tree listed them first (none in the
    // catalog's target directory), and each ran the test its targets hold.
    assert!(!stderr.contains("listing the tests of package"), "{stderr}");
    assert!(
        !sb.ws.join("target/harness/workspace/debug").exists(),
        "an unswitched build in the catalog's target directory"
    );
    for (package, test) in [("main", "factorial_5"), ("main2", "test::triple_3_test")] {
        assert!(
            stderr.contains(&format!(
                "harness: [{package}] tests: every test the targets list (1)"
            )),
            "{package}: {stderr}"
        );
        let report: serde_json::Value = serde_json::from_str(
            &std::fs::read_to_string(sb.ws.join(format!(
                "reports/workspace-generated-{package}/battery.json"
            )))
            .unwrap(),
        )
        .unwrap();
        assert_eq!(
            report["catalog"]["tests"],
            serde_json::json!([test]),
            "{package}"
        );
        assert_eq!(
            report["kill_matrix"]["tests"],
            serde_json::json!([test]),
            "{package}"
        );
    }
    assert!(
        stderr.contains(
            "harness: 3 packages' batteries at once, each with -j 2, at most 4 of their processes at a time"
        ),
        "{stderr}"
    );
    // They ran at once: each battery started while another was still running (one after
    // another, each would start after every earlier one's final fingerprint). Which one
    // starts last depends on how long each package's test listing takes, so no order
    // between particular packages is asserted.
    let at = |line: &str| {
        stderr
            .find(line)
            .unwrap_or_else(|| panic!("no line {line:?} in:\n{stderr}"))
    };
    let packages = ["cargo_mutants_testdata_workspace_utils", "main", "main2"];
    for p in packages {
        let last_end = packages
            .iter()
            .filter(|o| **o != p)
            .map(|o| at(&format!("harness: [{o}] final fingerprint")))
            .max()
            .unwrap();
        assert!(
            at(&format!("harness: [{p}] battery ")) < last_end,
            "{p}: {stderr}"
        );
    }
}

/// The cfg-gate workspace's verdicts under the default features on Linux: each mutation
/// behind a gate the build leaves out is NOT_COMPILED.
fn gates_default_verdicts() -> BTreeMap<String, String> {
    owned(&[
        ("arm-gated", "NOT_COMPILED"),
        ("arm-control", "KILLED"),
        ("block-gated", "NOT_COMPILED"),
        ("block-control", "KILLED"),
        ("fn-platform-gated", "NOT_COMPILED"),
        ("fn-platform-control", "KILLED"),
        ("cfg-if-gated", "NOT_COMPILED"),
        ("cfg-if-control", "KILLED"),
        ("statement-gated", "NOT_COMPILED"),
        ("cfg-attr-gated", "NOT_COMPILED"),
        ("inner-gated", "NOT_COMPILED"),
        ("file-platform-gated", "NOT_COMPILED"),
    ])
}

/// Each mutation's first reason.
fn first_reasons(r: &serde_json::Value) -> BTreeMap<String, String> {
    r["mutations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            (
                m["id"].as_str().unwrap().to_string(),
                m["reasons"][0].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect()
}

/// Inside compiled files, a mutation behind a `cfg` gate the build leaves out (a match arm,
/// a block, a `let` statement, a function under `cfg(not(unix))`, a `cfg_attr`, a `cfg_if!`
/// branch, an inline module shut by its inner `#![cfg]`), and a file whose `mod`
/// declaration is `cfg(windows)`, is NOT_COMPILED with its gate named, in both modes; the compiled controls beside them are KILLED; nothing is built
/// per mutation for it, and the tree is left as it was.
#[test]
fn mutations_behind_cfg_gates_inside_compiled_files_are_not_compiled_with_the_gate_named() {
    for mode in MODES {
        let sb = Sandbox::of("cfg-gates", "mutations/gates.toml");
        let before = sb.tree();
        let run = sb.battery(&["--mode", mode]);
        run.expect_code(1);
        let r = sb.report_of("gates");
        assert_eq!(r["status"], "complete", "{mode}: {r}");
        assert_eq!(verdicts(&r), gates_default_verdicts(), "{mode}");
        let why = first_reasons(&r);
        let names = [
            (
                "arm-gated",
                "`#[cfg(feature = \"extra\")]` on the match arm at line 8",
            ),
            (
                "block-gated",
                "`#[cfg(feature = \"extra\")]` on the block at line 17",
            ),
            (
                "fn-platform-gated",
                "`#[cfg(not(unix))]` on the fn platform_name at line 31",
            ),
            (
                "cfg-if-gated",
                "`#[cfg(feature = \"fast\")]` on the cfg_if! branch at line 37",
            ),
            (
                "statement-gated",
                "`#[cfg(feature = \"extra\")]` on the let statement at line 63",
            ),
            (
                "cfg-attr-gated",
                "`#[cfg_attr(not(feature = \"extra\"), cfg(any()))]` on the fn bonus at line 70",
            ),
            (
                "inner-gated",
                "`#![cfg(feature = \"extra\")]` on the mod deep at line 77",
            ),
        ];
        for (id, gate) in names {
            assert!(why[id].contains(gate), "{mode}: {id}: {}", why[id]);
            assert!(why[id].contains("src/lib.rs"), "{mode}: {id}: {}", why[id]);
        }
        assert_eq!(r["summary"]["not_compiled"], 8, "{mode}");
        run.stderr_has("cfg probe: 10 mutation(s) behind cfg gates, 8 compiled in no unit");
        assert_eq!(sb.tree(), before, "{mode}");
    }
}

/// With the features on, the same gated mutations are compiled and get real verdicts
/// (KILLED by the tests written for those features), in both modes; the platform gate
/// still keeps its function out on Linux, and the `cfg_if!` branch taken without `fast`
/// is now the one left out.
#[test]
fn with_the_features_on_the_gated_mutations_get_real_verdicts() {
    for mode in MODES {
        let sb = Sandbox::of("cfg-gates", "mutations/gates.toml");
        let text = sb
            .read("mutations/gates.toml")
            .replace("select = \"\"", "features = [\"extra\", \"fast\"]\nselect = \"\"")
            .replace(
                "  \"totals_add_the_extra_amount\",\n]",
                "  \"totals_add_the_extra_amount\",\n  \"extras_add_up\",\n]",
            )
            .replace(
                "id = \"cfg-attr-gated\"\ntitle = \"bonus subtracts\"\nrole = \"defect\"\nfile = \"src/lib.rs\"\nfind = \"n + 100\"\nreplace = \"n - 100\"\nkilled_by = [\"totals_add_the_extra_amount\"]",
                "id = \"cfg-attr-gated\"\ntitle = \"bonus subtracts\"\nrole = \"defect\"\nfile = \"src/lib.rs\"\nfind = \"n + 100\"\nreplace = \"n - 100\"\nkilled_by = [\"extras_add_up\"]",
            )
            .replace(
                "find = \"n * 7\"\nreplace = \"n + 7\"\nkilled_by = [\"totals_add_the_extra_amount\"]",
                "find = \"n * 7\"\nreplace = \"n + 7\"\nkilled_by = [\"extras_add_up\"]",
            );
        sb.write("mutations/gates.toml", &text);
        let run = sb.battery(&["--mode", mode]);
        run.expect_code(1);
        let r = sb.report_of("gates");
        let mut want = gates_default_verdicts();
        for v in want.values_mut() {
            *v = "KILLED".into();
        }
        // The platform gate still shuts its function on Linux, and with `fast` on the
        // cfg_if! else branch is the one left out.
        want.insert("fn-platform-gated".into(), "NOT_COMPILED".into());
        want.insert("file-platform-gated".into(), "NOT_COMPILED".into());
        want.insert("cfg-if-control".into(), "NOT_COMPILED".into());
        assert_eq!(verdicts(&r), want, "{mode}: {}", run.stderr);
        let why = first_reasons(&r);
        assert!(
            why["cfg-if-control"]
                .contains("`else (none of feature = \"fast\")` on the cfg_if! branch at line 42"),
            "{mode}: {}",
            why["cfg-if-control"]
        );
        let exp: BTreeMap<String, String> = r["mutations"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| {
                (
                    m["id"].as_str().unwrap().to_string(),
                    m["expectation"].as_str().unwrap().to_string(),
                )
            })
            .filter(|(_, e)| e != "MET")
            .collect();
        assert_eq!(
            exp,
            owned(&[
                ("cfg-if-control", "UNMET"),
                ("file-platform-gated", "UNMET"),
                ("fn-platform-gated", "UNMET"),
            ]),
            "{mode}"
        );
    }
}

/// `mutants --via-harness` on the cfg-gate workspace, in both modes: every generated mutant
/// in code the default build leaves out on Linux (an arm, a block, a `let` statement, a
/// function under `cfg(not(unix))`, a `cfg_attr`-shut function, an inline module shut from
/// inside, a file whose `mod` declaration is `cfg(windows)`) is "not compiled", where
/// cargo-mutants calls it missed; every other mutant gets
/// cargo-mutants' own verdict. The gated lines are the fixture's, read by hand.
#[test]
fn via_harness_reports_the_generated_mutants_of_gated_code_as_not_compiled() {
    if !common::cargo_mutants_present(
        "via_harness_reports_the_generated_mutants_of_gated_code_as_not_compiled",
    ) {
        return;
    }
    let gated_lines = [8..=9, 17..=20, 31..=34, 37..=41, 63..=64, 70..=73, 77..=82];
    let gated = |file: &str, line: usize| {
        file == "src/windows.rs" || gated_lines.iter().any(|r| r.contains(&line))
    };
    let reference = Sandbox::of("cfg-gates", "mutations/gates.toml");
    std::fs::remove_dir_all(reference.ws.join("mutations")).unwrap();
    let want = cargo_mutants_verdicts(&reference.ws, &[]);
    for mode in MODES {
        let sb = Sandbox::of("cfg-gates", "mutations/gates.toml");
        let (got, stderr) = via_harness_run(&sb, &["--mode", mode], &[]);
        let r: serde_json::Value = serde_json::from_str(
            &std::fs::read_to_string(sb.ws.join("reports/mutants/mutants.json")).unwrap(),
        )
        .unwrap();
        let lines: BTreeMap<String, (String, usize)> = r["mutants"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| {
                (
                    m["name"].as_str().unwrap().to_string(),
                    (
                        m["file"].as_str().unwrap().to_string(),
                        m["line"].as_u64().unwrap() as usize,
                    ),
                )
            })
            .collect();
        assert_eq!(
            got.keys().collect::<Vec<_>>(),
            want.keys().collect::<Vec<_>>(),
            "{mode}"
        );
        let mut not_compiled = 0;
        for (name, status) in &got {
            let (file, line) = &lines[name];
            if gated(file, *line) {
                assert_eq!(status, "NOT_COMPILED", "{mode}: {name}\n{stderr}");
                assert_eq!(want[name], "MISSED", "{mode}: {name}");
                not_compiled += 1;
            } else {
                assert_eq!(status, &want[name], "{mode}: {name}\n{stderr}");
            }
        }
        assert!(not_compiled >= 5, "{mode}: {got:?}");
    }
}

/// A catalog with a further configuration (`[[config]]` enabling `extra` and `fast`, with
/// the test only those features hold): the mutations the default features leave
/// uncompiled run there and get real verdicts, each naming the configuration; the compiled
/// ones keep the default build's verdicts; the platform-gated function stays NOT_COMPILED;
/// the kill matrix has the configuration's test as a row. Both modes.
#[test]
fn a_further_configuration_gives_the_uncompiled_mutations_real_verdicts() {
    for mode in MODES {
        let sb = Sandbox::of("cfg-gates", "mutations/configs.toml");
        let before = sb.tree();
        let run = sb.battery(&["--mode", mode]);
        run.expect_code(1);
        run.stderr_has("configuration extra (features: extra, fast): 8 mutation(s) the catalog's own configuration does not compile");
        let r = sb.report_of("configs");
        let mut want = gates_default_verdicts();
        for v in want.values_mut() {
            *v = "KILLED".into();
        }
        want.insert("fn-platform-gated".into(), "NOT_COMPILED".into());
        want.insert("file-platform-gated".into(), "NOT_COMPILED".into());
        assert_eq!(verdicts(&r), want, "{mode}: {}", run.stderr);
        let configs: BTreeMap<String, String> = r["mutations"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|m| {
                Some((
                    m["id"].as_str().unwrap().to_string(),
                    m["config"].as_str()?.to_string(),
                ))
            })
            .collect();
        let ran_there = [
            "arm-gated",
            "block-gated",
            "cfg-if-gated",
            "statement-gated",
            "cfg-attr-gated",
            "inner-gated",
        ];
        assert_eq!(
            configs,
            ran_there
                .iter()
                .map(|id| (id.to_string(), "extra".to_string()))
                .collect(),
            "{mode}"
        );
        assert_eq!(r["configs"][0]["name"], "extra");
        assert_eq!(r["configs"][0]["status"], "complete");
        assert_eq!(r["configs"][0]["given"].as_array().unwrap().len(), 8);
        assert_eq!(r["configs"][0]["ran"].as_array().unwrap().len(), 6);
        let km = &r["kill_matrix"];
        let row = km["tests"]
            .as_array()
            .unwrap()
            .iter()
            .position(|t| t == "extras_add_up")
            .expect("the configuration's test is a row");
        let col = km["mutations"]
            .as_array()
            .unwrap()
            .iter()
            .position(|m| m == "inner-gated")
            .unwrap();
        assert_eq!(km["cells"][row][col], "killed", "{mode}: {km}");
        // Only the platform gates are left unmet: the exit code is 1 for them alone.
        assert_eq!(r["summary"]["unmet"], 2, "{mode}");
        assert_eq!(sb.tree(), before, "{mode}");
    }
}

/// `check --list` on a catalog listing a test the targets hold only under a feature says
/// so, naming the features, instead of offering an unrelated "nearest real test".
#[test]
fn check_list_names_a_test_that_exists_only_under_a_feature() {
    let sb = Sandbox::of("cfg-gates", "mutations/gates.toml");
    let text = sb.read("mutations/gates.toml").replace(
        "  \"totals_add_the_extra_amount\",\n]",
        "  \"totals_add_the_extra_amount\",\n  \"extras_add_up\",\n]",
    );
    sb.write("mutations/gates.toml", &text);
    let run = sb.run(&["check", "--list", sb.catalog.to_str().unwrap()]);
    run.expect_code(2).stderr_has(
        "tests[5] \"extras_add_up\" is a test of the targets only with more features enabled (it is listed with all of the package's features: extra, fast)",
    );
    assert!(!run.stderr.contains("nearest real test"), "{}", run.stderr);
}

/// `init` on a member of a workspace (cargo-mutants' `workspace` tree): the example
/// mutation names the member's file relative to the workspace root, so that, uncommented
/// with a real `find`, the catalog loads and `check` finds no drift.
#[test]
fn the_starter_example_names_the_members_file_from_the_workspace_root() {
    let sb = testdata("workspace");
    let ws = sb.ws.to_str().unwrap();
    let out = sb.ws.join("mutations/utils-starter.toml");
    sb.run(&[
        "init",
        "--workspace",
        ws,
        "--package",
        "cargo_mutants_testdata_workspace_utils",
        "--output",
        out.to_str().unwrap(),
    ])
    .expect_code(0);
    let text = std::fs::read_to_string(&out).unwrap();
    assert!(text.contains("# file = \"utils/src/lib.rs\"\n"), "{text}");
    let example: String = text
        .lines()
        .skip_while(|l| *l != "# [[mutation]]")
        .map(|l| l.strip_prefix("# ").unwrap_or(l))
        .map(|l| match l.split_once(" = ") {
            Some(("find", _)) => "find = \"a * 3\"".to_string(),
            Some(("replace", _)) => "replace = \"a + 3\"".to_string(),
            _ => l.to_string(),
        })
        .collect::<Vec<_>>()
        .join("\n");
    let head: String = text
        .lines()
        .take_while(|l| *l != "# [[mutation]]")
        .collect::<Vec<_>>()
        .join("\n");
    std::fs::write(&out, format!("{head}\n{example}\n")).unwrap();
    sb.run(&["check", out.to_str().unwrap()]).expect_code(0);
}

/// `init` on a package with optional features lists the gated code its default features
/// leave out and offers `[[config]]` sets; the offered set, uncommented, is one `check`
/// accepts.
#[test]
fn init_lists_the_code_the_default_features_leave_out_and_offers_the_sets() {
    let sb = Sandbox::of("cfg-gates", "mutations/gates.toml");
    let ws = sb.ws.to_str().unwrap();
    let out = sb.ws.join("mutations/starter.toml");
    let run = sb.run(&["init", "--workspace", ws, "--output", out.to_str().unwrap()]);
    run.expect_code(0).stdout_has(
        "the default features leave 7 gated place(s) of the code out (features: extra, fast)",
    );
    let text = std::fs::read_to_string(&out).unwrap();
    for line in [
        "#   src/lib.rs:8  #[cfg(feature = \"extra\")]\n",
        "#   src/lib.rs:77  #![cfg(feature = \"extra\")]\n",
        "#   src/lib.rs:37  cfg_if! branch #[cfg(feature = \"fast\")]\n",
        "#   src/lib.rs:70  #[cfg_attr(not(feature = \"extra\"), cfg(any()))]\n",
        "# [[config]]\n# name = \"fast\"\n# features = [\"fast\"]\n",
        "# [[config]]\n# name = \"extra\"\n# features = [\"extra\"]\n",
        "# [[config]]\n# name = \"all-features\"\n# all_features = true\n",
    ] {
        assert!(text.contains(line), "{line}\n{text}");
    }
    let offered = text.replace(
        "# [[config]]\n# name = \"extra\"\n# features = [\"extra\"]\n",
        "[[config]]\nname = \"extra\"\nfeatures = [\"extra\"]\n",
    );
    std::fs::write(&out, offered).unwrap();
    sb.run(&["check", out.to_str().unwrap()]).expect_code(0);
}
