//! Results on the diff: a battery with a survivor, run as a GitHub Actions step
//! (`GITHUB_ACTIONS=true`), prints an `::error` workflow command on the mutated file and line
//! (relative to the repository root), and every run writes a SARIF 2.1.0 file that the
//! official schema (vendored in fixtures/schemas/) accepts, and GitLab's code-quality report.

use crate::common;

use std::path::Path;

use common::{Sandbox, sarif_errors as schema_errors, sarif_validator};

const CATALOG: &str = r#"name = "survivor"
workspace = ".."
package = "sample"
test_targets = ["contract"]
select = "contract::"
tests = [
    "contract::adds_two_numbers",
    "contract::max_of_picks_largest",
    "contract::max_of_empty_is_none",
    "contract::is_even_on_small_numbers",
    "contract::countdown_counts_steps",
    "contract::clamp_bounds",
    "contract::flaky_when_marker_is_absent",
]

[[mutation]]
id = "add-subtracts"
title = "add subtracts instead"
role = "defect"
file = "src/lib.rs"
find = "a + b"
replace = "a - b"
killed_by = ["contract::adds_two_numbers"]
rationale = "The sum is the whole contract of `add`."

[[mutation]]
id = "even-negative-odd"
title = "is_even answers true for negative odd numbers"
role = "defect"
file = "src/lib.rs"
find = "n % 2 == 0"
replace = "n % 2 != 1"
killed_by = ["contract::is_even_on_small_numbers"]
rationale = "Taken as a defect here: no test checks negative numbers, so it survives."
"#;

/// The sample workspace at `ws/` inside a repository whose root is the sandbox's folder.
fn nested_sandbox() -> Sandbox {
    let sb = Sandbox::new();
    std::fs::remove_dir_all(sb.ws.join(".git")).unwrap();
    git2::Repository::init(sb.dir.path()).unwrap();
    sb.write("mutations/survivor.toml", CATALOG);
    sb
}

/// The 1-based line of the only occurrence of `text` in `file`.
fn line_of(file: &Path, text: &str) -> usize {
    let src = std::fs::read_to_string(file).unwrap();
    assert_eq!(src.matches(text).count(), 1);
    src[..src.find(text).unwrap()].matches('\n').count() + 1
}

#[test]
fn a_survivor_under_github_actions_is_an_error_on_its_line_and_the_sarif_is_valid() {
    let sb = nested_sandbox();
    let catalog = sb.ws.join("mutations/survivor.toml");
    let out = sb
        .cmd()
        .args(["battery", catalog.to_str().unwrap()])
        .env("GITHUB_ACTIONS", "true")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    assert_eq!(
        out.status.code(),
        Some(1),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let line = line_of(&sb.ws.join("src/lib.rs"), "n % 2 == 0");
    let errors: Vec<&str> = stdout
        .lines()
        .filter(|l| l.starts_with("::error "))
        .collect();
    assert_eq!(errors.len(), 1, "{stdout}");
    let want = format!("::error file=ws/src/lib.rs,line={line},");
    assert!(errors[0].starts_with(&want), "{}", errors[0]);
    assert!(
        errors[0].contains("title=mutation even-negative-odd survived::"),
        "{}",
        errors[0]
    );
    assert!(
        errors[0].contains("contract::is_even_on_small_numbers"),
        "{}",
        errors[0]
    );

    let dir = sb.ws.join("reports/survivor");
    let sarif: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("battery.sarif")).unwrap()).unwrap();
    let v = sarif_validator();
    assert_eq!(schema_errors(&v, &sarif), Vec::<String>::new());
    let results = sarif["runs"][0]["results"].as_array().unwrap();
    assert_eq!(results.len(), 1, "{sarif:#}");
    let r = &results[0];
    assert_eq!(r["ruleId"], "harness/survived-mutant");
    assert_eq!(r["level"], "error");
    let loc = &r["locations"][0]["physicalLocation"];
    assert_eq!(loc["artifactLocation"]["uri"], "ws/src/lib.rs");
    assert_eq!(loc["region"]["startLine"], line);
    assert_eq!(
        sarif["runs"][0]["automationDetails"]["id"],
        "harness/survivor/"
    );

    // The validator bites: a log without its version, or a result with a level SARIF does
    // not define, is refused.
    let mut broken = sarif.clone();
    broken.as_object_mut().unwrap().remove("version");
    assert!(!schema_errors(&v, &broken).is_empty());
    let mut broken = sarif.clone();
    broken["runs"][0]["results"][0]["level"] = "fatal".into();
    assert!(!schema_errors(&v, &broken).is_empty());

    let quality: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("codequality.json")).unwrap())
            .unwrap();
    let q = quality.as_array().unwrap();
    assert_eq!(q.len(), 1, "{quality:#}");
    assert_eq!(q[0]["location"]["path"], "ws/src/lib.rs");
    assert_eq!(q[0]["location"]["lines"]["begin"], line);
    assert_eq!(q[0]["severity"], "major");
    assert_eq!(q[0]["fingerprint"].as_str().unwrap().len(), 64);

    // Outside GitHub Actions no workflow command is printed; the files are still written.
    let out = sb
        .cmd()
        .args([
            "battery",
            catalog.to_str().unwrap(),
            "--only",
            "even-negative-odd",
        ])
        .env_remove("GITHUB_ACTIONS")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert!(!stdout.lines().any(|l| l.starts_with("::")), "{stdout}");
    assert!(dir.join("battery.sarif").is_file());
}
