//! `harness base-check`: whether named commits are in the base and merge each CI job tested.

use super::ci_answer;
use crate::system::exit::ExitCode;

/// Runs `harness base-check`; returns the exit code.
pub fn run(args: &crate::ci::cibase::BaseCheckArgs) -> ExitCode {
    ci_answer(crate::ci::cibase::run(args))
}
