//! `harness cache`: the verdict cache of `--incremental`.

use std::path::Path;

use clap::Subcommand;

use crate::battery;
use crate::system::exit::ExitCode;

/// `harness cache` subcommands.
#[derive(Debug, Subcommand)]
pub enum CacheCommand {
    /// Remove every cached verdict: the next `--incremental` run runs every mutation.
    Clear,
}

/// Runs a `harness cache` subcommand; returns the exit code.
pub fn run(state: &Path, command: &CacheCommand) -> ExitCode {
    match command {
        CacheCommand::Clear => match battery::execute::cache::clear(state) {
            Ok(n) => {
                println!(
                    "removed {n} verdict cache file(s) from {}",
                    battery::execute::cache::cache_dir(state).display()
                );
                ExitCode::AllMet
            }
            Err(e) => {
                eprintln!(
                    "harness: {}: cannot clear the verdict cache: {e}",
                    battery::execute::cache::cache_dir(state).display()
                );
                ExitCode::Refused
            }
        },
    }
}
