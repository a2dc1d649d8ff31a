//! Findings as a SARIF 2.1.0 log for code scanning (`battery.sarif`, `gate.sarif`, `mutants.sarif`).
//!
//! The format is OASIS's Static Analysis Results Interchange Format 2.1.0 (schema
//! `sarif-schema-2.1.0.json`, vendored in `fixtures/schemas/` for the tests). One run per
//! battery: its tool is `harness` with one rule per [`Rule`], its `automationDetails.id`
//! names the battery (so that code scanning keeps several batteries' uploads apart), and
//! each result is located on the mutated span, the file relative to the repository root
//! (`uriBaseId` `%SRCROOT%`), with a partial fingerprint made of the battery and the
//! mutation's id.

use serde_json::{Value, json};

use crate::battery::report::findings::{Finding, Level, Rule};

/// The `$schema` a SARIF 2.1.0 log names: the schema's own id (OASIS, errata 01).
pub const SARIF_SCHEMA_URI: &str =
    "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json";

fn level(l: Level) -> &'static str {
    match l {
        Level::Error => "error",
        Level::Warning => "warning",
        Level::Note => "note",
    }
}

/// One SARIF run: `battery`'s findings (`findings` may hold other batteries': only its
/// own are taken).
pub fn run(battery: &str, findings: &[Finding]) -> Value {
    let rules: Vec<Value> = Rule::ALL
        .iter()
        .map(|r| {
            json!({
                "id": r.id(),
                "name": r.id().trim_start_matches("harness/"),
                "shortDescription": {"text": r.description()},
                "defaultConfiguration": {"level": level(r.level())},
            })
        })
        .collect();
    let results: Vec<Value> = findings
        .iter()
        .filter(|f| f.battery == battery)
        .map(|f| {
            let mut region = serde_json::Map::new();
            region.insert("startLine".into(), json!(f.line));
            if let Some(c) = f.column {
                region.insert("startColumn".into(), json!(c));
            }
            if let Some(l) = f.end_line {
                region.insert("endLine".into(), json!(l.max(f.line)));
            }
            if let Some(c) = f.end_column {
                region.insert("endColumn".into(), json!(c));
            }
            json!({
                "ruleId": f.rule.id(),
                "ruleIndex": Rule::ALL.iter().position(|r| *r == f.rule).unwrap_or(0),
                "level": level(f.rule.level()),
                "message": {"text": f.message},
                "locations": [{
                    "physicalLocation": {
                        "artifactLocation": {"uri": f.file, "uriBaseId": "%SRCROOT%"},
                        "region": Value::Object(region),
                    }
                }],
                "partialFingerprints": {"harnessFinding/v1": format!("{}:{}", f.battery, f.id)},
            })
        })
        .collect();
    json!({
        "tool": {"driver": {
            "name": "harness",
            "version": env!("CARGO_PKG_VERSION"),
            "rules": rules,
        }},
        "automationDetails": {"id": format!("harness/{battery}/")},
        "columnKind": "unicodeCodePoints",
        "results": results,
    })
}

/// A SARIF 2.1.0 log with one run per name of `batteries`, each with its findings.
pub fn log(batteries: &[String], findings: &[Finding]) -> Value {
    json!({
        "$schema": SARIF_SCHEMA_URI,
        "version": "2.1.0",
        "runs": batteries.iter().map(|b| run(b, findings)).collect::<Vec<_>>(),
    })
}
