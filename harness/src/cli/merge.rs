//! `harness merge`: join the reports of a battery's shards into the unsharded run's report.

use std::path::PathBuf;

use crate::battery::{self, report};
use crate::system::exit::ExitCode;

/// Arguments of `harness merge`.
#[derive(Debug, clap::Args)]
pub struct MergeArgs {
    /// The shards' report folders.
    #[arg(required = true, value_name = "DIR")]
    pub dirs: Vec<PathBuf>,
    /// Where the merged `<catalog>/` folders go.
    #[arg(long, value_name = "OUT")]
    pub reports: PathBuf,
}

/// Runs `harness merge`; returns the worst exit code of the merged reports.
pub fn run(args: &MergeArgs) -> ExitCode {
    match battery::report::merge::merge(&args.dirs, &args.reports) {
        Ok(merged) => {
            let mut code = ExitCode::AllMet;
            for m in merged {
                print!("{}", report::text::table(&m.report));
                for w in &m.written {
                    println!("report: {}", w.display());
                }
                code = code.worst(m.report.exit_code);
            }
            code
        }
        Err(e) => {
            eprintln!("harness: merge: {e}");
            ExitCode::Refused
        }
    }
}
