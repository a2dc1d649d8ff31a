//! Findings as a GitLab code-quality report (`codequality.json`), shown on a merge request's diff.
//!
//! GitLab's documented format (the "Code Quality report format", a subset of Code Climate's
//! issue format): a JSON array of objects with `description`, `check_name`, `fingerprint`
//! (unique per finding), `severity` (`info`, `minor`, `major`, `critical`, `blocker`) and
//! `location.path` (relative to the repository root) with `location.lines.begin`.

use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::battery::report::findings::{Finding, Level};

fn severity(l: Level) -> &'static str {
    match l {
        Level::Error => "major",
        Level::Warning => "minor",
        Level::Note => "info",
    }
}

/// The code-quality entries of `findings`; the fingerprint is the SHA-256 of the rule,
/// the battery and the finding's id.
pub fn report(findings: &[Finding]) -> Value {
    Value::Array(
        findings
            .iter()
            .map(|f| {
                let mut h = Sha256::new();
                h.update(f.rule.id().as_bytes());
                h.update([0]);
                h.update(f.battery.as_bytes());
                h.update([0]);
                h.update(f.id.as_bytes());
                let fingerprint: String = h.finalize().iter().map(|b| format!("{b:02x}")).collect();
                json!({
                    "description": f.message,
                    "check_name": f.rule.id(),
                    "fingerprint": fingerprint,
                    "severity": severity(f.rule.level()),
                    "location": {"path": f.file, "lines": {"begin": f.line}},
                })
            })
            .collect(),
    )
}
