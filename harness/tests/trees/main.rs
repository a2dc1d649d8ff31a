//! The harness on other trees: other people's workspaces against cargo-mutants, generated
//! workspaces (reach and audit properties) and a recorded cargo-mutants run.
//!
//! One test binary of several modules (one per topic, each a former `tests/*.rs` binary of its own):
//! the suite links a few binaries instead of one per file. A test is named `module::test`.

#[path = "../common/mod.rs"]
mod common;

mod audit_property;
mod corpus;
mod mutants;
mod reach_property;
