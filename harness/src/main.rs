//! `harness` command-line entry point.

use clap::Parser;

fn main() {
    if let Err(e) = harness::system::interrupt::install() {
        eprintln!("harness: cannot install signal handlers: {e}");
        std::process::exit(harness::system::exit::ExitCode::Refused.code());
    }
    let cli = harness::cli::Cli::parse();
    std::process::exit(harness::cli::run(cli).status());
}
