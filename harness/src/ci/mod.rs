//! The CI questions: did a job test the fix (`base-check`), did a required lane run the tests that matter (`lane-audit`), and the gate that runs the test command, audits its log and runs the batteries.

pub mod audit;
pub mod cibase;
pub mod gate;
pub mod jobs;
pub mod nextest;
pub mod recording;
pub mod targets;
pub mod testlog;
