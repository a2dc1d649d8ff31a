//! `--incremental` on a private copy of the sample workspace (with a second workspace member
//! the sample does not depend on): an unchanged tree reuses every verdict, an edit outside
//! the evidence re-runs nothing, an edit inside re-runs everything, and a cached verdict
//! that a re-check disproves refuses the run (REUSED-WRONG) and drops the cache.

use crate::common;

use std::path::Path;
use std::process::Command;

use common::{Sandbox, redact};

/// The sample catalog without its TIMEOUT mutation (which alone costs the timeout floor).
fn short_catalog(sb: &Sandbox) -> String {
    let text = sb.read("mutations/sample.toml");
    let cut = text.find("[[mutation]]\nid = \"countdown-hangs\"").unwrap();
    sb.write("mutations/short.toml", &text[..cut]);
    sb.ws.join("mutations/short.toml").display().to_string()
}

/// `battery.json` of a run, volatile fields redacted; `reused` and `incremental` taken out
/// when `strip`.
fn report(dir: &Path, ws: &Path, strip: bool) -> serde_json::Value {
    let mut v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("sample/battery.json")).unwrap())
            .unwrap();
    redact(&mut v, ws);
    if strip {
        v.as_object_mut().unwrap().remove("incremental");
        for m in v["mutations"].as_array_mut().unwrap() {
            m.as_object_mut().unwrap().remove("reused");
        }
    }
    v
}

fn reused(v: &serde_json::Value) -> Vec<bool> {
    v["mutations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["reused"].as_bool().unwrap())
        .collect()
}

#[test]
fn verdicts_are_reused_on_unchanged_evidence_only_and_a_wrong_one_refuses() {
    let sb = Sandbox::new();
    let catalog = short_catalog(&sb);
    // A second member the sample does not depend on: its files are no mutation's evidence.
    let manifest = sb.read("Cargo.toml");
    sb.write(
        "Cargo.toml",
        &manifest.replace("[workspace]\n", "[workspace]\nmembers = [\"other\"]\n"),
    );
    std::fs::create_dir_all(sb.ws.join("other/src")).unwrap();
    sb.write(
        "other/Cargo.toml",
        "[package]\nname = \"other\"\nversion = \"0.1.0\"\nedition = \"2021\"\npublish = false\n",
    );
    sb.write("other/src/lib.rs", "//! Not a dependency of the sample.\n");
    let lock = Command::new(env!("CARGO"))
        .args(["generate-lockfile", "--offline", "--manifest-path"])
        .arg(sb.ws.join("Cargo.toml"))
        .output()
        .unwrap();
    assert!(lock.status.success(), "{lock:?}");
    let ws = sb.ws.canonicalize().unwrap();
    let out = sb.dir.path();
    let run = |name: &str, recheck: &str| {
        let dir = out.join(name);
        let r = sb.run(&[
            "battery",
            &catalog,
            "--incremental",
            "--recheck",
            recheck,
            "--reports",
            dir.to_str().unwrap(),
        ]);
        (r, dir)
    };

    let (first, d1) = run("first", "0");
    assert_eq!(first.code, Some(1), "{first:?}");
    let r1 = report(&d1, &ws, false);
    assert_eq!(reused(&r1), [false; 5]);

    // Unchanged tree: every verdict reused, the report otherwise the same.
    let (again, d2) = run("again", "0");
    assert_eq!(again.code, Some(1), "{again:?}");
    assert_eq!(reused(&report(&d2, &ws, false)), [true; 5]);
    assert_eq!(report(&d2, &ws, true), report(&d1, &ws, true));

    // The default re-check runs one of them again, named in the report.
    let (checked, d3) = run("checked", "1");
    assert_eq!(checked.code, Some(1), "{checked:?}");
    let r3 = report(&d3, &ws, false);
    assert_eq!(reused(&r3).iter().filter(|r| **r).count(), 4);
    assert_eq!(r3["incremental"]["rechecked"].as_array().unwrap().len(), 1);

    // An edit outside every mutation's evidence (the unrelated member) re-runs nothing.
    sb.write(
        "other/src/lib.rs",
        "//! Not a dependency of the sample.\npub fn edited() {}\n",
    );
    let (outside, d4) = run("outside", "0");
    assert_eq!(outside.code, Some(1), "{outside:?}");
    assert_eq!(reused(&report(&d4, &ws, false)), [true; 5]);

    // An edit inside (the test target's source) re-runs every mutation.
    let tests = sb.read("tests/contract.rs");
    sb.write("tests/contract.rs", &format!("{tests}\n// edited\n"));
    let (inside, d5) = run("inside", "0");
    assert_eq!(inside.code, Some(1), "{inside:?}");
    assert_eq!(reused(&report(&d5, &ws, false)), [false; 5]);
    assert_eq!(report(&d5, &ws, true), report(&d1, &ws, true));

    // A cached verdict made wrong: the re-check of every reused verdict refuses the run
    // and drops the cache.
    let cache_dir = sb.state.join("cache");
    let files: Vec<_> = std::fs::read_dir(&cache_dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(files.len(), 1, "{files:?}");
    let mut cached: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&files[0]).unwrap()).unwrap();
    assert_eq!(
        cached["entries"]["add-subtracts"]["report"]["verdict"],
        "KILLED"
    );
    cached["entries"]["add-subtracts"]["report"]["verdict"] = "SURVIVED".into();
    std::fs::write(&files[0], cached.to_string()).unwrap();
    let (wrong, d6) = run("wrong", "5");
    wrong.expect_code(2).stderr_has("REUSED-WRONG").stderr_has(
        "mutation `add-subtracts`: the reused verdict was SURVIVED but re-checked it is KILLED",
    );
    assert_eq!(report(&d6, &ws, false)["refusal"]["kind"], "REUSED-WRONG");
    assert!(!files[0].exists(), "the cache was not dropped");

    // With the cache gone nothing is reused; `cache clear` empties it again.
    let (fresh, d7) = run("fresh", "0");
    assert_eq!(fresh.code, Some(1), "{fresh:?}");
    assert_eq!(reused(&report(&d7, &ws, false)), [false; 5]);
    sb.run(&["cache", "clear"])
        .expect_code(0)
        .stdout_has("removed 1 verdict cache file(s)");
    assert_eq!(std::fs::read_dir(&cache_dir).unwrap().count(), 0);
}
