//! The system layer every tool shares: child processes (one runner, process groups,
//! timeouts, interruption, the journal of running groups), interruption by signals, the
//! host lock, progress output, standard streams that never panic, exit codes, and the bound
//! on how many children run at once.

pub mod exit;
pub mod interrupt;
pub mod lock;
pub mod output;
pub mod pool;
pub mod process;
pub mod progress;
pub mod runner;
pub mod slots;
