//! `harness lane-audit`: which CI lanes ran the must-run tests.

use super::ci_answer;
use crate::system::exit::ExitCode;

/// Runs `harness lane-audit`; returns the exit code.
pub fn run(args: &crate::ci::audit::LaneAuditArgs) -> ExitCode {
    ci_answer(crate::ci::audit::run(args))
}
