//! Shards and `harness merge` on a private copy of the sample workspace: the shards of a
//! run, merged, give the report of the unsharded run (timings aside), and the merge
//! refuses shards that are missing, repeated, foreign or not from a shard run.

use crate::common;

use std::path::Path;

use common::{Sandbox, redact};

/// The sample catalog without its TIMEOUT mutation (which alone costs the timeout floor
/// on every run).
fn short_catalog(sb: &Sandbox) -> String {
    let text = sb.read("mutations/sample.toml");
    let cut = text.find("[[mutation]]\nid = \"countdown-hangs\"").unwrap();
    sb.write("mutations/short.toml", &text[..cut]);
    sb.ws.join("mutations/short.toml").display().to_string()
}

fn json(path: &Path, ws: &Path) -> serde_json::Value {
    let mut v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    redact(&mut v, ws);
    v
}

#[test]
fn merged_shards_equal_the_full_run_and_foreign_shards_are_refused() {
    let sb = Sandbox::new();
    let catalog = short_catalog(&sb);
    let out = sb.dir.path();
    let dir = |name: &str| out.join(name).display().to_string();
    let full = sb.run(&["battery", &catalog, "--reports", &dir("full")]);
    let full_code = full.code;
    let s1 = sb.run(&[
        "battery",
        &catalog,
        "--shard",
        "1/2",
        "--reports",
        &dir("s1"),
    ]);
    let s2 = sb.run(&[
        "battery",
        &catalog,
        "--shard",
        "2/2",
        "--reports",
        &dir("s2"),
    ]);
    assert!(s1.code != Some(2) && s2.code != Some(2), "{s1:?}\n{s2:?}");

    // Each shard ran its part, dealt in catalog order, and says which.
    let shard1 = json(&out.join("s1/sample/battery.json"), &sb.ws);
    let ids = |r: &serde_json::Value| -> Vec<String> {
        r["mutations"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["id"].as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(
        ids(&shard1),
        [
            "add-subtracts",
            "clamp-upper-inverted",
            "add-does-not-compile"
        ]
    );
    assert_eq!(shard1["shard"]["k"], 1);
    assert_eq!(shard1["shard"]["timings"]["kind"], "mutation_order");
    assert!(shard1["unfalsified"].is_null());

    let merged = sb.run(&["merge", &dir("s1"), &dir("s2"), "--reports", &dir("merged")]);
    assert_eq!(merged.code, full_code, "{merged:?}");
    let ws = sb.ws.canonicalize().unwrap();
    for file in ["battery.json", "mutation-report.json"] {
        assert_eq!(
            json(&out.join("merged/sample").join(file), &ws),
            json(&out.join("full/sample").join(file), &ws),
            "{file} differs between the merge and the full run"
        );
    }
    assert_eq!(
        std::fs::read_to_string(out.join("merged/sample/battery.md")).unwrap(),
        std::fs::read_to_string(out.join("full/sample/battery.md")).unwrap()
    );
    assert!(out.join("merged/sample/index.html").is_file());

    // A shard missing, a shard twice, a report of an unsharded run.
    sb.run(&["merge", &dir("s1"), "--reports", &dir("m2")])
        .expect_code(2)
        .stderr_has("shard(s) 2 of 2 missing");
    sb.run(&["merge", &dir("s1"), &dir("s1"), "--reports", &dir("m3")])
        .expect_code(2)
        .stderr_has("shard 1/2 given twice");
    sb.run(&["merge", &dir("s1"), &dir("full"), "--reports", &dir("m4")])
        .expect_code(2)
        .stderr_has("not a shard's report");

    // A shard of another tree, or balanced by other timings, is foreign.
    for (field, value, says) in [
        (
            "tree_fingerprint",
            serde_json::json!("0000"),
            "the tree's fingerprint",
        ),
        (
            "timings",
            serde_json::json!({"kind": "report", "path": "old.json", "sha256": "ab"}),
            "the timings that balanced them",
        ),
    ] {
        let copy = out.join(format!("s2-{field}"));
        std::fs::create_dir_all(copy.join("sample")).unwrap();
        let mut r: serde_json::Value = serde_json::from_str(
            &std::fs::read_to_string(out.join("s2/sample/battery.json")).unwrap(),
        )
        .unwrap();
        r["shard"][field] = value;
        std::fs::write(copy.join("sample/battery.json"), r.to_string()).unwrap();
        sb.run(&[
            "merge",
            &dir("s1"),
            copy.to_str().unwrap(),
            "--reports",
            &dir("m5"),
        ])
        .expect_code(2)
        .stderr_has(says);
    }
}

#[test]
fn timings_balance_the_shards_and_are_recorded() {
    let sb = Sandbox::new();
    let catalog = short_catalog(&sb);
    let out = sb.dir.path();
    let timings = out.join("timings.json");
    // An earlier report in which `clamp-upper-inverted` took far longer than the rest.
    let mutations: Vec<serde_json::Value> = [
        ("add-subtracts", 1.0),
        ("max-takes-min", 1.0),
        ("clamp-upper-inverted", 50.0),
        ("even-negative-odd", 1.0),
        ("add-does-not-compile", 1.0),
    ]
    .iter()
    .map(|(id, s)| serde_json::json!({"id": id, "build_seconds": s, "test_seconds": 0.5}))
    .collect();
    std::fs::write(
        &timings,
        serde_json::json!({ "mutations": mutations }).to_string(),
    )
    .unwrap();
    let t = timings.display().to_string();
    let reports = out.join("s1").display().to_string();
    sb.run(&[
        "battery",
        &catalog,
        "--shard",
        "1/2",
        "--timings",
        &t,
        "--reports",
        &reports,
    ]);
    let r = json(&out.join("s1/sample/battery.json"), &sb.ws);
    assert_eq!(
        r["shard"]["mutations"],
        serde_json::json!(["clamp-upper-inverted"])
    );
    assert_eq!(r["shard"]["timings"]["kind"], "report");

    // A timings file that is not a battery report is refused, naming the field.
    std::fs::write(&timings, r#"{"mutations": [{"id": "x"}]}"#).unwrap();
    sb.run(&["battery", &catalog, "--shard", "1/2", "--timings", &t])
        .expect_code(2)
        .stderr_has("mutations[0].build_seconds");
    sb.run(&["battery", &catalog, "--shard", "3/2"])
        .expect_code(2);
}
