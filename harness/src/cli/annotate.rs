//! Under GitHub Actions, the findings of a run printed as workflow commands, so that each lands on its line of the pull request's diff.

use std::path::Path;

use crate::battery::report::findings::{self, Finding};
use crate::battery::report::schema::BatteryReport;
use crate::battery::report::workflow;

/// Prints `findings` as workflow commands on standard output when the process runs under
/// GitHub Actions (`GITHUB_ACTIONS=true`); prints nothing otherwise.
pub fn print(findings: &[Finding]) {
    if workflow::under_github_actions() {
        print!("{}", workflow::commands(findings));
    }
}

/// [`print`] for the findings of battery reports.
pub fn print_batteries<'a>(reports: impl IntoIterator<Item = &'a BatteryReport>) {
    if !workflow::under_github_actions() {
        return;
    }
    let mut all = Vec::new();
    for r in reports {
        let root = findings::repository_root(&r.catalog.workspace);
        all.extend(findings::of_battery(r, root.as_deref()));
    }
    print(&all);
}

/// [`print`] for a mutants report whose files are relative to `workspace`.
pub fn print_mutants(r: &crate::mutants::MutantsReport, workspace: &Path) {
    if workflow::under_github_actions() {
        print(&crate::mutants::findings(r, workspace));
    }
}
