//! `harness show`: one mutation as a unified diff.

use std::path::Path;

use super::report_catalog_error;
use crate::battery::select::catalog::Catalog;
use crate::system::exit::ExitCode;

/// Runs `harness show`: mutation `id` of the catalog at `path` as a unified diff; returns
/// the exit code.
pub fn run(path: &Path, id: &str) -> ExitCode {
    let res = Catalog::load(path).and_then(|c| c.prepare().map(|p| (c, p)));
    let (c, prepared) = match res {
        Ok(x) => x,
        Err(e) => {
            report_catalog_error(&e);
            return ExitCode::Refused;
        }
    };
    let Some(pm) = prepared.iter().find(|p| c.spec.mutations[p.index].id == id) else {
        eprintln!("harness: {}: no mutation with id {id:?}", path.display());
        return ExitCode::Refused;
    };
    let m = &c.spec.mutations[pm.index];
    println!("# {} ({}): {}", m.id, m.role, m.title);
    if m.killed_by.is_empty() {
        println!("# expected killers: none (expected to survive)");
    } else {
        println!("# expected killers: {}", m.killed_by.join(", "));
    }
    if let Some(msg) = &m.expect_message {
        println!("# expected message: {msg:?}");
    }
    println!("# rationale: {}", m.rationale);
    let old = String::from_utf8_lossy(&pm.original);
    let new = String::from_utf8_lossy(&pm.mutated);
    let name = pm.rel_path.display().to_string();
    let diff = similar::TextDiff::from_lines(old.as_ref(), new.as_ref());
    print!(
        "{}",
        diff.unified_diff()
            .context_radius(3)
            .header(&format!("a/{name}"), &format!("b/{name}"))
    );
    ExitCode::AllMet
}
