//! `harness tests`: every test of a package that is not marked ignored, one a line, as a catalog's `tests` take them.

use std::path::Path;

use crate::battery;
use crate::system::exit::ExitCode;

/// `harness tests`: every test of the package, one a line; the ignored ones are named on
/// standard error.
pub fn run(state: &Path, workspace: &Path, package: Option<&str>) -> ExitCode {
    match battery::select::starter::list(workspace, package, state) {
        Ok(l) => {
            for t in &l.tests {
                println!("{t}");
            }
            for t in &l.ignored {
                eprintln!(
                    "harness: tests: left out, it marks itself ignored (a catalog skips it): {t}"
                );
            }
            ExitCode::AllMet
        }
        Err(e) => {
            eprintln!("harness: tests: {e}");
            ExitCode::Refused
        }
    }
}
