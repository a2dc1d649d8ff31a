//! Progress on standard error: an indicatif bar (current mutation and phase) on a terminal,
//! plain `harness: ...` lines otherwise.

use std::io::IsTerminal;
use std::time::Duration;

use indicatif::{MultiProgress, ProgressBar, ProgressStyle};

/// Reports what the battery is doing.
#[derive(Debug)]
pub struct Progress {
    bar: Option<ProgressBar>,
    /// Put before every message: `[name] ` for one of several batteries that run at once,
    /// empty otherwise.
    prefix: String,
}

impl Progress {
    /// A bar when standard error is a terminal, plain lines otherwise.
    pub fn auto() -> Progress {
        Progress {
            bar: std::io::stderr().is_terminal().then(|| bar("")),
            prefix: String::new(),
        }
    }

    /// The progress of battery `name`, one of several that run at once: its own bar in
    /// `multi` when standard error is a terminal, plain lines otherwise, every message
    /// starting with `[name] `.
    pub fn of_one_among(multi: &MultiProgress, name: &str) -> Progress {
        let prefix = format!("[{name}] ");
        Progress {
            bar: std::io::stderr()
                .is_terminal()
                .then(|| multi.add(bar(&prefix))),
            prefix,
        }
    }

    /// Plain lines only (tests, pipes).
    pub fn plain() -> Progress {
        Progress {
            bar: None,
            prefix: String::new(),
        }
    }

    /// A message that stays (printed above the bar, or as a line).
    pub fn line(&self, msg: &str) {
        match &self.bar {
            Some(bar) => bar.println(format!("harness: {}{msg}", self.prefix)),
            None => eprintln!("harness: {}{msg}", self.prefix),
        }
    }

    /// A transient phase (`baseline build`, `M: testing`): the bar's message, or a line.
    pub fn phase(&self, msg: &str) {
        match &self.bar {
            Some(bar) => bar.set_message(msg.to_string()),
            None => eprintln!("harness: {}{msg}", self.prefix),
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
            eprintln!("harness: {}{msg}", self.prefix);
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

/// A spinning bar (mutations done out of the total, the current phase), its line starting
/// with `prefix`.
fn bar(prefix: &str) -> ProgressBar {
    let bar = ProgressBar::new(0);
    bar.set_style(
        ProgressStyle::with_template(&format!(
            "{{spinner}} {prefix}[{{elapsed_precise}}] {{bar:30}} {{pos}}/{{len}} {{wide_msg}}"
        ))
        .expect("valid template"),
    );
    bar.enable_steady_tick(Duration::from_millis(120));
    bar
}
