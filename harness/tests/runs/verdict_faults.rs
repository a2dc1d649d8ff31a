//! Verdicts that must not be false, on the small real crate `fixtures/workspaces/faults`
//! in both modes: a listed test without a result is never KILLED (CRASHED when its binary
//! died, TESTS_MISSING when it does not exist under the mutation); a mutated file that no
//! rebuilt target of the tests compiles is STALE-BUILD, not SURVIVED; a `find` text that only
//! touches comments or discarded string literals is a catalog error.

use crate::common;

use std::collections::BTreeMap;

use common::Sandbox;

fn faults(catalog: &str) -> Sandbox {
    Sandbox::of("faults", catalog)
}

/// Per mutation id: (verdict, expectation).
fn verdicts(r: &serde_json::Value) -> BTreeMap<String, (String, String)> {
    r["mutations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            (
                m["id"].as_str().unwrap().to_string(),
                (
                    m["verdict"].as_str().unwrap().to_string(),
                    m["expectation"].as_str().unwrap().to_string(),
                ),
            )
        })
        .collect()
}

fn mutation<'a>(r: &'a serde_json::Value, id: &str) -> &'a serde_json::Value {
    r["mutations"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["id"] == id)
        .unwrap_or_else(|| panic!("no mutation {id} in {r}"))
}

fn stryker_status(sb: &Sandbox, name: &str) -> BTreeMap<String, String> {
    let p = sb.ws.join(format!("reports/{name}/mutation-report.json"));
    let v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap();
    let mut out = BTreeMap::new();
    for f in v["files"].as_object().unwrap().values() {
        for m in f["mutants"].as_array().unwrap() {
            out.insert(
                m["id"].as_str().unwrap().to_string(),
                m["status"].as_str().unwrap().to_string(),
            );
        }
    }
    out
}

#[test]
fn a_listed_test_without_a_result_is_never_killed_in_either_mode() {
    let want: BTreeMap<String, (String, String)> = [
        ("double-adds", "KILLED", "MET"),
        ("double-aborts", "CRASHED", "UNMET"),
        ("test-renamed", "TESTS_MISSING", "UNMET"),
        ("target-compiled-out", "TESTS_MISSING", "UNMET"),
    ]
    .into_iter()
    .map(|(id, v, e)| (id.to_string(), (v.to_string(), e.to_string())))
    .collect();
    for mode in ["rebuild", "switch"] {
        let sb = faults("mutations/one.toml");
        let run = sb.battery(&["--mode", mode]);
        run.expect_code(1);
        let r = sb.report_of("one");
        assert_eq!(verdicts(&r), want, "{mode}: {}", run.stderr);

        let s = &r["summary"];
        assert_eq!(
            (
                &s["killed"],
                &s["survived"],
                &s["crashed"],
                &s["tests_missing"]
            ),
            (
                &serde_json::json!(1),
                &serde_json::json!(0),
                &serde_json::json!(1),
                &serde_json::json!(2)
            ),
            "{mode}: {s}"
        );
        assert!(
            run.stdout.contains(
                "1 killed, 0 survived, 0 unviable, 0 timeout, 1 crashed, 2 tests missing"
            ),
            "{mode}: {}",
            run.stdout
        );

        // The binary that died is named with its signal; the test has no result.
        let crashed = mutation(&r, "double-aborts");
        assert_eq!(crashed["outcomes"]["doubles_twenty_one"], "no_result");
        assert_eq!(crashed["failed_tests"], serde_json::json!([]));
        let died = crashed["died"].as_array().unwrap();
        assert_eq!(died.len(), 1, "{mode}: {crashed}");
        assert_eq!(
            died[0], "tests/one.rs (signal: 6, SIGABRT: process abort signal)",
            "{mode}"
        );
        assert!(
            crashed["reasons"][0].as_str().unwrap().contains(
                "its test binary died before reporting it: tests/one.rs (signal: 6, SIGABRT"
            ),
            "{mode}: {crashed}"
        );

        // A test that does not exist under the mutation: no kill, its own reason.
        for id in ["test-renamed", "target-compiled-out"] {
            let m = mutation(&r, id);
            assert_eq!(
                m["outcomes"]["doubles_twenty_one"], "missing",
                "{mode}: {m}"
            );
            assert_eq!(m["died"], serde_json::json!([]), "{mode}: {m}");
        }
        assert_eq!(
            mutation(&r, "test-renamed")["reasons"][0],
            "doubles_twenty_one does not exist under the mutation: no test binary reported it"
        );

        // The kill matrix: only the real failure is a kill.
        let km = &r["kill_matrix"];
        let cols: Vec<&str> = km["mutations"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c.as_str().unwrap())
            .collect();
        let row: BTreeMap<&str, &str> = cols
            .iter()
            .zip(km["cells"][0].as_array().unwrap())
            .map(|(c, v)| (*c, v.as_str().unwrap()))
            .collect();
        assert_eq!(
            row,
            BTreeMap::from([
                ("double-adds", "killed"),
                ("double-aborts", "no_result"),
                ("test-renamed", "missing"),
                ("target-compiled-out", "missing"),
            ]),
            "{mode}"
        );

        // Stryker: a crash is a runtime error, missing tests cover nothing; neither Killed.
        assert_eq!(
            stryker_status(&sb, "one"),
            BTreeMap::from([
                ("double-adds".to_string(), "Killed".to_string()),
                ("double-aborts".to_string(), "RuntimeError".to_string()),
                ("test-renamed".to_string(), "NoCoverage".to_string()),
                ("target-compiled-out".to_string(), "NoCoverage".to_string()),
            ]),
            "{mode}"
        );
    }
}

/// Appends a gap mutation of `file` (`find` -> `replace`) to the lib-only catalog.
fn add_gap(sb: &Sandbox, id: &str, file: &str, find: &str, replace: &str) {
    let cat = sb.read("mutations/lib-only.toml");
    sb.write(
        "mutations/lib-only.toml",
        &format!(
            "{cat}\n[[mutation]]\nid = \"{id}\"\ntitle = \"t\"\nrole = \"gap\"\nfile = \"{file}\"\nfind = {find:?}\nreplace = {replace:?}\nrationale = \"r\"\n"
        ),
    );
}

#[test]
fn a_mutated_file_no_tested_target_compiles_is_stale_in_both_modes() {
    for (id, file, find, replace) in [
        (
            "main-mutated",
            "src/main.rs",
            "faults::greeting()",
            "\"bye\"",
        ),
        ("orphan-mutated", "src/orphan.rs", "1 + 1", "1 - 1"),
    ] {
        let mut details = Vec::new();
        for mode in ["rebuild", "switch"] {
            let sb = faults("mutations/lib-only.toml");
            add_gap(&sb, id, file, find, replace);
            let before = sb.tree();
            let run = sb.battery(&["--mode", mode, "--only", id]);
            run.expect_code(2).stderr_has(&format!(
                "STALE-BUILD: mutation {id}: {file} is not among the sources of any target cargo rebuilt for the tests"
            ));
            assert_eq!(sb.tree(), before, "{mode}: the tree is restored");
            let r = sb.report_of("lib-only");
            assert_eq!(r["refusal"]["kind"], "STALE-BUILD", "{mode}");
            details.push(r["refusal"]["detail"].as_str().unwrap().to_string());
        }
        assert_eq!(details[0], details[1], "both modes say the same");
    }
}

#[test]
fn the_library_mutated_is_still_rebuilt_and_killed() {
    // The control of the test above: the dep-info check accepts what the tests do compile.
    for mode in ["rebuild", "switch"] {
        let sb = faults("mutations/lib-only.toml");
        sb.battery(&["--mode", mode]).expect_code(0);
        assert_eq!(
            verdicts(&sb.report_of("lib-only"))["double-adds"],
            ("KILLED".to_string(), "MET".to_string()),
            "{mode}"
        );
    }
}

#[test]
fn a_find_inside_a_comment_or_a_discarded_literal_is_a_catalog_error() {
    for (id, find, replace, why) in [
        (
            "comment",
            "The doubling: x plus itself.",
            "The doubling: x minus itself.",
            "it changes only comments, doc comments or whitespace (line 5)",
        ),
        (
            "doc-comment",
            "/// Twice `x`.",
            "/// Thrice `x`.",
            "it changes only comments, doc comments or whitespace (line 3)",
        ),
        (
            "discarded-literal",
            "a note that nothing reads",
            "a note changed",
            "it changes only a string literal whose value is discarded (line 11): nothing reads it",
        ),
    ] {
        let sb = faults("mutations/lib-only.toml");
        sb.run(&["check", sb.catalog.to_str().unwrap()])
            .expect_code(0);
        add_gap(&sb, id, "src/lib.rs", find, replace);
        sb.run(&["check", sb.catalog.to_str().unwrap()])
            .expect_code(2)
            .stderr_has(&format!("CATALOG-DRIFT: {}", sb.catalog.display()))
            .stderr_has(&format!(
                "mutation {id}: `find` text {find:?} in src/lib.rs: {why}"
            ));
        for mode in ["rebuild", "switch"] {
            let run = sb.battery(&["--mode", mode, "--only", id]);
            run.expect_code(2).stderr_has(why);
            let r = sb.report_of("lib-only");
            assert_eq!(r["refusal"]["kind"], "CATALOG-DRIFT", "{mode}");
        }
    }
}
