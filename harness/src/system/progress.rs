//! Progress on standard error: an indicatif bar (current mutation and phase) on a terminal,
//! plain `harness: ...` lines otherwise.

use std::io::IsTerminal;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressStyle};

/// Reports what the battery is doing.
#[derive(Debug)]
pub struct Progress {
    bar: Option<ProgressBar>,
}

impl Progress {
    /// A bar when standard error is a terminal, plain lines otherwise.
    pub fn auto() -> Progress {
        if std::io::stderr().is_terminal() {
            let bar = ProgressBar::new(0);
            bar.set_style(
                ProgressStyle::with_template(
                    "{spinner} [{elapsed_precise}] {bar:30} {pos}/{len} {wide_msg}",
                )
                .expect("valid template"),
            );
            bar.enable_steady_tick(Duration::from_millis(120));
            Progress { bar: Some(bar) }
        } else {
            Progress { bar: None }
        }
    }

    /// Plain lines only (tests, pipes).
    pub fn plain() -> Progress {
        Progress { bar: None }
    }

    /// A message that stays (printed above the bar, or as a line).
    pub fn line(&self, msg: &str) {
        match &self.bar {
            Some(bar) => bar.println(format!("harness: {msg}")),
            None => eprintln!("harness: {msg}"),
        }
    }

    /// A transient phase (`baseline build`, `M: testing`): the bar's message, or a line.
    pub fn phase(&self, msg: &str) {
        match &self.bar {
            Some(bar) => bar.set_message(msg.to_string()),
            None => eprintln!("harness: {msg}"),
        }
    }

    /// What is going on now, shown only as the bar's message (no line when there is no bar):
    /// for work whose lines are printed later, in order.
    pub fn live(&self, msg: &str) {
        if let Some(bar) = &self.bar {
            bar.set_message(msg.to_string());
        }
    }

    /// A phase that has already ended, logged in its place among the lines that stay: a
    /// line without a bar, nothing with one (its message showed what went on).
    pub fn past(&self, msg: &str) {
        if self.bar.is_none() {
            eprintln!("harness: {msg}");
        }
    }

    /// Sets the number of mutations to run.
    pub fn set_total(&self, n: usize) {
        if let Some(bar) = &self.bar {
            bar.set_length(n as u64);
        }
    }

    /// One mutation done.
    pub fn advance(&self) {
        if let Some(bar) = &self.bar {
            bar.inc(1);
        }
    }

    /// Removes the bar.
    pub fn finish(&self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}
