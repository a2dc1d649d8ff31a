//! `harness`: proves that a Cargo workspace's tests bite, by running named mutation batteries.

pub mod audit;
pub mod cibase;
pub mod testlog;
