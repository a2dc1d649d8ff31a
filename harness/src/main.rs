//! `harness` command-line entry point.

use clap::{Parser, Subcommand};

/// Proves that a Cargo workspace's tests bite, and answers CI's questions about them.
#[derive(Debug, Parser)]
#[command(name = "harness", version)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Whether named commits are in the base and merge each CI job tested (exit 0 every
    /// answer yes or no, 2 any unknown or no checkout line).
    BaseCheck(harness::cibase::BaseCheckArgs),
    /// Which CI lanes ran the must-run tests (exit 0 all ran and passed in a required lane,
    /// 1 an island, failure or truncation, 2 unreadable input).
    LaneAudit(harness::audit::LaneAuditArgs),
}

fn main() {
    let cli = Cli::parse();
    let result = match &cli.command {
        Command::BaseCheck(args) => harness::cibase::run(args),
        Command::LaneAudit(args) => harness::audit::run(args),
    };
    match result {
        Ok(code) => std::process::exit(code),
        Err(e) => {
            eprintln!("harness: error: {e:#}");
            std::process::exit(2);
        }
    }
}
