//! The admission path without the real model: the scheduler's rules and properties, the
//! engine's request funnel and accessors, the admission contract on the engine and the service,
//! the prefix cache, and the HTTP server over real HTTP (the targets of
//! mutations/admission.toml and mutations/engine-mutants.toml).
//!
//! One test binary of several modules (one per topic, each a former `tests/*.rs` binary of its own):
//! the suite links a few binaries instead of one per file. A test is named `module::test`.

#[path = "../common/mod.rs"]
mod common;

mod admission_contract;
mod admission_service;
mod prefix_cache;
mod runtime_engine;
mod runtime_requests;
mod scheduler_props;
mod scheduler_rules;
mod serve_http;
