//! `harness list`: a catalog's mutations with their roles and expected killers.

use std::path::Path;

use super::report_catalog_error;
use crate::battery::select::catalog::Catalog;
use crate::system::exit::ExitCode;

/// Runs `harness list`: one line per mutation of the catalog at `path`; returns the exit
/// code.
pub fn run(path: &Path) -> ExitCode {
    let c = match Catalog::load(path) {
        Ok(c) => c,
        Err(e) => {
            report_catalog_error(&e);
            return ExitCode::Refused;
        }
    };
    let w = c
        .spec
        .mutations
        .iter()
        .map(|m| m.id.len())
        .max()
        .unwrap_or(2);
    for m in &c.spec.mutations {
        let killers = if m.killed_by.is_empty() {
            "(expected to survive)".to_string()
        } else {
            m.killed_by.join(", ")
        };
        println!("{:<w$}  {:<7}  {killers}", m.id, m.role.to_string());
    }
    ExitCode::AllMet
}
