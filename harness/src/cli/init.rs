//! `harness init`: write a starter catalog for a package.

use std::path::Path;

use crate::battery;
use crate::system::exit::ExitCode;

/// `harness init`: the starter catalog of the package, written to `output`.
pub fn run(
    state: &Path,
    workspace: &Path,
    package: Option<&str>,
    output: Option<&Path>,
) -> ExitCode {
    let listing = match battery::select::starter::list(workspace, package, state) {
        Ok(l) => l,
        Err(e) => {
            eprintln!("harness: init: {e}");
            return ExitCode::Refused;
        }
    };
    let out = match output {
        Some(o) => o.to_path_buf(),
        None => workspace
            .join("mutations")
            .join(format!("{}.toml", listing.probe.spec.package)),
    };
    if let Err(e) = battery::select::starter::write_catalog(&listing, &out) {
        eprintln!("harness: init: {e}");
        return ExitCode::Refused;
    }
    let skipped = match listing.ignored.len() {
        0 => String::new(),
        n => format!(", {n} skipped as marked ignored"),
    };
    println!(
        "wrote {} (package {}, {} tests{skipped}); next: add a [[mutation]], then `harness check --list {}` and `harness battery {}`",
        out.display(),
        listing.probe.spec.package,
        listing.tests.len(),
        out.display(),
        out.display()
    );
    if !listing.left_out.is_empty() {
        println!(
            "the default features leave {} gated place(s) of the code out (features: {}); the catalog lists them and offers [[config]] sets that build them",
            listing.left_out.len(),
            listing.gated_features().join(", ")
        );
    }
    ExitCode::AllMet
}
