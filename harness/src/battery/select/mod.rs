//! The select stage: what a battery runs, read before anything is built.
//!
//! The catalog and its checks against the tree ([`catalog`], with [`inert`] for mutations
//! that change nothing the compiler reads), which mutations a run takes (`--since`:
//! [`diffscope`], and the changed functions no mutation guards, [`unguarded`]; `--shard`:
//! [`shard`]), static reads of the sources ([`functions`]: the function spans of a file;
//! [`gates`]: the `cfg(feature)` that keeps a file out of a build; [`cfg_spans`]: the `cfg`
//! gates around a span inside a file; [`lints`]: lint levels
//! that make unused code an error), and the test names a catalog lists ([`starter`]: a
//! package's tests and a starter catalog; [`nearest`]: the real name nearest to a wrong one).

pub mod catalog;
pub mod cfg_spans;
pub mod diffscope;
pub mod functions;
pub mod gates;
pub mod inert;
pub mod lints;
pub mod nearest;
pub mod shard;
pub mod starter;
pub mod unguarded;
