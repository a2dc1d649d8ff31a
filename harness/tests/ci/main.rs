//! CI questions on captured logs and real git histories: base checks (checkouts, merge queues)
//! and lane audits.
//!
//! One test binary of several modules (one per topic, each a former `tests/*.rs` binary of its own):
//! the suite links a few binaries instead of one per file. A test is named `module::test`.

#[path = "../common/mod.rs"]
mod common;

mod base_check;
mod base_check_checkouts;
mod base_check_queues;
mod ci_corpus;
mod lane_audit;
