//! `harness init`: write a starter catalog for a package.

use std::path::Path;

use crate::battery;
use crate::system::exit::{EXIT_ALL_MET, EXIT_REFUSED};

/// `harness init`: the starter catalog of the package, written to `output`.
pub fn run(state: &Path, workspace: &Path, package: Option<&str>, output: Option<&Path>) -> i32 {
    let listing = match battery::starter::list(workspace, package, state) {
        Ok(l) => l,
        Err(e) => {
            eprintln!("harness: init: {e}");
            return EXIT_REFUSED;
        }
    };
    let out = match output {
        Some(o) => o.to_path_buf(),
        None => workspace
            .join("mutations")
            .join(format!("{}.toml", listing.probe.spec.package)),
    };
    if let Err(e) = battery::starter::write_catalog(&listing, &out) {
        eprintln!("harness: init: {e}");
        return EXIT_REFUSED;
    }
    println!(
        "wrote {} (package {}, {} tests); next: add a [[mutation]], then `harness check --list {}` and `harness battery {}`",
        out.display(),
        listing.probe.spec.package,
        listing.tests.len(),
        out.display(),
        out.display()
    );
    EXIT_ALL_MET
}
