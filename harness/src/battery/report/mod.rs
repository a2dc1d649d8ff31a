//! The report stage: what a battery found and the files that say it.
//!
//! [`verdict`] judges each mutation (verdict, expectation, the kill matrix); [`refusal`]
//! names the ways a battery refuses; [`schema`] is the JSON report (`battery.json`),
//! [`generated`] its cargo-mutants entries; [`text`] renders it as Markdown and as the
//! terminal table, [`stryker`] as the Stryker document, [`html`] as the HTML page; [`files`]
//! writes them all into the report directory; [`merge`] joins the reports of a battery's
//! shards.

pub mod files;
pub mod generated;
pub mod html;
pub mod merge;
pub mod refusal;
pub mod schema;
pub mod stryker;
pub mod text;
pub mod verdict;
