//! The execute stage: one battery run, written once for both modes.
//!
//! [`run`] holds the phases and the `ModeRun` trait the two modes implement:
//! [`rebuild`] (each mutation written into the user's tree, journaled and restored by
//! [`workspace`]) and [`switch`] (every mutation compiled once into a scratch copy,
//! [`scratch`], behind a run-time switch that [`instrument`] writes; rustc's errors located
//! by [`diagnostics`]; the tests that reach each switched function found by [`reach`], and
//! each reach-selected mutant's own timeout set by [`mutant_timeout`]; up to
//! N test runs at once by [`parallel`]; an unchanged switched build kept fresh from one run to
//! the next by [`built_sources`]; code behind `cfg` gates found uncompiled by rustc, [`cfg_probe`]).
//! [`mode_choice`] picks the mode when none is given. [`stop`] is why a run ends early; [`cache`] reuses
//! verdicts whose evidence is unchanged (`--incremental`).

pub mod built_sources;
pub mod cache;
pub mod cfg_probe;
pub mod diagnostics;
pub mod instrument;
pub mod mode_choice;
pub mod mutant_timeout;
pub mod parallel;
pub mod reach;
pub mod rebuild;
pub mod run;
pub mod scratch;
pub mod stop;
pub mod switch;
pub mod workspace;
