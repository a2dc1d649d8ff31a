//! `harness`: proves that a Cargo workspace's tests bite, by running named mutation batteries.
//!
//! Three tools share one system layer:
//!
//! - [`battery`]: a catalog of hand-written mutations (see [`battery::select::catalog`] for
//!   the format) is applied to a workspace one at a time (rebuild mode) or compiled once
//!   behind a run-time switch (switch mode); a fixed list of tests runs against each and
//!   every mutation must be killed by the tests meant to kill it. Every way such an
//!   instrument can silently measure nothing is a refusal
//!   ([`battery::report::refusal::RefusalKind`]).
//! - the CI questions: [`ci::cibase`] (`base-check`), [`ci::audit`] (`lane-audit`) over the CI logs
//!   [`ci::testlog`] reads, and [`ci::gate`] (test command, audit and batteries in one report).
//! - [`mutants`]: the bridge to cargo-mutants (run it under the host lock, import its
//!   outcomes, or feed its generated mutants to the battery).
//! - [`door`]: the one way into a battery run (plan, preflight, lock, run) that `battery`,
//!   `gate` and `mutants --via-harness` share.
//! - [`system`]: processes and their groups, interruption, the host lock, progress output;
//!   [`cargo`] drives cargo itself, [`doctest_keep`] keeps switch mode's doc test
//!   executables for running them again without rustdoc, and [`libtest_direct`] runs its
//!   libtest executables without `cargo test`.
//!
//! The crate knows nothing about the workspaces it tests. `docs/design.md` describes the
//! architecture.

#![warn(missing_docs)]

// Printing never panics in this crate: these shadow std's macros for every module below, and
// a write to a closed stream is dropped (see `system::output`).
macro_rules! println {
    () => { $crate::system::output::out(format_args!(""), true) };
    ($($arg:tt)*) => { $crate::system::output::out(format_args!($($arg)*), true) };
}
macro_rules! print {
    ($($arg:tt)*) => { $crate::system::output::out(format_args!($($arg)*), false) };
}
macro_rules! eprintln {
    () => { $crate::system::output::err(format_args!(""), true) };
    ($($arg:tt)*) => { $crate::system::output::err(format_args!($($arg)*), true) };
}

pub mod battery;
pub mod cargo;
pub mod ci;
pub mod cli;
pub mod doctest_keep;
pub mod door;
pub mod libtest;
pub mod libtest_direct;
pub mod mutants;
pub mod system;
