//! `harness lane-audit`: which CI lanes ran the must-run tests.

use super::ci_answer;

/// Runs `harness lane-audit`; returns the exit code.
pub fn run(args: &crate::ci::audit::LaneAuditArgs) -> i32 {
    ci_answer(crate::ci::audit::run(args))
}
