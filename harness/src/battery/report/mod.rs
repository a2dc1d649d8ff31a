//! The report stage: what a battery found and the files that say it.
//!
//! [`verdict`] judges each mutation (verdict, expectation, the kill matrix); [`refusal`]
//! names the ways a battery refuses; [`schema`] is the JSON report (`battery.json`),
//! [`generated`] its cargo-mutants entries; [`text`] renders it as Markdown and as the
//! terminal table, [`stryker`] as the Stryker document, [`html`] as the HTML page; [`files`]
//! writes them all into the report directory; [`merge`] joins the reports of a battery's
//! shards. [`findings`] are what a report points at on the diff (each survived mutant and
//! unmet expectation, on the mutated line), written as [`sarif`] for code scanning, as
//! [`codequality`] for GitLab and printed as GitHub Actions [`workflow`] commands.

pub mod codequality;
pub mod files;
pub mod findings;
pub mod generated;
pub mod html;
pub mod merge;
pub mod refusal;
pub mod sarif;
pub mod schema;
pub mod stryker;
pub mod text;
pub mod verdict;
pub mod workflow;
