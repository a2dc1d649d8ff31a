//! The places a report points at on the diff: each survived mutant and unmet expectation, on the mutated line, with the file relative to the repository root.
//!
//! One [`Finding`] is what a code-scanning result (SARIF, [`super::sarif`]), a GitLab
//! code-quality entry ([`super::codequality`]) and a GitHub Actions workflow command
//! ([`super::workflow`]) are each made from, so the three say the same thing.

use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::battery::report::generated::{GeneratedMutant, Status as GenStatus};
use crate::battery::report::schema::{BatteryReport, MutationReport};
use crate::battery::report::verdict::{Expectation, Verdict};
use crate::battery::select::catalog::Role;

/// What kind of finding: one SARIF rule each.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Rule {
    /// A mutation the catalog expects killed survived: the tests are weak here (error).
    SurvivedMutant,
    /// A mutation's expectation is unmet otherwise: killed by other tests than the named
    /// ones, a gap that is now killed, a verdict no test run could give (error).
    UnmetExpectation,
    /// A mutation the catalog records as a known gap survived, as expected (note).
    KnownGap,
    /// A generated (cargo-mutants) mutant every test passed under (error).
    MissedMutant,
}

impl Rule {
    /// Every rule, in SARIF `rules` order.
    pub const ALL: [Rule; 4] = [
        Rule::SurvivedMutant,
        Rule::UnmetExpectation,
        Rule::KnownGap,
        Rule::MissedMutant,
    ];

    /// The rule's id (`harness/survived-mutant`).
    pub fn id(self) -> &'static str {
        match self {
            Rule::SurvivedMutant => "harness/survived-mutant",
            Rule::UnmetExpectation => "harness/unmet-expectation",
            Rule::KnownGap => "harness/known-gap",
            Rule::MissedMutant => "harness/missed-mutant",
        }
    }

    /// A short description of the rule.
    pub fn description(self) -> &'static str {
        match self {
            Rule::SurvivedMutant => {
                "A mutation the catalog expects its named tests to kill survived: every test passed with this line changed."
            }
            Rule::UnmetExpectation => {
                "A mutation's expectation is unmet: it was killed by other tests than the named ones, a known gap is now killed, or it could not be judged."
            }
            Rule::KnownGap => {
                "A mutation the catalog records as a known gap survived, as the catalog says it does."
            }
            Rule::MissedMutant => {
                "A generated mutant (cargo-mutants) was missed: every test passed with this line changed."
            }
        }
    }

    /// The level it is reported at.
    pub fn level(self) -> Level {
        match self {
            Rule::SurvivedMutant | Rule::UnmetExpectation | Rule::MissedMutant => Level::Error,
            Rule::KnownGap => Level::Note,
        }
    }
}

/// How serious a finding is (SARIF's `level`; a workflow command's `error` / `notice`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Level {
    /// Fails the check.
    Error,
    /// Worth a look.
    Warning,
    /// For information.
    Note,
}

/// One finding on a source line.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Finding {
    /// Its rule.
    pub rule: Rule,
    /// The battery (or `mutants`) that found it.
    pub battery: String,
    /// The mutation's id or the generated mutant's name: with `battery`, it tells findings
    /// apart across runs (fingerprints).
    pub id: String,
    /// The file, relative to the repository root, `/`-separated.
    pub file: String,
    /// 1-based line of the mutated span's start.
    pub line: usize,
    /// 1-based column of its start, when known.
    pub column: Option<usize>,
    /// 1-based line of its end, when known.
    pub end_line: Option<usize>,
    /// 1-based column just past its end, when known.
    pub end_column: Option<usize>,
    /// A one-line title.
    pub title: String,
    /// The whole message.
    pub message: String,
}

/// The repository root that holds `workspace` (the work tree of the git repository found
/// from it upwards); `None` outside a repository.
pub fn repository_root(workspace: &Path) -> Option<PathBuf> {
    let repo = git2::Repository::discover(workspace).ok()?;
    let dir = repo.workdir()?;
    dir.canonicalize().ok().or_else(|| Some(dir.to_path_buf()))
}

/// `file` (relative to `workspace`) relative to `root`, `/`-separated; relative to the
/// workspace when the workspace is not under `root` or no root is known.
pub fn relative_to(root: Option<&Path>, workspace: &Path, file: &Path) -> String {
    let full = workspace.join(file);
    let rel = root
        .and_then(|r| {
            let ws = workspace
                .canonicalize()
                .unwrap_or_else(|_| workspace.to_path_buf());
            ws.join(file)
                .strip_prefix(r)
                .ok()
                .map(Path::to_path_buf)
                .or_else(|| full.strip_prefix(r).ok().map(Path::to_path_buf))
        })
        .unwrap_or_else(|| file.to_path_buf());
    rel.components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect::<Vec<_>>()
        .join("/")
}

fn rule_of(m: &MutationReport) -> Option<Rule> {
    match (m.expectation, m.verdict, m.role) {
        (Expectation::Unmet, Verdict::Survived, _) => Some(Rule::SurvivedMutant),
        (Expectation::Unmet, _, _) => Some(Rule::UnmetExpectation),
        (Expectation::Met, Verdict::Survived, Role::Gap) => Some(Rule::KnownGap),
        (Expectation::Met, _, _) => None,
    }
}

fn message_of(m: &MutationReport, rule: Rule) -> (String, String) {
    let replaced = format!(
        "`{}` put in place of the original at line {}",
        m.replace.lines().next().unwrap_or(""),
        m.line
    );
    let title = match rule {
        Rule::SurvivedMutant => format!("mutation {} survived", m.id),
        Rule::KnownGap => format!("known gap {} survived", m.id),
        _ => format!("mutation {}: expectation UNMET ({})", m.id, m.verdict),
    };
    let mut message = format!("{}: {} ({}, {replaced})", title, m.title, m.role);
    if !m.expected_killers.is_empty() && rule != Rule::KnownGap {
        message.push_str(&format!(
            "; expected killers: {}",
            m.expected_killers.join(", ")
        ));
    }
    if !m.reasons.is_empty() {
        message.push_str(&format!("; {}", m.reasons.join("; ")));
    }
    (title, message)
}

/// The findings of generated (cargo-mutants) mutants: one per missed mutant, on its line,
/// the file (relative to `workspace`) made relative to `root`; `battery` names the run.
pub fn of_generated(
    battery: &str,
    mutants: &[GeneratedMutant],
    workspace: &Path,
    root: Option<&Path>,
) -> Vec<Finding> {
    mutants
        .iter()
        .filter(|m| m.status == GenStatus::Missed)
        .map(|m| {
            let title = format!("missed mutant in {}", m.function);
            Finding {
                rule: Rule::MissedMutant,
                battery: battery.to_string(),
                id: m.name.clone(),
                file: relative_to(root, workspace, Path::new(&m.file)),
                line: m.line.max(1),
                column: None,
                end_line: None,
                end_column: None,
                message: format!(
                    "{title}: every test passed with `{}` ({}; {})",
                    m.replacement, m.genre, m.name
                ),
                title,
            }
        })
        .collect()
}

/// The findings of a battery's report: one per mutation whose expectation is unmet and
/// one per known gap that survived, on the mutated span, then one per missed generated
/// mutant inside the diff (`--since --mutants`), the file relative to `root` (see
/// [`relative_to`]). Mutations whose expectation is met otherwise give none.
pub fn of_battery(r: &BatteryReport, root: Option<&Path>) -> Vec<Finding> {
    let generated = r
        .generated_in_diff
        .iter()
        .flat_map(|g| of_generated(&r.catalog.name, &g.mutants, &r.catalog.workspace, root));
    r.mutations
        .iter()
        .filter_map(|m| {
            let rule = rule_of(m)?;
            let (title, message) = message_of(m, rule);
            Some(Finding {
                rule,
                battery: r.catalog.name.clone(),
                id: m.id.clone(),
                file: relative_to(root, &r.catalog.workspace, &m.file),
                line: m.line.max(1),
                column: (m.column > 0).then_some(m.column),
                end_line: (m.end_line > 0).then_some(m.end_line),
                end_column: (m.end_column > 0).then_some(m.end_column),
                title,
                message,
            })
        })
        .chain(generated)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_of_a_workspace_inside_the_repository_is_named_from_the_repository_root() {
        let root = Path::new("/repo");
        let ws = Path::new("/repo/fixtures/workspaces/sample");
        assert_eq!(
            relative_to(Some(root), ws, Path::new("src/lib.rs")),
            "fixtures/workspaces/sample/src/lib.rs"
        );
        assert_eq!(relative_to(None, ws, Path::new("src/lib.rs")), "src/lib.rs");
        assert_eq!(
            relative_to(Some(Path::new("/elsewhere")), ws, Path::new("src/lib.rs")),
            "src/lib.rs"
        );
    }
}
