//! `harness tests`: every test of a package, one a line, as a catalog's `tests` take them.

use std::path::Path;

use crate::battery;
use crate::system::exit::{EXIT_ALL_MET, EXIT_REFUSED};

/// `harness tests`: every test of the package, one a line.
pub fn run(state: &Path, workspace: &Path, package: Option<&str>) -> i32 {
    match battery::starter::list(workspace, package, state) {
        Ok(l) => {
            for t in &l.tests {
                println!("{t}");
            }
            EXIT_ALL_MET
        }
        Err(e) => {
            eprintln!("harness: tests: {e}");
            EXIT_REFUSED
        }
    }
}
