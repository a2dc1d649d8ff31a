//! `harness`: proves that a Cargo workspace's tests bite, by running named mutation batteries.
//!
//! A battery (see [`catalog`] for the format) applies hand-written mutations to a workspace
//! one at a time, rebuilds in a private target directory, runs a fixed list of tests and
//! checks that each mutation is killed by the tests meant to kill it. Every way such an
//! instrument can silently measure nothing is a refusal ([`battery::RefusalKind`]). The
//! crate knows nothing about the workspaces it tests.

#![warn(missing_docs)]

pub mod audit;
pub mod battery;
pub mod cargo;
pub mod catalog;
pub mod cibase;
pub mod cli;
pub mod diagnostics;
pub mod gate;
pub mod interrupt;
pub mod libtest;
pub mod lints;
pub mod lock;
pub mod mutants;
pub mod nextest;
pub mod process;
pub mod progress;
pub mod report;
pub mod scratch;
pub mod switch;
pub mod targets;
pub mod testlog;
pub mod verdict;
pub mod workspace;

/// Exit code: every expectation met (and, on a full run, no test UNFALSIFIED).
pub const EXIT_ALL_MET: i32 = 0;
/// Exit code: the tests are weak (some expectation UNMET or some test UNFALSIFIED).
pub const EXIT_WEAK: i32 = 1;
/// Exit code: the instrument could not be trusted (a refusal, a bad catalog, a fault).
pub const EXIT_REFUSED: i32 = 2;
