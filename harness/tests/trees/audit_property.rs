//! Property: on small generated workspaces really run under cargo test and cargo-nextest, the
//! audit's per-test outcome equals the runner's own record (nextest's JUnit report).
//!
//! Needs cargo-nextest on PATH (`scripts/install-cargo-nextest`). Few cases: each builds and
//! runs a workspace (the builds share one target directory).

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

use harness::ci::audit::{self, LaneStatus, MustRun};
use harness::ci::targets::Workspace;
use harness::ci::testlog;
use proptest::prelude::*;

/// One generated test: module path, name, passes?, `#[should_panic]`?
type TestSpec = (Vec<String>, String, bool, bool);

/// One generated package: name, whether its library is renamed, its unit tests.
type PackageSpec = (String, bool, Vec<TestSpec>);

fn write_workspace(root: &Path, packages: &[PackageSpec]) {
    let members: Vec<String> = packages.iter().map(|p| format!("{:?}", p.0)).collect();
    std::fs::write(
        root.join("Cargo.toml"),
        format!(
            "[workspace]\nmembers = [{}]\nresolver = \"2\"\n",
            members.join(", ")
        ),
    )
    .unwrap();
    std::fs::create_dir_all(root.join(".config")).unwrap();
    std::fs::write(
        root.join(".config/nextest.toml"),
        "[profile.ci]\nfail-fast = false\n[profile.ci.junit]\npath = \"junit.xml\"\n",
    )
    .unwrap();
    for (name, renamed, tests) in packages {
        let dir = root.join(name);
        std::fs::create_dir_all(dir.join("src")).unwrap();
        let lib = if *renamed {
            "[lib]\nname = \"renamed\"\npath = \"src/renamed.rs\"\n"
        } else {
            ""
        };
        std::fs::write(
            dir.join("Cargo.toml"),
            format!("[package]\nname = {name:?}\nversion = \"0.1.0\"\nedition = \"2021\"\npublish = false\n{lib}"),
        )
        .unwrap();
        let mut src = String::new();
        for (i, (modules, test, passes, panics)) in tests.iter().enumerate() {
            // Each test in its own module: generated module names may repeat.
            let mut open = format!("mod c{i} {{ ");
            let mut close = String::from("} ");
            for m in modules {
                open.push_str(&format!("mod {m} {{ "));
                close.push_str("} ");
            }
            let attr = if *panics { "#[should_panic]" } else { "" };
            // A should_panic test passes when its body panics.
            let body = if passes == panics {
                "panic!(\"generated\");"
            } else {
                "assert_eq!(1 + 1, 2);"
            };
            src.push_str(&format!(
                "#[cfg(test)] {open}#[test] {attr} fn {test}() {{ {body} }} {close}\n"
            ));
        }
        let file = if *renamed {
            "src/renamed.rs"
        } else {
            "src/lib.rs"
        };
        std::fs::write(dir.join(file), src).unwrap();
    }
}

fn junit(path: &Path) -> BTreeMap<(String, String), bool> {
    let f = std::fs::File::open(path).unwrap();
    let report = quick_junit::Report::deserialize(std::io::BufReader::new(f)).unwrap();
    let mut out = BTreeMap::new();
    for s in &report.test_suites {
        for c in &s.test_cases {
            let ok = matches!(c.status, quick_junit::TestCaseStatus::Success { .. });
            out.insert((s.name.to_string(), c.name.to_string()), ok);
        }
    }
    out
}

/// Run cargo with `args`, its standard output and error merged into `log` as a CI log has them.
fn run_to(log: &Path, ws: &Path, target_dir: &Path, args: &[&str]) {
    let file = std::fs::File::create(log).unwrap();
    let err = file.try_clone().unwrap();
    Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
        .args(args)
        .current_dir(ws)
        .env("CARGO_TARGET_DIR", target_dir)
        .env("CI", "true")
        .env_remove("NEXTEST_HIDE_PROGRESS_BAR")
        .env_remove("RUSTFLAGS")
        .stdout(file)
        .stderr(err)
        .status()
        .unwrap();
}

fn package_spec() -> impl Strategy<Value = PackageSpec> {
    let test = (
        proptest::collection::vec(prop::sample::select(vec!["a", "b", "ünï"]), 0..2),
        "[a-z]{1,6}",
        any::<bool>(),
        prop::bool::weighted(0.3),
    )
        .prop_map(|(m, n, ok, sp)| {
            (
                m.into_iter().map(String::from).collect(),
                format!("t_{n}"),
                ok,
                sp,
            )
        });
    (any::<bool>(), proptest::collection::vec(test, 1..4)).prop_map(|(renamed, mut tests)| {
        // Unique names within a module path.
        tests.sort_by(|a, b| (&a.0, &a.1).cmp(&(&b.0, &b.1)));
        tests.dedup_by(|a, b| a.0 == b.0 && a.1 == b.1);
        (String::new(), renamed, tests)
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 4, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn audit_outcomes_equal_nextest_junit(specs in proptest::collection::vec(package_spec(), 1..3)) {
        let packages: Vec<PackageSpec> = specs
            .into_iter()
            .enumerate()
            .map(|(i, (_, renamed, tests))| (format!("gen-pkg{i}"), renamed, tests))
            .collect();
        // Shared by every case (and every run): dependency-free crates, rebuilt per case.
        let target_dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("audit-property");
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path();
        write_workspace(ws, &packages);
        let cargo_log = ws.join("cargo.log");
        run_to(&cargo_log, ws, &target_dir, &["test", "--workspace", "--no-fail-fast"]);
        let nextest_log = ws.join("nextest.log");
        run_to(&nextest_log, ws, &target_dir, &["nextest", "run", "--workspace", "--profile", "ci", "--no-fail-fast"]);
        // nextest's store is `<workspace>/target/nextest`, whatever CARGO_TARGET_DIR says.
        let report = ws.join("target/nextest/ci/junit.xml");
        prop_assert!(
            report.is_file(),
            "nextest wrote no JUnit report; its log:\n{}",
            std::fs::read_to_string(&nextest_log).unwrap_or_default()
        );
        let truth = junit(&report);
        let total: usize = packages.iter().map(|p| p.2.len()).sum();
        prop_assert_eq!(truth.len(), total, "JUnit holds every generated test");
        let meta = Workspace::load(&ws.join("Cargo.toml")).unwrap();
        for log_path in [&cargo_log, &nextest_log] {
            let mut log = testlog::parse_file(log_path).unwrap();
            meta.map(&mut log);
            for ((suite, name), passed) in &truth {
                let test = MustRun { package: Some(suite.clone()), target: Some("lib".into()), path: name.clone() };
                let got = audit::lane_status(&log, &test).status;
                let want = if *passed { LaneStatus::Passed } else { LaneStatus::Failed };
                prop_assert_eq!(got, want, "{} {} in {}", suite, name, log_path.display());
            }
        }
    }
}
