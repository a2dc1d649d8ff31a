//! Findings as GitHub Actions workflow commands (`::error file=...,line=...::...`), which the runner shows on the pull request's diff.
//!
//! The format is GitHub's "workflow commands" (`::error`, `::warning`, `::notice`, with
//! the properties `file`, `line`, `endLine`, `col`, `endColumn` and `title`), escaped as
//! the Actions toolkit escapes them: in the message `%`, CR and LF; in a property also
//! `:` and `,`. They are printed only under GitHub Actions (`GITHUB_ACTIONS=true`).

use std::fmt::Write as _;

use crate::battery::report::findings::{Finding, Level};

/// Whether the process runs as a GitHub Actions step (`GITHUB_ACTIONS` is `true`).
pub fn under_github_actions() -> bool {
    std::env::var("GITHUB_ACTIONS").is_ok_and(|v| v == "true")
}

fn escape_data(s: &str) -> String {
    s.replace('%', "%25")
        .replace('\r', "%0D")
        .replace('\n', "%0A")
}

fn escape_property(s: &str) -> String {
    escape_data(s).replace(':', "%3A").replace(',', "%2C")
}

/// One workflow command per finding, one a line.
pub fn commands(findings: &[Finding]) -> String {
    let mut out = String::new();
    for f in findings {
        let command = match f.rule.level() {
            Level::Error => "error",
            Level::Warning => "warning",
            Level::Note => "notice",
        };
        let mut props = format!("file={},line={}", escape_property(&f.file), f.line);
        if let Some(l) = f.end_line {
            let _ = write!(props, ",endLine={}", l.max(f.line));
        }
        // Columns are honoured only on a one-line span.
        if f.end_line.is_none_or(|l| l <= f.line) {
            if let Some(c) = f.column {
                let _ = write!(props, ",col={c}");
            }
            if let Some(c) = f.end_column {
                let _ = write!(props, ",endColumn={c}");
            }
        }
        let _ = writeln!(
            out,
            "::{command} {props},title={}::{}",
            escape_property(&f.title),
            escape_data(&f.message)
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::battery::report::findings::Rule;

    #[test]
    fn properties_and_message_are_escaped_as_the_toolkit_does() {
        let f = Finding {
            rule: Rule::SurvivedMutant,
            battery: "b".into(),
            id: "m".into(),
            file: "src/a,b:c.rs".into(),
            line: 3,
            column: Some(5),
            end_line: Some(3),
            end_column: Some(9),
            title: "mutation m survived: 100%".into(),
            message: "line one\nline two, 50%\r".into(),
        };
        assert_eq!(
            commands(&[f]),
            "::error file=src/a%2Cb%3Ac.rs,line=3,endLine=3,col=5,endColumn=9,title=mutation m survived%3A 100%25::line one%0Aline two, 50%25%0D\n"
        );
    }
}
