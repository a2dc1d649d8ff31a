//! The workflow interpreter without real weights: its graph ops against plain references,
//! validation and request binding over a fake backend, the committed package schema and fixture
//! packages.
//!
//! One test binary of several modules (one per topic, each a former `tests/*.rs` binary of its own):
//! the suite links a few binaries instead of one per file. A test is named `module::test`.

mod workflow_fixtures;
mod workflow_interpreter;
mod workflow_ops;
mod workflow_schema;
