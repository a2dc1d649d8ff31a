//! The real `harness` binary on private copies of the sample workspaces: batteries in every
//! mode, faults, the gate, the front door, the host lock, shards, `--since`, `--incremental`
//! and a newcomer's first run.
//!
//! One test binary of several modules (one per topic, each a former `tests/*.rs` binary of its own):
//! the suite links a few binaries instead of one per file. A test is named `module::test`.

#[path = "../common/mod.rs"]
mod common;

mod annotations;
mod battery;
mod door;
mod faults;
mod gate;
mod incremental;
mod lock;
mod newcomer;
mod parallel;
mod shard;
mod since;
mod switch;
mod verdict_faults;
