//! Property: on generated workspaces (functions calling each other, unit tests and doc
//! tests calling some of them, strictly or not), a switch-mode battery whose mutants run
//! only the tests that reach them gives the verdicts, killers and kill matrix of a run of
//! every listed test (`--all-tests`), and both are the ones a model of the generated code
//! predicts: which tests reach each mutated function, which of them fail under it, and
//! NO_COVERAGE where no test reaches it.
//!
//! Ten cases: each builds a generated workspace and runs two batteries on it (about 3 s).

use crate::common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use common::{Run, as_full_run};
use proptest::prelude::*;

/// The operation a generated function applies after its call (or to its argument), and
/// the one its mutation puts in its place.
#[derive(Debug, Clone, Copy)]
enum Op {
    /// `wrapping_add(c)`, mutated to `wrapping_sub(c)` (equal when `c == 0`).
    Add,
    /// `wrapping_mul(c)`, mutated to `wrapping_add(c)` (equal when `c * x == x + c`).
    Mul,
}

/// `pub fn f{i}(x: i64) -> i64 { let v{i} = f{calls}(x) or x; v{i}.op(c) }`.
#[derive(Debug, Clone)]
struct Func {
    op: Op,
    c: i64,
    /// A function with a higher index that this one calls first.
    calls: Option<usize>,
}

/// One call a test makes: the function, its argument, and whether the test asserts the
/// result (`assert_eq!`) or only computes it (reaches the function, never fails).
type Call = (usize, i64, bool);

#[derive(Debug, Clone)]
struct Generated {
    funcs: Vec<Func>,
    /// The integration tests `t{k}` of target `contract`, each a list of calls.
    tests: Vec<Vec<Call>>,
    /// Doc tests: at most one per function, on it (its one call is to that function).
    docs: BTreeMap<usize, (i64, bool)>,
}

fn method(op: Op, mutated: bool) -> &'static str {
    match (op, mutated) {
        (Op::Add, false) => "wrapping_add",
        (Op::Add, true) => "wrapping_sub",
        (Op::Mul, false) => "wrapping_mul",
        (Op::Mul, true) => "wrapping_add",
    }
}

impl Generated {
    /// The model: `f{i}(x)` with the mutation of function `mutated` applied.
    fn eval(&self, i: usize, x: i64, mutated: Option<usize>) -> i64 {
        let f = &self.funcs[i];
        let v = match f.calls {
            Some(j) => self.eval(j, x, mutated),
            None => x,
        };
        match method(f.op, mutated == Some(i)) {
            "wrapping_add" => v.wrapping_add(f.c),
            "wrapping_sub" => v.wrapping_sub(f.c),
            _ => v.wrapping_mul(f.c),
        }
    }

    /// The functions a call to `f{i}` executes.
    fn executes(&self, i: usize) -> BTreeSet<usize> {
        let mut out = BTreeSet::from([i]);
        let mut at = i;
        while let Some(j) = self.funcs[at].calls {
            out.insert(j);
            at = j;
        }
        out
    }

    /// `src/lib.rs` and the line of each doc test's opening fence (rustdoc's `(line N)`).
    fn lib(&self) -> (String, BTreeMap<usize, usize>) {
        let mut src = String::from("//! Generated functions.\n\n");
        let mut lines = BTreeMap::new();
        for (i, f) in self.funcs.iter().enumerate() {
            src.push_str(&format!("/// Function {i}.\n"));
            if let Some(&(x, strict)) = self.docs.get(&i) {
                src.push_str("///\n");
                lines.insert(i, src.lines().count() + 1);
                src.push_str("/// ```\n");
                if strict {
                    let want = self.eval(i, x, None);
                    src.push_str(&format!("/// assert_eq!(genws::f{i}({x}), {want});\n"));
                } else {
                    src.push_str(&format!("/// let _ = genws::f{i}({x});\n"));
                }
                src.push_str("/// ```\n");
            }
            let first = match f.calls {
                Some(j) => format!("f{j}(x)"),
                None => "x".into(),
            };
            src.push_str(&format!(
                "pub fn f{i}(x: i64) -> i64 {{\n    let v{i} = {first};\n    v{i}.{}({})\n}}\n\n",
                method(f.op, false),
                f.c
            ));
        }
        (src, lines)
    }

    fn contract(&self) -> String {
        let mut src = String::from("//! Generated tests.\n\n");
        for (k, calls) in self.tests.iter().enumerate() {
            src.push_str(&format!("#[test]\nfn t{k}() {{\n"));
            for &(i, x, strict) in calls {
                if strict {
                    let want = self.eval(i, x, None);
                    src.push_str(&format!("    assert_eq!(genws::f{i}({x}), {want});\n"));
                } else {
                    src.push_str(&format!("    let _ = genws::f{i}({x});\n"));
                }
            }
            src.push_str("}\n\n");
        }
        src
    }

    /// Every listed test: name, and its calls.
    fn listed(&self, lines: &BTreeMap<usize, usize>) -> Vec<(String, Vec<Call>)> {
        let mut out: Vec<(String, Vec<Call>)> = self
            .tests
            .iter()
            .enumerate()
            .map(|(k, c)| (format!("t{k}"), c.clone()))
            .collect();
        for (&i, &(x, strict)) in &self.docs {
            out.push((
                format!("src/lib.rs - f{i} (line {})", lines[&i]),
                vec![(i, x, strict)],
            ));
        }
        out
    }

    /// Per mutated function: (the tests that reach it, the tests that fail under it).
    fn predicted(&self, listed: &[(String, Vec<Call>)]) -> Vec<(Vec<String>, Vec<String>)> {
        (0..self.funcs.len())
            .map(|m| {
                let mut reach = Vec::new();
                let mut kill = Vec::new();
                for (name, calls) in listed {
                    if calls.iter().any(|&(i, _, _)| self.executes(i).contains(&m)) {
                        reach.push(name.clone());
                    }
                    if calls
                        .iter()
                        .any(|&(i, x, s)| s && self.eval(i, x, Some(m)) != self.eval(i, x, None))
                    {
                        kill.push(name.clone());
                    }
                }
                kill.sort();
                (reach, kill)
            })
            .collect()
    }

    fn write(&self, ws: &Path) -> Vec<(String, Vec<Call>)> {
        let (lib, lines) = self.lib();
        std::fs::create_dir_all(ws.join("src")).unwrap();
        std::fs::create_dir_all(ws.join("tests")).unwrap();
        std::fs::create_dir_all(ws.join("mutations")).unwrap();
        std::fs::write(
            ws.join("Cargo.toml"),
            "[package]\nname = \"genws\"\nversion = \"0.1.0\"\nedition = \"2021\"\npublish = false\n\n[lib]\ndoctest = true\n",
        )
        .unwrap();
        std::fs::write(ws.join(".gitignore"), "/target\n/reports\n").unwrap();
        std::fs::write(ws.join("src/lib.rs"), lib).unwrap();
        std::fs::write(ws.join("tests/contract.rs"), self.contract()).unwrap();
        let listed = self.listed(&lines);
        let predicted = self.predicted(&listed);
        let names: Vec<String> = listed
            .iter()
            .map(|(n, _)| format!("    {n:?},\n"))
            .collect();
        let mut cat = format!(
            "name = \"gen\"\nworkspace = \"..\"\npackage = \"genws\"\ntest_targets = [\"contract\"]\ndoc_tests = {}\nselect = \"\"\ntests = [\n{}]\ntimeout_floor_secs = 20.0\n",
            !self.docs.is_empty(),
            names.concat()
        );
        for (i, f) in self.funcs.iter().enumerate() {
            let (_, kill) = &predicted[i];
            let find = format!("v{i}.{}({})", method(f.op, false), f.c);
            let replace = format!("v{i}.{}({})", method(f.op, true), f.c);
            let (role, killed_by) = if kill.is_empty() {
                ("gap", String::new())
            } else {
                let k: Vec<String> = kill.iter().map(|t| format!("{t:?}")).collect();
                ("defect", format!("killed_by = [{}]\n", k.join(", ")))
            };
            cat.push_str(&format!(
                "\n[[mutation]]\nid = \"m{i}\"\ntitle = \"f{i} mutated\"\nrole = \"{role}\"\nfile = \"src/lib.rs\"\nfind = {find:?}\nreplace = {replace:?}\n{killed_by}rationale = \"generated\"\n"
            ));
        }
        std::fs::write(ws.join("mutations/gen.toml"), cat).unwrap();
        listed
    }
}

fn generated() -> impl Strategy<Value = Generated> {
    (2usize..5).prop_flat_map(|n| {
        let func = (
            prop::bool::ANY,
            0i64..4,
            prop::option::weighted(0.6, 0usize..8),
        );
        let call = (0..n, -3i64..4, prop::bool::weighted(0.6));
        (
            proptest::collection::vec(func, n),
            proptest::collection::vec(proptest::collection::vec(call.clone(), 0..3), 1..4),
            proptest::collection::btree_map(0..n, (-3i64..4, prop::bool::ANY), 0..2),
        )
            .prop_map(move |(fs, mut tests, docs)| {
                // At least one test calls a function: the forced-fail control must fail
                // some test, or no switched verdict is trusted (and there is no reach).
                if tests.iter().all(Vec::is_empty) {
                    tests[0].push((0, 1, true));
                }
                Generated {
                    funcs: fs
                        .into_iter()
                        .enumerate()
                        .map(|(i, (add, c, calls))| Func {
                            op: if add { Op::Add } else { Op::Mul },
                            c,
                            // Only forward calls: the call graph has no cycle.
                            calls: calls.map(|j| i + 1 + j % n).filter(|&j| j < n),
                        })
                        .collect(),
                    tests,
                    docs,
                }
            })
    })
}

/// Per mutation: (verdict, sorted failing tests, reached_by).
fn verdicts(r: &serde_json::Value) -> BTreeMap<String, (String, Vec<String>, serde_json::Value)> {
    r["mutations"]
        .as_array()
        .unwrap_or_else(|| panic!("no mutations in {r}"))
        .iter()
        .map(|m| {
            let killers = common::killers(m);
            (
                m["id"].as_str().unwrap().to_string(),
                (
                    m["verdict"].as_str().unwrap().to_string(),
                    killers,
                    m["reached_by"].clone(),
                ),
            )
        })
        .collect()
}

fn battery(dir: &Path, args: &[&str]) -> (Run, serde_json::Value) {
    let ws = dir.join("ws");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_harness"))
        .arg("--state-dir")
        .arg(dir.join("state"))
        .arg("battery")
        .arg(ws.join("mutations/gen.toml"))
        .args(["--mode", "switch", "-j", "2"])
        .args(args)
        .current_dir(dir)
        .env_remove("HARNESS_STATE_DIR")
        .output()
        .unwrap();
    let run = Run::from(out);
    let text = std::fs::read_to_string(ws.join("reports/gen/battery.json"))
        .unwrap_or_else(|e| panic!("no report ({e}); stderr:\n{}", run.stderr));
    (run, serde_json::from_str(&text).unwrap())
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 10,
        max_shrink_iters: 4,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn reach_selected_runs_equal_full_runs_and_the_model(g in generated()) {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().join("ws");
        let listed = g.write(&ws);
        git2::Repository::init(&ws).unwrap();
        let predicted = g.predicted(&listed);

        let (sel_run, sel) = battery(dir.path(), &[]);
        let sw: serde_json::Value = serde_json::from_str(
            &std::fs::read_to_string(ws.join("reports/gen/switch.json")).unwrap(),
        )
        .unwrap();
        let (all_run, all) = battery(dir.path(), &["--all-tests"]);
        prop_assert_eq!(sel_run.code, all_run.code, "{}\n{}", sel_run.stderr, all_run.stderr);
        prop_assert!(matches!(sel_run.code, Some(0 | 1)), "{}", sel_run.stderr);
        // Selection was on (every assumption held) in the selected run.
        prop_assert!(
            sel_run.stderr.contains("reach run:"),
            "no reach run: {}",
            sel_run.stderr
        );
        prop_assert!(
            !sel_run.stderr.contains("reach run: not used"),
            "selection turned off: {}",
            sel_run.stderr
        );

        let (v_sel, v_all) = (verdicts(&sel), verdicts(&all));
        prop_assert_eq!(v_sel.len(), g.funcs.len());
        for (i, (reach, kill)) in predicted.iter().enumerate() {
            let id = format!("m{i}");
            let (verdict, killers, reached_by) = &v_sel[&id];
            let want = if reach.is_empty() {
                "NO_COVERAGE"
            } else if kill.is_empty() {
                "SURVIVED"
            } else {
                "KILLED"
            };
            prop_assert_eq!(verdict.as_str(), want, "{}: {:?}", id, g);
            prop_assert_eq!(killers, kill, "{}: {:?}", id, g);
            // The reach run found exactly the tests the model says execute the function,
            // doc tests included (each runs on its own: its filter, the item name `f{i}`,
            // selects no other doc test here).
            let found: BTreeSet<String> = reached_by
                .as_array()
                .unwrap()
                .iter()
                .map(|t| t.as_str().unwrap().to_string())
                .collect();
            let want_reach: BTreeSet<String> = reach.iter().cloned().collect();
            prop_assert_eq!(found, want_reach, "{}: {:?}", id, g);
            // And the full run agrees: same verdict and killers.
            prop_assert_eq!(&v_all[&id].0, verdict, "{}", id);
            prop_assert_eq!(&v_all[&id].1, killers, "{}", id);
        }
        prop_assert_eq!(&all["kill_matrix"], &as_full_run(&sel["kill_matrix"]));
        prop_assert_eq!(&all["summary"], &sel["summary"]);
        // A cell of the selected run is `not_reached` exactly where its test is not among
        // the mutation's reaching tests, and nothing else reads `not_reached`.
        let km = &sel["kill_matrix"];
        for (row, test) in km["tests"].as_array().unwrap().iter().enumerate() {
            for (col, id) in km["mutations"].as_array().unwrap().iter().enumerate() {
                let cell = km["cells"][row][col].as_str().unwrap();
                let reached = v_sel[id.as_str().unwrap()].2.as_array().unwrap().contains(test);
                prop_assert_eq!(cell == "not_reached", !reached, "{} {}: {}", test, id, cell);
            }
        }
        prop_assert_eq!(sw["reach"]["selection"].as_bool(), Some(true), "{}", sw["reach"]);
        // Every doc test that reaches a mutation ran from its kept executable, without
        // rustdoc (its filter selects it alone), so the verdicts above, equal to the
        // `--all-tests` run's through rustdoc, are the kept executables'.
        let reaching_docs: BTreeSet<String> = predicted
            .iter()
            .flat_map(|(reach, _)| reach.iter())
            .filter(|t| t.contains(" - "))
            .cloned()
            .collect();
        let kept: BTreeSet<String> = sw["reach"]["kept_doc_tests"]
            .as_array()
            .map(|a| a.iter().map(|t| t.as_str().unwrap().to_string()).collect())
            .unwrap_or_default();
        prop_assert_eq!(kept, reaching_docs, "{}", sw["reach"]);
        prop_assert!(sw["reach"].get("doc_tests_not_kept").is_none(), "{}", sw["reach"]);
        // Likewise every libtest test that reaches a mutation ran from its executable,
        // without `cargo test`: the verdicts above, equal to the `--all-tests` run's through
        // cargo, are the direct runs'.
        let reaching_libtest = predicted
            .iter()
            .flat_map(|(reach, _)| reach.iter())
            .filter(|t| !t.contains(" - "))
            .collect::<BTreeSet<_>>()
            .len();
        prop_assert_eq!(
            sw["reach"]["direct_tests"].as_u64(),
            Some(reaching_libtest as u64),
            "{}",
            sw["reach"]
        );
        prop_assert!(sw["reach"].get("tests_not_direct").is_none(), "{}", sw["reach"]);
        // And the reach run itself started each of them from its executable, as the
        // forced-fail control's run recorded it, without `cargo test`: the reach above is
        // those runs' (the libtest tests that reach nothing may have had no record).
        prop_assert!(
            sw["reach"]["started_directly"].as_u64() >= Some(reaching_libtest as u64),
            "{}",
            sw["reach"]
        );
    }
}
