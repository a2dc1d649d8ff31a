//! The battery report as a Stryker document (`mutation-report.json`).
//!
//! The mutation-testing-report-schema 3.x, `schemaVersion` "2".
//!
//! Mapping: KILLED -> `Killed`, SURVIVED -> `Survived`, UNVIABLE -> `CompileError`, TIMEOUT
//! -> `Timeout`; one mutant per catalog mutation, located at the first occurrence of its
//! `find` text; `killedBy` holds the failing listed tests, `statusReason` the expectation
//! and its reasons, `mutatorName` the role.

use std::collections::BTreeMap;

use crate::battery::report::schema::{BatteryReport, SCHEMA};
use crate::battery::report::verdict::Verdict;
use crate::cargo::Outcome;

/// The mutation-testing-report-schema document (see the module docs for the mapping). Reads the
/// source of every mutated file from the workspace.
///
/// Errors: a mutated file that cannot be read..
pub fn stryker(r: &BatteryReport) -> std::io::Result<serde_json::Value> {
    use serde_json::json;
    let mut files: BTreeMap<String, serde_json::Value> = BTreeMap::new();
    for m in &r.mutations {
        let key = m.file.to_string_lossy().replace('\\', "/");
        if !files.contains_key(&key) {
            let source = std::fs::read_to_string(r.catalog.workspace.join(&m.file))?;
            files.insert(
                key.clone(),
                json!({"language": "rust", "source": source, "mutants": []}),
            );
        }
        let status = match m.verdict {
            Verdict::Killed => "Killed",
            Verdict::Survived => "Survived",
            Verdict::Unviable => "CompileError",
            Verdict::Timeout => "Timeout",
            Verdict::Crashed => "RuntimeError",
            Verdict::TestsMissing => "NoCoverage",
            Verdict::NotCompiled => "Ignored",
            Verdict::NoCoverage => "NoCoverage",
        };
        let reason = match (&m.compiler_error, m.reasons.is_empty()) {
            (Some(e), _) => e.clone(),
            (None, true) => format!("expectation {}", m.expectation),
            (None, false) => format!("expectation {}: {}", m.expectation, m.reasons.join("; ")),
        };
        let completed = m
            .outcomes
            .values()
            .filter(|o| matches!(o, Outcome::Passed | Outcome::Failed))
            .count();
        let mutant = json!({
            "id": m.id,
            "mutatorName": m.role.to_string(),
            "description": m.title,
            "replacement": m.replace,
            "location": {
                "start": {"line": m.line, "column": m.column},
                "end": {"line": m.end_line, "column": m.end_column},
            },
            "status": status,
            "statusReason": reason,
            "killedBy": m.failed_tests.iter().map(|f| f.name.clone()).collect::<Vec<_>>(),
            "coveredBy": m.reached_by.as_ref().unwrap_or(&r.catalog.tests),
            "testsCompleted": completed,
            "duration": (m.test_seconds * 1000.0).round(),
        });
        files
            .get_mut(&key)
            .and_then(|f| f["mutants"].as_array_mut())
            .expect("inserted above")
            .push(mutant);
    }
    let tests: Vec<serde_json::Value> = r
        .catalog
        .tests
        .iter()
        .map(|t| json!({"id": t, "name": t}))
        .collect();
    let test_file = format!(
        "{} ({})",
        r.catalog.package,
        r.catalog.test_targets.join(", ")
    );
    Ok(json!({
        "schemaVersion": "2",
        "thresholds": {"high": 80, "low": 60},
        "projectRoot": r.catalog.workspace,
        "files": files,
        "testFiles": { test_file: {"tests": tests} },
        "config": {"harness_schema": SCHEMA, "battery": r.catalog.name},
    }))
}
